"""A clustering run: its settings, its stages with progress, and what it produced."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import param

import explorer
from explorer import metrics
from explorer._backend import array_module, resolve_backend, to_numpy
from explorer.components import components_besides_isolated
from explorer.embedding import SOLVERS
from explorer.spectral import partition_graph

from ._errors import describe_error

#: The stages a run goes through, in order, with what the progress text says.
STAGES = (
    ("graph", "building the similarity graph"),
    ("embedding", "computing eigenvectors of the Laplacian"),
    ("k-means", "k-means on the embedding"),
    ("k-means (raw data)", "k-means on the raw data, for comparison"),
    ("scores", "scoring"),
)

#: With ``n_eigenpairs=None`` (auto), a fixed k computes at least this many eigenpairs
#: on graphs of up to :data:`SPECTRUM_AUTO_MAX_N` vertices, so that the spectrum view
#: shows the eigengap beyond k; on larger graphs exactly k (each extra eigenpair costs
#: solver iterations, and clustered small eigenvalues converge slowly).
SPECTRUM_MIN = 10
SPECTRUM_AUTO_MAX_N = 20_000


@dataclass
class RunResult:
    """Everything a finished run produced, on the host, ready to draw and export.

    Attributes
    ----------
    dataset : str
        Name of the data set.
    labels : ndarray of int, shape (n,)
        Spectral cluster of each point; −1 for isolated vertices and for the points
        of components beyond the k largest (see explorer.components).
    kmeans_labels : ndarray of int or None
        k-means on the raw data with the same k (None when not asked for).
    y_true : ndarray or None
        Ground truth, when the data has it.
    n_clusters : int
        The k used.
    k_suggested : int
        The k the eigengap heuristic proposes from `eigenvalues`.
    eigenvalues : ndarray
        Smallest eigenvalues of L_sym, ascending (at least k of them).
    vectors : ndarray, shape (n, m)
        Raw eigenvectors U = D^-1/2 V of those eigenvalues (NaN rows: isolated).
    embedding : ndarray, shape (n, k)
        Rows of the first k columns of U scaled to unit length (NaN rows: isolated).
    csr : scipy.sparse.csr_matrix
        The similarity matrix S.
    graph_stats : explorer.GraphStats
    timings : dict of str to float
        Seconds per stage, in pipeline order, and ``"total"``.
    backend, backend_reason, method, method_reason : str
    solver : str
        The eigensolver that ran.
    eigen_iterations : int or None
    eigen_residuals : ndarray
    scores : dict
        ``"spectral"`` and ``"kmeans"``: metric name to value (ARI and NMI when
        labels exist; normalised and ratio cut of the graph partition).
    params : dict
        The settings of the run (graph and clustering keywords).
    warnings : list of str
        What the user should know about the run (more components than k, an
        eigensolver that stopped above its tolerance).
    """

    dataset: str
    labels: np.ndarray
    kmeans_labels: np.ndarray | None
    y_true: np.ndarray | None
    n_clusters: int
    k_suggested: int
    eigenvalues: np.ndarray
    vectors: np.ndarray
    embedding: np.ndarray
    csr: object
    graph_stats: object
    timings: dict
    backend: str
    backend_reason: str
    method: str
    method_reason: str
    solver: str
    eigen_iterations: int | None
    eigen_residuals: np.ndarray
    scores: dict = field(default_factory=dict)
    params: dict = field(default_factory=dict)
    warnings: list = field(default_factory=list)

    @property
    def isolated(self) -> np.ndarray:
        return self.labels < 0

    @property
    def n(self) -> int:
        return int(self.labels.shape[0])


@dataclass
class RunOutcome:
    """A run job's outcome: a result or an error message."""

    result: RunResult | None = None
    error: str = ""


@dataclass(frozen=True)
class RunSpec:
    """What a run computes, snapshot when the run is claimed.

    Plain data (the data set, keyword dictionaries), so that it pickles: the app
    executes runs in worker processes (:func:`explorer.ui._jobs.run_in_process`).

    Attributes
    ----------
    dataset : explorer.data.Dataset
    graph_kwargs : dict
        Keywords of :func:`explorer.build_graph`: the validated ``rule``
        (:class:`explorer.EdgeRule`) and ``options``
        (:class:`explorer.graph.BuildOptions`), ``method`` and ``backend``
        (:meth:`GraphState.build_kwargs <explorer.ui.GraphState.build_kwargs>`).
    settings : dict
        The clustering settings (``n_clusters``, ``eigen_solver``, ``eigen_tol``,
        ``eigen_max_iter``, ``n_eigenpairs``, ``n_init``, ``random_state``).
    compare : bool
        Also run k-means on the raw data.
    """

    dataset: object
    graph_kwargs: dict
    settings: dict
    compare: bool


def execute(spec: RunSpec, report: Callable[[int, str], None]) -> RunOutcome:
    """Run the pipeline of `spec` in this process; every error becomes a message.

    Parameters
    ----------
    spec : RunSpec
    report : callable (index, detail) -> None
        Called as each stage after the first starts, with its index in
        :data:`STAGES` and a detail for the progress text (e.g. the k chosen).

    Returns
    -------
    RunOutcome
        The result, or the message :func:`~explorer.ui._errors.describe_error` gives
        for what the stage in progress raised.
    """
    stage = [0]  # the stage in progress, for the message should it fail

    def at(index: int, detail: str = "") -> None:
        stage[0] = index
        report(index, detail)

    try:
        return RunOutcome(result=_pipeline(spec, at))
    except Exception as exc:
        return RunOutcome(error=describe_error(exc, f"the {STAGES[stage[0]][0]} stage"))


@dataclass
class RunJob:
    """A claimed run: its :class:`RunSpec` and where its progress goes.

    Calling the job runs it in this process (:meth:`RunState.run`, tests, scripts);
    the app hands :attr:`spec` to a worker process instead and relays the stages
    to :attr:`report`.
    """

    spec: RunSpec
    report: Callable[[int, str], None]

    def __call__(self) -> RunOutcome:
        return execute(self.spec, self.report)


class RunState(param.Parameterized):
    """Clustering settings, the run in progress, and the last result.

    :meth:`prepare` refuses a second run while one is in flight (the app disables
    its Run button meanwhile, so a second click cannot queue work behind the first)
    and returns the :class:`RunJob`; the job reports each stage through
    :attr:`stage` and :attr:`progress_text`; :meth:`finish` publishes the result or
    the error and re-arms.
    """

    n_clusters = param.Integer(default=2, bounds=(1, 64), doc="k, when not chosen automatically.")
    auto_k = param.Boolean(default=False, doc="Let the eigengap heuristic choose k.")
    eigen_solver = param.Selector(default="auto", objects=list(SOLVERS))
    eigen_tol = param.Number(default=None, allow_None=True, bounds=(0, 1),
                             inclusive_bounds=(False, True),
                             doc="Eigensolver tolerance; None: the solver's default.")
    eigen_max_iter = param.Integer(default=None, allow_None=True, bounds=(1, None))
    n_eigenpairs = param.Integer(
        default=None, allow_None=True, bounds=(1, 64),
        doc="Eigenpairs to compute at least (spectrum and eigenvector views); k when "
            "larger. None: 10 up to 20,000 points, else k.",
    )
    n_init = param.Integer(default=10, bounds=(1, 100), doc="k-means restarts.")
    random_state = param.Integer(default=0, bounds=(0, 2**31 - 1))
    compare_kmeans = param.Boolean(default=True, doc="Also run k-means on the raw data.")

    running = param.Boolean(default=False, doc="A run is in flight.")
    stage = param.String(default="", doc="Key of the stage in flight ('' when idle).")
    stages_done = param.Integer(default=0, bounds=(0, len(STAGES)))
    progress_text = param.String(default="")
    result = param.Parameter(default=None, doc="The last RunResult.")
    error = param.String(default="", doc="Why the last run failed ('' when it did not).")

    def __init__(self, **params):
        super().__init__(**params)
        self._lock = threading.Lock()

    def clear(self) -> None:
        """Forget the last result (the data changed under it)."""
        self.result = None
        self.error = ""

    def report(self, index: int, detail: str = "") -> None:
        """Show that stage `index` of :data:`STAGES` is in progress (`detail` is
        appended to its text)."""
        key, text = STAGES[index]
        self.param.update(
            stage=key, stages_done=index,
            progress_text=f"Stage {index + 1}/{len(STAGES)}: {text}{detail}…",
        )

    def prepare(self, dataset, graph_kwargs: dict) -> RunJob:
        """Claim the run slot and return the job for `dataset` with these graph keywords.

        Raises
        ------
        RuntimeError
            If a run is already in flight.
        """
        with self._lock:
            if self.running:
                raise RuntimeError("a run is already in progress; wait for it to finish")
            self.running = True
        settings = {
            "n_clusters": "auto" if self.auto_k else self.n_clusters,
            "eigen_solver": self.eigen_solver,
            "eigen_tol": self.eigen_tol,
            "eigen_max_iter": self.eigen_max_iter,
            "n_eigenpairs": self.n_eigenpairs,
            "n_init": self.n_init,
            "random_state": self.random_state,
        }
        self.error = ""
        self.report(0)
        spec = RunSpec(dataset=dataset, graph_kwargs=dict(graph_kwargs), settings=settings,
                       compare=self.compare_kmeans)
        return RunJob(spec=spec, report=self.report)

    def finish(self, outcome: RunOutcome) -> None:
        """Publish the job's outcome and release the run slot.

        The slot is released first, so that the Run button comes back before the
        views start drawing the result.
        """
        with param.parameterized.batch_call_watchers(self):
            self.param.update(stage="", stages_done=0, progress_text="", running=False)
        if outcome.error:
            self.error = outcome.error
        else:
            self.param.update(result=outcome.result, error="")

    def run(self, dataset, graph_kwargs: dict) -> RunOutcome:
        """Run synchronously (tests, notebooks); returns the outcome it published."""
        outcome = self.prepare(dataset, graph_kwargs)()
        self.finish(outcome)
        return outcome


def _pipeline(spec: RunSpec, report: Callable[[int, str], None]) -> RunResult:
    """The stages, each a library call: build_graph -> spectral_embedding ->
    KMeans on the unit rows -> KMeans on the raw data -> scores."""
    dataset, graph_kwargs, s = spec.dataset, spec.graph_kwargs, spec.settings
    X, y = dataset.X, dataset.y
    timings = {}
    t_run = time.perf_counter()

    t0 = time.perf_counter()
    graph = explorer.build_graph(X, **graph_kwargs)
    timings["graph"] = time.perf_counter() - t0
    csr = graph.csr

    report(1)
    auto = s["n_clusters"] == "auto"
    n_kept = graph.n - int(graph.stats.n_isolated)
    if n_kept < 1:
        raise ValueError(
            f"every one of the n={graph.n} points is isolated (no edges): raise the "
            "threshold (or σ) until points have neighbours"
        )
    if csr.nnz and graph.rule is not None and not float(abs(csr.data).max()) > 0:
        from explorer.spectral import zero_weights_message

        raise ValueError(zero_weights_message(graph.rule, int(csr.nnz)))
    if not auto and s["n_clusters"] > n_kept:
        raise ValueError(
            f"n_clusters={s['n_clusters']} is more than the {n_kept} points that have "
            "neighbours; lower k or raise the threshold"
        )
    # The stages of SpectralClustering.fit after its graph, with the same random stream.
    part = partition_graph(
        csr, s["n_clusters"], n_eigenpairs=None if auto else _eigenpairs(s, graph.n),
        n_components=components_besides_isolated(graph.stats),
        eigen_solver=s["eigen_solver"], eigen_tol=s["eigen_tol"],
        eigen_max_iter=s["eigen_max_iter"], n_init=s["n_init"],
        random_state=s["random_state"], on_kmeans=lambda k: report(2, f" (k = {k})"))
    timings["embedding"] = part.timings["embedding"]
    timings["k-means"] = part.timings["kmeans"]
    k, emb, used = part.n_clusters, part.embedding, part.clustered
    labels = to_numpy(part.labels).astype(np.int64)

    kmeans_labels = None
    if spec.compare:
        report(3)
        t0 = time.perf_counter()
        # On the device of the run: a GPU run compares with k-means on the GPU.
        data = X if graph.backend == "cpu" else array_module(csr).asarray(X)
        raw = explorer.KMeans(k, n_init=s["n_init"], random_state=s["random_state"]).fit(data)
        kmeans_labels = to_numpy(raw.labels_).astype(np.int64)
        timings["k-means (raw data)"] = time.perf_counter() - t0

    report(4)
    t0 = time.perf_counter()
    host_csr = to_numpy_csr(csr)
    scores = {"spectral": metrics.clustering_scores(host_csr, labels, y)}
    if kmeans_labels is not None:
        scores["kmeans"] = metrics.clustering_scores(host_csr, kmeans_labels, y)
    timings["scores"] = time.perf_counter() - t0
    timings["total"] = time.perf_counter() - t_run

    return RunResult(
        warnings=_warnings(graph.stats, k, emb, part.n_dropped),
        dataset=dataset.name, labels=labels, kmeans_labels=kmeans_labels, y_true=y,
        n_clusters=k, k_suggested=part.n_clusters_suggested,
        eigenvalues=np.asarray(emb.eigenvalues),
        vectors=np.asarray(to_numpy(emb.vectors)),
        embedding=np.asarray(to_numpy(used.embedding)),
        csr=host_csr, graph_stats=graph.stats, timings=timings, backend=graph.backend,
        backend_reason=resolve_backend(graph_kwargs["backend"]).reason, method=graph.method,
        method_reason=graph.method_reason, solver=emb.solver,
        eigen_iterations=emb.iterations, eigen_residuals=np.asarray(emb.residual_norms),
        scores=scores, params={**_flat(graph, graph_kwargs), **s, "n_clusters_used": k},
    )


def _flat(graph, graph_kwargs: dict) -> dict:
    """The graph settings of a run as plain keywords (JSON-ready): the edge rule, the
    options asked for, method and backend, and the options the builder ran with."""
    options = {k: v for k, v in graph_kwargs["options"].to_kwargs().items()
               if k != "block_shapes"}
    used = {k: v for k, v in graph.options.to_kwargs().items()
            if v is not None and k != "block_shapes"}
    return {**graph.rule.to_kwargs(), **options, "method": graph_kwargs["method"],
            "backend": graph_kwargs["backend"], "edge_rule": graph.rule.describe(),
            "build_options_used": used}


def to_numpy_csr(csr):
    """A SciPy CSR copy of a CuPy sparse matrix; SciPy matrices unchanged."""
    return csr.get() if hasattr(csr, "get") else csr



def _eigenpairs(settings: dict, n: int) -> int:
    """Eigenpairs a fixed-k run computes at least (see :data:`SPECTRUM_MIN`)."""
    if settings["n_eigenpairs"] is not None:
        return settings["n_eigenpairs"]
    return SPECTRUM_MIN if n <= SPECTRUM_AUTO_MAX_N else 1


def _warnings(stats, k: int, emb, n_dropped: int) -> list[str]:
    """Conditions under which the result is not what it seems (shown beside it)."""
    out = []
    components = components_besides_isolated(stats)
    if components is not None:
        if components > k and n_dropped:
            out.append(
                f"The graph has {components} connected components (besides "
                f"{stats.n_isolated} isolated points), more than k = {k}: the {k} largest "
                f"are the clusters, and the {n_dropped} points of the other "
                f"{components - k} are left unclustered (grey). Raise the threshold (or σ) "
                "to join them."
            )
        elif components > k:  # k chosen by the eigengap among the first eigenvalues
            out.append(
                f"The graph has {components} connected components (besides "
                f"{stats.n_isolated} isolated points), more than k = {k}: the clusters "
                "follow components, not shape. Raise the threshold (or σ) until there are "
                "at most k components."
            )
    if emb.tol is not None and len(emb.residual_norms):
        worst = float(np.max(emb.residual_norms))
        if worst > 2 * emb.tol:
            out.append(
                f"The eigensolver ({emb.solver}) stopped with residual {worst:.1e}, above "
                f"2 × tol = {2 * emb.tol:.0e}: raise the iteration limit, loosen the "
                "tolerance or try another solver."
            )
    return out
