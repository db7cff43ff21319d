"""Running the state's jobs off the event loop: threads for the interactive ones,
worker processes for clustering runs.

Every stage of the state (:class:`~explorer.ui._stage.Stage`) snapshots its inputs
on the event loop, has its job's steps run by an *executor* from here, and publishes
the outcome back on the event loop if its inputs are still current (latest wins:
:meth:`~explorer.ui._stage.Stage.request`).

* Loads, statistics, the tour's graph and the views' colours take milliseconds to
  a second and run on the worker threads of :data:`EXECUTOR` (:func:`in_threads`):
  the event loop (every session's) stays free.
* Clustering runs take seconds and run in worker processes
  (:func:`run_in_process`), at a lower OS priority. In threads they held up every
  session of the server: the dense eigensolver (LAPACK through SciPy) keeps the GIL
  for its whole call, the solvers' and k-means' Python loops contend for it, and on
  two cores nine runs starved the event loop and the statistics threads of CPU time
  (docs/robustness.md, "Load", has the measurements).
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import sys
import threading
import time
import weakref
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool

from ._errors import describe_error, log
from ._stage import Job, Outcome, execute_step

#: Worker threads for interactive jobs (loads, live statistics, the tour's graph),
#: shared by every session of the server process. NumPy, SciPy and CuPy release the
#: GIL in their kernels, so work in one session leaves the others responsive.
EXECUTOR = ThreadPoolExecutor(max_workers=4, thread_name_prefix="explorer-job")

#: Most clustering runs in flight at once, each in its own worker process, shared by
#: every session of the server process (``EXPLORER_RUN_WORKERS`` overrides it). Runs
#: beyond it wait for a worker; up to it, no session's run waits on another's.
#: Workers start on demand (see :func:`_worker_context`) and stay for the next runs,
#: each holding about 25 MB of its own beside what it shares with the fork server
#: (and, on a GPU, its own CUDA context).
RUN_WORKERS = int(os.environ.get("EXPLORER_RUN_WORKERS", "16"))

#: How much lower than the server's the run workers' CPU priority is (``os.nice``):
#: on a busy machine the event loop and the statistics come first, and the runs get
#: the remaining CPU time.
RUN_NICENESS = 10

#: Environment variables that give a run worker's BLAS and OpenMP one thread. Runs in
#: parallel are the parallelism: with each worker's OpenBLAS starting a thread per
#: core, ten concurrent dense eigensolves (n = 1,000) took 26-33 s each on 2 cores
#: instead of 0.65 s (twenty BLAS threads on two cores).
_ONE_THREAD = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")

_pool: ProcessPoolExecutor | None = None
_pool_lock = threading.Lock()

#: Threads that wait for the runs' processes and relay their progress, one per run.
_RUN_WAITERS = ThreadPoolExecutor(max_workers=RUN_WORKERS, thread_name_prefix="explorer-run")


def _run_pool() -> ProcessPoolExecutor:
    """The run workers' pool, created on first use (and again after one broke)."""
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ProcessPoolExecutor(max_workers=RUN_WORKERS, mp_context=_worker_context(),
                                        initializer=_start_worker)
        return _pool


def _worker_context():
    """How run workers start: from a fork server where there is one, else spawned.

    Never by forking the server: a fork would inherit its threads mid-flight (locks
    held by them stay held) and any CUDA context, which CUDA cannot use after a
    fork. A spawned worker starts clean but imports NumPy, SciPy, scikit-learn and
    the library first: 2 s of CPU each, and ten at once took 10-40 s on 2 cores.
    The fork server is itself spawned, imports those modules once and never touches
    the GPU (importing the pipeline does not import CuPy), so each worker forked
    from it starts at once, as clean, and initialises CUDA itself.
    """
    if "forkserver" not in multiprocessing.get_all_start_methods():  # Windows
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    # What a run imports; "__main__" as multiprocessing's default preload: a main
    # script (the `panel` command) is imported once there rather than in every worker.
    context.set_forkserver_preload(
        ["__main__", "explorer.ui._jobs", "explorer.ui._run", "explorer.graph", "explorer.kmeans"]
    )
    return context


def _start_worker() -> None:
    """Run worker initializer: lower priority, one BLAS/OpenMP thread.

    The environment variables serve the libraries a worker loads from now on;
    threadpoolctl limits those already loaded (by the fork server, or by a main
    module that imported NumPy).
    """
    if hasattr(os, "nice"):
        os.nice(RUN_NICENESS)
    os.environ.update(dict.fromkeys(_ONE_THREAD, "1"))
    from threadpoolctl import threadpool_limits

    threadpool_limits(1)


def _in_worker(fn: Callable, arg, progress) -> object:
    """Worker-process side of :func:`run_in_process`: `fn(arg, report)`, where
    report sends its arguments back through the pipe `progress`."""
    try:
        return fn(arg, lambda *message: progress.send(message))
    finally:
        progress.close()
        # A worker outlives its run, and CuPy keeps freed device memory in its pool:
        # give it back, so that the next run, in whichever worker, can have it.
        cupy = sys.modules.get("cupy")
        if cupy is not None:
            cupy.get_default_memory_pool().free_all_blocks()


def _await_worker(fn: Callable, arg, on_progress: Callable) -> object:
    """Waiter-thread side of :func:`run_in_process`: submit, relay progress, return."""
    pool = _run_pool()
    receive, send = multiprocessing.Pipe(duplex=False)
    try:
        try:
            future = pool.submit(_in_worker, fn, arg, send)
        except BrokenProcessPool:
            _discard(pool)  # a worker died since the last run: start afresh
            future = _run_pool().submit(_in_worker, fn, arg, send)
        while not future.done():
            if receive.poll(0.1):
                on_progress(*receive.recv())
        while receive.poll():  # what the worker sent just before it returned
            on_progress(*receive.recv())
        try:
            return future.result()
        except BrokenProcessPool:
            _discard(pool)
            raise
    finally:
        receive.close()
        send.close()


def _discard(pool: ProcessPoolExecutor) -> None:
    """Forget a broken pool (its workers are gone), so that the next run starts a new one."""
    global _pool
    with _pool_lock:
        if _pool is pool:
            _pool = None
    pool.shutdown(wait=False)


async def run_in_process(fn: Callable, arg, on_progress: Callable) -> object:
    """``fn(arg, report)`` in a run worker process; its ``report(*message)`` calls
    become ``on_progress(*message)`` calls here, in order, before this returns.

    Parameters
    ----------
    fn : callable (arg, report) -> result
        A module-level function (it is pickled by name), e.g.
        :func:`explorer.ui._run.execute`.
    arg
        Its argument, pickled to the worker (e.g. a :class:`~explorer.ui._run.RunSpec`).
    on_progress : callable
        Called on a waiter thread of this process with what `fn` reports.

    Returns
    -------
    object
        What `fn` returned, unpickled here.

    Raises
    ------
    concurrent.futures.process.BrokenProcessPool
        If the worker died (killed, e.g. for lack of memory); the next run starts
        new workers.
    Exception
        What `fn` raised, or what failed to pickle.
    """
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(_RUN_WAITERS, _await_worker, fn, arg, on_progress)


_publish_locks: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


@contextlib.asynccontextmanager
async def publishing():
    """Take turns with the other sessions to publish a run's result on the event loop.

    Publishing a run redraws its views on the event loop that every session of the
    server shares: 0.4 s on an idle core, 0.5-4 s on 2 busy ones (8 s seen at a load
    average of 20), most of it HoloViews building the clusters plot. Runs that finish
    together published back to back and kept the loop for seconds; a slider's
    statistics, which need a few passes of the loop (the websocket message, the job,
    the reply), waited for all of them.
    So publications on a loop go one at a time, and after each the loop is left to
    everything else for as long as the publication held it: publications take at
    most half of the loop's time, and others' statistics wait for one of them at most.

    The stages whose publications draw a run publish in it
    (:class:`~explorer.ui.state.ExplorerState` sets it as their ``publishing``): the
    run's, and above all the views stage's, whose result is what the views draw.
    Never the statistics': the lock is first come, first served, so they would queue
    behind every run.
    """
    loop = asyncio.get_running_loop()
    lock = _publish_locks.get(loop)
    if lock is None:
        lock = _publish_locks[loop] = asyncio.Lock()
    async with lock:
        start = time.perf_counter()
        yield
        await asyncio.sleep(time.perf_counter() - start)


async def in_threads(job: Job, index: int, report: Callable) -> Outcome:
    """A stage executor (:class:`~explorer.ui._stage.Stage`): the step on a thread of
    :data:`EXECUTOR`."""
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(EXECUTOR, job.run_step, index, report)


async def in_process(job: Job, index: int, report: Callable) -> Outcome:
    """A stage executor: the step in a run worker process (:func:`run_in_process`);
    the step must pickle (a :class:`~explorer.ui._run.RunSpec` does)."""
    try:
        return await run_in_process(execute_step, (job.steps[index], job.doing), report)
    except BrokenProcessPool:
        log.error("a run's worker process ended abruptly")
        return Outcome(error=(
            "The run's worker process ended abruptly: the system stops a process that "
            "takes too much memory. Lower the threshold (fewer edges per row) or subsample "
            "the data; the next run starts a new worker."))
    except Exception as exc:  # e.g. data that does not pickle
        return Outcome(error=describe_error(exc, job.doing))
