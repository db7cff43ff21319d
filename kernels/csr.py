"""CSR-1, CSR-2 and CSR-3 (He, Vialle, Baboulin 2025, sect. 4.3-4.5) as CuPy launches.

Each ``csrN`` function runs one algorithm's passes over prepared operands and returns the
CSR arrays ``(col, val, rowptr)`` (int32, float32, int64) with what it measured and saw.
Stage names are the paper's kernel names (Table 1, Fig. 6-7): ``1stPass``, ``scan``,
``2ndPass``; ``fullPass``, ``scan``, ``ellpackToCSR``, ``supPass``; ``init``, ``chkPass``,
``denseToCSR``, ``merge``.

Block shapes are launch parameters; :func:`paper_block_shapes` gives the paper's Table 4
values, the defaults.

:func:`build_csr` runs one method end to end on a CuPy matrix (operand layout, passes,
CUDA-event timings) and :func:`count_rows` runs the counting pass over all or some rows:
the entry points the graph layer calls. Both take the paper's parameters as plain
numbers (``hypo_max_nnz_row``, ``sp_max_nz_pct``, ``mem_use_rate``: required where the
method uses them; the graph layer holds their defaults).
"""

from __future__ import annotations

import math

import numpy as np

from ._launch import (
    KC,
    MAX_GRID_Y,
    TC,
    TILES_PER_STRIP,
    Geometry,
    Operands,
    Rule,
    StageTimer,
    check_block_shape,
    free_device_bytes,
    gather_rows,
    geometry,
    header_bytes,
    launch,
    lcm,
    prepare_operands,
    round_up,
    scan,
    staged,
    staging_bytes,
)
from .count import count_pass

#: The kernels each method launches, in order; the keys ``block_shapes`` accepts.
KERNELS = {
    "csr1": ("1stPass", "2ndPass"),
    "csr2": ("fullPass", "ellpackToCSR", "supPass"),
    "csr3": ("chkPass", "denseToCSR"),
}

#: Kernels that evaluate pairs, and the tile family each belongs to.
_FAMILY = {
    "1stPass": "count",
    "2ndPass": "segment",
    "fullPass": "segment",
    "supPass": "segment",
    "chkPass": "count",
}

#: From this many dimensions on, Table 4's MNIST rows apply (else its Syn rows).
HIGH_D = 64

#: Block of the format conversions (not in Table 4: the paper found ellpackToCSR
#: negligible): one warp per row, 8 rows per block.
CONVERT_BLOCK = (32, 8)


def paper_block_shapes(method: str, d: int, hypo: int | None = None) -> dict:
    """Table 4's best block shapes (RTX 3090) for `method` on data of `d` dimensions.

    MNIST rows (d >= 64) or Syn rows (d < 64); CSR-2's fullPass shape depends on
    ``hypo`` (hypoMaxNnzRow, required for ``"csr2"``) as in the table (MNIST: 512 ->
    (64, 2), 1024 -> (128, 4), 2048 -> (128, 1)). The conversions take
    :data:`CONVERT_BLOCK`.
    """
    high = d >= HIGH_D
    if method == "csr1":
        return {"1stPass": (32, 16) if high else (32, 8), "2ndPass": (64, 4) if high else (32, 4)}
    if method == "csr2":
        if hypo is None:
            raise ValueError("CSR-2's block shapes depend on hypo_max_nnz_row; pass it")
        if high:
            full = (64, 2) if hypo <= 512 else (128, 4) if hypo <= 1024 else (128, 1)
            sup = (128, 2)
        else:
            full, sup = (32, 4), (128, 1)
        return {"fullPass": full, "ellpackToCSR": CONVERT_BLOCK, "supPass": sup}
    if method == "csr3":
        return {"chkPass": (32, 16), "denseToCSR": CONVERT_BLOCK}
    raise ValueError(f"method={method!r} is not one of {', '.join(map(repr, KERNELS))}")


def resolve_block_shapes(method: str, d: int, hypo: int | None, given) -> dict:
    """The block shape of each kernel of `method`: `given` over the paper's defaults.

    Names of other methods' kernels are ignored (one mapping can serve ``method="auto"``);
    names no method launches are an error.

    Raises
    ------
    ValueError
        Unknown kernel name, or a shape :func:`kernels._launch.check_block_shape` refuses
        (and ``denseToCSR`` wants ``bsx == 32``: one warp per row).
    """
    shapes = paper_block_shapes(method, d, hypo)
    given = dict(given or {})
    known = {k for names in KERNELS.values() for k in names}
    unknown = sorted(set(map(str, given)) - known)
    if unknown:
        raise ValueError(
            f"block_shapes names unknown kernel(s) {unknown}; known: {sorted(known)}"
        )
    out = {}
    for name, default in shapes.items():
        out[name] = check_block_shape(name, given.get(name, default))
    if "denseToCSR" in out and out["denseToCSR"][0] != 32:
        raise ValueError(
            f"block_shapes['denseToCSR']={out['denseToCSR']!r}: bsx must be 32 (a warp per row)"
        )
    return out


def plan(method: str, d: int, shapes: dict) -> tuple[dict, int]:
    """Geometries of the pair kernels, and the multiple the operand width must be."""
    geoms = {k: geometry(_FAMILY[k], shapes[k], d) for k in shapes if k in _FAMILY}
    multiple = lcm(*(g.rows for g in geoms.values()), *(g.cols for g in geoms.values()))
    return geoms, multiple


def _segment_smem(nints: int, geom: Geometry, d: int) -> int:
    # The dense segment (int column + float value per pair) and, with staged dimensions,
    # the staging buffers that alias it (segment.cuh).
    return header_bytes(nints, geom.rows) + max(geom.rows * geom.cols * 8, staging_bytes(geom, d))


def _defines(rule: Rule, geom: Geometry, ops: Operands) -> tuple:
    return rule.defines + geom.defines + ops.defines


def check_fits(nbytes: int, what: str, advice: str) -> None:
    """Refuse, during a build, an allocation the device cannot hold, with the figures in
    the message (the graph layer's preflight, :mod:`explorer.memory`, runs before)."""
    free = free_device_bytes()
    if nbytes > free:
        raise ValueError(
            f"{what} need {nbytes / 2**30:.2f} GiB but only {free / 2**30:.2f} GiB of GPU "
            f"memory is free; {advice}"
        )


# --------------------------------------------------------------------------------- CSR-1


def csr1(ops: Operands, rule: Rule, geoms: dict, timer: StageTimer, *, max_grid_y=MAX_GRID_Y):
    """Algo CSR-1: 1stPass (count), exclusive scan, 2ndPass (recompute and store)."""
    import cupy

    n = ops.n
    g1, g2 = geoms["1stPass"], geoms["2ndPass"]
    with timer("1stPass"):
        counts, _ = count_pass(ops, rule, g1, max_grid_y=max_grid_y)
    with timer("scan"):
        rowptr = scan(counts[:n])
    nnz = int(rowptr[-1])
    check_fits(nnz * 8, f"the CSR arrays of nnz={nnz}", "raise the similarity threshold")
    col = cupy.empty(nnz, dtype=cupy.int32)
    val = cupy.empty(nnz, dtype=cupy.float32)
    with timer("2ndPass"):
        launch(
            "csr1", "second_pass", _defines(rule, g2, ops), (ops.ld // g2.rows,), g2.block,
            (ops.XT, np.int32(ops.ld), ops.row_ids, np.int32(ops.D), *rule.args, rowptr, col, val),
            _segment_smem(2, g2, ops.d),
        )
    return col, val, rowptr, {"pair_evaluations": 2 * n * n}


# --------------------------------------------------------------------------------- CSR-2


def csr2(ops: Operands, rule: Rule, geoms: dict, hypo_max_nnz_row: int, timer: StageTimer, *,
         convert_block=CONVERT_BLOCK):
    """Algo CSR-2: fullPass into ELLPACK, scan, ellpackToCSR, supPass for overflowing rows.

    `hypo_max_nnz_row` (the paper's hypoMaxNnzRow, >= 1) is the ELLPACK width; the
    caller chooses it (the graph layer holds the default).
    """
    import cupy

    n = ops.n
    hypo = int(hypo_max_nnz_row)
    gf, gs = geoms["fullPass"], geoms["supPass"]
    check_fits(
        n * hypo * 8, f"CSR-2's ELLPACK arrays (n={n} × hypo_max_nnz_row={hypo} × 8 bytes)",
        "lower hypo_max_nnz_row",
    )
    ell_col = cupy.empty(n * hypo, dtype=cupy.int32)
    ell_val = cupy.empty(n * hypo, dtype=cupy.float32)
    nnz_row = cupy.empty(n, dtype=cupy.int32)
    idx_restart = cupy.empty(n, dtype=cupy.int32)
    col_restart = cupy.empty(n, dtype=cupy.int32)
    with timer("fullPass"):
        launch(
            "csr2", "full_pass", _defines(rule, gf, ops), (ops.ld // gf.rows,), gf.block,
            (ops.XT, np.int32(ops.ld), ops.row_ids, np.int32(n), np.int32(ops.D), *rule.args,
             np.int32(hypo), ell_col, ell_val, nnz_row, idx_restart, col_restart),
            _segment_smem(4, gf, ops.d),
        )
    with timer("scan"):
        rowptr = scan(nnz_row)
        top = nnz_row.max()
    nnz, max_row = int(rowptr[-1]), int(top)
    check_fits(nnz * 8, f"the CSR arrays of nnz={nnz}", "raise the similarity threshold")
    col = cupy.empty(nnz, dtype=cupy.int32)
    val = cupy.empty(nnz, dtype=cupy.float32)
    out_start = cupy.empty(n, dtype=cupy.int64)
    bx, by = convert_block
    with timer("ellpackToCSR"):
        launch(
            "convert", "ellpack_to_csr", (), (-(-n // by),), (bx, by),
            (np.int32(n), np.int32(hypo), nnz_row, idx_restart, rowptr, ell_col, ell_val, col,
             val, out_start),
        )
    del ell_col, ell_val
    info = {"hypo": hypo, "max_nnz_row": max_row, "rows_over_hypo": 0, "pair_evaluations": n * n}
    if max_row > hypo:
        over = cupy.flatnonzero(nnz_row > hypo).astype(cupy.int32)
        m = int(over.size)
        with timer("supPass"):
            XR, rid = gather_rows(ops, over, gs.rows)
            m_pad = XR.shape[1]
            rcol = cupy.zeros(m_pad, dtype=cupy.int32)
            rcol[:m] = col_restart[over]
            start = cupy.zeros(m_pad, dtype=cupy.int64)
            start[:m] = out_start[over]
            launch(
                "csr2_sup", "sup_pass", _defines(rule, gs, ops), (m_pad // gs.rows,), gs.block,
                (XR, np.int32(m_pad), rid, ops.XT, np.int32(ops.ld), np.int32(ops.D),
                 *rule.args, rcol, start, col, val),
                _segment_smem(4, gs, ops.d),
            )
        info["rows_over_hypo"] = m
        info["pair_evaluations"] += int((n - rcol[:m].astype(cupy.int64)).sum())
    return col, val, rowptr, info


# --------------------------------------------------------------------------------- CSR-3


def csr3(ops: Operands, rule: Rule, geoms: dict, sp_max_nz_pct: float, mem_use_rate: float,
         timer: StageTimer, *, convert_block=CONVERT_BLOCK, max_chunk_rows=None,
         max_grid_y=MAX_GRID_Y):
    """Algo CSR-3: CSR arrays sized by spMaxNzPct, then chunk by chunk chkPass + denseToCSR.

    The chunk holds as many rows as ``mem_use_rate`` of the free memory allows once the
    CSR arrays are allocated (the paper's order, sect. 6.2); `max_chunk_rows` caps it
    (tests force many chunks with it). Chunks are compacted straight into the CSR arrays
    at their global offsets, in row order, so the merge only trims the arrays to nnz.

    Raises
    ------
    ValueError
        When the graph has more nonzeros than ``sp_max_nz_pct`` allows (the message gives
        the real nnz, counted by the counting pass, and the percentage that would fit),
        or when not even one chunk of a tile's rows fits in memory.
    """
    import cupy

    n, ld = ops.n, ops.ld
    g = geoms["chkPass"]
    capacity = max(1, math.ceil(n * n * sp_max_nz_pct / 100.0))
    check_fits(
        capacity * 8, f"CSR-3's CSR arrays for sp_max_nz_pct={sp_max_nz_pct:g} ({capacity} "
        "nonzeros × 8 bytes)", "lower sp_max_nz_pct",
    )
    with timer("init"):
        col_cap = cupy.empty(capacity, dtype=cupy.int32)
        val_cap = cupy.empty(capacity, dtype=cupy.float32)
        rowptr = cupy.empty(n + 1, dtype=cupy.int64)
        rowptr[0] = 0
    cupy.get_default_memory_pool().free_all_blocks()
    budget = int(cupy.cuda.runtime.memGetInfo()[0] * mem_use_rate)
    chunk_rows = budget // (ld * 4) // g.rows * g.rows
    if max_chunk_rows is not None:
        chunk_rows = min(chunk_rows, max(g.rows, max_chunk_rows // g.rows * g.rows))
    chunk_rows = min(chunk_rows, round_up(n, g.rows))
    if chunk_rows < g.rows:
        raise ValueError(
            f"CSR-3 needs a dense chunk of at least {g.rows} rows × {ld} columns "
            f"({g.rows * ld * 4 / 2**20:.1f} MiB), but mem_use_rate={mem_use_rate:g} of the free "
            f"GPU memory is {budget / 2**20:.1f} MiB; raise mem_use_rate, lower sp_max_nz_pct or "
            f"use method='csr1' or 'csr2'"
        )
    dense = cupy.empty((chunk_rows, ld), dtype=cupy.float32)
    counts = cupy.empty(chunk_rows, dtype=cupy.int32)
    defines = _defines(rule, g, ops)
    smem = header_bytes(1, g.rows) + staging_bytes(g, ops.d)
    strips = -(-(ld // g.cols) // TILES_PER_STRIP)
    bx, by = convert_block
    nnz = 0
    n_chunks = 0
    for start in range(0, n, chunk_rows):
        rows = min(chunk_rows, n - start)
        tiles = -(-rows // g.rows)
        with timer("chkPass"):
            counts.fill(0)
            for t0 in range(0, tiles, max_grid_y):
                launch(
                    "csr3", "chk_pass", defines, (strips, min(max_grid_y, tiles - t0)), g.block,
                    (ops.XT, np.int32(ld), ops.row_ids, np.int32(ops.D), np.int32(start),
                     np.int32(t0), np.int32(TILES_PER_STRIP), *rule.args, dense, counts),
                    smem,
                )
        with timer("denseToCSR"):
            offsets = cupy.cumsum(counts[:rows], dtype=cupy.int64)
            rowptr[start + 1 : start + rows + 1] = offsets + nnz
        end = int(rowptr[start + rows])
        if end > capacity:
            del dense, col_cap, val_cap
            raise _overflow(ops, rule, g, sp_max_nz_pct, capacity)
        with timer("denseToCSR"):
            launch(
                "convert", "dense_to_csr", (), (-(-rows // by),), (bx, by),
                (dense, np.int32(ld), np.int32(rows), np.int32(start), rowptr, col_cap, val_cap),
            )
        nnz = end
        n_chunks += 1
    del dense
    with timer("merge"):
        col = col_cap[:nnz].copy()
        val = val_cap[:nnz].copy()
    del col_cap, val_cap
    info = {
        "sp_max_nz_pct": sp_max_nz_pct, "mem_use_rate": mem_use_rate, "capacity": capacity,
        "chunk_rows": chunk_rows, "n_chunks": n_chunks, "pair_evaluations": n * n,
    }
    return col, val, rowptr, info


def _overflow(ops: Operands, rule: Rule, geom: Geometry, spp: float, capacity: int):
    counts, _ = count_pass(ops, rule, geom)
    real = int(counts.sum(dtype=np.int64))
    n2 = ops.n * ops.n
    need = 100.0 * real / n2
    # Round the advice up to 2 significant digits so that it fits.
    digits = 1 - math.floor(math.log10(need))
    advice = math.ceil(need * 10**digits) / 10**digits
    return ValueError(
        f"CSR-3's CSR arrays overflow: sp_max_nz_pct={spp:g} allows {capacity} nonzeros "
        f"({spp:g}% of n²={n2}), but the graph has nnz={real} ({need:.3g}% of n²); "
        f"use sp_max_nz_pct >= {advice:g}"
    )


# --------------------------------------------------------------------------- entry points


def build_csr(method: str, X, rule: Rule, *, hypo_max_nnz_row: int | None = None,
              sp_max_nz_pct: float | None = None, mem_use_rate: float | None = None,
              block_shapes=None, max_chunk_rows: int | None = None,
              max_grid_y: int | None = None):
    """Run CSR-1, CSR-2 or CSR-3 on `X`: operand layout, the method's passes, timings.

    Parameters
    ----------
    method : {"csr1", "csr2", "csr3"}
    X : cupy.ndarray of shape (n, d)
        C-contiguous float32.
    rule : Rule
    hypo_max_nnz_row : int
        CSR-2's ELLPACK width (required for ``"csr2"``).
    sp_max_nz_pct, mem_use_rate : float
        CSR-3's bound on the percentage of nonzeros and share of free memory for a
        dense chunk (both required for ``"csr3"``).
    block_shapes : mapping of str to (int, int), optional
        Over :func:`paper_block_shapes` (see :func:`resolve_block_shapes`).
    max_chunk_rows, max_grid_y : int, optional
        Caps on CSR-3's chunk rows and on the row tiles of one 2-D grid (default
        :data:`MAX_GRID_Y`); tests lower them to reach the many-chunk and grid-limit
        paths on small data.

    Returns
    -------
    col, val, rowptr : cupy.ndarray
        int32 columns, float32 values, int64 row offsets (length n + 1); canonical rows.
    timings : dict of str to float
        Seconds per stage from CUDA events: ``prepare`` (the operand layout), then the
        paper's stages.
    info : dict
        What the method measured and saw (pair evaluations; CSR-2's ``hypo``,
        ``max_nnz_row``, ``rows_over_hypo``; CSR-3's capacity and chunks), the block
        shapes, register tiles, where the dimensions live and the exponential used.

    Raises
    ------
    ValueError
        An unknown method, a missing parameter, bad block shapes, arrays found not to
        fit in device memory, or CSR-3's capacity overflowing.
    """
    if method not in KERNELS:
        raise ValueError(f"method={method!r} is not one of {', '.join(map(repr, KERNELS))}")
    if method == "csr2" and hypo_max_nnz_row is None:
        raise ValueError("method='csr2' needs hypo_max_nnz_row")
    if method == "csr3" and (sp_max_nz_pct is None or mem_use_rate is None):
        raise ValueError("method='csr3' needs sp_max_nz_pct and mem_use_rate")
    n, d = X.shape
    hypo = int(hypo_max_nnz_row) if method == "csr2" else None
    shapes = resolve_block_shapes(method, d, hypo, block_shapes)
    geoms, multiple = plan(method, d, shapes)
    max_grid_y = MAX_GRID_Y if max_grid_y is None else int(max_grid_y)
    timer = StageTimer()
    with timer("prepare"):
        ops = prepare_operands(X, rule.metric, multiple)
    convert = shapes.get("ellpackToCSR") or shapes.get("denseToCSR") or CONVERT_BLOCK
    if method == "csr1":
        col, val, rowptr, run = csr1(ops, rule, geoms, timer, max_grid_y=max_grid_y)
    elif method == "csr2":
        col, val, rowptr, run = csr2(ops, rule, geoms, hypo, timer, convert_block=convert)
    else:
        col, val, rowptr, run = csr3(
            ops, rule, geoms, float(sp_max_nz_pct), float(mem_use_rate), timer,
            convert_block=convert, max_chunk_rows=max_chunk_rows, max_grid_y=max_grid_y,
        )
    del ops
    info = dict(run)
    info.update({
        "block_shapes": {k: tuple(v) for k, v in shapes.items()},
        "register_tile": {k: (g.tr, TC) for k, g in geoms.items()},
        "dimensions": "registers" if not staged(d) else f"shared, {KC} at a time",
        "exp": rule.exp_name,
    })
    return col, val, rowptr, timer.seconds(), info


def count_rows(X, rule: Rule, rows=None, *, block_shape=None):
    """Nonzeros and weighted degrees of rows, through the counting pass (no matrix).

    Parameters
    ----------
    X : cupy.ndarray of shape (n, d)
        C-contiguous float32.
    rule : Rule
    rows : cupy.ndarray of int32, optional
        Row indices, each in [0, n) (unchecked); default every row. Each is counted
        against all n columns: ``len(rows) × n`` pair evaluations.
    block_shape : (int, int), optional
        The counting block; default Table 4's CSR-1 1stPass shape.

    Returns
    -------
    counts : cupy.ndarray of int32
        Nonzeros per row (diagonal excluded), in the order of `rows`.
    degrees : cupy.ndarray of float32
        Sum of each row's edge weights.
    """
    n, d = X.shape
    shape = paper_block_shapes("csr1", d)["1stPass"] if block_shape is None else block_shape
    geom = geometry("count", check_block_shape("1stPass", shape), d)
    ops = prepare_operands(X, rule.metric, lcm(geom.rows, geom.cols))
    if rows is None:
        counts, degrees = count_pass(ops, rule, geom, degrees=True)
        return counts[:n], degrees[:n]
    XR, row_ids = gather_rows(ops, rows, geom.rows)
    counts, degrees = count_pass(ops, rule, geom, XR, row_ids, degrees=True)
    m = int(rows.size)
    return counts[:m], degrees[:m]
