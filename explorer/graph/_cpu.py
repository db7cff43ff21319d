"""CPU graph builders: a blockwise brute force and a kd-tree, both exact.

Both work in two steps. A fast, approximate step proposes *candidate* pairs, a
guaranteed superset of the edges: a float64 matrix product with a rigorous rounding
slack (brute force), or a kd-tree query with a radius widened by a relative 1e-6
(kd-tree). Then every candidate is decided and weighted by
:class:`~explorer.graph._reference.PairValues`, the reference arithmetic itself, so
the result equals :func:`~explorer.graph._reference.reference_csr` bit for bit.

The same machinery counts nonzeros per row without keeping the matrix (live
statistics), for all rows or for a sample of them.
"""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import scipy.sparse as sp
from scipy.spatial import cKDTree

from .._csr import csr_from_arrays
from ._reference import PairValues, edge_mask, index_dtype
from .rule import EdgeRule

CPU_METHODS = ("bruteforce", "kdtree")

#: ``method="auto"`` on the CPU takes the kd-tree for distance rules up to this d.
KDTREE_MAX_D = 8

#: Relative widening (and narrowing) of the kd-tree radius. SciPy decides
#: ``distance <= r`` on its own float64 arithmetic (including bulk acceptance of
#: whole nodes from bounding-box distances); its relative error is ~1e-15·d, far
#: inside this margin, so a pair it puts outside ``r·(1 + margin)`` cannot be an edge
#: and one it puts inside ``r·(1 - margin)`` surely is.
KD_MARGIN = 1e-6

#: Bytes of float64 matrix-product output per brute-force block.
_BLOCK_BYTES = 1 << 25

#: Pairs per task when the exact values of a pair list are spread over the cores
#: (:func:`exact_values`): 2²⁰ pairs keep a task's float64 temporaries in the last-level
#: cache. On moons 10⁵ (1.35·10⁷ upper pairs, 2 cores) the spread took 0.39 s where
#: one call over the whole list took 1.12 s, bit-identical (each pair's arithmetic is
#: its own).
_PAIR_TASK = 1 << 20

#: Rounding slack of the brute-force product, in units of float64 epsilon × (d + 8)
#: × the scale below. The squared distance ``|a|² + |b|² - 2 a·b`` of centred data
#: is off by at most ~(3d + 10) u (|a|² + |b|²) (u = eps/2: products of widened
#: float32 are exact, sums err by (d-1) u relative to the sum of |terms|, centring
#: adds ~4 u (|a|² + |b|²)); a cosine of unit rows by ~(2d + 8) u. Eight times eps
#: is a generous bound on both; the slack only costs a few more exact evaluations.
_SLACK_EPS = 8.0


def choose_method(n: int, d: int, params: EdgeRule) -> tuple[str, str]:
    """``method="auto"`` on the CPU: the builder, and a sentence saying why."""
    if params.compares == "sqdist" and d <= KDTREE_MAX_D:
        return "kdtree", (
            f"CPU backend, n={n}, d={d}, distance rule: a kd-tree finds the neighbours "
            f"within ε={params.radius:.4g} without testing all n² pairs (taken for d <= "
            f"{KDTREE_MAX_D})"
        )
    why = "cosine rule (a kd-tree only serves distances)" if params.compares == "cosine" else (
        f"d={d} > {KDTREE_MAX_D} (a kd-tree prunes little in high dimension)"
    )
    return "bruteforce", (
        f"CPU backend, n={n}, d={d}, {why}: blockwise brute force with a float64 "
        f"matrix product and exact re-check"
    )


class _Candidates:
    """Brute-force candidate pairs from a float64 matrix product with rounding slack."""

    def __init__(self, X, params: EdgeRule, pv: PairValues):
        X64 = np.asarray(X, dtype=np.float64)
        n, d = X64.shape
        self.n = n
        self.params = params
        self.slack = _SLACK_EPS * (d + 8) * np.finfo(np.float64).eps
        if params.compares == "sqdist":
            # Centring shrinks |a|² + |b|², and with it the rounding error of the
            # expansion, when the data sit far from the origin.
            self.Z = X64 - X64.mean(axis=0)
            self.sq = np.einsum("ij,ij->i", self.Z, self.Z)
        else:
            norms = pv.norms
            safe = np.where(norms > 0, norms, 1.0)
            self.Z = np.where((norms > 0)[:, None], X64 / safe[:, None], 0.0)
            self.sq = None

    def _mask(self, rows, cols):
        G = self.Z[rows] @ self.Z[cols].T
        if self.sq is None:
            return G > self.params.threshold - self.slack
        sa = self.sq[rows][:, None]
        sb = self.sq[cols][None, :]
        G *= -2.0
        G += sa
        G += sb
        return G < self.params.sqdist_cutoff + self.slack * (sa + sb)

    def upper(self):
        """Yield ``(i, j)`` candidate arrays with ``i < j``, block of rows by block of rows."""
        n = self.n
        step = max(1, _BLOCK_BYTES // (8 * n))
        for r0 in range(0, n, step):
            r1 = min(n, r0 + step)
            mask = np.triu(self._mask(slice(r0, r1), slice(r0, n)), k=1)
            a, b = np.nonzero(mask)
            yield a + r0, b + r0

    def of_rows(self, rows):
        """Yield ``(k, j)``: candidates ``(rows[k], j)``, ``j != rows[k]``, over all columns."""
        n = self.n
        step = max(1, _BLOCK_BYTES // (8 * n))
        for s in range(0, rows.size, step):
            blk = rows[s : s + step]
            mask = self._mask(blk, slice(None))
            mask[np.arange(blk.size), blk] = False
            a, b = np.nonzero(mask)
            yield a + s, b


def worker_count() -> int:
    """Threads the CPU builders spread array work over: the cores this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def exact_values(pv: PairValues, i, j, params: EdgeRule):
    """Compared values and float64 weights of the pairs ``(i[k], j[k])``.

    The pairs are split in tasks of :data:`_PAIR_TASK` and spread over
    :func:`worker_count` threads (NumPy's gathers and ufuncs release the GIL); every
    pair's arithmetic is the reference's own, so the split changes no bit.

    Returns
    -------
    compared, weights : float64 ndarrays of shape (len(i),)
    """
    size = int(np.size(i))
    compared = np.empty(size, dtype=np.float64)
    weights = np.empty(size, dtype=np.float64)

    def task(s):
        c = pv.at(i[s : s + _PAIR_TASK], j[s : s + _PAIR_TASK])
        compared[s : s + _PAIR_TASK] = c
        weights[s : s + _PAIR_TASK] = pv.weights(c)

    starts = range(0, size, _PAIR_TASK)
    workers = min(worker_count(), len(starts))
    if workers <= 1:
        for s in starts:
            task(s)
    else:
        with ThreadPoolExecutor(workers) as pool:
            list(pool.map(task, starts))
    return compared, weights


def _counting_sort(n: int, key, other, payload):
    """Stable counting sort of the entries by `key` in ``0..n-1``: ``(indptr, other,
    payload)`` reordered, as SciPy's COO-to-CSR conversion does it in one O(nnz) pass
    (a CSR matrix whose "columns" are `other` and whose values are `payload`; marked
    canonical, so no duplicate-summing sort follows)."""
    coo = sp.coo_matrix((payload, (key, other)), shape=(n, n))
    coo.has_canonical_format = True
    csr = coo.tocsr()
    return csr.indptr, csr.indices, csr.data


def sort_pairs(n: int, i, j):
    """Upper-triangle pairs ``(i, j)`` sorted by ``i`` then ``j``.

    One sort of the int64 keys ``i·n + j`` (NumPy's vectorised sort of plain integers,
    no argsort): on moons 10⁵ (1.35·10⁷ pairs, 2 shared cores) 0.6-0.85 s, where two
    stable counting sorts (by ``j``, then by ``i``) took 0.95-1.3 s.

    Returns
    -------
    i, j : ndarrays of the index dtype of the semantics for ``2 * len(i)`` entries
    """
    idx = index_dtype(2 * int(np.size(i)), n)
    keys = np.asarray(i, dtype=np.int64) * np.int64(n)
    keys += j
    keys.sort()
    rows, cols = np.divmod(keys, np.int64(n))
    return rows.astype(idx), cols.astype(idx)


def _tree(X) -> cKDTree:
    # An unbalanced, non-compacted tree builds several times faster on large n and
    # queries as fast on the spatially spread data this serves.
    return cKDTree(np.asarray(X, dtype=np.float64), balanced_tree=False, compact_nodes=False)


def _upper_edges(X, params: EdgeRule, method: str, pv: PairValues, timings: dict, *,
                 sort: bool = True):
    """Exact edges ``(i, j, compared, weights)`` with ``i < j``, sorted by ``(i, j)``
    (the kd-tree's only when `sort`: counting needs no order), and the candidate count."""
    t0 = time.perf_counter()
    if method == "kdtree":
        tree = _tree(X)
        t1 = time.perf_counter()
        timings["tree"] = t1 - t0
        pairs = tree.query_pairs(params.radius * (1.0 + KD_MARGIN), output_type="ndarray")
        del tree
        timings["candidates"] = time.perf_counter() - t1
        t2 = time.perf_counter()
        n_candidates = int(pairs.shape[0])
        if sort:
            i, j = sort_pairs(X.shape[0], pairs[:, 0], pairs[:, 1])
        else:
            # Contiguous narrow copies: half the memory traffic of the strided int64 columns.
            idx = index_dtype(2 * n_candidates, X.shape[0])
            i, j = pairs[:, 0].astype(idx), pairs[:, 1].astype(idx)
        del pairs
        timings["sort"] = time.perf_counter() - t2
        t3 = time.perf_counter()
        compared, weights = exact_values(pv, i, j, params)
        keep = edge_mask(compared, params)
        if not keep.all():  # the widened radius admits only the odd extra pair
            i, j, compared, weights = i[keep], j[keep], compared[keep], weights[keep]
        timings["exact"] = time.perf_counter() - t3
        return i, j, compared, weights, n_candidates
    # Blocks of rows in order, each's nonzeros in row-major order: the pairs come out
    # sorted by (i, j) as they are found.
    parts_i, parts_j = [], []
    n_candidates = 0
    for i, j in _Candidates(X, params, pv).upper():
        n_candidates += i.size
        parts_i.append(i)
        parts_j.append(j)
    i, j = np.concatenate(parts_i), np.concatenate(parts_j)
    timings["candidates"] = time.perf_counter() - t0
    t1 = time.perf_counter()
    compared, weights = exact_values(pv, i, j, params)
    keep = edge_mask(compared, params)
    i, j, compared, weights = i[keep], j[keep], compared[keep], weights[keep]
    timings["exact"] = time.perf_counter() - t1
    return i, j, compared, weights, n_candidates


def symmetric_csr(n: int, i, j, weights):
    """Canonical symmetric CSR from upper-triangle edges ``(i < j)`` sorted by ``(i, j)``.

    One stable counting sort by row of the lower entries ``(j, i)`` followed by the
    upper entries ``(i, j)``: row ``r`` receives its lower entries in ascending ``i``
    (the pairs are sorted by ``i``), then its upper entries in ascending ``j``, and
    every lower column is below ``r`` and every upper one above. So the rows come out
    sorted in one O(nnz) pass, with no sort over the entries (SciPy's COO conversion
    with duplicate summing sorted each row again: 1.9 of the 3.9 s of moons 10⁵).
    Explicit zeros (underflowed weights) are kept.

    Parameters
    ----------
    n : int
    i, j : int ndarrays
        Edges with ``i < j``, sorted by ``i`` then ``j``, no duplicates.
    weights : ndarray
        Their weights (cast to float32).
    """
    nnz = 2 * int(np.size(i))
    idx = index_dtype(nnz, n)
    w = np.asarray(weights, dtype=np.float32)
    if nnz == 0:
        return csr_from_arrays(np.empty(0, np.float32), np.empty(0, idx),
                               np.zeros(n + 1, idx), (n, n), canonical=True)
    rows = np.concatenate([j, i]).astype(idx, copy=False)
    cols = np.concatenate([i, j]).astype(idx, copy=False)
    indptr, indices, data = _counting_sort(n, rows, cols, np.concatenate([w, w]))
    # SciPy may pick the index dtype itself; the semantics fix the width.
    return csr_from_arrays(data, indices.astype(idx, copy=False),
                           indptr.astype(idx, copy=False), (n, n), canonical=True)


def build_cpu(X, params: EdgeRule, method: str):
    """Build the graph on the CPU with `method` (``"bruteforce"`` or ``"kdtree"``).

    Parameters
    ----------
    X : ndarray of shape (n, d), float32
        Validated host data.
    params : EdgeRule
    method : {"bruteforce", "kdtree"}
        The caller has checked that a kd-tree is only asked for a distance rule.

    Returns
    -------
    csr : scipy.sparse.csr_matrix
        Canonical, equal to ``reference_csr(X, params)``.
    timings : dict
        Sub-stage seconds (``tree``, ``candidates``, ``exact``, ``assemble``).
    info : dict
        ``candidates``: pairs proposed by the approximate step (upper triangle);
        ``edges``: of them, edges.
    """
    timings: dict = {}
    pv = PairValues(X, params)
    i, j, _, weights, n_candidates = _upper_edges(X, params, method, pv, timings)
    t0 = time.perf_counter()
    csr = symmetric_csr(X.shape[0], i, j, weights)
    timings["assemble"] = time.perf_counter() - t0
    return csr, timings, {"candidates": n_candidates, "edges": int(i.size)}


def count_rows_cpu(X, params: EdgeRule, method: str, rows=None, *, low_memory=False):
    """Exact nonzeros per row, without building the matrix.

    Parameters
    ----------
    X : ndarray of shape (n, d), float32
    params : EdgeRule
    method : {"bruteforce", "kdtree"}
    rows : ndarray of int, optional
        Count only these rows (ascending, unique); all rows when None.
    low_memory : bool
        Keep memory O(n) for the kd-tree even when counting all rows (slower).

    Returns
    -------
    ndarray of int64
        Nonzeros of each row asked for (diagonal excluded).

    Notes
    -----
    The brute force keeps memory at O(n) plus one block. The kd-tree counting all
    rows lists the edges once (a dual-tree pair query, several times faster than
    per-point queries; memory ~12 bytes per nonzero) and counts their ends. For a
    subset of rows, or with `low_memory`, it counts each row twice, with the radius
    narrowed and widened by :data:`KD_MARGIN`: the narrow count holds only edges, the
    wide one every edge, so where they agree they are exact; the few rows where they
    differ (pairs within 1e-6 of the radius) are listed and decided by the reference
    arithmetic.
    """
    n = X.shape[0]
    pv = PairValues(X, params)
    if method == "kdtree" and rows is None and not low_memory:
        i, j, _, _, _ = _upper_edges(X, params, method, pv, {}, sort=False)
        return np.bincount(i, minlength=n) + np.bincount(j, minlength=n)
    if method == "kdtree":
        X64 = np.asarray(X, dtype=np.float64)
        tree = _tree(X64)
        Q = X64 if rows is None else X64[rows]
        ids = np.arange(n) if rows is None else np.asarray(rows)
        r = params.radius
        lo = tree.query_ball_point(Q, r * (1.0 - KD_MARGIN), return_length=True, workers=-1)
        hi = tree.query_ball_point(Q, r * (1.0 + KD_MARGIN), return_length=True, workers=-1)
        counts = lo.astype(np.int64) - 1  # the point itself is always within reach
        unsure = np.flatnonzero(lo != hi)
        if unsure.size:
            # Decided by the brute force's blocks (memory: one block of rows × n), not
            # by listing their neighbours: on dense settings (every pair near the
            # radius) the lists of the unsure rows held nearly n entries each, as
            # Python ints, and took the process down (issue 15).
            urows = ids[unsure]
            exact = np.zeros(unsure.size, dtype=np.int64)
            for k, j in _Candidates(X, params, pv).of_rows(urows):
                keep = edge_mask(pv.at(urows[k], j), params)
                exact += np.bincount(k[keep], minlength=unsure.size)
            counts[unsure] = exact
        return counts
    cand = _Candidates(X, params, pv)
    if rows is None:
        counts = np.zeros(n, dtype=np.int64)
        for i, j in cand.upper():
            keep = edge_mask(pv.at(i, j), params)
            counts += np.bincount(i[keep], minlength=n)
            counts += np.bincount(j[keep], minlength=n)
        return counts
    rows = np.asarray(rows)
    counts = np.zeros(rows.size, dtype=np.int64)
    for k, j in cand.of_rows(rows):
        keep = edge_mask(pv.at(rows[k], j), params)
        counts += np.bincount(k[keep], minlength=rows.size)
    return counts


def row_counter(X, params: EdgeRule, method: str):
    """``count_rows(rows) -> counts`` of `X` under `params` with `method`: the exact CPU
    count of the given rows, as :mod:`explorer.memory`'s checks take it."""

    def count_rows(rows):
        return count_rows_cpu(X, params, method, rows)

    return count_rows


def build_rows(X, rule: EdgeRule, r0: int, r1: int, method: str):
    """Rows ``r0:r1`` of the graph of all the points of `X`, on the CPU.

    Parameters
    ----------
    X : numpy.ndarray of shape (n, d), float32
        All the points (the columns of the rows built).
    rule : EdgeRule
        A complete edge rule.
    r0, r1 : int
        The row range, ``0 <= r0 <= r1 <= n`` (empty when equal).
    method : {"kdtree", "bruteforce"}
        The candidate search (:data:`CPU_METHODS`; :func:`choose_method` picks one).

    Returns
    -------
    scipy.sparse.csr_matrix of shape (r1 - r0, n)
        Canonical (ascending columns, no diagonal entry, float32 weights, index dtype
        of the semantics for its nnz): exactly those rows of
        :func:`explorer.graph.reference.reference_csr`, so row blocks stacked are the
        whole graph bit for bit (the distributed build's row blocks).
    """
    n = X.shape[0]
    pv = PairValues(X, rule)
    rows = np.arange(r0, r1)
    if method == "kdtree":
        # Both trees' pairs within the widened radius, as arrays (a dual-tree query in
        # C++; the per-row lists of query_ball_point cost a Python step per entry).
        found = _tree(X[r0:r1]).sparse_distance_matrix(
            _tree(X), rule.radius * (1.0 + KD_MARGIN), output_type="ndarray")
        pairs = [(found["i"].astype(np.int64), found["j"].astype(np.int64))]
        del found
    else:
        pairs = _Candidates(X, rule, pv).of_rows(rows)
    parts_r, parts_c, parts_v = [], [], []
    for k, j in pairs:
        i = rows[k]
        compared = pv.at(i, j)
        keep = edge_mask(compared, rule) & (i != j)
        parts_r.append(k[keep])
        parts_c.append(j[keep])
        parts_v.append(compared[keep])
    local = np.concatenate(parts_r) if parts_r else np.empty(0, np.int64)
    cols = np.concatenate(parts_c) if parts_c else np.empty(0, np.int64)
    compared = np.concatenate(parts_v) if parts_v else np.empty(0)
    weights = pv.weights(compared).astype(np.float32)
    # One sort of int64 keys (row, column), not a lexsort of two arrays.
    order = np.argsort(local.astype(np.int64) * np.int64(n) + cols)
    nnz = int(order.size)
    idx = index_dtype(nnz, n)
    indptr = np.zeros(r1 - r0 + 1, dtype=idx)
    np.cumsum(np.bincount(local, minlength=r1 - r0), out=indptr[1:])
    return csr_from_arrays(weights[order], cols[order].astype(idx), indptr, (r1 - r0, n),
                           canonical=True)
