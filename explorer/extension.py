"""Out-of-sample extension: the spectral embedding and cluster of points not in the fit.

:class:`~explorer.SpectralClustering` embeds the n points it was fitted on; a new point
x has no row in the eigenvectors. The Nyström extension gives it the row its own
eigen-equation would give if x had been one more vertex of the graph that the others
did not notice (Bengio et al., "Out-of-sample extensions for LLE, Isomap, MDS,
Eigenmaps, and spectral clustering", NIPS 2003; Fowlkes et al., "Spectral grouping
using the Nyström method", TPAMI 2004). With A = D^-1/2 S D^-1/2, A v = μ v (μ = 1 − λ,
λ an eigenvalue of L_sym) and the fit's U = D^-1/2 V:

    d(x) = Σ_j w(x, j),   v(x) = (1/μ) Σ_j w(x, j) v_j / sqrt(d(x) d_j),
    u(x) = v(x) / sqrt(d(x)) = (1/μ) Σ_j w(x, j) u_j / d(x),

where w(x, j) are the weights of x's edges to the training points under the fitted
edge rule (:func:`cross_edges`). The embedding row is u(x) scaled to unit length and
the label the fitted k-means' nearest centre. On a training point (its own edge left
out) the formula gives back its own row exactly: it is row i of D^-1 S U = U diag(μ).

What is approximated: the training points' degrees and eigenvectors are those of the
graph without x (adding x would change them a little), and for the kNN graphs x's
edges are its k nearest training points and the training points that would count x
among their k nearest (the union; both for the mutual graph), each judged against the
fitted neighbourhoods. Training points left out of the embedding (isolated, stray
pieces, components beyond the k largest) contribute no edge; a point with no edge to
an embedded training point is outside every training point's reach and gets label −1
(:func:`predict`, which warns how many).

Modes (:class:`ExtensionModel`, `mode`): ``"exact"`` the formula above through the
training points; ``"representatives"`` the same through the representatives (their
graph as the fit weighted it, each edge times the representative's point count,
:func:`explorer.representatives.weight_by_counts`) for the embedding, while the label
is the nearest representative's, the very rule by which the fit labels every point;
``"landmarks"`` the row Ẑ(x) of x through its r nearest landmarks (row-normalised
weights times the landmarks' D^-1/2, :func:`explorer.landmarks.landmark_affinity`) and
u(x) = Ẑ(x) V Σ^-1 with the truncated SVD's right singular vectors V, which gives back
a training point's left singular vector exactly.

Everything runs in batches of new points (:func:`batch_rows`, after a memory
preflight) on the device of the fitted model: NumPy on the CPU, CuPy on the GPU.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
from scipy.spatial import cKDTree

from . import memory
from ._backend import array_module, to_numpy
from .graph._gpu_choice import uses_grid
from .graph.reference import local_weights_from, weights_from
from .graph.rule import EdgeRule

__all__ = [
    "ExtensionModel",
    "UnreachableWarning",
    "batch_rows",
    "cross_edges",
    "describe",
    "exact_model",
    "extend",
    "fitted_space",
    "landmark_model",
    "predict",
    "training_neighborhoods",
    "transform",
]

#: Scratch bytes of one batch of new points against all training points (the compared
#: values and their masks): batches are sized to this on the host, and to a quarter of
#: the free GPU memory (at most 16 GiB) on the device.
HOST_BATCH_BYTES = 1 << 27
GPU_BATCH_BYTES = 1 << 34

#: Scratch bytes per (new point, training point) pair in a brute-force batch: the
#: product block, the approximate compared values and a few masks.
_PAIR_SCRATCH = 24

#: Smallest |μ| = |1 − λ| the extension divides by.
MU_MIN = 1e-8

#: The kd-tree path (CPU, distance rules) for up to this many features.
KDTREE_MAX_D = 8

#: kNN reverse edges on the kd-tree: training points whose k-th distance is beyond this
#: quantile of all of them query alone (one joint query at that quantile for the rest).
WIDE_QUANTILE = 0.99

#: Scratch bytes per new point on the kd-tree path (its candidate pairs: a few dozen
#: bytes each, for up to a few hundred candidates).
_KD_ROW_SCRATCH = 1 << 13

#: Relative widening of kd-tree radii (as the CPU builders': candidates are re-decided
#: in float64 afterwards).
_KD_MARGIN = 1e-6

#: Rounding slack of the candidate products, in units of the product dtype's epsilon
#: × (d + 8) × (|a|² + |b|²) (distances) or × 1 (cosines of unit rows).
_SLACK_EPS = 8.0


class UnreachableWarning(UserWarning):
    """New points with no edge to any embedded training point (label −1)."""


@dataclass(eq=False)
class ExtensionModel:
    """What :func:`transform` and :func:`predict` need of a fit, as plain data.

    Attributes
    ----------
    mode : {"exact", "representatives", "landmarks"}
    points : ndarray of float32, shape (n, d)
        Exact: the training points; representatives: the representatives; landmarks:
        the landmarks; all in the fitted space (after the centring of large offsets and
        the feature scaling), on the fit's device.
    kmeans : explorer.KMeans
        The fitted k-means (its centres label the embedding rows).
    data : explorer.inputs.InputData or None
        The fit's input stage (its offset and unit, without the points): new points go
        through the same conversion (None: none was applied).
    scaler : explorer.preprocessing.FeatureScaler or None
    rule : EdgeRule or None
        The fitted edge rule (exact and representatives modes).
    vectors : ndarray, shape (n, k) or None
        U = D^-1/2 V over the k clustered columns; NaN rows for the training points
        left out of the embedding (exact and representatives modes).
    eigenvalues : numpy.ndarray of shape (k,) or None
        λ of L_sym of those columns.
    counts : ndarray of float64, shape (n,) or None
        Representatives: the points per representative over their mean, the factor the
        fit weighed each representative's edges by.
    point_labels : ndarray of int32, shape (n,) or None
        Representatives: each representative's cluster (the label of its points).
    right : numpy.ndarray of float64, shape (p, k) or None
        Landmarks: the right singular vectors V of the k clustered columns.
    singular_values : numpy.ndarray of shape (k,) or None
        Landmarks: their σ.
    inv_sqrt_degree : ndarray of float64, shape (p,) or None
        Landmarks: D^-1/2 of each landmark (0 for a landmark without points).
    n_nearest : int
        Landmarks: r.
    metric : str or None
        Landmarks: ``"gaussian"`` or ``"cosine"``.
    sigma : float or None
        Landmarks: the gaussian width used.
    neighbor_key : ndarray of float64, shape (n,) or None
        kNN rules: each training point's k-th nearest compared value as a "nearer is
        smaller" key (the squared distance, or minus the cosine), computed at the first
        use (:func:`training_neighborhoods`).
    local_sigma : ndarray of float64, shape (n,) or None
        ``sigma="local"``: σ_j of each training point, computed at the first use.
    """

    mode: str
    points: object
    kmeans: object
    data: object = None
    scaler: object = None
    rule: EdgeRule | None = None
    vectors: object = None
    eigenvalues: object = None
    counts: object = None
    point_labels: object = None
    right: object = None
    singular_values: object = None
    inv_sqrt_degree: object = None
    n_nearest: int = 0
    metric: str | None = None
    sigma: float | None = None
    neighbor_key: object = None
    local_sigma: object = None

    @property
    def xp(self):
        return array_module(self.points)

    @property
    def n_columns(self) -> int:
        """k, the embedding's columns."""
        if self.mode == "landmarks":
            return int(self.right.shape[1])
        return int(self.vectors.shape[1])


def exact_model(points, rule: EdgeRule, vectors, eigenvalues, kmeans, *, data=None,
                scaler=None, counts=None, point_labels=None) -> ExtensionModel:
    """The model of an exact fit (or, with `counts` and `point_labels`, of a fit on
    representatives), from what the fit computed.

    Parameters
    ----------
    points : array of float32, shape (n, d)
        The points the graph was built on, in the fitted space.
    rule : EdgeRule
        The rule that built it.
    vectors : array, shape (n, k)
        The clustered U (NaN rows for vertices left out).
    eigenvalues : array of shape (k,)
    kmeans : explorer.KMeans
        Fitted on the unit rows of `vectors`.
    data, scaler
        The fit's input stage (:class:`explorer.inputs.InputData`) and feature scaling
        (None: none).
    counts : array of int, shape (n,), optional
        Points per representative (representatives mode).
    point_labels : array of int32, shape (n,), optional
        Each representative's cluster (representatives mode).
    """
    xp = array_module(vectors)
    points = xp.ascontiguousarray(xp.asarray(points, dtype=xp.float32))
    c = None
    if counts is not None:
        c = xp.asarray(counts, dtype=xp.float64)
        c = c / c.mean()
    return ExtensionModel(
        mode="exact" if counts is None else "representatives", points=points, kmeans=kmeans,
        data=data, scaler=scaler, rule=rule, vectors=vectors,
        eigenvalues=np.asarray(to_numpy(eigenvalues), dtype=np.float64), counts=c,
        point_labels=point_labels)


def landmark_model(partition, affinity, *, data=None, scaler=None) -> ExtensionModel:
    """The model of a landmark fit (:func:`explorer.landmarks.landmark_partition`).

    Parameters
    ----------
    partition : explorer.landmarks.LandmarkPartition
    affinity : explorer.landmarks.LandmarkAffinity
        The fit's Ẑ (only its `trivial` vector, D^1/2 / ‖D^1/2‖, is read: the degrees
        up to a common factor, which the unit rows of the embedding cancel; the factor
        is restored from ‖D^1/2‖² = Σ D = the number of points with a positive weight).
    data, scaler
        As :func:`exact_model`.
    """
    xp = array_module(partition.landmarks)
    k = partition.n_clusters
    root = np.asarray(affinity.trivial, dtype=np.float64)
    n_rows = int(to_numpy(partition.isolated).size - int(to_numpy(partition.isolated).sum()))
    root = root * math.sqrt(max(n_rows, 1))
    inv = np.where(root > 0, 1.0 / np.where(root > 0, root, 1.0), 0.0)
    return ExtensionModel(
        mode="landmarks", points=partition.landmarks, kmeans=partition.kmeans,
        data=data, scaler=scaler, right=np.asarray(partition.svd.right[:, :k], dtype=np.float64),
        singular_values=np.asarray(partition.svd.singular_values[:k], dtype=np.float64),
        inv_sqrt_degree=xp.asarray(inv), n_nearest=int(partition.n_nearest),
        metric=partition.metric, sigma=partition.sigma)


# ------------------------------------------------------------------ batches


def batch_rows(model: ExtensionModel, n_new: int, *, budget: float | None = None,
               method: str = "auto") -> int:
    """New points per batch, after checking that the outputs and one batch fit.

    The outputs (the embedding rows in float64 and the labels) are allocated whole;
    a batch's scratch grows with its rows times the training points (brute force),
    their candidate edges (kd-tree, :data:`_KD_ROW_SCRATCH` a row) or the landmarks
    (one row of products each); the grid takes batches of at most n rows, its graph
    builder checking the memory of each. Raises :class:`explorer.memory.MemoryEstimateError`
    when the outputs and a batch of one row do not fit.
    """
    xp = model.xp
    n, d = model.points.shape
    k = model.n_columns
    gpu = xp is not np
    out_bytes = n_new * (8 * k + 8 + 4 * d)
    if model.mode == "landmarks":
        per_row = 4 * n + 16 * model.n_nearest * (k + 2)
    elif (used := _cross_method(method, model.rule, model.points)) == "kdtree":
        per_row = _KD_ROW_SCRATCH + 8 * k
    elif used == "grid":
        # The graph of the training points and a batch together: the builder counts
        # its rows and checks the device's memory before it allocates
        # (explorer.memory.check_gpu_memory); batches of at most n rows keep it within
        # four times the graph the fit built.
        memory.check_gpu_allocation(out_bytes, f"the embedding rows of {n_new:,} new points",
                                    "predict the new points in smaller parts")
        return int(max(1, min(n_new, n)))
    else:
        per_row = _PAIR_SCRATCH * n + 8 * k
    if budget is None:
        if gpu:
            free = memory.free_device_bytes()
            budget = min(GPU_BATCH_BYTES, max(0.0, memory.GPU_MEMORY_FRACTION * free
                                              - out_bytes) / 4)
        else:
            budget = HOST_BATCH_BYTES
    what = (f"the extension of {n_new:,} new points to the embedding of {n:,} fitted "
            f"{'landmarks' if model.mode == 'landmarks' else 'points'} (k={k})")
    advice = "predict the new points in smaller parts"
    need = out_bytes + per_row
    if gpu:
        memory.check_gpu_allocation(need, what, advice)
    else:
        memory.check_allocation(need, what, advice)
    return int(max(1, min(n_new, budget // per_row)))


# ------------------------------------------------------------------ the cross edges


def _exact_compared(Q, P, i, j, compares: str, q_norm=None, p_norm=None):
    """Float64 compared values of the pairs (Q[i], P[j]): squared distances summed one
    feature at a time in feature order (as the reference builders), or cosines."""
    xp = array_module(P)
    qc = xp.ascontiguousarray(Q.T)  # one contiguous row per feature: gathers stay cheap
    pc = xp.ascontiguousarray(P.T)
    acc = xp.zeros(i.shape[0], dtype=xp.float64)
    for f in range(P.shape[1]):
        a = qc[f][i].astype(xp.float64)
        bf = pc[f][j].astype(xp.float64)
        if compares == "sqdist":
            a -= bf
            a *= a
        else:
            a *= bf
        acc += a
    if compares == "sqdist":
        return acc
    den = q_norm[i] * p_norm[j]
    with np.errstate(divide="ignore", invalid="ignore"):
        return xp.where(den > 0, acc / xp.where(den > 0, den, 1.0), -xp.inf)


def _norms(X):
    xp = array_module(X)
    return xp.sqrt((X.astype(xp.float64) ** 2).sum(axis=1))


def _key(compared, compares: str):
    """"Nearer is smaller": the squared distance, or minus the cosine."""
    return compared if compares == "sqdist" else -compared


def _passes(compared, rule: EdgeRule):
    if rule.compares == "sqdist":
        return compared < rule.sqdist_cutoff
    return compared > rule.threshold


class _Training:
    """The training side of the cross edges, prepared once per call."""

    def __init__(self, P, rule: EdgeRule, method: str, products=None):
        xp = array_module(P)
        self.P, self.rule, self.xp = P, rule, xp
        self.method = method
        self.compares = rule.compares
        self.norm = _norms(P) if rule.compares == "cosine" else None
        if method == "kdtree":
            self.tree = cKDTree(np.asarray(P, dtype=np.float64))
            return
        if method == "grid":
            return
        # Products in the device's fast dtype (float64 on the host), centred on the
        # training mean (distances) or on unit rows (cosines); re-decided in float64.
        self.dtype = products or (xp.float64 if xp is np else xp.float32)
        if rule.compares == "sqdist":
            self.shift = P.astype(xp.float64).mean(axis=0)
            Z = (P.astype(xp.float64) - self.shift).astype(self.dtype)
            self.sq = (Z.astype(xp.float64) ** 2).sum(axis=1)
        else:
            self.shift = None
            safe = xp.where(self.norm > 0, self.norm, 1.0)
            Z = (P.astype(xp.float64) / safe[:, None]).astype(self.dtype)
            self.sq = None
        self.Zt = xp.ascontiguousarray(Z.T)
        self.eps = float(np.finfo(self.dtype).eps) * _SLACK_EPS * (P.shape[1] + 8)

    def approx(self, Q):
        """Approximate compared values (b × n) and their rounding slack."""
        xp = self.xp
        if self.sq is not None:
            Z = (Q.astype(xp.float64) - self.shift)
            q_sq = (Z ** 2).sum(axis=1)
            G = Z.astype(self.dtype) @ self.Zt
            G *= -2.0
            G += q_sq[:, None].astype(self.dtype)
            G += self.sq[None, :].astype(self.dtype)
            # In the product dtype: a margin needs no more, and a float64 (b, n) array
            # would double the batch's scratch.
            slack = q_sq[:, None].astype(self.dtype) + self.sq[None, :].astype(self.dtype)
            slack *= self.dtype(self.eps)
            return G, slack
        qn = _norms(Q)
        safe = xp.where(qn > 0, qn, 1.0)
        Z = (Q.astype(xp.float64) / safe[:, None]).astype(self.dtype)
        G = Z @ self.Zt
        G[qn == 0] = -xp.inf
        return G, self.dtype(self.eps)


def cross_edges(Q, P, rule: EdgeRule, *, neighbor_key=None, local_sigma=None,
                exclude=None, method: str = "auto", products=None):
    """The edges between new points `Q` and training points `P` under the fitted rule.

    Parameters
    ----------
    Q : array of float32, shape (b, d)
        New points (the fitted space), on P's device.
    P : array of float32, shape (n, d)
        Training points.
    rule : EdgeRule
        The fitted rule. ε graphs: (x, j) is an edge iff the pair passes the threshold.
        kNN graphs: j among x's `n_neighbors` nearest training points, or x nearer to j
        than j's k-th nearest training point or as near (`neighbor_key`): either (``"knn"``) or
        both (``"mutual_knn"``), then the threshold if the rule has one.
    neighbor_key : array of float64, shape (n,), optional
        kNN rules: each training point's k-th nearest key (:func:`training_neighborhoods`).
    local_sigma : array of float64, shape (n,), optional
        ``sigma="local"``: σ_j; σ_x is the distance from x to its `local_neighbor`-th
        nearest training point.
    exclude : int array of shape (b,), optional
        A training point each new point must not be joined to (−1: none): a training
        point given as new leaves itself out, as the graph has no diagonal.
    method : {"auto", "bruteforce", "kdtree", "grid"}
        ``"kdtree"`` (host, distance rules): a kd-tree of the training points;
        ``"grid"`` (GPU, ε distance rules with a fixed σ, d <= 8): the ε-graph of the
        training and new points together by the graph builders' grid, its cross block
        the candidates (:func:`_graph_pairs`); ``"bruteforce"``: blocks of products.
        ``"auto"``: the kd-tree on the host for d <= 8 distance rules, the grid on the
        GPU where it serves, else brute force. Either way the candidates are
        decided on float64 values, except which training points are x's k nearest: the
        kd-tree's float64 distances or the products choose them (float32 products on
        the GPU: a near-tie at the k-th place may go either way); on the GPU by k
        passes of ``argmin`` over the batch (:func:`_smallest`).
    products : numpy dtype, optional
        The brute force's product dtype (default: float64 on the host, float32 on the
        GPU); its rounding slack keeps every edge among the candidates.

    Returns
    -------
    rows, cols : int64 arrays
        The edges (row of Q, row of P), each pair once.
    weights : float64 array
        Their weights per the rule.
    """
    xp = array_module(P)
    Q = xp.ascontiguousarray(xp.asarray(Q, dtype=xp.float32))
    method = _cross_method(method, rule, P)
    if method not in ("bruteforce", "kdtree", "grid") or (method == "kdtree" and (
            xp is not np or rule.compares != "sqdist")) or (method == "grid" and (
            xp is np or not _grid_serves(rule, P.shape[1]))):
        raise ValueError(f"method={method!r} is not a cross-edge search here; allowed: "
                         "'auto', 'bruteforce', 'kdtree' on the host for distance rules, "
                         "'grid' on the GPU for ε distance rules with a fixed sigma in "
                         f"d <= {KDTREE_MAX_D}")
    if rule.is_knn and neighbor_key is None:
        raise ValueError(f"rule {rule.describe()!r} is a kNN rule: it needs neighbor_key, "
                         "the training points' k-th nearest keys (training_neighborhoods); "
                         "got None")
    if rule.local_sigma and local_sigma is None:
        raise ValueError(f"rule {rule.describe()!r} has sigma='local': it needs local_sigma, "
                         "the training points' σ_j (training_neighborhoods); got None")
    train = _Training(P, rule, method, products)
    if method == "kdtree":
        rows, cols, sigma_q = _kd_pairs(Q, train, rule, neighbor_key, exclude)
    elif method == "grid":
        rows, cols, sigma_q = _graph_pairs(Q, train, rule, exclude)
    else:
        rows, cols, sigma_q = _brute_pairs(Q, train, rule, neighbor_key, exclude)
    q_norm = _norms(Q) if rule.compares == "cosine" else None
    compared = _exact_compared(Q, P, rows, cols, rule.compares, q_norm, train.norm)
    if rule.has_threshold:
        keep = _passes(compared, rule)
        rows, cols, compared = rows[keep], cols[keep], compared[keep]
    if rule.local_sigma:
        weights = local_weights_from(compared, sigma_q[rows], local_sigma[cols])
    else:
        weights = weights_from(compared, rule)
    return rows, cols, weights


def _cross_method(method: str, rule: EdgeRule, P) -> str:
    """``method="auto"`` resolved: the kd-tree on the host for d <= 8 distance rules;
    on the GPU the graph builders' grid for ε distance rules with a fixed σ in
    d <= 8 (:func:`_graph_pairs`); brute force otherwise."""
    if method != "auto":
        return method
    host = array_module(P) is np
    if host and rule.compares == "sqdist" and P.shape[1] <= KDTREE_MAX_D:
        return "kdtree"
    if not host and _grid_serves(rule, P.shape[1]):
        return "grid"
    return "bruteforce"


def _grid_serves(rule: EdgeRule, d: int) -> bool:
    """Whether the GPU builders' grid finds the cross edges of `rule` in `d` features."""
    return (not rule.is_knn and not rule.local_sigma and rule.compares == "sqdist"
            and uses_grid(d, rule))


def _excluded(exclude, b, xp):
    if exclude is None:
        return None
    return xp.asarray(exclude, dtype=xp.int64).reshape(b)


def _smallest(key, m: int, *, by_min: bool | None = None):
    """Each row's `m` smallest keys' columns, ascending (ties: the lower column).

    NumPy: ``argpartition`` and a sort of the m. CuPy (``by_min``): m passes of
    ``argmin``, each setting the entry found to +inf, which overwrites `key`; CuPy's
    ``argpartition`` sorts whole rows, far costlier for m much smaller than the row.
    """
    xp = array_module(key)
    if by_min is None:
        by_min = xp is not np
    b = key.shape[0]
    if not by_min:
        part = xp.argpartition(key, m - 1, axis=1)[:, :m]
        kth = xp.take_along_axis(key, part, axis=1).max(axis=1)[:, None]
        # argpartition breaks a tie at the m-th place arbitrarily: the lower columns win.
        less = key < kth
        tied = key == kth
        need = m - less.sum(axis=1)[:, None]
        picked = less | (tied & (xp.cumsum(tied, axis=1) <= need))
        cols = xp.nonzero(picked)[1].reshape(b, m)
        vals = xp.take_along_axis(key, cols, axis=1)
        order = xp.lexsort((cols, vals), axis=1)
        return xp.take_along_axis(cols, order, axis=1).astype(xp.int64)
    rows = xp.arange(b, dtype=xp.int64)
    out = xp.empty((b, m), dtype=xp.int64)
    for t in range(m):
        idx = xp.argmin(key, axis=1)
        out[:, t] = idx
        key[rows, idx] = xp.inf
    return out


def _brute_pairs(Q, train: _Training, rule: EdgeRule, neighbor_key, exclude):
    """Candidate pairs of one batch by products; the threshold and the kNN reverse
    condition re-decided in float64 afterwards (:func:`cross_edges`, :func:`_combine`)."""
    xp = train.xp
    b, n = Q.shape[0], train.P.shape[0]
    G, slack = train.approx(Q)
    key = G if rule.compares == "sqdist" else -G
    ex = _excluded(exclude, b, xp)
    rows_all = xp.arange(b, dtype=xp.int64)
    others = n - (0 if ex is None else 1)
    if ex is not None:
        has = ex >= 0
        key[rows_all[has], ex[has]] = xp.inf
    m = min(rule.local_neighbor, others) if rule.local_sigma else 0
    if not rule.is_knn:
        if rule.compares == "sqdist":
            cand = G < rule.sqdist_cutoff + slack
        else:
            cand = G > rule.threshold - slack
        if ex is not None:
            cand[rows_all[has], ex[has]] = False
        r, c = xp.nonzero(cand)
        del cand
        near = _smallest(key, m) if m else None  # may overwrite key (and G)
        return r.astype(xp.int64), c.astype(xp.int64), _sigma_q(Q, train, near)
    kk = min(rule.n_neighbors, others)
    # Reverse: x as near to j as j's k-th nearest (candidates with slack, decided
    # exactly), taken before the selection may overwrite key.
    rev = key <= xp.asarray(neighbor_key)[None, :].astype(key.dtype) + slack
    if ex is not None:
        rev[rows_all[has], ex[has]] = False
    chosen = _smallest(key, max(kk, m))
    fwd = chosen[:, :kk]
    fr, fc = xp.repeat(rows_all, kk), fwd.reshape(-1)
    rev[fr, fc] = False
    rr, rc = xp.nonzero(rev)
    del rev
    rr, rc = rr.astype(xp.int64), rc.astype(xp.int64)
    sigma_q = _sigma_q(Q, train, chosen[:, :m] if m else None)
    return _combine(Q, train, rule, neighbor_key, fr, fc, rr, rc) + (sigma_q,)


def _graph_pairs(Q, train: _Training, rule: EdgeRule, exclude):
    """Candidate pairs of one batch from the ε-graph of the training and new points
    together, built by the graph builders' grid (:func:`explorer.graph.build_graph`,
    ``method="grid"``): O((n + b) · neighbours) pairs instead of the b · n products of
    brute force.

    The grid thresholds the float32 squared difference, within (d + 3) float32
    roundings of the exact value; the threshold is widened by twice that, so every
    pair the float64 rule keeps is a candidate, and :func:`cross_edges` re-decides them
    in float64. Pairs among new points are built too and dropped."""
    from .graph import build_graph

    xp = train.xp
    n, d = train.P.shape
    widen = 1.0 + 2.0 * (d + 4) * float(np.finfo(np.float32).eps)
    wide = EdgeRule("uniform", None, "sqdist", rule.sqdist_cutoff * widen)
    both = xp.concatenate([train.P, Q])
    csr = build_graph(both, wide, method="grid", backend="gpu").csr
    cross = csr[n:, :n].tocoo()
    r, c = cross.row.astype(xp.int64), cross.col.astype(xp.int64)
    ex = _excluded(exclude, Q.shape[0], xp)
    if ex is not None:
        keep = c != ex[r]
        r, c = r[keep], c[keep]
    return r, c, None


def _sigma_q(Q, train: _Training, near):
    """σ_x: the float64 distance to the farthest of the m nearest training points."""
    if near is None:
        return None
    xp = train.xp
    b, m = near.shape
    r = xp.repeat(xp.arange(b, dtype=xp.int64), m)
    d2 = _exact_compared(Q, train.P, r, near.reshape(-1).astype(xp.int64), "sqdist")
    return xp.sqrt(d2.reshape(b, m).max(axis=1))


def _combine(Q, train: _Training, rule: EdgeRule, neighbor_key, fr, fc, rr, rc):
    """kNN edges from the forward pairs (x's k nearest) and the reverse candidates,
    the reverse condition decided in float64."""
    xp = train.xp
    q_norm = _norms(Q) if rule.compares == "cosine" else None
    key = xp.asarray(neighbor_key)
    rk = _key(_exact_compared(Q, train.P, rr, rc, rule.compares, q_norm, train.norm),
              rule.compares)
    ok = rk <= key[rc]
    rr, rc = rr[ok], rc[ok]
    if rule.graph == "knn":
        return xp.concatenate([fr, rr]), xp.concatenate([fc, rc])
    fk = _key(_exact_compared(Q, train.P, fr, fc, rule.compares, q_norm, train.norm),
              rule.compares)
    ok = fk <= key[fc]
    return fr[ok], fc[ok]


def _kd_pairs(Q, train: _Training, rule: EdgeRule, neighbor_key, exclude):
    """Candidate pairs of one batch through the training points' kd-tree (host)."""
    b, n = Q.shape[0], train.P.shape[0]
    Q64 = np.asarray(Q, dtype=np.float64)
    ex = None if exclude is None else np.asarray(exclude, dtype=np.int64).reshape(b)
    rows_all = np.arange(b, dtype=np.int64)

    def nearest(m):
        """Each new point's m nearest training points (the excluded one left out)."""
        extra = 0 if ex is None else 1
        m_q = min(m + extra, n)
        _, idx = train.tree.query(Q64, k=m_q)
        idx = np.asarray(idx, dtype=np.int64).reshape(b, m_q)
        if ex is not None:
            hit = idx == ex[:, None]
            # Drop the excluded column where present, else the last one.
            drop = np.where(hit.any(axis=1), hit.argmax(axis=1), m_q - 1)
            keep = np.ones_like(idx, dtype=bool)
            keep[rows_all, drop] = False
            idx = idx[keep].reshape(b, m_q - 1)
        return idx[:, :m]

    sigma_q = None
    if rule.local_sigma:
        near = nearest(rule.local_neighbor)
        m = near.shape[1]
        d2 = _exact_compared(Q, train.P, np.repeat(rows_all, m), near.reshape(-1), "sqdist")
        sigma_q = np.sqrt(d2.reshape(b, m).max(axis=1))

    q_tree = cKDTree(Q64)

    def drop_excluded(r, c):
        if ex is not None:
            ok = c != ex[r]
            r, c = r[ok], c[ok]
        return r, c

    def within(radius):
        found = q_tree.sparse_distance_matrix(
            train.tree, radius * (1.0 + _KD_MARGIN), output_type="ndarray")
        return drop_excluded(found["i"].astype(np.int64), found["j"].astype(np.int64))

    if not rule.is_knn:
        r, c = within(rule.radius)
        return r, c, sigma_q
    fwd = nearest(rule.n_neighbors)
    kk = fwd.shape[1]
    fr, fc = np.repeat(rows_all, kk), fwd.reshape(-1)
    key = np.asarray(neighbor_key)
    # Reverse candidates: within each training point's own k-th distance. One joint
    # query at a radius most of them share; the few wider ones (sparse tails, whose
    # radius would multiply everyone's candidates) each query the batch's tree alone.
    finite = key[np.isfinite(key)]
    common = float(np.quantile(finite, WIDE_QUANTILE)) if finite.size else 0.0
    wide = key > common
    rr, rc = within(math.sqrt(max(common, 0.0)))
    keep = ~wide[rc]
    rr, rc = rr[keep], rc[keep]
    if wide.any():
        ids = np.flatnonzero(wide)
        lists = q_tree.query_ball_point(np.asarray(train.P[ids], dtype=np.float64),
                                        np.sqrt(key[ids]) * (1.0 + _KD_MARGIN))
        sizes = np.fromiter((len(x) for x in lists), dtype=np.int64, count=ids.size)
        if sizes.sum():
            r2 = np.concatenate([np.asarray(x, dtype=np.int64) for x in lists if len(x)])
            r2, c2 = drop_excluded(r2, np.repeat(ids, sizes))
            rr, rc = np.concatenate([rr, r2]), np.concatenate([rc, c2])
    # Drop the reverse candidates that are forward pairs (each pair once).
    fkeys = np.sort(fr * n + fc)
    rkeys = rr * n + rc
    pos = np.minimum(np.searchsorted(fkeys, rkeys), max(fkeys.size - 1, 0))
    fresh = fkeys[pos] != rkeys if fkeys.size else np.ones(rkeys.size, bool)
    rr, rc = rr[fresh], rc[fresh]
    return _combine(Q, train, rule, neighbor_key, fr, fc, rr, rc) + (sigma_q,)


def training_neighborhoods(model: ExtensionModel, *, method: str = "auto") -> None:
    """Fill `model.neighbor_key` (kNN rules) and `model.local_sigma` (``sigma="local"``)
    from the training points, by the project's kNN search
    (:func:`explorer.graph.knn.knn_search`), once; nothing for other rules."""
    rule = model.rule
    need_key = rule.is_knn and model.neighbor_key is None
    need_sigma = rule.local_sigma and model.local_sigma is None
    if not (need_key or need_sigma):
        return
    from ._backend import resolve_backend
    from .graph import knn

    P = model.points
    xp = model.xp
    be = resolve_backend("gpu" if xp is not np else "cpu")
    k = max(rule.n_neighbors if need_key else 1, rule.local_neighbor if need_sigma else 1)
    search_rule = rule if rule.compares == "cosine" else EdgeRule(
        "uniform", None, None, None, graph="knn")
    if method == "auto":
        method = knn.choose_method(P.shape[0], P.shape[1], search_rule, be)[0]
    nbr, compared, _ = knn.knn_search(P, search_rule, k, method, be)
    if need_key:
        kk = min(rule.n_neighbors, nbr.shape[1])
        last = compared[:, kk - 1]
        key = _key(xp.asarray(last, dtype=xp.float64), rule.compares)
        model.neighbor_key = xp.where(xp.isnan(key), -xp.inf, key)
    if need_sigma:
        m = min(rule.local_neighbor, nbr.shape[1])
        model.local_sigma = knn.local_sigma(compared[:, :m])


# ------------------------------------------------------------------ the extension


def extend(rows, cols, weights, vectors, eigenvalues, n_rows: int, *, counts=None):
    """u(x) = (1/μ) Σ_j w(x, j) u_j / d(x) for each new point, and d(x).

    Parameters
    ----------
    rows, cols, weights : arrays
        The cross edges (:func:`cross_edges`).
    vectors : array, shape (n, k)
        The fit's U; NaN rows (training points left out of the embedding) take no
        part: their edges count neither in the sum nor in d(x).
    eigenvalues : array of shape (k,)
        λ; μ = 1 − λ must not vanish (:data:`MU_MIN`). The k smallest λ are below 1 on
        graphs with clusters; a column of λ near 1 is extended with its error amplified
        by 1/|μ|.
    n_rows : int
        The new points (rows of the result).
    counts : array of shape (n,), optional
        A factor on each training point's weights (representatives: the points each
        stands for, over their mean).

    Returns
    -------
    u : float64 array, shape (n_rows, k)
    degree : float64 array, shape (n_rows,)
    """
    xp = array_module(vectors)
    mu = 1.0 - np.asarray(to_numpy(eigenvalues), dtype=np.float64)
    if not (np.abs(mu) > MU_MIN).all():
        raise ValueError(
            f"the Nyström extension divides by μ = 1 − λ; the fitted eigenvalues "
            f"{np.asarray(eigenvalues).tolist()} include λ = 1 (to {MU_MIN:g}), whose "
            "columns it cannot extend; refit with fewer clusters")
    U = xp.asarray(vectors, dtype=xp.float64)
    active = xp.isfinite(U).all(axis=1)
    U = xp.where(active[:, None], U, 0.0)
    w = xp.asarray(weights, dtype=xp.float64) * active[cols]
    if counts is not None:
        w = w * counts[cols]
    # Sums by row with bincount: no sort of the pairs (a sparse matrix would sort them).
    degree = xp.bincount(rows, weights=w, minlength=n_rows)
    num = xp.empty((n_rows, U.shape[1]), dtype=xp.float64)
    for c in range(U.shape[1]):
        num[:, c] = xp.bincount(rows, weights=w * U[cols, c], minlength=n_rows)
    with np.errstate(divide="ignore", invalid="ignore"):
        u = num / degree[:, None] / xp.asarray(mu)[None, :]
    u[degree <= 0] = xp.nan
    return u, degree


def _unit_rows(u):
    xp = array_module(u)
    norms = xp.sqrt((u * u).sum(axis=1))
    with np.errstate(divide="ignore", invalid="ignore"):
        out = u / norms[:, None]
    out[~(norms > 0)] = xp.nan
    return out


def _landmark_rows(model: ExtensionModel, Q):
    """u(x) = Ẑ(x) V Σ^-1 for a batch, and the row sums of x's weights."""
    from .landmarks import nearest_landmarks

    xp = model.xp
    cols, values = nearest_landmarks(Q, model.points, model.n_nearest, model.metric)
    if model.metric == "gaussian":
        finite = xp.isfinite(values)
        shift = values[:, :1]
        W = xp.exp(-(values.astype(xp.float64) - shift) / (2.0 * model.sigma ** 2))
        W = xp.where(finite, W, 0.0)
    else:
        W = xp.maximum(values.astype(xp.float64), 0.0)
    rowsum = W.sum(axis=1)
    Z = W / xp.where(rowsum > 0, rowsum, 1.0)[:, None] * model.inv_sqrt_degree[cols]
    V = xp.asarray(model.right)
    # Σ_r Ẑ(x, c_r) V[c_r] without the n × p matrix.
    u = xp.einsum("br,brk->bk", Z, V[cols]) / xp.asarray(model.singular_values)[None, :]
    u[rowsum <= 0] = xp.nan
    return u, rowsum


def transform(model: ExtensionModel, Xv, *, method: str = "auto", exclude=None,
              batch: int | None = None):
    """The embedding rows (unit length) of new points in the fitted space.

    Parameters
    ----------
    model : ExtensionModel
    Xv : array of float32, shape (b, d)
        New points after :func:`fitted_space` (moved to the model's device here).
    method : {"auto", "bruteforce", "kdtree", "grid"}
        The cross-edge search (:func:`cross_edges`).
    exclude : int array of shape (b,), optional
        See :func:`cross_edges` (exact and representatives modes).
    batch : int, optional
        New points per batch (default :func:`batch_rows`).

    Returns
    -------
    embedding : float64 array, shape (b, k), on the model's device
        NaN rows for new points without an edge to an embedded training point (or,
        landmarks, without a positive weight to a landmark).
    """
    xp = model.xp
    Xv = xp.ascontiguousarray(xp.asarray(Xv, dtype=xp.float32))
    b = Xv.shape[0]
    k = model.n_columns
    if batch is None:
        batch = batch_rows(model, b, method=method)
    if model.mode != "landmarks":
        training_neighborhoods(model)
    out = xp.empty((b, k), dtype=xp.float64)
    for s in range(0, b, batch):
        e = min(b, s + batch)
        Q = Xv[s:e]
        if model.mode == "landmarks":
            u, _ = _landmark_rows(model, Q)
        else:
            ex = None if exclude is None else xp.asarray(exclude)[s:e]
            r, c, w = cross_edges(Q, model.points, model.rule, neighbor_key=model.neighbor_key,
                                  local_sigma=model.local_sigma, exclude=ex, method=method)
            u, _ = extend(r, c, w, model.vectors, model.eigenvalues, e - s,
                          counts=model.counts)
        out[s:e] = _unit_rows(u)
    return out


def predict(model: ExtensionModel, Xv, *, method: str = "auto", batch: int | None = None):
    """Cluster labels of new points in the fitted space (int32, −1: unreachable).

    Exact and landmarks modes: the fitted k-means' nearest centre to the embedding row
    (:func:`transform`). Representatives mode: the label of the nearest representative,
    the rule by which the fit labels its own points. New points without an edge to an
    embedded training point get −1, and an :class:`UnreachableWarning` says how many.
    """
    xp = model.xp
    Xv = xp.ascontiguousarray(xp.asarray(Xv, dtype=xp.float32))
    if model.mode == "representatives":
        from .representatives import assign_rows

        nearest, _ = assign_rows(Xv, model.points)
        return xp.asarray(model.point_labels, dtype=xp.int32)[nearest]
    emb = transform(model, Xv, method=method, batch=batch)
    reached = xp.isfinite(emb).all(axis=1)
    labels = xp.full(emb.shape[0], -1, dtype=xp.int32)
    keep = xp.flatnonzero(reached)
    if keep.size:
        centers = model.kmeans.cluster_centers_
        rows = emb[keep].astype(centers.dtype)
        labels[keep] = model.kmeans.predict(xp.asarray(rows)).astype(xp.int32)
    missing = int(emb.shape[0] - keep.size)
    if missing:
        where = ("a landmark with a positive weight" if model.mode == "landmarks"
                 else "an embedded training point")
        warnings.warn(
            f"{missing} of the {emb.shape[0]} new points have no edge to {where} under the "
            f"fitted rule ({describe(model)}): they are outside every training point's reach "
            "and get label -1", UnreachableWarning, stacklevel=3)
    return labels


def describe(model: ExtensionModel) -> str:
    """The fitted rule in one line (for messages)."""
    if model.mode == "landmarks":
        sigma = "" if model.sigma is None else f", σ={model.sigma:.4g}"
        return f"{model.n_nearest} nearest landmarks, {model.metric}{sigma}"
    return model.rule.describe()


def fitted_space(model: ExtensionModel, X):
    """New points as the fit saw its own: through the fit's input stage (its float64
    offset and unit, :func:`explorer.inputs.prepare_input` with ``like``), the feature
    scaling applied, on the model's device.

    Raises the validation errors of the input stage (non-finite, complex, not 2-D, ...).
    """
    from .inputs import prepare_input

    xp = model.xp
    Xv = prepare_input(X, min_samples=1, center=False, like=model.data).X
    if model.scaler is not None:
        Xv = model.scaler.transform(Xv)
    return xp.ascontiguousarray(xp.asarray(Xv, dtype=xp.float32))
