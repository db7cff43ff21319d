"""Running the state's jobs off the event loop, latest request wins.

A job comes in two halves (see :class:`~explorer.ui.state.ExplorerState`): `prepare`
snapshots parameters on the event loop and returns a callable; that callable does
the work on a worker thread; `apply` publishes its outcome back on the event loop.
:class:`LatestOnly` keeps at most one job of a kind in flight per session and, when
requests arrive while one runs (a slider being dragged), runs once more with the
latest parameters when it finishes: requests coalesce, nothing queues up, and the
event loop (every session's) stays free.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

#: Worker threads for interactive jobs (loads, live statistics, the tour's graph),
#: shared by every session of the server process. NumPy, SciPy and CuPy release the
#: GIL in their kernels, so work in one session leaves the others responsive.
EXECUTOR = ThreadPoolExecutor(max_workers=4, thread_name_prefix="explorer-job")

#: Worker threads for clustering runs, apart from :data:`EXECUTOR`: runs take seconds,
#: and a burst of them in other sessions must never hold up a slider's statistics
#: (the load test found a 15 ms update waiting 34 s behind nine runs in one pool).
RUN_EXECUTOR = ThreadPoolExecutor(max_workers=4, thread_name_prefix="explorer-run")


class LatestOnly:
    """One job of a kind in flight at a time; requests made meanwhile coalesce.

    Parameters
    ----------
    prepare : callable () -> (callable () -> outcome)
        Called on the event loop; returns the work. May raise ValueError to refuse
        (e.g. no data yet): the request is dropped.
    apply : callable (outcome) -> object
        Called on the event loop with the work's outcome.
    executor : concurrent.futures.Executor, optional
        Where the work runs (default: :data:`EXECUTOR`).
    """

    def __init__(self, prepare: Callable, apply: Callable, executor=None):
        self._prepare = prepare
        self._apply = apply
        self._executor = executor or EXECUTOR
        self._running = False
        self._pending = False

    @property
    def running(self) -> bool:
        return self._running

    async def request(self) -> None:
        """Run the job now, or once more after the one in flight."""
        if self._running:
            self._pending = True
            return
        self._running = True
        loop = asyncio.get_running_loop()
        try:
            while True:
                self._pending = False
                try:
                    work = self._prepare()
                except ValueError:
                    return
                outcome = await loop.run_in_executor(self._executor, work)
                self._apply(outcome)
                if not self._pending:
                    return
        finally:
            self._running = False
