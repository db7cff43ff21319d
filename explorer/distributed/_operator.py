"""A = D^-1/2 S D^-1/2 kept as row blocks on the workers, and the distributed product
the eigensolvers call (issue 19, item 2).

The eigensolvers of :mod:`explorer.embedding` reach A only through
:func:`explorer._csr.matmul` (``A @ X`` for a dense block X) and ``A.shape`` /
``A.dtype``; :class:`RowBlockOperator` provides exactly that, so LOBPCG and Lanczos
run unchanged on the client while every product with A runs on the workers.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from .._backend import array_module, to_numpy
from .._csr import block_rows, csr_from_arrays
from ._blocks import RowBlocks

__all__ = ["RowBlockOperator", "normalised_blocks"]


class RowBlockOperator:
    """A square matrix held as CSR row blocks on the workers, multiplied there.

    Parameters
    ----------
    blocks : RowBlocks
        Futures of the row blocks (SciPy or cupyx CSR, all m columns each) and their
        row offsets.
    nnz : int
        Stored entries of the whole matrix.
    dtype : numpy dtype, default float64

    Notes
    -----
    ``A @ X`` scatters the dense block X (m × b, float64, on the client) to every
    worker, multiplies each row block there (``block @ X``: SciPy's or cuSPARSE's
    product, the same row-by-row arithmetic as the single-process product, so the
    result is bit for bit the same on the CPU) and gathers the row blocks of the
    result in order. Only O(m·b) values travel per product; the O(nnz) matrix stays
    where it was built. The dense block algebra of the solver (orthogonalisation,
    Rayleigh-Ritz) stays on the client in NumPy.
    """

    ndim = 2

    def __init__(self, blocks: RowBlocks, nnz: int, dtype=np.float64):
        self.blocks = blocks
        self.nnz = int(nnz)
        self.dtype = np.dtype(dtype)
        self.shape = (blocks.n, blocks.n)
        self.products = 0

    def __matmul__(self, X):
        client = self.blocks.client
        X = np.asarray(to_numpy(X))
        shared = client.scatter(X, broadcast=True, hash=False)
        parts = client.gather([client.submit(block_product, b, shared, pure=False)
                               for b in self.blocks.futures])
        self.products += 1
        return np.concatenate(parts, axis=0)

    def dot(self, X):
        """``self @ X``."""
        return self @ X

    def to_csr(self):
        """The whole matrix gathered to the client as one SciPy CSR matrix (for the
        dense solver on small graphs, and tests)."""
        parts = [p if sp.issparse(p) else p.get()
                 for p in self.blocks.client.gather(self.blocks.futures)]
        return sp.vstack(parts, format="csr") if parts else sp.csr_matrix(self.shape)


def block_product(block, X):
    """``block @ X`` on the block's worker (its device), returned on the host."""
    xp = array_module(block.data)
    return to_numpy(block @ xp.asarray(X))


def normalised_block(S, r0, new_id, dinv):
    """Rows of A = D^-1/2 S D^-1/2 of the non-isolated vertices of one row block of S.

    Parameters
    ----------
    S : CSR row block (rows × n) of the similarity matrix, rows ``r0:``.
    new_id : int64 ndarray of shape (n,)
        Each vertex's row in A, −1 for the isolated ones (ascending where >= 0).
    dinv : float64 ndarray of shape (m,)
        1 / sqrt(degree) of A's vertices.

    Returns
    -------
    CSR matrix of shape (kept rows of the block, m), float64, on S's device

    Notes
    -----
    The arithmetic of :func:`explorer.embedding.laplacian.submatrix` then
    ``scale_symmetric``: entries in an isolated row or column are dropped (they are
    zeros), columns renumbered, each value times ``dinv[row]`` then times
    ``dinv[column]``; so the blocks are A's rows bit for bit.
    """
    xp = array_module(S.data)
    new_id = xp.asarray(new_id)
    dinv = xp.asarray(dinv)
    n_rows = S.shape[0]
    idx = S.indices.dtype
    mine = new_id[r0 : r0 + n_rows]
    kept = mine[mine >= 0]
    m_b = int(kept.shape[0])
    if S.nnz == 0 or m_b == 0:
        return csr_from_arrays(xp.zeros(0, dtype=xp.float64), xp.zeros(0, dtype=idx),
                               xp.zeros(m_b + 1, dtype=idx), (m_b, dinv.shape[0]),
                               canonical=True)
    rows = new_id[block_rows(S, 0, n_rows, 0, S.nnz, xp) + r0]
    cols = new_id[S.indices]
    ok = (rows >= 0) & (cols >= 0)
    rows, cols = rows[ok], cols[ok]
    data = S.data[ok].astype(xp.float64) * dinv[rows]
    data *= dinv[cols]
    indptr = xp.zeros(m_b + 1, dtype=idx)
    if rows.shape[0]:
        indptr[1:] = xp.cumsum(xp.bincount(rows - kept[0], minlength=m_b), dtype=idx)
    return csr_from_arrays(data, cols.astype(idx), indptr, (m_b, int(dinv.shape[0])),
                           canonical=True)


def normalised_blocks(graph, new_id, dinv) -> RowBlocks:
    """The row blocks of A on the workers of S's row blocks (see :func:`normalised_block`)."""
    blocks = graph.blocks
    kept = np.concatenate([[0], np.cumsum(
        [int(np.count_nonzero(new_id[r0:r1] >= 0))
         for r0, r1 in zip(blocks.offsets[:-1], blocks.offsets[1:], strict=True)])])
    new_id, dinv = blocks.client.scatter([new_id, dinv], broadcast=True, hash=False)
    futures = [blocks.client.submit(normalised_block, f, int(r0), new_id, dinv, pure=False)
               for f, r0 in zip(blocks.futures, blocks.offsets[:-1], strict=True)]
    return RowBlocks(blocks.client, futures, kept.astype(np.int64))
