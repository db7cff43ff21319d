"""The GPU bridge: what the graph dispatcher calls on a CUDA device.

A registry of builders (:data:`GPU_METHODS` lists its keys, in order): each entry takes
validated CuPy data and a :class:`~explorer.graph.GraphParams` and returns ``(csr,
timings, info)``. Adding a method is one entry in ``_BUILDERS``. The CSR-1/2/3 builders
translate the parameters into kernel terms and run ``explorer.kernels.csr``; the counting
pass (live statistics) and connected components live here too.

Imported only on a GPU run (the dispatcher imports it lazily): importing it imports CuPy.
"""

from __future__ import annotations

import math

import cupy
import cupyx.scipy.sparse as cpsparse
import numpy as np

from ..kernels import _launch
from ..kernels import csr as kcsr
from ..kernels import gemm as kgemm
from ..kernels import grid as kgrid
from ..kernels.count import count_pass
from ._params import GraphParams

#: memUseRate when not given: the paper's best on every benchmark (sect. 6.3.3).
DEFAULT_MEM_USE_RATE = 0.8

#: hypoMaxNnzRow when not given, by dimension: the smallest widths of the paper's runs
#: (Table 5: 16-64 on the 4-D sets, 512-2048 on MNIST). CSR-2 exists to avoid a counting
#: pass, so the default is a constant, not a count; rows past it go to supPass.
DEFAULT_HYPO_LOW_D = 32
DEFAULT_HYPO_HIGH_D = 512

#: Rows counted to size CSR-3's arrays when sp_max_nz_pct is not given.
SPP_SAMPLE_ROWS = 1024

#: "Large d" in the paper's method advice (sect. 4.6: "hundreds of dimensions").
LARGE_D = 100

#: Distance rules up to this many features go through the uniform grid: 3^min(d, 4)
#: neighbouring cells stay a small part of the data (docs/fast-builders.md).
GRID_D = 8

#: From this many features a pair costs enough multiply-adds that tensor-core tiles
#: with an exact re-check beat the paper's per-pair kernels (benchmarks/results/fast.json).
GEMM_D = 32


def _rule(params: GraphParams) -> _launch.Rule:
    if params.compares == "cosine":
        return _launch.Rule.make("cosine", params.threshold)
    return _launch.Rule.make(params.metric, params.sqdist_cutoff, params.sigma)


def _to_csr(n: int, col, val, rowptr):
    """Canonical cupyx CSR: int32 indices while nnz and n fit, int64 beyond (both arrays)."""
    if max(int(col.size), n) < 2**31:
        indptr, indices = rowptr.astype(cupy.int32), col
    else:
        indptr, indices = rowptr, col.astype(cupy.int64)
    m = cpsparse.csr_matrix((val, indices, indptr), shape=(n, n))
    m.has_canonical_format = True  # sorted by construction, no duplicates, no diagonal
    return m


def default_hypo(d: int) -> int:
    """CSR-2's width when none is given (see :data:`DEFAULT_HYPO_LOW_D`)."""
    return DEFAULT_HYPO_HIGH_D if d >= kcsr.HIGH_D else DEFAULT_HYPO_LOW_D


def default_sp_max_nz_pct(X, params: GraphParams) -> tuple[float, float]:
    """CSR-3's spMaxNzPct when none is given, and the density estimate it came from.

    The paper sets spMaxNzPct to a round bound a little above the true density (Table 2
    against Table 3: 1% for MNIST at 0.2-0.42%, 0.01% for Syn1M at 0.0023%, 0.001% for
    Syn5M at 0.0006%). The same rule here: estimate the density from the counting pass on
    :data:`SPP_SAMPLE_ROWS` evenly spaced rows (a 1024 × n pass, milliseconds), take 1.5
    times it (at least one nonzero per row), and round up to a power of ten.
    """
    n = X.shape[0]
    rows = np.unique(np.linspace(0, n - 1, min(n, SPP_SAMPLE_ROWS)).astype(np.int64))
    counts, _ = count_rows_gpu(X, params, rows)
    density = max(1.5 * float(counts.mean()) / n, 1.0 / n)
    return min(100.0, 10.0 ** math.ceil(math.log10(100.0 * density))), 100.0 * density / 1.5


def _build_csr(method: str, X, params: GraphParams, *, hypo_max_nnz_row=None,
               sp_max_nz_pct=None, mem_use_rate=None, block_shapes=None,
               _max_chunk_rows=None, _max_grid_y=None):
    n, d = X.shape
    rule = _rule(params)
    hypo = None
    if method == "csr2":
        hypo = default_hypo(d) if hypo_max_nnz_row is None else int(hypo_max_nnz_row)
    shapes = kcsr.resolve_block_shapes(method, d, hypo, block_shapes)
    geoms, multiple = kcsr.plan(method, d, shapes)
    max_grid_y = _launch.MAX_GRID_Y if _max_grid_y is None else int(_max_grid_y)
    info: dict = {}
    if method == "csr3":
        if sp_max_nz_pct is None:
            sp_max_nz_pct, info["estimated_density_pct"] = default_sp_max_nz_pct(X, params)
        mem_use_rate = DEFAULT_MEM_USE_RATE if mem_use_rate is None else float(mem_use_rate)

    timer = _launch.StageTimer()
    with timer("prepare"):
        ops = _launch.prepare_operands(X, rule.metric, multiple)
    convert = shapes.get("ellpackToCSR") or shapes.get("denseToCSR") or kcsr.CONVERT_BLOCK
    if method == "csr1":
        col, val, rowptr, run = kcsr.csr1(ops, rule, geoms, timer, max_grid_y=max_grid_y)
    elif method == "csr2":
        col, val, rowptr, run = kcsr.csr2(ops, rule, geoms, hypo, timer, convert_block=convert)
    else:
        col, val, rowptr, run = kcsr.csr3(
            ops, rule, geoms, float(sp_max_nz_pct), mem_use_rate, timer, convert_block=convert,
            max_chunk_rows=_max_chunk_rows, max_grid_y=max_grid_y,
        )
    del ops
    if int(col.size) >= 2**31:
        # Kernels and offsets are int64-capable; the int32 column array is widened here.
        info["index_dtype"] = "int64"
    csr = _to_csr(n, col, val, rowptr)
    timings = timer.seconds()
    info.update(run)
    info.update({
        "block_shapes": {k: tuple(v) for k, v in shapes.items()},
        "register_tile": {k: (g.tr, _launch.TC) for k, g in geoms.items()},
        "dimensions": "registers" if not _launch.staged(d) else f"shared, {_launch.KC} at a time",
        "exp": ("__expf" if rule.fast_exp else "expf") if rule.metric == "gaussian" else None,
    })
    return csr, timings, info


def _builder(method: str):
    def build(X, params, **options):
        return _build_csr(method, X, params, **options)

    build.__name__ = f"build_{method}"
    return build


def _beyond_paper_builder(build):
    """Adapt grid/gemm builders: the paper's CSR-1/2/3 options do not apply to them."""

    def run(X, params, **_paper_options):
        return build(X, params)

    run.__name__ = build.__name__
    return run


#: The paper's three algorithms (sections 4.3-4.5).
PAPER_METHODS = ("csr1", "csr2", "csr3")

#: Method name -> builder ``(X, params, **options) -> (csr, timings, info)``.
_BUILDERS = {name: _builder(name) for name in PAPER_METHODS}
_BUILDERS["grid"] = _beyond_paper_builder(kgrid.build_grid)
_BUILDERS["gemm"] = _beyond_paper_builder(kgemm.build_gemm)

#: The methods a GPU run accepts (besides "auto").
GPU_METHODS = tuple(_BUILDERS)


def build_gpu(X, params: GraphParams, method: str, *, hypo_max_nnz_row=None, sp_max_nz_pct=None,
              mem_use_rate=None, block_shapes=None, _max_chunk_rows=None, _max_grid_y=None):
    """Build the graph of `X` on the GPU with `method`.

    Parameters
    ----------
    X : cupy.ndarray of shape (n, d)
        C-contiguous float32, validated.
    params : GraphParams
    method : str
        One of :data:`GPU_METHODS`.
    hypo_max_nnz_row : int, optional
        CSR-2's ELLPACK width; default :func:`default_hypo` (32 for d < 64, else 512).
    sp_max_nz_pct : float, optional
        CSR-3's bound on the percentage of nonzeros; default
        :func:`default_sp_max_nz_pct` (a sampled density, 1.5x, rounded up to a power of
        ten, as the paper's settings are).
    mem_use_rate : float, optional
        CSR-3's share of the free memory for a dense chunk; default 0.8.
    block_shapes : mapping of str to (int, int), optional
        Kernel name (``"1stPass"``, ``"2ndPass"``, ``"fullPass"``, ``"ellpackToCSR"``,
        ``"supPass"``, ``"chkPass"``, ``"denseToCSR"``) to CUDA block shape; default the
        paper's Table 4 (:func:`explorer.kernels.csr.paper_block_shapes`).
    _max_chunk_rows, _max_grid_y : int, optional
        Private, for tests: cap CSR-3's chunk rows, and the row tiles per 2-D grid, so
        that the many-chunk and grid-limit paths run on small data.

    Returns
    -------
    csr : cupyx.scipy.sparse.csr_matrix
        n × n, float32 values, sorted column indices, no diagonal; int32 indices while
        nnz < 2**31, int64 beyond.
    timings : dict of str to float
        Seconds per stage, from CUDA events (``prepare`` lays out the operands; then the
        paper's stages, see :mod:`explorer.kernels.csr`).
    info : dict
        Block shapes, register tiles, pair evaluations, and per method: ``hypo``,
        ``max_nnz_row``, ``rows_over_hypo`` (CSR-2); ``sp_max_nz_pct``,
        ``mem_use_rate``, ``capacity``, ``chunk_rows``, ``n_chunks`` (CSR-3).

    Raises
    ------
    ValueError
        Unknown method or kernel name, a bad block shape, a graph estimated before the
        build not to fit in free GPU memory (:func:`check_gpu_memory`) or arrays found
        not to fit during it (with the figures), or CSR-3's spMaxNzPct overflowing
        (with the real nnz and the percentage that would fit).
    MemoryError
        When CuPy runs out of device memory all the same during the build; the pool's
        free blocks are released first, and the message says what to change.
    """
    if method not in _BUILDERS:
        raise ValueError(f"method={method!r} is not a GPU method; use one of {GPU_METHODS}")
    check_gpu_memory(X, params, method, hypo_max_nnz_row, sp_max_nz_pct)
    try:
        return _BUILDERS[method](
            X, params, hypo_max_nnz_row=hypo_max_nnz_row, sp_max_nz_pct=sp_max_nz_pct,
            mem_use_rate=mem_use_rate, block_shapes=block_shapes,
            _max_chunk_rows=_max_chunk_rows, _max_grid_y=_max_grid_y,
        )
    except cupy.cuda.memory.OutOfMemoryError as exc:
        # The build's arrays are garbage once the exception leaves the builder; give
        # their blocks back to the device so that the next try (or other work) has them.
        cupy.get_default_memory_pool().free_all_blocks()
        cupy.get_default_pinned_memory_pool().free_all_blocks()
        raise MemoryError(
            f"the GPU ran out of memory building the graph of n={X.shape[0]} points with "
            f"method={method!r} ({params.describe()}): {exc}; lower the threshold (fewer "
            "edges per row), subsample the data, lower hypo_max_nnz_row / sp_max_nz_pct / "
            "mem_use_rate, or use backend='cpu'"
        ) from None


# ------------------------------------------------------------------ memory preflight

#: Rows counted to estimate nnz before a build (:func:`check_gpu_memory`).
PREFLIGHT_ROWS = 512

#: Share of the free device memory a build may plan to use: the builders also need
#: operands, counters and CuPy's own scratch, which the estimate leaves out.
PREFLIGHT_FRACTION = 0.9


def free_device_bytes() -> int:
    """Device memory a new allocation can get: the driver's free bytes plus the free
    blocks CuPy's pool holds."""
    return int(cupy.cuda.runtime.memGetInfo()[0]) + int(
        cupy.get_default_memory_pool().free_bytes())


def estimate_gpu_bytes(n: int, nnz: float, method: str, hypo: int, sp_max_nz_pct) -> float:
    """Bytes the largest arrays of a `method` build take: the CSR result (column and
    value, 8 B per nonzero, and an int64 row pointer), plus CSR-2's ELLPACK arrays
    (``n · hypo · 8`` and three int32 per row) or CSR-3's arrays sized by spMaxNzPct
    (:func:`default_sp_max_nz_pct` rounds 1.5x the density up: at least ``1.5 nnz``).
    From 2**31 nonzeros the int32 columns are widened to int64 next to themselves
    (:func:`_to_csr`): 8 B more per nonzero at that moment."""
    per_nonzero = 8.0 if nnz < 2**31 else 16.0
    need = per_nonzero * nnz + 8.0 * (n + 1)
    if method == "csr2":
        need += 8.0 * n * hypo + 12.0 * n
    elif method == "csr3":
        capacity = 1.5 * nnz if sp_max_nz_pct is None else n * n * sp_max_nz_pct / 100.0
        need = 8.0 * max(capacity, nnz) + (per_nonzero - 8.0) * nnz + 8.0 * (n + 1)
    return need


def check_gpu_memory(X, params: GraphParams, method: str, hypo_max_nnz_row=None,
                     sp_max_nz_pct=None, free: int | None = None) -> None:
    """Refuse, before building, a graph estimated not to fit in free device memory.

    Skipped when even the complete graph would fit. Otherwise nnz is estimated by
    counting :data:`PREFLIGHT_ROWS` seeded random rows (:func:`count_rows_gpu`, a small
    fraction of a build) and :func:`estimate_gpu_bytes` is compared with `free`
    (default :func:`free_device_bytes`) times :data:`PREFLIGHT_FRACTION`.

    Raises
    ------
    ValueError
        With the estimated nnz, the bytes, the free memory and what to change.
    """
    n, d = X.shape
    hypo = default_hypo(d) if hypo_max_nnz_row is None else int(hypo_max_nnz_row)
    free = free_device_bytes() if free is None else int(free)
    budget = PREFLIGHT_FRACTION * free
    if estimate_gpu_bytes(n, float(n) * (n - 1), method, hypo, sp_max_nz_pct) <= budget:
        return
    m = min(n, PREFLIGHT_ROWS)
    rows = np.sort(np.random.default_rng(0).choice(n, m, replace=False))
    counts, _ = count_rows_gpu(X, params, cupy.asarray(rows))
    nnz = float(counts.mean()) * n
    need = estimate_gpu_bytes(n, nnz, method, hypo, sp_max_nz_pct)
    if need <= budget:
        return
    extra = {"csr2": f", hypo_max_nnz_row={hypo} (ELLPACK {8 * n * hypo / 2**30:.2f} GiB)",
             "csr3": "" if sp_max_nz_pct is None else f", sp_max_nz_pct={sp_max_nz_pct:g}"}
    raise ValueError(
        f"graph too large for the GPU: {params.describe()} on n={n} gives an estimated "
        f"nnz ≈ {nnz:.3g} ({nnz / n:.1f} per row, from {m} sampled rows); method={method!r}"
        f"{extra.get(method, '')} needs about {need / 2**30:.2f} GiB but {free / 2**30:.2f} "
        "GiB of GPU memory is free; lower the threshold, subsample the data"
        + (", lower hypo_max_nnz_row" if method == "csr2" else "")
        + (", lower sp_max_nz_pct" if method == "csr3" else "")
        + ", or use graph_stats(sample_rows=...) to explore"
    )


def count_rows_gpu(X, params: GraphParams, rows=None):
    """Nonzeros and weighted degrees of rows of the graph, without building it.

    Distance rules in low dimension (d <= :data:`GRID_D`) count through the uniform
    grid (:func:`explorer.kernels.grid.count_rows_grid`). Otherwise the counting pass
    (CSR-1's 1stPass kernel, with degrees) runs over all rows or the given ones against
    all n columns: ``len(rows) × n`` pair evaluations.

    Parameters
    ----------
    X : cupy.ndarray of shape (n, d), C-contiguous float32
    params : GraphParams
    rows : array_like of int, optional
        Row indices (NumPy or CuPy, each in [0, n)); default all rows.

    Returns
    -------
    counts : cupy.ndarray of int32
        Nonzeros per row (diagonal excluded), in the order of `rows`.
    degrees : cupy.ndarray of float32
        Sum of each row's edge weights.

    Raises
    ------
    ValueError
        If `rows` is not a 1-D array of integers in [0, n).
    """
    n, d = X.shape
    if params.compares == "sqdist" and d <= GRID_D:
        # Low-d distance rules: count through the grid's cells, O(n · neighbours)
        # instead of the n² pairs of the paper's counting pass (ms, not 0.5 s, at 1M).
        if rows is not None:
            rows = _check_rows(rows, n)
        return kgrid.count_rows_grid(X, params, rows, degrees=True)
    return count_rows_paper(X, params, rows)


def count_rows_paper(X, params: GraphParams, rows=None):
    """:func:`count_rows_gpu` through the paper's counting pass, whatever the rule and d."""
    n, d = X.shape
    rule = _rule(params)
    shape = kcsr.paper_block_shapes("csr1", d)["1stPass"]
    geom = _launch.geometry("count", shape, d)
    ops = _launch.prepare_operands(X, rule.metric, _launch.lcm(geom.rows, geom.cols))
    if rows is None:
        counts, degrees = count_pass(ops, rule, geom, degrees=True)
        return counts[:n], degrees[:n]
    rows = _check_rows(rows, n)
    XR, row_ids = _launch.gather_rows(ops, rows, geom.rows)
    counts, degrees = count_pass(ops, rule, geom, XR, row_ids, degrees=True)
    m = int(rows.size)
    return counts[:m], degrees[:m]


def _check_rows(rows, n: int):
    arr = cupy.asarray(rows)
    if arr.ndim != 1 or not (arr.size == 0 or cupy.issubdtype(arr.dtype, cupy.integer)):
        raise ValueError(
            f"rows must be a 1-D array of integer row indices; got shape {arr.shape}, "
            f"dtype {arr.dtype}"
        )
    if arr.size and (int(arr.min()) < 0 or int(arr.max()) >= n):
        raise ValueError(
            f"rows must lie in [0, {n}); got values from {int(arr.min())} to {int(arr.max())}"
        )
    return arr.astype(cupy.int32)


def choose_method(n: int, d: int, params: GraphParams) -> tuple[str, str]:
    """The method for ``method="auto"``, and why.

    Beyond the paper first: low-d distance rules need only neighbouring cells (grid,
    O(n · neighbours)); many features make a pair a dot product, which tensor cores
    compute far faster than per-pair kernels (gemm). Between the two, the paper's advice
    (:func:`paper_choice`). Every method gives the same graph; only time differs.
    """
    if params.compares == "sqdist" and d <= GRID_D:
        return "grid", (
            f"GPU, n={n}, d={d} <= {GRID_D}, distance threshold: uniform grid of cell side ε, "
            "O(n · neighbours) instead of n² pairs"
        )
    if d >= GEMM_D:
        return "gemm", (
            f"GPU, n={n}, d={d} >= {GEMM_D}: tensor-core similarity tiles with an exact "
            "float32 re-check near the threshold"
        )
    return paper_choice(n, d)


def paper_choice(n: int, d: int) -> tuple[str, str]:
    """The paper's advice among CSR-1/2/3 (sect. 4.6).

    Many dimensions (d >= 100; "hundreds of dimensions may be regarded as large d") make
    each similarity expensive: CSR-3 computes each pair once (n²) and was the fastest on
    every MNIST set (Table 5). Otherwise CSR-2: fewer similarities than CSR-1 and far
    fewer memory accesses than CSR-3, the fastest on the 4-D million-point sets.
    """
    if d >= LARGE_D:
        return "csr3", (
            f"GPU, d={d} >= {LARGE_D}: CSR-3 evaluates each pair once, best when "
            "similarities are expensive (paper sect. 4.6)"
        )
    return "csr2", (
        f"GPU, n={n}, d={d}: CSR-2 evaluates n² to 2n² cheap pairs with the fewest memory "
        "accesses (paper sect. 4.6)"
    )
