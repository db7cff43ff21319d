"""The explorer's state, with no Panel or HoloViews import.

The state is a pipeline of stages, each a :class:`~explorer.ui._stage.Stage` (a
``param.Parameterized`` holding a result, the inputs it was computed for, and
whether it is stale)::

    data  ->  graph statistics  ->  run  ->  views
      \\________________________-> tour graph

* :class:`DataState`: the data set settings; result: a :class:`LoadResult`.
* :class:`GraphState`: the edge rule and builder parameters; result: the live
  :class:`explorer.GraphStats`.
* :class:`RunState`: the clustering settings; result: a :class:`RunResult` (which
  carries the LoadResult it clustered). Computes when asked (the Run button).
* :class:`ViewState`: the run's labels renamed so that spectral, k-means and ground
  truth share one colour per cluster (:func:`explorer.metrics.match_labels`).
* :class:`TourState`: the graph the guided tour's second step draws.

Views draw a stage's result and what it carries, never arrays of two stages side
by side, so a view cannot index an array of another generation. The tests drive it
without a browser::

    state = ExplorerState()
    state.load()                      # the default data set
    state.graph.threshold_sqdist = 1e-3
    state.refresh_stats()             # explorer.graph_stats -> state.graph.stats
    state.run()                       # SpectralClustering -> k-means -> scores
    state.result.scores
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import param

from explorer.metrics import RunComparison, compare_runs, match_labels

from . import _jobs
from ._data import DataState, LoadResult, project_2d
from ._graph import GraphState
from ._run import STAGES, RunResult, RunSpec, RunState
from ._stage import Inputs, Job, Outcome, Stage, Waiting
from ._teaching import STEPS, TeachingState

__all__ = [
    "STAGES",
    "STEPS",
    "DataState",
    "ExplorerState",
    "GraphState",
    "Inputs",
    "Job",
    "LoadResult",
    "Outcome",
    "Presentation",
    "RunResult",
    "RunSpec",
    "RunState",
    "Stage",
    "TeachingState",
    "TourResult",
    "TourState",
    "ViewState",
    "Waiting",
    "anchors_drawn",
    "project_2d",
]


@dataclass(eq=False)
class Presentation:
    """A run as the views draw it: its labels renamed for one colour per cluster.

    Attributes
    ----------
    run : RunResult
    labels : ndarray of int64
        The spectral clusters, renamed after the ground truth when there is one
        (label −1 kept).
    kmeans_labels : ndarray of int64 or None
        k-means on the raw data, renamed after `labels`.
    truth : ndarray or None
        The ground truth, as it is (its ids are the colours before any run).
    anchor_xy : ndarray, shape (m, 2), or None
        The run's representatives or landmarks in the drawing of its data (the same
        projection as the points; None in exact mode).
    anchor_labels : ndarray of int64 or None
        The representatives' clusters, renamed as `labels` (None for landmarks).
    """

    run: RunResult
    labels: np.ndarray
    kmeans_labels: np.ndarray | None
    truth: np.ndarray | None
    anchor_xy: np.ndarray | None = None
    anchor_labels: np.ndarray | None = None

    @property
    def data(self) -> LoadResult:
        """The data the run clustered."""
        return self.run.data


class ViewState(Stage):
    """The views' stage: a :class:`Presentation` of the run's result."""

    doing = "preparing the views"

    def __init__(self, run: RunState, **params):
        super().__init__(**params)
        self.run = run
        self.follow(run)

    def upstream(self) -> tuple:
        return (("a run", self.run),)

    def steps(self, inputs: Inputs) -> list:
        run = inputs.upstream[0]
        return [lambda report: present(run)]


def present(run: RunResult) -> Presentation:
    """Rename the run's clusters: spectral after the ground truth, k-means after the
    spectral clusters (:func:`explorer.metrics.match_labels`)."""
    truth = None if run.y_true is None else np.asarray(run.y_true)
    labels = run.labels if truth is None else match_labels(run.labels, truth)
    kmeans = None if run.kmeans_labels is None else match_labels(run.kmeans_labels, labels)
    anchor_xy = anchor_labels = None
    if run.anchors is not None:
        anchor_xy = anchors_drawn(run)
        if run.anchor_labels is not None:
            anchor_labels = _renamed(run.anchor_labels, run.labels, labels)
    return Presentation(run=run, labels=labels, kmeans_labels=kmeans, truth=truth,
                        anchor_xy=anchor_xy, anchor_labels=anchor_labels)


def anchors_drawn(run: RunResult) -> np.ndarray:
    """The (m, 2) drawing coordinates of the run's representatives or landmarks.

    They lie in the space the fit saw, the data stage's `X` (scaled by the same
    :func:`explorer.preprocessing.fit_scaler` when a scaling is chosen: the estimator
    scales in every mode), so the data's own projection draws them.
    """
    return run.data.projection(run.anchors)


def _renamed(ids, before, after) -> np.ndarray:
    """`ids` (cluster ids of `before`) renamed as `before` was renamed to `after`;
    an id no point carries becomes −1."""
    ids = np.asarray(ids, dtype=np.int64)
    pairs = np.unique(np.column_stack([before, after]), axis=0)
    table = dict(zip(pairs[:, 0].tolist(), pairs[:, 1].tolist(), strict=True))
    return np.array([table.get(int(i), -1) for i in ids], dtype=np.int64)


@dataclass(eq=False)
class TourResult:
    """The graph the tour's second step draws and the data it is a graph of.

    Attributes
    ----------
    csr : scipy.sparse.csr_matrix or None
    note : str
        Which graph it is, or why there is none.
    data : LoadResult
    """

    csr: object
    note: str
    data: LoadResult


class TourState(Stage):
    """The tour's graph stage: computes only while the tour shows its graph step."""

    doing = "building the tour's graph"

    def __init__(self, data: DataState, graph: GraphState, run: RunState,
                 teaching: TeachingState, **params):
        super().__init__(**params)
        self.data, self.graph, self.run, self.teaching = data, graph, run, teaching
        self.follow(data, run)
        run.param.watch(self.refresh, "stale")
        graph.param.watch(self.refresh, list(graph.input_names))
        teaching.param.watch(self.refresh, "step")

    def upstream(self) -> tuple:
        return (("the data", self.data),)

    def parameters(self) -> dict:
        if self.teaching.current.key != "graph":
            raise Waiting("waiting for the tour's graph step")
        return {**self.graph.edge_kwargs(), "run": self._run_csr()}

    def _run_csr(self):
        """The last run's graph when it is of the current data and parameters."""
        r = self.run
        if r.result is None or r.stale or r.result.data is not self.data.result:
            return None
        if r.result.csr is None or r.result.csr.shape[0] != r.result.n:
            return None  # no graph of the points (landmarks), or one of representatives
        return r.result.csr

    def snapshot(self) -> Inputs:
        inputs = super().snapshot()
        # The run's graph compared by identity, as results are.
        run = inputs.params.pop("run")
        return Inputs((*inputs.upstream, run), inputs.params)

    def steps(self, inputs: Inputs) -> list:
        data, run_csr = inputs.upstream
        kwargs = dict(inputs.params)
        make = self.teaching.prepare_graph(data.X, kwargs, run_csr)

        def step(report):
            built = make()
            return TourResult(csr=built.csr, note=built.note, data=data)

        return [step]


class ExplorerState(param.Parameterized):
    """One session of the explorer: the stages data -> graph -> run -> views, and the tour.

    New data adopts the library's choice of graph (the plan of a default
    :class:`explorer.SpectralClustering` fit) and k; the last run stays, stale.
    """

    data = param.ClassSelector(class_=DataState, instantiate=False)
    graph = param.ClassSelector(class_=GraphState, instantiate=False)
    run_state = param.ClassSelector(class_=RunState, instantiate=False)
    views = param.ClassSelector(class_=ViewState, instantiate=False)
    teaching = param.ClassSelector(class_=TeachingState, instantiate=False)
    tour = param.ClassSelector(class_=TourState, instantiate=False)
    pinned = param.Parameter(default=None, doc="The pinned run (A, a RunResult) that "
                             ":meth:`compare` sets the last run (B) beside; None before "
                             ":meth:`pin`.")

    def __init__(self, **params):
        data = params.setdefault("data", DataState())
        graph = params.setdefault("graph", GraphState(data=data))
        run = params.setdefault("run_state", RunState(data=data, graph=graph))
        params.setdefault("views", ViewState(run))
        teaching = params.setdefault("teaching", TeachingState())
        params.setdefault("tour", TourState(data, graph, run, teaching))
        super().__init__(**params)
        self.data.param.watch(self._new_data, "result")
        self.graph.param.watch(self._open_graph, ["backend", "metric"])
        self.run_state.param.watch(self._open_graph, ["mode", "n_representatives",
                                                      "random_state", "n_clusters", "auto_k"])
        for stage in self.stages:
            stage.executor = _jobs.in_threads
        self.run_state.executor = _jobs.in_process
        # The views draw a run when the views stage publishes it: that publication holds
        # the event loop for seconds, so it takes turns with other sessions' as the run's.
        for stage in (self.run_state, self.views):
            stage.publishing = _jobs.publishing

    @property
    def stages(self) -> tuple:
        """Every stage, upstream first."""
        return (self.data, self.graph, self.run_state, self.views, self.tour)

    def _open_graph(self, *events) -> None:
        """Point the statistics at what a run's graph joins: the points, or in
        representatives mode (the mode given, or ``mode="auto"``'s choice for these data)
        the representatives of the library's plan."""
        load = self.data.result
        if load is None:
            return
        run = self.run_state
        pipeline = run.pipeline(load.n, load.dataset.d, mode=run.mode,
                                metric=self.graph.metric,
                                n_representatives=run.n_representatives)
        self.graph.representatives = None if pipeline != "representatives" else {
            "n_representatives": run.n_representatives or "auto",
            "random_state": run.random_state,
            "n_clusters": "auto" if run.auto_k else run.n_clusters}

    def _new_data(self, event) -> None:
        """New data: adopt the library's choice of graph for them (its plan) and k."""
        ds = None if event.new is None else event.new.dataset
        if ds is None:
            return
        # Chosen for the points as the graph sees them (scaled, when chosen), in the
        # data job: nothing is searched here, on the event loop.
        self.use_library_choice()
        self._open_graph()
        k = "auto" if ds.y is None else ds.n_classes
        with param.parameterized.batch_call_watchers(self.run_state):
            if k == "auto":
                self.run_state.auto_k = True
            else:
                self.run_state.auto_k = False
                top = self.run_state.param.n_clusters.bounds[1]
                self.run_state.n_clusters = int(min(max(k, 1), top))

    def use_library_choice(self) -> None:
        """Set the sidebar's graph to the library's choice for the data loaded (what a
        default :class:`explorer.SpectralClustering` fit would build, from its plan),
        with the σ and threshold sliders centred on its ε-graph rule."""
        load = self.data.result
        if load is None or load.rule is None:
            return
        self.graph.adopt(load.rule, load.epsilon_rule)
        why = dict(load.plan_lines).get("graph kind", "")
        self.graph.graph_note = f"The library's choice — {why}" if why else ""

    @property
    def dataset(self):
        """The loaded explorer.data.Dataset, or None before the first load."""
        return self.data.current

    @property
    def result(self) -> RunResult | None:
        """The last run's result (stale or not), or None."""
        return self.run_state.result

    # -- two runs side by side ------------------------------------------------------------
    def pin(self) -> RunResult:
        """Pin the last run as run A: :meth:`compare` sets every later run (B) beside it.

        Returns
        -------
        RunResult
            The run pinned.

        Raises
        ------
        ValueError
            Before any run.
        """
        if self.result is None:
            raise ValueError("pin: there is no run to pin yet; press Run (state.run() in "
                             "code) first")
        self.pinned = self.result
        return self.pinned

    def compare(self) -> RunComparison:
        """The pinned run (A) and the last run (B) compared by the library
        (:func:`explorer.metrics.compare_runs`): ARI between them and each against the
        truth, the points that changed cluster, the parameters and plan lines that
        differ. A's clusters are named after the truth as the views name them, B's
        after A's, so that one cluster has one colour in both.

        Raises
        ------
        ValueError
            With nothing pinned, when the last run is the pinned one, or when the two
            runs clustered different data; the message says which.
        """
        a, b = self.pinned, self.result
        if a is None:
            raise ValueError("compare: no run is pinned; pin a run (A) first, then change a "
                             "parameter and run again (B)")
        if b is a:
            raise ValueError("compare: the last run is the pinned run A; change a parameter "
                             "(σ, the threshold, the graph kind, the mode) and press Run for B")
        xa, xb = a.data.dataset.X, b.data.dataset.X
        if xa.shape != xb.shape or not np.array_equal(xa, xb):
            raise ValueError(f"compare: run A clustered {a.data.describe()} and run B "
                             f"{b.data.describe()}; two runs compare only on the same data: "
                             "pin a run of these data")
        truth = None if b.y_true is None else np.asarray(b.y_true)
        labels_a = a.labels if truth is None else match_labels(a.labels, truth)
        return compare_runs(labels_a, b.labels, y_true=truth, params_a=a.params,
                            params_b=b.params, plan_a=a.plan_lines, plan_b=b.plan_lines)

    # -- synchronous use (tests, scripts, notebooks) ------------------------------------
    def load(self) -> bool:
        """Load the data the settings describe; True when new data was published."""
        return self.data.load()

    def refresh_stats(self) -> bool:
        """Compute and publish the complete statistics of the current parameters."""
        return self.graph.refresh_stats()

    def run(self) -> bool:
        """Run the clustering here and prepare its views; True when it succeeded."""
        if not self.run_state.run():
            return False
        return self.views.compute()

    # -- a run in two halves (the app's worker processes, tests) -----------------------
    def prepare_run(self) -> Job:
        """Claim the run and return its job (its one step is a picklable RunSpec).

        Raises
        ------
        ValueError
            Before any data is loaded, or for graph parameters that make no edge
            rule (the message says which).
        RuntimeError
            While another run is in flight.
        """
        return self.run_state.begin()

    def apply_run(self, job: Job, outcome: Outcome) -> bool:
        """Publish a run's outcome and release the run; True when it had a result."""
        try:
            self.run_state.accept(job, outcome)
        finally:
            self.run_state.end()
        return not outcome.error
