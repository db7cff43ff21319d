"""Each point's k nearest others on the CPU, exact: a kd-tree (low d) or blockwise BLAS.

Both propose candidates by a fast approximate step and decide them with the float64
reference arithmetic (:class:`~explorer.graph._reference.PairValues`), so the lists
equal :func:`~explorer.graph._reference.reference_knn` bit for bit, ties by the lower
index included:

- ``"kdtree"`` (distance rules): SciPy's ``cKDTree.query`` for k + 3 candidates per
  point. A row is settled when its exact k-th value lies below the tree's farthest
  returned distance by more than the tree's rounding (then no point left out can be
  nearer or tie); the rest are asked again with twice the candidates (rounds, not a
  loop over rows), up to all n points (duplicates, lattices).
- ``"bruteforce"`` (any metric): a block of rows against all points by one float64
  matrix product (centred data, or unit rows for cosine), the approximate k-th value
  per row by ``numpy.partition``, and as candidates every point within twice the
  product's rounding bound of it: a superset of the exact k nearest and their ties.
"""

from __future__ import annotations

import numpy as np
from scipy.spatial import cKDTree

from ._reference import PairValues
from .rule import EdgeRule

KNN_CPU_METHODS = ("bruteforce", "kdtree")

#: ``method="auto"`` takes the kd-tree for distance rules up to this d.
KDTREE_MAX_D = 8

#: Relative margin on the tree's squared distances (its float64 error is ~1e-15·d).
_KD_MARGIN = 4e-6

#: Extra candidates asked of the tree beyond k and the point itself.
_KD_EXTRA = 3

#: Bytes of product per brute-force block: 8 MB, so that the passes over a block stay
#: in cache (digits 1797 × 64: 53 ms with 32 MB float64 blocks, 34-36 ms with 2-8 MB).
_BLOCK_BYTES = 1 << 23

#: The dtype of the brute force's candidate keys (see ``_bruteforce``).
_KEY_DTYPE = np.float32

#: Rounding slack of the candidate keys in units of their dtype's eps × (d + 8) (as the
#: ε brute force's in float64: a generous bound on the error of centred squared
#: distances and of cosines of unit rows; for float32 keys about 30 times the error).
_SLACK_EPS = 8.0


def choose_knn_method(n: int, d: int, rule: EdgeRule) -> tuple[str, str]:
    """``method="auto"`` for a kNN search on the CPU, and why."""
    if rule.compares == "sqdist" and d <= KDTREE_MAX_D:
        return "kdtree", (f"CPU backend, n={n}, d={d}, distance rule: a kd-tree query of the "
                          f"k nearest (taken for d <= {KDTREE_MAX_D})")
    why = "cosine" if rule.compares == "cosine" else f"d={d} > {KDTREE_MAX_D}"
    return "bruteforce", (f"CPU backend, n={n}, d={d}, {why}: blockwise float64 matrix "
                          "products, k-th value per row, exact re-check")


def _key(compared, rule: EdgeRule):
    key = compared if rule.compares == "sqdist" else -compared
    return np.where(np.isnan(key), np.inf, key)


def _select_rows(cols, compared, rule: EdgeRule, k: int):
    """The first `k` of each row of regular candidate arrays (p, c) by (key, column).

    The tree returns each row by ascending distance, the point itself first: a row
    whose other candidates are already in (key, column) order (all but a few, where
    rounding or ties reorder them) takes its first `k` as they are; the others are
    sorted (:func:`_sort_rows`). Sorting every row cost 1.5 s of a 4 s search at
    n = 10⁵."""
    key = _key(compared, rule)
    if cols.shape[1] > k:
        # Self first (key inf): the rest in strictly ascending (key, column) order.
        k0, k1, c0, c1 = key[:, 1:-1], key[:, 2:], cols[:, 1:-1], cols[:, 2:]
        ordered = np.isinf(key[:, 0]) & np.all((k1 > k0) | ((k1 == k0) & (c1 > c0)), axis=1)
    else:
        ordered = np.zeros(cols.shape[0], dtype=bool)
    nbr = np.empty((cols.shape[0], k), dtype=cols.dtype)
    val = np.empty((cols.shape[0], k), dtype=compared.dtype)
    fast = np.flatnonzero(ordered)
    top_key = key[fast, 1 : k + 1]
    ok = np.isfinite(top_key)
    nbr[fast] = np.where(ok, cols[fast, 1 : k + 1], -1)
    val[fast] = np.where(ok, compared[fast, 1 : k + 1], np.nan)
    slow = np.flatnonzero(~ordered)
    if slow.size:
        nbr[slow], val[slow] = _sort_rows(cols[slow], compared[slow], key[slow], k)
    return nbr, val


def _sort_rows(cols, compared, key, k: int):
    """The first `k` of each row by (key, column): two stable sorts along the rows (by
    column, then by key), cheap for short rows."""
    by_col = np.argsort(cols, axis=1, kind="stable")
    cols = np.take_along_axis(cols, by_col, axis=1)
    key = np.take_along_axis(key, by_col, axis=1)
    compared = np.take_along_axis(compared, by_col, axis=1)
    top = np.argsort(key, axis=1, kind="stable")[:, :k]
    ok = np.isfinite(np.take_along_axis(key, top, axis=1))
    nbr = np.where(ok, np.take_along_axis(cols, top, axis=1), -1)
    val = np.where(ok, np.take_along_axis(compared, top, axis=1), np.nan)
    return nbr, val


def _select(rows, cols, compared, rule: EdgeRule, n_rows: int, k: int):
    """The first `k` candidates of each row by (key, column): ``(nbr, compared)`` of
    shape (n_rows, k), padded with -1 / NaN. `rows` are local row numbers."""
    key = _key(compared, rule)
    ok = np.isfinite(key)
    rows, cols, compared, key = rows[ok], cols[ok], compared[ok], key[ok]
    order = np.lexsort((cols, key, rows))
    rows, cols, compared = rows[order], cols[order], compared[order]
    start = np.searchsorted(rows, np.arange(n_rows))
    rank = np.arange(rows.size) - start[rows]
    take = rank < k
    nbr = np.full((n_rows, k), -1, dtype=np.int64)
    val = np.full((n_rows, k), np.nan)
    nbr[rows[take], rank[take]] = cols[take]
    val[rows[take], rank[take]] = compared[take]
    return nbr, val


def knn_search_cpu(X, rule: EdgeRule, k: int, method: str):
    """The `k` nearest other points of every point (see the module's Notes).

    Parameters
    ----------
    X : ndarray of shape (n, d), float32
    rule : EdgeRule
        Its metric says what "near" is.
    k : int
        At most ``n - 1`` is used.
    method : {"kdtree", "bruteforce"}
        ``"kdtree"`` for distance rules only.

    Returns
    -------
    neighbors : ndarray of int64, shape (n, min(k, n - 1))
    compared : ndarray of float64, same shape
        As :func:`explorer.graph.reference.reference_knn`.
    info : dict
        ``candidates`` examined exactly, ``rounds`` of the kd-tree.
    """
    n = X.shape[0]
    k = min(int(k), n - 1)
    pv = PairValues(X, rule)
    if method == "kdtree":
        return _kdtree(X, pv, rule, k)
    return _bruteforce(X, pv, rule, k)


def _kdtree(X, pv: PairValues, rule: EdgeRule, k: int):
    n = X.shape[0]
    X64 = np.asarray(X, dtype=np.float64)
    tree = cKDTree(X64, balanced_tree=False, compact_nodes=False)
    nbr = np.full((n, k), -1, dtype=np.int64)
    val = np.full((n, k), np.nan)
    pending = np.arange(n)
    kq = min(n, k + 1 + _KD_EXTRA)
    rounds = candidates = 0
    while pending.size:
        rounds += 1
        dist, idx = tree.query(X64[pending], k=kq, workers=-1)
        dist = dist.reshape(pending.size, kq)
        idx = idx.reshape(pending.size, kq).astype(np.int64)
        compared = pv.at(np.repeat(pending, kq), idx.ravel()).reshape(idx.shape)
        compared[idx == pending[:, None]] = np.nan  # never its own neighbour
        candidates += idx.size
        got, vals = _select_rows(idx, compared, rule, k)
        if kq >= n:
            settled = np.ones(pending.size, dtype=bool)
        else:
            reach = dist[:, -1] ** 2 * (1.0 - _KD_MARGIN)
            settled = vals[:, -1] < reach
        nbr[pending[settled]] = got[settled]
        val[pending[settled]] = vals[settled]
        pending = pending[~settled]
        kq = min(n, 2 * kq)
    return nbr, val, {"candidates": int(candidates), "rounds": rounds}


def _bruteforce(X, pv: PairValues, rule: EdgeRule, k: int):
    n, d = X.shape
    X64 = np.asarray(X, dtype=np.float64)
    slack = _SLACK_EPS * (d + 8) * np.finfo(_KEY_DTYPE).eps
    if rule.compares == "sqdist":
        Z = X64 - X64.mean(axis=0)
        sq = np.einsum("ij,ij->i", Z, Z)
        valid = np.ones(n, dtype=bool)
    else:
        norms = pv.norms
        valid = norms > 0
        Z = np.where(valid[:, None], X64 / np.where(valid, norms, 1.0)[:, None], 0.0)
        sq = None
    all_valid = bool(valid.all())
    sq_max = 0.0 if sq is None else float(sq.max())
    # The keys only choose candidates (their exact values come from pv.at): float32
    # halves the bytes every pass over a block moves, the slack covers its rounding.
    Z = Z.astype(_KEY_DTYPE)
    sq_key = None if sq is None else sq.astype(_KEY_DTYPE)
    step = max(1, _BLOCK_BYTES // (np.dtype(_KEY_DTYPE).itemsize * n))
    parts_r, parts_c = [], []
    for r0 in range(0, n, step):
        r1 = min(n, r0 + step)
        G = Z[r0:r1] @ Z.T
        if sq is None:
            key = np.negative(G, out=G)
            tol = 2.0 * slack
        else:
            # ‖zi − zj‖² − ‖zi‖²: a row's order without adding its own constant (one
            # pass fewer); the rounding bound is that of the whole distance.
            G *= -2.0
            G += sq_key[None, :]
            key = G
            tol = (2.0 * slack * (sq[r0:r1] + sq_max))[:, None]
        if not all_valid:
            key[:, ~valid] = np.inf
            key[~valid[r0:r1]] = np.inf
        key[np.arange(r1 - r0), np.arange(r0, r1)] = np.inf
        bound = np.partition(key, k - 1, axis=1)[:, k - 1 : k] + tol
        # A row with fewer than k finite values has an infinite bound: its candidates
        # are its finite values, so the bound becomes the largest float of the keys.
        bound[~np.isfinite(bound)] = np.finfo(key.dtype).max
        # In the keys' dtype, so that the comparison makes no float64 copy of the
        # block; the rounding is far inside tol.
        bound = bound.astype(key.dtype)
        a, b = np.nonzero(key <= bound)
        parts_r.append(a + r0)
        parts_c.append(b)
    rows = np.concatenate(parts_r)
    cols = np.concatenate(parts_c)
    compared = pv.at(rows, cols)
    nbr, val = _select(rows, cols, compared, rule, n, k)
    return nbr, val, {"candidates": int(rows.size)}
