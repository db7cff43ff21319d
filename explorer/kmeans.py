"""k-means for NumPy and CuPy arrays: k-means++ or k-means|| seeding, GEMM Lloyd
iterations, float64 centroid accumulation (the accurate update of "Parallelization of the
k-means Algorithm in a Spectral Clustering Chain on CPU-GPU Platforms"),
scikit-learn's centre-shift stop; the restarts advance together.

The same code runs on both backends; the array module is the one of ``X``.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from scipy.spatial import cKDTree
from sklearn.base import BaseEstimator, ClusterMixin
from sklearn.utils.validation import check_is_fitted

from ._backend import array_module, chunk_rows, column_sums, sparse_module, to_numpy
from ._persistence import host_state
from ._validation import (
    check_choice,
    check_data,
    check_features,
    check_random_state,
    real_matrix,
)
from .engines import engine_for
from .inputs import prepare_input
from .params import KMEANS_INITS, KMEANS_PARAMS, check_params

INITS = KMEANS_INITS

#: ``init="auto"`` seeds by k-means|| from this many samples on, by greedy k-means++
#: below. Greedy k-means++ makes k - 1 passes over the data per restart, one after
#: the other; k-means|| makes PARALLEL_ROUNDS + 2 for all restarts together, then
#: each restart runs the greedy steps over its ~10k candidates. Below this size
#: every seeding is cheap, and auto gives scikit-learn's. Seeding one restart on an
#: H200 (n = 5·10⁶, k = d = 64): greedy 112 ms; k-means|| 54 ms once, then 5 ms.
PARALLEL_MIN_SAMPLES = 100_000

#: Up to this many clusters a k-means|| restart reduces its ~10k candidates by greedy
#: k-means++; above, by :func:`reduce_candidates`. The greedy reduction is k sequential
#: steps, which once k is in the thousands cost as much as greedy steps over the whole
#: data (launches, not rows, dominate a step on the GPU): on an H200 at n = 10⁶,
#: d = 4, one restart, k = 1024, fit 0.65 s with greedy-reduced k-means|| against
#: 0.55 s greedy k-means++; k = 4096, 3.2 s against 2.6 s. The batched reduction
#: takes :data:`REDUCTION_ROUNDS` + :data:`REDUCTION_LLOYD_ITER` steps whatever k, so
#: ``init="auto"`` seeds every k above this limit by k-means|| (any n: greedy
#: k-means++ is k - 1 steps too). On an H200, k = 4096, ``KMeans(n_init=1,
#: max_iter=1).fit`` (seeding, one step, inertia): n = 10⁷, d = 4, 15.2 s with greedy
#: k-means++ against 0.47 s; n = 10⁶, d = 784, 7.6 s against 5.4 s, where k-means||'s
#: candidate rounds are cuBLAS products of ~30 steps' work (an earlier form of the
#: reduction, pools of 2x the batch without greedy trials;
#: benchmarks/results/large-kmeans-*.json).
PARALLEL_MAX_CLUSTERS = 512

#: Batches of :func:`reduce_candidates`'s k-means++ (k / this many centres per batch).
REDUCTION_ROUNDS = 32

#: Each batch of :func:`reduce_candidates` picks its centres from a pool of this many
#: times as many candidates drawn by mass: the pool must hold every region still
#: without a centre, or two picks share one (with 2, on 4096 separated blobs, about
#: 25 of the 4096 were left without a centre).
REDUCTION_POOL = 8

#: Weighted Lloyd steps of :func:`reduce_candidates` over the k-means|| candidates.
REDUCTION_LLOYD_ITER = 10

#: k-means|| sampling rounds (Bahmani et al. 2012 found 5 enough; Spark uses 2).
PARALLEL_ROUNDS = 5

#: k-means|| draws about OVERSAMPLING·k candidates per round (cuML's default factor).
OVERSAMPLING = 2.0

#: k-means|| candidates (m rows) are reduced to k centres on the host while a greedy
#: step touches at most this many values, m·(d + 2 + ln k): on the GPU a step is a
#: dozen launches, about 0.5 ms of host time, whatever m is. Measured on an H200 and
#: its host: m = 670, d = 64, k = 64 (work 46·10³), 5 ms a restart on the host;
#: m = 10⁴, d = 4, k = 1024 (130·10³), 0.50 s against 0.66 s on the GPU;
#: m = 4·10⁴, d = 4, k = 4096 (580·10³), 9.0 s against 2.3 s.
HOST_REDUCTION_MAX_WORK = 1 << 18


class KMeans(ClusterMixin, BaseEstimator):
    """k-means clustering (Lloyd's algorithm) on NumPy or CuPy data.

    Parameters
    ----------
    n_clusters : int, default 8
        k, 1 <= k <= n_samples.
    init : {"auto", "k-means++", "k-means||", "random"} or array of shape \
(n_clusters, n_features), default "auto"
        ``"k-means++"``: greedy k-means++, as scikit-learn (each new centre is the
        best, by resulting potential, of ``2 + ln k`` candidates drawn with
        probability proportional to the squared distance to the nearest chosen
        centre). ``"k-means||"``: scalable k-means++ (Bahmani et al. 2012, cuML's
        default): 5 rounds each draw every point independently with probability
        ``2k · d²(x) / potential``; the ~10k candidates, weighted by the points
        nearest to them, are reduced to k centres by greedy k-means++. The candidates
        are drawn once per fit and every restart reduces them with draws of its own;
        above :data:`PARALLEL_MAX_CLUSTERS` clusters the reduction is
        :func:`reduce_candidates` (k-means++ in a few batches, then weighted Lloyd
        steps) instead of k sequential greedy steps.
        ``"auto"``: k-means|| from :data:`PARALLEL_MIN_SAMPLES` samples or above
        :data:`PARALLEL_MAX_CLUSTERS` clusters, else k-means++. ``"random"``: k
        distinct data points. An array: these initial centres (then a single run).
    n_init : int, default 10
        Runs from different seeds; the one of lowest inertia is kept (the first of
        equals). The runs advance side by side, each to its own stop: on the GPU one
        launch per step serves all of them (see Notes).
    max_iter : int, default 300
        Maximum Lloyd iterations per run.
    tol : float, default 1e-4
        scikit-learn's rule: a restart stops when the squared shift of its centres in
        an iteration, summed over the centres, is at most ``tol`` times the mean over
        features of the data's variance (:func:`variance_tolerance`), or when no label
        changed (the only stop at ``tol=0``). The centre shift, unlike a count of
        points changing label, does not keep a restart going while a few border
        points trade places between nearly fixed centres.
    random_state : int, numpy.random.RandomState or None
        Seeds the initialisation.

    Attributes
    ----------
    cluster_centers_ : ndarray of shape (n_clusters, n_features)
        Same array module as the training data; float64 for float64 data, else float32.
    labels_ : ndarray of int32, shape (n_samples,)
        Label of each training point, consistent with `cluster_centers_` (a final
        assignment runs when the loop stopped with points still moving).
    inertia_ : float
        Sum of squared distances of the points to their centres, accumulated in float64.
    n_iter_ : int
        Lloyd iterations of the kept run.
    n_features_in_ : int
    feature_names_in_ : ndarray of str objects, shape (n_features_in_,)
        The column names of X, when X was a DataFrame with string column names.

    Notes
    -----
    **Input** follows scikit-learn's conventions and messages (``fit`` and
    ``predict``): lists, DataFrames and object arrays of numbers are accepted;
    complex, 1-D, empty, NaN/inf and sparse X are refused with its wording plus ours,
    and ``predict`` checks the number of features (and their names) against ``fit``.

    **Repeatability.** NumPy input gives the same result for the same `random_state`.
    On CuPy input the float64 centroid sums are added with atomic operations in an
    order that varies, so repeats may differ in the last bits of the centres (and in
    labels only at exact ties). The scikit-learn tags describe NumPy input
    (deterministic), the only kind scikit-learn's checks give.

    **Pickling.** A fitted estimator pickles with CuPy attributes copied to NumPy (see
    ``__getstate__``), so one fitted on the GPU loads without CuPy or a GPU.

    **Distances.** The assignment uses ``||x||^2 - 2 x·c + ||c||^2`` with the cross
    term as one matrix product per chunk of rows (BLAS / cuBLAS), in float32. The data
    are centred first (mean subtracted in float64, then cast to float32), as in
    scikit-learn, so a large common offset does not cancel away the digits of the
    distances.

    **Accurate centroid update (that paper).** Summing millions of float32 points one
    after the other lets rounding errors grow with n, and the paper shows it degrades
    the centroids; it offers two cures: two-step "package" sums, or float64 arithmetic.
    Here each chunk of rows is a package whose per-cluster sums are formed directly in
    float64 (a one-hot sparse matrix times the chunk, cast to float64), and the package
    sums are added in float64. The float64 cast costs one chunk-sized buffer, the data
    stay float32, and the sums are exact to float64 rounding — as accurate as the
    paper's double-precision variant, at the memory cost of its single-precision one.
    The counts come from the same product (a column of ones). On 10^6 × 8 float32
    points and k = 16 (one CPU core) one pass of this product took 0.045 s, against
    0.07 s for a ``bincount`` per column and 0.18 s for sort + ``add.reduceat``.

    **On the GPU** a step is one of two things (``kernels/kmeans.py`` gives the
    measurements behind the choice). For small k·d (k·d ≤ 128: up to 11 clusters
    of a k-dimensional embedding), and for any k whose sums fit a block's shared memory
    when d ≤ 4, the assignment, the distances and the float64 sums are one fused
    kernel that reads each row once: 0.34 ms per step at n = 5·10⁶, k = d = 4 on an
    H200. Otherwise cuBLAS forms the cross terms a block of rows at a time, one kernel
    picks each row's nearest centre and another forms the float64 sums, keeping a
    running sum per run of rows of one label. The inertia is one float64 pass too.

    **Restarts side by side.** The `n_init` restarts are seeded together (one set of
    launches per greedy k-means++ step for all of them) and iterate together: on the
    GPU a step is one fused launch for every running restart (a grid row each) where
    the fused step pays, then one launch that forms every restart's means, centre
    shift and empty clusters, then one transfer of three numbers per restart; each
    restart stops on its own rule. For many features the cross terms come from TF32
    tensor cores and every row whose two nearest centres lie within the rounding
    bound is re-checked in float64 (``explorer.kernels.kmeans.nearest_checked``), so
    the labels are those of the exact distances; while many rows would be re-checked
    the product is the split ("3xTF32") one, one TF32 GEMM over the data's TF32 high
    and low parts, whose bound is tens of times smaller. On the CPU a step is
    :func:`assign_nearest` per restart, as before.

    **Empty clusters** are re-seeded at the points farthest from their centres.
    """

    def __init__(
        self,
        n_clusters=8,
        *,
        init="auto",
        n_init=10,
        max_iter=300,
        tol=1e-4,
        random_state=None,
    ):
        self.n_clusters = n_clusters
        self.init = init
        self.n_init = n_init
        self.max_iter = max_iter
        self.tol = tol
        self.random_state = random_state

    def fit(self, X, y=None):
        """Compute the clustering of `X` (NumPy or CuPy, n_samples × n_features).

        A Dask array (NumPy or CuPy chunks) is clustered on the dask.distributed
        cluster of the Client in scope (:func:`explorer.distributed.kmeans_fit`);
        `labels_` is then a Dask array with X's row chunks: computed at the fit (and
        valid after the client closes) up to 1 GiB of labels, else left on the workers
        (compute it before closing the client; see ``explorer.distributed._labels``).

        Returns
        -------
        self
        """
        params = check_params(KMEANS_PARAMS, self.get_params())
        data = prepare_input(X, min_samples=1, center="mean")
        n, d = data.n, data.d
        k = params["n_clusters"]
        if k > n:
            raise ValueError(
                f"n_clusters={k} is more than the n={n} samples of X; "
                f"allowed: 1 <= n_clusters <= {n}"
            )
        init = params["init"]
        if not isinstance(init, str):
            init = self._check_init(k, d)  # an array: in the fitted space, float64
        engine = engine_for(X)
        if engine is None:
            check_features(self, X, reset=True)
            if not isinstance(init, str):
                init = data.to_working_points(array_module(data.X).asarray(init))
            centers, labels, inertia, n_iter = _fit_in_process(
                data.X, k, init, params["n_init"], params["max_iter"], params["tol"],
                check_random_state(params["random_state"]), centred=data.shift is not None)
        else:
            self.n_features_in_ = d
            if not isinstance(init, str):
                init = data.to_working_points(np.asarray(init))
            centers, labels, inertia, n_iter = engine.kmeans(data, {**params, "init": init})
        self.input_ = replace(data, X=None)
        out = array_module(centers).float64 if data.float64 else array_module(centers).float32
        self.cluster_centers_ = data.to_user_points(centers).astype(out)
        self.labels_ = labels
        self.inertia_ = float(inertia) / data.unit**2
        self.n_iter_ = int(n_iter)
        return self

    def predict(self, X):
        """Label of the nearest fitted centre for each row of `X` (same array module)."""
        check_is_fitted(self, "cluster_centers_")
        A = real_matrix(X, min_samples=1)
        # "X has 1 features, but KMeans is expecting 4 features as input", and the
        # feature names of a DataFrame against those seen in fit.
        check_features(self, X, reset=False)
        data = prepare_input(A, min_samples=1, like=getattr(self, "input_", None))
        X32 = data.X
        xp = array_module(X32)
        C = data.to_working_points(xp.asarray(self.cluster_centers_))
        # Any common shift leaves the argmin unchanged; the centres' mean keeps the
        # float32 distances well conditioned, as the centring in fit does.
        Xc, shift, _ = centre(X32, C.mean(axis=0))
        x_sq = row_sq_norms(Xc, xp)
        chunk = chunk_rows(xp, max(C.shape[0], data.d))
        labels, _, _ = assign_nearest(Xc, x_sq, C - shift, chunk, xp, want_sums=False)
        return labels

    def fit_predict(self, X, y=None):
        """Fit, then return `labels_`."""
        return self.fit(X).labels_

    def __getstate__(self):
        """The pickled state, with CuPy attributes of a fit on CuPy data
        (`cluster_centers_`, `labels_`) copied to NumPy, so that the pickle loads
        where CuPy or a GPU is missing; it then holds NumPy arrays."""
        return host_state(super().__getstate__())

    def _check_init(self, k, d):
        init = self.init
        if isinstance(init, str):
            return check_choice(init, "init", INITS)
        arr = np.asarray(init.get() if hasattr(init, "get") else init)
        if arr.dtype == object or not np.issubdtype(arr.dtype, np.number):
            raise TypeError(f"init must be one of {INITS} or an array; got {init!r}")
        if arr.shape != (k, d):
            raise ValueError(
                f"init array has shape {arr.shape}; it must be (n_clusters, n_features) = {(k, d)}"
            )
        if not np.isfinite(arr).all():
            raise ValueError("init array contains NaN or inf")
        return arr


# --------------------------------------------------------------------------- helpers


def _fit_in_process(X, k, init, n_init, max_iter, tol, rng, *, centred=False):
    """k-means of the validated float32 points `X` (NumPy or CuPy) in this process:
    ``(centres, labels, inertia, n_iter)`` of the best of `n_init` restarts
    (:func:`_fit_starts`), the centres in X's space (float64). `X` is centred on its
    float32 mean first, unless it is `centred` already (the input stage took a float64
    mean off)."""
    xp = array_module(X)
    if centred:
        Xc, mean = X, xp.zeros(X.shape[1], dtype=xp.float64)
    else:
        Xc, mean, _ = centre(X)
    n = Xc.shape[0]
    if not isinstance(init, str):
        init = xp.asarray(init, dtype=xp.float64) - mean
        n_init = 1
    elif init == "auto":
        parallel = n >= PARALLEL_MIN_SAMPLES or k > PARALLEL_MAX_CLUSTERS
        init = "k-means||" if parallel else "k-means++"
    x_sq = row_sq_norms(Xc, xp)
    centers, labels, inertia, n_iter = _fit_starts(Xc, x_sq, k, init, n_init, max_iter,
                                                   tol, rng, xp)
    return centers + mean, labels, inertia, n_iter


def centre(X, shift=None):
    """Validate X and centre it: (float32 X - shift, the float64 shift, output dtype).

    Public for the distributed k-means, whose blocks follow the same rules.

    `shift` defaults to the mean of X. float64 data are shifted in float64 before the
    float32 cast, so a large common offset costs no digits of the differences.
    """
    X32 = check_data(X, min_samples=1, center=False)
    xp = array_module(X32)
    if array_module(X) is xp and getattr(X, "dtype", None) == xp.float64:
        shift = column_sums(X, xp) / X.shape[0] if shift is None else shift
        return (X - shift).astype(xp.float32), shift, xp.float64
    if shift is None:
        shift = column_sums(X32, xp) / X32.shape[0]
    # Subtract (and report) the float32 rounding of the shift, exactly.
    shift = shift.astype(xp.float32)
    return X32 - shift, shift.astype(xp.float64), xp.float32


def row_sq_norms(X, xp):
    """Squared Euclidean norms of the rows of X, in X's dtype (public for the
    distributed k-means, which prepares its blocks the same way)."""
    return xp.einsum("ij,ij->i", X, X)


def sqdist(X, x_sq, C):
    """Squared distances (float32) of the rows of X to the rows of C, clipped at 0.

    Parameters
    ----------
    X : array of shape (n, d), float32 (NumPy or CuPy)
    x_sq : array of shape (n,)
        :func:`row_sq_norms` of X.
    C : array of shape (m, d), float32, same module

    Returns
    -------
    array of shape (n, m), float32
    """
    D = X @ (-2.0 * C.T)
    D += (C * C).sum(axis=1)[None, :]
    D += x_sq[:, None]
    return array_module(D).maximum(D, 0, out=D)


def _initial_centers(X, x_sq, k, init, rng, xp, pool=None):
    n, d = X.shape
    if not isinstance(init, str):
        return init
    if init == "random":
        idx = rng.choice(n, size=k, replace=False)
        return X[xp.asarray(idx)].astype(xp.float64)
    if init == "k-means||":
        candidates, cand_sq, weights = pool
        cm = array_module(candidates)
        if k > PARALLEL_MAX_CLUSTERS:
            return xp.asarray(reduce_candidates(candidates, cand_sq, weights, k, rng, cm))
        return xp.asarray(kmeans_plusplus(candidates, cand_sq, k, rng, cm, weights=weights))
    return kmeans_plusplus(X, x_sq, k, rng, xp)


def kmeans_plusplus(X, x_sq, k, rng, xp, *, weights=None):
    """Greedy k-means++: of ``2 + ln k`` D²-sampled candidates, keep the best.

    Public for the distributed k-means, which seeds from a weighted sample this way.

    With `weights` (float64, one per row), row i stands for weights[i] points: draws
    are proportional to weight times squared distance (the first to weight alone),
    and potentials are weighted sums.

    The loop never waits for the device, so on the GPU a step is a dozen queued
    launches (three round trips each made the steps of k in the thousands wait).
    When every row sits on a chosen centre (fewer distinct points than k) all draws
    land on the first row, which is as good as any.
    """
    n = X.shape[0]
    trials = 2 + int(np.log(k))
    centers = xp.empty((k, X.shape[1]), dtype=xp.float64)
    if weights is None:
        first = int(rng.randint(n))
    else:
        cum_weights = xp.cumsum(weights)
        target = xp.asarray([rng.uniform() * float(cum_weights[-1])])
        first = min(int(xp.searchsorted(cum_weights, target)[0]), n - 1)
    centers[0] = X[first]
    closest = sqdist(X, x_sq, X[first : first + 1])[:, 0]
    mass = closest if weights is None else closest * weights
    # All the draws in one transfer (a copy from the host waits for the queued work).
    uniforms = xp.asarray(rng.uniform(size=(k - 1, trials)))
    for c in range(1, k):
        cumulative = xp.cumsum(mass, dtype=xp.float64)
        targets = uniforms[c - 1] * cumulative[-1]
        candidates = xp.minimum(xp.searchsorted(cumulative, targets), n - 1)
        dist = xp.minimum(sqdist(X, x_sq, X[candidates]), closest[:, None])
        weighted = dist if weights is None else dist * weights[:, None]
        best = xp.argmin(column_sums(weighted, xp))
        centers[c] = X[candidates[best]]
        closest = dist[:, best]
        mass = weighted[:, best]
    return centers


def reduce_candidates(C, c_sq, weights, k, rng, xp, *, n_iter=REDUCTION_LLOYD_ITER):
    """k centres from weighted points: the k-means|| reduction for many clusters.

    Bahmani et al. (2012) recluster the weighted candidates into k by any weighted
    k-means; greedy k-means++ (:func:`kmeans_plusplus`) takes k sequential steps,
    which at k in the thousands cost seconds of launches on the GPU. Here k-means++
    runs in :data:`REDUCTION_ROUNDS` batches. The first centre is drawn by weight;
    each batch then draws a pool of :data:`REDUCTION_POOL` times its share of the k
    distinct candidates at once, without replacement, with probability proportional
    to weight times the squared distance to the nearest centre so far
    (Efraimidis-Spirakis keys ``log(u) / mass``, the largest win), and picks its
    share from the pool one by one on the host as greedy k-means++ does (of
    ``2 + ln k`` draws by mass, the one leaving the least weighted potential in the
    pool), each pick lowering the pool's distances (drawing the share directly put
    two centres in one region and none in another far too often). Then `n_iter`
    weighted Lloyd steps over the candidates move the centres (a centre left without
    weight stays where it is).

    Parameters
    ----------
    C : float32 array of shape (m, d), m >= k (NumPy or CuPy)
        The candidates.
    c_sq : array of shape (m,)
        :func:`row_sq_norms` of C.
    weights : float64 array of shape (m,)
        The points each candidate stands for.
    k : int
    rng : numpy.random.RandomState
    xp : module
        C's array module.
    n_iter : int
        Weighted Lloyd steps.

    Returns
    -------
    float64 array of shape (k, d), C's module
    """
    m, d = C.shape
    w = xp.asarray(weights, dtype=xp.float64)
    draws = xp.random.RandomState(int(rng.randint(2**31 - 1)))
    cumulative = xp.cumsum(w)
    target = xp.asarray([rng.uniform() * float(cumulative[-1])])
    first = min(int(xp.searchsorted(cumulative, target)[0]), m - 1)
    index = xp.asarray([first])
    closest = sqdist(C, c_sq, C[first : first + 1])[:, 0].astype(xp.float64)
    taken = xp.zeros(m, dtype=bool)
    taken[first] = True
    per_round = -(-(k - 1) // REDUCTION_ROUNDS)
    trials = 2 + int(np.log(k))
    chunk = chunk_rows(xp, max(per_round, d))
    while index.shape[0] < k:
        b = min(per_round, k - index.shape[0])
        mass = xp.where(taken, 0.0, closest * w)
        # A pool of POOL_FACTOR·b rows without replacement, by mass: the largest of
        # log(u) / mass (rows without mass behind every other, a taken row never).
        with np.errstate(divide="ignore"):
            keys = xp.log(draws.random_sample(m)) / xp.where(mass > 0, mass, 1.0)
        keys[mass <= 0] = -1e300
        keys[taken] = -xp.inf
        pool = xp.argsort(-keys)[: min(REDUCTION_POOL * b, m - index.shape[0])]
        # ... from which b are picked one by one on the host by D² x weight, each pick
        # lowering the pool's distances (from the pool's Gram matrix, formed on C's
        # device): two picks rarely share a region.
        P = C[pool].astype(xp.float64)
        gram = to_numpy(P @ P.T)
        sq = np.diag(gram).copy()
        pool_w = to_numpy(w[pool])
        pool_d = to_numpy(closest[pool])
        chosen = []
        for _ in range(b):
            pool_mass = pool_d * pool_w
            pool_mass[chosen] = 0.0
            total = pool_mass.sum()
            if total > 0:  # greedy: of `trials` draws, the one leaving the least mass
                draws_at = np.searchsorted(np.cumsum(pool_mass), rng.uniform(size=trials) * total)
                tries = np.minimum(draws_at, len(pool_mass) - 1)
                dist = np.minimum(pool_d[None, :], np.maximum(
                    sq[None, :] + sq[tries, None] - 2.0 * gram[tries], 0.0))
                best = int(np.argmin(dist @ pool_w))
                pick, pool_d = int(tries[best]), dist[best]
            else:
                pick = next(i for i in range(len(pool_mass)) if i not in chosen)
            chosen.append(pick)
        new = pool[xp.asarray(chosen)]
        taken[new] = True
        index = xp.concatenate([index, new])
        _, dist, _ = assign_nearest(C, c_sq, C[new].astype(xp.float64), chunk, xp,
                                    want_sums=False)
        closest = xp.minimum(closest, dist)
    centers = C[index].astype(xp.float64)
    chunk = chunk_rows(xp, max(k, d))
    block = xp.empty((m, d + 1), dtype=xp.float64)
    block[:, :d] = C
    block[:, d] = 1.0
    sp = sparse_module(xp)
    rows = xp.arange(m + 1, dtype=xp.int32)
    for _ in range(n_iter):
        labels, _, _ = assign_nearest(C, c_sq, centers, chunk, xp, want_sums=False)
        # Weighted one-hot (m × k) transposed times [C, 1]: weighted sums and masses.
        sums = sp.csr_matrix((w, labels, rows), shape=(m, k)).T @ block
        mass = sums[:, d]
        held = mass > 0
        centers = xp.where(held[:, None], sums[:, :d] / xp.where(held, mass, 1.0)[:, None],
                           centers)
    return centers


def _oversample(X, x_sq, k, rng, xp):
    """k-means|| candidates (Bahmani et al. 2012): one point drawn uniformly, then
    :data:`PARALLEL_ROUNDS` rounds that each draw every point independently with
    probability ``min(1, l · d²(x) / potential)``, ``l = OVERSAMPLING · k``, d² the
    squared distance to the candidates so far.

    Returns
    -------
    candidates : float32 array (m, d), on the host when a greedy reduction of them is
        small (see :data:`HOST_REDUCTION_MAX_WORK`), else on X's device
    cand_sq : their squared norms
    weights : float64 array (m,), the number of rows nearest to each candidate
    """
    n, d = X.shape
    ell = OVERSAMPLING * k
    # The n uniform draws of a round come from the array module's own generator
    # (host draws would cost more than the round), seeded from `rng`.
    draws = xp.random.RandomState(int(rng.randint(2**31 - 1)))
    first = int(rng.randint(n))
    picked = [xp.asarray([first])]
    closest = sqdist(X, x_sq, X[first : first + 1])[:, 0]
    for _ in range(PARALLEL_ROUNDS):
        potential = float(closest.sum(dtype=xp.float64))
        if potential <= 0:  # every point sits on a candidate
            break
        chosen = xp.flatnonzero(draws.random_sample(n) * potential < ell * closest)
        if chosen.size == 0:
            continue
        new = X[chosen].astype(xp.float64)
        _, dist, _ = assign_nearest(X, x_sq, new, chunk_rows(xp, max(len(chosen), d)), xp,
                                    want_sums=False)
        closest = xp.minimum(closest, dist)
        picked.append(chosen)
    index = xp.concatenate(picked)
    if index.shape[0] < k:
        # Rare (about as few distinct points as k): add the farthest points, which
        # the reduction may then pick; where they coincide with candidates, any is.
        farthest = xp.argsort(-closest)[: k - index.shape[0]]
        index = xp.concatenate([index, farthest])
    m = index.shape[0]
    candidates = X[index]
    labels, _, _ = assign_nearest(X, x_sq, candidates.astype(xp.float64),
                                  chunk_rows(xp, max(m, d)), xp, want_sums=False)
    weights = xp.bincount(labels, minlength=m).astype(xp.float64)
    if k <= PARALLEL_MAX_CLUSTERS and m * (d + 2 + np.log(k)) <= HOST_REDUCTION_MAX_WORK:
        candidates, weights = to_numpy(candidates), to_numpy(weights)
    cm = array_module(candidates)
    return candidates, row_sq_norms(candidates, cm), weights


def assign_nearest(X, x_sq, centers, chunk, xp, *, want_sums):
    """Nearest centre of every row, its squared distance, and (optionally) the float64
    per-cluster sums of the rows with their counts as a last column.

    The assignment step of Lloyd's algorithm (and, with `want_sums`, the sums of the
    update step), on X's device.

    Parameters
    ----------
    X : float32 ndarray of shape (n, d)
        The (centred) rows, NumPy or CuPy.
    x_sq : float32 ndarray of shape (n,)
        Squared norms of the rows of X.
    centers : float64 ndarray of shape (k, d)
        On X's device.
    chunk : int
        Rows per matrix product (:func:`explorer._backend.chunk_rows`).
    xp : module
        The array module of X.
    want_sums : bool
        Also return the per-cluster sums.

    Returns
    -------
    labels : int32 ndarray of shape (n,)
    min_sqdist : float32 ndarray of shape (n,)
        Squared distance of each row to its centre, clipped at 0.
    sums : float64 ndarray of shape (k, d + 1) or None
        Per-cluster sums of the rows, their counts in the last column; None without
        `want_sums`.

    Notes
    -----
    On the GPU, one fused kernel pass with the centres in registers where that pays
    (``explorer.kernels.kmeans.fused_step_pays``), the tiled kernel for other k at few
    features (``tiled_step_pays``), else the GEMM path's kernels (``gemm_step``); on
    the CPU :func:`assign_nearest_by_tree` for many centres in few dimensions
    (:data:`TREE_MAX_FEATURES`, :data:`TREE_MIN_CLUSTERS`), else
    :func:`assign_nearest_by_products`.
    """
    n, d = X.shape
    k = centers.shape[0]
    if xp is not np:
        from explorer.kernels.kmeans import (
            fused_step_pays,
            gemm_step,
            kmeans_step,
            tiled_step,
            tiled_step_pays,
        )

        if fused_step_pays(k, d):  # one pass over the rows, centres in registers
            return kmeans_step(X, x_sq, centers, want_sums=want_sums)
        if tiled_step_pays(k, d):  # few features: no n × k block of cross terms
            return tiled_step(X, x_sq, centers, want_sums=want_sums)
        return gemm_step(X, x_sq, centers, want_sums=want_sums, chunk=chunk)
    if d <= TREE_MAX_FEATURES and k >= TREE_MIN_CLUSTERS:
        return assign_nearest_by_tree(X, centers, want_sums=want_sums)
    return assign_nearest_by_products(X, x_sq, centers, chunk, xp, want_sums=want_sums)


#: The CPU assigns rows through a kd-tree of the centres up to this many features...
TREE_MAX_FEATURES = 3

#: ...from this many centres. The products cost n·k·d per step whatever the geometry;
#: a tree query about n·log k. The representatives' k-means (k = 2048, 65 536 sampled
#: 2-D rows, 2 cores): 4.2 s of a 4.6 s fit at 2·10⁵ points by products.
TREE_MIN_CLUSTERS = 64


def assign_nearest_by_tree(X, centers, *, want_sums):
    """:func:`assign_nearest` on the CPU through a kd-tree of the centres.

    Same returns as :func:`assign_nearest`. The nearest centre by float64 distance
    (SciPy's ``cKDTree.query``, on every core); the squared distances to it in float32
    as the products path gives them; the sums by ``numpy.bincount`` in float64.
    """
    n, d = X.shape
    k = centers.shape[0]
    tree = cKDTree(np.asarray(centers, dtype=np.float64))
    _, lab = tree.query(np.asarray(X, dtype=np.float64), k=1, workers=-1)
    labels = lab.astype(np.int32)
    diff = X - centers.astype(np.float32)[labels]
    mind = np.einsum("ij,ij->i", diff, diff)
    sums = None
    if want_sums:
        sums = np.empty((k, d + 1), dtype=np.float64)
        for j in range(d):
            sums[:, j] = np.bincount(labels, weights=X[:, j], minlength=k)
        sums[:, d] = np.bincount(labels, minlength=k)
    return labels, mind, sums


#: Up to this many centres :func:`assign_nearest_by_products` forms the cross terms
#: one centre per row (k × rows) and keeps a running minimum over the k rows; above,
#: rows × k and ``argmin`` along the short axis. NumPy's argmin over a few columns of
#: each row and the gather of the winners cost more than the product: 10⁵ 2-D rows
#: on one core, k = 2: 2.9 against 0.75 ms a step; k = 10: 4.4 against 3.0 ms;
#: k = 32: 11.3 against 9.1 ms (same labels: both keep the first of equal minima).
RUNNING_MIN_MAX_CLUSTERS = 32


def assign_nearest_by_products(X, x_sq, centers, chunk, xp, *, want_sums):
    """:func:`assign_nearest` by matrix products, a chunk of rows at a time.

    Same parameters and returns as :func:`assign_nearest`, on NumPy or CuPy.

    Notes
    -----
    The CPU's way; the GPU's is ``explorer.kernels.kmeans.gemm_step``, the same
    arithmetic in three kernels. ``argmin_c ||x - c||²`` is taken as ``argmin_c (||c||²
    - 2 x·c)`` in float32, ``||x||²`` added to the winning entry only; the sums are a
    one-hot matrix times each chunk of rows, accumulated in float64 (the accurate
    update of that paper). Up to :data:`RUNNING_MIN_MAX_CLUSTERS` centres the winner
    is a running minimum over contiguous rows of cross terms, above it ``argmin``.
    """
    n, d = X.shape
    k = centers.shape[0]
    # argmin_c ||x - c||^2 = argmin_c (||c||^2 - 2 x·c): ||x||^2 is added to the
    # winning entry only, which saves two passes over each n×k block.
    C32 = centers.astype(xp.float32)
    neg2_c = xp.ascontiguousarray(-2.0 * C32)
    c_sq = (C32 * C32).sum(axis=1)
    labels = xp.empty(n, dtype=xp.int32)
    mind = xp.empty(n, dtype=xp.float32)
    sums = xp.zeros((k, d + 1), dtype=xp.float64) if want_sums else None
    sp = sparse_module(xp) if want_sums else None
    for start in range(0, n, chunk):
        stop = min(start + chunk, n)
        if k <= RUNNING_MIN_MAX_CLUSTERS:
            lab, best = _running_min(neg2_c @ X[start:stop].T, c_sq, xp)
        else:
            D = X[start:stop] @ neg2_c.T
            D += c_sq[None, :]
            lab = xp.argmin(D, axis=1)
            best = xp.take_along_axis(D, lab[:, None], axis=1)[:, 0]
        labels[start:stop] = lab
        mind[start:stop] = xp.maximum(best + x_sq[start:stop], 0)
        if want_sums:
            lab = labels[start:stop]  # the int32 copy: CSR column indices
            rows = stop - start
            block = xp.empty((rows, d + 1), dtype=xp.float64)
            block[:, :d] = X[start:stop]
            block[:, d] = 1.0
            # One-hot (rows × k, one entry per row) transposed times the block: per-
            # cluster sums and counts of this package, accumulated in float64.
            onehot = sp.csr_matrix(
                (xp.ones(rows, dtype=xp.float64), lab, xp.arange(rows + 1, dtype=xp.int32)),
                shape=(rows, k),
            )
            sums += onehot.T @ block
    return labels, mind, sums


def _running_min(cross_t, c_sq, xp):
    """Index and value of the smallest ``cross_t[j] + c_sq[j]`` over j for each column
    of the k × rows cross terms (overwritten); the first j of equal values, as argmin."""
    cross_t += c_sq[:, None]
    best = cross_t[0]
    lab = xp.zeros(cross_t.shape[1], dtype=xp.int32)
    for j in range(1, cross_t.shape[0]):
        row = cross_t[j]
        lab[row < best] = j
        xp.minimum(best, row, out=best)
    return lab, best


def variance_tolerance(tol, sq_total, column_total, n, d):
    """scikit-learn's absolute stopping tolerance: `tol` times the mean over features of
    the data's variance.

    Lloyd's iterations stop once the squared centre shift, summed over all centres,
    is at most this (scikit-learn's ``_tolerance``). Public for the distributed
    k-means, which forms the totals from its row blocks.

    Parameters
    ----------
    tol : float
        The relative tolerance (``KMeans(tol=...)``).
    sq_total : float
        Sum over rows of the squared norms of the (centred) rows, float64.
    column_total : array of shape (d,)
        float64 column sums of the same rows.
    n, d : int
        Rows and features.

    Returns
    -------
    float
        ``tol * mean_t var(X[:, t])``; the variance is taken about the rows' own mean,
        so any common shift of the data leaves it unchanged.
    """
    mean = np.asarray(column_total, dtype=np.float64) / n
    variance = max(float(sq_total) / n - float(mean @ mean), 0.0) / d
    return float(tol) * variance


def kmeans_plusplus_starts(X, x_sq, k, draws, xp):
    """Greedy k-means++ for several restarts at once (unweighted rows).

    Each restart follows :func:`kmeans_plusplus` with its own draws: the first centre
    at row ``first``; then for c = 1 .. k - 1 the ``2 + ln k`` candidates at the
    quantiles ``uniforms[c - 1]`` of the running sum of the squared distances to the
    nearest chosen centre, the one leaving the least potential kept. The restarts
    advance together, so a step is one matrix product and one set of launches for
    all of them (on the GPU the restarts' steps, not their rows, dominate at the
    sizes of an embedding).

    Parameters
    ----------
    X : float32 array of shape (n, d) (NumPy or CuPy)
    x_sq : array of shape (n,)
        :func:`row_sq_norms` of X.
    k : int
    draws : list of (int, ndarray of shape (k - 1, 2 + int(ln k)))
        Per restart: the first row and the uniforms in [0, 1), drawn from the
        estimator's generator in restart order (as the distributed k-means draws them).
    xp : module
        X's array module.

    Returns
    -------
    float64 array of shape (len(draws), k, d), X's module

    Notes
    -----
    A draw is the first row whose running sum reaches ``u * total`` (as
    :func:`kmeans_plusplus`). On the GPU, up to ``explorer.kernels.kmeans.KPP_MAX_D``
    features, a step is two kernels for all restarts (``kpp_trials``, ``kpp_choose``)
    after the running sums: a chain of CuPy operations per step made the seeding of
    ``KMeans(10, n_init=10)`` on 60,000 rows most of the fit. Where a restart's
    potential is 0 (every row on a chosen centre) its draws land on its first row,
    which is as good as any.
    """
    n, d = X.shape
    S = len(draws)
    trials = 2 + int(np.log(k))
    if xp is not np:
        from explorer.kernels.kmeans import kmeans_plusplus_device, kpp_fits

        if kpp_fits(d, trials):
            return kmeans_plusplus_device(X, x_sq, k, draws)
    centers = xp.empty((S, k, d), dtype=xp.float64)
    first = xp.asarray(np.array([f for f, _ in draws], dtype=np.int64))
    centers[:, 0] = X[first]
    # Restarts per group: the n x (group * trials) block of trial distances within
    # the chunk budget of one product.
    group = max(1, chunk_rows(xp, 1) // max(1, n * trials))
    uniforms = xp.asarray(np.stack([u for _, u in draws]).reshape(S, max(k - 1, 0), trials))
    for g0 in range(0, S, group):
        g = min(group, S - g0)
        closest = xp.ascontiguousarray(sqdist(X, x_sq, X[first[g0 : g0 + g]]).T)  # (g, n)
        for c in range(1, k):
            cumulative = xp.cumsum(closest, axis=1, dtype=xp.float64)
            targets = uniforms[g0 : g0 + g, c - 1] * cumulative[:, -1:]
            rows = xp.minimum(xp.stack([xp.searchsorted(cumulative[r], targets[r])
                                        for r in range(g)]), n - 1)
            dist = sqdist(X, x_sq, X[rows.ravel()]).reshape(n, g, trials)
            dist = xp.minimum(dist, closest.T[:, :, None])
            potential = column_sums(dist.reshape(n, g * trials), xp).reshape(g, trials)
            best = xp.argmin(potential, axis=1)
            chosen = rows[xp.arange(g), best]
            centers[g0 : g0 + g, c] = X[chosen]
            closest = xp.ascontiguousarray(dist[:, xp.arange(g), best].T)
    return centers


def _initial_centers_starts(X, x_sq, k, init, n_init, rng, xp, pool):
    """The initial centres of the `n_init` restarts, float64 (n_init, k, d) on X's
    device; the draws come from `rng` in restart order (as :func:`_initial_centers`
    one restart after the other, and the distributed k-means)."""
    if isinstance(init, str) and init == "k-means++":
        trials = 2 + int(np.log(k))
        draws = []
        for _ in range(n_init):
            first = int(rng.randint(X.shape[0]))
            draws.append((first, rng.uniform(size=(k - 1, trials))))
        return kmeans_plusplus_starts(X, x_sq, k, draws, xp)
    return xp.stack([xp.asarray(_initial_centers(X, x_sq, k, init, rng, xp, pool),
                                dtype=xp.float64) for _ in range(n_init)])


def _fit_starts(Xc, x_sq, k, init, n_init, max_iter, tol, rng, xp):
    """Seed and run the `n_init` restarts of k-means on centred data, all together;
    keep the one of least inertia (the first of equals).

    Parameters
    ----------
    Xc : float32 array of shape (n, d) (NumPy or CuPy)
        The centred rows (:func:`centre`).
    x_sq : array of shape (n,)
        :func:`row_sq_norms` of Xc.
    k : int
    init : {"k-means++", "k-means||", "random"} or float64 array of shape (k, d)
        Resolved seeding (not "auto"); an array (already centred) means one restart.
    n_init, max_iter : int
    tol : float
        Relative tolerance: a restart stops once its squared centre shift, summed
        over the centres, is at most ``tol`` times the mean variance of the features
        (:func:`variance_tolerance`), or once no label changed.
    rng : numpy.random.RandomState
    xp : module
        Xc's array module.

    Returns
    -------
    centers : float64 array (k, d)
        Centred coordinates, Xc's module.
    labels : int32 array (n,)
    inertia : float
    n_iter : int
    """
    n, d = Xc.shape
    if not isinstance(init, str):
        n_init = 1
    pool = None
    if isinstance(init, str) and init == "k-means||":
        pool = _oversample(Xc, x_sq, k, rng, xp)
    centers = _initial_centers_starts(Xc, x_sq, k, init, n_init, rng, xp, pool)
    sq_total = float(x_sq.sum(dtype=xp.float64))
    tol_abs = variance_tolerance(tol, sq_total, to_numpy(column_sums(Xc, xp)), n, d)
    return _lloyd_starts(Xc, x_sq, centers, max_iter, tol_abs, xp)


def _lloyd_starts(X, x_sq, centers, max_iter, tol_abs, xp, record=None):
    """Lloyd's iterations for several restarts side by side; the best restart.

    Every iteration assigns the rows for all restarts still running and updates
    their centres (float64 means; empty clusters re-seeded at the rows farthest from
    their centres). A restart stops when no label changed, or when, without an empty
    cluster, the squared shift of its centres summed over them is at most `tol_abs`
    (scikit-learn's rule), or after `max_iter` iterations. A restart that stopped
    with labels not those of its final centres is assigned once more, so labels,
    centres and inertia agree.

    Parameters
    ----------
    X : float32 array (n, d), x_sq : its squared row norms
    centers : float64 array (S, k, d)
        Initial centres of the S restarts.
    max_iter : int
    tol_abs : float
        Absolute tolerance on the squared centre shift (:func:`variance_tolerance`).
    xp : module
    record : dict, optional
        Filled with ``"n_iter"`` (per restart), ``"steps"`` (iterations of the loop:
        the most of any restart) and ``"inertia"`` (per restart), for benchmarks.

    Returns
    -------
    (centers (k, d), labels (n,), inertia, n_iter) of the restart of least inertia.
    """
    S = centers.shape[0]
    runner = starts_runner(X, x_sq, centers, xp)
    if getattr(runner, "fused", False) or getattr(runner, "tiled", False):
        # The same rule, decided on the device (no wait for the host each step).
        n_iter, consistent, steps = runner.run(max_iter, tol_abs)
    else:
        n_iter, consistent, steps = host_loop(runner, S, max_iter, tol_abs)
    relabel = [s for s in range(S) if not consistent[s]]
    if relabel:
        runner.assign(relabel)
    inertias = runner.inertia()
    best = best_restart(inertias)
    if record is not None:
        record.update(n_iter=n_iter.tolist(), steps=steps, inertia=list(map(float, inertias)))
    centers, labels = runner.result(best)
    return centers, labels, float(inertias[best]), int(n_iter[best])


def host_loop(runner, S, max_iter, tol_abs):
    """Lloyd's iterations of the `S` restarts of `runner` to their stops, the rule
    decided on the host after every step (:func:`lloyd_stops`; empty clusters
    re-seeded at once). ``(n_iter, consistent, steps)`` as ``DeviceStarts.run`` gives
    them, which decides the same rule on the device."""
    n_iter = np.zeros(S, dtype=np.int64)
    consistent = np.zeros(S, dtype=bool)
    active = list(range(S))
    steps = 0
    while active:
        steps += 1
        changed, n_empty, shift = runner.step(active)
        still = []
        for i, s in enumerate(active):
            n_iter[s] += 1
            if n_empty[i]:
                runner.reseed_empty(s, int(n_empty[i]))
            # Unchanged labels give unchanged means: labels and centres then agree.
            consistent[s] = changed[i] == 0 and n_empty[i] == 0
            stop = lloyd_stops(changed[i], n_empty[i], shift[i], tol_abs)
            if not stop and n_iter[s] < max_iter:
                still.append(s)
        active = still
    return n_iter, consistent, steps


#: Restarts whose inertias differ by less than this relative amount are equal to
#: :func:`best_restart`: the same partition sums to inertias that differ in the last
#: digits with the order of the additions (rows, blocks, workers), and which restart
#: wins must not depend on that.
RESTART_TIE_RTOL = 1e-6


def best_restart(inertias) -> int:
    """The restart to keep, one rule for every path (one process, Dask, workers):
    in restart order, a restart replaces the one kept only when its inertia is less
    by more than :data:`RESTART_TIE_RTOL` of it. A scan, so a path that sees the
    restarts one at a time (:func:`explorer.distributed._resident.resident_lloyd`)
    keeps the same one without holding them all."""
    best = 0
    for i, value in enumerate(inertias):
        if float(value) < float(inertias[best]) * (1.0 - RESTART_TIE_RTOL):
            best = i
    return best


def update_centers(centers, sums, xp):
    """Lloyd's update step from float64 per-cluster sums (counts in the last column,
    as :func:`assign_nearest` gives them): ``(new centres, empty mask, squared shift)``.

    An empty cluster keeps its centre (the caller re-seeds it); the shift is summed
    over all centres (a float, read to the host). One implementation for the
    restarts on the CPU, the client-reduced distributed loop and the worker-resident
    one (:mod:`explorer.distributed._resident`).
    """
    counts = sums[:, -1]
    empty = counts == 0
    new = xp.where(empty[:, None], centers,
                   sums[:, :-1] / xp.where(empty, 1.0, counts)[:, None])
    return new, empty, float(((new - centers) ** 2).sum())


def lloyd_stops(changed, n_empty, shift, tol_abs) -> bool:
    """scikit-learn's stopping rule of one Lloyd iteration: no label changed, or,
    without an empty cluster, a squared centre shift of at most `tol_abs`."""
    return bool(changed == 0 or (n_empty == 0 and shift <= tol_abs))


def starts_runner(X, x_sq, centers, xp):
    """The state of S restarts of Lloyd's iterations on X's device: :class:`_HostStarts`
    on the CPU, ``explorer.kernels.kmeans.DeviceStarts`` on the GPU (`centers`: S × k × d).

    Both have ``step(active)`` and its halves ``assign_sums`` (labels, distances, the
    float64 sums ``sums[s]`` (k × (d + 1)) and labels changed ``changed[s]``) and
    ``update`` (the means, the shift and the empty clusters from ``sums`` and
    ``changed``), ``farthest``/``place_empty``/``reseed_empty``, ``assign``,
    ``inertia`` and ``result``: :func:`_lloyd_starts` runs them in one process, the
    worker-resident distributed loop (:mod:`explorer.distributed._resident`) adds
    ``sums`` and ``changed`` across processes between the halves."""
    if xp is np:
        return _HostStarts(X, x_sq, centers)
    from explorer.kernels.kmeans import DeviceStarts

    return DeviceStarts(X, x_sq, centers)


class _HostStarts:
    """The restarts' state on the CPU for :func:`_lloyd_starts`: each step is
    :func:`assign_nearest` per running restart (the CPU gains nothing from one product
    for all: its cost is the same flops), then the float64 means."""

    def __init__(self, X, x_sq, centers):
        self.X, self.x_sq = X, x_sq
        self.centers = np.array(centers, dtype=np.float64)
        S, k, d = self.centers.shape
        self.chunk = chunk_rows(np, max(k, d))
        self.labels = np.full((S, X.shape[0]), -1, dtype=np.int32)
        self.mind = np.empty((S, X.shape[0]), dtype=np.float32)
        self.counts = np.zeros((S, k))
        self.sums = np.zeros((S, k, d + 1))
        self.changed = np.zeros(S, dtype=np.int64)

    def step(self, active):
        """Assign and update the restarts `active`: per restart (in that order) the
        labels changed, the empty clusters and the squared centre shift."""
        self.assign_sums(active)
        return self.update(active)

    def assign_sums(self, active):
        """The assignment of the restarts `active`: labels and distances, and their
        float64 sums and labels changed in ``sums[s]`` and ``changed[s]``."""
        for s in active:
            labels, mind, sums = assign_nearest(self.X, self.x_sq, self.centers[s],
                                                self.chunk, np, want_sums=True)
            self.changed[s] = np.count_nonzero(labels != self.labels[s])
            self.labels[s], self.mind[s], self.sums[s] = labels, mind, sums

    def update(self, active):
        """The update of the restarts `active` from ``sums`` and ``changed``: per restart
        (in that order) the labels changed, the empty clusters and the squared shift."""
        m = len(active)
        changed = np.empty(m, dtype=np.int64)
        n_empty = np.empty(m, dtype=np.int64)
        shift = np.empty(m)
        for i, s in enumerate(active):
            new, empty, shift[i] = update_centers(self.centers[s], self.sums[s], np)
            n_empty[i] = np.count_nonzero(empty)
            changed[i] = self.changed[s]
            self.centers[s], self.counts[s] = new, self.sums[s][:, -1]
        return changed, n_empty, shift

    def reseed_empty(self, s, n_empty):
        """Move restart `s`'s empty clusters to its rows farthest from their centres."""
        _, far = self.farthest(s, n_empty)
        self.place_empty(s, self.X[far])

    def farthest(self, s, count):
        """Restart `s`'s `count` rows farthest from their centres: ``(squared distances,
        rows)``, largest first."""
        far = np.argsort(-self.mind[s])[:count]
        return self.mind[s][far], far

    def place_empty(self, s, rows):
        """Move restart `s`'s empty clusters (in cluster order) to `rows`."""
        self.centers[s, np.flatnonzero(self.counts[s] == 0)] = rows

    def assign(self, starts):
        """Labels of the restarts `starts` for their current centres."""
        for s in starts:
            self.labels[s] = assign_nearest(self.X, self.x_sq, self.centers[s], self.chunk,
                                            np, want_sums=False)[0]

    def inertia(self):
        return np.array([inertia(self.X, self.centers[s], self.labels[s], self.chunk, np)
                         for s in range(self.centers.shape[0])])

    def result(self, s):
        return self.centers[s].copy(), self.labels[s].copy()


def inertia(X, centers, labels, chunk, xp):
    """Sum of squared distances to the assigned centres, formed in float64.

    Parameters
    ----------
    X : array of shape (n, d), float32 (NumPy or CuPy)
    centers : array of shape (k, d), same module
    labels : array of int, shape (n,)
    chunk : int
        Rows per block on the CPU.
    xp : module
        NumPy or CuPy.

    Returns
    -------
    float
    """
    if xp is not np:
        from explorer.kernels.kmeans import squared_error

        return squared_error(X, centers, labels)
    total = 0.0
    for start in range(0, X.shape[0], chunk):
        stop = min(start + chunk, X.shape[0])
        diff = X[start:stop].astype(xp.float64) - centers[labels[start:stop]]
        total += float((diff * diff).sum())
    return total


def first_rows(labels, k) -> np.ndarray:
    """The index of each cluster's first row in `labels` (NumPy or CuPy, values in
    [0, k)), ``len(labels)`` for a cluster without rows; int64 NumPy of shape (k,).

    Every cluster is usually met within the first few rows per cluster: a prefix is
    read to the host, grown only while clusters are missing (all rows at worst)."""
    n = labels.shape[0]
    first = np.full(k, n, dtype=np.int64)
    prefix = min(n, 64 * k)
    while True:
        ids, at = np.unique(to_numpy(labels[:prefix]), return_index=True)
        if ids.size == k or prefix == n:
            break
        prefix = min(n, 8 * prefix)
    first[ids] = at
    return first


def first_row_numbering(first) -> tuple[np.ndarray, np.ndarray]:
    """``(order, new_id)`` numbering clusters by their first row: `order` lists the old
    ids by first row (clusters without rows, ``first`` past every row, last in their
    old order); ``new_id[old] = new``, int32."""
    order = np.argsort(np.asarray(first), kind="stable")
    new_id = np.empty(order.size, dtype=np.int32)
    new_id[order] = np.arange(order.size, dtype=np.int32)
    return order, new_id


def number_by_first_point(km):
    """Renumber a fitted :class:`KMeans`'s clusters in the order of their first point.

    Cluster 0 is the one of the first row, cluster 1 the next one met, and so on;
    clusters without points come last, in their old order. `cluster_centers_` and
    `labels_` are permuted alike (in place), `inertia_` is unchanged.

    Why: the ids k-means gives follow its random initial centres, so two runs that
    find the same partition from embeddings equal only to the solver's tolerance
    (rows reordered, another backend) can number it differently. Numbered by first
    point, the same partition has the same ids.

    Parameters
    ----------
    km : KMeans
        Fitted, with `labels_` a NumPy or CuPy array (not Dask).

    Returns
    -------
    KMeans
        `km`.
    """
    labels = km.labels_
    xp = array_module(labels)
    order, new_id = first_row_numbering(first_rows(labels, km.cluster_centers_.shape[0]))
    km.cluster_centers_ = km.cluster_centers_[xp.asarray(order)]
    km.labels_ = xp.asarray(new_id)[labels]
    return km
