"""Graph parameters that give a sensible ε-neighbourhood graph on a data set.

An ε-graph is only as good as its threshold: too small and the clusters fall apart
into stray pieces, too large and they merge (and the matrix grows). The rules here
look at the data; see :func:`suggest_params`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

#: Up to this many features the squared Euclidean distance with a gaussian weight is
#: suggested (and a kd-tree answers neighbour queries); above it, the cosine
#: similarity, which the paper found more effective for high-dimensional data.
LOW_D = 8

#: Rows of the subsample the low-d rule tests its candidate graphs on.
_SUBSAMPLE = 20000
#: Quantile levels of the k-th neighbour distance tried as thresholds, ascending.
_LEVELS = (0.5, 0.75, 0.9, 0.95, 0.98, 0.99, 0.995, 0.999, 1.0)
#: Components this small (but not single rows) make a candidate fail.
_SMALL = 25
#: The suggested graph may hold at most this many nonzeros per row on average, and at
#: least :data:`MIN_MEAN_DEGREE` whatever the memory: beyond, build time grows faster
#: than the clusters improve; below, the clusters fall apart.
_MAX_MEAN_DEGREE = 500
MIN_MEAN_DEGREE = 20
#: Bytes per nonzero a whole fit holds on the GPU (:func:`graph_nnz_budget`): the
#: graph (column and value, 8 B), the normalised operator the eigensolver multiplies
#: by (8 B) and the builder's scratch (8 B).
GPU_FIT_BYTES_PER_NNZ = 24
#: The nonzero budget when the backend's memory cannot be read (no /proc/meminfo).
FALLBACK_MAX_NNZ = 2e7
#: Rows sampled for the high-d (cosine) rule.
_SAMPLE_HIGH_D = 200
#: Rows per block when comparing the high-d sample against every row (memory bound).
_BLOCK_ROWS = 16384


def suggest_sqdist(X, *, n_classes=None, n_neighbors=10, random_state=0,
                   backend="auto") -> float:
    """The squared-distance threshold of the low-d rule (see :func:`suggest_params`)."""
    return sqdist_search(X, n_classes=n_classes, n_neighbors=n_neighbors,
                         random_state=random_state, backend=backend).threshold


@dataclass(frozen=True)
class SqdistSearch:
    """What the low-d threshold search found (:func:`sqdist_search`).

    Attributes
    ----------
    threshold : float
        The suggested ``threshold_sqdist`` (rounded to two significant digits).
    level : float
        Its quantile level of the squared distance to the `n_neighbors`-th neighbour.
    clean : bool
        Whether the subsample's ε-graph at that threshold passed every test (no stray
        small component, at most 1 % isolated rows, no more pieces than classes); False
        when no affordable level did and the densest affordable one was taken.
    max_nnz : float
        The nonzero budget the mean degree was bounded by (:func:`graph_nnz_budget`).
    budget_reason : str
        Where the budget came from.
    """

    threshold: float
    level: float
    clean: bool
    max_nnz: float
    budget_reason: str


def sqdist_search(X, *, n_classes=None, n_neighbors=10, random_state=0, backend="auto",
                  max_nnz=None) -> SqdistSearch:
    """Run the low-d threshold search of :func:`suggest_params` and say how it ended.

    Parameters
    ----------
    X : ndarray of shape (n, d)
        float32 data on the host.
    n_classes : int, optional
        No more components than this is one of the tests.
    n_neighbors : int
        The neighbour count the threshold is measured in.
    random_state : int
        Seeds the row samples.
    backend : {"auto", "gpu", "cpu"}
        The backend that will build the graph: its memory bounds the graph's size
        (:func:`graph_nnz_budget`).
    max_nnz : float, optional
        The nonzero budget itself (overrides `backend`).

    Returns
    -------
    SqdistSearch
    """
    if max_nnz is None:
        max_nnz, reason = graph_nnz_budget(backend)
    else:
        max_nnz, reason = float(max_nnz), "given"
    n = X.shape[0]
    k = min(n_neighbors, n - 1)
    t, level, clean = _connected_sqdist(X, k, n_classes, np.random.default_rng(random_state),
                                        max_nnz)
    return SqdistSearch(_round2(t), level, clean, max_nnz, reason)


def graph_nnz_budget(backend="auto") -> tuple[float, str]:
    """Nonzeros a suggested graph may hold, from the memory of the backend that builds it.

    GPU: the free device memory (:func:`explorer.memory.free_device_bytes`) times
    :data:`explorer.memory.GPU_MEMORY_FRACTION` over :data:`GPU_FIT_BYTES_PER_NNZ` (the
    graph, the eigensolver's operator and the builder's scratch). CPU: the available
    host memory times :data:`explorer.memory.CPU_MEMORY_FRACTION` over
    :data:`explorer.memory.CPU_BYTES_PER_NNZ` (the CPU builder's peak). When the memory
    cannot be read, :data:`FALLBACK_MAX_NNZ`.

    Parameters
    ----------
    backend : {"auto", "gpu", "cpu"}
        ``"auto"``: the GPU when one answers (as :func:`explorer.resolve_backend`).

    Returns
    -------
    (float, str)
        The budget and where it came from (for logs and the estimator's record).
    """
    from .. import memory
    from .._backend import resolve_backend

    if resolve_backend(backend).is_gpu:
        return nnz_budget("gpu", memory.free_device_bytes())
    return nnz_budget("cpu", memory.available_host_bytes())


def nnz_budget(device: str, nbytes: int | None) -> tuple[float, str]:
    """The nonzero budget of :func:`graph_nnz_budget` for `nbytes` free (``"gpu"``) or
    available (``"cpu"``) bytes; None: unknown, :data:`FALLBACK_MAX_NNZ`."""
    from .. import memory

    if nbytes is None:
        return FALLBACK_MAX_NNZ, f"{device.upper()} memory unknown: the fallback budget"
    if device == "gpu":
        budget = memory.GPU_MEMORY_FRACTION * nbytes / GPU_FIT_BYTES_PER_NNZ
        return budget, (f"GPU: {memory.format_bytes(nbytes)} free, {GPU_FIT_BYTES_PER_NNZ} B "
                        "per nonzero for the fit")
    budget = memory.CPU_MEMORY_FRACTION * nbytes / memory.CPU_BYTES_PER_NNZ
    return budget, (f"CPU: {memory.format_bytes(nbytes)} available, "
                    f"{memory.CPU_BYTES_PER_NNZ} B per nonzero to build")


def max_mean_degree(n: int, max_nnz: float) -> float:
    """The suggestion's bound on the mean degree at `n` rows: ``max_nnz / n`` within
    [:data:`MIN_MEAN_DEGREE`, 500]."""
    return min(_MAX_MEAN_DEGREE, max(MIN_MEAN_DEGREE, max_nnz / max(n, 1)))


def suggest_cosine(X, *, n_neighbors=10, random_state=0) -> float:
    """The cosine threshold of the high-d rule (see :func:`suggest_params`)."""
    n = X.shape[0]
    k = min(n_neighbors, n - 1)
    rows = _sample_rows(np.random.default_rng(random_state), n, _SAMPLE_HIGH_D)
    kth = _kth_cosine(X, rows, k)
    kth = kth[np.isfinite(kth)]
    if kth.size == 0:  # every row is a zero vector: no threshold gives an edge
        return 0.0
    # Rounded down: a row whose k-th similarity is the quantile keeps that neighbour.
    q = float(np.quantile(kth, 0.1))
    t = _round2_below(q) if q > 0 else q
    # A threshold at or above 1 has no edges; the rule only gets there when the
    # sampled rows all have exact duplicates in direction. Below 0, negative cosines
    # would become edges of negative weight, which no Laplacian takes.
    return max(0.0, min(t, 0.99))


def sigma_for(threshold_sqdist: float) -> float:
    """σ for a squared-distance cutoff t: ``sqrt(t / 8)``, weight ``exp(-4)`` at the cutoff."""
    return _round2(math.sqrt(threshold_sqdist / 8.0))


def _connected_sqdist(X, k, n_classes, rng, max_nnz) -> tuple[float, float, bool]:
    """(threshold, its quantile level, whether the subsample's graph was clean)."""
    from scipy.spatial import cKDTree

    n = X.shape[0]
    max_degree = max_mean_degree(n, max_nnz)
    sub = X[_sample_rows(rng, n, _SUBSAMPLE)].astype(np.float64)
    distinct = np.unique(sub, axis=0)
    copies = 2 <= distinct.shape[0] < sub.shape[0]
    if copies:
        # A copy is a neighbour at distance 0, which says nothing of the spacing: the
        # distances (and the graphs tested) are those of the distinct rows (survey
        # answers: every row may have k copies, and every k-th distance be 0).
        sub, k = distinct, min(k, distinct.shape[0] - 1)
    tree = cKDTree(sub)
    kth = _kth_sqdist(tree, sub, k)
    verdicts = {}

    def verdict(i):
        if i not in verdicts:  # the value suggested, rounded, is the one tested
            t = _positive_quantile(kth, _LEVELS[i])
            verdicts[i] = _graph_verdict(tree, t, max_degree, n_classes)
        return verdicts[i]

    # Binary search for the first level that is "ok" or already "dense" (both hold
    # from some level up: a larger distance rarely splits a graph further).
    lo, hi = 0, len(_LEVELS) - 1
    while lo < hi:
        mid = (lo + hi) // 2
        if verdict(mid) == "split":
            lo = mid + 1
        else:
            hi = mid
    clean = verdict(lo) == "ok"
    if verdict(lo) == "dense":  # none affordable is clean: the densest affordable one
        lo = max(lo - 1, 0)
    level = _LEVELS[lo]
    if sub.shape[0] < n:  # the same level, read off distances to all rows
        full = np.unique(X, axis=0) if copies else X
        full = full.astype(np.float64)
        kth = _kth_sqdist(cKDTree(full), full[_sample_rows(rng, len(full), _SUBSAMPLE)], k)
    return _positive_quantile(kth, level), level, clean


def _graph_verdict(tree, t, max_degree, n_classes) -> str:
    """``"ok"``, ``"split"`` (stray or too many components, many isolated rows) or
    ``"dense"`` (mean degree over `max_degree`) for the ε-graph of the tree's points."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    m = tree.n
    if t <= 0:
        return "split"
    # query_pairs keeps distances <= r; an edge needs a squared distance < t.
    pairs = tree.query_pairs(np.nextafter(math.sqrt(t), 0.0), output_type="ndarray")
    if 2 * len(pairs) > max_degree * m:
        return "dense"
    graph = coo_matrix((np.ones(len(pairs)), (pairs[:, 0], pairs[:, 1])), shape=(m, m))
    _, comp = connected_components(graph, directed=False)
    sizes = np.bincount(comp)
    pieces = sizes[sizes > 1]
    small = min(_SMALL, max(2, m // 10))  # tiny data: a cluster is a small piece
    split = (
        np.any(pieces < small)
        or (sizes == 1).sum() > 0.01 * m
        or (n_classes is not None and pieces.size > n_classes)
    )
    return "split" if split else "ok"


def _sample_rows(rng, n, size):
    return np.arange(n) if n <= size else np.sort(rng.choice(n, size, replace=False))


def _kth_sqdist(tree, points, k):
    # k + 1: a point that is in the tree comes back first at distance 0 (a duplicate
    # may take its place, which is right: a duplicate is a neighbour).
    dist, _ = tree.query(points, k=k + 1, workers=-1)
    return np.asarray(dist, dtype=np.float64)[:, -1] ** 2


def _kth_cosine(X, rows, k):
    norms = np.linalg.norm(X.astype(np.float64), axis=1)
    safe = np.where(norms > 0, norms, 1.0)
    Q = (X[rows] / safe[rows, None]).astype(np.float32)
    best = np.full((rows.size, k + 1), -np.inf)
    for start in range(0, X.shape[0], _BLOCK_ROWS):
        block = X[start : start + _BLOCK_ROWS] / safe[start : start + _BLOCK_ROWS, None]
        sims = (Q @ block.T.astype(np.float32)).astype(np.float64)
        sims[:, norms[start : start + _BLOCK_ROWS] == 0] = -np.inf  # zero vectors: no edges
        both = np.concatenate([best, sims], axis=1)
        best = -np.partition(-both, k, axis=1)[:, : k + 1]
    # The row itself (cosine 1) is among the k + 1 largest; the smallest of them is
    # the k-th most similar other row.
    return best.min(axis=1)


def _positive_quantile(values, q) -> float:
    t = float(np.quantile(values, q))
    if t > 0:
        # At the top level every measured row must keep its k-th neighbour (the
        # threshold is strict): round up, past the largest distance. Tiny data ends
        # there (n = 2: the one distance).
        return _off_lattice(_round2_above(t) if q >= 1.0 else _round2(t), values)
    positive = values[values > 0]
    # Heavily duplicated data: fall back to the smallest positive neighbour distance;
    # all rows identical: any positive threshold gives the complete graph.
    return _round2(float(positive.min())) if positive.size else 1.0


#: A distance taken by at least this share of the rows' k-th neighbour distances is a
#: lattice spacing (integer data, survey answers), not a sample of a continuum.
_LATTICE_SHARE = 0.01


def _off_lattice(t: float, values) -> float:
    """`t`, moved between two distance values when it lands on one that many rows share.

    On a lattice (integer-valued data) the k-th neighbour distances take a few values,
    each shared by many rows; a threshold equal to one of them (the strict ``<`` of
    an edge) drops every neighbour at exactly that distance. A threshold within
    float32's band (:data:`explorer.graph.rule.BAND_RTOL`) of a value taken by at
    least :data:`_LATTICE_SHARE` of the rows (and 3 of them) moves to the middle of
    the gap above it, rounded to two digits where that stays inside the gap: the rows
    at that distance keep their neighbour, the next lattice distance stays out.
    Continuous data (no value shared that widely) keep `t`.
    """
    from .rule import BAND_RTOL

    vals, counts = np.unique(np.asarray(values, dtype=np.float64), return_counts=True)
    shared = vals[counts >= max(3, _LATTICE_SHARE * len(values))]
    near = shared[np.abs(shared - t) <= 4 * BAND_RTOL * t]
    if near.size == 0:
        return t
    v = float(near.max())
    above = vals[vals > v * (1 + 4 * BAND_RTOL)]
    nxt = float(above.min()) if above.size else 2.0 * v
    # The k-th distances need not take every lattice distance: no further than the
    # smallest step between the values they do take.
    steps = np.diff(vals)
    steps = steps[steps > 4 * BAND_RTOL * vals[1:]]
    if steps.size:
        nxt = min(nxt, v + float(steps.min()))
    mid = 0.5 * (v + nxt)
    r = _round2(mid)
    return r if v * (1 + 4 * BAND_RTOL) < r < nxt * (1 - 4 * BAND_RTOL) else mid


def _round2_above(x: float) -> float:
    """The smallest two-significant-digit number above `x` (> 0)."""
    unit = 10.0 ** (math.floor(math.log10(x)) - 1)
    r = math.ceil(x / unit) * unit
    if r <= x:
        r += unit
    return float(f"{r:.2g}")


def _round2_below(x: float) -> float:
    """The largest two-significant-digit number below `x` (> 0)."""
    unit = 10.0 ** (math.floor(math.log10(x)) - 1)
    r = math.floor(x / unit) * unit
    if r >= x:
        r -= unit
    return float(f"{r:.2g}")


def _round2(x: float) -> float:
    if x <= 0 or not math.isfinite(x):
        return x
    return float(f"{x:.2g}")
