"""The explorer's state and logic, with no Panel or HoloViews import.

:class:`ExplorerState` composes the parts a session has: the data
(:class:`DataState`), the graph parameters and their live statistics
(:class:`GraphState`), the clustering run (:class:`RunState`) and the guided tour
(:class:`TeachingState`). It is what the Panel views render and what the tests drive
without a browser::

    state = ExplorerState()
    state.load()                      # the default data set
    state.graph.threshold_sqdist = 1e-3
    state.refresh_stats()             # explorer.graph_stats -> state.graph.stats
    state.run()                       # build_graph -> embedding -> k-means -> scores
    state.run_state.result.scores

Each job (load, statistics, run) also comes in two halves, ``prepare_*`` (snapshot
the parameters, on the event loop) and ``apply_*`` (publish the outcome, on the
event loop), so that the app can run the work elsewhere: loads and statistics on a
worker thread, runs in a worker process (the run's job carries a picklable
:class:`RunSpec`).
"""

from __future__ import annotations

import param

from explorer.graph import EdgeRule

from ._data import DataState, LoadOutcome, project_2d
from ._graph import GraphState, StatsOutcome
from ._run import STAGES, RunJob, RunOutcome, RunResult, RunSpec, RunState
from ._teaching import STEPS, TeachingState

__all__ = [
    "STAGES",
    "STEPS",
    "DataState",
    "ExplorerState",
    "GraphState",
    "LoadOutcome",
    "RunJob",
    "RunOutcome",
    "RunResult",
    "RunSpec",
    "RunState",
    "StatsOutcome",
    "TeachingState",
    "project_2d",
]


class ExplorerState(param.Parameterized):
    """One session of the explorer: data -> graph parameters -> run -> views."""

    data = param.ClassSelector(class_=DataState, instantiate=False)
    graph = param.ClassSelector(class_=GraphState, instantiate=False)
    run_state = param.ClassSelector(class_=RunState, instantiate=False)
    teaching = param.ClassSelector(class_=TeachingState, instantiate=False)

    def __init__(self, **params):
        params.setdefault("data", DataState())
        params.setdefault("graph", GraphState())
        params.setdefault("run_state", RunState())
        params.setdefault("teaching", TeachingState())
        super().__init__(**params)
        self.data.param.watch(self._new_data, "current")

    def _new_data(self, event) -> None:
        """New data: adopt its suggested parameters; the last result no longer applies."""
        ds = event.new
        if ds is None:
            return
        # The rule the CLI takes too: the data set's suggestion, through EdgeRule.suggest.
        self.graph.adopt(EdgeRule.suggest(ds.X, suggestion=ds.suggested))
        k = ds.suggested.get("n_clusters", "auto")
        with param.parameterized.batch_call_watchers(self.run_state):
            if k == "auto":
                self.run_state.auto_k = True
            else:
                self.run_state.auto_k = False
                top = self.run_state.param.n_clusters.bounds[1]
                self.run_state.n_clusters = int(min(max(k, 1), top))
        self.run_state.clear()

    @property
    def dataset(self):
        """The loaded explorer.data.Dataset, or None before the first load."""
        return self.data.current

    def _require_data(self):
        if self.data.current is None:
            raise ValueError("no data loaded yet; load a data set or upload a file first")
        return self.data.current

    # -- load --------------------------------------------------------------------
    def prepare_load(self):
        return self.data.prepare_load()

    def apply_load(self, outcome: LoadOutcome) -> bool:
        return self.data.apply_load(outcome)

    def load(self) -> bool:
        """Load the data the settings describe; True when new data was published."""
        return self.apply_load(self.prepare_load()())

    # -- statistics ------------------------------------------------------------------
    def prepare_stats(self, components: bool = False):
        """The job computing the statistics of the current parameters (see
        :meth:`GraphState.prepare_stats`).

        Raises
        ------
        ValueError
            Before any data is loaded; for ``components=True`` when there is nothing
            to add.
        """
        return self.graph.prepare_stats(self._require_data().X, components=components)

    def prepare_components(self):
        """The job completing the statistics with the connected components."""
        return self.prepare_stats(components=True)

    def apply_stats(self, outcome: StatsOutcome) -> bool:
        return self.graph.apply_stats(outcome, self._require_data().X)

    def refresh_stats(self) -> bool:
        """Compute and publish the complete statistics synchronously."""
        return self.graph.refresh_stats(self._require_data().X)

    # -- run ---------------------------------------------------------------------
    def prepare_run(self) -> RunJob:
        """Claim the run slot; the job runs the pipeline on the current data and
        graph parameters (call it, or hand its ``spec`` to a worker process).

        Raises
        ------
        ValueError
            Before any data is loaded, or for graph parameters that make no edge rule
            (a gaussian similarity threshold <= 0).
        RuntimeError
            While another run is in flight.
        """
        return self.run_state.prepare(self._require_data(), self.graph.build_kwargs())

    def apply_run(self, outcome: RunOutcome) -> None:
        self.run_state.finish(outcome)

    def run(self) -> RunOutcome:
        """Run synchronously and publish the outcome."""
        outcome = self.prepare_run()()
        self.apply_run(outcome)
        return outcome

    @property
    def result(self) -> RunResult | None:
        return self.run_state.result
