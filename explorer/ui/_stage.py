"""One mechanism for every stage of the app: a result for recorded inputs, a stale
flag, and latest-wins jobs.

The app's state is a pipeline of stages (data -> graph statistics -> run -> views,
and the tour's graph). Each is a :class:`Stage`: a :class:`param.Parameterized`
whose inputs are some of its parameters (and, for the run, those of another stage)
plus the *results* of the stages upstream. A stage publishes a result together with
the :class:`Inputs` it was computed for; it is **stale** while those differ from the
inputs now, and a result is only ever published for the inputs of the moment (a job
that finishes after its inputs moved on is dropped). Views draw one stage's result
and the arrays inside it, never another's, so a view cannot index an array of
another generation: the pairing is by construction, not by bookkeeping.

Jobs (:class:`Job`) are computed in steps: the statistics publish the nonzeros per
row first, then the connected components. :meth:`Stage.request` runs the job of the
current inputs off the event loop and coalesces the requests made meanwhile (a
dragged slider): when a step finishes with inputs that have moved on, the rest is
dropped and the job of the latest inputs starts. :meth:`Stage.compute` does the same
synchronously (tests, scripts, notebooks).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import param

from ._errors import describe_error


class Waiting(ValueError):
    """A stage cannot compute yet; the message says what it waits for."""


class Failed(Exception):
    """A step's failure, already worded for the user: shown as it is."""


@dataclass(frozen=True, eq=False)
class Inputs:
    """What a result was (or would be) computed from.

    Attributes
    ----------
    upstream : tuple
        The upstream stages' results, compared by identity (a new load is new data,
        even with equal values).
    params : dict
        Parameter values, compared by value.
    """

    upstream: tuple = ()
    params: dict = field(default_factory=dict)

    def __eq__(self, other) -> bool:
        return (isinstance(other, Inputs) and len(self.upstream) == len(other.upstream)
                and all(a is b for a, b in zip(self.upstream, other.upstream, strict=True))
                and self.params == other.params)

    __hash__ = None

    def __getitem__(self, name: str):
        return self.params[name]

    def changed(self, other: Inputs | None) -> list[str]:
        """Names of the parameters whose values differ in `other` (all when None)."""
        if other is None:
            return list(self.params)
        return [k for k in self.params if other.params.get(k, object()) != self.params[k]]


@dataclass
class Outcome:
    """What one step of a job gave: a value or a message, and its seconds."""

    value: object = None
    error: str = ""
    seconds: float = 0.0


@dataclass
class Job:
    """The work for one snapshot of a stage's inputs.

    Attributes
    ----------
    inputs : Inputs
    steps : sequence of callables (report) -> value
        Run in order; each value is published as the result so far. `report(text)`
        shows what the step is doing. A step may raise: :class:`Failed` is shown as
        it is, anything else through :func:`~explorer.ui._errors.describe_error`.
    doing : str
        What the job does, in the gerund, for error messages.
    """

    inputs: Inputs
    steps: Sequence[Callable]
    doing: str = "computing"

    def run_step(self, index: int, report: Callable = lambda *a: None) -> Outcome:
        """Step `index`, here; every exception becomes the outcome's message."""
        return execute_step((self.steps[index], self.doing), report)


def execute_step(step_and_doing: tuple, report: Callable) -> Outcome:
    """Run one step, ``(step, doing)``, in this process or thread: its value, or the
    message for what it raised. Module-level, so that a worker process can run it."""
    step, doing = step_and_doing
    t0 = time.perf_counter()
    try:
        value = step(report)
    except Failed as exc:
        return Outcome(error=str(exc), seconds=time.perf_counter() - t0)
    except Exception as exc:
        return Outcome(error=describe_error(exc, doing), seconds=time.perf_counter() - t0)
    return Outcome(value=value, seconds=time.perf_counter() - t0)


async def in_executor(job: Job, index: int, report: Callable) -> Outcome:
    """Where a stage's steps run unless told otherwise: the event loop's default
    executor. An executor is a coroutine (job, index, report) -> Outcome; the app
    gives each stage its own (:mod:`explorer.ui._jobs`: threads, worker processes)."""
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(None, job.run_step, index, report)


class Stage(param.Parameterized):
    """A stage of the pipeline: its result, the inputs it is for, and whether it is stale.

    Subclasses declare their parameters, list the names that are inputs in
    ``input_names`` (or override :meth:`parameters`), name the stages upstream
    (:meth:`upstream`) and say how to compute (:meth:`steps`). A result is published
    with :meth:`publish` only; everything else reads it.
    """

    result = param.Parameter(default=None, doc="The last result published.")
    inputs = param.Parameter(default=None, doc="The Inputs `result` was computed for.")
    error = param.String(default="", doc="Why the job of the current inputs failed.")
    stale = param.Boolean(default=True, doc="`result` is not for the current inputs.")
    busy = param.Boolean(default=False, doc="A job is asked for or in flight.")
    waiting = param.String(default="", doc="What the stage waits for ('' when it can compute).")
    progress = param.String(default="", doc="What the job in flight is doing.")
    seconds = param.Number(default=None, allow_None=True, doc="Seconds the last job took.")

    #: The names of this stage's own parameters that are inputs.
    input_names: tuple = ()
    #: What the stage's jobs do, for messages ("loading the data").
    doing = "computing"
    #: Compute whenever the inputs change (False: only when asked, as the run).
    automatic = True

    def __init__(self, **params):
        super().__init__(**params)
        self._failed_for: Inputs | None = None  # inputs whose job failed (not retried)
        self._again = False  # a request arrived while a job ran
        self._running = False
        self.executor: Callable = in_executor
        #: An async context manager every publication of :meth:`request` is made in.
        self.publishing: Callable = contextlib.nullcontext
        #: Called (no arguments) after every change of the inputs: the app schedules
        #: :meth:`request` there (None: nothing happens, compute by hand).
        self.on_change: Callable | None = None
        if self.input_names:
            self.param.watch(self.refresh, list(self.input_names))

    # -- what subclasses provide -------------------------------------------------------
    def upstream(self) -> tuple:
        """The stages whose results are inputs, as (what they are, stage) pairs."""
        return ()

    def parameters(self) -> dict:
        """The parameter values that are inputs."""
        return {name: getattr(self, name) for name in self.input_names}

    def steps(self, inputs: Inputs) -> list:
        """The job's steps for `inputs` (see :class:`Job`)."""
        raise NotImplementedError

    # -- inputs and staleness ----------------------------------------------------------
    def snapshot(self) -> Inputs:
        """The current inputs.

        Raises
        ------
        Waiting
            An upstream stage has no result yet.
        ValueError
            Parameters that make no valid input (the message says which).
        """
        results = []
        for what, stage in self.upstream():
            if stage.result is None:
                raise Waiting(f"waiting for {what}")
            results.append(stage.result)
        return Inputs(tuple(results), self.parameters())

    def inputs_now(self) -> Inputs | None:
        """:meth:`snapshot`, or None when the stage waits or its parameters are invalid."""
        try:
            return self.snapshot()
        except (Waiting, ValueError):
            return None

    def refresh(self, *events) -> None:
        """Re-derive `stale` and `waiting` from the inputs now (watchers call it)."""
        try:
            now, waiting = self.snapshot(), ""
        except Waiting as exc:
            now, waiting = None, str(exc)
        except ValueError:
            now, waiting = None, ""
        self.param.update(stale=self.result is None or now is None or self.inputs != now,
                          waiting=waiting)
        if self.on_change is not None:
            self.on_change()

    def follow(self, *stages: Stage) -> None:
        """Refresh whenever one of `stages` publishes (call once per upstream stage)."""
        for stage in stages:
            stage.param.watch(self.refresh, "result")

    @property
    def wanted(self) -> bool:
        """True when a job should run: the inputs are valid, the result is not for
        them, and they have not failed already."""
        now = self.inputs_now()
        return now is not None and now != self.inputs and now != self._failed_for

    # -- jobs --------------------------------------------------------------------------
    def prepare(self) -> Job:
        """The job of the current inputs (raises as :meth:`snapshot`)."""
        inputs = self.snapshot()
        return Job(inputs, self.steps(inputs), self.doing)

    def accept(self, job: Job, outcome: Outcome, final: bool = True) -> bool:
        """Publish a step's outcome if the job's inputs are still the current ones.

        Returns
        -------
        bool
            True when published (a value or its error); False when the inputs moved
            on (the outcome is dropped).
        """
        if self.automatic and self.inputs_now() != job.inputs:
            return False
        if outcome.error:
            self._failed_for = job.inputs
            self.param.update(error=outcome.error, seconds=outcome.seconds)
            self.refresh()
            return True
        self._failed_for = None
        self.publish(job.inputs, outcome.value, outcome.seconds, final)
        return True

    def publish(self, inputs: Inputs, value, seconds: float = 0.0, final: bool = True) -> None:
        """Make `value` the result for `inputs` (one batch of events)."""
        now = self.inputs_now()
        self.param.update(result=value, inputs=inputs, error="", seconds=seconds,
                          stale=now is None or now != inputs)

    #: What a second request says while a job of a stage that is not automatic runs.
    busy_message = "a job is already in progress; wait for it to finish"

    def begin(self) -> Job:
        """Claim the stage and return the job of the current inputs.

        Raises
        ------
        RuntimeError
            While a job of this stage is in flight.
        Waiting, ValueError
            As :meth:`snapshot`.
        """
        if self._running:
            raise RuntimeError(self.busy_message)
        job = self.prepare()
        self._running = True
        self.param.update(busy=True, error="")
        return job

    def end(self) -> None:
        """Release the stage after :meth:`begin`."""
        self._running = False
        self.param.update(busy=False, progress="")

    def compute(self) -> bool:
        """Run the job of the current inputs here and publish each step.

        Returns
        -------
        bool
            True when every step's value was published, False on an error (shown in
            `error`).
        """
        job = self.begin()
        try:
            for index in range(len(job.steps)):
                outcome = job.run_step(index, self._report)
                self.accept(job, outcome, final=index == len(job.steps) - 1)
                if outcome.error:
                    return False
            return True
        finally:
            self.end()

    def _report(self, text, *rest) -> None:
        self.progress = str(text)

    def claim(self) -> bool:
        """Mark a job as asked for (synchronously, before it is scheduled), so that
        :attr:`busy` is True from the request on. False when nothing is wanted."""
        if self._running:
            self._again = True
            return False
        if not self.wanted:
            return False
        self.busy = True
        return True

    async def request(self) -> None:
        """Compute the current inputs off the event loop, latest wins.

        While a job runs, further requests only note that one more pass is needed;
        after each step an automatic stage's job goes on only if its inputs are still
        current, and when it ends the latest inputs are computed if they are not yet.
        A stage that is not automatic (the run) computes once per request and
        publishes its result even when the inputs moved on meanwhile (it is then
        stale).

        Raises
        ------
        Waiting, ValueError
            For a stage that is not automatic, when its inputs are not valid (the
            caller shows why); automatic stages just wait.
        """
        if self._running:
            if not self.automatic:
                raise RuntimeError(self.busy_message)
            self._again = True
            return
        self._running = True
        loop = asyncio.get_running_loop()

        # Progress from a worker thread is shown on the event loop, in this coroutine's
        # context (Panel's session document is a context variable).
        context = contextvars.copy_context()

        def report(*message):
            loop.call_soon_threadsafe(self._report, *message, context=context)

        try:
            while True:
                self._again = False
                if self.automatic and not self.wanted:
                    break
                job = self.prepare()
                self.param.update(busy=True, error="")
                for index in range(len(job.steps)):
                    outcome = await self.executor(job, index, report)
                    last = index == len(job.steps) - 1
                    async with self.publishing():
                        accepted = self.accept(job, outcome, final=last)
                    if not accepted or outcome.error:
                        break
                if not self.automatic or (not self._again and not self.wanted):
                    break
        finally:
            self.end()
