"""LOBPCG preconditioned by the sparse LU factors of L + δI (shift-invert), on the CPU.

On graphs of points in the plane or in space the smallest eigenvalues of L_sym =
I - A crowd near 0 (a ring of 10⁵ points: 3e-7, 1.0e-5, 1.1e-5, ...), so every method
that only multiplies by A needs about 1/sqrt(gap) products per vector: Chebyshev took
1025 block products, 10-16 s, on circles 10⁵ on 2 cores. ``(L + δI)^-1`` turns the
same eigenvalues into 1/(λ + δ), far apart, and LOBPCG preconditioned by it
converges in a handful of iterations (6 there). Its factors are cheap where the graph
is planar-like: the fill of a sparse LU of a kNN graph of points in the plane grows
like n log n (SuperLU with the minimum-degree order of L + Lᵀ: 7·10⁶ entries, 0.6-0.9
s, for that graph's 1.2·10⁶; uniform points in the square, 5.8× the graph's entries at
2·10⁴, 7.6× at 10⁵, 8.5× at 2·10⁵). In space it does not: uniform points in the cube
gave 34× at 2·10⁴ and 86× at 10⁵ (10⁸ entries, 25 s), and the graph of
high-dimensional data, close to an expander, fills in towards dense. So the
``"auto"`` rule factors graphs of points in at most :data:`LU_MAX_DIM` dimensions only,
and the factors' memory, unknown before they are formed, stays about ten times the
graph's.

scikit-learn's ``eigen_solver="amg"`` takes the same road with pyamg's algebraic
multigrid as the preconditioner: cheaper to set up than the factors, weaker per
iteration (18 iterations, 1.2 s there). Ours, ``"amg"``
(:mod:`explorer.embedding.multigrid`), factors a coarse graph a third of the size
with this module's settings, and is what ``"auto"`` takes under the rule above.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import splu

from ..memory import check_allocation

__all__ = ["ALTERNATIVES", "LU_FILL_ESTIMATE", "LU_MAX_DIM", "LU_MIN_ROWS", "SHIFT",
           "factor_bytes", "factor_symmetric", "lu_preconditioner"]

#: δ of L + δI: below every eigenvalue of L_sym but 0, so the wanted ones become the
#: largest of (L + δI)^-1 by orders of magnitude; L + δI stays positive definite.
SHIFT = 1e-6

#: ``eigen_solver="auto"`` on the CPU takes "amg" (a coarse graph factored as here) for
#: graphs of points in at most this many dimensions (see the module docstring)...
LU_MAX_DIM = 2

#: ...and at least this many non-isolated vertices: a judgement, not a measured
#: crossover. Below it every solver takes a fraction of a second on 2 cores, and at
#: 10⁵ planar points the factors cost a small part of what Chebyshev's products do
#: (benchmarks/README.md, "The eigensolver's rule").
LU_MIN_ROWS = 20_000

#: Entries of the L and U factors per stored entry of A assumed before they are
#: formed: 5.8-8.5 measured on graphs of points in the plane at 2·10⁴-2·10⁵ rows,
#: growing like log n; the estimate keeps room above that. (Points in space or high
#: dimensions exceed it many times over: see the module docstring.)
LU_FILL_ESTIMATE = 12

#: Bytes per factor entry: a float32 value and an int32 row index, and SuperLU's
#: supernode bookkeeping.
_BYTES_PER_FACTOR_ENTRY = 12


#: What a MemoryEstimateError of the factored solvers ("lu", "amg") proposes instead.
ALTERNATIVES = ("use eigen_solver='chebyshev' or 'lobpcg', or cluster representatives "
                "(mode='representatives')")


def factor_bytes(nnz: int) -> float:
    """The host bytes :func:`lu_preconditioner` is estimated to need for a matrix of
    `nnz` stored entries (:data:`LU_FILL_ESTIMATE`)."""
    return float(LU_FILL_ESTIMATE) * _BYTES_PER_FACTOR_ENTRY * float(nnz)


def lu_preconditioner(A, shift=SHIFT):
    """``R ↦ (I - A + δI)^-1 R`` from SuperLU's factors, for LOBPCG's residuals.

    Parameters
    ----------
    A : scipy.sparse matrix of shape (m, m)
        A = D^-1/2 S D^-1/2, symmetric, on the host.
    shift : float
        δ.

    Returns
    -------
    callable
        Float64 block in, float64 block out.

    Raises
    ------
    explorer.memory.MemoryEstimateError
        When :func:`factor_bytes` exceeds the memory available, before factoring.

    Notes
    -----
    The factors are float32: a preconditioner's rounding costs iterations, not
    accuracy (the residuals LOBPCG tests are of A itself), and half the bytes make
    the factorisation and each solve faster (0.75 against 0.89 s on circles 10⁵).
    """
    m = A.shape[0]
    M = (sp.identity(m, dtype=np.float32, format="csr") * np.float32(1.0 + shift)
         - A.astype(np.float32))
    lu = factor_symmetric(M, "lu", f"{m}-row graph")

    def apply(R):
        return lu.solve(np.asarray(R, dtype=np.float32)).astype(np.float64)

    return apply


def factor_symmetric(M, solver, what):
    """SuperLU's factors of a symmetric positive definite CSR matrix, memory checked.

    Parameters
    ----------
    M : scipy.sparse CSR matrix of shape (m, m), float32
        L + δI (or its Galerkin coarse matrix): symmetric positive definite.
    solver : str
        The eigen_solver the factors are for, named in the error.
    what : str
        The matrix, as the error names it ("3000-row graph").

    Raises
    ------
    explorer.memory.MemoryEstimateError
        When :func:`factor_bytes` of `M`'s entries exceeds the memory available,
        before factoring.
    """
    check_allocation(factor_bytes(M.nnz),
                     f"eigen_solver={solver!r}: the sparse LU factors of the {what} (about "
                     f"{LU_FILL_ESTIMATE}× its {M.nnz} stored entries)", ALTERNATIVES)
    # M is symmetric, so the CSC that SuperLU takes is M's CSR read as its transpose:
    # no conversion (0.01 against 0.03 s on circles 10⁵; mirrored entries may differ in
    # their last bit, which a preconditioner's rounding covers). Symmetric mode: the
    # ordering of M + Mᵀ and pivots taken on the diagonal, as a Cholesky factorisation
    # would.
    return splu(M.T, permc_spec="MMD_AT_PLUS_A", options={"SymmetricMode": True})
