"""``method="grid"``: the ε-graph of low-dimensional data in O(n · neighbours) work.

For a distance rule (edge iff ``‖xi − xj‖² < t``) a pair can only be an edge if the
points differ by less than ε = √t in every feature. Sorting the points into a uniform
grid of cell side a little over ε (a counting sort: count per cell, scan, scatter)
puts every neighbour of a point in the 3^dc cells around its own, so the
count → scan → fill passes of CSR-1 only visit those cells instead of all n points.

Which features make the cells (:func:`plan_grid`): up to :data:`MAX_CELL_DIMS` of them,
those spanning the most cells, as many as a simple cost model (cell ranges visited
plus expected candidates tested) favours; every feature is still tested exactly.
Cells live in a table of about 2n entries: when the grid has more cells than that,
cell coordinates wrap around (a torus), aliased cells share a slot and only add
candidates. The exact test and the weight are edge_rule.cuh's, as in CSR-1/2/3 (the
float32 squared distance accumulated feature by feature), so the graph equals the
float64 reference outside the rounding band (docs/architecture.md "Semantics") and CSR-1's graph
bit for bit. docs/fast-builders.md explains the margins.

The launchers take the edge rule as a :class:`~._launch.Rule` (plain numbers); the
graph layer validates user input before it calls them.

This module also holds what :mod:`.gemm` shares: input checks, launches and the
canonical-row assembly (:func:`sort_rows`). Stage timing and the row-offset scan are
the CSR builders' (:mod:`._launch`).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from ._launch import Rule, StageTimer, multiprocessors, scan
from ._loader import get_module

#: Largest number of features the grid builder compiles for.
GRID_MAX_DIM = 16

#: Largest number of features used as cell dimensions (3^4 = 81 cells around a point).
MAX_CELL_DIMS = 4

#: Relative margin of the cell side over ε: covers float32 rounding of the edge test
#: (a computed d² < t allows a true distance up to ε(1 + 4e-7)) and of the cell
#: coordinates (computed in double). See docs/fast-builders.md.
CELL_MARGIN = 1e-4

#: Cells per feature are capped here (wider features get coarser cells) so that cell
#: coordinates stay exact in double precision.
MAX_CELLS_PER_DIM = 2**32

#: Largest cell table (int32 cell ids).
MAX_TABLE = 2**30

#: Cost of visiting one contiguous range of cells, in candidate tests (cost model).
RANGE_COST = 4.0

#: Row sorts of :func:`sort_rows`.
ROW_SORTS = ("auto", "rank", "global")

#: ``row_sort="auto"`` uses the warp rank sort while the longest row has at most this
#: many entries and rows average (weighted by length) at most
#: :data:`RANK_SORT_MAX_WEIGHTED_ROW`; beyond, its O(k²) per row loses to one radix
#: sort of all (row, column) keys.
RANK_SORT_MAX_ROW = 8192
RANK_SORT_MAX_WEIGHTED_ROW = 1024

_BLOCK = 256


# --- shared by the fast builders -----------------------------------------------------


def check_device_data(X, name: str = "X"):
    """Check that `X` is what the GPU launchers take: a C-contiguous CuPy float32 n×d array.

    The public entry (:func:`explorer.build_graph`) has already converted and checked
    finiteness; this only guards direct calls from handing a launcher something its
    kernels would misread.

    Raises
    ------
    TypeError
        Not a CuPy array, or not float32.
    ValueError
        Not 2-D, not C-contiguous, fewer than 2 rows or no column.
    """
    import cupy

    if not isinstance(X, cupy.ndarray):
        raise TypeError(f"{name} must be a cupy.ndarray; got {type(X).__name__}")
    if X.dtype != cupy.float32:
        raise TypeError(f"{name} must be float32; got dtype {X.dtype}")
    if X.ndim != 2 or X.shape[0] < 2 or X.shape[1] < 1:
        raise ValueError(f"{name} must be n×d with n >= 2 and d >= 1; got shape {tuple(X.shape)}")
    if not X.flags.c_contiguous:
        raise ValueError(f"{name} must be C-contiguous; pass cupy.ascontiguousarray({name})")
    return X


def check_option(value, name: str, *, low: int = 1, high: int | None = None):
    """A launcher's integer option: None or an int in [low, high]; returned unchanged.

    Raises
    ------
    ValueError
        Naming the option, the value and the range.
    """
    if value is None:
        return None
    ok = isinstance(value, (int, np.integer)) and not isinstance(value, bool)
    if not ok or value < low or (high is not None and value > high):
        upper = "" if high is None else f" and <= {high}"
        raise ValueError(f"{name}={value!r} is not allowed; use an integer >= {low}{upper}")
    return int(value)


def check_row_sort(how) -> str:
    """`how` if it is one of :data:`ROW_SORTS`, else ValueError naming ``row_sort``."""
    if not isinstance(how, str) or how not in ROW_SORTS:
        raise ValueError(f"row_sort={how!r} is not allowed; use one of {ROW_SORTS}")
    return how


def check_rule(rule) -> Rule:
    """`rule` if it is a kernels :class:`~._launch.Rule`, else TypeError."""
    if not isinstance(rule, Rule):
        raise TypeError(f"rule must be an explorer.kernels Rule; got {type(rule).__name__}")
    return rule


def launch(kernel, n_threads: int, args, block: int = _BLOCK) -> None:
    """Launch `kernel` on a 1-D grid covering `n_threads` (nothing to do for 0)."""
    if n_threads > 0:
        kernel(((n_threads + block - 1) // block,), (block,), args)


def index_dtype(nnz: int, n: int):
    """int32 while nnz and n fit, int64 beyond (docs/architecture.md "Semantics")."""
    return np.int32 if max(int(nnz), int(n)) < 2**31 else np.int64


def sort_rows(module, row_start, cols, vals, *, n: int, nnz: int, max_row: int, sum_sq: int,
              how: str = "auto", n_cols: int | None = None):
    """Sort each CSR row's entries by column: ``(indices, data, how)`` of the canonical CSR.

    Parameters
    ----------
    module : cupy.RawModule
        A module compiled with ``rowsort.cuh``.
    row_start : cupy.ndarray of int64, shape (n + 1,)
        Row offsets (the final indptr).
    cols, vals : cupy.ndarray
        int32 columns and float32 values, each row's segment in any order, columns
        distinct within a row. Not modified.
    nnz, max_row, sum_sq : int
        Entries, longest row, and the sum of squared row lengths (the rank sort's
        work) on the host.
    how : {"auto", "rank", "global"}
        ``"rank"``: one warp per row ranks its entries (O(k²/32) per row, no
        scratch beyond the output). ``"global"``: one radix sort of (row · n + column)
        keys.
        ``"auto"`` picks by :data:`RANK_SORT_MAX_ROW` and
        :data:`RANK_SORT_MAX_WEIGHTED_ROW`; the one used is returned.
    n_cols : int, optional
        Columns of the matrix when it is not square (a row block of the graph: `n`
        rows of all `n_cols` points); default `n`.
    """
    import cupy

    if how == "auto":
        rank_ok = max_row <= RANK_SORT_MAX_ROW and sum_sq <= RANK_SORT_MAX_WEIGHTED_ROW * nnz
        how = "rank" if rank_ok else "global"
    if how == "rank":
        out_cols = cupy.empty_like(cols)
        out_vals = cupy.empty_like(vals)
        launch(module.get_function("sort_rows_rank"), 32 * n,
               (row_start, np.int32(n), cols, vals, out_cols, out_vals))
        return out_cols, out_vals, how
    rows = cupy.empty(nnz, dtype=cupy.int32)
    launch(module.get_function("expand_rows"), n, (row_start, np.int32(n), rows))
    key = rows.astype(cupy.int64)
    key *= n if n_cols is None else int(n_cols)
    key += cols
    order = cupy.argsort(key)
    return cols[order], vals[order], how


def make_csr(row_start, indices, data, n: int, nnz: int, rows: int | None = None):
    """The cupyx CSR matrix of canonical rows, with the index dtype the semantics prescribe.

    `rows` (default `n`): the rows held, for a row block (rows × n) of the graph.
    """
    import cupyx.scipy.sparse

    idx = index_dtype(nnz, n)
    shape = (n if rows is None else int(rows), n)
    csr = cupyx.scipy.sparse.csr_matrix(
        (data, indices.astype(idx, copy=False), row_start.astype(idx, copy=False)), shape=shape
    )
    csr.has_canonical_format = True
    return csr


# --- planning (host only) ------------------------------------------------------------


@dataclass(frozen=True)
class GridPlan:
    """Where the cells are: the features they use and the torus they live on.

    Attributes
    ----------
    dims : tuple of int
        Feature of each cell dimension; the last one is innermost (stride 1).
    lo : tuple of float
        Lower bound of the data along each of them (cells start there).
    side : tuple of float
        Cell side along each (ε·(1 + CELL_MARGIN), or coarser for very wide features).
    cells : tuple of int
        Cells the bounding box spans along each.
    torus : tuple of int
        Torus period along each: ``cells`` when the table holds them, else >= 3.
    stride : tuple of int
        Table stride of each cell dimension.
    est_candidates : float
        Candidates tested per point if the data filled its bounding box evenly.
    """

    dims: tuple
    lo: tuple
    side: tuple
    cells: tuple
    torus: tuple
    stride: tuple
    est_candidates: float

    @property
    def cell_dims(self) -> int:
        return len(self.dims)

    @property
    def table_size(self) -> int:
        return math.prod(self.torus)

    @property
    def wrapped(self) -> bool:
        return any(m < c for m, c in zip(self.torus, self.cells, strict=True))

    def arrays(self):
        """The ``gd`` (float64) and ``gi`` (int64) parameter arrays grid.cu reads."""
        pad = MAX_CELL_DIMS - self.cell_dims
        gd = np.array(
            [*self.lo, *[0.0] * pad, *[1.0 / s for s in self.side], *[0.0] * pad],
            dtype=np.float64,
        )
        gi = np.array(
            [*self.cells, *[1] * pad, *self.torus, *[1] * pad, *self.stride, *[0] * pad,
             *self.dims, *[0] * pad],
            dtype=np.int64,
        )
        return gd, gi

    def info(self) -> dict:
        return {
            "cell_dims": self.cell_dims,
            "cell_features": list(self.dims),
            "cell_side": list(self.side),
            "cells": list(self.cells),
            "torus": list(self.torus),
            "table_size": self.table_size,
            "wrapped": self.wrapped,
            "est_candidates_per_row": self.est_candidates,
        }


def _iroot(value: int, k: int) -> int:
    """floor(value ** (1/k)) for positive integers, exactly."""
    r = int(round(value ** (1.0 / k)))
    while r > 1 and r**k > value:
        r -= 1
    while (r + 1) ** k <= value:
        r += 1
    return max(r, 1)


def _torus_for(cells: list, table: int) -> list:
    """Torus periods for cell counts `cells` so that their product is about <= `table`.

    Dimensions with few cells keep all of them; the rest share what is left evenly.
    A wrapped dimension gets at least 3 (its three neighbouring cells stay distinct).
    """
    order = sorted(range(len(cells)), key=lambda k: cells[k])
    torus = [0] * len(cells)
    rest = table
    for rank, k in enumerate(order):
        share = _iroot(rest, len(cells) - rank)
        torus[k] = min(cells[k], max(3, share))
        rest = max(1, rest // torus[k])
    return torus


def plan_grid(lo, hi, n: int, sqdist_cutoff: float, *, cell_dims=None, table_size=None) -> GridPlan:
    """Choose the cell features, sides and torus for data in the box [lo, hi].

    Parameters
    ----------
    lo, hi : array_like of shape (d,)
        Per-feature minimum and maximum of the data.
    n : int
        Number of points.
    sqdist_cutoff : float
        t: edge iff squared distance < t.
    cell_dims : int, optional
        Number of cell dimensions (1 .. min(d, 4)); default: the cost model's choice.
    table_size : int, optional
        Cell table size to aim for; default ``max(2n, 4096)``.
    """
    lo = np.asarray(lo, dtype=np.float64)
    hi = np.asarray(hi, dtype=np.float64)
    d = lo.shape[0]
    table = max(2 * n, 4096) if table_size is None else table_size
    side0 = math.sqrt(sqdist_cutoff) * (1.0 + CELL_MARGIN)
    extent = hi - lo
    side = np.maximum(side0, extent / MAX_CELLS_PER_DIM)
    cells = (np.floor(extent / side) + 1).astype(np.int64)
    # Features by decreasing cell count; a feature of one cell separates nothing.
    ranked = sorted(range(d), key=lambda k: -int(cells[k]))
    useful = [k for k in ranked if cells[k] > 1] or ranked[:1]
    if cell_dims is None:
        choices = range(1, min(len(useful), MAX_CELL_DIMS) + 1)
        feats = useful
    else:
        choices = [cell_dims]
        feats = ranked

    best = None
    for dc in choices:
        chosen = feats[:dc]
        torus = _torus_for([int(cells[k]) for k in chosen], table)
        # Neighbour cells that exist along each dimension (3, or fewer for 1-2 cells).
        est = math.prod(min(3, m) for m in torus) * n / math.prod(torus)
        cost = RANGE_COST * 3 ** (dc - 1) + est
        if best is None or cost < best[0]:
            best = (cost, chosen, torus, est)
    _, chosen, torus, est = best
    # Innermost (stride 1) = the dimension with most cells: its neighbour cells are
    # contiguous in the table, so they are scanned as one range.
    order = sorted(range(len(chosen)), key=lambda a: (cells[chosen[a]], -a))
    dims = [chosen[a] for a in order]
    torus = [torus[a] for a in order]
    stride = [1] * len(dims)
    for k in range(len(dims) - 2, -1, -1):
        stride[k] = stride[k + 1] * torus[k + 1]
    if math.prod(torus) > MAX_TABLE:
        raise ValueError(f"table_size={table} gives a cell table of {math.prod(torus)} entries; "
                         f"allowed: at most {MAX_TABLE}")
    return GridPlan(
        dims=tuple(int(k) for k in dims),
        lo=tuple(float(lo[k]) for k in dims),
        side=tuple(float(side[k]) for k in dims),
        cells=tuple(int(cells[k]) for k in dims),
        torus=tuple(int(m) for m in torus),
        stride=tuple(int(s) for s in stride),
        est_candidates=float(est),
    )


# --- device side ---------------------------------------------------------------------


#: The rule the bounding-box module is compiled with when no rule is at hand (the
#: bounding box does not depend on it; every grid module includes edge_rule.cuh).
_BBOX_RULE = Rule("uniform", 1.0)


@functools.cache
def _module(d: int, rule_defines: tuple):
    names = tuple(f"{k}<{dc}>" for dc in range(1, MAX_CELL_DIMS + 1)
                  for k in ("grid_bin", "grid_count", "grid_fill"))
    return get_module("grid", defines=(f"-DGRID_DIM={d}", *rule_defines), name_expressions=names)


@functools.cache
def _kernel(d: int, rule_defines: tuple, name: str):
    return _module(d, rule_defines).get_function(name)


def _check_rule(X, rule: Rule) -> None:
    check_rule(rule)
    if rule.is_cosine:
        raise ValueError(
            f"method='grid' serves distance rules (metric 'gaussian' or 'uniform'); got "
            f"{rule.describe()}: use method='gemm' or a CSR method for cosine"
        )
    d = X.shape[1]
    if d > GRID_MAX_DIM:
        raise ValueError(
            f"method='grid' is for low-dimensional data, d <= {GRID_MAX_DIM}; got d={d}: "
            f"use method='gemm' or a CSR method"
        )


def _check_options(d: int, cell_dims, table_size) -> None:
    check_option(cell_dims, "cell_dims", low=1, high=min(d, MAX_CELL_DIMS))
    check_option(table_size, "table_size", low=1, high=MAX_TABLE)


#: Blocks of the bounding-box pass per multiprocessor (each strides over many rows).
_BBOX_BLOCKS_PER_SM = 4


def _bounding_box(X, rule: Rule = _BBOX_RULE) -> np.ndarray:
    """(2, d) float64 on the host: the min and max of every feature of X (`rule` only
    picks the compiled module the kernel comes from)."""
    import cupy

    n, d = X.shape
    sms = multiprocessors()
    blocks = max(1, min(-(-n // _BLOCK), sms * _BBOX_BLOCKS_PER_SM))
    lo = cupy.empty((blocks, d), dtype=cupy.float32)
    hi = cupy.empty((blocks, d), dtype=cupy.float32)
    _kernel(d, rule.defines, "grid_bbox")((blocks,), (_BLOCK,), (X, np.int32(n), lo, hi))
    return cupy.stack([lo.min(axis=0), hi.max(axis=0)]).get().astype(np.float64)


@dataclass
class _Binned:
    rule: Rule
    plan: GridPlan
    gd: object  # cupy float64 parameters
    gi: object  # cupy int64 parameters
    Xs: object  # points sorted by cell
    perm: object  # original index of each sorted point
    cell_start: object  # (table + 1) offsets into Xs


def _bin(X, rule: Rule, cell_dims, table_size, timer: StageTimer) -> _Binned:
    """Bounding box, plan, and the counting sort of the points by torus cell."""
    import cupy

    n, d = X.shape
    defines = rule.defines
    with timer("bbox"):
        box = _bounding_box(X, rule)
    plan = plan_grid(box[0], box[1], n, rule.threshold, cell_dims=cell_dims,
                     table_size=table_size)
    with timer("bin"):
        gd_host, gi_host = plan.arrays()
        gd, gi = cupy.asarray(gd_host), cupy.asarray(gi_host)
        dc = plan.cell_dims
        table = plan.table_size
        cell_count = cupy.zeros(table, dtype=cupy.int32)
        cell_of = cupy.empty(n, dtype=cupy.int32)
        slot = cupy.empty(n, dtype=cupy.int32)
        launch(_kernel(d, defines, f"grid_bin<{dc}>"), n,
               (X, np.int32(n), gd, gi, cell_of, slot, cell_count))
        cell_start = cupy.empty(table + 1, dtype=cupy.int32)
        cell_start[0] = 0
        cell_start[1:] = cupy.cumsum(cell_count, dtype=cupy.int32)
        Xs = cupy.empty_like(X)
        perm = cupy.empty(n, dtype=cupy.int32)
        launch(_kernel(d, defines, "grid_scatter"), n,
               (X, np.int32(n), cell_of, slot, cell_start, Xs, perm))
    return _Binned(rule, plan, gd, gi, Xs, perm, cell_start)


def _count(b: _Binned, d: int, Q, qid, nq: int, by_id: bool, degrees: bool, out_size: int):
    """Launch grid_count; returns ``(counts, degrees or None)``."""
    import cupy

    counts = cupy.empty(out_size, dtype=cupy.int32)
    deg = cupy.empty(out_size if degrees else 0, dtype=cupy.float32)
    t, scale = b.rule.args
    launch(_kernel(d, b.rule.defines, f"grid_count<{b.plan.cell_dims}>"), nq,
           (Q, qid, np.int32(nq), b.Xs, b.perm, b.cell_start, b.gd, b.gi,
            t, counts, np.int32(by_id), np.int32(degrees), deg, scale))
    return counts, (deg if degrees else None)


def build_grid(X, rule: Rule, *, cell_dims=None, table_size=None, row_sort="auto",
               check_nnz=None):
    """Build the graph of a distance rule through a uniform grid (``method="grid"``).

    Parameters
    ----------
    X : cupy.ndarray of shape (n, d), float32, C-contiguous
        d <= :data:`GRID_MAX_DIM` (the cost is O(n · candidates); it pays for d up
        to ~8, where the neighbourhood of a cell is a small part of the data).
    rule : Rule
        A distance rule (gaussian or uniform; ``rule.threshold`` the squared-distance
        cutoff).
    cell_dims : int, optional
        Number of features used as cell dimensions (1 .. min(d, 4)); default: the
        cost model of :func:`plan_grid`.
    table_size : int, optional
        Cell table size to aim for (default ``max(2n, 4096)``); smaller tables wrap
        the grid onto a torus: less memory, more candidates.
    row_sort : {"auto", "rank", "global"}
        How rows get ascending columns (:func:`sort_rows`).
    check_nnz : callable, optional
        ``check_nnz(nnz)``, called with the exact nnz after the counting pass, before
        the nnz-sized arrays are allocated: the caller's memory check (it raises to
        refuse the build).

    Returns
    -------
    csr : cupyx.scipy.sparse.csr_matrix
        Canonical: float32 weights, ascending columns, no diagonal, symmetric.
    timings : dict of str to float
        Seconds per stage (CUDA events): ``bbox``, ``bin``, ``count``, ``scan``,
        ``fill``, ``sort``.
    info : dict
        The plan (cell features, sides, cells, torus, table size), ``nnz``,
        ``max_row`` and the row sort used.

    Raises
    ------
    TypeError, ValueError
        `X` not a C-contiguous CuPy float32 matrix, a cosine rule, d too large, or an
        option out of range.
    """
    import cupy

    X = check_device_data(X)
    _check_rule(X, rule)
    n, d = X.shape
    _check_options(d, cell_dims, table_size)
    check_row_sort(row_sort)

    timer = StageTimer()
    b = _bin(X, rule, cell_dims, table_size, timer)
    with timer("count"):
        counts, _ = _count(b, d, b.Xs, b.perm, n, True, False, n)
    with timer("scan"):
        row_start = scan(counts)
        wide = counts.astype(cupy.int64)
        nnz, max_row, sum_sq = (int(v) for v in
                                cupy.stack([row_start[-1], wide.max(), (wide * wide).sum()]).get())
    if check_nnz is not None:
        check_nnz(nnz)
    with timer("fill"):
        cols = cupy.empty(nnz, dtype=cupy.int32)
        vals = cupy.empty(nnz, dtype=cupy.float32)
        t, scale = rule.args
        launch(_kernel(d, rule.defines, f"grid_fill<{b.plan.cell_dims}>"), n,
               (b.Xs, b.perm, np.int32(n), b.Xs, b.perm, b.cell_start, b.gd, b.gi,
                t, row_start, cols, vals, scale))
    with timer("sort"):
        indices, data, how = sort_rows(_module(d, rule.defines), row_start, cols, vals, n=n,
                                       nnz=nnz, max_row=max_row, sum_sq=sum_sq, how=row_sort)
    csr = make_csr(row_start, indices, data, n, nnz)
    info = {"method": "grid", **b.plan.info(), "nnz": nnz, "max_row": max_row, "row_sort": how,
            "exp": rule.exp_name}
    return csr, timer.seconds(), info


def check_row_range(r0, r1, n: int) -> tuple[int, int]:
    """``(r0, r1)`` as ints after checking ``0 <= r0 <= r1 <= n`` (a row block)."""
    for name, value in (("r0", r0), ("r1", r1)):
        if isinstance(value, bool) or not isinstance(value, int | np.integer):
            raise TypeError(f"{name} must be an integer; got {value!r}")
    r0, r1 = int(r0), int(r1)
    if not 0 <= r0 <= r1 <= n:
        raise ValueError(f"the row range must satisfy 0 <= r0 <= r1 <= n={n}; got r0={r0}, "
                         f"r1={r1}")
    return r0, r1


def empty_rows(rows: int, n: int):
    """A canonical cupyx CSR matrix of `rows` × `n` without entries."""
    import cupy

    return make_csr(cupy.zeros(rows + 1, dtype=cupy.int64), cupy.empty(0, dtype=cupy.int32),
                    cupy.empty(0, dtype=cupy.float32), n, 0, rows=rows)


def build_grid_rows(X, rule: Rule, r0: int, r1: int, *, cell_dims=None, table_size=None,
                    row_sort="auto"):
    """Rows ``r0:r1`` of the grid-built graph of all the points of `X` (a row block).

    The binning covers all n points; the counting and filling passes run one thread
    per row of the block (``grid_count`` and ``grid_fill`` with the block's points and
    their global ids as queries, as :func:`count_rows_grid` counts sample rows). Each
    pair is decided by the same float32 arithmetic as in :func:`build_grid`, whose
    squared distance does not depend on which point comes first, so the blocks
    stacked are :func:`build_grid`'s matrix exactly.

    Parameters
    ----------
    X : cupy.ndarray of shape (n, d), float32, C-contiguous
        All the points.
    rule : Rule
        A distance rule.
    r0, r1 : int
        The rows, ``0 <= r0 <= r1 <= n`` (an empty block when equal).
    cell_dims, table_size, row_sort
        As in :func:`build_grid`.

    Returns
    -------
    csr : cupyx.scipy.sparse.csr_matrix of shape (r1 - r0, n)
        Canonical (ascending columns, no diagonal entry, float32 weights); int32
        indices while its nnz and n fit, int64 beyond.
    timings : dict of str to float
        As in :func:`build_grid`.
    info : dict
        As in :func:`build_grid`, with ``rows`` = ``(r0, r1)``.
    """
    import cupy

    X = check_device_data(X)
    _check_rule(X, rule)
    n, d = X.shape
    _check_options(d, cell_dims, table_size)
    check_row_sort(row_sort)
    r0, r1 = check_row_range(r0, r1, n)
    m = r1 - r0
    if m == 0:
        return empty_rows(0, n), {}, {"method": "grid", "rows": (r0, r1), "nnz": 0,
                                      "max_row": 0, "row_sort": None, "exp": rule.exp_name}

    timer = StageTimer()
    b = _bin(X, rule, cell_dims, table_size, timer)
    Q = cupy.ascontiguousarray(X[r0:r1])
    qid = cupy.arange(r0, r1, dtype=cupy.int32)
    with timer("count"):
        counts, _ = _count(b, d, Q, qid, m, False, False, m)
    with timer("scan"):
        row_start = scan(counts)
        wide = counts.astype(cupy.int64)
        nnz, max_row, sum_sq = (int(v) for v in
                                cupy.stack([row_start[-1], wide.max(), (wide * wide).sum()]).get())
    with timer("fill"):
        cols = cupy.empty(nnz, dtype=cupy.int32)
        vals = cupy.empty(nnz, dtype=cupy.float32)
        # grid_fill reads the start of a row at its global id: offsets indexed 0..r1,
        # the block's from r0 on (the entries before r0 are never read).
        global_start = cupy.zeros(r1 + 1, dtype=cupy.int64)
        global_start[r0:] = row_start
        t, scale = rule.args
        launch(_kernel(d, rule.defines, f"grid_fill<{b.plan.cell_dims}>"), m,
               (Q, qid, np.int32(m), b.Xs, b.perm, b.cell_start, b.gd, b.gi,
                t, global_start, cols, vals, scale))
        del global_start
    with timer("sort"):
        indices, data, how = sort_rows(_module(d, rule.defines), row_start, cols, vals, n=m,
                                       nnz=nnz, max_row=max_row, sum_sq=sum_sq, how=row_sort,
                                       n_cols=n)
    csr = make_csr(row_start, indices, data, n, nnz, rows=m)
    info = {"method": "grid", "rows": (r0, r1), **b.plan.info(), "nnz": nnz,
            "max_row": max_row, "row_sort": how, "exp": rule.exp_name}
    return csr, timer.seconds(), info


def count_rows_grid(X, rule: Rule, rows=None, *, degrees=False, cell_dims=None,
                    table_size=None):
    """Neighbours per row of a distance-rule graph, without building it (live statistics).

    Parameters
    ----------
    X : cupy.ndarray of shape (n, d), float32, C-contiguous
    rule : Rule
        A distance rule.
    rows : array_like of int, optional
        Rows to count (NumPy or CuPy, each in [0, n)); default all.
    degrees : bool
        Also return each row's weighted degree (sum of its edge weights, float32).
    cell_dims, table_size
        As in :func:`build_grid`.

    Returns
    -------
    counts : cupy.ndarray of int32
        Count for each of `rows` (in their order), or for every row.
    degrees : cupy.ndarray of float32
        Only with ``degrees=True`` (then the result is the pair ``(counts, degrees)``).

    Notes
    -----
    Cost: the binning (a counting sort of all n points) plus the counting pass over
    the chosen rows' neighbourhoods: milliseconds for millions of low-d points.
    """
    import cupy

    X = check_device_data(X)
    _check_rule(X, rule)
    n, d = X.shape
    _check_options(d, cell_dims, table_size)
    if rows is not None:
        rows = cupy.asarray(rows)
        if rows.ndim != 1 or rows.dtype.kind not in "iu":
            raise TypeError(f"rows must be a 1-D integer array; got {rows.dtype} of shape "
                            f"{tuple(rows.shape)}")
        if rows.size and bool(((rows < 0) | (rows >= n)).any()):
            raise ValueError(f"rows must lie in [0, {n}); got min {int(rows.min())}, "
                             f"max {int(rows.max())}")
        rows = rows.astype(cupy.int32)
    b = _bin(X, rule, cell_dims, table_size, StageTimer())
    if rows is None:
        counts, deg = _count(b, d, b.Xs, b.perm, n, True, degrees, n)
    else:
        m = int(rows.size)
        Q = cupy.ascontiguousarray(X[rows])
        counts, deg = _count(b, d, Q, rows, m, False, degrees, m)
    return (counts, deg) if degrees else counts
