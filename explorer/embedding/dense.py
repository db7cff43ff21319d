"""The dense eigensolver: a full symmetric eigendecomposition of A, for small graphs."""

from __future__ import annotations

import numpy as np

__all__ = ["dense_eigenpairs"]


def dense_eigenpairs(A, k, xp):
    """The k largest eigenpairs of A by a dense symmetric eigendecomposition.

    Parameters
    ----------
    A : scipy.sparse or cupyx.scipy.sparse matrix of shape (m, m)
        Symmetric (A = D^-1/2 S D^-1/2); densified, so m must be small.
    k : int
        Number of eigenpairs, 1 <= k <= m.
    xp : module
        The array module of `A`.

    Returns
    -------
    eigenvalues : ndarray of shape (k,)
        Descending, on A's device.
    V : ndarray of shape (m, k)
        Orthonormal eigenvectors, column i for ``eigenvalues[i]``.

    Notes
    -----
    Exact whatever the multiplicities, at O(m³) cost: ``solver="auto"`` takes it up
    to :data:`explorer.embedding.solvers.DENSE_MAX_N` vertices. On the CPU only the
    wanted eigenpairs are computed (LAPACK's MRRR driver skips the rest, 2-3x faster);
    MRRR may return fewer than asked for inside a tight cluster of eigenvalues, such
    as the zeros of several components, and then the full decomposition decides. On
    the GPU ``cupy.linalg.eigh`` computes them all.
    """
    M = A.toarray()
    m = M.shape[0]
    mu = None
    if xp is np:
        import scipy.linalg

        mu, V = scipy.linalg.eigh(M, subset_by_index=[m - k, m - 1], driver="evr")
        if mu.shape[0] != k:
            mu = None
    if mu is None:
        mu, V = xp.linalg.eigh(M)
        mu, V = mu[m - k :], V[:, m - k :]
    order = xp.argsort(-mu)
    return mu[order], V[:, order]
