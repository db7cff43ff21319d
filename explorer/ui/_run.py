"""A clustering run (the pipeline's third stage): its settings, its progress, its result.

A run is :class:`explorer.SpectralClustering` fitted with the keywords the sidebar
sets (:meth:`RunState.estimator_params` and
:meth:`~explorer.ui._graph.GraphState.estimator_params`), then k-means on the raw
data for comparison, then the scores. The library does every check and words every
warning; the run only records them. Any keyword the estimator takes and the states
declare reaches it, so a new estimator parameter needs a widget and nothing else.
"""

from __future__ import annotations

import dataclasses
import time
import warnings
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
import param

import explorer
from explorer import metrics
from explorer._backend import array_module, to_numpy
from explorer.components import components_besides_isolated
from explorer.embedding import eigengap_k
from explorer.params import SPECTRAL_PARAMS
from explorer.representatives import choose_mode

from ._graph import RUN_PARAMS, estimator_defaults, field_param
from ._stage import Inputs, Stage

#: The stages a run goes through, in order, with what the progress text says.
STAGES = (
    ("clustering", "spectral clustering: similarity graph, eigenvectors, k-means"),
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
        The library's warnings during the fit (more components than k, an
        eigensolver that stopped above its tolerance), as it worded them.
    n_isolated : int
        Isolated vertices of the run's graph (no edge; label −1).
    n_components : int or None
        Connected components of the graph besides the isolated vertices (None when
        not counted).
    n_unclustered : int
        Points of components beyond the k largest (label −1, not isolated).
    data : LoadResult or None
        The data the run clustered (set when the run is published): views draw
        these points, never another load's.
    mode, mode_why : str
        The pipeline that ran (``"exact"``, ``"representatives"``, ``"landmarks"``)
        and why (the estimator's ``mode_`` and ``mode_why_``).
    affinity, affinity_why : str
        The graph kind that was built and why (``affinity_``, ``affinity_why_``; ""
        in landmark mode, which builds no graph of the points).
    anchors : ndarray of float32, shape (m, d), or None
        The representatives (``representatives_``) or the landmarks (``landmarks_``)
        in the space the fit saw (scaled when ``scale`` was given), on the host; None
        in exact mode.
    anchor_labels : ndarray of int64 or None
        The representatives' clusters (``representative_labels_``).
    anchor_counts : ndarray of int64 or None
        The points each representative stands for (``representative_counts_``).
    anchor_of : ndarray of int64, shape (n,), or None
        Each point's representative (``representative_of_``; representatives mode
        only): the row of the graph that stands for the point.
    fit_scale : {"standard", "minmax"} or None
        The scaling the fit applied (``scaler_.method``; None without ``scale``).
    plan_lines : list of (str, str)
        The library's plan of the fit (``plan_.lines()``: mode, graph kind, edge rule,
        backend, eigensolver, each with its reason).

    Notes
    -----
    In representatives mode the graph (`csr`, `graph_stats`, the cut scores) is that
    of the m representatives, and `vectors` / `embedding` give each point its
    representative's row (the points were never embedded). In landmark mode there is
    no graph: `csr` and `graph_stats` are None and the scores have no cuts.
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
    n_isolated: int = 0
    n_components: int | None = None
    n_unclustered: int = 0
    data: object = None
    mode: str = "exact"
    mode_why: str = ""
    affinity: str = ""
    affinity_why: str = ""
    anchors: np.ndarray | None = None
    anchor_labels: np.ndarray | None = None
    anchor_counts: np.ndarray | None = None
    anchor_of: np.ndarray | None = None
    fit_scale: str | None = None
    plan_lines: list = field(default_factory=list)

    @property
    def anchor_kind(self) -> str | None:
        """"representatives", "landmarks", or None (exact mode)."""
        return None if self.mode == "exact" else self.mode

    @property
    def graph_of(self) -> str:
        """What the run's graph joins: "points", "representatives", or "" (none)."""
        if self.csr is None:
            return ""
        return "representatives" if self.mode == "representatives" else "points"

    @property
    def isolated(self) -> np.ndarray:
        """Points without a cluster (label −1: isolated or unclustered)."""
        return self.labels < 0

    def counts(self) -> str:
        """The isolated / unclustered / components line every view shows."""
        parts = [f"{self.n_isolated:,} isolated"]
        if self.n_unclustered:
            parts.append(f"{self.n_unclustered:,} unclustered (components beyond k)")
        if self.n_components is not None:
            parts.append(f"{self.n_components:,} connected component(s) besides the isolated")
        return ", ".join(parts)

    @property
    def n(self) -> int:
        return int(self.labels.shape[0])


@dataclass(frozen=True)
class RunSpec:
    """What a run computes: plain data, so that it pickles to a worker process.

    Attributes
    ----------
    dataset : explorer.data.Dataset
    estimator : dict
        Keywords of :class:`explorer.SpectralClustering`.
    compare : bool
        Also run k-means on the raw data.
    """

    dataset: object
    estimator: dict
    compare: bool

    def __call__(self, report: Callable) -> RunResult:
        return execute(self, report)


def execute(spec: RunSpec, report: Callable) -> RunResult:
    """Run `spec` here: fit, compare, score.

    Parameters
    ----------
    spec : RunSpec
    report : callable (index, detail) -> None
        Called as each of :data:`STAGES` starts.

    Raises
    ------
    Exception
        What the library raised (the caller words it, see
        :func:`explorer.ui._stage.execute_step`).
    """
    dataset, kw = spec.dataset, dict(spec.estimator)
    X, y = dataset.X, dataset.y
    report(0, "")
    # On the CPU with k given, k-means on the raw data needs nothing of the fit: it
    # runs in a thread beside it (NumPy and SciPy release the GIL in their loops), and
    # the two cores share the wait (moons 10⁵, the whole Run in one process: 1.2-1.4 s
    # one after the other, 0.89-0.91 s side by side; benchmarks/cpu.py app-run-whole).
    beside = spec.compare and not isinstance(kw.get("n_clusters"), str) and \
        not explorer.resolve_backend(kw.get("backend", "auto")).is_gpu
    with ThreadPoolExecutor(max_workers=1) as pool:
        future = pool.submit(_kmeans_raw, X, int(kw["n_clusters"]), kw) if beside else None
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            est = explorer.SpectralClustering(**kw).fit(X)
        compared = None if future is None else future.result()
    graph = est.graph_  # None in landmark mode: no graph of the points is built
    spectrum = getattr(est, "spectrum_", None)  # every computed eigenpair, when kept
    if spectrum is None or est.mode_ == "landmarks":
        eigenvalues, vectors = est.eigenvalues_, est.eigenvectors_
    else:
        eigenvalues, vectors = spectrum.eigenvalues, spectrum.vectors
    eigenvalues = np.asarray(to_numpy(eigenvalues), dtype=np.float64)
    vectors, embedding = np.asarray(to_numpy(vectors)), np.asarray(to_numpy(est.embedding_))
    labels = to_numpy(est.labels_).astype(np.int64)
    k = int(est.n_clusters_)
    timings = {key: v for key, v in est.timings_.items() if key != "total"}
    reps = est.mode_ == "representatives"
    if reps:
        # The representatives were embedded, not the points: each point shows its
        # representative's row (the label it took is that representative's too).
        of = to_numpy(est.representative_of_)
        vectors, embedding = vectors[of], embedding[of]
    anchors = est.representatives_ if reps else est.landmarks_

    kmeans_labels = None
    if spec.compare:
        report(1, "")
        if compared is not None:
            kmeans_labels, seconds = compared
        else:
            # On the device of the run: a GPU run compares with k-means on the GPU
            # (embedding_ stays on the device; labels_ come back like the input).
            data = X if est.backend_ == "cpu" else array_module(est.embedding_).asarray(X)
            kmeans_labels, seconds = _kmeans_raw(data, k, kw)
        timings["k-means (raw data)"] = seconds
    report(2, "")
    t0 = time.perf_counter()
    host_csr = None if graph is None else to_numpy_csr(graph.csr)
    rep_labels = to_numpy(est.representative_labels_) if reps else None
    scores = {"spectral": _scores(host_csr, rep_labels if reps else labels, labels, y)}
    if kmeans_labels is not None:
        # k-means labels the points: the cuts need a graph of the points.
        scores["kmeans"] = _scores(None if reps else host_csr, kmeans_labels, kmeans_labels, y)
    timings["scores"] = time.perf_counter() - t0
    n_isolated = int(to_numpy(est.isolated_).sum())
    rule = "" if est.edge_rule_ is None else est.edge_rule_.describe()
    return RunResult(
        dataset=dataset.name, labels=labels, kmeans_labels=kmeans_labels, y_true=y,
        n_clusters=k, k_suggested=int(eigengap_k(eigenvalues)),
        eigenvalues=eigenvalues, vectors=vectors, embedding=embedding, csr=host_csr,
        graph_stats=None if graph is None else graph.stats, timings=timings,
        backend=est.backend_, backend_reason=est.backend_reason_,
        method="landmarks" if graph is None else graph.method,
        method_reason=est.mode_why_ if graph is None else graph.method_reason,
        solver=est.eigen_solver_, eigen_iterations=est.eigen_iterations_,
        eigen_residuals=np.asarray(to_numpy(est.eigen_residuals_)),
        scores=scores, params={**_plain_params(kw), "edge_rule": rule,
                               "compare_kmeans": spec.compare, "n_clusters_used": k},
        warnings=[str(w.message) for w in caught],
        n_isolated=n_isolated,
        n_components=None if graph is None else components_besides_isolated(graph.stats),
        n_unclustered=int((labels < 0).sum()) - n_isolated,
        mode=est.mode_, mode_why=est.mode_why_,
        affinity=getattr(est, "affinity_", "") if graph is not None else "",
        affinity_why=getattr(est, "affinity_why_", "") if graph is not None else "",
        anchors=None if anchors is None else np.asarray(to_numpy(anchors), dtype=np.float32),
        anchor_labels=None if rep_labels is None else rep_labels.astype(np.int64),
        anchor_counts=(to_numpy(est.representative_counts_).astype(np.int64) if reps
                       else None),
        anchor_of=np.asarray(of, dtype=np.int64) if reps else None,
        fit_scale=None if getattr(est, "scaler_", None) is None else est.scaler_.method,
        plan_lines=list(est.plan_.lines()),
    )


def _kmeans_raw(data, k, kw) -> tuple[np.ndarray, float]:
    """k-means with the run's k, restarts and seed on `data` (the raw points): its
    labels on the host, and the seconds it took."""
    t0 = time.perf_counter()
    raw = explorer.KMeans(k, n_init=kw.get("n_init", 10),
                          random_state=kw.get("random_state")).fit(data)
    return to_numpy(raw.labels_).astype(np.int64), time.perf_counter() - t0


def _scores(csr, graph_labels, labels, y) -> dict:
    """:func:`explorer.metrics.clustering_scores` of `graph_labels` on `csr` (the cuts)
    with ARI / NMI of the points' `labels`; without a graph (landmark mode, or k-means
    beside a representatives' graph) the cut scores are left out."""
    if csr is None:
        scores = {"n_clusters": int(np.unique(labels[labels >= 0]).size),
                  "n_unclustered": int((labels < 0).sum())}
    else:
        scores = metrics.clustering_scores(csr, graph_labels)
    if y is not None:
        scores["ari"] = metrics.adjusted_rand_score(y, labels)
        scores["nmi"] = metrics.normalized_mutual_info_score(y, labels)
    return scores


def _plain_params(kw: dict) -> dict:
    """The estimator's keywords as JSON-ready values."""
    return {k: v if v is None or isinstance(v, (bool, int, float, str)) else repr(v)
            for k, v in kw.items()}


def to_numpy_csr(csr):
    """A SciPy CSR copy of a CuPy sparse matrix; SciPy matrices unchanged."""
    return csr.get() if hasattr(csr, "get") else csr


#: RunState parameters that are not keywords of the estimator but inputs of a run.
_OWN = ("auto_k", "compare_kmeans")


class RunState(Stage):
    """Clustering settings, the run in progress, and the last result.

    A stage (:class:`~explorer.ui._stage.Stage`) that computes when asked (the Run
    button), not on every change: its inputs are the loaded data, the graph
    parameters (:data:`~explorer.ui._graph.RUN_PARAMS`) and its own settings; after
    a change the last result stays, marked stale. While a run is in flight a second
    is refused. Progress goes to :attr:`stage`, :attr:`stages_done` and
    :attr:`progress`.
    """

    n_clusters = param.Integer(default=2, bounds=(1, 64), doc="k, when not chosen automatically.")
    auto_k = param.Boolean(default=False, doc="Let the eigengap heuristic choose k.")
    # The estimator's keywords, declared by its parameter table (type, bounds, help);
    # None stands for a default the library works out ("auto" for n_representatives).
    eigen_solver = field_param(SPECTRAL_PARAMS["eigen_solver"], "auto")
    eigen_tol = field_param(SPECTRAL_PARAMS["eigen_tol"], None, allow_None=True)
    eigen_max_iter = field_param(SPECTRAL_PARAMS["eigen_max_iter"], None, allow_None=True)
    n_eigenpairs = field_param(
        SPECTRAL_PARAMS["n_eigenpairs"], None, allow_None=True,
        doc="Eigenpairs to compute at least (spectrum and eigenvector views); k when "
            "larger. None: 10 up to 20,000 points, else k.")
    n_init = field_param(SPECTRAL_PARAMS["n_init"], 10)
    random_state = param.Integer(default=0, bounds=(0, 2**31 - 1),
                                 doc="Seed of the run (the eigensolver's start, k-means).")
    compare_kmeans = param.Boolean(default=True, doc="Also run k-means on the raw data.")
    mode = field_param(SPECTRAL_PARAMS["mode"], "auto")
    n_representatives = field_param(SPECTRAL_PARAMS["n_representatives"], None, allow_None=True)
    n_landmarks = field_param(SPECTRAL_PARAMS["n_landmarks"], None, allow_None=True)

    stage = param.String(default="", doc="Key of the stage in flight ('' when idle).")
    stages_done = param.Integer(default=0, bounds=(0, len(STAGES)))

    input_names = ("n_clusters", "auto_k", "eigen_solver", "eigen_tol", "eigen_max_iter",
                   "n_eigenpairs", "n_init", "random_state", "compare_kmeans", "mode",
                   "n_representatives", "n_landmarks")
    doing = "running the clustering"
    automatic = False
    busy_message = "a run is already in progress; wait for it to finish"

    def __init__(self, data=None, graph=None, **params):
        super().__init__(**params)
        self.data, self.graph = data, graph
        if data is not None:
            self.follow(data)
        if graph is not None:
            graph.param.watch(self.refresh, [n for n in RUN_PARAMS if n in graph.param])

    @property
    def running(self) -> bool:
        """A run is in flight."""
        return self.busy

    def upstream(self) -> tuple:
        return () if self.data is None else (("the data", self.data),)

    def parameters(self) -> dict:
        """The run's inputs: the graph's estimator keywords and these settings.

        Raises
        ------
        ValueError
            Graph parameters that make no edge rule.
        """
        graph = {} if self.graph is None else self.graph.estimator_params()
        return {**graph, **super().parameters()}

    def estimator_params(self, inputs: Inputs) -> dict:
        """The keywords of :class:`explorer.SpectralClustering` for `inputs`: every
        input the estimator takes, k (or "auto"), and the eigenpairs the views want."""
        known = estimator_defaults()
        params = {k: v for k, v in inputs.params.items() if k in known and k not in _OWN}
        params["n_clusters"] = "auto" if inputs["auto_k"] else inputs["n_clusters"]
        if params.get("n_representatives", "auto") is None:
            params["n_representatives"] = "auto"
        if inputs.params.get("mode") == "landmarks":
            # No graph of the points (the plan says what is built instead): the graph
            # kind and thresholds do not apply, and σ is measured to the landmarks
            # (their "auto": the mean distance of a point to its nearest landmarks).
            params.update(affinity="epsilon", sigma="auto", threshold_sqdist=None,
                          threshold_sim=None)
        scale = inputs.upstream[0].scale  # the data as the app shows and measures them
        if "scale" in known:  # None too: the app shows the data as they are clustered
            params["scale"] = scale
        if "n_eigenpairs" in known and not inputs["auto_k"]:
            n = inputs.upstream[0].n
            params["n_eigenpairs"] = inputs["n_eigenpairs"] or (
                SPECTRUM_MIN if n <= SPECTRUM_AUTO_MAX_N else None)
        else:
            params.pop("n_eigenpairs", None)
        return params

    def mode_now(self, inputs: Inputs, params: dict) -> str:
        """The pipeline a run of `inputs` takes: the mode given, or ``mode="auto"``'s
        choice by the library's rule (:func:`explorer.representatives.choose_mode`,
        on the backend the run resolves to)."""
        n, d = inputs.upstream[0].X.shape
        m = params.get("n_representatives", "auto")
        return self.pipeline(n, d, mode=inputs.params.get("mode", "auto"),
                             metric=params.get("metric", "auto"),
                             n_representatives=None if m == "auto" else m)

    def pipeline(self, n: int, d: int, *, mode="auto", metric="auto",
                 n_representatives=None) -> str:
        """The pipeline a run of n × d points takes: `mode`, or ``mode="auto"``'s choice
        by the library's rule (:func:`explorer.representatives.choose_mode`, on the
        backend the run resolves to; `n_representatives` None: its default)."""
        if mode != "auto":
            return mode
        backend = "cpu" if self.graph is None else self.graph.backend_name
        return choose_mode("auto", n, d, backend=backend, metric=metric,
                           n_representatives=n_representatives)[0]

    def spec(self, inputs: Inputs) -> RunSpec:
        """The picklable run of `inputs`."""
        return RunSpec(dataset=inputs.upstream[0].dataset,
                       estimator=self.estimator_params(inputs),
                       compare=bool(inputs["compare_kmeans"]))

    def steps(self, inputs: Inputs) -> list:
        return [self.spec(inputs)]

    def publish(self, inputs, value, seconds=0.0, final=True) -> None:
        value = dataclasses.replace(value, data=inputs.upstream[0])
        value.timings["total"] = seconds
        super().publish(inputs, value, seconds, final)

    def _report(self, index, detail="", *rest) -> None:
        key, text = STAGES[index]
        self.param.update(stage=key, stages_done=index,
                          progress=f"Stage {index + 1}/{len(STAGES)}: {text}{detail}…")

    def end(self) -> None:
        self.param.update(stage="", stages_done=0)
        super().end()

    def run(self) -> bool:
        """Run here (tests, notebooks); True when a result was published."""
        return self.compute()
