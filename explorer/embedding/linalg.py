"""Small linear-algebra helpers the eigensolvers and the embedding share.

Rayleigh-Ritz on a block basis (:func:`ritz_pairs`) and SVQB orthonormalisation
(:func:`svqb`) for LOBPCG; deterministic signs (:func:`sign_flip`) and unit rows
(:func:`unit_rows`) for the embedding; and the sparse linear-algebra module of a
backend (:func:`sparse_linalg`). Blocks live on the device (NumPy or CuPy, the `xp`
given); the small Gram matrices go to LAPACK on the host.
"""

from __future__ import annotations

import numpy as np

from .._backend import to_numpy

__all__ = ["ritz_pairs", "sign_flip", "sparse_linalg", "svqb", "unit_rows"]


def sparse_linalg(xp):
    """``scipy.sparse.linalg`` for NumPy, ``cupyx.scipy.sparse.linalg`` for CuPy."""
    if xp is np:
        import scipy.sparse.linalg as sl
    else:
        import cupyx.scipy.sparse.linalg as sl
    return sl


def ritz_pairs(basis, images, b, xp):
    """The b largest Ritz pairs of A on the span of the blocks in `basis`.

    Parameters
    ----------
    basis : list of ndarray of shape (m, b_i)
        Blocks whose columns span the search space (not necessarily orthonormal).
    images : list of ndarray
        A times each block of `basis`.
    b : int
        Number of Ritz pairs wanted.
    xp : module
        The array module of the blocks.

    Returns
    -------
    (theta, C, S, AS) or None
        The values (NumPy, descending), the coefficients (device), and the
        concatenated S and AS, solving (SᵀAS) c = θ (SᵀS) c; or None when SᵀS is too
        ill-conditioned for that (a block nearly dependent on the others).

    Notes
    -----
    SᵀS is judged singular when its smallest eigenvalue is below ``1e-8`` times its
    order; both Gram matrices are symmetrised on the host before
    ``scipy.linalg.eigh``.
    """
    import scipy.linalg

    S, AS = xp.concatenate(basis, axis=1), xp.concatenate(images, axis=1)
    G = to_numpy(S.T @ AS)
    M = to_numpy(S.T @ S)
    M = (M + M.T) / 2
    if np.linalg.eigvalsh(M)[0] < 1e-8 * M.shape[0]:
        return None
    theta, C = scipy.linalg.eigh((G + G.T) / 2, M)
    order = np.argsort(-theta)[:b]
    return theta[order], xp.asarray(C[:, order]), S, AS


def svqb(W, xp, AW=None):
    """Orthonormalise the columns of W by SVQB (scaled Gram matrix, eigendecomposition).

    Parameters
    ----------
    W : ndarray of shape (m, b)
    xp : module
        The array module of `W`.
    AW : ndarray of shape (m, b), optional
        A times W: the same transform is applied to it.

    Returns
    -------
    W or (W, AW)
        With orthonormal columns; directions that are numerically dependent (or zero)
        are dropped, so there may be fewer than b.

    Notes
    -----
    Two passes restore the orthogonality one pass loses to rounding. A direction is
    dependent when its eigenvalue of the scaled Gram matrix is below 1e-12 times the
    largest.
    """
    for _ in range(2):
        G = to_numpy(W.T @ W)
        d = np.sqrt(np.clip(np.diag(G), 0, None))
        keep = d > 0
        d_keep = d[keep]
        G = G[np.ix_(keep, keep)] / np.outer(d_keep, d_keep)
        lam, V = np.linalg.eigh((G + G.T) / 2)
        good = lam > 1e-12 * max(float(lam.max(initial=0.0)), 1e-300)
        T = np.zeros((W.shape[1], int(good.sum())))
        T[keep] = (V[:, good] / np.sqrt(lam[good])) / d_keep[:, None]
        T = xp.asarray(T)
        W = W @ T
        if AW is not None:
            AW = AW @ T
    return W if AW is None else (W, AW)


def sign_flip(V, xp):
    """Make the largest-magnitude entry of each column positive (deterministic signs).

    Parameters
    ----------
    V : ndarray of shape (m, k)
    xp : module
        The array module of `V`.

    Returns
    -------
    ndarray of shape (m, k)
        A new array; a column whose largest-magnitude entry is 0 keeps its sign.

    Notes
    -----
    The argmax runs over a contiguous (k, m) copy: an axis-0 reduction of the (m, k)
    array runs in a handful of GPU blocks (see :func:`explorer._backend.column_sums`).
    """
    rows = xp.argmax(xp.ascontiguousarray(xp.abs(V).T), axis=1)
    signs = xp.sign(V[rows, xp.arange(V.shape[1])])
    signs[signs == 0] = 1
    return V * signs


def unit_rows(U, xp):
    """Rows scaled to unit Euclidean length; zero rows stay zero, NaN rows stay NaN.

    Parameters
    ----------
    U : ndarray of shape (n, k)
    xp : module
        The array module of `U`.

    Returns
    -------
    ndarray of shape (n, k)
    """
    norms = xp.linalg.norm(U, axis=1, keepdims=True)
    return U / xp.where(norms > 0, norms, 1.0)
