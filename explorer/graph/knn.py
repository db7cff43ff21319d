"""kNN graphs and self-tuning σ, on the CPU and the GPU, with one assembly.

A kNN build is a search and an assembly. The search gives every point its k nearest
other points with their float64 compared values, ties broken by the lower index: on
the CPU by ``_knn_cpu`` (kd-tree or BLAS blocks, exact), on the GPU by ``_knn_gpu``
(the grid searched ring by ring for d <= 3, cuBLAS distance tiles with a per-row
top-k merge beyond; both decide on float64 values). Everything after the search is
written once with the array namespace ``xp`` (NumPy or CuPy) and shared:

- :func:`knn_csr`: directed lists → the canonical symmetric CSR, as the union
  (``"knn"``) or the intersection (``"mutual_knn"``), a threshold if the rule has one,
  weights per the metric (pairing (i, j) with (j, i) is the one step written twice:
  one sort of pair keys on the GPU, SciPy's compiled transpose on the host, where the
  sort cost more than the search);
- :func:`edge_sqdist`: float64 squared distances of pairs, accumulated feature by
  feature in the order of the reference (bit for bit the reference on the CPU);
- :func:`local_sigma` and :func:`local_scale`: self-tuning σ (Zelnik-Manor &
  Perona): σi = distance to the m-th nearest other point, read from the search's own
  float64 values, weight
  ``exp(-d²/(σi σj))`` on the edges of any graph kind.

:func:`build_knn` runs them for :func:`explorer.build_graph`; :func:`apply_local_sigma`
re-weighs an ε graph built with the rule's uniform pattern rule;
:func:`nearest_neighbors` gives the lists alone.
"""

from __future__ import annotations

import time

import numpy as np
import scipy.sparse as sp

from .. import memory
from .._backend import Backend, array_module
from .._csr import csr_from_arrays, entry_rows
from ._knn_cpu import KNN_CPU_METHODS, choose_knn_method, knn_search_cpu
from ._reference import index_dtype, local_weights_from, weights_from
from .rule import EdgeRule

__all__ = [
    "KNN_CPU_METHODS",
    "KNN_GPU_METHODS",
    "apply_local_sigma",
    "build_knn",
    "choose_knn_method",
    "edge_sqdist",
    "knn_csr",
    "knn_search",
    "local_scale",
    "local_sigma",
    "nearest_neighbors",
]

#: GPU kNN searches (the names of the ε builders they share their layout with).
KNN_GPU_METHODS = ("grid", "gemm")

#: Pairs per chunk of :func:`edge_sqdist` (its float64 scratch: a few arrays of this).
_PAIR_CHUNK = 1 << 22


def knn_search(X, rule: EdgeRule, k: int, method: str, be: Backend):
    """Each point's `k` nearest other points on the backend (``method`` resolved).

    Returns
    -------
    neighbors : int64 array (n, min(k, n - 1)), -1 padded
    compared : float64 array, same shape: squared distances or cosines
    info : dict
    """
    if be.is_gpu:
        from . import _knn_gpu

        return _knn_gpu.knn_search_gpu(X, rule, k, method)
    return knn_search_cpu(X, rule, k, method)


def nearest_neighbors(X, k: int, *, metric: str = "uniform", method: str = "auto",
                      backend: str = "auto"):
    """Each point's `k` nearest other points, exact, on the chosen backend.

    Parameters
    ----------
    X : array_like of shape (n, d)
        NumPy or CuPy (moved to the backend).
    k : int
        ``1 <= k``; at most ``n - 1`` are returned.
    metric : {"uniform", "gaussian", "cosine"}
        Only what "near" is: squared distance, or cosine similarity for ``"cosine"``.
    method : str
        ``"auto"``, or a search of the backend (``"kdtree"``, ``"bruteforce"``;
        ``"grid"``, ``"gemm"``).
    backend : {"auto", "gpu", "cpu"}

    Returns
    -------
    neighbors : int64 array (n, min(k, n - 1)), -1 padded, ascending by (value, index)
    compared : float64 array, same shape: squared distances or cosines
    """
    from .._backend import resolve_backend
    from ..inputs import prepare_input

    rule = EdgeRule.from_args(metric, 1.0 if metric == "gaussian" else None, graph="knn",
                              n_neighbors=k)
    be = resolve_backend(backend)
    data = prepare_input(X, center=rule.compares == "sqdist")
    X = data.X
    xp = be.xp
    X = xp.ascontiguousarray(xp.asarray(X)) if be.is_gpu else np.ascontiguousarray(
        _host(X))
    if method == "auto":
        method = choose_method(X.shape[0], X.shape[1], rule, be)[0]
    check_method(method, rule, be)
    nbr, compared, _ = knn_search(X, rule, k, method, be)
    if rule.compares == "sqdist" and data.unit != 1.0:  # back in the input's units
        compared = compared / data.unit**2
    return nbr, compared


def _host(X):
    from .._backend import to_numpy

    return to_numpy(X)


def choose_method(n: int, d: int, rule: EdgeRule, be: Backend) -> tuple[str, str]:
    """``method="auto"`` for a kNN search: the builder and why."""
    if be.is_gpu:
        from . import _knn_gpu

        return _knn_gpu.choose_knn_method_gpu(n, d, rule)
    return choose_knn_method(n, d, rule)


def check_method(method: str, rule: EdgeRule, be: Backend) -> None:
    """Refuse a method the kNN search does not have on this backend."""
    allowed = KNN_GPU_METHODS if be.is_gpu else KNN_CPU_METHODS
    if method not in allowed:
        raise ValueError(
            f"method={method!r} does not build kNN graphs on the {be.name} backend "
            f"(graph={rule.graph!r}); use one of {', '.join(map(repr, ('auto', *allowed)))}"
        )
    if method in ("kdtree", "grid") and rule.compares != "sqdist":
        other = "gemm" if be.is_gpu else "bruteforce"
        raise ValueError(f"method={method!r} serves distance rules only; got metric="
                         f"{rule.metric!r}: use method={other!r} or 'auto'")


def knn_csr(n: int, neighbors, compared, rule: EdgeRule):
    """The canonical symmetric CSR of directed kNN lists under `rule`.

    Parameters
    ----------
    n : int
    neighbors : int64 array (n, k), NumPy or CuPy
        Row i: the neighbours of point i; ``-1`` pads.
    compared : float64 array (n, k)
        Their compared values (equal for (i, j) and (j, i), bit for bit).
    rule : EdgeRule
        ``graph`` says union or intersection; a threshold drops the pairs that fail
        it; fixed-σ weights per the metric, and all ones under ``sigma="local"``
        (:func:`local_scale` weighs them).

    Returns
    -------
    csr : CSR matrix (SciPy or cupyx), float32, int32 indices while nnz < 2³¹
    compared : float64 array (nnz,)
        The compared value of each stored entry.
    """
    xp = array_module(neighbors)
    k = neighbors.shape[1]
    rows = xp.repeat(xp.arange(n, dtype=xp.int64), k)
    cols = neighbors.reshape(-1)
    vals = compared.reshape(-1)
    ok = cols >= 0
    rows, cols, vals = rows[ok], cols[ok], vals[ok]
    if xp is np:
        r, c, vals = _pair_up_host(n, rows, cols, vals, union=rule.graph == "knn")
    else:
        r, c, vals = _pair_up_by_keys(xp, n, rows, cols, vals, union=rule.graph == "knn")
    if rule.has_threshold:
        keep = (vals < rule.sqdist_cutoff) if rule.compares == "sqdist" else (
            vals > rule.threshold)
        r, c, vals = r[keep], c[keep], vals[keep]
    nnz = int(c.size)
    idx = index_dtype(nnz, n)
    indptr = xp.zeros(n + 1, dtype=idx)
    indptr[1:] = xp.cumsum(xp.bincount(r, minlength=n))
    if rule.local_sigma:
        weights = xp.ones(nnz, dtype=xp.float32)
    else:
        weights = weights_from(vals, rule).astype(xp.float32)
    csr = csr_from_arrays(weights, c.astype(idx), indptr, (n, n), canonical=True)
    return csr, vals


def _pair_up_by_keys(xp, n, rows, cols, vals, *, union):
    """Directed pairs → the symmetric pairs sorted by (row, column): the union of
    (i, j) and (j, i), or the pairs listed both ways; ``(rows, cols, vals)``. One sort of
    the keys row·n + column (the GPU's path)."""
    if union:
        keys = xp.concatenate([rows * n + cols, cols * n + rows])
        vals = xp.concatenate([vals, vals])
        order = xp.argsort(keys)
        keys, vals = keys[order], vals[order]
        first = xp.ones(keys.size, dtype=bool)
        first[1:] = keys[1:] != keys[:-1]
        keys, vals = keys[first], vals[first]
    else:
        keys = rows * n + cols
        order = xp.argsort(keys)
        keys, vals = keys[order], vals[order]
        rev = (keys % n) * n + keys // n
        pos = xp.minimum(xp.searchsorted(keys, rev), max(keys.size - 1, 0))
        mutual = keys[pos] == rev if keys.size else xp.zeros(0, dtype=bool)
        keys, vals = keys[mutual], vals[mutual]
    return keys // n, keys % n, vals


def _pair_up_host(n, rows, cols, vals, *, union):
    """:func:`_pair_up_by_keys` on the host by SciPy's compiled sparse routines: the
    directed lists as a CSR whose values are entry numbers 1, 2, ..., transposed
    (a counting sort), and the element-wise maximum (union: a pair listed once keeps
    its number, against the implicit 0) or minimum (intersection: 0 drops it) of the
    two. A pair listed both ways has equal compared values either way, so either
    number gives its value. On circles 10⁵ (k = 10) :func:`knn_csr` took 0.065 s this
    way against 0.18 s by the sort of 2·10⁶ keys, which cost more than the kd-tree
    search itself."""
    counts = np.bincount(rows, minlength=n)
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    number = np.arange(1, rows.size + 1, dtype=np.float64)  # exact up to 2**53
    directed = sp.csr_matrix((number, cols, indptr), shape=(n, n))
    directed.sort_indices()
    transposed = directed.T.tocsr()
    both = directed.maximum(transposed) if union else directed.minimum(transposed)
    both.sort_indices()
    r = np.repeat(np.arange(n, dtype=np.int64), np.diff(both.indptr))
    picked = both.data.astype(np.int64) - 1
    return r, both.indices.astype(np.int64), vals[picked]


def edge_sqdist(X, rows, cols):
    """Float64 squared distances of the pairs ``(rows[e], cols[e])`` of rows of `X`.

    ``Σ_k (x_ik − x_jk)²`` accumulated one feature at a time in feature order, as
    :mod:`explorer.graph.reference` does: on the CPU the very same bits; on the GPU the
    same IEEE operations (CuPy's elementwise kernels, no fused multiply-add across the
    separate operations). Chunked over pairs (scratch: a few float64 arrays of
    ``_PAIR_CHUNK``).
    """
    xp = array_module(X)
    cols_f = xp.ascontiguousarray(X.T)  # one contiguous row per feature
    out = xp.empty(rows.shape[0], dtype=xp.float64)
    for s in range(0, rows.shape[0], _PAIR_CHUNK):
        i, j = rows[s : s + _PAIR_CHUNK], cols[s : s + _PAIR_CHUNK]
        acc = xp.zeros(i.shape[0], dtype=xp.float64)
        for f in range(cols_f.shape[0]):
            col = cols_f[f]
            diff = col[i].astype(xp.float64) - col[j].astype(xp.float64)
            diff *= diff
            acc += diff
        out[s : s + _PAIR_CHUNK] = acc
    return out


def local_sigma(sqdist):
    """σi of self-tuning weights from each point's squared distances to its m nearest
    other points (ascending, float64, as a search returns them): the distance to the
    m-th, ``sqrt(sqdist[:, -1])``. The searches' values are the reference's, so σ is
    :func:`~explorer.graph.reference.reference_local_sqdist`'s to the bit, with no
    second pass over the data."""
    xp = array_module(sqdist)
    return xp.sqrt(sqdist[:, -1])


def local_scale(csr, sqdist, sigma):
    """The CSR with weights ``exp(-d²/(σi σj))`` (:func:`~explorer.graph.reference.
    local_weights_from`) for the squared distances `sqdist` of its stored entries."""
    xp = array_module(sigma)
    rows = entry_rows(csr.indptr, xp)
    cols = csr.indices
    w = local_weights_from(sqdist, sigma[rows], sigma[cols]).astype(xp.float32)
    return csr_from_arrays(w, csr.indices, csr.indptr, csr.shape, canonical=True)


def apply_local_sigma(csr, X, rule: EdgeRule, method: str, be: Backend, timings: dict):
    """Weigh an ε graph (built with ``rule.pattern_rule``) by self-tuning σ."""
    xp = be.xp
    t0 = time.perf_counter()
    m_rule = EdgeRule("uniform", None, None, None, graph="knn")
    m_method = choose_method(X.shape[0], X.shape[1], m_rule, be)[0]
    _, sqdist, _ = knn_search(X, m_rule, rule.local_neighbor, m_method, be)
    sigma = local_sigma(sqdist)
    d2 = edge_sqdist(X, entry_rows(csr.indptr, xp), csr.indices.astype(xp.int64))
    out = local_scale(csr, d2, sigma)
    _sync(xp)
    timings["local_sigma"] = time.perf_counter() - t0
    return out


def check_knn_memory(n: int, d: int, rule: EdgeRule, be: Backend) -> None:
    """Refuse a kNN build whose lists and matrix will not fit (:mod:`explorer.memory`)."""
    k = min(max(rule.n_neighbors, rule.local_neighbor if rule.local_sigma else 0), n - 1)
    need = memory.estimate_knn_bytes(n, k, gpu=be.is_gpu)
    what = f"the {rule.graph} graph of n={n:,} points with k={k}"
    advice = "lower n_neighbors or subsample the data"
    if be.is_gpu:
        memory.check_gpu_allocation(need, what, advice)
    else:
        memory.check_allocation(need, what, advice)


def build_knn(X, rule: EdgeRule, method: str, be: Backend):
    """Build the kNN graph of `rule` on the backend of `X` (validated input).

    Returns
    -------
    csr : canonical CSR on the backend
    timings : dict
        ``search``, ``assemble`` and, under ``sigma="local"``, ``local_sigma`` (s).
    info : dict
        The search's report and the ``k`` used.
    """
    xp = be.xp
    n, d = X.shape
    check_knn_memory(n, d, rule, be)
    timings: dict = {}
    k = rule.n_neighbors
    if rule.local_sigma:
        k = max(k, rule.local_neighbor)
    t0 = time.perf_counter()
    nbr, compared, info = knn_search(X, rule, k, method, be)
    _sync(xp)
    timings["search"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    kk = min(rule.n_neighbors, nbr.shape[1])
    csr, vals = knn_csr(n, nbr[:, :kk], compared[:, :kk], rule)
    _sync(xp)
    timings["assemble"] = time.perf_counter() - t0
    if rule.local_sigma:
        t0 = time.perf_counter()
        m = min(rule.local_neighbor, nbr.shape[1])
        sigma = local_sigma(compared[:, :m])
        csr = local_scale(csr, vals, sigma)
        _sync(xp)
        timings["local_sigma"] = time.perf_counter() - t0
    info = dict(info)
    info["k"] = int(kk)
    return csr, timings, info


def _sync(xp) -> None:
    if xp is not np:
        xp.cuda.get_current_stream().synchronize()
