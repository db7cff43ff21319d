"""Products of the row-block graph with a block of vectors that stays on the workers:
each block fetches, worker to worker, only the rows of the vectors its columns name
(its *halo*), so nothing of size n goes through the client."""

from __future__ import annotations

import numpy as np

from .._backend import array_module, to_numpy
from .._csr import csr_from_arrays

__all__ = ["compact_columns", "halo_product"]


def halo_product(graph, forests, values, scale, reach=None):
    """Futures of ``scale_i * sum_j S_ij * values_j`` per row block, the values' rows
    fetched where they are.

    Parameters
    ----------
    graph : RowBlockGraph
        S's row blocks (float32 values, widened to float64 for the product).
    forests : list of distributed.Future
        :func:`~explorer.distributed._components.block_forest` of each block: the
        vertices outside it that its columns name, by owner block.
    values : list of distributed.Future
        Block b's rows of the dense float64 block of vectors (rows × k, on its worker).
    scale : list of distributed.Future
        Block b's row scales (float64, one per row).
    reach : int ndarray of shape (n_blocks, n_blocks), optional
        ``reach[b, c]`` > 0 where block b's edges reach block c
        (:attr:`~explorer.distributed._components.BlockComponents.reach`): no fetch
        between the other pairs. Every pair fetches when None.

    Returns
    -------
    list of distributed.Future
        Block b's rows of the product (rows × k, float64).

    Notes
    -----
    Block c sends block b the rows of `values` at the vertices of c that b's edges
    reach (a task on c's worker picks them; Dask moves them from worker to worker);
    b multiplies its rows of S, columns renumbered onto its own rows followed by those
    fetched, in the stored order of its entries. With SciPy the product adds each
    row's terms in that order, so it equals the one-process product of the whole
    matrix bit for bit. What travels per product is k values per halo vertex: on
    data whose row order is unrelated to space that is most vertices, through the
    workers' links rather than the client's.
    """
    client = graph.blocks.client
    offsets = graph.blocks.offsets
    nb = graph.blocks.n_blocks
    out = []
    for b in range(nb):
        halo = [client.submit(halo_rows, values[c], forests[b], c, int(offsets[c]), pure=False)
                for c in range(nb) if c != b and (reach is None or reach[b, c])]
        out.append(client.submit(block_halo_product, graph.blocks.futures[b],
                                 int(offsets[b]), int(offsets[-1]), values[b], scale[b], *halo,
                                 pure=False))
    return out


def compact_columns(S, r0, n):
    """A row block's columns renumbered onto its rows followed by the vertices outside
    it that its edges reach, in ascending id.

    Parameters
    ----------
    S : CSR row block (rows × n, SciPy or cupyx) of rows ``r0:``.
    r0, n : int

    Returns
    -------
    ids : int ndarray
        The outside vertices (global ids, ascending), on S's device.
    compact : int ndarray of shape (nnz,)
        Each stored entry's column in the new numbering (int32 below 2³¹ vertices).
    """
    xp = array_module(S.data)
    rows = int(S.shape[0])
    cols = S.indices
    index = xp.int32 if n < 2**31 else xp.int64
    # A table of n entries marks the vertices reached: one pass over the entries,
    # where sorting the block's columns (np.unique) took longer.
    reached = xp.zeros(n, dtype=bool)
    reached[cols] = True
    reached[r0 : r0 + rows] = False
    ids = xp.flatnonzero(reached)
    table = xp.cumsum(reached, dtype=index) - 1 + rows
    table[r0 : r0 + rows] = xp.arange(rows, dtype=index)
    return ids, table[cols]


def halo_rows(values, forest, c, r0):
    """Rows of block `c`'s `values` at the vertices of c that `forest`'s block reaches."""
    ids = forest[1][c][0]
    return values[ids - r0]


def block_halo_product(S, r0, n, own, scale, *halo):
    """One block's share of :func:`halo_product`, on the block's device."""
    xp = array_module(S.data)
    rows = int(S.shape[0])
    if S.nnz == 0:
        return np.zeros((rows, own.shape[1]))
    ids, compact = compact_columns(S, r0, n)
    values = S.data.astype(xp.float64)
    if xp is np:
        X = np.concatenate([own, *halo], axis=0) if halo else own
        idx = compact.dtype if S.nnz < 2**31 else np.int64
        local = csr_from_arrays(values, compact.astype(idx, copy=False),
                                S.indptr.astype(idx, copy=False), (rows, int(X.shape[0])),
                                canonical=False)
        return (local @ X) * scale[:, None]
    # cuSPARSE wants sorted columns, which the renumbering does not keep: on the GPU the
    # fetched rows go into a block of all n rows instead, and S multiplies it as it is.
    full = xp.zeros((n, own.shape[1]), dtype=xp.float64)
    full[r0 : r0 + rows] = xp.asarray(own)
    if halo:
        full[ids] = xp.asarray(np.concatenate(halo, axis=0))
    local = csr_from_arrays(values, S.indices, S.indptr, S.shape, canonical=True)
    return to_numpy(local @ full) * scale[:, None]
