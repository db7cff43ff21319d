"""GPU graph builds: the registry of builders and :func:`build_gpu`, which runs one.

A registry of builders (:data:`GPU_METHODS` lists its keys, in order): each entry takes
validated CuPy data and a :class:`~explorer.graph.EdgeRule` and returns ``(csr,
timings, info)``. Adding a method is one entry in :data:`BUILDERS`. The CSR-1/2/3
builders fill in the paper's parameters the user left out (:mod:`._gpu_defaults`) and
run :func:`explorer.kernels.csr.build_csr`; grid and gemm run their own launchers. Every
builder gets the edge rule in kernel terms (:func:`._gpu_rule.kernel_rule`).

Imports CuPy.
"""

from __future__ import annotations

from functools import partial

import cupy
import cupyx.scipy.sparse as cpsparse

from .. import memory
from ..kernels import csr as kcsr
from ..kernels import gemm as kgemm
from ..kernels import grid as kgrid
from ._gpu_count import count_rows_gpu
from ._gpu_defaults import default_sp_max_nz_pct
from ._gpu_rule import kernel_rule
from .rule import DEFAULT_MEM_USE_RATE, EdgeRule, default_hypo_max_nnz_row


def to_csr(n: int, col, val, rowptr):
    """Canonical cupyx CSR: int32 indices while nnz and n fit, int64 beyond (both arrays)."""
    if max(int(col.size), n) < 2**31:
        indptr, indices = rowptr.astype(cupy.int32), col
    else:
        indptr, indices = rowptr, col.astype(cupy.int64)
    m = cpsparse.csr_matrix((val, indices, indptr), shape=(n, n))
    m.has_canonical_format = True  # sorted by construction, no duplicates, no diagonal
    return m


def _row_counts(X, params: EdgeRule, rows):
    """Nonzeros of `rows` (:func:`count_rows_gpu` without the degrees)."""
    return count_rows_gpu(X, params, rows)[0]


def _build_paper(method: str, X, params: EdgeRule, *, hypo_max_nnz_row, sp_max_nz_pct=None,
                 mem_use_rate=None, block_shapes=None, _max_chunk_rows=None, _max_grid_y=None):
    n = X.shape[0]
    info: dict = {}
    if method == "csr3":
        if sp_max_nz_pct is None:
            sp_max_nz_pct, info["estimated_density_pct"] = default_sp_max_nz_pct(X, params)
        mem_use_rate = DEFAULT_MEM_USE_RATE if mem_use_rate is None else float(mem_use_rate)
    col, val, rowptr, timings, run = kcsr.build_csr(
        method, X, kernel_rule(params),
        hypo_max_nnz_row=hypo_max_nnz_row if method == "csr2" else None,
        sp_max_nz_pct=sp_max_nz_pct, mem_use_rate=mem_use_rate, block_shapes=block_shapes,
        max_chunk_rows=_max_chunk_rows, max_grid_y=_max_grid_y,
    )
    if int(col.size) >= 2**31:
        # Kernels and offsets are int64-capable; the int32 column array is widened here.
        info["index_dtype"] = "int64"
    csr = to_csr(n, col, val, rowptr)
    info.update(run)
    return csr, timings, info


def _paper_builder(method: str):
    def build(X, params, **options):
        return _build_paper(method, X, params, **options)

    build.__name__ = f"build_{method}"
    return build


def _beyond_paper_builder(build):
    """Adapt grid/gemm builders: the paper's CSR-1/2/3 options do not apply to them;
    ``check_nnz`` (the grid's memory check on its counted nnz) does."""

    def run(X, params, *, check_nnz=None, **_paper_options):
        if check_nnz is not None:
            return build(X, kernel_rule(params), check_nnz=check_nnz)
        return build(X, kernel_rule(params))

    run.__name__ = build.__name__
    return run


#: The paper's three algorithms (sections 4.3-4.5).
PAPER_METHODS = ("csr1", "csr2", "csr3")

#: Method name -> builder ``(X, params, **options) -> (csr, timings, info)``.
BUILDERS = {name: _paper_builder(name) for name in PAPER_METHODS}
BUILDERS["grid"] = _beyond_paper_builder(kgrid.build_grid)
BUILDERS["gemm"] = _beyond_paper_builder(kgemm.build_gemm)

#: The methods a GPU run accepts (besides "auto").
GPU_METHODS = tuple(BUILDERS)


def build_gpu(X, params: EdgeRule, method: str, *, hypo_max_nnz_row=None, sp_max_nz_pct=None,
              mem_use_rate=None, block_shapes=None, _max_chunk_rows=None, _max_grid_y=None):
    """Build the graph of `X` on the GPU with `method`.

    Parameters
    ----------
    X : cupy.ndarray of shape (n, d)
        C-contiguous float32, validated.
    params : EdgeRule
    method : str
        One of :data:`GPU_METHODS`.
    hypo_max_nnz_row : int, optional
        CSR-2's ELLPACK width; default :func:`~explorer.graph.default_hypo_max_nnz_row` (32 for
        d < 64, else 512).
    sp_max_nz_pct : float, optional
        CSR-3's bound on the percentage of nonzeros; default
        :func:`~._gpu_defaults.default_sp_max_nz_pct` (a sampled density, 1.5x,
        rounded up to a power of ten, as the paper's settings are).
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
        Block shapes, register tiles, pair evaluations, the exponential of gaussian
        weights (``exp``), and per method: ``hypo``, ``max_nnz_row``,
        ``rows_over_hypo`` (CSR-2); ``sp_max_nz_pct``, ``mem_use_rate``, ``capacity``,
        ``chunk_rows``, ``n_chunks`` (CSR-3).

    Raises
    ------
    ValueError
        Unknown method or kernel name, a bad block shape, arrays found not to fit
        during the build (with the figures), or CSR-3's spMaxNzPct overflowing (with the
        real nnz and the percentage that would fit).
    explorer.memory.MemoryEstimateError
        A graph estimated before the build not to fit in free GPU memory
        (:func:`explorer.memory.check_gpu_memory`; a ValueError).
    MemoryError
        When CuPy runs out of device memory all the same during the build; the pool's
        free blocks are released first, and the message says what to change.
    """
    if method not in BUILDERS:
        raise ValueError(f"method={method!r} is not a GPU method; use one of {GPU_METHODS}")
    n, d = X.shape
    hypo = default_hypo_max_nnz_row(d) if hypo_max_nnz_row is None else int(hypo_max_nnz_row)
    options = {"hypo_max_nnz_row": hypo, "sp_max_nz_pct": sp_max_nz_pct,
               "mem_use_rate": mem_use_rate, "block_shapes": block_shapes,
               "_max_chunk_rows": _max_chunk_rows, "_max_grid_y": _max_grid_y}
    try:
        if method == "grid":  # its counting pass gives the exact nnz before the CSR arrays
            options["check_nnz"] = partial(memory.check_gpu_nnz, n, rule=params,
                                           method=method, hypo_max_nnz_row=hypo,
                                           sp_max_nz_pct=sp_max_nz_pct)
        else:
            memory.check_gpu_memory(n, partial(_row_counts, X, params), params, method, hypo,
                                    sp_max_nz_pct)
        return BUILDERS[method](X, params, **options)
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


#: The GPU builders that build a range of rows (:func:`build_rows_gpu`).
ROW_METHODS = ("grid", "gemm")


def build_rows_gpu(X, params: EdgeRule, r0: int, r1: int, method: str):
    """Rows ``r0:r1`` of the graph of all the points of `X`, built on the GPU.

    The row block of the distributed build (:mod:`explorer.distributed`): the grid
    bins all n points and counts and fills the block's rows
    (:func:`explorer.kernels.grid.build_grid_rows`); the GEMM runs the block's row
    tiles against all columns (:func:`explorer.kernels.gemm.build_gemm_rows`). Blocks
    stacked are the matrix ``build_gpu(X, params, method)`` returns, exactly.

    Parameters
    ----------
    X : cupy.ndarray of shape (n, d)
        C-contiguous float32, validated: all the points.
    params : EdgeRule
        A complete edge rule (a distance rule for ``"grid"``).
    r0, r1 : int
        The rows, ``0 <= r0 <= r1 <= n``.
    method : {"grid", "gemm"}
        One of :data:`ROW_METHODS`.

    Returns
    -------
    csr : cupyx.scipy.sparse.csr_matrix of shape (r1 - r0, n)
        Canonical: float32 values, ascending columns, no diagonal entry; int32
        indices while the block's nnz and n fit, int64 beyond.
    timings : dict of str to float
        Seconds per stage (CUDA events).
    info : dict
        The launcher's (``rows``, ``nnz``, ``max_row``, ...).

    Raises
    ------
    ValueError, TypeError
        Unknown method, a cosine rule for the grid, a bad row range, or a block
        estimated not to fit (gemm).
    MemoryError
        When CuPy runs out of device memory during the build.
    """
    if method not in ROW_METHODS:
        raise ValueError(f"method={method!r} does not build row ranges on the GPU; use one "
                         f"of {ROW_METHODS}")
    build = kgrid.build_grid_rows if method == "grid" else kgemm.build_gemm_rows
    try:
        return build(X, kernel_rule(params), r0, r1)
    except cupy.cuda.memory.OutOfMemoryError as exc:
        cupy.get_default_memory_pool().free_all_blocks()
        cupy.get_default_pinned_memory_pool().free_all_blocks()
        raise MemoryError(
            f"the GPU ran out of memory building rows {r0}:{r1} of the graph of "
            f"n={X.shape[0]} points with method={method!r} ({params.describe()}): {exc}; "
            "use smaller row blocks, lower the threshold (fewer edges per row), or CPU "
            "(NumPy) chunks"
        ) from None
