"""Landmark spectral clustering: a sparse n × p affinity to p landmarks, its leading left
singular vectors by a block Krylov method, k-means on their rows.

This is Cai & Chen's landmark-based spectral clustering (LSC, "Large scale spectral
clustering via landmark-based sparse representation", IEEE TCYB 2015) with the truncated
SVD done as "Sparse matrix-vector and matrix-multivector products for the truncated SVD
on graphics processors" proposes: block products with the sparse matrix and its transpose
from ONE stored copy (CSRC, :mod:`explorer.kernels.csrc`) on the GPU, SciPy CSR on the
CPU. It costs O(n·p·d) for the affinity (one GEMM) and O(n·r) per product, where the
exact pipeline costs O(n²·d) for its ε-graph. See :func:`landmark_partition`.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field

import numpy as np

from . import memory
from ._backend import array_module, resolve_backend, sparse_module, to_numpy
from ._validation import (
    check_choice,
    check_data,
    check_float,
    check_int,
    check_limit,
    check_random_state,
)
from .embedding import auto_k_max, eigengap_k
from .kmeans import KMeans
from .params import MAX_ITER_LIMIT, N_INIT_LIMIT

__all__ = [
    "LANDMARK_METHODS",
    "LandmarkAffinity",
    "LandmarkPartition",
    "TruncatedSVD",
    "block_krylov_svd",
    "choose_landmarks",
    "estimate_bytes",
    "landmark_affinity",
    "landmark_partition",
    "nearest_landmarks",
]

#: How landmarks are chosen: k-means centres of a sample (LSC-K) or sampled rows (LSC-R).
LANDMARK_METHODS = ("kmeans", "random")

#: Weights of a point's nearest landmarks.
METRICS = ("gaussian", "cosine")

#: Products with the affinity on the GPU: CSRC (one stored copy, explorer.kernels.csrc)
#: or cuSPARSE CSR with an explicit transposed copy (the paper's baseline).
SPMM_CHOICES = ("auto", "csrc", "cusparse")

#: ``landmark_method="kmeans"`` runs k-means on min(n, this × p) sampled rows: about 20
#: points per centre, enough for the centres to follow the density, and the cost stays
#: independent of n (LSC's code runs k-means on a sample too).
KMEANS_SAMPLE_PER_LANDMARK = 20

#: Lloyd iterations of the landmark k-means (LSC's code uses 10 too: the centres need
#: to cover the data, not to converge).
LANDMARK_KMEANS_ITER = 10

#: Largest number of landmarks per point (kernels.csrc.MAX_NEAREST, registers).
MAX_NEAREST = 32

#: Largest block width of one product (kernels.csrc.MAX_WIDTH); wider blocks are split.
MAX_WIDTH = 64

#: Bytes of one block of point-landmark products (rows × p float32).
PRODUCT_BLOCK_BYTES = 256 * 2**20

#: Default residual tolerance of the singular triplets, relative to σ₁² (= 1 here):
#: ``‖Ẑᵀ Ẑ v − σ² v‖ <= tol``. The products are float32, so 1e-5 is about the floor.
SVD_TOL = 1e-4

#: Default limit on Krylov blocks (each: one product with Ẑ and one with Ẑᵀ).
SVD_MAX_ITER = 100


# ------------------------------------------------------------------ results


@dataclass
class TruncatedSVD:
    """Leading singular triplets of an n × p operator, from :func:`block_krylov_svd`.

    Attributes
    ----------
    singular_values : numpy.ndarray of shape (k,)
        Descending.
    left : ndarray of float32, shape (n, k)
        Left singular vectors, on the operator's device.
    right : numpy.ndarray of float64, shape (p, k)
        Right singular vectors.
    residuals : numpy.ndarray of shape (k,)
        ``‖AᵀA v − σ² v‖`` of each right vector (exact within the Krylov basis).
    iterations : int
        Krylov blocks used (each one product with A and one with Aᵀ).
    block_size : int
    converged : bool
        All residuals at most ``tol · σ₁²`` (or the basis spans all p columns).
    """

    singular_values: np.ndarray
    left: object
    right: np.ndarray
    residuals: np.ndarray
    iterations: int
    block_size: int
    converged: bool


@dataclass
class LandmarkPartition:
    """What :func:`landmark_partition` produced.

    Attributes
    ----------
    labels : ndarray of int32, shape (n,)
        Cluster of each point, −1 for points without a positive weight to any of their
        landmarks (possible with the cosine: all `n_nearest` cosines <= 0); on the
        backend's device.
    n_clusters : int
        The k used (the eigengap's choice under ``n_clusters="auto"``).
    landmarks : ndarray of float32, shape (p, d)
        The landmarks (unit rows for the cosine), on the backend's device.
    landmark_method : {"kmeans", "random"}
    n_nearest : int
        r, the landmarks per point.
    metric : {"gaussian", "cosine"}
    sigma : float or None
        The gaussian width used (None for the cosine).
    singular_values : numpy.ndarray of shape (k,)
        σ₁ >= ... >= σ_k of Ẑ; 1 − σ² are the eigenvalues of the landmark graph's
        normalised Laplacian (see :func:`landmark_partition`, Notes).
    vectors : ndarray of float32, shape (n, k)
        The left singular vectors (rows of isolated points are 0).
    embedding : ndarray of float32, shape (n, k)
        Their rows scaled to unit length, which k-means clustered (NaN rows for
        isolated points).
    isolated : ndarray of bool, shape (n,)
    affinity : LandmarkAffinity or None
        Ẑ as stored for the products (None in ``SpectralClustering.landmark_partition_``,
        which keeps no n × p matrix).
    svd : TruncatedSVD
        The solver's result (residuals, iterations, block size, convergence).
    solver : str
        ``"block-krylov"``.
    kmeans : explorer.KMeans
        The k-means fitted on the embedding's rows.
    backend : {"gpu", "cpu"}
    backend_reason : str
    timings : dict of str to float
        Seconds: ``"landmarks"``, ``"affinity"``, ``"svd"``, ``"kmeans"``, ``"total"``
        (wall clock, the device synchronised at each stage's end).
    """

    labels: object
    n_clusters: int
    landmarks: object
    landmark_method: str
    n_nearest: int
    metric: str
    sigma: float | None
    singular_values: np.ndarray
    vectors: object
    embedding: object
    isolated: object
    affinity: LandmarkAffinity | None
    svd: TruncatedSVD
    solver: str
    kmeans: KMeans
    backend: str
    backend_reason: str
    timings: dict = field(default_factory=dict)

    @property
    def iterations(self) -> int:
        """Krylov blocks of the truncated SVD."""
        return self.svd.iterations


# ------------------------------------------------------------------ the affinity


class LandmarkAffinity:
    """Ẑ = Z D^-1/2, the n × p point-landmark affinity, stored once for products with
    it and its transpose.

    On the GPU (``spmm="csrc"``) one :class:`explorer.kernels.csrc.CsrcMatrix` serves
    both products; ``spmm="cusparse"`` keeps a CSR copy and an explicitly transposed
    CSR copy for cuSPARSE (that paper's baseline); on the CPU a SciPy CSR matrix
    (whose transpose is a free CSC view).

    Parameters
    ----------
    cols : ndarray of int32, shape (n, r)
        Landmark of each entry.
    vals : ndarray of float32, shape (n, r)
        Ẑ's values (row-normalised weights times D^-1/2 of the landmark).
    p : int
    spmm : {"csrc", "cusparse", "scipy"}

    Attributes
    ----------
    trivial : numpy.ndarray of float64, shape (p,) or None
        The right singular vector of σ = 1 whose left vector is constant (on the rows
        that are not isolated): D^1/2 / ‖D^1/2‖, set by :func:`landmark_affinity`.
    """

    trivial = None

    def __init__(self, cols, vals, p: int, spmm: str):
        n, r = cols.shape
        self.shape = (int(n), int(p))
        self.n_nearest = int(r)
        self.spmm = spmm
        if spmm == "csrc":
            from .kernels import csrc

            self.matrix = csrc.from_ell(cols, vals, p)
            self.nbytes = self.matrix.nbytes
            return
        sp = sparse_module(np if spmm == "scipy" else _cupy())
        xp = np if spmm == "scipy" else _cupy()
        indptr = xp.arange(n + 1, dtype=xp.int64 if n * r >= 2**31 else xp.int32) * r
        self.matrix = sp.csr_matrix((vals.reshape(-1), cols.reshape(-1).astype(indptr.dtype),
                                     indptr), shape=self.shape)
        self.transposed = self.matrix.T.tocsr() if spmm == "cusparse" else self.matrix.T
        m = self.matrix
        self.nbytes = int(m.data.nbytes + m.indices.nbytes + m.indptr.nbytes) * (
            2 if spmm == "cusparse" else 1)

    @property
    def xp(self):
        return np if self.spmm == "scipy" else _cupy()

    def matmul(self, Q):
        """``Ẑ Q`` as float32 (n × w) on the affinity's device, for Q of shape (p, w)
        (any float array, host or device)."""
        xp = self.xp
        Q = xp.asarray(Q, dtype=xp.float32)
        if self.spmm != "csrc":
            return xp.ascontiguousarray(self.matrix @ Q, dtype=xp.float32)
        from .kernels import csrc

        parts = []
        for start in range(0, Q.shape[1], MAX_WIDTH):
            part = Q[:, start : start + MAX_WIDTH]
            w = part.shape[1]
            parts.append(csrc.spmm(self.matrix, _pad_columns(part, xp))[:, :w])
        return parts[0] if len(parts) == 1 else xp.concatenate(parts, axis=1)

    def rmatmul(self, U):
        """``Ẑᵀ U`` (p × w) as a float64 NumPy array, for U of shape (n, w) float32 on
        the affinity's device (as :meth:`matmul` returns it)."""
        xp = self.xp
        if self.spmm != "csrc":
            return to_numpy(self.transposed @ U).astype(np.float64)
        from .kernels import csrc

        parts = []
        for start in range(0, U.shape[1], MAX_WIDTH):
            part = U[:, start : start + MAX_WIDTH]
            w = part.shape[1]
            parts.append(to_numpy(csrc.spmm_t(self.matrix, _pad_columns(part, xp))[:, :w]))
        return np.concatenate(parts, axis=1).astype(np.float64)


class DeflatedOperator:
    """``A (I − v vᵀ)``: an operator with its unit right singular vector `v` (p,)
    removed, so that a truncated SVD of it gives the singular triplets after v's.

    Landmark clustering removes the trivial pair of Ẑ (σ = 1, a constant left vector)
    this way: LSC's code computes k + 1 vectors and drops the first, which is that pair
    only when σ₁ = 1 is simple; the deflation is right also when several singular
    values are 1 (separate components).
    """

    def __init__(self, op, v):
        self.op = op
        self.v = np.asarray(v, dtype=np.float64)
        self.shape = op.shape

    def matmul(self, Q):
        Q = np.asarray(Q, dtype=np.float64)
        return self.op.matmul(Q - np.outer(self.v, self.v @ Q))

    def rmatmul(self, Y):
        W = self.op.rmatmul(Y)
        return W - np.outer(self.v, self.v @ W)


def _pad_columns(M, xp):
    """`M` (float32) padded with zero columns to the next width the CSRC kernels take."""
    w = M.shape[1]
    width = _next_pow2(w)
    if width == w and M.flags.c_contiguous:
        return M
    out = xp.zeros((M.shape[0], width), dtype=xp.float32)
    out[:, :w] = M
    return out


def _next_pow2(v: int) -> int:
    return 1 << max(0, (int(v) - 1).bit_length())


def _cupy():
    import cupy

    return cupy


def _sync(xp) -> None:
    if xp is not np:
        xp.cuda.Device().synchronize()


def choose_landmarks(X, n_landmarks: int, method: str, metric: str, rng):
    """The p landmarks of `X` (n × d float32, NumPy or CuPy), as a p × d float32 array
    on X's device; unit rows (zero rows stay 0) for the cosine.

    ``"kmeans"`` (default of :func:`landmark_partition`, LSC-K): k-means centres
    (:data:`LANDMARK_KMEANS_ITER` Lloyd iterations, one start) of min(n,
    :data:`KMEANS_SAMPLE_PER_LANDMARK` · p) sampled rows (unit rows for the cosine).
    ``"random"`` (LSC-R): p distinct sampled rows. Cai & Chen found the k-means
    landmarks more accurate for the same p; they cost a k-means with p centres on a
    sample, whatever n.
    """
    xp = array_module(X)
    n = X.shape[0]
    if method == "random":
        rows = np.sort(rng.choice(n, n_landmarks, replace=False))
        C = X[xp.asarray(rows)]
    else:
        m = min(n, KMEANS_SAMPLE_PER_LANDMARK * n_landmarks)
        rows = np.sort(rng.choice(n, m, replace=False))
        S = X[xp.asarray(rows)]
        if metric == "cosine":
            S = _unit_rows(S, xp)
        km = KMeans(n_landmarks, init="k-means++", n_init=1, max_iter=LANDMARK_KMEANS_ITER,
                    random_state=rng).fit(S)
        C = xp.asarray(km.cluster_centers_, dtype=xp.float32)
    if metric == "cosine":
        C = _unit_rows(C, xp)
    return xp.ascontiguousarray(C, dtype=xp.float32)


def _unit_rows(M, xp):
    norms = xp.sqrt((M.astype(xp.float64) ** 2).sum(axis=1))
    norms[norms == 0] = 1.0
    return (M / norms[:, None]).astype(xp.float32)


def nearest_landmarks(X, C, n_nearest: int, metric: str):
    """The `n_nearest` nearest landmarks of every row of `X`.

    Parameters
    ----------
    X : ndarray of float32, shape (n, d), NumPy or CuPy
    C : ndarray of float32, shape (p, d), on X's device (unit rows for the cosine)
    n_nearest : int
        r, 1 <= r <= min(p, :data:`MAX_NEAREST`).
    metric : {"gaussian", "cosine"}

    Returns
    -------
    cols : ndarray of int32, shape (n, r)
        Landmarks by ascending squared distance (gaussian) or descending cosine; ties
        go to the lower landmark on the GPU, arbitrary on the CPU.
    values : ndarray of float32, shape (n, r)
        Squared distances ``‖x‖² + ‖c‖² − 2 x·c`` (float32, clipped at 0), or cosines
        ``x·c / ‖x‖`` (0 for a zero row).

    Notes
    -----
    The products come from one GEMM per block of rows (:data:`PRODUCT_BLOCK_BYTES`);
    the selection is a kernel on the GPU (``csrc_nearest.cu``: each warp keeps its r
    best per lane, then merges) and ``argpartition`` on the CPU. For the cosine the
    order of ``x·c`` over c is that of the cosine, so X is not normalised (no n × d
    copy).
    """
    xp = array_module(X)
    n, _ = X.shape
    p = C.shape[0]
    gpu = xp is not np
    cols = xp.empty((n, n_nearest), dtype=xp.int32)
    vals = xp.empty((n, n_nearest), dtype=xp.float32)
    Ct = xp.ascontiguousarray(C.T)
    c_sq = (C * C).sum(axis=1, dtype=xp.float32)
    step = max(1, min(n, PRODUCT_BLOCK_BYTES // (4 * p)))
    G = xp.empty((min(step, n), p), dtype=xp.float32)
    for start in range(0, n, step):
        stop = min(n, start + step)
        Xb = X[start:stop]
        Gb = G[: stop - start]
        xp.matmul(Xb, Ct, out=Gb)
        x_sq = (Xb * Xb).sum(axis=1, dtype=xp.float32)
        if metric == "gaussian":
            a, b, scale = x_sq, c_sq, -2.0
        else:
            a, b, scale = xp.zeros_like(x_sq), xp.zeros_like(c_sq), -1.0
        out_c, out_v = cols[start:stop], vals[start:stop]
        if gpu:
            from .kernels import csrc

            csrc.nearest_landmarks(Gb, a, b, scale, n_nearest, idx=out_c, key=out_v)
        else:
            keys = a[:, None] + b[None, :] + np.float32(scale) * Gb
            part = np.argpartition(keys, n_nearest - 1, axis=1)[:, :n_nearest]
            pk = np.take_along_axis(keys, part, axis=1)
            order = np.lexsort((part, pk), axis=1)
            out_c[...] = np.take_along_axis(part, order, axis=1)
            out_v[...] = np.take_along_axis(pk, order, axis=1)
        if metric == "gaussian":
            xp.maximum(out_v, 0.0, out=out_v)
        else:
            norms = xp.sqrt(x_sq)
            norms[norms == 0] = xp.inf  # a zero row: cosine 0 with every landmark
            out_v[...] = -out_v / norms[:, None]
    missing = cols < 0  # fewer than r comparable landmarks (NaN products)
    if bool(missing.any()):
        cols[missing] = 0
        vals[missing] = xp.inf if metric == "gaussian" else 0.0
    return cols, vals


def landmark_affinity(cols, values, p: int, metric: str, sigma, spmm: str):
    """Ẑ from the nearest landmarks (LSC's normalisation).

    Weights: gaussian ``exp(−‖x − c‖² / (2σ²))``, or the cosine clipped at 0; each row
    is divided by its sum (Z, rows summing to 1); then each column by the square root
    of its sum D (the landmark's degree): Ẑ = Z D^-1/2. A gaussian row is computed
    relative to its nearest landmark (a factor that the row normalisation cancels), so
    no row underflows to zeros whatever σ.

    Parameters
    ----------
    cols, values : from :func:`nearest_landmarks`
    p : int
    metric : {"gaussian", "cosine"}
    sigma : float or "auto"
        ``"auto"``: the mean distance from a point to its r nearest landmarks (LSC's
        rule).
    spmm : {"csrc", "cusparse", "scipy"}

    Returns
    -------
    affinity : LandmarkAffinity
    isolated : ndarray of bool, shape (n,)
        Rows whose weights are all 0 (cosines <= 0, or a zero row).
    sigma : float or None
    """
    xp = array_module(values)
    if metric == "gaussian":
        finite = xp.isfinite(values)
        if sigma == "auto":
            dist = xp.sqrt(xp.where(finite, values, 0.0).astype(xp.float64))
            count = int(xp.count_nonzero(finite))
            sigma = float(dist.sum()) / max(count, 1)
            if not sigma > 0:
                sigma = 1.0  # every point on a landmark: all weights equal anyway
        sigma = float(sigma)
        shift = values[:, :1]
        W = xp.exp(-(values - shift) / np.float32(2.0 * sigma * sigma))
        W = xp.where(finite, W, 0.0).astype(xp.float32)
        _warn_narrow_sigma(W, values, finite, sigma, xp)
    else:
        sigma = None
        W = xp.maximum(values, 0.0).astype(xp.float32)
    rowsum = W.sum(axis=1, dtype=xp.float64)
    isolated = rowsum <= 0
    W = (W / xp.where(isolated, 1.0, rowsum)[:, None]).astype(xp.float32)
    degree = xp.bincount(cols.reshape(-1), weights=W.reshape(-1).astype(xp.float64),
                         minlength=p)
    inv_sqrt = xp.where(degree > 0, 1.0 / xp.sqrt(xp.where(degree > 0, degree, 1.0)), 0.0)
    Zhat = (W * inv_sqrt[cols]).astype(xp.float32)
    affinity = LandmarkAffinity(cols, Zhat, p, spmm)
    root = np.sqrt(to_numpy(degree))
    affinity.trivial = root / max(float(np.linalg.norm(root)), np.finfo(np.float64).tiny)
    return affinity, isolated, sigma


#: A point whose other landmarks weigh less than this share of its nearest one is
#: joined to that one alone.
LONE_WEIGHT = 1e-6
#: ... and when more than this share of the points are, σ is too narrow to tell the
#: landmarks apart (the landmark graph falls into pieces, the clusters are arbitrary).
LONE_SHARE = 0.5


def _warn_narrow_sigma(W, values, finite, sigma, xp) -> None:
    """Warn when σ is so small that most points keep only their nearest landmark."""
    if W.shape[1] < 2:
        return
    lone = xp.all(W[:, 1:] < LONE_WEIGHT, axis=1)
    share = float(xp.count_nonzero(lone)) / max(1, W.shape[0])
    if share <= LONE_SHARE:
        return
    dist = xp.sqrt(xp.where(finite, values, 0.0).astype(xp.float64))
    typical = float(dist.sum()) / max(int(xp.count_nonzero(finite)), 1)
    warnings.warn(
        f"sigma={sigma:.3g} is far below the distances to the landmarks (a point's mean "
        f"distance to its nearest landmarks is {typical:.3g}): {100 * share:.0f} % of the "
        "points are joined to their nearest landmark alone, so the landmark graph falls "
        "into pieces and the clusters are arbitrary; use sigma='auto' or a sigma near "
        f"{typical:.3g}", UserWarning, stacklevel=4)


# ------------------------------------------------------------------ the truncated SVD


def block_krylov_svd(op, k: int, *, block_size: int, tol: float = SVD_TOL,
                     max_iter: int = SVD_MAX_ITER, random_state=None) -> TruncatedSVD:
    """The k leading singular triplets of an n × p operator (p small) by block Krylov
    iteration on AᵀA with Rayleigh-Ritz.

    The basis grows by one block per iteration: the newest block times AᵀA (one
    product with A, one with Aᵀ, each `block_size` vectors at once), orthogonalised
    against all earlier blocks twice (classical Gram-Schmidt in float64, cheap in p
    dimensions: the one-sided full re-orthogonalisation of that paper's block
    Golub-Kahan-Lanczos, whose right Krylov space this is). Rayleigh-Ritz on the
    stored images gives Ritz pairs with exact residuals ``‖AᵀA v − θ v‖`` at no
    further product; it stops when the k leading residuals are at most
    ``tol · θ₁`` or the basis spans all p columns. Then U = A V Σ⁻¹ (one product).

    Parameters
    ----------
    op : object
        ``op.shape == (n, p)``; ``op.matmul(Q)`` (Q: p × w float64 NumPy) returns
        ``A Q`` (n × w, on any device) and ``op.rmatmul(Y)`` returns ``Aᵀ Y`` as a
        float64 NumPy array (e.g. :class:`LandmarkAffinity`).
    k : int
        1 <= k <= p.
    block_size : int
        Vectors per product, >= 1.
    tol : float
    max_iter : int
        Largest number of blocks.
    random_state : int, RandomState or None
        Seeds the starting block.

    Returns
    -------
    TruncatedSVD
    """
    n, p = op.shape
    rng = check_random_state(random_state)
    b = min(block_size, p)
    Q = _orthonormal_complement(rng.standard_normal((p, b)), np.zeros((p, 0)), rng)
    basis, images = [], []
    for it in range(1, max_iter + 1):
        MQ = op.rmatmul(op.matmul(Q))
        basis.append(Q)
        images.append(MQ)
        B, MB = np.hstack(basis), np.hstack(images)
        T = B.T @ MB
        theta, Y = np.linalg.eigh((T + T.T) / 2)
        theta, Y = theta[::-1], Y[:, ::-1]
        m = min(k, B.shape[1])
        V = B @ Y[:, :m]
        residuals = np.linalg.norm(MB @ Y[:, :m] - V * theta[:m], axis=0)
        scale = max(float(theta[0]), np.finfo(np.float64).tiny)
        spans = B.shape[1] >= p
        converged = spans or (m == k and bool(np.all(residuals <= tol * scale)))
        if converged or it == max_iter:
            break
        width = min(b, p - B.shape[1])
        Q = _orthonormal_complement(MQ[:, :width], B, rng)
    sigma = np.sqrt(np.maximum(theta[:m], 0.0))
    inv = np.where(sigma > 0, 1.0 / np.where(sigma > 0, sigma, 1.0), 0.0)
    left = op.matmul(V * inv[None, :])
    return TruncatedSVD(singular_values=sigma, left=left, right=V, residuals=residuals,
                        iterations=it, block_size=b, converged=converged)


def _orthonormal_complement(W, B, rng):
    """Orthonormal columns spanning `W` projected off the orthonormal `B` (twice), with
    (nearly) dependent columns replaced by random directions off `B`."""
    p = W.shape[0]
    W = W - B @ (B.T @ W)
    W = W - B @ (B.T @ W)
    norms = np.linalg.norm(W, axis=0)
    weak = norms <= 1e-10 * max(float(norms.max(initial=0.0)), 1.0)
    if weak.any():
        R = rng.standard_normal((p, int(weak.sum())))
        W[:, weak] = R - B @ (B.T @ R)
    Q, R = np.linalg.qr(W)
    Q = Q - B @ (B.T @ Q)  # second pass against B, then within the block
    Q, _ = np.linalg.qr(Q)
    return Q


# ------------------------------------------------------------------ memory


def estimate_bytes(n: int, d: int, p: int, r: int, k: int, width: int, *, gpu: bool,
                   copy_data: bool) -> float:
    """Peak bytes of a :func:`landmark_partition`, estimated before it starts.

    Counts the data when it must be copied (n·d float32), one block of products
    (:data:`PRODUCT_BLOCK_BYTES`), the n × r selections and weights (about 40 bytes per
    entry at the peak of the CSRC assembly: int64 sort keys and order, the arrays),
    the Krylov block (n × width float32, twice) and the n × k vectors, embedding and
    k-means temporaries (about 5 copies).
    """
    entries = float(n) * r
    per_entry = 40.0 if gpu else 32.0
    total = entries * per_entry + min(PRODUCT_BLOCK_BYTES, 4.0 * n * p)
    total += 4.0 * n * (2 * width + 5 * k)
    if copy_data:
        total += 4.0 * n * d
    return total


def _check_memory(nbytes: float, backend, n: int) -> None:
    what = f"landmark spectral clustering of n={n} points"
    advice = "use fewer points, fewer landmarks per point (n_nearest) or fewer clusters"
    if not backend.is_gpu:
        memory.check_allocation(nbytes, what, advice)
        return
    free = memory.free_device_bytes()
    if nbytes <= memory.GPU_MEMORY_FRACTION * free:
        return
    raise memory.MemoryEstimateError(
        f"{what} needs about {memory.format_bytes(nbytes)} of GPU memory, but only "
        f"{memory.format_bytes(free)} is free; {advice}",
        device="GPU", nnz=0.0, need_bytes=nbytes, available_bytes=free,
    )


# ------------------------------------------------------------------ the pipeline


def landmark_partition(
    X,
    n_clusters,
    *,
    n_landmarks=1000,
    n_nearest=5,
    metric="gaussian",
    sigma="auto",
    landmark_method="kmeans",
    backend="auto",
    random_state=None,
    spmm="auto",
    block_size=None,
    svd_tol=SVD_TOL,
    svd_max_iter=SVD_MAX_ITER,
    n_init=10,
    kmeans_tol=1e-4,
    kmeans_max_iter=300,
) -> LandmarkPartition:
    """Landmark spectral clustering (LSC) of the rows of `X`, with a CSRC truncated SVD.

    1. p landmarks (:func:`choose_landmarks`: k-means centres of a sample by default).
    2. Z, n × p: each point's `n_nearest` (r) nearest landmarks, gaussian or cosine
       weights, rows summing to 1; Ẑ = Z D^-1/2 with D the landmarks' degrees
       (:func:`nearest_landmarks`, :func:`landmark_affinity`).
    3. The k leading left singular vectors of Ẑ (:func:`block_krylov_svd`; products on
       the GPU by the CSRC kernels, one stored copy for Ẑ and Ẑᵀ).
    4. k-means on their rows scaled to unit length.

    Parameters
    ----------
    X : array of shape (n, d), NumPy or CuPy
        Points (float64 is converted to float32; distance weights centre a large
        offset first, as the exact pipeline does).
    n_clusters : int or "auto"
        k, 1 <= k <= n_landmarks. ``"auto"``: min(20, p) singular values are computed
        and :func:`~explorer.embedding.eigengap_k` reads k from 1 − σ².
    n_landmarks : int, default 1000
        p, n_clusters <= p <= n, and p >= n_nearest.
    n_nearest : int, default 5
        r, 1 <= r <= min(p, 32). r = 1 makes each landmark's points a separate
        component (all singular values 1); LSC uses 5.
    metric : {"gaussian", "cosine"}, default "gaussian"
        The weights: exp(−‖x − c‖² / (2σ²)) over the r nearest landmarks by distance,
        or the cosine (clipped at 0) over the r most similar landmarks.
    sigma : float > 0 or "auto", default "auto"
        Gaussian width; ``"auto"``: the mean distance from a point to its r nearest
        landmarks (LSC's rule). Ignored by the cosine.
    landmark_method : {"kmeans", "random"}, default "kmeans"
        See :func:`choose_landmarks`.
    backend : {"auto", "gpu", "cpu"}, default "auto"
    random_state : int, numpy.random.RandomState or None
        One stream for the landmarks, the SVD's start and k-means.
    spmm : {"auto", "csrc", "cusparse"}, default "auto"
        GPU products with Ẑ: ``"csrc"`` (``"auto"``) or ``"cusparse"`` (CSR and an
        explicit transposed CSR, that paper's baseline). The CPU uses SciPy CSR.
    block_size : int, optional
        Vectors per product (1 to 64); default: the next power of two >= k + 4, at
        least 8 (the widths the CSRC kernels are compiled for).
    svd_tol : float, default 1e-4
        Residual tolerance ``‖ẐᵀẐ v − σ² v‖ <= svd_tol · σ₁²``.
    svd_max_iter : int, default 100
        Largest number of Krylov blocks; a warning says when it stopped short.
    n_init, kmeans_tol, kmeans_max_iter
        :class:`explorer.KMeans`'s `n_init`, `tol` and `max_iter`.

    Returns
    -------
    LandmarkPartition

    Raises
    ------
    ValueError, TypeError
        An invalid parameter (the message names it, its value and what is allowed).
    explorer.memory.MemoryEstimateError
        When the estimate (:func:`estimate_bytes`) exceeds the free memory.

    Notes
    -----
    **What it approximates.** The exact pipeline clusters the ε-graph S of all pairs.
    This one clusters the landmark graph W = Ẑ Ẑᵀ, w_ij = Σ_l z_il z_jl / d_l: two
    points are similar through the landmarks they share (a bipartite point-landmark
    graph folded onto the points). Every degree of W is 1 (W·1 = Z D⁻¹ Zᵀ 1 = Z 1 = 1),
    so its normalised Laplacian is I − W and the k smallest eigenvectors of that
    Laplacian, which the exact pipeline computes for S, are here the k leading left
    singular vectors of Ẑ, with eigenvalues 1 − σ². W has self-loops and is dense
    where S is sparse; how close the partition comes to the exact one depends on p
    and r, and is measured (benchmarks/csrc.py, docs/architecture.md). Cost: O(n p d)
    for the affinity (a GEMM), O(n r) per product, p-dimensional dense work.

    **Isolated points.** A point whose r weights are all 0 (only with the cosine:
    all r cosines <= 0, or a zero row) has no edge and gets label −1, like an
    isolated vertex of the exact pipeline.
    """
    t_start = time.perf_counter()
    auto = isinstance(n_clusters, str)
    if auto:
        check_choice(n_clusters, "n_clusters", ("auto",))
    else:
        n_clusters = check_int(n_clusters, "n_clusters", low=1)
    check_choice(metric, "metric", METRICS)
    check_choice(landmark_method, "landmark_method", LANDMARK_METHODS)
    check_choice(spmm, "spmm", SPMM_CHOICES)
    if not (isinstance(sigma, str) and sigma == "auto"):
        if isinstance(sigma, str):
            check_choice(sigma, "sigma", ("auto",))
        sigma = check_float(sigma, "sigma", low=0.0, low_inclusive=False)
    check_float(svd_tol, "svd_tol", low=0.0, low_inclusive=False)
    svd_max_iter = check_int(svd_max_iter, "svd_max_iter", low=1)
    check_limit(check_int(n_init, "n_init", low=1), "n_init", N_INIT_LIMIT,
                "each restart runs k-means again")
    check_float(kmeans_tol, "kmeans_tol", low=0.0, high=1.0)
    check_limit(check_int(kmeans_max_iter, "kmeans_max_iter", low=1), "kmeans_max_iter",
                MAX_ITER_LIMIT, "Lloyd's iterations stop long before")
    rng = check_random_state(random_state)
    block_size = check_int(block_size, "block_size", low=1, high=MAX_WIDTH, allow_none=True)
    be = resolve_backend(backend)

    Xv = check_data(X, center=metric != "cosine")
    n, d = Xv.shape
    p = check_int(n_landmarks, "n_landmarks", low=2)
    if p > n:
        raise ValueError(f"n_landmarks={p} is out of range for n_samples={n}; allowed: "
                         f"{2 if auto else n_clusters + 1} <= n_landmarks <= n_samples={n}")
    if not auto and n_clusters > p - 1:
        raise ValueError(f"n_clusters={n_clusters} is out of range: n_landmarks={p} give "
                         f"{p - 1} singular vectors besides the trivial one; allowed: "
                         f"1 <= n_clusters <= {p - 1} (or raise n_landmarks)")
    r = check_int(n_nearest, "n_nearest", low=1)
    if r > min(p, MAX_NEAREST):
        raise ValueError(f"n_nearest={r} is out of range; allowed: 1 <= n_nearest <= "
                         f"min(n_landmarks={p}, {MAX_NEAREST})")
    k_solve = min(auto_k_max(n), p - 1) if auto else n_clusters
    width = block_size or min(MAX_WIDTH, max(8, _next_pow2(k_solve + 4)))
    on_device = array_module(Xv) is not np
    _check_memory(estimate_bytes(n, d, p, r, k_solve, width, gpu=be.is_gpu,
                                 copy_data=on_device != be.is_gpu), be, n)
    Xv = be.xp.asarray(Xv) if be.is_gpu else to_numpy(Xv)
    xp = be.xp
    kind = "scipy" if not be.is_gpu else ("cusparse" if spmm == "cusparse" else "csrc")

    t0 = time.perf_counter()
    C = choose_landmarks(Xv, p, landmark_method, metric, rng)
    _sync(xp)
    t1 = time.perf_counter()
    cols, values = nearest_landmarks(Xv, C, r, metric)
    affinity, isolated, sigma_used = landmark_affinity(cols, values, p, metric, sigma, kind)
    del cols, values
    _sync(xp)
    t2 = time.perf_counter()
    svd = block_krylov_svd(DeflatedOperator(affinity, affinity.trivial), k_solve,
                           block_size=width, tol=svd_tol, max_iter=svd_max_iter,
                           random_state=rng)
    if not svd.converged:
        warnings.warn(
            f"the truncated SVD stopped after svd_max_iter={svd_max_iter} blocks with "
            f"residuals up to {svd.residuals.max():.2e} (svd_tol={svd_tol:g}); raise "
            "svd_max_iter or svd_tol", UserWarning, stacklevel=2)
    singular = np.concatenate([[1.0], svd.singular_values])  # the trivial σ₁ = 1 first
    k = min(eigengap_k(1.0 - singular ** 2), k_solve) if auto else n_clusters
    vectors = svd.left[:, :k]
    _sync(xp)
    t3 = time.perf_counter()

    norms = xp.sqrt((vectors.astype(xp.float64) ** 2).sum(axis=1))
    isolated = isolated | (norms == 0)
    keep = xp.flatnonzero(~isolated)
    n_kept = int(keep.size)
    if n_kept < k:
        raise ValueError(
            f"n_clusters={k} is out of range: only {n_kept} of the n={n} points have a "
            f"positive weight to a landmark; allowed: 1 <= n_clusters <= {n_kept}")
    embedding = xp.full(vectors.shape, xp.nan, dtype=xp.float32)
    embedding[keep] = (vectors[keep] / norms[keep][:, None]).astype(xp.float32)
    km = KMeans(k, n_init=n_init, tol=kmeans_tol, max_iter=kmeans_max_iter,
                random_state=rng).fit(embedding[keep])
    labels = xp.full(n, -1, dtype=xp.int32)
    labels[keep] = km.labels_
    _sync(xp)
    t4 = time.perf_counter()
    return LandmarkPartition(
        labels=labels, n_clusters=int(k), landmarks=C, landmark_method=landmark_method,
        n_nearest=r, metric=metric, sigma=sigma_used,
        singular_values=singular[: k + 1], vectors=vectors, embedding=embedding,
        isolated=isolated, affinity=affinity, svd=svd, solver="block-krylov", kmeans=km,
        backend=be.name, backend_reason=be.reason,
        timings={"landmarks": t1 - t0, "affinity": t2 - t1, "svd": t3 - t2,
                 "kmeans": t4 - t3, "total": t4 - t_start},
    )
