"""The Lanczos eigensolver: SciPy's / CuPy's ``eigsh`` (implicitly restarted Lanczos).

Best kept for graphs known to be connected: single-vector Lanczos builds one Krylov
space, which in exact arithmetic holds one vector per distinct eigenvalue, so it finds
the extra copies of a repeated eigenvalue (one per connected component) only through
rounding and may return a converged but incomplete set (see
:func:`explorer.embedding.spectral_embedding`, Notes).
"""

from __future__ import annotations

from .._csr import matmul, row_slabs
from .linalg import sparse_linalg
from .start import RowNormals

__all__ = ["ConvergenceError", "CountingOperator", "lanczos_eigenpairs"]


class ConvergenceError(ValueError, RuntimeError):
    """An eigensolver gave up before finding the eigenpairs asked for.

    A ValueError, because the user's settings (``max_iter``, ``tol``, the solver) are
    what to change, and the CLI and the app report ValueErrors as messages; a
    RuntimeError, as SciPy's ``ArpackNoConvergence`` is, for callers catching that.
    """


class CountingOperator:
    """``A`` as a LinearOperator that counts how many vectors it has been applied to.

    Parameters
    ----------
    A : scipy.sparse or cupyx.scipy.sparse matrix
    xp : module
        The array module of `A`.

    Attributes
    ----------
    op : LinearOperator
        SciPy's or cupyx's, applying `A` (slab by slab past
        :data:`~explorer._csr.PRODUCT_MAX_ENTRIES` stored entries).
    products : int
        Calls (one vector or one block each).
    vectors : int
        Vectors `A` was applied to.
    """

    def __init__(self, A, xp):
        self.A = A
        self._slabs = row_slabs(A)
        self.products = 0
        self.vectors = 0
        sl = sparse_linalg(xp)
        self.op = sl.LinearOperator(A.shape, matvec=self._apply, matmat=self._apply, dtype=A.dtype)

    def _apply(self, x):
        self.products += 1
        self.vectors += 1 if x.ndim == 1 else x.shape[1]
        return matmul(self.A, x, self._slabs)


def lanczos_eigenpairs(A, k, tol, max_iter, rng, xp, rows=None):
    """The k largest eigenpairs of A by ``eigsh(which="LA")``.

    Parameters
    ----------
    A : scipy.sparse or cupyx.scipy.sparse matrix of shape (m, m)
        Symmetric; ``k < m - 1``.
    k : int
        Number of eigenpairs.
    tol : float
        ``eigsh``'s stopping tolerance.
    max_iter : int or None
        Maximum number of restarts (SciPy) or Lanczos steps (CuPy); the library's
        default when None.
    rng : numpy.random.RandomState
        Draws one seed for the starting vector (drawn on A's device).
    xp : module
        The array module of `A`.
    rows : int array of shape (m,), optional
        The original position of each row of `A` when `A` is a permuted graph's: the
        starting vector is drawn in that order (:class:`explorer.embedding.start.RowNormals`).

    Returns
    -------
    eigenvalues : ndarray of shape (k,)
        Descending, on A's device.
    V : ndarray of shape (m, k)
        Eigenvectors, column i for ``eigenvalues[i]``.
    products : int
        Vectors A was applied to.

    Raises
    ------
    ConvergenceError
        If SciPy's ARPACK does not converge within `max_iter`.

    Notes
    -----
    SciPy raises ``ArpackNoConvergence``; CuPy has no such error and stops at
    ``maxiter``, leaving the caller's residual check to warn.
    """
    sl = sparse_linalg(xp)
    counter = CountingOperator(A, xp)
    m = A.shape[0]
    v0 = RowNormals(rng.randint(2**31 - 1), xp, rows).normal(m)
    no_convergence = getattr(sl, "ArpackNoConvergence", ())
    try:
        mu, V = sl.eigsh(counter.op, k=k, which="LA", v0=v0, tol=tol, maxiter=max_iter)
    except no_convergence as exc:
        raise ConvergenceError(
            f"Lanczos (ARPACK) did not converge: {len(exc.eigenvalues)} of {k} eigenpairs "
            f"after {counter.vectors} matrix-vector products (max_iter={max_iter}, "
            f"tol={tol:g}); raise max_iter, loosen tol, or use solver='lobpcg'"
        ) from None
    order = xp.argsort(-mu)
    return mu[order], V[:, order], counter.vectors
