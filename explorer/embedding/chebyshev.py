"""Chebyshev-filtered subspace iteration for the top of a normalised adjacency spectrum.

:func:`chebyshev_subspace` computes the k largest eigenpairs of A = D^-1/2 S D^-1/2
(the k smallest of L_sym = I - A) with one code path for NumPy/SciPy and CuPy: only
the block product with A and one fused vector update differ by backend.

Algorithm
---------
A block Y of b >= k vectors (random, or given starting vectors first). Each outer
iteration:

1. **Rayleigh-Ritz from one small matrix.** With AY, the float64 Gram matrix
   M = [Y, AY]^T [Y, AY] (2b × 2b) holds G = Y^T Y, H = Y^T A Y and K = (AY)^T (AY).
   On the host, G is orthonormalised within the span (scaled SVQB; directions that are
   rounding noise are dropped and refilled with random vectors), H projected and
   diagonalised: Ritz values θ_1 >= ... >= θ_b, coefficients Q, and each pair's
   residual sqrt(q^T K q - θ²). One transfer of 4b² numbers, so **one host
   synchronisation per outer iteration**; below :data:`ESTIMATE_FLOOR`, where that
   subtraction loses its digits, the residuals are measured directly.
2. **Stop** when the k wanted residual norms are all <= the target of
   :func:`residual_target` (`tol`, or less after a small gap).
3. **Filter.** Y <- P(A) (Y Q) with P(x) = T_p(t(x)) / T_p(t(1)), the degree-p
   Chebyshev polynomial of the interval [-1, cut] (t maps it onto [-1, 1]) scaled to
   1 at the top of the spectrum; cut = θ_b. P is bounded by 1 on [-1, 1], so the wanted
   directions keep their size and nothing overflows in float32. Each of the p steps is
   one product and one fused update ``Y_{j+1} = α A Y_j + β Y_j + γ Y_{j-1}``.
4. **Degree.** The largest p <= `degree` with T_p(t(1)) <= 100 (:func:`filter_degree`),
   which keeps the filtered block well conditioned for step 1 and checks progress
   often enough not to overshoot `tol`; the last filter is shortened to the degree the
   previous one's decay says will reach the target.

A final Rayleigh-Ritz in float64 (with A in float64) returns the eigenvalues, the
orthonormal vectors and their residual norms.

Why a filtered block method: the wanted eigenvalue of a clustered graph is 1 with
multiplicity c (c components), which single-vector Lanczos misses copies of, and the
host is consulted once per filter of up to `degree` products instead of several times
per iteration as in LOBPCG. Chebyshev acceleration converges at the sqrt(gap) rate of
Krylov methods per product. Converged vectors are not locked: the wanted vectors share
the eigenvalue 1 and converge together, and on the GPU a row-major product with b <= 8
float32 columns costs the same whatever b is.

Tolerance for clustering
------------------------
`tol` bounds the residual norm ||A v - θ v|| of each wanted unit Ritz vector (||A|| <=
1, so it is also relative). What k-means needs is the angle between the computed span
and the eigenspace, which Davis-Kahan bounds by residual / gap. :data:`DEFAULT_TOL` =
1e-4 keeps that angle below 3° for gaps down to 2e-3 (a residual of 1e-3 does not
recover the clusters of the paper's own Syn1M graph). Where the gap after the k-th
eigenvalue is much smaller, the loop also asks for :data:`GAP_ANGLE` times the gap,
except where k cuts a repeated eigenvalue or a bunch of close ones
(:data:`DEGENERATE_GAP`, :data:`BUNCHED_GAP`), whose split is arbitrary.

Precision and the GPU product
-----------------------------
On the GPU the iteration runs in float32 (`dtype`): the product is bound by memory
traffic, and float32 halves its bytes. It is safe because P is bounded by 1, the Ritz
values and residual estimates come from float64 Gram matrices, and the final step is
float64; tolerances below :data:`FLOAT32_MIN_TOL` run in float64. ``layout="row"``
keeps the block row-major so that each nonzero gathers one contiguous row of b values;
blocks of 8-32 columns go through the warp-per-row kernel of ``kernels/spmm.py``, other
widths and ``"col"`` through cuSPARSE's generic SpMM.

The measurements behind these choices are in benchmarks/README.md ("Chebyshev-filtered
subspace iteration").
"""

from __future__ import annotations

import functools
import math

import numpy as np

from .._backend import array_module, column_sums, sparse_module, to_numpy
from .._csr import cast_values, matmul, row_slabs
from .._validation import check_choice, check_float, check_int, check_random_state
from .start import RowNormals

__all__ = [
    "DEFAULT_TOL",
    "ChebyshevBlock",
    "chebyshev_iterate",
    "chebyshev_subspace",
    "default_block",
    "filter_degree",
    "gram_rayleigh_ritz",
    "residual_target",
    "working_dtype",
]

#: Default stopping tolerance on the residual norm ||A v - θ v|| of each wanted unit
#: Ritz vector (module docstring, "Tolerance for clustering").
DEFAULT_TOL = 1e-4

#: Default budget of block products with A (filter steps and Rayleigh-Ritz products).
DEFAULT_MAX_ITER = 10_000

#: Default largest filter degree (block products between two convergence checks).
#: Small gaps need long filters: T_p grows only once p·acosh(t) exceeds ~1.
DEFAULT_DEGREE = 128

#: The spectrum of A = D^-1/2 S D^-1/2 lies in [-1, 1] for any non-negative symmetric S.
SPECTRUM = (-1.0, 1.0)

#: The largest factor by which one filter may amplify the top of the spectrum over
#: the cut, T_p(t(1)): it bounds the condition number of the filtered block (which the
#: Rayleigh-Ritz step must resolve in the working precision) and the progress between
#: two checks (hence the overshoot past `tol`).
_GROWTH = 1e2

#: Relative size (squared singular value) below which a direction of the filtered
#: block is rounding noise and is dropped (and replaced by a fresh random vector).
_DROP = {np.dtype(np.float32): 1e-10, np.dtype(np.float64): 1e-13}

#: Below this, residual norms estimated from the Gram matrices (q^T K q - θ², a
#: difference of numbers near 1 in float64) lose their digits; for a `tol` below it the
#: loop measures the residuals of the Ritz vectors directly once the estimates get
#: there (two n×k products and a norm on the device, and one more host sync).
ESTIMATE_FLOOR = 1e-6

#: float32 vectors resolve residual norms down to about 2e-7 (their rounding, and A's
#: when A is float64); ``dtype=None`` takes float64 on the GPU for tighter tolerances.
FLOAT32_MIN_TOL = 1e-6

#: Residuals the iteration can still resolve in each working precision, the floor of
#: the gap-aware target (:func:`residual_target`).
FLOAT32_RESOLUTION = 2e-7
FLOAT64_RESOLUTION = 1e-10

#: The sine of the angle between the computed span and the eigenspace that the
#: stopping rule aims for when the gap after the k-th eigenvalue is small (3°).
GAP_ANGLE = 0.05

#: Gaps λ_k - λ_{k+1} at or below this count as a repeated eigenvalue, for which no
#: angle is defined. Judged from the Ritz values only as far as their residuals allow
#: (:func:`residual_target`): an unconverged block can show any gap as small.
DEGENERATE_GAP = 1e-6

#: A gap up to this fraction of the (k+1)-th Laplacian eigenvalue means that k cuts
#: through a bunch of close eigenvalues (judged like :data:`DEGENERATE_GAP`, on the
#: largest gap the Ritz values and the k-th residual allow), and the gap-aware target
#: is not applied: the split inside the bunch is arbitrary, so resolving it buys no
#: clustering and costs many times the products. The gaps the target is for are those
#: after well separated clusters, about as large as the next eigenvalue itself.
BUNCHED_GAP = 0.1

LAYOUTS = ("row", "col")


def chebyshev_subspace(
    A,
    k,
    *,
    block=None,
    degree=None,
    tol=DEFAULT_TOL,
    max_iter=None,
    random_state=None,
    v0=None,
    dtype=None,
    layout="row",
    callback=None,
    rows=None,
):
    """The k largest eigenpairs of a normalised adjacency matrix by Chebyshev-filtered
    subspace iteration.

    Parameters
    ----------
    A : scipy.sparse or cupyx.scipy.sparse matrix of shape (n, n)
        Symmetric, with its spectrum in [-1, 1] (true of every D^-1/2 S D^-1/2 with
        S >= 0 symmetric). float32 or float64; a CuPy matrix keeps the work on its GPU.
    k : int
        Number of eigenpairs, 1 <= k < n.
    block : int, optional
        Vectors in the iterated block, k <= block <= n; default
        ``max(8, k + max(4, k // 2))`` (capped at n). Extra vectors widen the gap the
        filter works on; on the GPU a row of 8 float32 values is one 32-byte sector, so
        blocks up to 8 cost the same per product.
    degree : int, optional
        Largest degree of one Chebyshev filter (block products with A between two
        convergence checks), >= 1; default :data:`DEFAULT_DEGREE`.
    tol : float, default :data:`DEFAULT_TOL`
        Stop when every one of the k wanted Ritz pairs has ``||A v - θ v|| <= tol``
        (v of unit length; ||A|| <= 1, so this is also relative).
    max_iter : int, optional
        Budget of block products with A, >= 1; default :data:`DEFAULT_MAX_ITER`.
    random_state : int, numpy.random.RandomState or None
        Seeds the random starting block (drawn on A's device).
    v0 : array of shape (n,) or (n, j), j <= block, optional
        Starting vectors (NumPy or CuPy), placed first in the block; the rest is
        random. An exact eigenvector is recognised at the first check (alone it saves
        few products: the other wanted vectors set the pace); a solution for a nearby
        graph is a good start.
    dtype : {None, "float32", "float64"}
        Working precision of the iteration; default float32 on the GPU (float64 when
        `tol` < :data:`FLOAT32_MIN_TOL`) and float64 on the CPU. The final
        Rayleigh-Ritz step and the residuals are float64 always.
    layout : {"row", "col"}, default "row"
        GPU only: storage order of the block handed to cuSPARSE SpMM (module
        docstring, "Precision and the GPU product"); the CPU is always row-major.
    callback : callable, optional
        Called once per outer iteration (at each convergence check) as
        ``callback(products, ritz_values, residual_norms)``: block products so far,
        all Ritz values (NumPy, descending) and the residual norms of the wanted
        Ritz pairs (NumPy; estimated from the Gram matrices, or measured near `tol`).
    rows : int array of shape (n,), optional
        The original position of each row of `A` when `A` is a permuted graph's: the
        random vectors (the start and every top-up) are drawn in that order
        (:class:`explorer.embedding.start.RowNormals`), so the solve of P A Pᵀ starts
        from P times the start of A's.

    Returns
    -------
    eigenvalues : numpy.ndarray of shape (k,)
        The k largest eigenvalues μ of A, descending.
    V : ndarray of shape (n, k), float64
        Orthonormal eigenvectors, column i for ``eigenvalues[i]``; NumPy or CuPy like A.
    iterations : int
        Block products with A in the iteration (the final float64 check adds one).
    residual_norms : numpy.ndarray of shape (k,)
        ``||A v - μ v||`` of each column, recomputed in float64. Not converging
        within `max_iter` raises nothing: compare these with `tol`.

    Raises
    ------
    TypeError
        If `A` is not a SciPy or CuPy sparse matrix of dtype float32 or float64.
    ValueError
        If `A` is not square or an argument is out of range (`tol` below
        :data:`FLOAT32_MIN_TOL` with ``dtype="float32"`` included).

    Notes
    -----
    The algorithm, the measurements that chose it and its defaults, and what `tol`
    means for a clustering are in the module docstring. `A` is used as given: its
    symmetry and spectrum are not checked (:func:`explorer.embedding.spectral_embedding`
    validates the similarity matrix it builds A from).
    """
    xp = array_module(A)
    sp = sparse_module(xp)
    if not sp.issparse(A):
        raise TypeError(
            "A must be a scipy.sparse or cupyx.scipy.sparse matrix; "
            f"got {type(A).__module__}.{type(A).__name__}"
        )
    if len(A.shape) != 2 or A.shape[0] != A.shape[1] or A.shape[0] < 2:
        raise ValueError(f"A must be a square n×n matrix with n >= 2; got shape {A.shape}")
    if A.dtype not in (np.float32, np.float64):
        raise TypeError(f"A must have dtype float32 or float64; got {A.dtype}")
    n = A.shape[0]
    k = check_int(k, "k", low=1, high=n - 1)
    block = check_int(block, "block", low=k, high=n, allow_none=True)
    if block is None:
        block = default_block(k, n)
    degree = check_int(degree, "degree", low=1, allow_none=True) or DEFAULT_DEGREE
    tol = check_float(tol, "tol", low=0.0, low_inclusive=False)
    max_iter = check_int(max_iter, "max_iter", low=1, allow_none=True) or DEFAULT_MAX_ITER
    check_choice(layout, "layout", LAYOUTS)
    work = working_dtype(dtype, tol, xp)
    rng = check_random_state(random_state)

    ops = ChebyshevBlock(A.tocsr(), xp, work, layout, rng.randint(2**31 - 1), rows=rows)
    if v0 is not None:
        v0 = _check_v0(v0, n, block, xp)
    return chebyshev_iterate(ops, k, block, degree, tol, max_iter, v0=v0, callback=callback)


def working_dtype(dtype, tol, xp):
    """The working precision of an iteration: `dtype` checked against `tol`, or (None)
    float32 on the GPU for tol >= :data:`FLOAT32_MIN_TOL` and float64 otherwise
    (:func:`chebyshev_subspace`, `dtype`).

    Raises
    ------
    ValueError
        An unknown `dtype`, or float32 with a `tol` below what it resolves.
    """
    if dtype is None:
        return np.dtype(np.float32 if xp is not np and tol >= FLOAT32_MIN_TOL else np.float64)
    try:
        work = np.dtype(dtype)
    except TypeError:
        work = None
    if work not in (np.float32, np.float64):
        raise ValueError(f"dtype={dtype!r} is not allowed; use None, 'float32' or 'float64'")
    if work == np.float32 and tol < FLOAT32_MIN_TOL:
        raise ValueError(
            f"tol={tol:g} is below what dtype='float32' resolves (about 2e-7); use "
            f"tol >= {FLOAT32_MIN_TOL:g} or dtype='float64'"
        )
    return work


def chebyshev_iterate(ops, k, block, degree, tol, max_iter, *, v0=None, callback=None):
    """The iteration of :func:`chebyshev_subspace` on the array work `ops`, arguments
    checked.

    Parameters
    ----------
    ops : ChebyshevBlock
        The products, Gram matrices, filters and block updates of one solve: the whole
        matrix in one process, or one rank's rows of it
        (:class:`explorer.distributed._exact.HaloBlock`, whose products exchange halo
        rows and whose Gram matrices and norms are all-reduced). Every host-side
        decision is taken on ``ops.gram``'s reduced matrix, so ranks that receive the
        same reduced bits take the same steps.
    k, block, degree, tol, max_iter
        As :func:`chebyshev_subspace` (checked there): 1 <= k <= block <= ``ops.n``.
    v0 : array of shape (rows, j), optional
        Starting vectors for the rows `ops` holds (checked), placed first in the block.
    callback : callable, optional
        As :func:`chebyshev_subspace`.

    Returns
    -------
    eigenvalues, V, iterations, residual_norms
        As :func:`chebyshev_subspace`; V holds the rows `ops` holds.
    """
    work = ops.work
    Y = ops.random(ops.n, block)
    if v0 is not None:
        Y[:, : v0.shape[1]] = v0
    AY = ops.product(Y)
    products, p, last = 1, 0, math.inf
    floor = FLOAT32_RESOLUTION if work == np.float32 else FLOAT64_RESOLUTION
    while True:
        theta, Q, res = gram_rayleigh_ritz(to_numpy(ops.gram(Y, AY)), block, k, _DROP[work])
        target = residual_target(tol, theta, k, floor, res)
        if target < ESTIMATE_FLOOR and res.shape[0] == k and float(res.max()) <= ESTIMATE_FLOOR:
            res = ops.residuals(Y, AY, Q[:, :k], theta[:k])
            target = residual_target(tol, theta, k, floor, res)
        if callback is not None:
            callback(products, theta, res)
        worst = float(res.max()) if res.shape[0] == k else math.inf
        if worst <= target or products + 2 > max_iter:  # a filter needs 1 + 1 products
            break
        cut = _cut(float(theta[-1]))
        p = min(filter_degree(cut, degree, _GROWTH), _steps_to(target, worst, last, p))
        p = max(1, min(p, max_iter - products - 1))  # >= 1: see the check above
        Y = ops.filter(ops.rotate(Y, Q, block), p, cut)
        AY = ops.product(Y)
        products += p + 1
        last = worst

    mu, V, residuals = ops.final(ops.rotate(Y, Q, Q.shape[1]), k)
    return mu, V, products, residuals


def default_block(k: int, n: int) -> int:
    """Vectors in the iterated block when `block` is not given.

    Parameters
    ----------
    k : int
        Eigenpairs wanted.
    n : int
        Order of A.

    Returns
    -------
    int
        ``min(n, max(8, k + max(4, k // 2)))``.

    Notes
    -----
    Why the extra vectors, and why 8: :func:`chebyshev_subspace`, `block`.
    """
    return min(n, max(8, k + max(4, k // 2)))


def _check_v0(v0, n, block, xp):
    v0 = xp.asarray(v0)
    if v0.ndim == 1:
        v0 = v0[:, None]
    if v0.ndim != 2 or v0.shape[0] != n or not 1 <= v0.shape[1] <= block:
        raise ValueError(f"v0 must have shape (n,) or (n, j) with n={n}, 1 <= j <= block={block}; "
                         f"got {tuple(v0.shape)}")
    if not bool(xp.isfinite(v0).all()):
        raise ValueError("v0 contains non-finite values (NaN or inf)")
    return v0


def _cut(smallest_ritz_value):
    """Upper end of the damped interval [low, cut]: the smallest Ritz value of the block
    (every direction the block holds is amplified), kept strictly inside the spectrum's
    bounds so that the interval has a length and the top lies at or above it."""
    low, high = SPECTRUM
    return min(max(smallest_ritz_value, low + 1e-3 * (high - low)), high)


def filter_degree(cut, largest, growth):
    """The degree of the next Chebyshev filter.

    Parameters
    ----------
    cut : float
        Upper end of the damped interval [-1, cut].
    largest : int
        Largest degree allowed (`degree` of :func:`chebyshev_subspace`).
    growth : float
        Largest amplification of the top of the spectrum over the cut.

    Returns
    -------
    int
        The largest p in [1, `largest`] with T_p(t0) <= `growth`, t0 the image of the
        top of the spectrum under the map of [-1, cut] onto [-1, 1]; `largest` when
        the cut is at the top.

    Notes
    -----
    Step 4 of the module docstring: early on (cut far below 1) a few steps, near
    convergence (cut within ~1e-3 of 1) the cap `largest`.
    """
    low, high = SPECTRUM
    t0 = (2.0 * high - cut - low) / (cut - low)
    if t0 <= 1.0:
        return largest
    return max(1, min(largest, math.floor(math.acosh(growth) / math.acosh(t0))))


def residual_target(tol, theta, k, floor, residuals=None):
    """The residual to reach: `tol`, or less where the gap after the k-th eigenvalue
    is so small that `tol` would leave the span far from the eigenspace.

    Parameters
    ----------
    tol : float
        The user's tolerance.
    theta : numpy.ndarray
        Ritz values of the block, descending.
    k : int
        Eigenpairs wanted.
    floor : float
        The smallest residual the working precision resolves
        (:data:`FLOAT32_RESOLUTION` or :data:`FLOAT64_RESOLUTION`).
    residuals : numpy.ndarray, optional
        Residual norms of the wanted Ritz pairs (at least k of them): how far θ_k
        may lie below the k-th eigenvalue. Without them the Ritz values are taken as
        the eigenvalues (an exact block); fewer than k: nothing is known.

    Returns
    -------
    float

    Notes
    -----
    Davis-Kahan: sin ∠ <= residual / gap, so after a small gap `tol` alone can leave a
    wanted vector mixed with the next eigenvector; asking for ``GAP_ANGLE · gap``
    there fixes the angle. Not below what the working precision
    resolves (`floor`), and not where the gap λ_k - λ_{k+1} is within
    :data:`DEGENERATE_GAP` of zero (more copies of the k-th eigenvalue than k: any of
    them is an answer) or below :data:`BUNCHED_GAP` times the next Laplacian
    eigenvalue 1 - λ_{k+1} (k inside a bunch of close eigenvalues: any split of the
    bunch is as good).

    Those two exceptions are claims about eigenvalues, and the Ritz values of a block
    that has not converged can make any gap look small. They are made only where the
    largest gap the Ritz values allow passes the test:

    * λ_{k+1} >= θ_{k+1}: Ritz values never exceed the eigenvalues of the same rank
      (Cauchy interlacing, for any block);
    * λ_k <= θ_k + r_k, r_k the residual of the k-th Ritz pair (an eigenvalue lies
      within r_k of θ_k, and it is λ_k unless the block missed an eigenvalue above,
      which no test on the block can see), and λ_k <= 1 (the top of the spectrum).

    So the gap is at most ``min(θ_k + r_k, 1) - θ_{k+1}``, and both tests are hardest
    to pass at the smallest λ_{k+1}, θ_{k+1}. A repeated top eigenvalue (components
    beyond k) passes as soon as θ_{k+1} is within DEGENERATE_GAP of 1, and k inside a
    bunch once r_k is below a tenth of 1 - θ_{k+1}, less the gap; what no longer
    passes is an unconverged block, whose Ritz gap taken at face value could stop the
    solve with the span far from the eigenspace.

    Until the gap is judged the target is ``GAP_ANGLE · gap`` or, where larger, the
    r_k at which the gap would pass as degenerate or bunched: the loop cannot stop on
    it (r_k is still above it), and the last filter is sized for whichever of the two
    comes first (else a bunch whose Ritz gap looked degenerate takes full filters
    towards a residual far below what it needs).
    """
    if theta.shape[0] <= k:
        return tol
    gap = float(theta[k - 1] - theta[k])
    # `small`: the largest gap that counts as degenerate or bunched, judged at
    # λ_{k+1} = θ_{k+1}; `widest`: the largest gap the Ritz values allow (Notes).
    small = max(DEGENERATE_GAP, BUNCHED_GAP * (1.0 - float(theta[k])))
    if residuals is None:
        widest = gap
    elif residuals.shape[0] < k:
        widest = math.inf
    else:
        top = min(float(theta[k - 1] + residuals[k - 1]), SPECTRUM[1])
        widest = max(top - float(theta[k]), gap)
    if widest <= small:
        return tol
    # Not judged yet (or a real gap): GAP_ANGLE times the gap, or, while the gap may
    # still prove small, the residual r_k at which it would (gap + r_k <= small): the
    # iteration does not stop before the one or the other, and the last filter is
    # sized for the nearer.
    return min(tol, max(GAP_ANGLE * gap, floor, small - gap))


def _steps_to(tol, now, before, p):
    """Filter degree expected to take the residual from `now` down to `tol`.

    A degree-p filter divides the unwanted components by about cosh(p φ) (the growth
    of T_p just outside its interval); φ is read off the decay the previous filter
    (degree `p`, from `before` to `now`) achieved. Unbounded without such history.
    Used only to shorten the last filter of a solve, with a 20 % margin.
    """
    if not (p and math.isfinite(before) and now < before):
        return math.inf
    phi = math.acosh(before / now) / p
    return math.ceil(1.2 * math.acosh(max(now / tol, 1.0)) / phi) + 1


def gram_rayleigh_ritz(M, b, k, drop):
    """Ritz pairs of the block from its float64 Gram matrix ``[Y, AY]^T [Y, AY]``.

    Parameters
    ----------
    M : numpy.ndarray of shape (2b, 2b)
        ``[Y, AY]^T [Y, AY]`` (:meth:`ChebyshevBlock.gram`), on the host.
    b : int
        Columns of the block Y.
    k : int
        Eigenpairs wanted.
    drop : float
        Relative size (squared singular value) below which a direction of the block
        is rounding noise.

    Returns
    -------
    theta : numpy.ndarray of shape (r,)
        Ritz values, descending.
    Q : numpy.ndarray of shape (b, r)
        Coefficients such that ``Y @ Q`` are orthonormal Ritz vectors (r <= b:
        directions below `drop` are left out).
    residual_norms : numpy.ndarray of shape (min(k, r),)
        Of the first min(k, r) Ritz pairs, from ``||A Y q - θ Y q||² = q^T K q - θ²``.

    Notes
    -----
    Step 1 of the module docstring: G = YᵀY is orthonormalised within the span by
    scaled SVQB (columns to unit length first, so one large column does not hide the
    others), H = YᵀAY projected and diagonalised.
    """
    G = M[:b, :b]
    H = (M[:b, b:] + M[b:, :b]) / 2
    K = M[b:, b:]
    # Orthonormalise the block within its span (scaled SVQB: columns to unit length
    # first so one large column does not hide the others).
    norms = np.sqrt(np.diag(G))
    scale = np.divide(1.0, norms, out=np.zeros_like(norms), where=norms > 0)
    s, U = np.linalg.eigh(G * scale[:, None] * scale[None, :])
    keep = s > drop * max(s[-1], np.finfo(float).tiny)
    T = (scale[:, None] * U[:, keep]) / np.sqrt(s[keep])
    theta, Z = np.linalg.eigh(T.T @ H @ T)
    order = np.argsort(-theta, kind="stable")
    theta = theta[order]
    Q = T @ Z[:, order]
    Qk = Q[:, : min(k, Q.shape[1])]
    res2 = np.einsum("ij,ij->j", Qk, K @ Qk) - theta[: Qk.shape[1]] ** 2
    return theta, Q, np.sqrt(np.maximum(res2, 0.0))


class ChebyshevBlock:
    """A in the working precision (and float64) and the array work of one solve on one
    backend: products with A, Gram matrices, filters and block updates.

    Parameters
    ----------
    A : scipy.sparse or cupyx.scipy.sparse CSR matrix
        The matrix of the solve, any float dtype; its values are cast (the index arrays
        are shared).
    xp : module
        The array module of `A`.
    work : numpy.dtype
        Working precision of the iteration (float32 or float64).
    layout : {"row", "col"}
        GPU only: storage order of the block handed to cuSPARSE SpMM.
    seed : int
        Seeds the random vectors (drawn on A's device).
    rows : int array of shape (n,), optional
        The original position of each row of `A`: the random vectors are drawn in that
        order (:class:`explorer.embedding.start.RowNormals`).

    Attributes
    ----------
    A : CSR matrix
        A's values in `work` precision (the same matrix as `A64` in float64).
    A64 : CSR matrix
        A's values in float64, for the final Rayleigh-Ritz step.
    n : int
        Rows of the whole matrix (the random draws are of n rows; a rank's share of
        them is its rows, :class:`explorer.embedding.start.RowNormals`).

    Notes
    -----
    Everything here is written against ``xp`` except the product and the fused
    Chebyshev update, which use cuSPARSE SpMM and one CUDA elementwise kernel on the
    GPU (module docstring, "Precision and the GPU product").

    The solve reaches the rows of other processes only through three methods, which a
    subclass holding one rank's rows overrides (the distributed exact mode,
    :class:`explorer.distributed._exact.HaloBlock`): :meth:`product` and
    :meth:`product64` (the products with A), and :meth:`reduce` (the sum over all
    rows of a small float64 array: the Gram matrices and squared norms). Here the
    matrix is whole and :meth:`reduce` is the identity.
    """

    def __init__(self, A, xp, work, layout, seed, rows=None):
        self.xp = xp
        self.work = work
        self.gpu = xp is not np
        # The cast copies only the values: ``astype`` would also copy the index arrays
        # (8 B per nonzero with int64 indices, 17.7 GB at 2.2·10⁹ nonzeros).
        self.A64 = cast_values(A, np.float64)
        self.A = self.A64 if work == np.float64 else cast_values(A, work)
        if self.gpu:
            from cupyx import cusparse

            from ..kernels import spmm

            # cupyx's SpMM wants a canonical CSR; settle it once, not per product.
            self.A.sum_duplicates()
            self.spmm = cusparse.spmm
            self.warp_spmm = spmm
        # Past PRODUCT_MAX_ENTRIES stored entries a product goes a slab of rows at a
        # time (see explorer._csr); one slab otherwise.
        self.slabs = row_slabs(self.A)
        self.slabs64 = self.slabs if self.A64 is self.A else row_slabs(self.A64)
        self.row = layout == "row" or not self.gpu
        self.order = "C" if self.row else "F"
        self.normals = RowNormals(seed, xp, rows)
        self.n = int(A.shape[0])

    def reduce(self, a):
        """The sum over all rows' shares of the float64 array `a` (here: `a`)."""
        return a

    def norms(self, R):
        """Column norms of the block R (all rows), float64, on the host."""
        return to_numpy(self.xp.sqrt(self.reduce(column_sums(R * R, self.xp))))

    def random(self, n, b):
        return self.xp.asarray(self.normals.normal(n, b, self.work), order=self.order)

    def product(self, Y):
        """A @ Y in the working precision (module docstring, "Precision and the GPU
        product"): C-ordered from our kernel, F-ordered from cuSPARSE."""
        if self.gpu and self.row and self.warp_spmm.supports(self.A, Y):
            # Our warp-per-row kernel: any nnz (int64 offsets), so no slabs.
            return self.warp_spmm.csr_times_block(self.A, Y)
        if not self.gpu or len(self.slabs) > 1:
            return matmul(self.A, Y, self.slabs)
        # Zeroed: cuSPARSE is given beta = 0, but 0 * NaN from uninitialised memory
        # would still be NaN were C read; a memset costs a fraction of the product.
        out = self.xp.zeros(Y.shape, dtype=self.work, order="F")
        if self.row:
            # A row-major block is the transpose of a column-major one: cuSPARSE
            # reads each neighbour's b values as one contiguous segment.
            return self.spmm(self.A, Y.T, c=out, transb=True)
        return self.spmm(self.A, Y, c=out)

    def gram(self, Y, AY):
        """``[Y, AY]^T [Y, AY]`` in float64 (b Gram, projected matrix and A² Gram)."""
        n, b = Y.shape
        Z = self.xp.empty((n, 2 * b), dtype=self.xp.float64)
        Z[:, :b] = Y
        Z[:, b:] = AY
        return self.reduce(Z.T @ Z)

    def rotate(self, Y, Q, b):
        """``Y @ Q`` in the block's layout, topped up with random columns to b."""
        V = Y @ self.xp.asarray(Q, dtype=self.work)
        if V.shape[1] < b:
            V = self.xp.concatenate((V, self.random(self.n, b - V.shape[1])), axis=1)
        return self.xp.asarray(V, order=self.order)

    def filter(self, V, p, cut):
        """``P(A) V`` for the degree-p Chebyshev polynomial of [low, cut], scaled to 1
        at the top of the spectrum (so nothing grows and the damped part shrinks).

        With t(x) = (x - c) / e mapping [low, cut] onto [-1, 1] and t0 = t(high),
        P = T_p(t(x)) / T_p(t0); the three-term recurrence runs on the ratios
        r_j = T_{j-1}(t0) / T_j(t0), which stay in (0, 1].
        """
        low, high = SPECTRUM
        e = (cut - low) / 2.0
        c = (cut + low) / 2.0
        t0 = (high - c) / e
        r = 1.0 / t0
        Y = self.combine(None, self.product(V), V, r / e, -c * r / e, 0.0)
        prev = V
        for _ in range(1, p):
            r_next = 1.0 / (2.0 * t0 - r)
            a = 2.0 * r_next / e
            # Y_{j+1} = a (A Y_j - c Y_j) - r_j r_{j+1} Y_{j-1}, written over Y_{j-1}.
            prev, Y = Y, self.combine(prev, self.product(Y), Y, a, -a * c, -r * r_next)
            r = r_next
        return Y

    def combine(self, out, ay, y, alpha, beta, gamma):
        """``alpha * ay + beta * y + gamma * out``, into `out` (a new array if None)."""
        if self.gpu:
            if out is None:
                return _axpby_kernel()(ay, y, alpha, beta, self.xp.empty_like(y))
            return _step_kernel()(ay, y, alpha, beta, gamma, out)
        ay *= alpha
        ay += beta * y
        if out is None:
            return ay
        out *= gamma
        out += ay
        return out

    def residuals(self, Y, AY, Q, theta):
        """Residual norms of the Ritz pairs ``(Y @ Q, theta)``, measured directly."""
        xp = self.xp
        Q = xp.asarray(Q, dtype=self.work)
        R = AY @ Q - (Y @ Q) * xp.asarray(theta, dtype=self.work)
        return self.norms(R)

    def product64(self, V):
        """A @ V in float64 (the final Rayleigh-Ritz step)."""
        return matmul(self.A64, V, self.slabs64)

    def final(self, V, k):
        """Rayleigh-Ritz of the block V in float64: eigenvalues, vectors, residuals."""
        xp = self.xp
        V = V.astype(xp.float64)
        AV = self.product64(V)
        M = to_numpy(self.gram(V, AV))
        theta, Q, _ = gram_rayleigh_ritz(M, V.shape[1], k, _DROP[np.dtype(np.float64)])
        Qk = xp.asarray(Q[:, :k])
        V = V @ Qk
        AV = AV @ Qk
        mu = theta[:k]
        residuals = self.norms(AV - V * xp.asarray(mu))
        return mu, V, residuals


@functools.lru_cache(maxsize=1)
def _step_kernel():
    import cupy

    return cupy.ElementwiseKernel(
        "T ay, T y, float64 alpha, float64 beta, float64 gamma",
        "T out",
        "out = (T)(alpha * (double)ay + beta * (double)y + gamma * (double)out)",
        "explorer_chebyshev_step",
    )


@functools.lru_cache(maxsize=1)
def _axpby_kernel():
    import cupy

    return cupy.ElementwiseKernel(
        "T ay, T y, float64 alpha, float64 beta",
        "T out",
        "out = (T)(alpha * (double)ay + beta * (double)y)",
        "explorer_chebyshev_first",
    )
