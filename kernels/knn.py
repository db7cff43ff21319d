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
  one cuBLAS float32 product each (centred data, or unit rows for cosine); one warp per
  row keeps its best ``C = min(n - 1, 2k + 8)`` columns by the float32 key; a thread
  per candidate re-evaluates it in float64 and a thread per row keeps the best k. A
  true neighbour is missed only if float32 rounding puts more than C - k points ahead
  of it: pairs within the rounding band of the k-th value (docs/architecture.md
  "Exactness").

This module knows CuPy only; the graph layer (``explorer.graph._knn_gpu``) validates
input and holds the defaults. CuPy is imported when a launcher runs.
"""

from __future__ import annotations

import math

import numpy as np

from ._launch import StageTimer
from ._loader import get_module

#: Largest k the kernels' per-thread lists hold (the graph layer's MAX_NEIGHBORS).
MAX_K = 256

#: Candidates per row of the GEMM path beyond k: ``C = min(n - 1, 2k + GEMM_EXTRA)``.
GEMM_EXTRA = 8

#: Points per grid cell aimed at (over the bounding box of the cell features).
GRID_OCCUPANCY = 2.0

#: Most features that make grid cells.
GRID_CELL_DIMS = 3

#: Bytes of one float32 similarity tile of the GEMM path, at most.
TILE_BYTES = 1 << 30

_BLOCK = 128


def _kmax(k: int) -> int:
    """The list capacity compiled for k: the next power of two >= k (at least 8)."""
    return max(8, 1 << (int(k) - 1).bit_length())


def _module(k: int, dc: int | None = None):
    defines = [f"-DKMAX={_kmax(k)}"]
    if dc is not None:
        defines.append(f"-DDC={dc}")
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


def knn_gemm(X, k: int, cosine: bool, *, tile_bytes: int = TILE_BYTES,
             timer: StageTimer | None = None):
    """The k nearest other points of each row of `X` via cuBLAS tiles (see the module).

    Parameters
    ----------
    X : cupy.ndarray of shape (n, d), float32, C-contiguous
    k : int
    cosine : bool
        Nearest by cosine (largest first; zero rows get no neighbours and are nobody's)
        instead of squared distance.
    tile_bytes : int
        Bytes of one float32 tile (rows × n): the row block is ``tile_bytes // (4 n)``
        rows, at least 32.
    timer : StageTimer, optional
        Records ``"prepare"``, ``"gemm"``, ``"topk"`` and ``"refine"``.

    Returns
    -------
    neighbors : cupy.ndarray of int64, shape (n, k), -1 padded
    compared : cupy.ndarray of float64, shape (n, k): squared distances or cosines
    info : dict
        ``candidates`` per row and ``block_rows``.
    """
    import cupy

    _check(X, k)
    timer = timer or StageTimer()
    n, d = X.shape
    C = min(n - 1, 2 * k + GEMM_EXTRA)
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
            sq = cupy.ascontiguousarray((Z * Z).sum(axis=1))
            valid = None
        if valid is not None:
            valid = valid.astype(cupy.uint8)
    module = _module(C)
    topk = module.get_function("knn_tile_topk")
    pair_keys = module.get_function("knn_pair_keys")
    refine = module.get_function("knn_refine")
    block_rows = int(max(32, min(n, tile_bytes // (4 * n))))
    idx = cupy.empty((n, k), dtype=cupy.int64)
    val = cupy.empty((n, k), dtype=cupy.float64)
    cand = cupy.empty((block_rows, C), dtype=cupy.int64)
    keys = cupy.empty((block_rows, C), dtype=cupy.float64)
    null = np.uint64(0)  # a null pointer
    for r0 in range(0, n, block_rows):
        rows = min(block_rows, n - r0)
        with timer("gemm"):
            G = Z[r0 : r0 + rows] @ Z.T
        with timer("topk"):
            threads = rows * 32
            topk(((threads + _BLOCK - 1) // _BLOCK,), (_BLOCK,),
                 (G, np.int64(n), np.int32(rows), np.int64(n), np.int64(r0),
                  null if sq is None else sq, valid if cosine else null, np.int32(C),
                  cand))
        del G
        with timer("refine"):
            pairs = rows * C
            pair_keys(((pairs + _BLOCK - 1) // _BLOCK,), (_BLOCK,),
                      (X, np.int32(d), np.int64(r0), np.int32(rows), cand, np.int32(C),
                       np.int32(1 if cosine else 0), null if norms is None else norms, keys))
            refine(((rows + _BLOCK - 1) // _BLOCK,), (_BLOCK,),
                   (np.int64(r0), np.int32(rows), cand, keys, np.int32(C), np.int32(k),
                    np.int32(1 if cosine else 0), idx, val))
    return idx, val, {"candidates": C, "block_rows": block_rows}
