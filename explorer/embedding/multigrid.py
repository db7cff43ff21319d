"""LOBPCG preconditioned by a two-grid cycle of aggregation multigrid, on the CPU.

The ``"lu"`` solver (:mod:`explorer.embedding.lu`) preconditions LOBPCG with the
exact ``(L + δI)^-1``: 2-6 iterations, but its factors cost most of the solve (0.6-0.8
of 0.8-1.4 s on kNN graphs of 10⁵ points in the plane, 2 cores). An inexact inverse
that is cheap to form does better overall. The one here is the classic two-grid
cycle of algebraic multigrid, with the coarse problem solved exactly:

1. **Aggregates.** Every vertex joins its strongest neighbour (the largest weight of
   its row); the connected pieces of that forest are the aggregates, about three
   vertices each on kNN graphs (10⁵ → 2.9-3.3·10⁴). An aggregate never spans two
   components of the graph.
2. **Prolongation P** (n × aggregates): the piece of the vector ``D^1/2 1`` on each
   aggregate, scaled to unit norm. ``D^1/2 1`` is A's eigenvector for eigenvalue 1
   (L's for 0), the smooth vector the coarse space must hold, and PᵀP = I.
3. **Coarse matrix** ``Pᵀ (L + δI) P = (1 + δ) I - Pᵀ A P``: the normalised Laplacian
   of the graph of aggregates (weights summed, its self-loops kept), factored by
   SuperLU like "lu"'s, at a third of the size (0.04-0.08 s against 0.6-0.8 s).
4. **The cycle** ``R ↦ X``: one damped Jacobi sweep, the coarse correction, one more
   sweep (ω = 2/3). Symmetric and positive definite, as LOBPCG needs.

On kNN graphs of 10⁵ points in the plane (2 cores; tol 1e-5, setup + solve) it took
0.42 s on circles (k = 2: "lu" 0.68 s), 0.70 s on moons with k = 3 (0.87 s) and 0.97 s
on uniform points in the square with k = 4 (1.37 s), in 4-7 iterations where "lu" took
2-5: cheaper iterations, far cheaper setup. The eigenpairs are LOBPCG's to its
tolerance whatever the preconditioner; the preconditioner only sets the iterations.

Coarsening further (a recursive V-cycle, or a coarse graph of 1/10 the size) made the
coarse factors nearly free but cost more in iterations than it saved (circles 0.49-0.71
s, square 1.10-1.88 s). scikit-learn's ``eigen_solver="amg"`` uses pyamg's smoothed
aggregation the same way (18 iterations, about 1 s, on circles 10⁵).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from .._csr import entry_rows
from ..memory import check_allocation
from .lu import ALTERNATIVES, SHIFT, factor_symmetric

__all__ = ["EXPECTED_PRODUCTS", "OMEGA", "aggregate", "multigrid_preconditioner",
           "strongest_neighbours"]

#: Damping of the Jacobi sweeps: 2/3, the classic choice for a Laplacian, damps the
#: oscillating half of the spectrum (L_sym's eigenvalues lie in [0, 2]).
OMEGA = 2.0 / 3.0

#: Block products of an "amg" solve, for the reordering rule
#: (:func:`explorer.graph.reorder.choose_order`): three an iteration (LOBPCG's and the
#: cycle's two), 4-10 iterations on the graphs measured above.
EXPECTED_PRODUCTS = 30

#: Bytes per stored entry of A while the coarse matrix is assembled: each entry's row,
#: its aggregate pair and its scaled weight (int64, int64, int64, float64) and the sum.
_ASSEMBLY_BYTES_PER_ENTRY = 40


def strongest_neighbours(A):
    """The column of each row's largest off-diagonal entry: the first of equal ones,
    -1 for a row with none.

    Parameters
    ----------
    A : scipy.sparse CSR matrix of shape (m, m)
        Non-negative weights.

    Returns
    -------
    ndarray of int64, shape (m,)
    """
    m = A.shape[0]
    rows = entry_rows(A.indptr)
    weights = np.where(A.indices == rows, 0.0, A.data)  # a stored diagonal is no neighbour
    counts = np.diff(A.indptr)
    filled = np.flatnonzero(counts > 0)
    row_max = np.zeros(m)
    row_max[filled] = np.maximum.reduceat(weights, A.indptr[:-1][filled])
    hits = np.flatnonzero((weights == row_max[rows]) & (weights > 0))
    hit_rows = rows[hits]
    first = np.ones(hits.size, dtype=bool)  # the first hit of each row: its lowest column
    first[1:] = hit_rows[1:] != hit_rows[:-1]
    best = np.full(m, -1, dtype=np.int64)
    best[hit_rows[first]] = A.indices[hits[first]]
    return best


def aggregate(A):
    """The aggregates of the two-grid cycle: the connected pieces of the forest that
    joins every vertex to its strongest neighbour (:func:`strongest_neighbours`).

    Returns
    -------
    labels : ndarray of int64, shape (m,)
        The aggregate of every vertex, 0 .. count - 1.
    count : int
    """
    m = A.shape[0]
    best = strongest_neighbours(A)
    linked = np.flatnonzero(best >= 0)
    forest = sp.csr_matrix((np.ones(linked.size, dtype=np.int8), (linked, best[linked])),
                           shape=(m, m))
    count, labels = connected_components(forest, directed=True, connection="weak")
    return labels.astype(np.int64), int(count)


def multigrid_preconditioner(A, degree, shift=SHIFT):
    """``R ↦ X ≈ (I - A + δI)^-1 R`` by one two-grid cycle, for LOBPCG's residuals.

    Parameters
    ----------
    A : scipy.sparse CSR matrix of shape (m, m)
        A = D^-1/2 S D^-1/2, symmetric, on the host.
    degree : float64 ndarray of shape (m,)
        The degrees of S's vertices (all positive): ``D^1/2 1`` spans the coarse
        space's smooth part.
    shift : float
        δ, as :func:`explorer.embedding.lu.lu_preconditioner`'s.

    Returns
    -------
    callable
        Float64 block in, float64 block out.

    Raises
    ------
    explorer.memory.MemoryEstimateError
        When assembling the coarse matrix, or its factors
        (:func:`explorer.embedding.lu.factor_symmetric`), would exceed the memory
        available; before they are formed.
    """
    m = A.shape[0]
    check_allocation(_ASSEMBLY_BYTES_PER_ENTRY * float(A.nnz),
                     f"eigen_solver='amg': the coarse matrix of the {m}-row graph "
                     f"({A.nnz} stored entries)", ALTERNATIVES)
    labels, count = aggregate(A)
    # P's entries: D^1/2 1 on each aggregate, scaled to unit norm.
    volume = np.bincount(labels, weights=degree, minlength=count)
    p = np.sqrt(degree / volume[labels])
    restrict = sp.csr_matrix((p, (labels, np.arange(m))), shape=(count, m))  # Pᵀ
    rows = entry_rows(A.indptr)
    coarse_a = sp.coo_matrix((A.data * p[rows] * p[A.indices],
                              (labels[rows], labels[A.indices])), shape=(count, count)).tocsr()
    del rows
    coarse = (sp.identity(count, format="csr") * (1.0 + shift) - coarse_a).astype(np.float32)
    factors = factor_symmetric(coarse, "amg", f"{count}-row coarse graph")
    jacobi = OMEGA / (1.0 + shift - A.diagonal())[:, None]

    def residual(R, X):
        return R - ((1.0 + shift) * X - A @ X)

    def apply(R):
        R = np.asarray(R, dtype=np.float64)
        R2 = R if R.ndim == 2 else R[:, None]
        X = jacobi * R2
        correction = factors.solve((restrict @ residual(R2, X)).astype(np.float32))
        X += p[:, None] * correction[labels]
        X += jacobi * residual(R2, X)
        return X if R.ndim == 2 else X[:, 0]

    return apply

