"""The exact mode's eigensolver resident on the workers (issue 33, item 2): the
one-process Chebyshev-filtered subspace iteration run SPMD, one task per worker.

Each worker is a *rank* holding a contiguous range of rows of A = D^-1/2 S D^-1/2
(``bounds[r]:bounds[r + 1]`` in the solver's numbering) and the same rows of the
iterated block Y. The algorithm is :func:`explorer.embedding.chebyshev.chebyshev_iterate`
itself, on :class:`HaloBlock`, whose three distributed methods are

- the **product** ``A Y``: first the *halo exchange*, each rank sending every other
  rank the rows of Y that rank's columns name (set up once, :func:`halo_columns` and
  :func:`send_lists`), then the local CSR product of the rank's rows against
  ``[halo rows below, own rows, halo rows above]``; its columns were renumbered onto
  that order, which keeps each row's entries in their global order (the product adds
  them in the same order as the whole matrix's);
- the **reduction** of the float64 Gram matrix ``[Y, AY]^T [Y, AY]`` (2b × 2b) and of
  squared column norms: the local share, then an all-reduce;
- the random vectors: every rank draws the same n × b values
  (:class:`explorer.embedding.start.RowNormals`) and keeps its rows, so the start is
  the one-process solve's.

The small host-side Rayleigh-Ritz runs on every rank on the same all-reduced bits, so
every rank takes the same steps and stops at the same product. The communicators are
those of the resident k-means (:mod:`._resident`): :class:`~._resident.LocalComm` on
one worker (no halo, the reductions the identity: the loop runs for real on a
one-worker CPU cluster), :class:`~._resident.NcclComm` on one GPU per worker (halo by
grouped NCCL send/recv, reductions by all-reduce). Several CPU workers have no
collective: there the fit keeps the client-driven LOBPCG.

**Spatial order.** With several ranks the rows are first put in the Morton order of
the points (:func:`explorer.graph.reorder.spatial_order`) and cut into one contiguous
range per rank, and each rank builds its rows of that permuted graph itself
(:func:`~._graph.build_range` on the permuted points, the builders being exact): a
rank's neighbours are then mostly its own rows, and the halo is the rows along the
cut. The random vectors are drawn in the points' order (the ``rows`` of
:class:`~explorer.embedding.start.RowNormals`), so the solve starts where the
unpermuted one does.
"""

from __future__ import annotations

import time

import numpy as np

from .._backend import array_module, to_numpy
from .._csr import csr_from_arrays
from .._validation import check_random_state
from ..embedding import chebyshev
from ..embedding.chebyshev import ChebyshevBlock, chebyshev_iterate
from ..embedding.start import solver_rows
from ._resident import NcclSession, _communicator, resident_plan

__all__ = ["HaloBlock", "RankRows", "exact_plan", "halo_columns", "resident_chebyshev",
           "resident_solve", "send_lists", "split_rows"]


# ---------------------------------------------------------------- bookkeeping


def split_rows(n, parts):
    """Offsets of `n` rows cut into `parts` contiguous ranges as even as can be."""
    sizes = [n // parts + (i < n % parts) for i in range(parts)]
    return np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)


class RankRows:
    """One rank's rows of A with its halo bookkeeping (:func:`halo_columns`).

    Attributes
    ----------
    A : CSR matrix of shape (rows, n_below + rows + n_above)
        The rank's rows, columns renumbered onto ``[halo below, own rows, halo
        above]`` (each row's entries keep their order: canonical stays canonical).
    rank, lo, hi : int
        The rank and its rows ``lo:hi`` of the whole matrix.
    n : int
        Rows of the whole matrix.
    n_below : int
        Halo rows owned by lower ranks (they come first in the extended block).
    needs : list of int ndarrays
        ``needs[p]``: the rows of rank p (global ids, ascending) this rank's columns
        name; empty for p == rank.
    recv_counts : list of int
        ``len(needs[p])``.
    """

    def __init__(self, A, rank, bounds):
        xp = array_module(A.data)
        bounds = np.asarray(bounds, dtype=np.int64)
        self.rank, self.n = int(rank), int(bounds[-1])
        self.lo, self.hi = int(bounds[rank]), int(bounds[rank + 1])
        self.A, halo, self.n_below = halo_columns(A, self.lo, self.hi, xp)
        owner = np.searchsorted(bounds, to_numpy(halo), side="right") - 1
        cuts = np.searchsorted(owner, np.arange(bounds.shape[0]))
        host = to_numpy(halo)
        self.needs = [host[cuts[p] : cuts[p + 1]] for p in range(bounds.shape[0] - 1)]
        self.recv_counts = [int(v.shape[0]) for v in self.needs]

    @property
    def halo_rows(self) -> int:
        return int(sum(self.recv_counts))


def halo_columns(A, lo, hi, xp):
    """The columns of a rank's rows ``lo:hi`` renumbered onto ``[halo below, own,
    halo above]``.

    Parameters
    ----------
    A : CSR matrix of shape (hi - lo, n)
        The rank's rows with global columns (SciPy or cupyx), canonical.
    lo, hi : int
    xp : module

    Returns
    -------
    local : CSR matrix of shape (hi - lo, h + hi - lo)
        The same entries in the same order, column j mapped to its place in the
        extended block: a global column below `lo` to its rank among the halo rows
        below, an own column ``c`` to ``n_below + c - lo``, one at or above `hi` to
        ``hi - lo`` plus its rank among all halo rows. The map is increasing, so sorted
        rows stay sorted.
    halo : int64 ndarray
        The halo rows (global ids outside ``lo:hi`` that the columns name), ascending.
    n_below : int
        How many of them lie below `lo`.
    """
    rows = hi - lo
    cols = A.indices.astype(xp.int64)
    outside = cols[(cols < lo) | (cols >= hi)]
    halo = xp.unique(outside) if outside.shape[0] else xp.zeros(0, dtype=xp.int64)
    n_below = int(xp.count_nonzero(halo < lo))
    rank = xp.searchsorted(halo, cols)
    local = xp.where(cols < lo, rank, xp.where(cols < hi, cols - lo + n_below, rank + rows))
    width = rows + int(halo.shape[0])
    idx = xp.int32 if width < 2**31 and A.nnz < 2**31 else xp.int64
    out = csr_from_arrays(A.data, local.astype(idx), A.indptr.astype(idx), (rows, width),
                          canonical=True)
    return out, halo, n_below


def send_lists(rank, bounds, needs):
    """What rank `rank` sends each peer: ``needs[p][rank]`` (the rows of `rank` that
    peer p's columns name, global ids) as local indices into its rows, or None.

    `needs` is every rank's :attr:`RankRows.needs`, in rank order (exchanged once at
    set-up)."""
    lo = int(bounds[rank])
    return [None if p == rank or not len(theirs[rank]) else
            np.asarray(theirs[rank], dtype=np.int64) - lo
            for p, theirs in enumerate(needs)]


def extend(Y, halo, n_below, xp):
    """``[halo below, Y, halo above]``: the block a rank's renumbered rows multiply."""
    if halo.shape[0] == 0:
        return Y
    return xp.concatenate((halo[:n_below], Y, halo[n_below:]), axis=0)


# ---------------------------------------------------------------- the rank's solver


class HaloBlock(ChebyshevBlock):
    """:class:`~explorer.embedding.chebyshev.ChebyshevBlock` of one rank's rows: the
    products exchange the halo rows first, the reductions are all-reduced.

    Parameters
    ----------
    rows : RankRows
    comm : communicator
        :class:`~._resident.LocalComm`, :class:`~._resident.NcclComm`, or any object
        with ``allreduce_sum`` and ``exchange``.
    sends : list
        :func:`send_lists` of this rank.
    work, seed
        As :class:`~explorer.embedding.chebyshev.ChebyshevBlock`.
    order : int ndarray of shape (rows.n,), optional
        The original position of each row of the whole matrix (the random draws'
        order, :class:`~explorer.embedding.start.RowNormals`); None: as numbered.

    Attributes
    ----------
    seconds : dict
        ``exchange`` and ``allreduce`` seconds on this rank (each timed between device
        syncs, so waiting for a slower rank counts as communication).
    halo_bytes : int
        Bytes this rank receives per product in the working precision, per column.
    """

    def __init__(self, rows, comm, sends, work, seed, order=None):
        xp = array_module(rows.A.data)
        mine = np.arange(rows.lo, rows.hi) if order is None else order[rows.lo : rows.hi]
        super().__init__(rows.A, xp, work, "row", seed, rows=xp.asarray(mine))
        self.n = rows.n
        self.rows, self.comm = rows, comm
        self.sends = [None if s is None else xp.asarray(s) for s in sends]
        self.seconds = {"exchange": 0.0, "allreduce": 0.0}
        self.exchanges = 0
        self.halo_bytes = rows.halo_rows * np.dtype(work).itemsize

    def _sync(self):
        if self.gpu:
            self.xp.cuda.get_current_stream().synchronize()

    def _halo(self, Y):
        if self.comm.size == 1:
            return Y
        self._sync()
        t0 = time.perf_counter()
        halo = self.comm.exchange(self.xp.ascontiguousarray(Y), self.sends,
                                  self.rows.recv_counts)
        self._sync()
        self.seconds["exchange"] += time.perf_counter() - t0
        self.exchanges += 1
        return extend(Y, halo, self.rows.n_below, self.xp)

    def product(self, Y):
        return super().product(self._halo(Y))

    def product64(self, V):
        return super().product64(self._halo(V))

    def reduce(self, a):
        if self.comm.size == 1:
            return a
        self._sync()
        t0 = time.perf_counter()
        out = self.comm.allreduce_sum(a)
        self._sync()
        self.seconds["allreduce"] += time.perf_counter() - t0
        return self.xp.asarray(out)


def resident_chebyshev(rows, sends, v0, k, block, degree, tol, max_iter, work, seed,
                       order=None, session=None):
    """The Chebyshev solve of this rank's rows (run on the worker, one task per rank,
    all at once).

    Parameters
    ----------
    rows : RankRows
    sends : list
        :func:`send_lists` of this rank.
    v0 : ndarray of shape (rows, j) or None
        This rank's rows of the starting vectors.
    k, block, degree, tol, max_iter, work, seed
        As :func:`explorer.embedding.chebyshev.chebyshev_iterate` and
        :class:`~explorer.embedding.chebyshev.ChebyshevBlock` (the same on every rank).
    order : int ndarray, optional
        See :class:`HaloBlock`.
    session : str, None or communicator
        As :func:`~._resident.resident_lloyd`.

    Returns
    -------
    dict
        ``values`` (k, descending), ``vectors`` (this rank's rows, float64, on its
        device), ``products``, ``residuals`` (of the whole vectors), and this rank's
        ``seconds`` (``solve``, ``exchange``, ``allreduce``), ``halo_rows``,
        ``halo_bytes`` (per product and column) and ``exchanges``.
    """
    comm = session if hasattr(session, "allreduce_sum") else _communicator(session)
    ops = HaloBlock(rows, comm, sends, np.dtype(work), seed, order)
    if v0 is not None:
        v0 = ops.xp.asarray(v0, dtype=ops.work)
        if v0.ndim == 1:
            v0 = v0[:, None]
    t0 = time.perf_counter()
    mu, V, products, residuals = chebyshev_iterate(ops, k, block, degree, tol, max_iter,
                                                   v0=v0)
    ops._sync()
    return {"values": np.asarray(mu), "vectors": V, "products": products,
            "residuals": np.asarray(residuals),
            "seconds": {"solve": time.perf_counter() - t0, **ops.seconds},
            "halo_rows": rows.halo_rows, "halo_bytes": ops.halo_bytes,
            "exchanges": ops.exchanges}


def rank_rows(bounds, rank, *blocks):
    """:class:`RankRows` of the rank holding the consecutive A row blocks `blocks`."""
    A = blocks[0] if len(blocks) == 1 else _vstack(blocks)
    return RankRows(A, rank, bounds)


def _vstack(blocks):
    xp = array_module(blocks[0].data)
    data = xp.concatenate([b.data for b in blocks])
    indices = xp.concatenate([b.indices.astype(xp.int64) for b in blocks])
    ptr = [xp.zeros(1, dtype=xp.int64)]
    at = 0
    for b in blocks:
        ptr.append(b.indptr[1:].astype(xp.int64) + at)
        at += int(b.nnz)
    rows = sum(int(b.shape[0]) for b in blocks)
    return csr_from_arrays(data, indices, xp.concatenate(ptr), (rows, blocks[0].shape[1]),
                           canonical=True)


def rank_needs(rows):
    """What the rank's columns name, by owner (host arrays: set-up only)."""
    return rows.needs


def rank_sends(rank, bounds, *needs):
    return send_lists(rank, bounds, needs)


def result_summary(result):
    """The solve's result without the vectors (what every rank reports)."""
    return {key: v for key, v in result.items() if key != "vectors"}


def result_vectors(result):
    """This rank's rows of the vectors, on the host."""
    return to_numpy(result["vectors"])


def spatial_permutation(points):
    """The Morton order of the points (:func:`explorer.graph.reorder.spatial_order`),
    on the host."""
    from ..graph.reorder import spatial_order

    return to_numpy(spatial_order(points, array_module(points)))


def spatial_rows(points, perm, r0, r1, rule, method, new_id, dinv):
    """Rows ``r0:r1`` of A in the spatial order (the graph of the permuted points,
    normalised), built on this worker's device."""
    from ._graph import build_range
    from ._operator import normalised_block

    xp = array_module(points)
    S = build_range(points[xp.asarray(perm)], r0, r1, rule, method, check_memory=True)
    return normalised_block(S, r0, new_id, dinv)


def _is_sparse_gpu(block):
    return type(block.data).__module__.split(".")[0] == "cupy"


# ---------------------------------------------------------------- client side


def exact_plan(blocks):
    """Whether the exact mode's eigensolver can run on the workers holding the row
    blocks `blocks` (:func:`~._resident.resident_plan`): ``(workers, kind, why)``."""
    return resident_plan(blocks, blocks.futures, what="Chebyshev eigensolver",
                         collective="halo rows exchanged and Gram matrices all-reduced",
                         fallback="client-driven LOBPCG", on_gpu=_is_sparse_gpu)


def resident_solve(graph, keep, dinv, k, *, workers, kind, tol=None, max_iter=None,
                   rng=None, start=None, order=None, points=None, ablocks=None):
    """The k largest eigenpairs of A by Chebyshev-filtered subspace iteration with
    every product on the workers (module docstring).

    Parameters
    ----------
    graph : RowBlockGraph
        S's row blocks.
    keep : int ndarray of shape (m,)
        The vertices of A (ascending).
    dinv : float64 ndarray of shape (m,)
        1 / sqrt(degree) of A's vertices.
    k : int
    workers, kind
        :func:`exact_plan`'s (``kind`` ``"local"`` or ``"nccl"``).
    tol, max_iter : optional
        As :func:`explorer.embedding.chebyshev.chebyshev_subspace` (defaults there).
    rng : numpy.random.RandomState
        The solve draws its seed from it, as the one-process solve does
        (:func:`explorer.embedding.solvers.solve`).
    start : ndarray of shape (m, j), optional
        Starting vectors (default sqrt(degree), as the one-process solve).
    order : {None, "spatial"}
        None: each worker's rank holds its A row blocks, which must be consecutive;
        ``"spatial"``: one range per worker of the Morton order of `points` (built on
        the workers, module docstring).
    points : distributed.Future, optional
        All the points (for ``order="spatial"``).
    ablocks : RowBlocks, optional
        A's row blocks (:func:`~._operator.normalised_blocks`) when the caller has
        them (``order=None``).

    Returns
    -------
    mu : ndarray (k,)
    V : ndarray (m, k), float64, rows in A's (the kept vertices') order
    products : int
    residuals : ndarray (k,)
    stats : dict
        ``order``, ``ranks``, ``halo_rows`` per rank, ``halo_bytes_per_product`` (all
        ranks, b columns), ``setup``, ``solve``, ``exchange`` and ``allreduce``
        seconds (the slowest rank's) and ``communication_share``.
    """
    from ._operator import normalised_blocks

    client = graph.blocks.client
    t0 = time.perf_counter()
    rng = check_random_state(rng)
    m = int(keep.shape[0])
    n = graph.n
    tol = chebyshev.DEFAULT_TOL if tol is None else tol
    max_iter = max_iter or chebyshev.DEFAULT_MAX_ITER
    block = chebyshev.default_block(k, m)
    on_gpu = kind == "nccl" or client.submit(_is_sparse_gpu, graph.blocks.futures[0],
                                             pure=False).result()
    work = chebyshev.working_dtype(None, tol, _GPU if on_gpu else np)
    seed = rng.randint(2**31 - 1)
    degree_sqrt = 1.0 / dinv
    v0 = degree_sqrt[:, None] if start is None else np.asarray(start)
    ranks = list(workers)
    if order == "spatial":
        perm = client.submit(spatial_permutation, points, pure=False).result()
        new_id = np.full(n, -1, dtype=np.int64)
        kept = np.zeros(n, dtype=bool)
        kept[keep] = True
        kept_p = kept[perm]
        new_id[kept_p] = np.arange(m)
        # Row j of the permuted A is the rows[j]-th kept vertex in the given order.
        rows = solver_rows(perm, np.flatnonzero(kept_p), np)
        cuts = split_rows(n, len(ranks))
        bounds = np.concatenate([[0], np.cumsum([int(kept_p[a:b].sum()) for a, b in
                                                 zip(cuts[:-1], cuts[1:], strict=True)])])
        shared = client.scatter([perm, new_id, dinv[rows]], broadcast=True, hash=False)
        a_blocks = [[client.submit(spatial_rows, points, shared[0], int(cuts[r]),
                                   int(cuts[r + 1]), graph.rule, graph.method, shared[1],
                                   shared[2], workers=[w], allow_other_workers=False,
                                   pure=False)] for r, w in enumerate(ranks)]
    else:
        new_id = np.full(n, -1, dtype=np.int64)
        new_id[keep] = np.arange(m)
        if ablocks is None:
            ablocks = normalised_blocks(graph, new_id, dinv)
        rows = None
        a_blocks, bounds = [], [0]
        for w in ranks:
            idx = workers[w]
            if list(idx) != list(range(idx[0], idx[0] + len(idx))):
                raise ValueError("order=None needs each worker's row blocks to be "
                                 "consecutive; use order='spatial'")
            a_blocks.append([ablocks.futures[b] for b in idx])
            bounds.append(int(ablocks.offsets[idx[-1] + 1]))
        if bounds[-1] != m or sorted(bounds) != bounds:
            raise ValueError("the workers' row blocks do not cover A in rank order; use "
                             "order='spatial'")
    bounds = np.asarray(bounds, dtype=np.int64)
    v0 = v0 if rows is None else v0[rows]
    perm_rows = None if rows is None else client.scatter(rows, broadcast=True, hash=False)
    rank_futures = [client.submit(rank_rows, bounds, r, *a_blocks[r], workers=[w],
                                  allow_other_workers=False, pure=False)
                    for r, w in enumerate(ranks)]
    needs = [client.submit(rank_needs, f, workers=[w], pure=False)
             for f, w in zip(rank_futures, ranks, strict=True)]
    sends = [client.submit(rank_sends, r, bounds, *needs, workers=[w], pure=False)
             for r, w in enumerate(ranks)]
    starts = [client.scatter(v0[bounds[r] : bounds[r + 1]], workers=[w], hash=False)
              for r, w in enumerate(ranks)]
    from distributed import wait

    wait(rank_futures + sends + starts)
    t1 = time.perf_counter()
    with NcclSession(client, ranks, kind) as session:
        tasks = [client.submit(resident_chebyshev, rank_futures[r], sends[r], starts[r], k,
                               block, chebyshev.DEFAULT_DEGREE, tol, max_iter, work.name,
                               seed, perm_rows, session, workers=[w],
                               allow_other_workers=False, pure=False)
                 for r, w in enumerate(ranks)]
        summaries = client.gather([client.submit(result_summary, t, workers=[w], pure=False)
                                   for t, w in zip(tasks, ranks, strict=True)])
    parts = client.gather([client.submit(result_vectors, t, workers=[w], pure=False)
                           for t, w in zip(tasks, ranks, strict=True)])
    t2 = time.perf_counter()
    V = np.concatenate(parts, axis=0)
    if rows is not None:  # back to the kept vertices' order
        V_given = np.empty_like(V)
        V_given[rows] = V
        V = V_given
    first = summaries[0]
    worst = {key: max(s["seconds"][key] for s in summaries)
             for key in ("solve", "exchange", "allreduce")}
    comm_share = (worst["exchange"] + worst["allreduce"]) / worst["solve"] \
        if worst["solve"] > 0 else 0.0
    stats = {"order": order or "given", "ranks": len(ranks),
             "halo_rows": [int(s["halo_rows"]) for s in summaries],
             "halo_bytes_per_product": int(sum(s["halo_bytes"] for s in summaries)) * block,
             "exchanges": int(first["exchanges"]), "setup": t1 - t0, "gather": t2 - t1,
             **worst, "communication_share": comm_share}
    return first["values"], V, int(first["products"]), first["residuals"], stats


class _GPUMarker:
    """Stands for CuPy in :func:`~explorer.embedding.chebyshev.working_dtype` (which
    only asks whether the backend is NumPy) without importing it on the client."""


_GPU = _GPUMarker()
