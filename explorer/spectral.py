"""The scikit-learn style estimator :class:`SpectralClustering`.

``fit`` is the one pipeline: the parameter table checks the keywords
(:data:`explorer.params.SPECTRAL_PARAMS`), :func:`explorer.pipeline.plan_fit` takes the
data through the input stage and decides the fit (:class:`~explorer.pipeline.FitPlan`),
:func:`explorer.pipeline.run_plan` runs the plan's mode on its engine, and the fitted
attributes are set from the :class:`~explorer.pipeline.FitResult` in one place.
"""

from __future__ import annotations

import contextlib
import time

import numpy as np
from sklearn.base import BaseEstimator, ClusterMixin
from sklearn.utils.metaestimators import available_if
from threadpoolctl import threadpool_limits

from ._backend import array_module, gpu_status, to_numpy
from ._persistence import host_state
from ._validation import check_features, real_matrix
from .params import AFFINITIES, AFFINITY_GRAPH, SPECTRAL_PARAMS, check_params
from .partition import GraphPartition, partition_graph
from .pipeline import FitPlan, FitResult, plan_fit, run_plan

__all__ = ["AFFINITIES", "AFFINITY_GRAPH", "GraphPartition", "SpectralClustering",
           "partition_graph"]

class SpectralClustering(ClusterMixin, BaseEstimator):
    """Spectral clustering on an ε-neighbourhood similarity graph, on the GPU or the CPU.

    ``fit`` runs three stages: :func:`explorer.build_graph` (the similarity matrix S
    in CSR), :func:`explorer.spectral_embedding` (the k smallest eigenpairs of the
    normalised Laplacian, rows of U = D^-1/2 V scaled to unit length) and
    :class:`explorer.KMeans` on the rows of the non-isolated vertices. Isolated
    vertices (no edge) cannot be embedded and get label −1. With
    ``affinity="precomputed"`` X is S (a graph you built) and the first stage is
    skipped.

    Parameters
    ----------
    n_clusters : int or "auto", default 8
        k, between 1 and the number of non-isolated vertices; ``"auto"`` computes
        ``min(20, that number)`` eigenpairs and lets :func:`~explorer.embedding.eigengap_k`
        choose k.
    affinity : {"auto", "epsilon", "knn", "mutual_knn", "nearest_neighbors", \
            "precomputed"}, default "auto"
        ``"auto"``: the ε-graph or the kNN graph (with self-tuning σ), chosen from the
        data by :func:`explorer.affinity.choose_affinity` (kNN for more than 8 features
        and where no ε threshold gives a clean graph; otherwise the graph with the
        larger relative eigengap at k on a sample; a threshold or a numeric σ given
        means the ε-graph); ``affinity_`` and ``affinity_why_`` say which and why.
        Measured in benchmarks/results/quality.json: the ε-graph keeps noisy shapes
        apart, the kNN graph adapts to outliers and densities that differ.
        ``"epsilon"``: X holds points (n_samples × n_features) and ``fit`` builds their
        ε-neighbourhood graph by the edge rule below. ``"knn"`` (or scikit-learn's
        name ``"nearest_neighbors"``): their kNN graph, edge iff one point is among the
        `n_neighbors` nearest of the other (the union); ``"mutual_knn"``: iff each is
        among the other's (see :class:`explorer.EdgeRule`); no threshold is needed
        (one given also drops the kNN edges that fail it). ``"precomputed"``: X is the
        affinity matrix S itself, n_samples × n_samples: SciPy or cupyx sparse (any
        format) or dense NumPy/CuPy; square, symmetric (to a relative 1e-5),
        non-negative and finite, else a ``ValueError`` says which. Its diagonal is
        ignored (as scikit-learn's Laplacian ignores it) and its values are used in
        float32; the edge rule and the builder's parameters are then unused. (kNN
        graphs given as such, scikit-learn's ``"precomputed_nearest_neighbors"``, are
        not taken.)
    metric : {"auto", "gaussian", "cosine", "uniform"}, default "auto"
        The similarity (see :class:`explorer.EdgeRule`). ``"auto"``: ``"gaussian"``
        for ``n_features <= 8`` or when `threshold_sqdist` is given, else
        ``"cosine"``.
    sigma : float, "local" or "auto", default "auto"
        Gaussian width (ignored by the other metrics). ``"local"``: self-tuning σ
        (σi = distance from i to its `local_neighbor`-th nearest other point, weight
        ``exp(-‖xi − xj‖²/(σi σj))``, Zelnik-Manor & Perona). ``"auto"``:
        ``sqrt(t / 8)`` for the squared-distance cutoff t of an ε graph (see Notes),
        ``"local"`` for a kNN graph.
    n_neighbors : int, default 10
        k of the kNN affinities (and the neighbour count the ε threshold search
        measures in).
    local_neighbor : int, default 7
        m of ``sigma="local"``.
    threshold_sqdist, threshold_sim : float or None, default None
        At most one: edge iff ``‖xi − xj‖² < threshold_sqdist`` or similarity
        ``> threshold_sim``. Neither: a threshold chosen from the data (see Notes).
    method : str, default "auto"
        Graph builder (``"csr1"``, ``"csr2"``, ``"csr3"``, ... on the GPU;
        ``"bruteforce"``, ``"kdtree"`` on the CPU; see :func:`explorer.build_graph`).
    hypo_max_nnz_row, sp_max_nz_pct, mem_use_rate
        CSR-2 and CSR-3 parameters of the core paper, passed to the builder (see
        :class:`explorer.graph.BuildOptions`; None: the builder's default, recorded in
        ``graph_.options``).
    eigen_solver : {"auto", "dense", "lanczos", "lobpcg", "chebyshev", "lu", "amg", \
"components", "arpack"} or None, default "auto"
        See :func:`explorer.spectral_embedding`. ``"auto"`` with a fixed k takes
        ``"components"`` (the components' indicators, exact and without iterations)
        when the graph clustered has exactly k connected components besides its
        isolated vertices; otherwise, on the CPU, ``"amg"`` (LOBPCG preconditioned by
        a two-grid cycle of aggregation multigrid, as scikit-learn's ``"amg"`` is by
        pyamg's) for a graph of points in at most 2 dimensions with at least 20 000
        vertices, Lanczos for a connected graph of more than 1000 vertices whose
        leading eigenvalues it finds well apart, and otherwise dense or Chebyshev,
        whichever the measured cost model predicts faster
        (:func:`explorer.embedding.solvers.resolve_solver`).
    eigen_tol : float, optional
        Residual tolerance of the iterative eigensolvers. Default: the solver's own
        (1e-5 for LOBPCG and Lanczos, 1e-4 for Chebyshev), and at most
        :data:`~explorer.embedding.EIGENGAP_TOL` (1e-5) with ``n_clusters="auto"``,
        whose eigengap test needs the zero eigenvalues accurate.
    eigen_max_iter : int, optional
        Iteration limit of the eigensolver (solver default when None).
    n_eigenpairs : int, optional
        With a fixed k, compute at least this many eigenpairs (kept in `spectrum_`,
        to show the spectrum beyond k); k-means still uses the first k (see
        :func:`partition_graph`).
    n_init : int, default 10
        k-means restarts.
    kmeans_tol : float, default 1e-4
        k-means stops when the squared shift of its centres, summed, is at most this
        times the mean variance of the embedding's features (scikit-learn's rule), or
        when no label changes.
    kmeans_max_iter : int, default 300
    random_state : int, numpy.random.RandomState or None
        Seeds the eigensolver's start and k-means.
    backend : {"auto", "gpu", "cpu"}, default "auto"
    mode : {"auto", "exact", "representatives", "landmarks"}, default "auto"
        ``"exact"``: the ε-graph of all n points. ``"representatives"``: the chain of
        the representatives chain (:mod:`explorer.representatives`): k-means picks
        `n_representatives` centres of the raw data, the three stages run on the
        centres (their own edge rule, chosen from them where not given), and every
        point takes its centre's label. An approximation: points are similar when
        their representatives are, and every point of a representative's cell gets
        one label. ``"auto"``: :func:`explorer.representatives.choose_mode`, exact
        for distance rules on d <= 8 features (grid / kd-tree builds) up to 10⁵
        points, or while n²·d is at most 2·10¹⁴ on the GPU (10¹⁰ on the CPU),
        representatives beyond (past 10⁵ low-d points a graph of every point splits
        clusters that touch: the choice is for the answer, not the time); data with
        many identical rows (at least 10 % copies: survey answers) take their
        distinct rows as the representatives, each weighted by its copies
        (:func:`explorer.representatives.distinct_representatives`);
        ``mode_why_`` says which and why (``"auto"`` never picks landmarks: ask for
        them). Ignored with ``affinity="precomputed"`` and on Dask arrays (always
        exact there). ``"landmarks"``: landmark spectral clustering
        (:func:`explorer.landmarks.landmark_partition`, whose Notes say what it
        approximates): the graph W = Ẑ Ẑᵀ through `n_landmarks` landmarks,
        O(n·p·d) instead of O(n²·d). It uses `metric` (``"auto"``: gaussian; uniform is
        refused), `sigma`, `eigen_tol` / `eigen_max_iter` (the truncated SVD's
        tolerance and block limit) and the k-means parameters; the thresholds and
        builder parameters are unused and ``affinity`` must be ``"epsilon"``.
    n_representatives : int or "auto", default "auto"
        m, between max(2, n_clusters) and n_samples; ``"auto"``: min(4096, n) on the
        GPU, min(2048, n) on the CPU (``representatives.DEFAULT_REPRESENTATIVES``).
    n_landmarks : int, optional
        p for ``mode="landmarks"``; default min(1000, n_samples).
    n_nearest_landmarks : int, default 5
        r for ``mode="landmarks"``: the landmarks each point is joined to.
    reorder : {None, "auto", "jaccard", "rcm", "spatial"}, default None
        Run the eigensolver on the graph with its rows reordered for faster products
        (:func:`explorer.partition_graph`, `reorder`; ``"spatial"`` orders the points
        along a Morton curve); the labels, cluster numbers included, are those
        without reordering for the same `random_state` (the eigensolver's random
        vectors are drawn in the given row order).
    scale : {"auto", "standard", "minmax"} or None, default "auto"
        Feature scaling before the graph is built (:mod:`explorer.preprocessing`):
        ``"standard"`` (zero mean, unit standard deviation per feature), ``"minmax"``
        (each feature into [0, 1]), statistics fitted in float64 on X; ``"auto"``
        (:func:`~explorer.preprocessing.choose_scaling`) standardises features in mixed
        units (ranges more than 100-fold apart: scikit-learn's wine and breast cancer,
        ARI 0.36 → 0.88 and 0.42 → 0.74) and keeps features of one unit as given
        (iris, digits: standardising them scored 0.745 → 0.552 and 0.822 → 0.694);
        ``plan_`` says which and why. None uses the features as given and warns
        (:class:`~explorer.preprocessing.FeatureScaleWarning`) when they are in mixed
        units. A constant feature is centred and
        kept with scale 1 (:class:`~explorer.preprocessing.ConstantFeatureWarning`).
        Only ``"auto"`` or None with ``affinity="precomputed"`` or a kernel (there
        ``"auto"`` is no scaling).

    gamma : float, optional
        scikit-learn's kernel coefficient. With ``affinity="rbf"`` (or ``"auto"`` and
        gamma given: scikit-learn's default affinity) the weights are
        exp(−gamma ‖xi − xj‖²), default gamma 1.0: the dense kernel while it fits
        (:data:`explorer.pipeline.plan.RBF_DENSE_MAX_N` points, exact), past that the
        kernel thresholded into a sparse ε-graph whose dropped weight mass per row is
        at most 0.1 % on sampled rows (:func:`explorer.graph.pairwise.rbf_edge_rule`;
        the plan reports the share measured). With the ε or kNN graphs, gamma sets
        ``sigma = 1/sqrt(2 gamma)``; a sigma given as well must agree. With the other
        kernels, their own coefficient.
    degree, coef0, kernel_params
        scikit-learn's: the poly and sigmoid kernels' degree and zero coefficient, and
        the keywords of a callable kernel.
    n_components : int, optional
        The eigenvectors the labels are read from (default: n_clusters), as in
        scikit-learn: k-means (or the assignment) runs on their rows. Given (as gamma,
        degree, coef0 or kernel_params) with ``affinity="auto"``, it chooses
        scikit-learn's default affinity, rbf: its keywords, its meaning.
    assign_labels : {"kmeans", "discretize", "cluster_qr"}, default "kmeans"
        How the embedding's rows become labels: k-means on the unit rows, or
        scikit-learn's discretisation (Yu & Shi) or QR assignment (Damle et al.) of
        the eigenvectors (:mod:`explorer.assign`).
    n_jobs : int, optional
        CPU threads of the fit's numerical libraries (threadpoolctl; -1: every core;
        None: as they are set).
    verbose : bool or int, default False
        Print the plan and each stage as it starts.
    Attributes
    ----------
    labels_ : ndarray of int32, shape (n_samples,)
        Cluster of each point, −1 for isolated points (and for the points of
        components beyond the k largest, see Notes). The array kind of the input
        (NumPy in, NumPy out; CuPy in, CuPy out), whatever backend ran.
    n_clusters_ : int
        The k used (the eigengap's choice under ``n_clusters="auto"``).
    eigenvalues_ : numpy.ndarray of shape (k,)
        Smallest eigenvalues of L_sym, ascending.
    embedding_ : ndarray of shape (n_samples, k)
        Unit rows k-means clustered (NaN rows for isolated points).
    eigenvectors_ : ndarray of shape (n_samples, k)
        U = D^-1/2 V before row scaling (NaN rows for isolated points).
    spectrum_ : explorer.Embedding
        Every eigenpair computed (at least k: see `n_eigenpairs`; under
        ``n_clusters="auto"`` those the eigengap read).
    isolated_ : ndarray of bool, shape (n_samples,)
    affinity_matrix_ : scipy.sparse or cupyx.scipy.sparse CSR matrix
        The similarity matrix S (with ``affinity="precomputed"``: X as validated, in
        float32 CSR without its diagonal, on the backend's device).
    graph_ : explorer.Graph
        With ``affinity="precomputed"``, ``params`` is None and ``method`` is
        ``"precomputed"``.
    graph_stats_ : explorer.GraphStats
    edge_rule_ : explorer.EdgeRule
        The edge rule the graph was built with, the chosen values filled in
        (``edge_rule_.describe()`` says it in one line).
    metric_ : str
    sigma_ : float, "local" or None
        None for the cosine and uniform metrics.
    threshold_sqdist_, threshold_sim_ : float or None
        The threshold used (one of the two is None; both for a kNN graph without one).
    suggested_params_ : tuple of str
        The graph parameters chosen from the data (empty when all were given).
    eigen_solver_ : str
        The eigensolver that ran.
    eigen_solver_why_ : str
        Why it ran (``"auto"``'s rule and its numbers, or that it was asked for).
    eigen_iterations_ : int or None
    eigen_residuals_ : numpy.ndarray of shape (k,)
        ||A v - μ v|| per eigenpair, recomputed after the solver.
    timings_ : dict of str to float
        Seconds: ``"representatives"`` (mode representatives: their k-means,
        ``"representatives.fit"``, and every point's assignment,
        ``"representatives.assign"``), ``"suggest"`` (only when graph parameters were chosen
        from the data), ``"graph"``, ``"embedding"``, ``"kmeans"``, ``"total"``. When
        ``affinity="auto"`` sampled every row (at most
        :data:`explorer.affinity.GAP_SAMPLE`) and built the graph the fit needs on the
        CPU, the fit takes it: its build counts in ``"suggest"``.
    mode_ : {"exact", "representatives", "landmarks"}
    mode_why_ : str
        Why that mode ran (``mode="auto"``'s rule, or that it was given).
    representatives_ : ndarray of float32, shape (m, n_features), or None
        Mode representatives: the k-means centres whose graph was clustered (then
        `affinity_matrix_`, `graph_`, `embedding_`, `eigenvectors_` are the
        representatives', m rows; `labels_` and `isolated_` are the points'). None
        in exact mode, as the three below.
    representative_of_ : ndarray of int32, shape (n_samples,) or None
        Each point's representative (row of `representatives_`).
    representative_counts_ : ndarray of int64, shape (m,) or None
        Points per representative.
    representative_labels_ : ndarray of int32, shape (m,) or None
        Each representative's cluster (−1: isolated in their graph);
        ``labels_ = representative_labels_[representative_of_]``.
    backend_ : {"gpu", "cpu"}
    backend_reason_ : str
    landmarks_ : ndarray of shape (n_landmarks, n_features) or None
        With ``mode="landmarks"``: the landmarks (on the backend's device; in the
        scaled space with `scale`, as the representatives are); there
        ``affinity_matrix_``, ``graph_``, ``graph_stats_`` and ``edge_rule_`` are None
        (no n × n graph exists) and ``landmark_partition_`` holds the
        :class:`explorer.landmarks.LandmarkPartition`.
    reorder_ : explorer.graph.reorder.RowOrder or None
        The row order the eigensolver ran in and why (None: `reorder` was None).
    affinity_ : {"epsilon", "knn", "mutual_knn", "precomputed"}
        The graph kind that ran (``"nearest_neighbors"`` is ``"knn"``).
    affinity_why_ : str
        Why: ``"given"``, or the rule's reason under ``affinity="auto"``.
    scaler_ : explorer.preprocessing.FeatureScaler or None
        The fitted feature scaling (None when none was applied); ``scaler_.transform(X)``
        gives the points the graph was built on.
    n_features_in_ : int
        Columns of X (with ``affinity="precomputed"``, n_samples).
    feature_names_in_ : ndarray of str objects, shape (n_features_in_,)
        The column names of X, when X was a DataFrame with string column names.
    plan_ : explorer.pipeline.FitPlan
        What the fit decided and why (``plan_.lines()``): input stage, engine, backend,
        mode, graph kind, edge rule, eigensolver. It keeps the float32 points the graph
        was built on (n × d, or the representatives), as `extension_` does.
    extension_ : explorer.extension.ExtensionModel or None
        What :meth:`predict` and :meth:`transform` extend through (None where there
        are no points to join: a precomputed graph, a kernel of every pair, a Dask fit).

    Notes
    -----
    Graph parameters left out are chosen from the data being fitted, by the rule of
    :func:`explorer.data.suggest_params` (:meth:`explorer.EdgeRule.suggest`; the
    command line and the app use it too); explicit values always win and
    ``suggested_params_`` names what was chosen. The rule: for ``n_features <= 8``
    (gaussian weight) candidate thresholds are quantiles (50 % to 100 %) of the
    squared distance from a row to its 10th nearest neighbour, on at most 20 000
    sampled rows; the smallest whose ε-graph has no stray small component (2 to 24
    points; fewer on a few hundred rows), at most 1 % isolated rows and no more
    components than `n_clusters` wins, among those of mean degree at most
    ``min(500, max(20, 2·10⁷ / n))``. σ is then ``sqrt(t / 8)``: the weight at the
    cutoff is exp(−4), the ratio of the paper's synthetic settings. For
    ``n_features > 8``, the cosine similarity with the 10 % quantile of each sampled
    row's 10th largest similarity as threshold; when that quantile is not positive
    (rows pointing every which way, as centred data do) the gaussian rule above.
    Values are rounded to two significant digits; the search is seeded (0), so the
    same data gets the same rule whatever `random_state`. It costs about 0.3 s for
    10⁴ 2-D rows and 2 s for 10⁵ (``timings_["suggest"]``); give the parameters to
    skip it. On a few dozen rows every threshold may fail the tests; the largest
    (every row keeps its 10th neighbour) is taken, and identical rows get the
    complete graph.

    ``embedding_``, ``eigenvectors_``, ``isolated_`` and ``affinity_matrix_`` stay on
    the backend that computed them (CuPy on a GPU run): they are intermediate results,
    often large, and copying them back is the caller's choice (``explorer._backend.to_numpy``,
    ``.get()``). Only `labels_`, the answer, follows the input's kind.

    A component of fewer than 1 % of the mean cluster size (non-isolated points / k,
    at least 2 points) is a stray piece, a few points cut off in a sparse tail: it is
    left out (label −1) before components are counted, or it would take a cluster of
    its own (the components solver makes every component one). Then a graph with more
    connected components (outside the isolated vertices) than k has
    more than k zero eigenvalues, and any k vectors of that null space would be an
    answer. ``fit`` then clusters the k largest components (by vertex count), labels
    the vertices of the others -1 like isolated points, and warns; raise the
    threshold (or σ) to join them. (With ``n_clusters="auto"`` the eigengap counts
    the components among the first 20 eigenvalues.)

    **Input** follows scikit-learn's conventions and messages: lists, DataFrames and
    object arrays of numbers are accepted; complex, 1-D, empty, NaN/inf and (unless
    ``affinity="precomputed"``) sparse X are refused with its wording plus ours.

    **Repeatability.** On the CPU a fixed `random_state` gives the same labels every
    time. On the GPU it does not promise bit-identical repeats (k-means adds its
    float64 centroid sums with atomic operations, in an order that varies), so the
    estimator's scikit-learn tags say ``non_deterministic`` when the GPU runs it
    (``backend="gpu"``, or ``"auto"`` where a GPU answers).

    **Pickling.** A fitted estimator pickles with its device arrays copied to the host
    (see ``__getstate__``): one fitted on the GPU loads without CuPy or a GPU, its
    `labels_`, `embedding_`, `eigenvectors_`, `isolated_` NumPy arrays and
    `affinity_matrix_` (and ``graph_.csr``) a SciPy CSR matrix; `backend_` still says
    where it ran.
    """

    def __init__(
        self,
        n_clusters=8,
        *,
        affinity="auto",
        metric="auto",
        sigma="auto",
        threshold_sqdist=None,
        threshold_sim=None,
        n_neighbors=10,
        local_neighbor=7,
        method="auto",
        hypo_max_nnz_row=None,
        sp_max_nz_pct=None,
        mem_use_rate=None,
        eigen_solver="auto",
        eigen_tol=None,
        eigen_max_iter=None,
        n_eigenpairs=None,
        n_init=10,
        kmeans_tol=1e-4,
        kmeans_max_iter=300,
        random_state=None,
        backend="auto",
        mode="auto",
        n_representatives="auto",
        n_landmarks=None,
        n_nearest_landmarks=5,
        reorder=None,
        scale="auto",
        gamma=None,
        degree=3,
        coef0=1,
        kernel_params=None,
        n_components=None,
        assign_labels="kmeans",
        n_jobs=None,
        verbose=False,
    ):
        self.n_clusters = n_clusters
        self.affinity = affinity
        self.metric = metric
        self.sigma = sigma
        self.threshold_sqdist = threshold_sqdist
        self.threshold_sim = threshold_sim
        self.n_neighbors = n_neighbors
        self.local_neighbor = local_neighbor
        self.method = method
        self.hypo_max_nnz_row = hypo_max_nnz_row
        self.sp_max_nz_pct = sp_max_nz_pct
        self.mem_use_rate = mem_use_rate
        self.eigen_solver = eigen_solver
        self.eigen_tol = eigen_tol
        self.eigen_max_iter = eigen_max_iter
        self.n_eigenpairs = n_eigenpairs
        self.n_init = n_init
        self.kmeans_tol = kmeans_tol
        self.kmeans_max_iter = kmeans_max_iter
        self.random_state = random_state
        self.backend = backend
        self.mode = mode
        self.n_representatives = n_representatives
        self.n_landmarks = n_landmarks
        self.n_nearest_landmarks = n_nearest_landmarks
        self.reorder = reorder
        self.scale = scale
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.kernel_params = kernel_params
        self.n_components = n_components
        self.assign_labels = assign_labels
        self.n_jobs = n_jobs
        self.verbose = verbose

    def fit(self, X, y=None):
        """Cluster the rows of `X` (NumPy or CuPy, n_samples × n_features), or with
        ``affinity="precomputed"`` the vertices of the graph `X` (n_samples × n_samples,
        SciPy/cupyx sparse or dense).

        A Dask array (NumPy or CuPy chunks, chunked by rows) is clustered on the
        dask.distributed cluster of the Client in scope by the Dask engine
        (:mod:`explorer.distributed`, whose Notes say what differs).

        Returns
        -------
        self

        Raises
        ------
        ValueError, TypeError
            An invalid parameter or input (the message names it, its value and what
            is allowed), a graph without any edge, or `n_clusters` above the number
            of non-isolated points.
        """
        t_start = time.perf_counter()
        params = check_params(SPECTRAL_PARAMS, self.get_params())
        n_jobs = params["n_jobs"]
        # threadpoolctl searches the loaded libraries on every call (1-5 ms, a tenth of
        # a 1,000-point fit): only when a limit is asked for.
        limit = (contextlib.nullcontext() if n_jobs in (None, -1)
                 else threadpool_limits(limits=n_jobs))
        with limit:
            plan = plan_fit(X, params)
            if plan.engine == "in-process":
                check_features(self, X, reset=True)
            else:
                self.n_features_in_ = int(X.shape[1])
            if params["verbose"]:
                for label, text in plan.lines():
                    print(f"{label:<13} {text}")
                print(f"Computing label assignment using {params['assign_labels']}")
            result = run_plan(plan, X)
        self._record(plan, result, X, t_start)
        return self

    def plan(self, X) -> FitPlan:
        """What ``fit(X)`` will do, decided and not run: the input stage, the engine, the
        backend, the mode, the graph kind and the edge rule, each with its reason
        (:class:`explorer.pipeline.FitPlan`; ``plan.lines()`` says it in words). In
        representatives mode the representatives are extracted (the edge rule is
        chosen from them).

        Raises
        ------
        ValueError, TypeError
            As :meth:`fit`, for the parameters and the data.
        """
        params = check_params(SPECTRAL_PARAMS, self.get_params())
        return plan_fit(X, params)

    def _record(self, plan: FitPlan, result: FitResult, X, t_start: float) -> None:
        """Set every fitted attribute from the plan and the result (the one place)."""
        reps, rule = plan.representatives, plan.user_rule
        landmarks = result.landmark_partition
        unit = 1.0 if plan.data is None else plan.data.unit
        self.plan_ = plan
        self.labels_ = _like_input(result.labels, X)
        self.n_clusters_ = int(result.n_clusters)
        self.eigenvalues_ = result.eigenvalues
        self.embedding_ = result.embedding
        self.eigenvectors_ = result.eigenvectors
        self.spectrum_ = result.spectrum
        self.isolated_ = result.isolated
        self.affinity_matrix_ = result.affinity_matrix
        self.graph_ = result.graph
        self.graph_stats_ = None if result.graph is None else result.graph.stats
        # The edge rule that built the graph, in X's units (None without a graph of points).
        self.edge_rule_ = rule
        if landmarks is not None:
            self.metric_ = "gaussian" if self.metric == "auto" else self.metric
            self.sigma_ = None if landmarks.sigma is None else landmarks.sigma / unit
        else:
            self.metric_ = None if rule is None else rule.metric
            self.sigma_ = None if rule is None else rule.sigma
        self.threshold_sqdist_ = None if rule is None else rule.threshold_sqdist
        self.threshold_sim_ = None if rule is None else rule.threshold_sim
        self.suggested_params_ = () if rule is None else rule.suggested
        self.eigen_solver_, self.eigen_solver_why_ = result.eigen_solver, result.eigen_solver_why
        self.eigen_iterations_ = result.eigen_iterations
        self.eigen_residuals_ = result.eigen_residuals
        self.backend_, self.backend_reason_ = result.backend, result.backend_why
        self.mode_, self.mode_why_ = plan.mode, plan.mode_why
        self.affinity_, self.affinity_why_ = plan.affinity, plan.affinity_why
        self.scaler_ = plan.scaler
        self.reorder_ = result.reorder
        self.landmarks_ = None if landmarks is None else landmarks.landmarks
        self.landmark_partition_ = landmarks
        self.representatives_ = None if reps is None else reps.centers
        self.representative_of_ = None if reps is None else reps.labels
        self.representative_counts_ = None if reps is None else reps.counts
        self.representative_labels_ = result.representative_labels
        # What predict / transform extend through (explorer.extension), from the runner.
        self.extension_ = result.extension
        self.timings_ = {**result.timings, "total": time.perf_counter() - t_start}

    @available_if(lambda self: _extends(self))
    def transform(self, X):
        """The spectral embedding of new points (rows of unit length, k columns), by the
        Nyström extension of the fitted eigenvectors (:mod:`explorer.extension`).

        Each new point is joined to the training points by the fitted edge rule (same
        threshold and σ; kNN graphs: its k nearest and those that would count it among
        theirs; self-tuning σ: its own σ from its m-th nearest training point), and its
        row is u(x) = (1/μ) Σ_j w(x, j) u_j / d(x), scaled to unit length (a training
        point with its own edge left out gets back the row the fit gave it; given as
        new, it is also joined to itself). Approximated: the training points' degrees and
        eigenvectors stay those of the graph without the new points. Mode
        representatives: the same through the representatives (weighted by their point
        counts, as fitted); mode landmarks: u(x) = Ẑ(x) V Σ^-1 through x's nearest
        landmarks. Not with ``affinity="precomputed"`` (no points to join).

        Returns
        -------
        ndarray of float64, shape (n_new, n_clusters_)
            NumPy for NumPy input, CuPy for CuPy input; NaN rows for new points with no
            edge to an embedded training point.
        """
        from .extension import fitted_space, transform

        model = self._extension_model(X)
        return _like_input(transform(model, fitted_space(model, X)), X)

    @available_if(lambda self: _extends(self))
    def predict(self, X):
        """Cluster labels of new points: the fitted k-means' nearest centre to their
        :meth:`transform` row; mode representatives: the nearest representative's
        label (how the fit labels its own points). ``fit_predict`` is unchanged.

        New points with no edge to an embedded training point under the fitted rule
        (outside every training point's reach) get −1, and an
        :class:`explorer.extension.UnreachableWarning` says how many.

        Returns
        -------
        ndarray of int32, shape (n_new,)
            NumPy for NumPy input, CuPy for CuPy input.
        """
        from .extension import fitted_space, predict

        model = self._extension_model(X)
        return _like_input(predict(model, fitted_space(model, X)), X)

    @available_if(lambda self: _extends(self))
    def fit_transform(self, X, y=None):
        """``fit(X).transform(X)``: the extension's rows of the fitted points themselves
        (each joined to itself as to any training point; `embedding_` keeps the fit's own
        rows, which leave the self-edge out)."""
        return self.fit(X, y).transform(X)

    def _extension_model(self, X):
        """The fitted :class:`~explorer.extension.ExtensionModel` after checking `X`'s
        features against the fit's."""
        from sklearn.utils.validation import check_is_fitted

        check_is_fitted(self, "labels_")
        model = getattr(self, "extension_", None)
        if model is None:
            raise ValueError(
                "this fit keeps no model for new points (a fit of a Dask array, or of an "
                "estimator pickled before predict existed); refit on a NumPy or CuPy array")
        real_matrix(X, min_samples=1)
        check_features(self, X, reset=False)
        return model

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        precomputed = self.affinity in ("precomputed", "precomputed_nearest_neighbors")
        tags.input_tags.pairwise = precomputed  # X is n_samples × n_samples
        tags.input_tags.sparse = precomputed  # points must be dense; a graph may be sparse
        tags.input_tags.positive_only = precomputed  # affinities are >= 0
        if _extends(self):  # transform: the embedding of new points, float64 rows
            from sklearn.utils import TransformerTags

            tags.transformer_tags = TransformerTags(preserves_dtype=["float64"])
        # Bit-identical repeats are promised on the CPU only (see Notes).
        tags.non_deterministic = self.backend == "gpu" or (
            self.backend == "auto" and gpu_status()[0]
        )
        return tags

    def __getstate__(self):
        """The pickled state, with every CuPy array and cupyx sparse matrix of a GPU
        fit copied to the host as its NumPy/SciPy equivalent (also inside `graph_`), so
        that the pickle loads where CuPy or a GPU is missing; it then holds NumPy
        arrays and SciPy matrices, whatever backend ran."""
        return host_state(super().__getstate__())


def _extends(estimator) -> bool:
    """Whether `estimator` can extend its embedding to new points: an edge rule of this
    library joins them (not a precomputed graph, scikit-learn's kNN connectivity or a
    kernel of every pair) and k-means labels the rows."""
    affinity = estimator.affinity
    return (isinstance(affinity, str) and affinity in ("auto", "epsilon", "knn", "mutual_knn")
            and estimator.assign_labels == "kmeans" and (
                affinity != "auto" or estimator.gamma is None
                and estimator.n_components is None and estimator.kernel_params is None
                and estimator.degree == 3 and estimator.coef0 == 1))


def _like_input(labels, X):
    """`labels` as the array kind of `X` (NumPy for anything that is not CuPy; a Dask
    engine's labels as it made them)."""
    if type(labels).__module__.split(".")[0] == "dask" or hasattr(labels, "__dask_graph__"):
        return labels
    if array_module(X) is np:
        return to_numpy(labels)
    import cupy

    return cupy.asarray(labels)
