"""k nearest neighbours on the GPU (``knn.cu``): the grid for low d, cuBLAS tiles for high d.

Both launchers return, for every point, its k nearest other points sorted by (key,
index) and their float64 values computed as the float64 reference computes them
(squared distance feature by feature, cosine as dot / (|a| |b|); no fused
multiply-add), so the lists equal the reference's wherever the candidates hold the
true k nearest:

- :func:`knn_grid` (squared distances): points sorted into a uniform grid over up to
  three features (those spanning the most), about :data:`GRID_OCCUPANCY` points per
  cell; one thread per point visits rings of cells until its k-th value is below the
  least distance any unvisited cell allows. Exact: it decides every pair it keeps on
  float64 values and stops only when no unvisited point can be nearer or tie.
- :func:`knn_gemm` (squared distances or cosines): row blocks against all points by
  one cuBLAS product each on tensor cores (centred data, or unit rows for cosine):
  fp16 operands (scaled by a power of two into [-1, 1]) with fp32 accumulation into an
  fp16 tile, or float32 operands on TF32 into a float32 tile where fp16 cannot carry
  the data (:func:`fp16_scale`);
  one warp per row keeps its best ``C = min(n - 1, 2k + GEMM_EXTRA)`` columns by the
  float32 key and the key of the C-th (the cut): for C <= :data:`SELECT_MAX_C` by a
  bound and a filter (``knn_tile_select``: the C-th least of 256 strided groups'
  least keys on a quarter of the columns bounds the C-th key from above; the columns
  at or below it, about 4C, are ranked in shared memory), else, and for the rows
  whose filter overflows (ties at the bound), by per-lane sorted lists
  (``knn_tile_topk``); both list the same columns. A thread per candidate re-evaluates it
  in float64 and a thread per row keeps the best k. A row is settled when its k-th
  float64 value lies below the cut by more than :func:`key_slack`, the bound on the
  difference between a tile's key and the reference's (TF32 products: ``|Δ(x·y)| <=
  (2·2⁻¹⁰ + 2⁻²⁰ + 2(d + 2)·2⁻²⁴) ||x|| ||y||``, :mod:`._tf32`): every column left out
  is then strictly farther than the k-th (fp16 tiles: :func:`.gemm.gemm_error_bound`
  in the data's units, :func:`slack_coefficients`). For squared distances the bound
  grows with the column's norm r, but so does its least distance, ``(r - ||zi||)²``: the
  row is settled when its k-th value lies below the least, over every r up to the
  largest norm, of the larger of the two lower bounds on a left-out column's distance
  (``knn_settle_bound``), so a few rows of huge norm (standardised rare features) do
  not leave every other row to the float64 re-decision. The other rows (ties or
  near-ties at the cut: duplicates, lattices) are decided again from float64 products
  against every point: every column within twice the float64 bound of the row's k-th
  value is evaluated exactly. So the lists equal the reference's, ties by the lower index included.

This module knows CuPy only; the graph layer (``explorer.graph._knn_gpu``) validates
input and holds the defaults. CuPy is imported when a launcher runs.
"""

from __future__ import annotations

import math

import numpy as np

from ._launch import StageTimer
from ._loader import get_module
from ._tf32 import POINTER_MODE_HOST, U32, dot_error, tf32_product
from .gemm import TileGemm, gemm_error_bound, padded_width

#: Largest k the kernels' per-thread lists hold (the graph layer's MAX_NEIGHBORS).
MAX_K = 256

#: Candidates per row of the GEMM path beyond k: ``C = min(n - 1, 2k + GEMM_EXTRA)``.
GEMM_EXTRA = 8

#: Factor on :func:`key_slack` (covers the float64 evaluation of the bound itself).
SLACK_SAFETY = 1.25

#: Unit roundoff of float64.
_U64 = 2.0**-53

#: Points per grid cell aimed at (over the bounding box of the cell features).
GRID_OCCUPANCY = 2.0

#: Most features that make grid cells.
GRID_CELL_DIMS = 3

#: Largest C listed by ``knn_tile_select`` (the bound and filter); larger C by lists.
SELECT_MAX_C = 64

#: Columns a row's filter buffer holds (``knn.cu``'s SELECT_CAP).
SELECT_CAP = 512

#: Bytes of one float32 similarity tile of the GEMM path, at least (memory allowing).
TILE_BYTES = 1 << 30

#: Rows of a tile aimed at: one warp a row, enough warps to fill a large GPU while a
#: row of 10⁵ columns takes one warp thousands of steps.
TILE_ROWS = 8192

#: Share of the free device memory a tile may take.
TILE_FREE_SHARE = 0.25

#: Most features the fp16 tile takes: products of entries in [-1, 1] sum to at most d,
#: far inside fp16's range (65504).
FP16_MAX_D = 16384

#: Largest |log2| of the fp16 operand's scale (s² and 1/s² stay normal float32).
FP16_MAX_EXPONENT = 60


def tile_bytes_for(n: int) -> int:
    """Bytes of the GEMM path's float32 tile for n points: :data:`TILE_ROWS` rows (at
    least :data:`TILE_BYTES`), within :data:`TILE_FREE_SHARE` of the free device memory.
    """
    from ._launch import free_device_bytes

    want = max(TILE_BYTES, 4 * n * min(n, TILE_ROWS))
    return int(min(want, max(4 * n * 32, TILE_FREE_SHARE * free_device_bytes())))

_BLOCK = 128


def _kmax(k: int) -> int:
    """The list capacity compiled for k: the next power of two >= k (at least 8)."""
    return max(8, 1 << (int(k) - 1).bit_length())


def _module(k: int, dc: int | None = None, half: bool = False):
    defines = [f"-DKMAX={_kmax(k)}"]
    if dc is not None:
        defines.append(f"-DDC={dc}")
    if half:
        defines.append("-DTILE_HALF")
    return get_module("knn", tuple(defines))


def _check(X, k: int):
    import cupy

    if not isinstance(X, cupy.ndarray) or X.dtype != cupy.float32 or X.ndim != 2:
        raise TypeError("X must be a 2-D cupy float32 array; got "
                        f"{type(X).__name__} {getattr(X, 'dtype', '')}")
    if not X.flags.c_contiguous:
        raise ValueError("X must be C-contiguous; pass cupy.ascontiguousarray(X)")
    n = X.shape[0]
    if not 1 <= k <= min(MAX_K, n - 1):
        raise ValueError(f"k={k} is not allowed; use 1 <= k <= min({MAX_K}, n - 1 = {n - 1})")


def plan_cells(lo, hi, n: int):
    """Cell features, side h and cells per feature for the grid of :func:`knn_grid`.

    The up to :data:`GRID_CELL_DIMS` features with the largest extents (zero extents
    get one cell); h makes about ``n / GRID_OCCUPANCY`` cells over their box.

    Returns
    -------
    features : list of int
    h : float
    dims : list of int
    """
    ext = np.asarray(hi, dtype=np.float64) - np.asarray(lo, dtype=np.float64)
    order = np.argsort(-ext, kind="stable")[:GRID_CELL_DIMS]
    features = [int(f) for f in order if ext[f] > 0]
    if not features:  # every point equal: one cell
        return [int(order[0])], 1.0, [1]
    cells = max(1.0, n / GRID_OCCUPANCY)
    while True:  # features narrower than a cell would add one cell each: drop them
        h = math.exp((sum(math.log(ext[f]) for f in features) - math.log(cells))
                     / len(features))
        kept = [f for f in features if ext[f] >= h]
        if len(kept) == len(features):
            break
        features = kept
    dims = [int(math.floor(float(ext[f]) / h)) + 1 for f in features]
    while float(np.prod(dims, dtype=np.float64)) > 4.0 * cells + 16:
        h *= 1.25
        dims = [int(math.floor(float(ext[f]) / h)) + 1 for f in features]
    return features, h, dims


def knn_grid(X, k: int, *, timer: StageTimer | None = None):
    """The k nearest other points of each row of `X` by squared distance, via a grid.

    Parameters
    ----------
    X : cupy.ndarray of shape (n, d), float32, C-contiguous
    k : int
        ``1 <= k <= min(MAX_K, n - 1)``.
    timer : StageTimer, optional
        Records ``"cells"`` and ``"search"``.

    Returns
    -------
    neighbors : cupy.ndarray of int64, shape (n, k)
    sqdist : cupy.ndarray of float64, shape (n, k)
    info : dict
        ``cell_features``, ``cell_side``, ``cells``.
    """
    import cupy

    _check(X, k)
    timer = timer or StageTimer()
    n, d = X.shape
    with timer("cells"):
        lo = X.min(axis=0).get()
        hi = X.max(axis=0).get()
        features, h, dims = plan_cells(lo, hi, n)
        dc = len(features)
        sub = X[:, features].astype(cupy.float64)
        coords = cupy.floor((sub - cupy.asarray(lo[features], dtype=cupy.float64)) / h)
        coords = cupy.clip(coords, 0, cupy.asarray(dims) - 1).astype(cupy.int32)
        cell = cupy.zeros(n, dtype=cupy.int64)
        for a in range(dc):
            cell = cell * dims[a] + coords[:, a]
        perm = cupy.argsort(cell)
        n_cells = int(np.prod(dims))
        start = cupy.searchsorted(cell[perm], cupy.arange(n_cells + 1, dtype=cupy.int64))
        Xs = cupy.ascontiguousarray(X[perm])
        cellc = cupy.ascontiguousarray(coords[perm])
        perm = perm.astype(cupy.int64)
    idx = cupy.empty((n, k), dtype=cupy.int64)
    val = cupy.empty((n, k), dtype=cupy.float64)
    padded = list(dims) + [1] * (3 - dc)
    kernel = _module(k, dc).get_function("knn_grid")
    with timer("search"):
        kernel(((n + _BLOCK - 1) // _BLOCK,), (_BLOCK,),
               (Xs, perm, cellc, start, np.int32(padded[0]), np.int32(padded[1]),
                np.int32(padded[2]), np.int32(n), np.int32(d), np.int32(k), np.float64(h),
                idx, val))
    return idx, val, {"cell_features": features, "cell_side": h, "cells": dims}


def reference_norms(X):
    """Float64 row norms accumulated feature by feature (the reference's order)."""
    import cupy

    acc = cupy.zeros(X.shape[0], dtype=cupy.float64)
    for f in range(X.shape[1]):
        col = X[:, f].astype(cupy.float64)
        col *= col
        acc += col
    return cupy.sqrt(acc)


def key_slack(zn, M: float, d: int, cosine: bool, product: str, inv_scale: float = 1.0):
    """Per-row bound on ``|key - reference key|`` for the keys of :func:`knn_gemm`.

    A key is formed from ``Z``, the float32 data centred (or unit rows for cosine),
    by a product ``G = Z_rows Zᵀ``: the squared distance ``(‖zi‖² + ‖zj‖²) - 2 gij``
    (float32 squared norms for the tensor-core tiles; float64 and without ``‖zi‖²``
    for the float64 products, a shift the same for every column of the row) or
    ``-gij``. Its distance to the reference's key of the pair (the float64 squared
    distance of the rows of X, or minus their cosine) is at most

        ``SLACK_SAFETY · (a ‖zi‖ M + b (‖zi‖ + M)² + l (‖zi‖ + M) + c)``,

    ``M`` the largest ``‖zj‖``: ``a = 2ε`` (cosine ``ε``) for the product, ``ε`` the
    TF32 :func:`~._tf32.dot_error`, the fp16 tile's relative coefficient or
    ``2 (d + 2) 2⁻⁵³`` for float64; ``b`` sums the squared norms' and the additions'
    rounding (``(d + 5) 2⁻²⁴`` in float32, ``(d + 4) 2⁻⁵³`` in float64; none for
    cosine) and ``8·2⁻²⁴ + 2 (d + 4) 2⁻⁵³`` for Z against X (each coordinate of ``Z``
    within 2⁻²⁴ of its own size, after centring or normalising) and the reference's
    own float64 rounding; ``l`` and ``c``, fp16 tiles only, their absolute error
    (subnormals), see :func:`slack_coefficients`. Unit rows have norms near 1, so
    ``(‖zi‖ + M)² ≈ 4`` covers cosine's constant terms.

    Parameters
    ----------
    zn : array of float64
        ``‖zi‖`` of the rows (NumPy or CuPy).
    M : float
        The largest row norm.
    d : int
    cosine : bool
    product : {"fp16", "tf32", "float64"}
    inv_scale : float
        ``1/s`` of the fp16 operand (:func:`fp16_scale`); unused by the others.

    Returns
    -------
    array of float64, like `zn`
    """
    a, b, l, c = slack_coefficients(d, cosine, product, inv_scale)
    return SLACK_SAFETY * (a * zn * M + b * (zn + M) ** 2 + l * (zn + M) + c)


def slack_coefficients(d: int, cosine: bool, product: str,
                       inv_scale: float = 1.0) -> tuple[float, float, float, float]:
    """``(a, b, l, c)`` of :func:`key_slack`'s bound ``SLACK_SAFETY · (a ‖zi‖ M + b (‖zi‖
    + M)² + l (‖zi‖ + M) + c)``, which holds with ``M`` any bound on the column's norm
    ``‖zj‖``.

    The fp16 tile (rows ``y = s z`` with every entry in [-1, 1], ``T = 1/s`` =
    `inv_scale`) has ``|ŝ − y_i·y_j| <= A r_i r_j + B (r_i + r_j) + C``
    (:func:`.gemm.gemm_error_bound`, ``r = ‖y‖``); its value times ``T²`` is then within
    ``A ‖zi‖ ‖zj‖ + B T (‖zi‖ + ‖zj‖) + C T²`` of ``zi·zj``, doubled in a squared
    distance's key. TF32 and float64 products have no absolute terms (``l = c = 0``).
    """
    l = c = 0.0
    if product == "tf32":
        eps, norms_rounding = dot_error(d), (d + 5) * U32
    elif product == "fp16":
        eps, coef_b, coef_c = gemm_error_bound(d, padded_width(d))
        norms_rounding = (d + 5) * U32
        l, c = coef_b * inv_scale, coef_c * inv_scale * inv_scale
    else:
        eps, norms_rounding = 2 * (d + 2) * _U64, (d + 4) * _U64
    data = 8 * U32 + 2 * (d + 4) * _U64
    if cosine:
        return eps, data, l, c
    return 2 * eps, norms_rounding + data, 2 * l, 2 * c


def fp16_scale(Z) -> float | None:
    """The power of two s that brings every entry of `Z` into [-1, 1) (``s max|z|`` in
    [1/2, 1)), when the fp16 tile may serve `Z`: its entries' products then sum to at
    most d in magnitude (inside fp16's range for d <= :data:`FP16_MAX_D`) and s² and
    1/s² are normal float32 values; None otherwise (all-zero `Z` included)."""
    d = Z.shape[1]
    top = float(abs(Z).max()) if Z.size else 0.0
    if d > FP16_MAX_D or not math.isfinite(top) or top == 0.0:
        return None
    e = math.frexp(top)[1]
    return 2.0**-e if abs(e) <= FP16_MAX_EXPONENT else None


def knn_gemm(X, k: int, cosine: bool, *, tile_bytes: int | None = None,
             select: str = "auto", product: str = "auto", timer: StageTimer | None = None):
    """The k nearest other points of each row of `X` via tensor-core tiles (see the
    module).

    Parameters
    ----------
    X : cupy.ndarray of shape (n, d), float32, C-contiguous
    k : int
    cosine : bool
        Nearest by cosine (largest first; zero rows get no neighbours and are nobody's)
        instead of squared distance.
    tile_bytes : int, optional
        Bytes of one float32 tile (rows × n): the row block is ``tile_bytes // (4 n)``
        rows, at least 32; the float64 re-decision takes blocks of half as many rows.
        Default :func:`tile_bytes_for`.
    select : {"auto", "bound", "lists"}
        How each tile row's C best are found: ``"bound"`` (the bound and filter, then
        lists for the rows it leaves), ``"lists"`` (lists only), ``"auto"`` the bound
        when C <= :data:`SELECT_MAX_C`. The same columns either way.
    product : {"auto", "fp16", "tf32"}
        The tile: ``"fp16"`` (the rows scaled by a power of two into [-1, 1] and
        rounded to fp16, fp32 accumulation, fp16 tile: twice the tensor-core rate of
        TF32 and half the tile's bytes, with a wider bound), ``"tf32"`` (float32
        operands on TF32 tensor cores, float32 tile); ``"auto"`` fp16 where
        :func:`fp16_scale` allows it. The same lists either way (only the rows
        decided again may differ).
    timer : StageTimer, optional
        Records ``"prepare"``, ``"gemm"``, ``"topk"``, ``"refine"`` and ``"recheck"``.

    Returns
    -------
    neighbors : cupy.ndarray of int64, shape (n, k), -1 padded
    compared : cupy.ndarray of float64, shape (n, k): squared distances or cosines
        Equal to :func:`explorer.graph.reference.reference_knn`'s, bit for bit.
    info : dict
        ``candidates`` per row, ``block_rows``, ``select`` (how the candidates were
        found), ``rows_listed`` (rows whose candidates came from the lists kernel: all
        with ``"lists"``, those the filter overflowed with ``"bound"``) and
        ``rows_rechecked`` (rows decided again from float64 products), ``product``.
    """
    import cupy
    from cupy.cuda import device
    from cupy_backends.cuda.libs import cublas

    _check(X, k)
    timer = timer or StageTimer()
    n, d = X.shape
    C = min(n - 1, 2 * k + GEMM_EXTRA)
    if select not in ("auto", "bound", "lists"):
        raise ValueError(f"select={select!r}: expected 'auto', 'bound' or 'lists'")
    if product not in ("auto", "fp16", "tf32"):
        raise ValueError(f"product={product!r}: expected 'auto', 'fp16' or 'tf32'")
    bounded = select == "bound" or (select == "auto" and C <= SELECT_MAX_C)
    if bounded and (C > SELECT_MAX_C or n >= 2**31):
        raise ValueError(f"select='bound' needs C <= {SELECT_MAX_C} (C = {C}) and "
                         f"n < 2**31 (n = {n})")
    with timer("prepare"):
        if cosine:
            norms = reference_norms(X)
            valid = norms > 0
            Z = (X / cupy.where(valid, norms, 1.0).astype(cupy.float32)[:, None])
            Z = cupy.ascontiguousarray(cupy.where(valid[:, None], Z, 0).astype(cupy.float32))
            sq = None
        else:
            norms = None
            Z = cupy.ascontiguousarray(X - X.mean(axis=0, dtype=cupy.float64).astype(
                cupy.float32))
            valid = None
        squares = Z * Z
        if not cosine:
            sq = cupy.ascontiguousarray(squares.sum(axis=1))
        zn = cupy.sqrt(squares.sum(axis=1, dtype=cupy.float64))
        del squares
        M = float(zn.max())
        scale = fp16_scale(Z) if product != "tf32" else None
        if product == "fp16" and scale is None:
            raise ValueError(f"product='fp16' needs d <= {FP16_MAX_D} and data whose "
                             "scale fp16 can carry; use product='tf32' or 'auto'")
        half = scale is not None  # the fp16 tile
        product = "fp16" if half else "tf32"
        if half:  # exact scaling (a power of two), one rounding to fp16, zero padding
            H = cupy.zeros((n, padded_width(d)), dtype=cupy.float16)
            H[:, :d] = Z * np.float32(scale)
        inv_scale = 1.0 / scale if half else 1.0
        slack = key_slack(zn, M, d, cosine, product, inv_scale)
        coef = slack_coefficients(d, cosine, product, inv_scale)
        if valid is not None:
            valid = valid.astype(cupy.uint8)
    module = _module(C, half=half)
    topk = module.get_function("knn_tile_topk")
    bound = module.get_function("knn_tile_select") if bounded else None
    pair_keys = module.get_function("knn_pair_keys")
    refine = module.get_function("knn_refine")
    if tile_bytes is None:
        tile_bytes = tile_bytes_for(n)
    block_rows = int(max(32, min(n, tile_bytes // (4 * n))))
    # Tile rows (and sq) padded to whole 16-byte loads of knn_tile_select.
    vec = 16 // (2 if half else 4)
    ldg = -(-n // vec) * vec
    if sq is not None:
        sq = cupy.concatenate([sq, cupy.zeros(ldg - n, dtype=sq.dtype)])
    idx = cupy.empty((n, k), dtype=cupy.int64)
    val = cupy.empty((n, k), dtype=cupy.float64)
    G = cupy.empty((block_rows, ldg), dtype=cupy.float16 if half else cupy.float32)
    tile_scale = np.float32(1.0 / (scale * scale) if half else 1.0)  # exact: a power of two
    cand = cupy.empty((block_rows, C), dtype=cupy.int64)
    keys = cupy.empty((block_rows, C), dtype=cupy.float64)
    cut = cupy.empty(block_rows, dtype=cupy.float32)
    only = cupy.empty(block_rows, dtype=cupy.int32) if bounded else None
    listed = cupy.zeros(1, dtype=cupy.int64)
    pending = cupy.empty(n, dtype=cupy.int64)
    n_pending = cupy.zeros(1, dtype=cupy.uint64)
    null = np.uint64(0)  # a null pointer
    handle = device.get_cublas_handle()
    mode = cublas.getPointerMode(handle)
    cublas.setPointerMode(handle, POINTER_MODE_HOST)
    fp16 = TileGemm() if half else None
    try:
        for r0 in range(0, n, block_rows):
            rows = min(block_rows, n - r0)
            with timer("gemm"):
                if half:
                    fp16.tile(H, H[r0 : r0 + rows], G[:rows], ldg)
                else:
                    tf32_product(handle, cublas, Z, Z[r0 : r0 + rows], G[:rows], ldg)
            with timer("topk"):
                threads = rows * 32
                grid = ((threads + _BLOCK - 1) // _BLOCK,)
                args = (G, np.int64(ldg), np.int32(rows), np.int64(n), np.int64(r0),
                        null if sq is None else sq, tile_scale, valid if cosine else null,
                        np.int32(C), cand, cut)
                if bound is not None:
                    bound(grid, (_BLOCK,), (*args, only),
                          shared_mem=(_BLOCK // 32) * SELECT_CAP * 8)
                topk(grid, (_BLOCK,), (*args, null if only is None else only))
                listed += rows if only is None else only[:rows].sum()
            with timer("refine"):
                pairs = rows * C
                pair_keys(((pairs + _BLOCK - 1) // _BLOCK,), (_BLOCK,),
                          (X, np.int32(d), np.int64(r0), np.int32(rows), cand, np.int32(C),
                           np.int32(1 if cosine else 0), null if norms is None else norms,
                           keys))
                refine(((rows + _BLOCK - 1) // _BLOCK,), (_BLOCK,),
                       (np.int64(r0), np.int32(rows), cand, keys, np.int32(C), np.int32(k),
                        np.int32(1 if cosine else 0), cut, slack,
                        null if cosine else zn, np.float64(M), np.float64(coef[0]),
                        np.float64(coef[1]), np.float64(coef[2]), np.float64(coef[3]),
                        np.float64(SLACK_SAFETY), np.int32(d),
                        np.int32(1 if C == n - 1 else 0), idx, val, pending, n_pending))
    finally:
        if fp16 is not None:
            fp16.close()
        cublas.setPointerMode(handle, mode)
    del G
    m = int(n_pending.get()[0])
    if m:
        with timer("recheck"):
            _decide_rows(X, Z, pending[:m], k, cosine, norms, zn, M, module, idx, val,
                         tile_bytes)
    return idx, val, {"candidates": C, "block_rows": block_rows,
                      "select": "bound" if bounded else "lists",
                      "rows_listed": int(listed.get()[0]), "rows_rechecked": m,
                      "product": product}


def _decide_rows(X, Z, rows, k, cosine, norms, zn, M, module, idx, val, tile_bytes):
    """The k nearest of each of `rows` (int64) from float64 products against every point:
    every column whose float64 key is within twice :func:`key_slack` of the row's k-th
    float64 key (a superset of the reference's k nearest and of their ties) is evaluated
    exactly by ``knn_rows_exact``, which writes the rows of `idx` and `val`."""
    import cupy

    n, d = X.shape
    Z64 = Z.astype(cupy.float64)
    sq64 = None if cosine else (Z64 * Z64).sum(axis=1)
    invalid = None if norms is None else cupy.flatnonzero(norms == 0)
    kernel = module.get_function("knn_rows_exact")
    null = np.uint64(0)
    step = int(max(1, tile_bytes // (8 * n)))
    for s in range(0, rows.shape[0], step):
        part = rows[s : s + step]
        p = part.shape[0]
        key = Z64[part] @ Z64.T
        if cosine:
            cupy.negative(key, out=key)
        else:
            key *= -2.0
            key += sq64[None, :]
        key[cupy.arange(p), part] = cupy.inf
        if invalid is not None and invalid.size:
            key[:, invalid] = cupy.inf
        kth = cupy.partition(key, k - 1, axis=1)[:, k - 1]
        band = kth + 2.0 * key_slack(zn[part], M, d, cosine, "float64")
        r, c = cupy.nonzero((key <= band[:, None]) & cupy.isfinite(key))
        del key
        seg = cupy.searchsorted(r, cupy.arange(p + 1, dtype=r.dtype))
        kernel(((p + _BLOCK - 1) // _BLOCK,), (_BLOCK,),
               (X, np.int32(d), cupy.ascontiguousarray(part), np.int32(p), seg,
                cupy.ascontiguousarray(c), np.int32(k), np.int32(1 if cosine else 0),
                null if norms is None else norms, idx, val))
