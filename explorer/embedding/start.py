"""The eigensolvers' random vectors, drawn in the rows' original order.

An iterative eigensolver starts from (and LOBPCG's and Chebyshev's blocks are topped
up with) seeded random vectors. When the matrix is a symmetric permutation P A Pᵀ of
the user's graph (:mod:`explorer.graph.reorder`), drawing them in the solver's row
order would give every vertex a different start than the unreordered solve gives it,
so the two solves would converge to different bases of the wanted eigenspace, within
the tolerance apart, and k-means could number the clusters differently.
:class:`RowNormals` draws the vectors in the original order and hands row ``j`` of the
solve the values of its original row: the solve of P A Pᵀ then starts from P times the
start of A's, and with the same seed the labels are the same (up to floating-point
summation order in the products).
"""

from __future__ import annotations

import numpy as np

__all__ = ["RowNormals", "solver_rows"]


class RowNormals:
    """Seeded standard normal vectors (rows first) for an eigensolver's rows.

    Parameters
    ----------
    seed : int
        Seeds the generator (``xp.random.RandomState``, on the device of `xp`).
    xp : module
        NumPy or CuPy.
    rows : int array of shape (m,), optional
        The original position of each of the solver's m rows (:func:`solver_rows`):
        the draws are made in the original order and row ``j`` gets the values of
        original row ``rows[j]``. None: the solver's rows are in the original order.
    """

    def __init__(self, seed, xp, rows=None):
        self.xp = xp
        self.rs = xp.random.RandomState(seed)
        self.rows = rows

    def normal(self, m, b=None, dtype=np.float64):
        """Standard normal values of shape ``(m,)`` (`b` None) or ``(m, b)``.

        The GPU draws in `dtype` directly; NumPy draws float64 and casts (NumPy's
        ``RandomState`` has no dtype), so the values of each backend do not depend on
        the row order, only on the seed.
        """
        shape = (m,) if b is None else (m, b)
        if self.xp is np:
            R = self.rs.standard_normal(shape)
            R = R if R.dtype == dtype else R.astype(dtype)
        else:
            R = self.rs.standard_normal(shape, dtype=dtype)
        return R if self.rows is None else R[self.rows]


def solver_rows(row_ids, keep, xp):
    """The original position of each of a solver's rows among the rows it solves.

    Parameters
    ----------
    row_ids : int array of shape (n,)
        The original index of each row of the graph (:attr:`RowOrder.perm
        <explorer.graph.reorder.RowOrder>` for a permuted graph); a permutation of
        ``0..n-1``.
    keep : int array of shape (m,)
        The graph rows the solver works on (the non-isolated vertices), ascending.

    Returns
    -------
    int64 array of shape (m,)
        Row ``j`` of the solve is the ``rows[j]``-th of the kept rows in the original
        order: ``arange(m)`` when `row_ids` is the identity.
    """
    n = row_ids.shape[0]
    original = row_ids[keep]
    kept = xp.zeros(n, dtype=xp.int64)
    kept[original] = 1
    # Rank of each kept original row among the kept ones, by one pass over n.
    rank = xp.cumsum(kept) - 1
    return rank[original]
