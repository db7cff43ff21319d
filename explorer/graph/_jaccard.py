"""The Jaccard row clustering of paper 003, as a multilevel ordering of a symmetric graph.

Paper 003 (S. Zheng, *Clustering Algorithms on GPU*) ports IterativeClustering to the
GPU: take an ungrouped row as a group's leader, put every ungrouped row whose Jaccard
distance to it is at most τ into its group, repeat until every row is grouped; rows
of a group become consecutive, so row tiles of the reordered matrix touch fewer
columns. Its GPU version picks one leader per grid-wide synchronisation (or a short
"reference list" of leaders) and compares it with every ungrouped row, O(n²) distance
evaluations: its largest matrices (5·10⁴ to 4·10⁵ rows) took minutes. Here:

* **Many leaders per round.** A round makes a leader of every ungrouped row whose
  priority (a hash of its id and the seed) is largest among its ungrouped neighbours
  (an independent set, Luby's rule), and each ungrouped row joins the most similar
  new leader among its neighbours when the distance is at most τ (ties: the smallest
  leader id). Rows left out take part in the next round; a level ends when every row
  has a group, in a few tens of rounds.
* **Candidates are the row's neighbours.** Two rows of a similarity graph within
  Jaccard distance τ < 1 share a neighbour; the neighbours themselves are the closest
  such rows and the only candidates here, so a round costs a pass over the nonzeros
  (one binary-searched intersection per row and candidate leader).
* **Levels** (the paper's Section 5.2.3, "treat the group as a row and go to step 2"):
  the groups form a coarse graph (groups adjacent when any of their rows are) that is
  clustered again, until a level stops shrinking. Rows are ordered by their group at
  the top level, then at the next one down, ..., then by id: the dendrogram order, so
  that groups of groups are consecutive too.

The distance uses N[i] = cols(i) ∪ {i}, the row's pattern with its diagonal (the graphs
store none): for neighbours i, j it is 1 − (c + 2) / (deg i + deg j − c) with
c = |cols(i) ∩ cols(j)|, so two vertices with the same neighbourhood are at distance 0.

The rounds are the array work: NumPy here (:func:`cluster_level_numpy`, also the GPU
kernels' test oracle), CuPy RawKernels in ``explorer.kernels.jaccard``. Relabelling,
coarsening and the final order are one code path for both.
"""

from __future__ import annotations

import numpy as np

from .._backend import array_module, sparse_module
from .._csr import entry_rows, row_blocks

#: Default Jaccard distance threshold τ. Paper 003 ran τ = 0.6 (its Table 1); with many
#: leaders per round 0.6 took 32 rounds on the first level of a 2·10⁴-row syn4d graph
#: against 7 at 0.8, for the same traffic after reordering (1.31x against 1.33x the floor).
DEFAULT_TAU = 0.8

#: A level that keeps more than this fraction of its rows as groups ends the levels.
SHRINK_LIMIT = 0.8

#: Most levels.
MAX_LEVELS = 32

#: Rows of a level below which the levels end (their order is then the ids').
MIN_LEVEL_ROWS = 2

#: Entries per block of the coarsening.
COARSEN_BLOCK = 1 << 27

#: Edge-list entries per chunk of the NumPy intersections (the sparse row products).
_CHUNK_ENTRIES = 1 << 22

_MASK32 = np.uint64(0xFFFFFFFF)


def priority_keys(n: int, seed: int, xp=np):
    """The priority key of every row: ``(hash(i, seed) << 32) | i`` as uint64 (the
    kernels' ``jc_key``: murmur3's 32-bit finaliser of ``i ^ (seed * 0x9E3779B9)``)."""
    i = xp.arange(n, dtype=xp.uint64)
    h = (i & _MASK32).astype(xp.uint32) ^ xp.uint32((int(seed) * 0x9E3779B9) & 0xFFFFFFFF)
    h ^= h >> xp.uint32(16)
    h *= xp.uint32(0x85EBCA6B)
    h ^= h >> xp.uint32(13)
    h *= xp.uint32(0xC2B2AE35)
    h ^= h >> xp.uint32(16)
    return (h.astype(xp.uint64) << xp.uint64(32)) | i


def leaders_numpy(indptr, indices, group, keys):
    """Ungrouped rows whose key beats every ungrouped neighbour's (bool array)."""
    n = group.shape[0]
    rows = entry_rows(indptr, np)
    cols = indices.astype(np.int64)
    live = (group[rows] < 0) & (group[cols] < 0)
    beaten = np.zeros(n, dtype=bool)
    hit = live & (keys[cols] > keys[rows])
    beaten[rows[hit]] = True
    return (group < 0) & ~beaten


def join_numpy(indptr, indices, group, is_leader, min_sim: float) -> None:
    """Open the new leaders' groups and join the other ungrouped rows to their most
    similar new leader among their neighbours (similarity >= `min_sim`; ties: the
    smallest leader id). In place on `group`."""
    n = group.shape[0]
    rows = entry_rows(indptr, np)
    cols = indices.astype(np.int64)
    pick = (group[rows] < 0) & ~is_leader[rows] & is_leader[cols]
    group[is_leader] = np.flatnonzero(is_leader).astype(group.dtype)
    r, c = rows[pick], cols[pick]
    if r.size == 0:
        return
    deg = np.diff(indptr).astype(np.int64)
    pattern = sparse_module(np).csr_matrix(
        (np.ones(indices.shape[0], dtype=np.int32), indices, indptr), shape=(n, n))
    inter = np.empty(r.size, dtype=np.int64)
    step = max(1, _CHUNK_ENTRIES // max(1, int(deg.max())))
    for s in range(0, r.size, step):
        a, b = r[s:s + step], c[s:s + step]
        inter[s:s + step] = np.asarray(pattern[a].multiply(pattern[b]).sum(axis=1)).ravel()
    a = inter + 2
    b = deg[r] + deg[c] - inter
    ok = a.astype(np.float64) >= min_sim * b.astype(np.float64)
    r, c, a, b = r[ok], c[ok], a[ok], b[ok]
    if r.size == 0:
        return
    # Largest a/b per row, then the smallest leader: exact for degrees below 2**20
    # (distinct fractions of such integers differ by more than float64's rounding).
    order = np.lexsort((c, -(a / b), r))
    r, c = r[order], c[order]
    first = np.ones(r.size, dtype=bool)
    first[1:] = r[1:] != r[:-1]
    group[r[first]] = c[first].astype(group.dtype)


def cluster_level_numpy(indptr, indices, min_sim: float, seed: int):
    """The NumPy rounds of one level (the reference of ``kernels.jaccard.cluster_level``):
    returns ``(group, rounds)``, `group` the leader of each row's group."""
    n = indptr.shape[0] - 1
    keys = priority_keys(n, seed)
    group = np.full(n, -1, dtype=np.int32)
    rounds = 0
    while (group < 0).any():
        rounds += 1
        is_leader = leaders_numpy(indptr, indices, group, keys)
        join_numpy(indptr, indices, group, is_leader, min_sim)
    return group, rounds


def cluster_level(indptr, indices, min_sim: float, seed: int):
    """One level's groups on the arrays' device: ``(group, rounds)``."""
    xp = array_module(indptr)
    n = indptr.shape[0] - 1
    if n == 0:
        return xp.zeros(0, dtype=xp.int32), 0
    if xp is np:
        return cluster_level_numpy(indptr, indices, min_sim, seed)
    from ..kernels.jaccard import cluster_level as gpu_level

    return gpu_level(n, indptr, indices, min_sim, seed)


def sorted_unique(a, xp):
    """The distinct values of `a`, ascending: a sort and a comparison of neighbours
    (NumPy 2.4's ``unique`` took 7 s for 2.4·10⁶ int64 keys that sort in 0.1 s)."""
    s = xp.sort(a)
    if s.shape[0] < 2:
        return s
    keep = xp.empty(s.shape[0], dtype=bool)
    keep[0] = True
    xp.not_equal(s[1:], s[:-1], out=keep[1:])
    return s[keep]


def coarsen(indptr, indices, group):
    """Number the groups 0..G-1 in the order of their leaders and build the coarse
    pattern (groups adjacent when any of their rows are; sorted columns, no diagonal).

    The entries are taken :data:`COARSEN_BLOCK` at a time, each block's coarse edges
    made unique before they are kept, so the work arrays stay small whatever nnz.

    Returns
    -------
    parent : int64 array of shape (n,)
        The group number of each row.
    coarse_indptr, coarse_indices : int32 arrays (int64 when they do not fit)
    """
    xp = array_module(indptr)
    n = group.shape[0]
    is_leader = xp.zeros(n, dtype=xp.int64)
    is_leader[group] = 1
    number = xp.cumsum(is_leader) - 1  # the groups numbered in their leaders' order
    parent = number[group]
    g = int(number[-1]) + 1 if n else 0
    parts = []
    for r0, r1, e0, e1 in row_blocks(indptr, COARSEN_BLOCK):
        if e1 == e0:
            continue
        rows = parent[entry_rows(indptr[r0:r1 + 1], xp, first=r0, span=(e0, e1))]
        cols = parent[indices[e0:e1].astype(xp.int64)]
        keep = rows != cols
        parts.append(sorted_unique(rows[keep] * g + cols[keep], xp))
    key = sorted_unique(xp.concatenate(parts), xp) if parts else xp.zeros(0, dtype=xp.int64)
    counts = xp.bincount(key // g, minlength=g)
    small = max(g, int(key.shape[0])) < 2**31  # int32 indices when they fit
    dtype = xp.int32 if small else xp.int64
    coarse_indptr = xp.zeros(g + 1, dtype=dtype)
    coarse_indptr[1:] = xp.cumsum(counts)
    return parent, coarse_indptr, (key % g).astype(dtype)


def jaccard_levels(indptr, indices, *, tau: float = DEFAULT_TAU, seed: int = 0):
    """The levels of the multilevel Jaccard clustering of a symmetric pattern.

    Returns
    -------
    parents : list of int64 arrays
        ``parents[l][i]``: the group (row of level l + 1) of row i of level l.
    rounds : list of int
        Rounds each level took.
    """
    min_sim = 1.0 - float(tau)
    parents, rounds = [], []
    n = indptr.shape[0] - 1
    while n >= MIN_LEVEL_ROWS and len(parents) < MAX_LEVELS:
        level_seed = (seed + len(parents)) & 0xFFFFFFFF
        group, r = cluster_level(indptr, indices, min_sim, level_seed)
        parent, indptr, indices = coarsen(indptr, indices, group)
        g = indptr.shape[0] - 1
        parents.append(parent)
        rounds.append(r)
        if g > SHRINK_LIMIT * n:
            break
        n = g
    return parents, rounds


def dendrogram_order(parents, n: int, xp):
    """The permutation that sorts rows by their top-level group, then by the group one
    level down, ..., then by id (``perm[new] = old``)."""
    if not parents:
        return xp.arange(n, dtype=xp.int64)
    top = int(parents[-1].max()) + 1 if parents[-1].size else 0
    rank = xp.arange(top, dtype=xp.int64)
    for parent in reversed(parents):
        m = parent.shape[0]
        order = xp.argsort(rank[parent] * m + xp.arange(m, dtype=xp.int64))
        rank = xp.empty(m, dtype=xp.int64)
        rank[order] = xp.arange(m, dtype=xp.int64)
    return order
