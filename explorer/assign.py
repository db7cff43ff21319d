"""Label assignment of a spectral embedding without k-means: ``discretize`` and ``cluster_qr``.

The two strategies scikit-learn's ``SpectralClustering(assign_labels=...)`` offers
besides k-means, with the same semantics, written for either array namespace (NumPy or
CuPy, taken from the embedding with :func:`explorer._backend.array_module`):

- :func:`discretize`: the alternating search of "Multiclass spectral clustering"
  (Yu & Shi, 2003) for the partition matrix closest to a rotation of the normalised
  embedding.
- :func:`cluster_qr`: "Simple, direct and efficient multi-way spectral clustering"
  (Damle, Minden & Ying, 2019): a column-pivoted QR of Vᵀ picks k representative
  points, whose rows span the rotation; every point takes the label of its largest
  rotated coordinate.

Both work on the n × k embedding and on k × k matrices only: the n × k products run in
the embedding's namespace (on the GPU for a CuPy embedding) and the k × k algebra (SVDs
of k × k matrices) runs on the host in float64, where it costs microseconds. Everything
is computed in float64 whatever the embedding's dtype (an n × k copy), so float32 and
float64 embeddings of the same vectors get the same labels.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg
from sklearn.utils import check_random_state

from ._backend import array_module, to_numpy

__all__ = ["ASSIGN_LABELS", "cluster_qr", "discretize"]

#: The label assignments of an embedding, by scikit-learn's names
#: (``SpectralClustering(assign_labels=...)``); ``"kmeans"`` is :mod:`explorer.kmeans`.
ASSIGN_LABELS = ("kmeans", "discretize", "cluster_qr")


def _embedding(vectors, name: str = "vectors"):
    """`vectors` as a 2-D float64 array of its own namespace, checked: at least one row
    and one column, all finite."""
    xp = array_module(vectors)
    v = xp.asarray(vectors, dtype=xp.float64)
    if v.ndim != 2 or v.shape[0] < 1 or v.shape[1] < 1:
        raise ValueError(
            f"{name} must be a 2-D n_samples x n_components array with at least one row and "
            f"one column; got shape {tuple(v.shape)}"
        )
    if not bool(xp.isfinite(v).all()):
        raise ValueError(f"{name} holds NaN or infinite values; an embedding must be finite")
    return xp, v


def cluster_qr(vectors):
    """Labels of an embedding by column-pivoted QR (Damle, Minden & Ying, 2019).

    The first k pivots of the column-pivoted QR of Vᵀ (k × n) are k points whose
    embedding rows are as far from collinear as the QR can find; the orthogonal factor
    U Wᵀ of the SVD of those k rows (transposed) rotates the embedding so that each
    cluster lines up with one axis, and each point takes the axis where its rotated row
    is largest in absolute value. No randomness and no iteration.

    Parameters
    ----------
    vectors : ndarray (NumPy or CuPy) of shape (n_samples, n_components)
        The spectral embedding (one column per eigenvector).

    Returns
    -------
    labels : ndarray of int64, shape (n_samples,)
        In ``range(n_components)``, on the namespace of `vectors`.

    Notes
    -----
    On NumPy the pivots come from LAPACK's column-pivoted QR (``scipy.linalg.qr(...,
    pivoting=True)``, the routine scikit-learn's ``cluster_qr`` uses, so the two give
    the same labels on the same vectors). CuPy has no pivoted QR, and a host copy costs
    seconds at 10⁷ points (the transfer and an O(n k²) QR on one core), so on CuPy the
    k pivots are chosen on the device by :func:`_pivots`: the same rule (the column of
    largest residual norm, then project it out), k steps of O(n k) each. Where two
    points' residual norms tie to rounding (points of one tight cluster), the two may
    take different ones of them, which barely moves the rotation.
    """
    xp, v = _embedding(vectors)
    n, k = v.shape
    if n < k:
        raise ValueError(
            f"cluster_qr needs at least as many samples as components (k pivots of Vᵀ); got "
            f"vectors of shape {(n, k)}"
        )
    if xp is np:
        # mode="r": only R and the pivots, no Q. The pivots are all that is needed.
        piv = scipy.linalg.qr(v.T, mode="r", pivoting=True)[1][:k]
    else:
        piv = _pivots(xp, v.T, k)
    return _labels_from_pivots(xp, v, piv)


def _labels_from_pivots(xp, v, piv):
    """cluster_qr's labels of the embedding `v` (n × k float64) given its k pivots: the
    rotation U Wᵀ of the pivot rows' SVD (host, k × k), then the argmax of |V U Wᵀ|."""
    chosen = to_numpy(v[xp.asarray(piv)])  # k x k, the representative rows
    ut, _, vt = np.linalg.svd(chosen.T)
    rotation = xp.asarray(ut @ vt)
    return xp.abs(v @ rotation).argmax(axis=1).astype(xp.int64)


def _pivots(xp, A, k: int) -> list[int]:
    """The first `k` column pivots of the column-pivoted QR of `A` (k × n), in `xp`.

    Column pivoting (Businger & Golub) takes, at each step, the column of largest
    norm once the span of the columns taken is projected out; the projection here is
    Gram-Schmidt, applied twice per step so that the residual stays orthogonal to the
    columns taken (LAPACK does the same with Householder reflections and downdated
    norms: equal pivots but for near ties). A step whose residual is all zero (`A` of
    rank below k) takes the first column not taken, as LAPACK does.
    """
    R = A.copy()
    taken: list[int] = []
    for _ in range(k):
        norms = (R * R).sum(axis=0)
        if taken:
            norms[xp.asarray(taken)] = -1.0
        p = int(norms.argmax())
        if float(norms[p]) <= 0.0:
            p = next(j for j in range(A.shape[1]) if j not in taken)
            taken.append(p)
            continue
        taken.append(p)
        q = R[:, p] / xp.sqrt(norms[p])
        for _ in range(2):
            R -= xp.outer(q, q @ R)
    return taken


def _one_hot_gram(xp, labels, v, k: int) -> np.ndarray:
    """``Pᵀ V`` (k × k, host float64) for the partition matrix ``P`` of `labels`: row c
    sums the embedding rows labelled c (one weighted ``bincount`` per column, which
    both NumPy and CuPy have, rather than an n × k sparse matrix)."""
    out = np.empty((k, k))
    for c in range(k):
        out[:, c] = to_numpy(xp.bincount(labels, weights=v[:, c], minlength=k))
    return out


def discretize(vectors, random_state=None, *, max_svd_restarts=30, n_iter_max=20):
    """Labels of an embedding by discretisation (Yu & Shi, 2003).

    scikit-learn's ``assign_labels="discretize"``, same steps and the same use of
    `random_state`, so both give the same labels on the same vectors and seed:

    1. Scale each column of V to norm √n and orient it so that its first entry is
       negative (the eigensolver's sign is arbitrary); then scale each row to unit
       length: rows now lie on the sphere where a partition matrix's rows lie.
    2. Start the rotation R from one random row, then add, one column at a time, the
       row least aligned with those already taken (smallest accumulated |V rⱼ|).
    3. Alternate: labels = argmax of V R (the partition matrix P closest to V R);
       then R = W Uᵀ from the SVD U S Wᵀ = Pᵀ V (the rotation closest to P given V).
       The normalised cut is 2 (n − trace S); stop when it changes by less than the
       float64 epsilon or after `n_iter_max` iterations.

    An SVD that fails (``numpy.linalg.LinAlgError``) restarts from step 2 with a new
    random row, at most `max_svd_restarts` times.

    Parameters
    ----------
    vectors : ndarray (NumPy or CuPy) of shape (n_samples, n_components)
        The spectral embedding; not modified.
    random_state : int, RandomState instance or None
        The first row of the rotation (scikit-learn's ``check_random_state``: one
        ``randint(n_samples)`` per start).
    max_svd_restarts : int, default 30
        How many failed SVDs restart the search before giving up.
    n_iter_max : int, default 20
        Iterations of step 3 before stopping without convergence (the labels of the
        last iteration are returned, as scikit-learn does).

    Returns
    -------
    labels : ndarray of int64, shape (n_samples,)
        In ``range(n_components)``, on the namespace of `vectors`.

    Raises
    ------
    numpy.linalg.LinAlgError
        If the SVD failed at every one of the `max_svd_restarts` starts.

    Notes
    -----
    A row of V that is all zeros (possible in an embedding of a graph with isolated
    points) has no direction; it stays zero instead of becoming NaN, is never taken into
    the starting rotation, and takes label 0 (scikit-learn's division would make it
    NaN, which poisons the search). Without zero rows, the steps and the random draws
    are scikit-learn's.

    The n × k work (normalising, V R, the per-label sums Pᵀ V) runs in the namespace
    of `vectors`; the k × k SVDs run on the host with ``numpy.linalg.svd``.
    """
    for name, value in (("max_svd_restarts", max_svd_restarts), ("n_iter_max", n_iter_max)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{name} must be an integer >= 1; got {value!r}")
    rng = check_random_state(random_state)
    xp, v = _embedding(vectors)
    n, k = v.shape
    eps = np.finfo(np.float64).eps

    # 1. Columns to norm sqrt(n), first entry negative; rows to the unit sphere.
    norms = xp.linalg.norm(v, axis=0)
    norms = xp.where(norms > 0, norms, 1.0)
    first = xp.sign(v[0])
    first = xp.where(first != 0, -first, 1.0)
    v = v / norms[None, :] * np.sqrt(n) * first[None, :]  # scikit-learn's order of rounding
    rows = xp.sqrt((v * v).sum(axis=1))
    v /= xp.where(rows > 0, rows, 1.0)[:, None]
    zero = to_numpy(rows == 0)
    if zero.all():
        return xp.zeros(n, dtype=xp.int64)

    for _ in range(max_svd_restarts):
        # 2. A start: one random row, then the rows least aligned with those taken
        # (never a zero row: it has no direction and would make R singular).
        rotation = np.zeros((k, k))
        first = rng.randint(n)
        while zero[first]:
            first = rng.randint(n)
        rotation[:, 0] = to_numpy(v[first])
        c = xp.asarray(np.where(zero, np.inf, 0.0))
        for j in range(1, k):
            c += xp.abs(v @ xp.asarray(rotation[:, j - 1]))
            rotation[:, j] = to_numpy(v[int(c.argmin())])

        # 3. Alternate partition and rotation.
        last_ncut = 0.0
        for n_iter in range(1, n_iter_max + 2):
            labels = (v @ xp.asarray(rotation)).argmax(axis=1)
            try:
                u, s, wt = np.linalg.svd(_one_hot_gram(xp, labels, v, k))
            except np.linalg.LinAlgError:
                break  # restart from a new random row
            ncut = 2.0 * (n - s.sum())
            if abs(ncut - last_ncut) < eps or n_iter > n_iter_max:
                return labels.astype(xp.int64)
            last_ncut = ncut
            rotation = wt.T @ u.T
    raise np.linalg.LinAlgError(
        f"SVD did not converge: discretize's SVD of the {k} x {k} matrix failed at every "
        f"one of max_svd_restarts={max_svd_restarts} random starts"
    )
