"""The LOBPCG eigensolver: block LOBPCG (Knyazev 2001) for the largest eigenvalues, our own.

SciPy's and CuPy's ``lobpcg`` stop only when *every* block vector has converged, the
extra ones included, and those converge slowest (their gap to the next eigenvalue is
the smallest): on a 100 000-point, 4-component graph the wanted 4 vectors converged in
90 iterations and the 2 extras took 470. Here only the k wanted pairs decide when to
stop. The core paper ran nvGRAPH's LOBPCG.
"""

from __future__ import annotations

from .._backend import column_norms, to_numpy
from .._csr import matmul, row_slabs
from .linalg import ritz_pairs, svqb
from .start import RowNormals

__all__ = ["DEFAULT_MAX_ITER", "extra_vectors", "lobpcg_eigenpairs"]

#: Default LOBPCG iteration limit. Graph Laplacians converge slowly without a
#: preconditioner: up to a few hundred iterations on the graphs we tried.
DEFAULT_MAX_ITER = 1000


def extra_vectors(k: int) -> int:
    """Vectors the LOBPCG block holds beyond the k wanted: ``min(k, max(2, k // 4))``.

    Convergence of the k-th eigenpair is governed by its gap to eigenvalue ``block +
    1``, and a few extra vectors turn a tiny gap (a repeated or clustered eigenvalue at
    the edge of the wanted set) into a larger one.
    """
    return min(k, max(2, k // 4))


def lobpcg_eigenpairs(A, k, degree, tol, max_iter, rng, xp, start=None, rows=None,
                      precondition=None):
    """The k largest eigenpairs of A by block LOBPCG, stopping on the k wanted pairs.

    Parameters
    ----------
    A : scipy.sparse or cupyx.scipy.sparse matrix of shape (m, m)
        A = D^-1/2 S D^-1/2; m > 5 * (k + :func:`extra_vectors` (k)).
    k : int
        Number of eigenpairs.
    degree : float64 ndarray of shape (m,)
        The degrees of A's vertices: D^1/2 1 is an exact eigenvector of A for
        eigenvalue 1 and the block's first vector.
    tol : float
        Stop when the residual norm ``||A x - θ x||`` of each of the k wanted unit
        vectors is at most `tol`.
    max_iter : int
        Maximum iterations.
    rng : numpy.random.RandomState
        Draws one seed for the random block (drawn on A's device).
    xp : module
        The array module of `A`.
    start : ndarray of shape (m, j), optional
        Known eigenvectors of eigenvalue 1 (the indicators D^1/2 1_c of the graph's
        components): the block's first j vectors instead of D^1/2 1.
    rows : int array of shape (m,), optional
        The original position of each row of `A` when `A` is a permuted graph's: the
        random block is drawn in that order (:class:`explorer.embedding.start.RowNormals`).
    precondition : callable, optional
        Applied to the residual block before it joins the basis: an approximation of
        ``(I - A - σI)^-1`` for a shift σ below the wanted eigenvalues of L = I - A
        (:func:`explorer.embedding.lu.lu_preconditioner`). None: the residuals as they
        are.

    Returns
    -------
    eigenvalues : ndarray of shape (k,)
        Descending, on A's device.
    X : ndarray of shape (m, k)
        Orthonormal eigenvectors, column i for ``eigenvalues[i]``.
    iterations : int
        Iterations (one block product with A each).

    Notes
    -----
    Each iteration: the residuals R = AX - XΘ of the unconverged vectors (soft
    locking) are orthogonalised to X and orthonormalised; Rayleigh-Ritz on the basis
    [X, R, P] (P: the previous search directions, orthonormalised) gives the new X
    and P. One block product with A per iteration (AP is carried along); on
    convergence a fresh product confirms it. The small Gram eigenproblems go to LAPACK
    on the host, as CuPy's own Lanczos does; when P has become nearly dependent on X
    and R (the classic LOBPCG breakdown near convergence), the step is taken without
    it. Jacobi preconditioning would be the identity (the diagonal of L_sym is 1);
    `precondition` takes a better one.
    """
    m = A.shape[0]
    block = k + extra_vectors(k)
    X = RowNormals(rng.randint(2**31 - 1), xp, rows).normal(m, block)
    if start is None:
        X[:, 0] = xp.sqrt(degree)
    else:
        X[:, : start.shape[1]] = start[:, :block]
    X = svqb(X, xp)
    slabs = row_slabs(A)  # once: past 2**30 entries each product goes slab by slab
    AX = matmul(A, X, slabs)
    theta, C, _, _ = ritz_pairs([X], [AX], block, xp)
    X, AX = X @ C, AX @ C
    P = AP = None
    iterations = 0
    while True:
        R = AX - X * xp.asarray(theta)
        residual_norms = to_numpy(column_norms(R, xp))
        if (residual_norms[:k] <= tol).all():
            # AX was carried along through the updates; confirm with a fresh product.
            AX = matmul(A, X, slabs)
            R = AX - X * xp.asarray(theta)
            residual_norms = to_numpy(column_norms(R, xp))
            if (residual_norms[:k] <= tol).all():
                break
            P = AP = None
        if iterations == max_iter:
            break
        iterations += 1
        W = R[:, xp.asarray(residual_norms > tol)]
        if precondition is not None:
            W = precondition(W)
        W = svqb(W - X @ (X.T @ W), xp)
        AW = matmul(A, W, slabs)
        basis, images = [X, W], [AX, AW]
        if P is not None:
            P, AP = svqb(P, xp, AP)
            basis, images = [X, W, P], [AX, AW, AP]
        found = ritz_pairs(basis, images, block, xp)
        if found is None:  # P nearly dependent on [X, W]: restart the directions
            basis, images = [X, W], [AX, AW]
            found = ritz_pairs(basis, images, block, xp)
        theta, C, S, AS = found
        X, AX = S @ C, AS @ C
        P, AP = S[:, block:] @ C[block:], AS[:, block:] @ C[block:]
    return xp.asarray(theta[:k]), X[:, :k], iterations
