"""Spectral clustering: :func:`partition_graph` (embedding -> k-means on a built graph)
and the scikit-learn style estimator that builds the graph first."""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np
from sklearn.base import BaseEstimator, ClusterMixin
from sklearn.utils.metaestimators import available_if

from ._backend import array_module, gpu_status, resolve_backend, to_numpy
from ._csr import block_rows, csr_from_arrays, row_blocks, with_values
from ._persistence import host_state
from ._validation import (
    check_affinity,
    check_choice,
    check_data,
    check_features,
    check_float,
    check_int,
    check_limit,
    check_random_state,
    is_sparse,
)
from .components import (
    component_labels,
    components_besides_isolated,
    largest_components,
    restrict_to,
)
from .embedding import (
    EIGENGAP_TOL,
    SOLVERS,
    Embedding,
    auto_k_max,
    components_embedding,
    components_reason,
    eigengap_k,
    isolated_vertices,
    multigrid,
    spectral_embedding,
)
from .embedding.chebyshev import default_block
from .embedding.solvers import resolve_solver
from .graph import BuildOptions, EdgeRule, Graph, build_graph, csr_stats
from .graph.reorder import CHOICES as REORDER_CHOICES
from .graph.reorder import EXPECTED_PRODUCTS, RowOrder, choose_order, permute
from .kmeans import MAX_ITER_LIMIT, N_INIT_LIMIT, KMeans, number_by_first_point
from .preprocessing import SCALINGS, check_feature_scales, fit_scaler
from .representatives import (
    MODES,
    check_n_representatives,
    choose_mode,
    extract_representatives,
    map_labels,
    weight_by_counts,
)
from .representatives import check_memory as check_representatives_memory

#: Practical limit of ``eigen_max_iter``.
EIGEN_MAX_ITER_LIMIT = 1_000_000

#: What X is to :class:`SpectralClustering`: points to build an ε-neighbourhood or kNN
#: graph of, or the affinity matrix itself (``"nearest_neighbors"``: scikit-learn's
#: name of ``"knn"``).
AFFINITIES = ("auto", "epsilon", "knn", "mutual_knn", "nearest_neighbors", "precomputed")

#: The graph kind (:attr:`explorer.EdgeRule.graph`) of each affinity that builds one.
AFFINITY_GRAPH = {"epsilon": "epsilon", "knn": "knn", "mutual_knn": "mutual_knn",
                  "nearest_neighbors": "knn"}

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
"components"}, default "auto"
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
        k-means stops when at most this fraction of points changes label.
    kmeans_max_iter : int, default 300
    random_state : int, numpy.random.RandomState or None
        Seeds the eigensolver's start and k-means.
    backend : {"auto", "gpu", "cpu"}, default "auto"
    mode : {"auto", "exact", "representatives", "landmarks"}, default "auto"
        ``"exact"``: the ε-graph of all n points. ``"representatives"``: the chain of
        papers/004 (:mod:`explorer.representatives`): k-means picks
        `n_representatives` centres of the raw data, the three stages run on the
        centres (their own edge rule, chosen from them where not given), and every
        point takes its centre's label. An approximation: points are similar when
        their representatives are, and every point of a representative's cell gets
        one label. ``"auto"``: :func:`explorer.representatives.choose_mode`, exact
        for distance rules on d <= 8 features (grid / kd-tree builds) up to 10⁵
        points, or while n²·d is at most 2·10¹⁴ on the GPU (10¹⁰ on the CPU),
        representatives beyond (past 10⁵ low-d points a graph of every point splits
        clusters that touch: the choice is for the answer, not the time);
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
    scale : {"standard", "minmax"} or None, default None
        Feature scaling before the graph is built (:mod:`explorer.preprocessing`):
        ``"standard"`` (zero mean, unit standard deviation per feature), ``"minmax"``
        (each feature into [0, 1]), statistics fitted in float64 on X; None uses the
        features as given and warns (:class:`~explorer.preprocessing.FeatureScaleWarning`)
        when their spreads differ more than 100-fold. A constant feature is centred and
        kept with scale 1 (:class:`~explorer.preprocessing.ConstantFeatureWarning`).
        Not with ``affinity="precomputed"``.

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
        The fitted feature scaling (None without `scale`); ``scaler_.transform(X)``
        gives the points the graph was built on.
    n_features_in_ : int
        Columns of X (with ``affinity="precomputed"``, n_samples).
    feature_names_in_ : ndarray of str objects, shape (n_features_in_,)
        The column names of X, when X was a DataFrame with string column names.

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
        scale=None,
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

    def fit(self, X, y=None):
        """Cluster the rows of `X` (NumPy or CuPy, n_samples × n_features), or with
        ``affinity="precomputed"`` the vertices of the graph `X` (n_samples × n_samples,
        SciPy/cupyx sparse or dense).

        A Dask array (NumPy or CuPy chunks, chunked by rows) is clustered on the
        dask.distributed cluster of the Client in scope
        (:func:`explorer.distributed.fit_spectral`, whose Notes say what differs).

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
        if type(X).__module__.split(".")[0] == "dask":
            if self.scale is not None:
                raise ValueError(
                    f"scale={self.scale!r} is not available on a Dask array (the distributed "
                    "fit takes the points as given); scale the array first, e.g. "
                    "(X - X.mean(axis=0)) / X.std(axis=0), and use scale=None"
                )
            # A Dask array: the distributed pipeline on the Client in scope.
            from .distributed import fit_spectral

            if self.reorder is not None:
                raise ValueError(
                    f"reorder={self.reorder!r} is for a single-process fit; a Dask array is "
                    "embedded in its row blocks as built (use reorder=None)")
            if self.mode in ("representatives", "landmarks"):
                raise ValueError(f"mode={self.mode!r} is not available on Dask arrays "
                                 "(the distributed fit builds the exact graph); allowed "
                                 "there: mode='auto' or 'exact'")
            fit_spectral(self, X)
            self.mode_, self.mode_why_ = "exact", "a Dask array: the distributed exact pipeline"
            self.landmarks_ = self.reorder_ = None
            self.representatives_ = self.representative_of_ = None
            self.representative_counts_ = self.representative_labels_ = None
            return self
        t_start = time.perf_counter()
        if self.mode == "landmarks":
            return self._fit_landmarks(X, t_start)
        options = self._check_params()
        backend = resolve_backend(self.backend)
        rng = check_random_state(self.random_state)

        t0 = time.perf_counter()
        rule = reps = scaler = None
        mode, self.mode_why_ = "exact", "affinity='precomputed': X is the graph"
        if self.affinity == "precomputed":
            affinity, affinity_why = "precomputed", "given"
            graph = _precomputed_graph(X, backend)
            check_features(self, X, reset=True)
        else:
            # Distance rules centre a large offset in float64 before the float32 cast
            # (check_data); cosine, not translation invariant, takes the data as is.
            Xv = check_data(X, center=self.metric != "cosine")
            check_features(self, X, reset=True)
            scaler, Xv = _scaled(Xv, self.scale)
            Xv, reps, mode = self._representatives(Xv, backend, rng)
            t0 = time.perf_counter()
            affinity, affinity_why, built = self._resolve_affinity(Xv)
            # The edge rule, built once: explicit values win, the rest is chosen from Xv.
            rule = EdgeRule.suggest(Xv, self.metric, self.sigma, self.threshold_sqdist,
                                    self.threshold_sim, n_clusters=self.n_clusters,
                                    n_neighbors=self.n_neighbors,
                                    graph=AFFINITY_GRAPH[affinity],
                                    local_neighbor=self.local_neighbor)
            as_given = scaler is None and reps is None
            if rule.compares == "cosine" and self.metric != "cosine" and as_given:
                # "auto" chose cosine: the data as given (scaled data are the same
                # whether centred first or not: scaling subtracts its own offset)
                Xv = check_data(X, center=False)
            _warn_duplicates(Xv, self.n_clusters)
            t_suggest = time.perf_counter() - t0
            t0 = time.perf_counter()
            if (built is not None and built.rule == rule and self.method == "auto"
                    and not backend.is_gpu):
                # affinity="auto" built this graph on every row (few rows) with this
                # rule: the same canonical CSR (its build counts in timings_["suggest"])
                graph = replace(built, rule=rule)
            else:
                graph = build_graph(Xv, rule, method=self.method, options=options,
                                    backend=self.backend)
        csr = graph.csr
        if reps is not None:  # weighted by the points each representative stands for
            csr = weight_by_counts(csr, reps.counts)
        xp = array_module(csr)
        t1 = time.perf_counter()

        isolated = isolated_vertices(csr)
        n = csr.shape[0]
        n_isolated = int(xp.count_nonzero(isolated))
        if n_isolated == n and rule is None:
            raise ValueError(
                f"the affinity matrix has no edge: all n={n} vertices are isolated (no "
                "positive weight off the diagonal); affinity='precomputed' needs a graph "
                "with edges"
            )
        if n_isolated == n and int(csr.nnz) > 0 and rule is not None:
            raise ValueError(zero_weights_message(rule, int(csr.nnz)))
        if n_isolated == n:
            raise ValueError(
                f"the graph has no edge: all n={n} points are isolated; raise the threshold "
                f"(now {graph.rule.describe()}) until points have neighbours"
            )
        part = partition_graph(
            csr,
            self.n_clusters,
            n_components=components_besides_isolated(graph.stats),
            eigen_solver=self.eigen_solver,
            eigen_tol=self.eigen_tol,
            eigen_max_iter=self.eigen_max_iter,
            n_eigenpairs=self.n_eigenpairs,
            n_init=self.n_init,
            kmeans_tol=self.kmeans_tol,
            kmeans_max_iter=self.kmeans_max_iter,
            random_state=rng,
            isolated=isolated,
            reorder=self.reorder,
            reorder_points=None if rule is None else Xv,
        )
        if part.n_dropped:
            warn_components(part.n_components, n_isolated, part.n_clusters, part.n_dropped,
                            n_stray=part.n_stray, stray_pieces=part.stray_pieces,
                            stray_size=part.stray_size)
        emb, k, labels = part.clustered, part.n_clusters, part.labels
        self.mode_ = mode
        self.representatives_ = None if reps is None else reps.centers
        self.representative_of_ = None if reps is None else reps.labels
        self.representative_counts_ = None if reps is None else reps.counts
        self.representative_labels_ = None if reps is None else labels
        if reps is not None:  # the points take their representative's label
            labels = map_labels(labels, reps.labels)
            isolated = isolated[reps.labels]

        self.labels_ = _like_input(labels, X)
        self.n_clusters_ = int(k)
        self.eigenvalues_ = emb.eigenvalues
        self.embedding_ = emb.embedding
        self.eigenvectors_ = emb.vectors
        self.spectrum_ = part.embedding
        self.isolated_ = isolated
        self.affinity_matrix_ = csr
        self.graph_ = graph
        self.graph_stats_ = graph.stats
        # The edge rule that built the graph (None on a precomputed graph).
        self.edge_rule_ = rule
        self.metric_ = None if rule is None else rule.metric
        self.sigma_ = None if rule is None else rule.sigma
        self.threshold_sqdist_ = None if rule is None else rule.threshold_sqdist
        self.threshold_sim_ = None if rule is None else rule.threshold_sim
        self.suggested_params_ = () if rule is None else rule.suggested
        self.eigen_solver_, self.eigen_solver_why_ = emb.solver, emb.solver_why
        self.eigen_iterations_ = emb.iterations
        self.eigen_residuals_ = emb.residual_norms
        self.backend_ = graph.backend
        self.backend_reason_ = backend.reason
        self.landmarks_ = None
        self.reorder_ = part.reorder
        self.scaler_ = scaler
        self.affinity_ = affinity
        self.affinity_why_ = affinity_why
        self.timings_ = {
            **({"representatives": sum(reps.timings.values()),
                **{f"representatives.{k}": v for k, v in reps.timings.items()}}
               if reps is not None else {}),
            **({"suggest": t_suggest} if rule is not None and rule.suggested else {}),
            "graph": t1 - t0,
            **part.timings,
            "total": time.perf_counter() - t_start,
        }
        # What predict / transform extend through (explorer.extension): one attribute.
        from ._validation import column_offsets
        from .extension import exact_model

        centred = self.metric != "cosine" and not (rule is not None and rule.compares == "cosine"
                                                   and scaler is None and reps is None)
        self.extension_ = None if rule is None else exact_model(
            Xv, rule, emb.vectors, emb.eigenvalues, part.kmeans, scaler=scaler,
            offsets=column_offsets(X) if centred else None,
            counts=None if reps is None else reps.counts,
            point_labels=self.representative_labels_)
        return self

    @available_if(lambda self: self.affinity != "precomputed")
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

    @available_if(lambda self: self.affinity != "precomputed")
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

    @available_if(lambda self: self.affinity != "precomputed")
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
        check_data(X, min_samples=1, center=False)
        check_features(self, X, reset=False)
        return model

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        precomputed = self.affinity == "precomputed"
        tags.input_tags.pairwise = precomputed  # X is n_samples × n_samples
        tags.input_tags.sparse = precomputed  # points must be dense; a graph may be sparse
        tags.input_tags.positive_only = precomputed  # affinities are >= 0
        if not precomputed:  # transform: the embedding of new points, float64 rows
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

    def _representatives(self, Xv, backend, rng):
        """Mode representatives (``mode``, ``mode="auto"``'s rule): the data moved to
        the backend's device, k-means representatives extracted; returns (the points
        to build the graph of, the :class:`~explorer.representatives.Representatives`
        or None, the mode)."""
        n, d = Xv.shape
        given = self.n_representatives
        mode, self.mode_why_ = choose_mode(
            self.mode, n, d, backend=backend.name, metric=self.metric,
            n_representatives=None if isinstance(given, str) else given)
        if mode != "representatives":
            return Xv, None, mode
        m = check_n_representatives(given, n, self.n_clusters, backend.name)
        move = backend.is_gpu != (array_module(Xv) is not np)
        check_representatives_memory(n, d, m, gpu=backend.is_gpu, move=move)
        if move:
            Xv = backend.xp.asarray(Xv) if backend.is_gpu else to_numpy(Xv)
        reps = extract_representatives(Xv, m, random_state=rng)
        return reps.centers, reps, mode

    def _resolve_affinity(self, X) -> tuple[str, str, object]:
        """The affinity that builds the graph of `X`, why, and the graph the choice
        already built on every row of `X` or None (``affinity="auto"``: the rule of
        :func:`explorer.affinity.choose_affinity`)."""
        if self.affinity != "auto":
            return AFFINITY_GRAPH[self.affinity], "given", None
        given = [name for name in ("threshold_sqdist", "threshold_sim")
                 if getattr(self, name) is not None]
        if not isinstance(self.sigma, str) and self.sigma is not None:
            given.append("sigma")
        if given:
            return "epsilon", f"{' and '.join(given)} given: the ε-graph they define", None
        from .affinity import choose_affinity

        choice = choose_affinity(X, self.n_clusters, n_neighbors=self.n_neighbors,
                                 local_neighbor=self.local_neighbor, backend=self.backend)
        return choice.affinity, choice.why, choice.graph

    def _check_params(self) -> BuildOptions:
        """Validate the parameters besides the edge rule; return the builder's options."""
        if isinstance(self.n_clusters, str):
            check_choice(self.n_clusters, "n_clusters", ("auto",))
        else:
            check_int(self.n_clusters, "n_clusters", low=1)
        check_choice(self.affinity, "affinity", AFFINITIES)
        check_choice(self.mode, "mode", MODES)
        if isinstance(self.n_representatives, str):
            check_choice(self.n_representatives, "n_representatives", ("auto",))
        else:
            check_int(self.n_representatives, "n_representatives", low=2)
        if self.scale is not None:
            check_choice(self.scale, "scale", SCALINGS)
            if self.affinity == "precomputed":
                raise ValueError(
                    f"scale={self.scale!r} applies to points, not to affinity='precomputed' "
                    "(X is then the graph); use scale=None"
                )
        # The edge rule is validated by EdgeRule.suggest in fit, before any search (and
        # unused on a precomputed graph).
        options = BuildOptions.from_args(self.hypo_max_nnz_row, self.sp_max_nz_pct,
                                         self.mem_use_rate)
        check_choice(self.eigen_solver, "eigen_solver", SOLVERS)
        check_float(self.eigen_tol, "eigen_tol", low=0.0, low_inclusive=False, allow_none=True)
        check_int(self.eigen_max_iter, "eigen_max_iter", low=1, allow_none=True)
        check_int(self.n_eigenpairs, "n_eigenpairs", low=1, allow_none=True)
        check_limit(check_int(self.n_init, "n_init", low=1), "n_init", N_INIT_LIMIT,
                    "each restart runs k-means again")
        check_float(self.kmeans_tol, "kmeans_tol", low=0.0, high=1.0)
        check_limit(check_int(self.kmeans_max_iter, "kmeans_max_iter", low=1),
                    "kmeans_max_iter", MAX_ITER_LIMIT, "Lloyd's iterations stop long before")
        check_limit(check_int(self.eigen_max_iter, "eigen_max_iter", low=1, allow_none=True),
                    "eigen_max_iter", EIGEN_MAX_ITER_LIMIT,
                    "the eigensolvers converge (or stall) long before")
        check_random_state(self.random_state)
        if self.reorder is not None:
            check_choice(self.reorder, "reorder", REORDER_CHOICES)
        return options

    def _fit_landmarks(self, X, t_start):
        """``mode="landmarks"``: :func:`explorer.landmarks.landmark_partition` with this
        estimator's parameters, its result recorded as the exact fit's attributes."""
        from .landmarks import SVD_MAX_ITER, SVD_TOL, landmark_partition

        self._check_params()
        if self.affinity not in ("auto", "epsilon"):
            raise ValueError(f"affinity={self.affinity!r} is not allowed with mode='landmarks' "
                             "(it needs points, not a graph); use affinity='epsilon' or "
                             "mode='exact'")
        check_choice(self.metric, "metric", ("auto", "gaussian", "cosine"))
        metric = "gaussian" if self.metric == "auto" else self.metric
        Xv = check_data(X, center=metric != "cosine")
        check_features(self, X, reset=True)
        scaler, Xv = _scaled(Xv, self.scale)
        n_landmarks = min(1000, Xv.shape[0]) if self.n_landmarks is None else self.n_landmarks
        part = landmark_partition(
            Xv, self.n_clusters, n_landmarks=n_landmarks, n_nearest=self.n_nearest_landmarks,
            metric=metric, sigma=self.sigma, backend=self.backend,
            random_state=self.random_state,
            svd_tol=SVD_TOL if self.eigen_tol is None else self.eigen_tol,
            svd_max_iter=SVD_MAX_ITER if self.eigen_max_iter is None else self.eigen_max_iter,
            n_init=self.n_init, kmeans_tol=self.kmeans_tol, kmeans_max_iter=self.kmeans_max_iter,
        )
        k = part.n_clusters
        self.labels_ = _like_input(part.labels, X)
        self.n_clusters_ = int(k)
        # Eigenvalues of the landmark graph's normalised Laplacian I - W: 1 - σ².
        self.eigenvalues_ = 1.0 - part.singular_values[:k] ** 2
        self.embedding_ = part.embedding
        self.eigenvectors_ = part.vectors
        self.isolated_ = part.isolated
        self.affinity_matrix_ = self.graph_ = self.graph_stats_ = self.edge_rule_ = None
        self.metric_, self.sigma_ = metric, part.sigma
        self.threshold_sqdist_ = self.threshold_sim_ = None
        self.suggested_params_ = ()
        self.eigen_solver_ = part.solver
        self.eigen_solver_why_ = (f"landmark mode: the truncated SVD of the n × p "
                                  f"affinity ({part.solver})")
        self.eigen_iterations_ = part.iterations
        self.eigen_residuals_ = part.svd.residuals[:k]
        self.backend_, self.backend_reason_ = part.backend, part.backend_reason
        self.mode_, self.mode_why_ = "landmarks", "mode='landmarks' given"
        self.landmarks_ = part.landmarks
        self.scaler_ = scaler
        self.reorder_ = None  # no graph to reorder: the products are the CSRC ones
        self.representatives_ = self.representative_of_ = None
        self.representative_counts_ = self.representative_labels_ = None
        from ._validation import column_offsets
        from .extension import landmark_model

        self.extension_ = landmark_model(
            part, part.affinity, scaler=scaler,
            offsets=column_offsets(X) if metric != "cosine" else None)
        # Without the stored affinity: the estimator keeps no n × p matrix (as it keeps
        # no graph), and what it keeps pickles to the host (see __getstate__).
        self.landmark_partition_ = replace(part, affinity=None)
        self.timings_ = {**{k_: v for k_, v in part.timings.items() if k_ != "total"},
                         "total": time.perf_counter() - t_start}
        return self


@dataclass
class GraphPartition:
    """What :func:`partition_graph` produced.

    Attributes
    ----------
    labels : ndarray of int32, shape (n,)
        Cluster of each vertex, −1 for isolated vertices and for those of components
        beyond the k largest; on the graph's device (NumPy or CuPy). Clusters are
        numbered in the order of their first vertex
        (:func:`explorer.kmeans.number_by_first_point`), so the same partition has
        the same numbers whatever the row order or backend it came from.
    n_clusters : int
        The k used (the eigengap's choice under ``n_clusters="auto"``).
    n_clusters_suggested : int
        The eigengap's k among the computed eigenvalues
        (:func:`~explorer.embedding.eigengap_k`), whatever k was used.
    embedding : explorer.Embedding
        Every computed eigenpair (at least k; see `n_eigenpairs`).
    clustered : explorer.Embedding
        Its first k (``embedding.truncate(n_clusters)``), whose unit rows k-means
        clustered.
    kmeans : explorer.KMeans
        The fitted k-means.
    n_components : int or None
        Connected components outside the isolated vertices, when they were counted
        (given, or counted because of a fixed k).
    n_dropped : int
        Vertices left out by the components rule (label −1): those of stray pieces
        and of the components beyond the k largest.
    timings : dict of str to float
        Seconds: ``"embedding"`` (with the components rule; the reordering included)
        and ``"kmeans"``; ``"reorder"`` (choosing and computing the order, and
        permuting the matrix) when `reorder` was asked for.
    reorder : explorer.graph.reorder.RowOrder or None
        The row order the embedding ran in (``perm`` None: the rule kept the given
        order; the reason says why); None when no reordering was asked for.
    n_stray : int
        Vertices of the stray pieces left out (part of `n_dropped`).
    stray_pieces : int
        How many stray pieces.
    stray_size : int or None
        The size under which a component was a stray piece, when strays were left out.
    """

    labels: object
    n_clusters: int
    n_clusters_suggested: int
    embedding: Embedding
    clustered: Embedding
    kmeans: KMeans
    n_components: int | None
    n_dropped: int
    timings: dict = field(default_factory=dict)
    reorder: RowOrder | None = None
    n_stray: int = 0
    stray_pieces: int = 0
    stray_size: int | None = None


def partition_graph(
    csr,
    n_clusters,
    *,
    n_eigenpairs=None,
    n_components=None,
    eigen_solver="auto",
    eigen_tol=None,
    eigen_max_iter=None,
    n_init=10,
    kmeans_tol=1e-4,
    kmeans_max_iter=300,
    random_state=None,
    isolated=None,
    on_kmeans: Callable[[int], None] | None = None,
    reorder=None,
    reorder_points=None,
) -> GraphPartition:
    """Spectral clustering of a built similarity graph: the eigenvectors of its
    normalised Laplacian, then k-means on their unit rows (the last two stages of
    :class:`SpectralClustering`, which the app runs too).

    Parameters
    ----------
    csr : scipy.sparse or cupyx.scipy.sparse matrix of shape (n, n)
        The similarity matrix (:attr:`explorer.Graph.csr`); a CuPy matrix keeps both
        stages on its GPU.
    n_clusters : int or "auto"
        k, between 1 and the number of non-isolated vertices. ``"auto"`` computes
        :func:`~explorer.embedding.auto_k_max` eigenpairs and takes the eigengap's k.
        With a fixed k and more connected components than k (outside the isolated
        vertices), the k largest components are the clusters and the vertices of the
        others get label −1, after stray pieces (components of fewer than
        :data:`STRAY_SHARE` of the mean cluster size) are left out the same way (see
        :class:`SpectralClustering`, Notes).
    n_eigenpairs : int, optional
        With a fixed k, compute at least this many eigenpairs (to show the spectrum
        beyond k); k-means still uses the first k. Ignored by
        ``eigen_solver="components"``, which gives exactly k.
    n_components : int, optional
        The graph's components outside the isolated vertices, when known (from
        :attr:`explorer.Graph.stats`): at most k skips labelling them.
    eigen_solver, eigen_tol, eigen_max_iter
        As :func:`explorer.spectral_embedding` (`solver`, `tol`, `max_iter`); the
        default tolerance under ``n_clusters="auto"`` is
        :data:`~explorer.embedding.EIGENGAP_TOL`. A fixed k and ``"auto"`` take
        ``"components"`` when the graph left after the components rule has exactly k
        components and no more than k eigenpairs are wanted.
    n_init, kmeans_tol, kmeans_max_iter
        :class:`explorer.KMeans`'s `n_init`, `tol` and `max_iter`.
    random_state : int, numpy.random.RandomState or None
        One random stream for the eigensolver's start and then k-means.
    isolated : bool array of shape (n,), optional
        The vertices without an edge, when already known.
    on_kmeans : callable, optional
        Called with k between the two stages (a progress hook).
    reorder : {None, "auto", "jaccard", "rcm", "spatial"} or RowOrder, default None
        Run the eigensolver on the graph with its rows reordered
        (:mod:`explorer.graph.reorder`): ``"auto"`` when
        :func:`~explorer.graph.reorder.choose_order`'s rule says the products saved
        pay for it, a method name always, a :class:`~explorer.graph.reorder.RowOrder`
        as given. The eigensolver draws its random vectors in the given order
        (:func:`explorer.spectral_embedding`, `row_ids`), the eigenvectors come back
        in the given order and k-means runs there, so the labels, cluster numbers
        included, are those without reordering for the same `random_state` (up to
        the rounding of the products' summation order, which can move a point that
        lies on a boundary).
    reorder_points : array of shape (n, d), optional
        The points the graph was built from: ``"spatial"`` needs them, and they make
        it a candidate of ``"auto"``; their dimension is the `points_dim` of the
        eigensolver's ``"auto"`` rule (:func:`explorer.spectral_embedding`).

    Returns
    -------
    GraphPartition

    Raises
    ------
    ValueError
        `n_clusters` out of range, a graph without any edge (from
        :func:`explorer.spectral_embedding`), or ``eigen_solver="components"`` with
        ``n_clusters="auto"`` or on a graph without exactly k components.
    """
    csr = _check_graph(csr)
    rng = check_random_state(random_state)
    xp = array_module(csr)
    n = csr.shape[0]
    n_components = check_int(n_components, "n_components", low=0, high=n, allow_none=True)
    check_limit(check_int(n_init, "n_init", low=1), "n_init", N_INIT_LIMIT,
                "each restart runs k-means again")
    check_float(kmeans_tol, "kmeans_tol", low=0.0, high=1.0)
    check_limit(check_int(kmeans_max_iter, "kmeans_max_iter", low=1), "kmeans_max_iter",
                MAX_ITER_LIMIT, "Lloyd's iterations stop long before")
    if on_kmeans is not None and not callable(on_kmeans):
        raise TypeError(f"on_kmeans must be a callable or None; got {on_kmeans!r} "
                        f"({type(on_kmeans).__name__})")
    if isolated is not None:
        isolated = _check_isolated(isolated, n, xp)
    auto = isinstance(n_clusters, str) and n_clusters == "auto"
    if not auto:
        n_clusters = check_int(n_clusters, "n_clusters", low=1)
    elif eigen_solver == "components":
        raise ValueError(
            "eigen_solver='components' needs a fixed n_clusters (it gives exactly k "
            "eigenpairs, no spectrum for the eigengap to read); with n_clusters='auto' use "
            "another solver"
        )
    n_eigenpairs = check_int(n_eigenpairs, "n_eigenpairs", low=1, allow_none=True)
    _check_reorder(reorder, reorder_points)
    isolated = isolated_vertices(csr) if isolated is None else isolated
    n_kept = n - int(xp.count_nonzero(isolated))
    if not auto and n_clusters > n_kept:
        raise ValueError(
            f"n_clusters={n_clusters} is out of range: only {n_kept} of the n={n} points "
            f"have an edge ({n - n_kept} are isolated); allowed: 1 <= n_clusters <= {n_kept}"
        )

    t0 = time.perf_counter()
    split, n_dropped, strays = None, 0, _Strays()
    n_left = n_components
    component_ids = None  # the components' labels, once labelled
    if not auto:
        # Stray pieces (a few points cut off in a sparse tail) out first, then, with
        # more components than k, the k largest are the clusters (see
        # explorer.components); the others' vertices get label -1.
        csr, isolated_left, strays = _drop_stray_components(csr, n_clusters, isolated,
                                                            n_components)
        n_left = None if strays.n_components is None else strays.n_components - strays.pieces
        # Zeroed weights keep the pattern, which is what connects (component_labels),
        # so the labels of the stray search are the left graph's: labelled once.
        split = largest_components(csr, n_clusters, isolated=isolated_left,
                                   n_components=n_left, labels=strays.labels)
        n_left, n_dropped = split.n_components, split.n_dropped + strays.vertices
        n_components = n_left + strays.pieces
        component_ids = strays.labels if split.labels is None else split.labels
    n_kept -= n_dropped
    if auto:
        m = auto_k_max(n_kept)
    elif eigen_solver == "components":  # k eigenpairs, whatever n_eigenpairs asks
        m = n_clusters
    else:
        m = min(n_kept, max(n_clusters, n_eigenpairs or 1))
    tol = EIGENGAP_TOL if auto and eigen_tol is None else eigen_tol
    exactly_k = not auto and n_left >= n_clusters
    if exactly_k and eigen_solver in ("auto", "components") and m == n_clusters:
        # The embedded graph has exactly k components: their indicators are the
        # answer, exact where an iterative solver may not resolve the zeros from the
        # next eigenvalues (explorer.spectral_embedding, Notes).
        emb = components_embedding(csr, n_clusters, labels=component_ids, kept=split.kept)
        emb.solver_why = components_reason(eigen_solver, n_clusters)
        # No products to speed up: a method is not run (the order kept, and why); a
        # given RowOrder is recorded as given (the indicators do not depend on it).
        order = reorder if reorder is None or isinstance(reorder, RowOrder) else RowOrder(
            perm=None, method="none", seconds=0.0, before=None, after=None,
            reason="kept: the components embedding takes no sparse products")
        t_order = 0.0
    else:
        embedded = csr if split is None or split.kept is None else restrict_to(csr, split.kept)
        labels = None
        if exactly_k and eigen_solver != "dense":  # the solver starts from the indicators
            labels = component_labels(csr) if component_ids is None else component_ids
        points_dim = None if reorder_points is None else int(reorder_points.shape[1])
        t_order = time.perf_counter()
        order = _order_rows(embedded, reorder, reorder_points, eigen_solver, m, n_kept, xp)
        t_order = time.perf_counter() - t_order
        if order is not None and order.reordered:
            t_permute = time.perf_counter()
            embedded = permute(embedded, order.perm)
            labels = None if labels is None else labels[order.perm]
            t_order += time.perf_counter() - t_permute
        emb = spectral_embedding(embedded, m, solver=eigen_solver, tol=tol,
                                 max_iter=eigen_max_iter, random_state=rng, components=labels,
                                 row_ids=order.perm if order is not None else None,
                                 points_dim=points_dim)
        if order is not None and order.reordered:
            emb = replace(emb, embedding=order.to_original(emb.embedding),
                          vectors=order.to_original(emb.vectors),
                          isolated=order.to_original(emb.isolated))
    suggested = eigengap_k(emb.eigenvalues)
    k = suggested if auto else n_clusters
    used = emb.truncate(k)
    t1 = time.perf_counter()

    if on_kmeans is not None:
        on_kmeans(k)
    keep = xp.flatnonzero(~used.isolated)
    km = number_by_first_point(KMeans(k, n_init=n_init, tol=kmeans_tol,
                                      max_iter=kmeans_max_iter,
                                      random_state=rng).fit(used.embedding[keep]))
    labels = xp.full(n, -1, dtype=xp.int32)
    labels[keep] = km.labels_
    timings = {"embedding": t1 - t0, "kmeans": time.perf_counter() - t1}
    if order is not None:
        timings["reorder"] = t_order
    return GraphPartition(
        labels=labels, n_clusters=int(k), n_clusters_suggested=int(suggested), embedding=emb,
        clustered=used, kmeans=km, n_components=n_components, n_dropped=int(n_dropped),
        timings=timings, reorder=order,
        n_stray=strays.vertices, stray_pieces=strays.pieces, stray_size=strays.size,
    )


def _check_reorder(reorder, points):
    """Validate `partition_graph`'s `reorder` (and its points) before any work."""
    if reorder is None or isinstance(reorder, RowOrder):
        return
    check_choice(reorder, "reorder", REORDER_CHOICES)
    if reorder == "spatial" and points is None:
        raise ValueError("reorder='spatial' needs the points the graph was built from "
                         "(reorder_points); use 'auto', 'jaccard' or 'rcm' for a graph alone")


def _order_rows(csr, reorder, points, solver, m, n_kept, xp):
    """The row order `partition_graph` embeds in (None: none asked for).

    The rule's inputs: the block products the solver takes (none for the dense,
    components and "lu" solvers, :data:`explorer.embedding.multigrid.EXPECTED_PRODUCTS`
    for "amg", :data:`~explorer.graph.reorder.EXPECTED_PRODUCTS` for the other
    iterative ones) and its block width."""
    if reorder is None:
        return None
    if isinstance(reorder, RowOrder):
        return reorder
    used = ("components" if solver == "components"
            else resolve_solver(solver, n_kept, min(m, n_kept), xp, nnz=int(csr.nnz),
                                points_dim=None if points is None else points.shape[1]))
    # "lu": a few products; its factors (ordered by SuperLU itself) are the cost.
    products = (0 if used in ("dense", "components", "lu")
                else multigrid.EXPECTED_PRODUCTS if used == "amg" else EXPECTED_PRODUCTS)
    return choose_order(csr, reorder, points, n_products=products,
                        block=default_block(m, csr.shape[0]))


#: A component holding fewer points than this share of the mean cluster size
#: (non-isolated points / k) is a stray piece (:func:`partition_graph`).
STRAY_SHARE = 0.01


@dataclass
class _Strays:
    """What :func:`_drop_stray_components` left out."""

    n_components: int | None = None
    pieces: int = 0
    vertices: int = 0
    size: int | None = None
    #: The graph's component labels when the search labelled them (None otherwise).
    labels: object = None


def _drop_stray_components(csr, k, isolated, n_components):
    """``(graph, isolated, _Strays)``: the graph with the edges of its stray pieces
    (components of fewer than ``max(2, ceil(STRAY_SHARE · n_kept / k))`` vertices)
    set to 0, when it has more than one component and at least one is not a stray."""
    if n_components is not None and n_components <= 1:
        return csr, isolated, _Strays(n_components)
    xp = array_module(csr)
    labels = component_labels(csr)
    in_graph = ~isolated
    found, counts = xp.unique(labels[in_graph], return_counts=True)
    n_components = int(found.shape[0])
    n_kept = int(counts.sum())
    size = max(2, math.ceil(STRAY_SHARE * n_kept / k))
    small = counts < size
    pieces = int(xp.count_nonzero(small))
    vertices = int(counts[small].sum()) if pieces else 0
    if pieces == 0 or pieces == n_components or n_kept - vertices < k:
        return csr, isolated, _Strays(n_components, labels=labels)
    drop = xp.isin(labels, found[small]) & in_graph
    data = xp.empty(csr.data.shape, dtype=csr.dtype)
    for r0, r1, e0, e1 in row_blocks(csr.indptr):
        out = drop[block_rows(csr, r0, r1, e0, e1, xp)] | drop[csr.indices[e0:e1]]
        data[e0:e1] = xp.where(out, 0, csr.data[e0:e1])
    return (with_values(csr, data), isolated | drop,
            _Strays(n_components, pieces, vertices, size, labels))


def zero_weights_message(rule, nnz: int) -> str:
    """Why a graph with `nnz` edges has no positive weight (every gaussian weight
    underflowed float32): the message :class:`SpectralClustering` and the app give."""
    z = rule.zero_weight_sqdist
    if z is None:
        return f"every one of the graph's {nnz} edges has weight 0 ({rule.describe()})"
    return (
        f"every one of the graph's {nnz} edges has weight 0: with {rule.describe()}, "
        f"exp(-‖xi−xj‖²/(2σ²)) underflows float32 to 0 from ‖xi−xj‖² ≥ {z:.3g} "
        f"(2σ² · {z / (2 * rule.sigma ** 2):.0f}) on, and no edge is shorter; raise sigma "
        "(sigma ≈ sqrt(threshold_sqdist / 8) weighs every edge)"
    )


def _check_graph(csr):
    """`csr` as a canonical-format CSR matrix (any SciPy / cupyx sparse format is
    converted), or a TypeError / ValueError naming the argument."""
    if not is_sparse(csr):
        raise TypeError(
            "csr must be a scipy.sparse or cupyx.scipy.sparse matrix (the similarity graph, "
            f"e.g. build_graph(X).csr); got {type(csr).__module__}.{type(csr).__name__}"
        )
    if np.issubdtype(csr.dtype, np.complexfloating):
        raise ValueError(
            f"Complex data not supported: csr must hold real weights; got dtype {csr.dtype}"
        )
    if not (np.issubdtype(csr.dtype, np.number) or csr.dtype == np.bool_):
        raise TypeError(f"csr must hold numbers; got dtype {csr.dtype}")
    if csr.ndim != 2 or csr.shape[0] != csr.shape[1] or csr.shape[0] < 2:
        raise ValueError(
            f"csr must be a square n×n matrix with n >= 2; got shape {tuple(csr.shape)}"
        )
    if csr.format != "csr":
        csr = csr.tocsr()
    return csr


def _check_isolated(isolated, n: int, xp):
    """`isolated` as a bool array of shape (n,) on the graph's device."""
    try:
        mask = xp.asarray(isolated)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"isolated must be a bool array of shape ({n},); got {exc}") from None
    if mask.dtype != bool or mask.shape != (n,):
        raise ValueError(
            f"isolated must be a bool array of shape ({n},) (one flag per vertex); got "
            f"dtype {mask.dtype}, shape {tuple(mask.shape)}"
        )
    return mask


def _precomputed_graph(X, backend) -> Graph:
    """The affinity matrix `X`, validated (:func:`explorer._validation.check_affinity`),
    on the backend's device, as a :class:`~explorer.graph.Graph` with its statistics."""
    t0 = time.perf_counter()
    csr = check_affinity(X)
    timings = {"validate": time.perf_counter() - t0}
    on_device = array_module(csr) is not np
    if on_device != backend.is_gpu:
        t1 = time.perf_counter()
        move = backend.xp.asarray if backend.is_gpu else to_numpy
        # Assembled from the arrays: a constructor would narrow int64 indices.
        csr = csr_from_arrays(move(csr.data), move(csr.indices), move(csr.indptr),
                              csr.shape, canonical=True)
        timings["to_device" if backend.is_gpu else "to_host"] = time.perf_counter() - t1
    t1 = time.perf_counter()
    stats = csr_stats(csr)
    timings["stats"] = time.perf_counter() - t1
    return Graph(
        csr=csr, rule=None, stats=stats, timings=timings, backend=backend.name,
        method="precomputed", method_reason="affinity='precomputed': X is the graph",
    )


def _scaled(X, scale):
    """``(scaler, X scaled)`` under `scale`; ``(None, X)`` without, after warning when the
    features' spreads differ by orders of magnitude."""
    if scale is None:
        check_feature_scales(X)
        return None, X
    scaler = fit_scaler(X, scale)
    return scaler, scaler.transform(X)


#: Up to this many values (n·d), :func:`_warn_duplicates` counts distinct rows.
DUPLICATE_CHECK_SIZE = 10**7


def _warn_duplicates(X, n_clusters) -> None:
    """Warn when `X` has fewer distinct rows than k: identical points cannot be told
    apart, and their split among clusters is arbitrary (an eigenspace without a
    preferred direction)."""
    if isinstance(n_clusters, str) or array_module(X) is not np or X.size > DUPLICATE_CHECK_SIZE:
        return
    k = int(n_clusters)
    if k < 2 or k > X.shape[0]:
        return
    # k distinct rows among the first few settle it (sorting every row took 0.085 s of
    # a 1.5 s fit on 10⁵ points); only data that fail there are counted in full.
    if np.unique(X[: 64 * k], axis=0).shape[0] >= k:
        return
    distinct = int(np.unique(X, axis=0).shape[0])
    if distinct < k:
        warnings.warn(
            f"X has only {distinct} distinct point(s) among its n={X.shape[0]} rows, fewer "
            f"than n_clusters={k}: identical points cannot be told apart, so how they are "
            f"split among the {k} clusters is arbitrary; lower n_clusters to at most "
            f"{distinct} or remove the duplicates",
            UserWarning, stacklevel=3,
        )


def check_params(estimator) -> BuildOptions:
    """Validate a :class:`SpectralClustering`'s parameters as :meth:`~SpectralClustering.fit`
    does first, and return its :class:`~explorer.graph.BuildOptions` (public for the
    distributed fit, which takes the same parameters).

    Raises
    ------
    ValueError, TypeError
        A parameter out of range, naming it.
    """
    return estimator._check_params()


def warn_components(n_components: int, n_isolated: int, k: int, n_dropped: int, *,
                    n_stray: int = 0, stray_pieces: int = 0,
                    stray_size: int | None = None) -> None:
    """Warn that some components were left out and which vertices lost a label.

    Public for the distributed fit, which warns the same way.

    Parameters
    ----------
    n_components : int
        Connected components besides the isolated vertices.
    n_isolated : int
        Isolated vertices (degree 0).
    k : int
        Number of clusters.
    n_dropped : int
        Vertices left out (labelled -1), the stray pieces' included.
    n_stray, stray_pieces, stray_size : int
        Vertices and number of the stray pieces left out, and the size under which a
        component was one (see :func:`partition_graph`).
    """
    if not stray_pieces:
        warnings.warn(
            f"the graph has {n_components} connected components besides its {n_isolated} "
            f"isolated vertices, more than k={k}: the {k} largest are the clusters and the "
            f"{n_dropped} vertices of the other {n_components - k} are left unclustered "
            "(label -1); raise the threshold (or sigma; n_neighbors for a kNN graph) to "
            "join them",
            UserWarning,
            stacklevel=3,
        )
        return
    left = n_components - stray_pieces
    beyond = (f"; the {k} largest of the other {left} are the clusters and the "
              f"{n_dropped - n_stray} vertices of the remaining {left - k} are left "
              "unclustered" if n_dropped > n_stray else "")
    warnings.warn(
        f"the graph has {n_components} connected components besides its {n_isolated} "
        f"isolated vertices (k={k}): {stray_pieces} stray piece(s) of fewer than "
        f"{stray_size} points ({n_stray} vertices) are left unclustered (label -1){beyond}; "
        "raise the threshold (or sigma; n_neighbors for a kNN graph) to join them",
        UserWarning,
        stacklevel=3,
    )


def _like_input(labels, X):
    """`labels` as the array kind of `X` (NumPy for anything that is not CuPy)."""
    if array_module(X) is np:
        return to_numpy(labels)
    import cupy

    return cupy.asarray(labels)
