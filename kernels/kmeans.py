"""Launchers of the k-means kernels (``kmeans.cu``) used by explorer.kmeans on the GPU.

One Lloyd step (nearest centre, its squared distance, float64 per-cluster sums) goes
one of two ways:

- :func:`kmeans_step`, fused: one pass that reads each row once and walks the k
  centres in registers; for the small k·d of an embedding with few clusters (see
  :data:`FUSED_MAX_KD`), and for any k that fits when d <= :data:`FUSED_ANY_K_MAX_D`.
- :func:`tiled_step`: for few features (d <= :data:`TILED_MAX_D`) and any k, the
  nearest centres by ``kmeans_tiled.cu`` (rows in registers, centres a tile at a time
  from shared memory, no n x k block stored), then ``cluster_sums``.
- :func:`gemm_step`: the cross terms by cuBLAS a block of rows at a time, then one
  kernel for the nearest centres and one for the sums. The CPU's code run on CuPy
  (``explorer.kmeans.assign_nearest_by_products``: argmin, gather, a float64 copy of the
  data and a sparse product, about fifteen kernels per block) takes 24.4 ms at
  n = 5·10⁶, k = d = 64 on an H200, this path 3.8 ms (benchmarks/results/fast.json).

:func:`squared_error` is the inertia in float64 in one pass (:func:`squared_errors` for
several restarts).

Restarts side by side (``explorer.kmeans._lloyd_starts``): :class:`DeviceStarts` holds
every restart's state on the device; a step is ``kmeans_step`` with a grid row per
restart (or the tiled kernel, or :func:`nearest_checked` per restart), then
``lloyd_update`` for all. :func:`nearest_checked` forms the cross terms with TF32
tensor cores and re-checks in float64 the rows whose two nearest centres are within
:func:`checked_bound` of each other; with the split ("3xTF32") product
(:func:`split_rows`, :func:`split_centres`: one TF32 GEMM over 3d columns) that bound
is 42 times smaller at d = 128, and the share of rows re-checked falls about as much.
:func:`kmeans_plusplus_device` seeds the restarts together by greedy k-means++.
"""

from __future__ import annotations

import numpy as np

from ._launch import free_device_bytes, launch, multiprocessors
from ._loader import get_module
from ._tf32 import POINTER_MODE_HOST, U32, dot_error, split_dot_error, tf32_product

#: Threads per block of ``kmeans_step``.
BLOCK = 256

#: Blocks per multiprocessor of ``kmeans_step`` and ``squared_error``: enough resident
#: warps to hide the row loads, few enough that the blocks' final float64 atomics
#: (k·(d + 1) each in ``kmeans_step``) stay negligible.
BLOCKS_PER_SM = 8

#: Largest per-block float64 accumulator, bytes: k·(d + 1)·8 within the 48 KiB a block
#: gets without opting in, leaving room for two blocks per multiprocessor.
MAX_SUMS_BYTES = 40 * 1024


#: Largest k·d for which explorer.kmeans takes the fused step (and any k that fits when
#: d <= :data:`FUSED_ANY_K_MAX_D`). Each thread walks the k centres with scalar loads
#: and its warp sums each distinct label's rows by shuffles, so its cost grows fast
#: with k·d; :func:`gemm_step` costs about 2 ms at n = 5·10⁶ whatever k·d up to 1024.
#: One step on an H200, fused against :func:`gemm_step` (benchmarks/fast.py,
#: ``kmeans.*.step_by_path_s``), n = 5·10⁶: k = d = 4, 0.41 against 2.00 ms; 10,
#: 1.41 / 2.21; 16, 4.99 / 2.39; 24, 7.38 / 2.49; 32, 27.4 / 2.87; 64, 127 / 4.27.
#: n = 2.4·10⁵, k = d = 10: 0.24 / 0.42 ms.
FUSED_MAX_KD = 128

#: Up to this many features the fused step is taken for every k whose sums fit: its
#: per-centre work is a few registers. n = 10⁶, d = 4, k = 1024 (the largest that
#: fits): 4.05 against 3.72 ms, even; fewer centres favour the fused step.
FUSED_ANY_K_MAX_D = 4

def fused_step_fits(k: int, d: int) -> bool:
    """Whether the fused step can handle `k` centres in `d` dimensions (its sums fit a
    block's shared memory)."""
    return k * (d + 1) * 8 <= MAX_SUMS_BYTES


def fused_step_pays(k: int, d: int) -> bool:
    """Whether explorer.kmeans should use the fused step (see :data:`FUSED_MAX_KD` and
    :data:`FUSED_ANY_K_MAX_D`)."""
    return (k * d <= FUSED_MAX_KD or d <= FUSED_ANY_K_MAX_D) and fused_step_fits(k, d)


#: Up to this many features (and where the fused step does not pay), the nearest
#: centres come from :func:`tiled_step`: the GEMM path's n x k block of cross terms
#: costs 8 bytes of traffic per centre and row against 2d flops, so below a few dozen
#: features it runs at memory speed. Measured on an H200 at d = 4 only (n = 10⁷,
#: k = 4096, one step with sums: 116 ms by the GEMM path, 16.4 ms tiled;
#: benchmarks/results/large-kmeans-*.json); 32 is the estimate from bytes against
#: flops (an H200's balance is near 2d flops per 8 bytes at d ≈ 56), not a measurement.
TILED_MAX_D = 32

#: Threads per block of ``nearest_tiled`` (``TILE`` in kmeans_tiled.cu) and rows per
#: thread (``ROWS``).
TILED_BLOCK = 256
TILED_ROWS = 2

#: Blocks per multiprocessor of ``nearest_tiled``.
TILED_BLOCKS_PER_SM = 8


def tiled_step_pays(k: int, d: int) -> bool:
    """Whether explorer.kmeans should use :func:`tiled_step` (few features, and the
    fused step does not pay)."""
    return d <= TILED_MAX_D and not fused_step_pays(k, d)


def tiled_step(X, x_sq, centers, *, want_sums: bool):
    """:func:`kmeans_step` for d <= :data:`TILED_MAX_D` and any k: ``nearest_tiled``
    (compiled for this d), then :func:`cluster_sums`.

    Same parameters and results as :func:`kmeans_step`; ties go to the first centre,
    and the float32 sums compared are those of the fused step.
    """
    import cupy

    n, d = X.shape
    k = centers.shape[0]
    if not 1 <= d <= TILED_MAX_D:
        raise ValueError(f"d={d} is out of range for tiled_step; allowed: 1 <= d <= {TILED_MAX_D}")
    X = cupy.ascontiguousarray(X, dtype=cupy.float32)
    C32, c_sq = _float32_centres(centers)
    neg2c = cupy.ascontiguousarray(-2.0 * C32)
    labels = cupy.empty(n, dtype=cupy.int32)
    mind = cupy.empty(n, dtype=cupy.float32)
    _nearest_tiled(X, cupy.ascontiguousarray(x_sq, dtype=cupy.float32), neg2c, c_sq,
                   labels, mind, None)
    return labels, mind, cluster_sums(X, labels, k) if want_sums else None


def _nearest_tiled(X, x_sq, neg2c, c_sq, labels, mind, changed, state=None):
    """Launch ``nearest_tiled`` (contiguous float32 X, x_sq, neg2c (k x d), c_sq; int32
    labels and float32 mind written; rows whose label changes counted into the int32
    ``changed[0]`` unless `changed` is None; nothing done while the int32 ``state[0]``,
    when given, is not 0)."""
    n, d = X.shape
    if n:
        grid = _blocks(n, TILED_BLOCK * TILED_ROWS, TILED_BLOCKS_PER_SM)
        launch("kmeans_tiled", "nearest_tiled", (f"-DKM_DIM={d}",), (grid,), (TILED_BLOCK,),
               (X, x_sq, neg2c, c_sq, np.int64(n), np.int32(neg2c.shape[0]), labels, mind,
                _pointer(changed), _pointer(state)))


def _pointer(array):
    """A kernel argument: the array, or a null pointer for None."""
    return np.uint64(0) if array is None else array


def _blocks(items: int, per_block: int, per_sm: int) -> int:
    """Blocks of a grid-stride launch: enough for `items` at `per_block` each, at most
    `per_sm` per multiprocessor, at least one."""
    return max(1, min(-(-items // per_block), multiprocessors() * per_sm))


def _float32_centres(centers):
    """The centres (k x d, or S x k x d for S restarts) in float32 and their squared
    norms: the terms both step paths compare, ``-2 x·c + ||c||^2``, in the same
    precision as the CPU's."""
    C32 = centers.astype(np.float32)
    return C32, (C32 * C32).sum(axis=-1)


def kmeans_step(X, x_sq, centers, *, want_sums: bool):
    """Nearest centre of every row, its squared distance, and per-cluster sums.

    Parameters
    ----------
    X : cupy.ndarray of float32, shape (n, d), C-contiguous
        The (centred) data.
    x_sq : cupy.ndarray of float32, shape (n,)
        Squared norms of the rows of X.
    centers : cupy.ndarray, shape (k, d)
        Current centres (any float dtype; used in float32).
    want_sums : bool
        Also return the float64 sums of the rows of each cluster, with the counts as
        a last column.

    Returns
    -------
    labels : cupy.ndarray of int32, shape (n,)
    mind : cupy.ndarray of float32, shape (n,)
    sums : cupy.ndarray of float64, shape (k, d + 1), or None
    """
    import cupy

    n, d = X.shape
    k = centers.shape[0]
    if not fused_step_fits(k, d):
        raise ValueError(f"k={k}, d={d}: k*(d+1)*8 exceeds {MAX_SUMS_BYTES} bytes")
    X = cupy.ascontiguousarray(X, dtype=cupy.float32)
    C32, c_sq = _float32_centres(centers)
    neg2c = cupy.ascontiguousarray(-2.0 * C32)
    labels = cupy.empty(n, dtype=cupy.int32)
    mind = cupy.empty(n, dtype=cupy.float32)
    sums = cupy.zeros((k, d + 1), dtype=cupy.float64) if want_sums else None
    shared = k * (d + 1) * 8 if want_sums else 0
    launch("kmeans", "kmeans_step", (), (_blocks(n, BLOCK, BLOCKS_PER_SM),), (BLOCK,),
           (X, cupy.ascontiguousarray(x_sq, dtype=cupy.float32), neg2c, c_sq,
            np.int64(n), np.int32(d), np.int32(k), labels, mind,
            sums if want_sums else np.uint64(0), np.uint64(0), np.uint64(0), np.uint64(0)),
           shared_mem=shared)
    return labels, mind, sums


#: Threads per block of the GEMM path's kernels and of ``squared_error``.
PASS_BLOCK = 256

#: Blocks per multiprocessor for ``cluster_sums``: each block ends with k·(d + 1)
#: float64 atomics into the result, so fewer, fuller blocks.
SUMS_BLOCKS_PER_SM = 4

#: Blocks per multiprocessor for ``nearest_centre`` (one warp per row, grid-stride).
NEAREST_BLOCKS_PER_SM = 32

#: Columns a lane of ``cluster_sums`` covers per launch (``SUM_COLS`` in kmeans.cu).
SUM_COLS = 4


def gemm_step(X, x_sq, centers, *, want_sums: bool, chunk: int):
    """:func:`kmeans_step` for any k and d: cuBLAS cross terms a block of `chunk` rows at
    a time, then ``nearest_centre`` and ``cluster_sums``.

    Same parameters and results as :func:`kmeans_step`; ties go to the first centre,
    and the float32 sums ``(-2 x·c) + ||c||^2`` compared are those of the CPU's path.
    """
    import cupy

    n, d = X.shape
    k = centers.shape[0]
    X = cupy.ascontiguousarray(X, dtype=cupy.float32)
    x_sq = cupy.ascontiguousarray(x_sq, dtype=cupy.float32)
    C32, c_sq = _float32_centres(centers)
    neg2_ct = cupy.ascontiguousarray((-2.0 * C32).T)
    labels = cupy.empty(n, dtype=cupy.int32)
    mind = cupy.empty(n, dtype=cupy.float32)
    _nearest_gemm(X, x_sq, neg2_ct, c_sq, labels, mind, None, chunk)
    return labels, mind, cluster_sums(X, labels, k) if want_sums else None


def _nearest_gemm(X, x_sq, neg2_ct, c_sq, labels, mind, changed, chunk):
    """The GEMM path's assignment: ``X @ neg2_ct`` (neg2_ct: d x k, any strides) by
    cuBLAS `chunk` rows at a time, then ``nearest_centre`` per block; labels and mind
    written, rows whose label changes counted into ``changed[0]`` unless None."""
    import cupy

    n = X.shape[0]
    k = neg2_ct.shape[1]
    block = cupy.empty((min(chunk, n), k), dtype=cupy.float32)
    for start in range(0, n, chunk):
        stop = min(start + chunk, n)
        D = block[: stop - start]
        cupy.matmul(X[start:stop], neg2_ct, out=D)
        grid = _blocks(stop - start, PASS_BLOCK // 32, NEAREST_BLOCKS_PER_SM)
        launch("kmeans", "nearest_centre", (), (grid,), (PASS_BLOCK,),
               (D, c_sq, x_sq[start:stop], np.int64(stop - start), np.int32(k),
                labels[start:stop], mind[start:stop], _pointer(changed)))


#: Greedy k-means++ on the GPU by ``kpp_trials`` / ``kpp_choose`` up to this many
#: features and trials per step (``KPP_MAX_D``, ``KPP_MAX_TRIALS`` in kmeans.cu: the
#: drawn rows sit in shared memory); beyond, explorer.kmeans's CuPy operations.
KPP_MAX_D = 64
KPP_MAX_TRIALS = 16

#: Threads per block of the k-means++ kernels (their reductions assume 256).
KPP_BLOCK = 256


def kpp_fits(d: int, trials: int) -> bool:
    """Whether :func:`kmeans_plusplus_device` handles `d` features and `trials` draws."""
    return 1 <= d <= KPP_MAX_D and trials <= KPP_MAX_TRIALS


def kmeans_plusplus_device(X, x_sq, k: int, draws):
    """``explorer.kmeans.kmeans_plusplus_starts`` on the GPU: per step, the running sums
    of every restart (one CuPy ``cumsum``), then ``kpp_trials`` (draws and their
    potentials) and ``kpp_choose`` (the best draw, the lowered distances).

    Parameters
    ----------
    X : cupy.ndarray of float32 (n, d), d <= :data:`KPP_MAX_D`
    x_sq : cupy.ndarray (n,)
    k : int
    draws : list of (int, numpy.ndarray of shape (k - 1, trials))
        Per restart the first row and the uniforms (see kmeans_plusplus_starts).

    Returns
    -------
    cupy.ndarray of float64, shape (len(draws), k, d)
    """
    import cupy

    X = cupy.ascontiguousarray(X, dtype=cupy.float32)
    x_sq = cupy.ascontiguousarray(x_sq, dtype=cupy.float32)
    n, d = X.shape
    S = len(draws)
    trials = 2 + int(np.log(k))
    if not kpp_fits(d, trials):
        raise ValueError(f"d={d}, trials={trials}: allowed d <= {KPP_MAX_D}, "
                         f"trials <= {KPP_MAX_TRIALS}")
    centers = cupy.empty((S, k, d), dtype=cupy.float64)
    first = cupy.asarray(np.array([f for f, _ in draws], dtype=np.int64))
    centers[:, 0] = X[first]
    closest = cupy.ascontiguousarray(_sqdist(X, x_sq, X[first]).T)  # S x n
    if k == 1:
        return centers
    # (k - 1) x S x trials: step c's uniforms are one contiguous S x trials block.
    uniforms = cupy.asarray(np.ascontiguousarray(
        np.stack([u for _, u in draws]).reshape(S, k - 1, trials).transpose(1, 0, 2)))
    potential = cupy.zeros((k - 1, S, trials), dtype=cupy.float64)
    cand = cupy.empty((S, trials), dtype=cupy.int64)
    grid = (_blocks(n, KPP_BLOCK, max(1, BLOCKS_PER_SM // S)), S)
    for c in range(1, k):
        cumulative = cupy.cumsum(closest, axis=1, dtype=cupy.float64)
        launch("kmeans", "kpp_trials", (), grid, (KPP_BLOCK,),
               (X, x_sq, np.int64(n), np.int32(d), closest, cumulative, uniforms[c - 1],
                np.int32(trials), potential[c - 1], cand))
        launch("kmeans", "kpp_choose", (), grid, (KPP_BLOCK,),
               (X, x_sq, np.int64(n), np.int32(d), np.int32(k), np.int32(c), np.int32(trials),
                potential[c - 1], cand, closest, centers))
    return centers


#: The checked assignment (:func:`nearest_checked`) forms the cross terms with TF32
#: tensor cores in blocks of at most this many values (256 MiB), as does the float32
#: fallback of :class:`DeviceStarts`: each block costs a few launches from Python
#: (tens of microseconds), and blocks small enough to stay in L2 (2^23 values) made the
#: host, not the GPU, set the pace at n = 6·10⁶, k = 1024, d = 128 (a Lloyd step twice
#: as long as with the float32 product in blocks of 16384 rows).
CHECKED_BLOCK_VALUES = 1 << 26

#: Factor on the bound of :func:`checked_bound` (covers the float32 evaluation of the
#: bound and of the gap).
CHECKED_SAFETY = 1.25


def checked_bound(d: int, *, split: bool = False) -> tuple[float, float]:
    """``(a, b)`` of the bound ``E = a ||x|| max||c|| + b max||c||^2`` on the error of a
    TF32-formed ``-2 x·c + ||c||^2`` against its exact value for float32 x and c.

    ``-2 x·c`` from TF32 operands with float32 accumulation: each product off by at
    most ``(2 u_tf32 + u_tf32^2)`` of itself, the d-term sum by ``(d + 2) u`` (tensor
    cores may truncate: 2u per addition), so together at most
    ``2 (2 u_tf32 + u_tf32^2 + 2 (d + 2) u) Σ|x_t c_t|``, and Σ|x_t c_t| <= ||x|| ||c||;
    adding the float32 ``||c||^2`` (its own d-term error, ``(d + 2) u ||c||^2``) and
    rounding the sum (u of ``2 ||x|| ||c|| + ||c||^2``) add the rest.

    With `split`, the cross terms come from the split product (:func:`split_rows`,
    :func:`split_centres`): ``dot_error`` is replaced by
    :func:`~._tf32.split_dot_error` (``-2 c`` splits as ``-2`` times c's parts, the
    factor 2 is exact), the rest is the same. At d = 128, ``a`` is 42 times smaller
    (1.2·10⁻⁴ against 4.9·10⁻³ with the safety factor).
    """
    err = split_dot_error(d) if split else dot_error(d)
    a = 2 * err * (1 + U32) + 2 * U32
    b = (d + 3) * U32
    return CHECKED_SAFETY * a, CHECKED_SAFETY * b


#: Threads per block of ``split_tf32`` (a warp per row) and blocks per multiprocessor.
SPLIT_BLOCK = 256
SPLIT_BLOCKS_PER_SM = 16


def _split(src, lo_at: int, out=None):
    """``split_tf32`` of the float32 rows of `src` (contiguous, rows x d) into `out`
    (rows x 3d, float32, contiguous; allocated when None)."""
    import cupy

    src = cupy.ascontiguousarray(src, dtype=cupy.float32)
    rows, d = src.shape
    if out is None:
        out = cupy.empty((rows, 3 * d), dtype=cupy.float32)
    if rows:
        launch("kmeans", "split_tf32", (), (_blocks(rows, SPLIT_BLOCK // 32, SPLIT_BLOCKS_PER_SM),),
               (SPLIT_BLOCK,), (src, np.int64(rows), np.int32(d), np.int32(lo_at), out))
    return out


def split_rows(X, out=None):
    """The data operand of the split product: row r of X (n x d float32, contiguous)
    as ``[x_hi, x_lo, x_hi]`` (n x 3d float32; ``x_hi`` rounded to TF32 on its bits,
    ``x_lo = x - x_hi`` exactly; see ``split_tf32`` in kmeans.cu). 3x X's memory:
    :class:`DeviceStarts` forms it once per fit where it fits (:func:`split_prepared_fits`)."""
    return _split(X, 1, out)


def split_centres(neg2c):
    """The centres' operand of the split product: ``[c_hi, c_hi, c_lo]`` (k x 3d) of
    the rows of `neg2c` (k x d float32, contiguous), formed once per step."""
    return _split(neg2c, 2)


#: :class:`DeviceStarts` holds the split product's data operand (3 n d float32) for the
#: whole fit when it takes at most this share of the free device memory (the checked
#: step's block of cross terms, 256 MiB, and the float64 re-check's blocks need the
#: rest); else it forms the operand a block of rows at a time, each step (reading X
#: and writing 3x a block more: about 16 d bytes a row, a few per cent of a step whose
#: cross terms cost 8 k bytes a row).
SPLIT_PREPARED_FRACTION = 0.5


def split_prepared_fits(n: int, d: int, free: int | None = None) -> bool:
    """Whether the split operand of n x d rows (``12 n d`` bytes) may be held whole:
    at most :data:`SPLIT_PREPARED_FRACTION` of `free` (default: the device's free
    bytes, :func:`~._launch.free_device_bytes`)."""
    free = free_device_bytes() if free is None else free
    return 12 * n * d <= SPLIT_PREPARED_FRACTION * free


def nearest_checked(X, x_sq, neg2c, c_sq, labels, mind, changed=None, *, split=None,
                    counts=None):
    """Nearest centres with the cross terms from TF32 tensor cores, exact where it matters.

    The TF32 product ``X (-2 C)ᵀ`` (cuBLAS, blocks of :data:`CHECKED_BLOCK_VALUES`)
    feeds ``nearest_centre_checked``, which settles a row when its best and second-best
    ``-2 x·c + ||c||^2`` are more than twice :func:`checked_bound` apart: no rounding
    of either can then reorder them. The other rows are re-checked in float64 against
    every centre (``argmin`` of ``-2 x·c + ||c||^2``, first index on ties). So the
    labels are those of the exact distances to the float32 centres, at the TF32 rate.

    With `split`, the cross terms come from the split ("3xTF32") product instead: one
    TF32 GEMM over 3d columns, ``[x_hi, x_lo, x_hi] · [c_hi, c_hi, c_lo]`` (kmeans.cu's
    ``split_tf32``; its bound is ``checked_bound(d, split=True)``, about 42 times
    smaller at d = 128), so far fewer rows are re-checked, for three times the GEMM's
    flops; the block of cross terms is written once, as by the plain product.

    Parameters
    ----------
    X : cupy.ndarray of float32 (n, d), C-contiguous
    x_sq : cupy.ndarray of float32 (n,)
    neg2c : cupy.ndarray of float32 (k, d), C-contiguous
        ``-2 c`` for float32 centres c.
    c_sq : cupy.ndarray of float32 (k,)
        Their squared norms.
    labels : cupy.ndarray of int32 (n,)
        Written; with `changed`, the rows whose label changes are counted into the
        int32 ``changed[0]``.
    mind : cupy.ndarray of float32 (n,)
        Written: the squared distance to the nearest centre, from the TF32 terms
        (within the bound) for settled rows, from the float64 ones for re-checked rows.
    split : None, True or cupy.ndarray of float32 (n, 3d)
        None: the plain TF32 product. True: the split product, its data operand formed
        a block of rows at a time. An array: the split product with the data operand
        :func:`split_rows` (X) formed beforehand.
    counts : dict, optional
        Filled with ``"rechecked"`` (the rows re-checked) and, with `split`,
        ``"within_tf32"``: the rows whose gap the plain TF32 product's bound would not
        have settled (judged on these more accurate terms: an estimate of the rows the
        plain product would re-check, for :class:`DeviceStarts`'s choice).

    Returns
    -------
    int
        The rows re-checked (a host synchronisation: their count is read).
    """
    import cupy
    from cupy.cuda import device
    from cupy_backends.cuda.libs import cublas

    n, d = X.shape
    k = neg2c.shape[0]
    use_split = split is not None and split is not False
    a, b = checked_bound(d, split=use_split)
    a_alt = checked_bound(d)[0]
    cmax_sq = c_sq.max()
    flagged = cupy.empty(max(n, 1), dtype=cupy.int64)
    tally = cupy.zeros(2, dtype=cupy.uint64)  # rows flagged; rows within the plain bound
    n_flagged = tally[0:1]
    n_alt = tally[1:2] if use_split else None
    prepared = use_split and split is not True
    if prepared and tuple(split.shape) != (n, 3 * d):
        raise ValueError(f"split operand of shape {tuple(split.shape)}; expected {(n, 3 * d)}")
    width = 3 * d if use_split and not prepared else 1
    chunk = max(256, min(n, CHECKED_BLOCK_VALUES // max(k, width)))
    block = cupy.empty((min(chunk, n), k), dtype=cupy.float32)
    if use_split:
        centres = split_centres(neg2c)
        rows_op = split if prepared else cupy.empty((min(chunk, n), 3 * d), dtype=cupy.float32)
    else:
        centres = neg2c
    handle = device.get_cublas_handle()
    mode = cublas.getPointerMode(handle)
    cublas.setPointerMode(handle, POINTER_MODE_HOST)
    try:
        for start in range(0, n, chunk):
            stop = min(start + chunk, n)
            D = block[: stop - start]
            if not use_split:
                operand = X[start:stop]
            elif prepared:
                operand = rows_op[start:stop]
            else:
                operand = split_rows(X[start:stop], rows_op[: stop - start])
            tf32_product(handle, cublas, centres, operand, D)
            grid = _blocks(stop - start, PASS_BLOCK // 32, NEAREST_BLOCKS_PER_SM)
            launch("kmeans", "nearest_centre_checked", (), (grid,), (PASS_BLOCK,),
                   (D, c_sq, x_sq[start:stop], np.int64(stop - start), np.int32(k),
                    labels[start:stop], mind[start:stop], _pointer(changed), cmax_sq,
                    np.float32(a), np.float32(b), np.int64(start), flagged, n_flagged,
                    np.float32(a_alt), _pointer(n_alt)))
    finally:
        cublas.setPointerMode(handle, mode)
    m, within = (int(v) for v in tally.get())  # one read, one synchronisation
    if counts is not None:
        counts["rechecked"] = m
        if use_split:
            counts["within_tf32"] = within
    if m:
        _recheck(X, x_sq, neg2c, flagged[:m], labels, mind, changed)
    return m


def _recheck(X, x_sq, neg2c, rows, labels, mind, changed):
    """Exact (float64) nearest centres of the rows `rows` (see :func:`nearest_checked`)."""
    import cupy

    C = neg2c.astype(cupy.float64) * -0.5  # the float32 centres, exactly
    neg2ct = -2.0 * C.T
    c_sq = (C * C).sum(axis=1)
    step = max(1, CHECKED_BLOCK_VALUES // C.shape[0])
    for start in range(0, rows.shape[0], step):
        part = rows[start : start + step]
        V = X[part].astype(cupy.float64) @ neg2ct
        V += c_sq[None, :]
        lab = V.argmin(axis=1).astype(cupy.int32)
        best = V[cupy.arange(part.shape[0]), lab]
        if changed is not None:
            changed += cupy.count_nonzero(labels[part] != lab).astype(cupy.int32)
        labels[part] = lab
        mind[part] = cupy.maximum(best + x_sq[part].astype(cupy.float64), 0.0).astype(
            cupy.float32)


#: With atomics straight into global memory (the sums do not fit shared memory), rows
#: are visited sorted by label from this many features on: unsorted, shuffled labels
#: cost one float64 atomic per row and column (n·(d + 1)); sorted, about one per
#: cluster and column, for the price of an argsort of the labels and a gathered read.
#: Not measured apart: at n = 10⁶, d = 784, k = 4096 (H200) the whole step went from
#: 142 to 139 ms, the cuBLAS product being most of it.
SORTED_SUMS_MIN_D = 16


def cluster_sums(X, labels, k: int, *, sort=None, out=None):
    """float64 sums of the rows of each cluster, with the counts as a last column.

    Parameters
    ----------
    X : cupy.ndarray of float32, shape (n, d), C-contiguous
    labels : cupy.ndarray of int32, shape (n,), values in [0, k)
    k : int
    sort : bool or None
        Visit the rows sorted by label (see :data:`SORTED_SUMS_MIN_D`); None: when
        the sums go straight to global memory and d >= SORTED_SUMS_MIN_D.
    out : cupy.ndarray of float64, shape (k, d + 1), C-contiguous, optional
        Added to (zero it first for the sums alone) and returned.

    Returns
    -------
    cupy.ndarray of float64, shape (k, d + 1)
    """
    import cupy

    n, d = X.shape
    sums = cupy.zeros((k, d + 1), dtype=cupy.float64) if out is None else out
    if n == 0:
        return sums
    # Per-block accumulators in shared memory when they fit (k·(d + 1) doubles within
    # MAX_SUMS_BYTES), else atomics straight into the result.
    shared = k * (d + 1) * 8
    use_shared = shared <= MAX_SUMS_BYTES
    if sort is None:
        sort = not use_shared and d >= SORTED_SUMS_MIN_D
    order = cupy.argsort(labels).astype(cupy.int64, copy=False) if sort else np.uint64(0)
    # A warp's run of rows should be at least 32 long.
    grid = _blocks(-(-n // 32), PASS_BLOCK // 32, SUMS_BLOCKS_PER_SM)
    for col0 in range(0, d + 1, 32 * SUM_COLS):
        launch("kmeans", "cluster_sums", (), (grid,), (PASS_BLOCK,),
               (X, labels, order, np.int64(n), np.int32(d), np.int32(k), np.int32(col0),
                np.int32(use_shared), sums),
               shared_mem=shared if use_shared else 0)
    return sums


def squared_error(X, centers, labels) -> float:
    """Sum over rows of ``||x_i - c_{labels[i]}||^2``, formed in float64.

    Parameters
    ----------
    X : cupy.ndarray of float32, shape (n, d), C-contiguous
    centers : cupy.ndarray, shape (k, d) (used in float64)
    labels : cupy.ndarray of int32, shape (n,)
    """
    import cupy

    n, d = X.shape
    total = cupy.zeros(1, dtype=cupy.float64)
    grid = _blocks(n * d, PASS_BLOCK, BLOCKS_PER_SM)
    launch("kmeans", "squared_error", (), (grid,), (PASS_BLOCK,),
           (cupy.ascontiguousarray(X, dtype=cupy.float32),
            cupy.ascontiguousarray(centers, dtype=cupy.float64),
            cupy.ascontiguousarray(labels, dtype=cupy.int32), np.int64(n), np.int32(d), total,
            np.int64(0)))
    return float(total[0])


def squared_errors(X, centers, labels) -> np.ndarray:
    """:func:`squared_error` of S restarts in one launch and one transfer.

    Parameters
    ----------
    X : cupy.ndarray of float32, shape (n, d), C-contiguous
    centers : cupy.ndarray of float64, shape (S, k, d), C-contiguous
    labels : cupy.ndarray of int32, shape (S, n), C-contiguous

    Returns
    -------
    numpy.ndarray of float64, shape (S,)
    """
    import cupy

    n, d = X.shape
    S, k, _ = centers.shape
    total = cupy.zeros(S, dtype=cupy.float64)
    grid = _blocks(n * d, PASS_BLOCK, max(1, BLOCKS_PER_SM // S))
    launch("kmeans", "squared_error", (), (grid, S), (PASS_BLOCK,),
           (X, centers, labels, np.int64(n), np.int32(d), total, np.int64(k * d)))
    return total.get()


#: Threads per block of ``lloyd_update`` (one block per restart).
UPDATE_BLOCK = 256

#: :meth:`DeviceStarts.run` reads the restarts' states once per this many steps: each
#: read waits for the device, and at the size of an embedding a step is a few tens of
#: microseconds of GPU work against as much again for the wait and the launches after
#: it. A restart that stopped costs nothing in the steps launched after (its blocks
#: return at once).
RUN_CHECK_EVERY = 4

#: The checked assignment hands over to float32 products once a step of the split
#: product re-checks more than this share of the rows (data without clear nearest
#: centres, where the float64 re-check would cost more than the float32 product saves).
CHECKED_MAX_FRACTION = 0.05

#: :class:`DeviceStarts` takes the plain TF32 product instead of the split one while a
#: split step estimates (``nearest_checked``'s ``within_tf32``) that the plain product
#: would re-check at most this share of the rows more than the split one did, and goes
#: back to the split product once a plain step re-checks more than twice this share.
#: Why: the split product costs about two TF32 GEMMs more (4 k d flops a row), the
#: float64 re-check about 2 k d float64 flops a row re-checked plus its gathers, so
#: the split product pays while it saves more than a few per cent of the rows from the
#: re-check (the figures: benchmarks/README.md, the split k-means product).
SPLIT_MIN_FRACTION = 0.02


class DeviceStarts:
    """The state of k-means restarts on the GPU, advanced together
    (``explorer.kmeans._lloyd_starts``; same methods as its CPU twin ``_HostStarts``).

    All S restarts' centres (float64, S x k x d, and the float32 terms a step
    compares), labels and distances (S x n) and sums (S x k x (d + 1)) live on the
    device. A step is the assignment with the float64 sums for every running restart,
    then ``lloyd_update`` (one launch: means, shift, empty clusters, the next step's
    float32 terms, sums zeroed), then one transfer of three numbers per restart: the
    host sees nothing else, so a step at the size of an embedding costs a few
    launches whatever the number of restarts.

    The assignment, as :func:`explorer.kmeans.assign_nearest` chooses it: where the
    fused step pays (:func:`fused_step_pays`), ``kmeans_step`` with a grid row per
    restart (each row read once per restart, the assignment fused with the sums,
    labels changed counted as they are written); else per restart the tiled kernel
    (:func:`tiled_step_pays`) or, for more features, :func:`nearest_checked` (the
    cross terms by TF32 tensor cores, rows within the rounding bound of a tie
    re-checked in float64: the labels of exact distances), then :func:`cluster_sums`.
    With the checked assignment `mind` holds TF32 distances, so the re-seeding of
    empty clusters recomputes the distances it ranks.

    The checked assignment's product (``product``): ``"split"`` first (the split
    "3xTF32" product, its data operand formed once and held where
    :func:`split_prepared_fits`, else formed a block at a time), ``"tf32"`` (the
    plain TF32 product) while few rows would be re-checked by it
    (:data:`SPLIT_MIN_FRACTION`), ``"float32"`` for good once a split step re-checks
    more than :data:`CHECKED_MAX_FRACTION` of the rows. Every one gives the labels of
    the exact distances but the last (float32 products, as the CPU's).

    Parameters
    ----------
    X : cupy.ndarray of float32, shape (n, d)
    x_sq : cupy.ndarray of float32, shape (n,)
    centers : cupy.ndarray, shape (S, k, d)
        Initial centres (copied, used in float64).
    """

    def __init__(self, X, x_sq, centers):
        import cupy

        self.X = cupy.ascontiguousarray(X, dtype=cupy.float32)
        self.x_sq = cupy.ascontiguousarray(x_sq, dtype=cupy.float32)
        self.centers = cupy.array(centers, dtype=cupy.float64, order="C")
        S, k, d = self.centers.shape
        n = self.X.shape[0]
        C32, c_sq = _float32_centres(self.centers)
        self.neg2c = cupy.ascontiguousarray(-2.0 * C32)
        self.c_sq = cupy.ascontiguousarray(c_sq)
        self.labels = cupy.full((S, n), -1, dtype=cupy.int32)
        self.mind = cupy.empty((S, n), dtype=cupy.float32)
        self.sums = cupy.zeros((S, k, d + 1), dtype=cupy.float64)
        self.changed = cupy.zeros(S, dtype=cupy.int32)
        self.counts = cupy.zeros((S, k), dtype=cupy.float64)
        self.status = cupy.empty(3 * S, dtype=cupy.float64)
        self.fused = fused_step_pays(k, d)
        self.tiled = not self.fused and tiled_step_pays(k, d)
        # The GEMM path starts checked with the split product (see the class).
        self.product = None if (self.fused or self.tiled) else "split"
        # False: the caller decides the next product from step_counts (added over
        # several processes by the worker-resident loop) with choose_product.
        self.choose_locally = True
        self.step_counts = {"rechecked": 0, "within_tf32": 0, "rows": 0}
        self._split_rows = None  # the split product's data operand, or True: per block
        self.chunk = max(_chunk_rows(max(k, d)), CHECKED_BLOCK_VALUES // max(k, 1))
        self._slots = {}
        module = get_module("kmeans")
        self._step_fn = module.get_function("kmeans_step")
        self._update_fn = module.get_function("lloyd_update")
        self._per_sm = {}

    def _slot_array(self, starts):
        import cupy

        key = tuple(starts)
        if key not in self._slots:
            self._slots = {key: cupy.asarray(np.asarray(key, dtype=np.int32))}
        return self._slots[key]

    def _assign(self, starts, want_sums, state=None):
        n, d = self.X.shape
        k = self.centers.shape[1]
        if self.fused:
            m = len(starts)
            if m not in self._per_sm:
                self._per_sm[m] = _blocks(n, BLOCK, max(1, BLOCKS_PER_SM // m))
            self._step_fn((self._per_sm[m], m), (BLOCK,),
                          (self.X, self.x_sq, self.neg2c, self.c_sq, np.int64(n), np.int32(d),
                           np.int32(k), self.labels, self.mind,
                           self.sums if want_sums else np.uint64(0), self._slot_array(starts),
                           self.changed if want_sums else np.uint64(0), _pointer(state)),
                          shared_mem=k * (d + 1) * 8 if want_sums else 0)
            return
        self.step_counts = {"rechecked": 0, "within_tf32": 0, "rows": 0}
        for s in starts:
            changed = self.changed[s : s + 1] if want_sums else None
            if self.tiled:
                _nearest_tiled(self.X, self.x_sq, self.neg2c[s], self.c_sq[s], self.labels[s],
                               self.mind[s], changed, None if state is None else state[s : s + 1])
            elif self.product in ("split", "tf32"):
                counts = {}
                nearest_checked(self.X, self.x_sq, self.neg2c[s], self.c_sq[s],
                                self.labels[s], self.mind[s], changed,
                                split=self._split_operand() if self.product == "split" else None,
                                counts=counts)
                if self.choose_locally:
                    self.choose_product(counts, n)
                else:
                    for key in ("rechecked", "within_tf32"):
                        self.step_counts[key] += int(counts.get(key, 0))
                    self.step_counts["rows"] += n
            else:
                _nearest_gemm(self.X, self.x_sq, self.neg2c[s].T, self.c_sq[s], self.labels[s],
                              self.mind[s], changed, self.chunk)
            if want_sums:
                cluster_sums(self.X, self.labels[s], k, out=self.sums[s])

    def _split_operand(self):
        """The split product's data operand: formed once (held for the fit) where it
        fits (:func:`split_prepared_fits`), else True (formed a block at a time)."""
        if self._split_rows is None:
            n, d = self.X.shape
            self._split_rows = split_rows(self.X) if split_prepared_fits(n, d) else True
        return self._split_rows

    def choose_product(self, counts, n):
        """The next step's product from a step's counts over `n` rows (see the class):
        this runner's, or with ``choose_locally = False`` those of every process's
        runners added, so that all take the same product."""
        if self.product == "split":
            if counts["rechecked"] > CHECKED_MAX_FRACTION * n:
                self.product = "float32"
                self._split_rows = None
            elif counts["within_tf32"] - counts["rechecked"] <= SPLIT_MIN_FRACTION * n:
                self.product = "tf32"
        elif counts["rechecked"] > 2 * SPLIT_MIN_FRACTION * n:
            self.product = "split"

    def _update(self, starts, state=None, n_iter=None, consistent=None, tol_abs=0.0,
                max_iter=0):
        S, k, d = self.centers.shape
        self._update_fn((len(starts),), (UPDATE_BLOCK,),
                        (self._slot_array(starts), np.int32(k), np.int32(d), self.sums,
                         self.changed, self.centers, self.neg2c, self.c_sq, self.counts,
                         self.status, _pointer(state), _pointer(n_iter), _pointer(consistent),
                         np.float64(tol_abs), np.int32(max_iter)))

    def step(self, active):
        """One Lloyd step of the restarts `active` (indices): per restart, in that order,
        the labels changed, the empty clusters and the squared centre shift (NumPy)."""
        self.assign_sums(active)
        return self.update(active)

    def assign_sums(self, active):
        """The first half of :meth:`step`: the assignment of the restarts `active`, their
        float64 sums and labels changed left in ``sums[s]`` and ``changed[s]`` (where
        the worker-resident distributed loop adds them across processes)."""
        self._assign(active, True)
        if not (self.fused or self.tiled):
            # The centres the rows were assigned to, for re-seeding (the checked path's
            # `mind` holds TF32 distances; lloyd_update overwrites the centres).
            self._assigned_neg2c = self.neg2c.copy()

    def update(self, active):
        """The second half of :meth:`step`: ``lloyd_update`` from ``sums`` and
        ``changed`` (then zeroed); per restart the labels changed, the empty clusters
        and the squared centre shift (NumPy)."""
        m = len(active)
        self._update(active)
        status = self.status[: 3 * m].get().reshape(m, 3)
        return status[:, 0].astype(np.int64), status[:, 1].astype(np.int64), status[:, 2]

    def run(self, max_iter, tol_abs, check_every=None):
        """Lloyd's iterations of every restart to its stop, the rule decided on the
        device (``lloyd_update`` with a state per restart): the host launches
        `check_every` steps, then reads the states once, re-seeds the restarts paused
        on an empty cluster and drops the stopped ones from the launches. The fused
        and tiled paths (where launches, not rows, set the pace). The tiled path's
        sums kernel does not read the states: the sums it added for a restart after it
        stopped or paused are dropped when the states are read.

        Returns
        -------
        n_iter : numpy.ndarray of int64 (S,)
        consistent : numpy.ndarray of bool (S,)
            Whether each restart's labels are those of its final centres.
        steps : int
            Steps launched (the most of any restart, up to check_every - 1 more).
        """
        import cupy

        if not (self.fused or self.tiled):
            raise ValueError("DeviceStarts.run serves the fused and tiled steps only; use "
                             "step()")
        S = self.centers.shape[0]
        every = RUN_CHECK_EVERY if check_every is None else check_every
        state = cupy.zeros(S, dtype=cupy.int32)
        n_iter = cupy.zeros(S, dtype=cupy.int32)
        consistent = cupy.zeros(S, dtype=cupy.int32)
        running = list(range(S))
        steps = 0
        while running:
            for _ in range(every):
                self._assign(running, True, state)
                self._update(running, state, n_iter, consistent, tol_abs, max_iter)
                steps += 1
            now = state.get()
            idle = np.flatnonzero(now != 0)
            if self.tiled and idle.size:
                self.sums[cupy.asarray(idle)] = 0.0
            paused = np.flatnonzero(now == 2)
            if paused.size:
                status = self.status.get().reshape(S, 3)
                iters = n_iter.get()
                for s in paused:
                    self.reseed_empty(int(s), int(status[s, 1]))
                    stop = status[s, 0] == 0 or iters[s] >= max_iter
                    now[s] = 1 if stop else 0
                state[...] = cupy.asarray(now)
            running = [int(s) for s in np.flatnonzero(now == 0)]
        return n_iter.get().astype(np.int64), consistent.get().astype(bool), steps

    def reseed_empty(self, s, n_empty):
        """Move restart `s`'s empty clusters to its rows farthest from their centres."""
        import cupy

        _, far = self.farthest(s, n_empty)
        self.place_empty(s, self.X[far].astype(cupy.float64))

    def farthest(self, s, count):
        """Restart `s`'s `count` rows farthest from the centres they were assigned to:
        ``(squared distances, rows)``, largest first (CuPy)."""
        import cupy

        if not (self.fused or self.tiled):
            # TF32 distances: the float32 ones to the centres of the assignment (as the
            # other paths and the CPU rank them) instead.
            diff = self.X - (self._assigned_neg2c[s] * -0.5)[self.labels[s]]
            self.mind[s] = cupy.einsum("ij,ij->i", diff, diff)
        far = cupy.argsort(-self.mind[s])[:count]
        return self.mind[s][far], far

    def place_empty(self, s, rows):
        """Move restart `s`'s empty clusters (in cluster order) to `rows` (float64, one
        per empty cluster)."""
        import cupy

        empty = cupy.flatnonzero(self.counts[s] == 0)
        self.centers[s, empty] = cupy.asarray(rows, dtype=cupy.float64)
        C32, c_sq = _float32_centres(self.centers[s])
        self.neg2c[s] = -2.0 * C32
        self.c_sq[s] = c_sq

    def assign(self, starts):
        """Labels of the restarts `starts` for their current centres."""
        self._assign(list(starts), False)

    def inertia(self):
        """The float64 inertia of every restart (NumPy, shape (S,))."""
        return squared_errors(self.X, self.centers, self.labels)

    def result(self, s):
        """Restart `s`'s centres (k x d, float64) and labels (n, int32), as copies (the
        arrays of all restarts are then released)."""
        return self.centers[s].copy(), self.labels[s].copy()


def _sqdist(X, x_sq, C):
    """Squared distances (float32, clipped at 0) of the rows of X to the rows of C: the
    k-means++ seeding's first step (the kernels take plain arrays, not the library)."""
    import cupy

    D = X @ (-2.0 * C.T)
    D += (C * C).sum(axis=1)[None, :]
    D += x_sq[:, None]
    return cupy.maximum(D, 0, out=D)


#: Values of one block of rows × width (the GPU's block of a product).
_BLOCK_VALUES = 1 << 24


def _chunk_rows(width: int) -> int:
    """Rows per block of an n × `width` product on the GPU, at least 1024."""
    return max(1024, _BLOCK_VALUES // max(1, width))
