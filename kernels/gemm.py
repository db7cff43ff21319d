"""``method="gemm"``: the ε-graph of high-dimensional data from tensor-core products.

All n² similarities of high-d data are a matrix product, which tensor cores compute
an order of magnitude faster than CUDA cores, in reduced precision. This builder
uses them to *screen* pairs and never to decide one:

1. ``gemm_prepare`` scales each row (cosine: to unit length; distance rules: centred
   and scaled by a power of two into [-1, 1]) in double and rounds it once to fp16.
2. Row block by row block, cuBLAS computes the fp16 tile ``H[rows] · H[rows₀:]ᵀ``
   (fp32 accumulation, fp16 output, upper block triangle only: the matrix is
   symmetric). Tiles are bounded (``tile_bytes``), never n × n.
3. ``gemm_tile_edges`` keeps the pairs whose tile value passes the threshold widened
   by a proven bound on the GEMM's error (:func:`gemm_error_bound`), re-computes
   each of them with the float32 arithmetic of the CSR kernels on the original data
   (a direct dot product or squared distance, one warp per pair), decides and weighs
   it with edge_rule.cuh (the rule every kernel shares) and appends the edges
   (i < j) with their exact weights to a COO list.
4. The COO pairs become the symmetric canonical CSR (both ends of each pair,
   counted, scanned, scattered, rows sorted: :func:`.grid.sort_rows`).

Every pair the float32 decision accepts passes the screen, so the graph is the one a
float32 brute-force builder gives: it equals the float64 reference outside the
rounding band (docs/architecture.md "Semantics"), and its weights are exact float32 values, not
GEMM values. docs/fast-builders.md derives the bound and the costs.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from ._launch import Rule, StageTimer, free_device_bytes, scan
from ._loader import get_module
from .grid import (
    check_device_data,
    check_option,
    check_row_range,
    check_row_sort,
    check_rule,
    empty_rows,
    launch,
    make_csr,
    sort_rows,
)

#: fp16 unit roundoff (round to nearest) and the largest rounding error of an fp16
#: subnormal (spacing 2^-24).
U_HALF = 2.0**-11
A_HALF = 2.0**-25

#: Unit roundoff assumed for the tensor cores' fp32 accumulation: 2^-23 allows
#: truncation instead of rounding (tensor cores align and truncate).
U_ACC = 2.0**-23

#: float32 unit roundoff (the exact re-check).
U_SINGLE = 2.0**-24

#: Factor on every bound: covers float32 evaluation of the screen, the double
#: scaling of the rows and rounding of the norms (all below 1e-6 relative).
SAFETY = 1.01

#: Default bytes of the fp16 tile (row block × columns).
TILE_BYTES = 1 << 30

#: Columns per warp work item in ``gemm_tile_edges``.
SEG_COLS = 8192

#: Rows sampled (evenly spaced) to estimate the number of edges before allocating.
SAMPLE_ROWS = 256

#: Estimated edge count is scaled by this (plus :data:`CAP_SLACK`) to size the COO
#: list; a short list costs a second pass, never a wrong graph.
CAP_MARGIN = 1.25
CAP_SLACK = 1 << 16

#: Bytes per stored entry while the CSR is assembled (COO pair, counts, unsorted and
#: sorted CSR): used to refuse, before building, a graph that cannot fit.
BYTES_PER_NNZ = 28

# cuBLAS enum values (cublas_api.h, library_types.h); CuPy's wrapper does not export
# every one of them by name.
_OP_N, _OP_T = 0, 1
_POINTER_MODE_HOST = 0
_COMPUTE_32F = 68
_GEMM_DEFAULT = -1
_R_16F = 2
_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION = 16


def padded_width(d: int) -> int:
    """Columns of an fp16 operand: d rounded up to a multiple of 8 (zeros added), the
    alignment cuBLAS's fp16 tensor-core kernels take."""
    return -(-d // 8) * 8


def gemm_error_bound(d: int, d_pad: int):
    """Coefficients ``(A, B, C)`` of the bound ``|ŝ − yᵢ·yⱼ| <= A rᵢrⱼ + B (rᵢ + rⱼ) + C``.

    ``ŝ`` is the fp16 tile value cuBLAS returns for rows ``yᵢ``, ``yⱼ`` (of norms
    ``rᵢ``, ``rⱼ``, entries in [-1, 1]) rounded to fp16 ``hᵢ``, ``hⱼ``, with fp32
    accumulation over ``d_pad`` terms (reductions kept in fp32). Derivation in
    docs/fast-builders.md:

    * inputs: ``|h − y| <= U_HALF |y| + A_HALF``, so
      ``|Σhᵢhⱼ − Σyᵢyⱼ| <= (2u + u²) rᵢrⱼ + a (1 + u) √d (rᵢ + rⱼ) + d a²``;
    * accumulation and fp16 output: ``(γ + u (1 + γ)) Σ|hᵢ||hⱼ| + a`` with
      ``γ = d_pad U_ACC / (1 − d_pad U_ACC)`` and
      ``Σ|hᵢ||hⱼ| <= (rᵢ(1 + u) + √d a)(rⱼ(1 + u) + √d a)``.
    """
    u, a = U_HALF, A_HALF
    g = d_pad * U_ACC / (1.0 - d_pad * U_ACC)
    k = g + u * (1.0 + g)
    sq = math.sqrt(d)
    coef_a = 2 * u + u * u + k * (1 + u) ** 2
    coef_b = a * (1 + u) * sq * (1 + k)
    coef_c = d * a * a * (1 + k) + a
    return coef_a, coef_b, coef_c


def _screen(rule: Rule, d: int, d_pad: int, scale: float):
    """Screen threshold and band coefficients ``(screen, A, B, C, Cn)`` for the kernel.

    Cosine (unit rows, r = 1): keep ``ŝ > t − δ`` with δ the GEMM bound plus the
    float32 re-check's own error ``(d + 10) 2^-24`` (so every pair the re-check
    accepts is kept) and the rounding of t. Distances (scaled units, s = `scale`):
    keep ``nnᵢ + nnⱼ − 2ŝ < s² t (1 + (d + 12) 2^-24) + band`` with
    ``band = 2 (A rᵢrⱼ + B (rᵢ + rⱼ) + C) + Cn (nnᵢ + nnⱼ)``; ``Cn`` covers the float32
    norms and the float32 evaluation of the left side.
    """
    coef_a, coef_b, coef_c = gemm_error_bound(d, d_pad)
    if rule.is_cosine:
        t = rule.threshold
        delta = coef_a + 2 * coef_b + coef_c + (d + 10) * U_SINGLE + U_SINGLE * abs(t)
        screen = np.nextafter(np.float32(t - SAFETY * delta - 2**-22), np.float32(-np.inf))
        return screen, 0.0, 0.0, 0.0, 0.0
    ts = scale * scale * rule.threshold * (1 + (d + 12) * U_SINGLE) * (1 + 2**-20)
    screen = np.nextafter(np.float32(ts), np.float32(np.inf))
    return (screen, SAFETY * 2 * coef_a, SAFETY * 2 * coef_b, SAFETY * 2 * coef_c, 2.0**-21)


@functools.cache
def _module(rule_defines: tuple):
    return get_module("gemm", defines=rule_defines)


@functools.cache
def _kernel(rule_defines: tuple, name: str):
    return _module(rule_defines).get_function(name)


def _cublas():
    from cupy.cuda import device
    from cupy_backends.cuda.libs import cublas

    return cublas, device.get_cublas_handle()


class TileGemm:
    """fp16 × fp16 → fp16 tiles with fp32 accumulation and fp32 split-K reductions: the
    builder's tile product (public so that benchmarks can time it alone).

    The cuBLAS handle is CuPy's; its pointer and math modes are set for the calls
    and restored by :meth:`close`.

    >>> gemm = TileGemm()  # doctest: +SKIP
    >>> try:
    ...     gemm.tile(H, H, C, ldc)  # C[r, c] = H[r] · H[c]
    ... finally:
    ...     gemm.close()
    """

    def __init__(self):
        self.cublas, self.handle = _cublas()
        cb = self.cublas
        self._modes = (cb.getPointerMode(self.handle), cb.getMathMode(self.handle))
        cb.setPointerMode(self.handle, _POINTER_MODE_HOST)
        # Without this flag cuBLAS may reduce split-K partial sums in the output type
        # (fp16), which the error bound does not allow for.
        cb.setMathMode(self.handle, self._modes[1] | _MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)
        self._one = np.ones(1, dtype=np.float32)
        self._zero = np.zeros(1, dtype=np.float32)

    def tile(self, A, B, C, ldc: int) -> None:
        """``C[r, c] = B[r] · A[c]`` for the rows of `A` (columns) and `B` (rows), fp16 in.

        Row-major C (len(B) × ldc) is column-major ``A · Bᵀ``: a "TN" product.
        """
        k = A.shape[1]
        self.cublas.gemmEx(
            self.handle, _OP_T, _OP_N, A.shape[0], B.shape[0], k,
            self._one.ctypes.data, A.data.ptr, _R_16F, k, B.data.ptr, _R_16F, k,
            self._zero.ctypes.data, C.data.ptr, _R_16F, ldc, _COMPUTE_32F, _GEMM_DEFAULT)

    def close(self) -> None:
        self.cublas.setPointerMode(self.handle, self._modes[0])
        self.cublas.setMathMode(self.handle, self._modes[1])


def _prepare(X, rule: Rule):
    """fp16 rows H (n × d_pad), norms, and the scale of the distance rules."""
    import cupy

    n, d = X.shape
    d_pad = padded_width(d)
    H = cupy.empty((n, d_pad), dtype=cupy.float16)
    nrm = cupy.empty(n, dtype=cupy.float32)
    if rule.is_cosine:
        rnrm = nrm  # unused by the cosine screen
        center = cupy.zeros(1, dtype=cupy.float64)
        scale = 1.0
        mode = 0
    else:
        rnrm = cupy.empty(n, dtype=cupy.float32)
        center = X.mean(axis=0, dtype=cupy.float64)
        lo, hi, c = (a.get() for a in (X.min(axis=0), X.max(axis=0), center))
        widest = float(np.max(np.maximum(hi.astype(np.float64) - c, c - lo.astype(np.float64))))
        # A power of two: scaling is exact and |y| <= 1, inside fp16's range.
        scale = 1.0 if widest <= 0.0 else 2.0 ** -math.frexp(widest)[1]
        mode = 1
    launch(_kernel(rule.defines, "gemm_prepare"), 32 * n,
           (X, np.int32(n), np.int32(d), np.int32(d_pad), np.int32(mode), center,
            np.float64(scale), H, nrm, rnrm))
    return H, nrm, rnrm, scale


def build_gemm(X, rule: Rule, *, tile_rows=None, tile_bytes=None, row_sort="auto"):
    """Build the graph from fp16 tensor-core tiles with an exact re-check (``method="gemm"``).

    Parameters
    ----------
    X : cupy.ndarray of shape (n, d), float32, C-contiguous
        Any d; it pays for d >= ~32, where a pair costs d multiply-adds.
    rule : Rule
        Any rule: cosine, gaussian or uniform (a gaussian similarity threshold is a
        squared-distance cutoff in ``rule.threshold``).
    tile_rows : int, optional
        Rows per tile (default: as many as `tile_bytes` allows, a multiple of 256).
    tile_bytes : int, optional
        Bytes of the fp16 tile (default 1 GiB, at most a quarter of free memory).
    row_sort : {"auto", "rank", "global"}
        How rows get ascending columns (:func:`.grid.sort_rows`).

    Returns
    -------
    csr : cupyx.scipy.sparse.csr_matrix
        Canonical: float32 exact weights, ascending columns, no diagonal, symmetric.
    timings : dict of str to float
        Seconds per stage (CUDA events): ``prepare``, ``estimate``, ``gemm`` (all
        tiles), ``screen`` (screen + re-check + append, all tiles), ``assemble``,
        ``sort``.
    info : dict
        Tile rows and count, the screen threshold, pairs re-checked, ``nnz``,
        ``max_row``, the row sort used, and whether the COO list was re-run.

    Raises
    ------
    TypeError, ValueError
        Bad `X` or options, or a graph estimated not to fit in GPU memory (the
        estimate is in the message).
    """
    import cupy

    X = check_device_data(X)
    check_rule(rule)
    n, d = X.shape
    tile_rows = check_option(tile_rows, "tile_rows", low=1)
    tile_bytes = check_option(tile_bytes, "tile_bytes", low=1)
    check_row_sort(row_sort)

    timer = StageTimer()
    with timer("prepare"):
        H, nrm, rnrm, scale = _prepare(X, rule)
    d_pad = H.shape[1]
    screen = _screen(rule, d, d_pad, scale)

    ldc = -(-n // 8) * 8
    tile_rows = min(_tile_rows(n, tile_rows, tile_bytes), n)
    gemm = TileGemm()
    try:
        screener = _Screener(X, rule, H, nrm, rnrm, screen, tile_rows, ldc, gemm)
        with timer("estimate"):
            cap, estimate = screener.estimate(n)
        pairs, checked = screener.run(cap, timer)
        rerun = pairs > cap
        if rerun:  # the estimate was short: run again with the exact size
            pairs, checked = screener.run(pairs, timer)
    finally:
        gemm.close()
    out, screener = screener.out, None

    with timer("assemble"):
        ei, ej, ev = (a[:pairs] for a in out)
        counts = cupy.zeros(n, dtype=cupy.int32)
        launch(_kernel(rule.defines, "coo_degrees"), pairs, (ei, ej, np.int64(pairs), counts))
        row_start = scan(counts)
        wide = counts.astype(cupy.int64)
        max_row, sum_sq = (int(v) for v in cupy.stack([wide.max(), (wide * wide).sum()]).get())
        nnz = 2 * pairs
        cols = cupy.empty(nnz, dtype=cupy.int32)
        vals = cupy.empty(nnz, dtype=cupy.float32)
        cursor = cupy.zeros(n, dtype=cupy.int32)
        launch(_kernel(rule.defines, "coo_to_rows"), pairs,
               (ei, ej, ev, np.int64(pairs), row_start, cursor, cols, vals))
        del out, ei, ej, ev, cursor
    with timer("sort"):
        indices, data, how = sort_rows(_module(rule.defines), row_start, cols, vals, n=n, nnz=nnz,
                                       max_row=max_row, sum_sq=sum_sq, how=row_sort)
    csr = make_csr(row_start, indices, data, n, nnz)
    info = {
        "method": "gemm",
        "precision": "fp16 inputs, fp32 accumulation, fp16 tile; float32 exact re-check",
        "tile_rows": int(tile_rows),
        "tiles": -(-n // tile_rows),
        "screen": float(screen[0]),
        "pairs_estimated": int(estimate),
        "pairs_checked": int(checked),
        "coo_rerun": bool(rerun),
        "nnz": nnz,
        "max_row": max_row,
        "row_sort": how,
        "exp": rule.exp_name,
    }
    return csr, timer.seconds(), info


def _tile_rows(n: int, tile_rows, tile_bytes) -> int:
    """Rows per tile: as given, or as many as `tile_bytes` (default: 1 GiB, at most a
    quarter of free memory) allows, a multiple of 256."""
    if tile_rows is None:
        ldc = -(-n // 8) * 8
        free = free_device_bytes()
        budget = tile_bytes if tile_bytes is not None else min(TILE_BYTES, free // 4)
        tile_rows = max(1, budget // (2 * ldc))
        if tile_rows >= 256:
            tile_rows -= tile_rows % 256
    return tile_rows


def build_gemm_rows(X, rule: Rule, r0: int, r1: int, *, tile_rows=None, tile_bytes=None):
    """Rows ``r0:r1`` of the GEMM-built graph of all the points of `X` (a row block).

    The same tiles as :func:`build_gemm`, over the block's rows only and against all
    n columns (not the upper triangle): ``gemm_tile_edges`` screens and re-checks each
    pair (i, j), i in the block, j != i, with the float32 arithmetic of
    :func:`build_gemm`, whose value does not depend on which point comes first (the
    squared difference, the product, the product of the norms), so the blocks stacked
    are :func:`build_gemm`'s matrix exactly. The COO entries are sorted by
    (row, column) into canonical rows.

    Parameters
    ----------
    X : cupy.ndarray of shape (n, d), float32, C-contiguous
        All the points.
    rule : Rule
        Any rule.
    r0, r1 : int
        The rows, ``0 <= r0 <= r1 <= n`` (an empty block when equal).
    tile_rows, tile_bytes : int, optional
        As in :func:`build_gemm`.

    Returns
    -------
    csr : cupyx.scipy.sparse.csr_matrix of shape (r1 - r0, n)
        Canonical (ascending columns, no diagonal entry, float32 exact weights); int32
        indices while its nnz and n fit, int64 beyond.
    timings : dict of str to float
        Seconds per stage (CUDA events): ``prepare``, ``estimate``, ``gemm``,
        ``screen``, ``assemble``.
    info : dict
        ``rows`` = ``(r0, r1)``, tile rows and count, the screen threshold, entries
        re-checked, ``nnz``, ``max_row``, whether the COO list was re-run.

    Raises
    ------
    TypeError, ValueError
        Bad `X`, rows or options, or a block estimated not to fit in GPU memory.
    """
    import cupy

    X = check_device_data(X)
    check_rule(rule)
    n, d = X.shape
    tile_rows = check_option(tile_rows, "tile_rows", low=1)
    tile_bytes = check_option(tile_bytes, "tile_bytes", low=1)
    r0, r1 = check_row_range(r0, r1, n)
    m = r1 - r0
    if m == 0:
        return empty_rows(0, n), {}, {"method": "gemm", "rows": (r0, r1), "nnz": 0,
                                      "max_row": 0, "exp": rule.exp_name}

    timer = StageTimer()
    with timer("prepare"):
        H, nrm, rnrm, scale = _prepare(X, rule)
    d_pad = H.shape[1]
    screen = _screen(rule, d, d_pad, scale)
    ldc = -(-n // 8) * 8
    tile_rows = min(_tile_rows(n, tile_rows, tile_bytes), m)
    gemm = TileGemm()
    try:
        screener = _Screener(X, rule, H, nrm, rnrm, screen, tile_rows, ldc, gemm)
        with timer("estimate"):
            cap, estimate = screener.estimate_rows(r0, r1)
        entries, checked = screener.run_rows(r0, r1, cap, timer)
        rerun = entries > cap
        if rerun:  # the estimate was short: run again with the exact size
            entries, checked = screener.run_rows(r0, r1, entries, timer)
    finally:
        gemm.close()
    out, screener = screener.out, None

    with timer("assemble"):
        if entries == 0:
            counts = cupy.zeros(m, dtype=cupy.int64)
            indices = cupy.empty(0, dtype=cupy.int32)
            data = cupy.empty(0, dtype=cupy.float32)
        else:
            ei, ej, ev = (a[:entries] for a in out)
            local = ei.astype(cupy.int64)
            local -= r0
            counts = cupy.bincount(local, minlength=m).astype(cupy.int64)
            key = local * n
            key += ej
            order = cupy.argsort(key)
            indices = ej[order]
            data = ev[order]
            del ei, ej, ev, local, key, order
        del out
        row_start = scan(counts)
        max_row = int(counts.max().get())
    csr = make_csr(row_start, indices, data, n, entries, rows=m)
    info = {
        "method": "gemm",
        "rows": (r0, r1),
        "precision": "fp16 inputs, fp32 accumulation, fp16 tile; float32 exact re-check",
        "tile_rows": int(tile_rows),
        "tiles": -(-m // tile_rows),
        "screen": float(screen[0]),
        "entries_estimated": int(estimate),
        "pairs_checked": int(checked),
        "coo_rerun": bool(rerun),
        "nnz": int(entries),
        "max_row": max_row,
        "exp": rule.exp_name,
    }
    return csr, timer.seconds(), info


class _Screener:
    """Runs the tiles: GEMM, then screen + exact re-check + append, row block by block."""

    def __init__(self, X, rule, H, nrm, rnrm, screen, tile_rows, ldc, gemm):
        import cupy

        self.X, self.rule, self.H, self.nrm, self.rnrm = X, rule, H, nrm, rnrm
        self.screen, self.tile_rows, self.ldc, self.gemm = screen, tile_rows, ldc, gemm
        self.C = cupy.empty((tile_rows, ldc), dtype=cupy.float16)
        self.out = None
        self.t, self.scale = rule.args  # float32 threshold and -1/(2σ²)

    def _edges(self, rows, cols, row0, row_ids, col0, upper, counter, cap, out):
        """Screen the tile in ``self.C``; `row_ids` (or None: ``row0 + r``) names its rows."""
        import cupy

        n_seg = -(-cols // SEG_COLS)
        screen, ca, cb, cc, cn = self.screen
        none_i = cupy.empty(0, dtype=cupy.int32)
        ei, ej, ev = out if out is not None else (none_i, none_i, cupy.empty(0, cupy.float32))
        use_ids = row_ids is not None
        launch(_kernel(self.rule.defines, "gemm_tile_edges"), 32 * rows * n_seg,
               (self.C, np.int64(self.ldc), np.int32(rows), np.int32(cols), np.int32(row0),
                row_ids if use_ids else none_i, np.int32(use_ids), np.int32(col0),
                np.int32(upper), self.X, np.int32(self.X.shape[1]),
                self.nrm, self.rnrm,
                np.float32(screen), np.float32(ca), np.float32(cb), np.float32(cc),
                np.float32(cn), self.t, self.scale,
                np.int32(SEG_COLS), counter, np.int64(cap), ei, ej, ev))

    def estimate(self, n: int):
        """COO capacity from the exact edge count of evenly spaced sample rows.

        Returns ``(capacity, estimated pairs)``; raises ValueError when the graph
        cannot fit in GPU memory.
        """
        import cupy

        m = min(n, SAMPLE_ROWS, self.tile_rows)
        rows = np.unique(np.linspace(0, n - 1, m).round().astype(np.int32))
        ids = cupy.asarray(rows)
        self.gemm.tile(self.H, self.H[ids], self.C, self.ldc)
        counter = cupy.zeros(2, dtype=cupy.uint64)
        self._edges(rows.size, n, 0, ids, 0, 0, counter, 0, None)
        per_row = int(counter[0].get()) / rows.size
        pairs = per_row * n / 2
        if rows.size == n:
            return int(round(pairs)), pairs
        free = free_device_bytes()
        if 2 * pairs * BYTES_PER_NNZ > free:
            raise ValueError(
                f"graph too large for GPU memory: {self.rule.describe()} on n={n} gives an "
                f"estimated nnz ≈ {2 * pairs:.3g} ({per_row:.1f} per row, from {rows.size} "
                f"sample rows), about {2 * pairs * BYTES_PER_NNZ / 2**30:.1f} GiB to build, "
                f"but {free / 2**30:.1f} GiB is free; raise the similarity threshold (or lower "
                f"the distance threshold) or subsample the data"
            )
        cap = min(int(pairs * CAP_MARGIN) + CAP_SLACK, n * (n - 1) // 2)
        return cap, pairs

    def estimate_rows(self, r0: int, r1: int):
        """COO capacity for the entries of rows ``r0:r1`` against all columns, from the
        exact counts of evenly spaced sample rows of the block (as :meth:`estimate`).

        Returns ``(capacity, estimated entries)``; raises ValueError when the block
        cannot fit in GPU memory.
        """
        import cupy

        n = self.X.shape[0]
        m = r1 - r0
        s = min(m, SAMPLE_ROWS, self.tile_rows)
        rows = np.unique(np.linspace(r0, r1 - 1, s).round().astype(np.int32))
        ids = cupy.asarray(rows)
        self.gemm.tile(self.H, self.H[ids], self.C, self.ldc)
        counter = cupy.zeros(2, dtype=cupy.uint64)
        self._edges(rows.size, n, 0, ids, 0, 0, counter, 0, None)
        per_row = int(counter[0].get()) / rows.size
        entries = per_row * m
        if rows.size == m:
            return int(round(entries)), entries
        free = free_device_bytes()
        if entries * BYTES_PER_NNZ > free:
            raise ValueError(
                f"row block {r0}:{r1} too large for GPU memory: {self.rule.describe()} on "
                f"n={n} gives an estimated nnz ≈ {entries:.3g} for its {m} rows "
                f"({per_row:.1f} per row, from {rows.size} sample rows), about "
                f"{entries * BYTES_PER_NNZ / 2**30:.1f} GiB to build, but "
                f"{free / 2**30:.1f} GiB is free; use smaller row blocks or raise the "
                "similarity threshold (or lower the distance threshold)"
            )
        cap = min(int(entries * CAP_MARGIN) + CAP_SLACK, m * (n - 1))
        return cap, entries

    def run_rows(self, r0: int, r1: int, cap: int, timer: StageTimer):
        """The tiles of rows ``r0:r1`` against all columns; ``(entries found, pairs
        re-checked)``. Entries (i, j), j != i, go to ``self.out`` up to `cap`; all are
        counted."""
        import cupy

        n = self.X.shape[0]
        self.out = None  # a re-run's list replaces the short one: free it first
        self.out = (cupy.empty(cap, dtype=cupy.int32), cupy.empty(cap, dtype=cupy.int32),
                    cupy.empty(cap, dtype=cupy.float32))
        counter = cupy.zeros(2, dtype=cupy.uint64)
        for t0 in range(r0, r1, self.tile_rows):
            rows = min(self.tile_rows, r1 - t0)
            with timer("gemm"):
                self.gemm.tile(self.H, self.H[t0 : t0 + rows], self.C, self.ldc)
            with timer("screen"):
                self._edges(rows, n, t0, None, 0, 0, counter, cap, self.out)
        entries, checked = (int(v) for v in counter.get())
        return entries, checked

    def run(self, cap: int, timer: StageTimer):
        """All tiles of the upper block triangle; ``(pairs found, pairs re-checked)``.

        Edges go to ``self.out`` (COO, i < j) up to `cap`; all are counted.
        """
        import cupy

        n = self.X.shape[0]
        self.out = None  # a re-run's list replaces the short one: free it first
        self.out = (cupy.empty(cap, dtype=cupy.int32), cupy.empty(cap, dtype=cupy.int32),
                    cupy.empty(cap, dtype=cupy.float32))
        counter = cupy.zeros(2, dtype=cupy.uint64)
        for r0 in range(0, n, self.tile_rows):
            rows = min(self.tile_rows, n - r0)
            with timer("gemm"):
                self.gemm.tile(self.H[r0:], self.H[r0 : r0 + rows], self.C, self.ldc)
            with timer("screen"):
                self._edges(rows, n - r0, r0, None, r0, 1, counter, cap, self.out)
        pairs, checked = (int(v) for v in counter.get())
        return pairs, checked
