"""Launcher of the counting pass (``count.cu``): CSR-1's 1stPass and the live statistics."""

from __future__ import annotations

import numpy as np

from ._launch import (
    MAX_GRID_Y,
    TILES_PER_STRIP,
    Geometry,
    Operands,
    Rule,
    header_bytes,
    launch,
    staging_bytes,
)


def count_pass(
    ops: Operands,
    rule: Rule,
    geom: Geometry,
    XR=None,
    row_ids=None,
    *,
    degrees: bool = False,
    tiles_per_strip: int = TILES_PER_STRIP,
    max_grid_y: int = MAX_GRID_Y,
):
    """Nonzeros (and weighted degrees) of each row slot of a row operand against all columns.

    Parameters
    ----------
    ops : Operands
        The columns (and, by default, the rows: ``XR = ops.XT``, ``row_ids = ops.row_ids``).
    rule : Rule
    geom : Geometry
        ``ops.ld`` must be a multiple of ``geom.cols``, and the row operand's width of
        ``geom.rows``.
    XR, row_ids : cupy.ndarray, optional
        A gathered row operand (:func:`kernels._launch.gather_rows`).
    degrees : bool
        Also sum the edge weights per row (float32).
    tiles_per_strip : int
        Column tiles per block (the grid's x extent is the strips of the columns).
    max_grid_y : int
        Row tiles per launch; more are launched in several grids (the paper's
        horizontal chunks). Lowered only by tests, to reach that path with small n.

    Returns
    -------
    counts : cupy.ndarray of int32, one per row slot (0 for padding slots)
    degrees : cupy.ndarray of float32 per row slot, or None
    """
    import cupy

    if XR is None:
        XR, row_ids = ops.XT, ops.row_ids
    ldr = XR.shape[1]
    counts = cupy.zeros(ldr, dtype=cupy.int32)
    deg = cupy.zeros(ldr if degrees else 1, dtype=cupy.float32)
    defines = rule.defines + geom.defines + ops.defines + (f"-DWITH_DEG={int(degrees)}",)
    smem = header_bytes(2, geom.rows) + staging_bytes(geom, ops.d)
    row_tiles = ldr // geom.rows
    strips = -(-(ops.ld // geom.cols) // tiles_per_strip)
    for t0 in range(0, row_tiles, max_grid_y):
        args = (
            XR, np.int32(ldr), row_ids, ops.XT, np.int32(ops.ld), np.int32(ops.D), np.int32(t0),
            np.int32(tiles_per_strip), *rule.args, counts, deg,
        )
        grid = (strips, min(max_grid_y, row_tiles - t0))
        launch("count", "count_pass", defines, grid, geom.block, args, smem)
    return counts, (deg if degrees else None)
