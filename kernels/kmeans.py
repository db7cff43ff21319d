"""Launcher of the fused k-means step (``kmeans.cu``) used by explorer.kmeans on the GPU.

The GEMM path of :mod:`explorer.kmeans` runs about fifteen kernels per chunk of rows
and writes an n × k distance block and an n × (d + 1) float64 copy of the data; for the
small k and d of a spectral embedding with few clusters the whole step is one pass that
reads each row once. Larger k·d (see :data:`FUSED_MAX_KD`; the representatives of a
large data set, k in the thousands) stay on the GEMM path, unless d is at most
:data:`FUSED_ANY_K_MAX_D`.
"""

from __future__ import annotations

import numpy as np

from ._launch import launch

#: Threads per block of ``kmeans_step``.
BLOCK = 256

#: Blocks per multiprocessor: enough resident warps to hide the row loads, few enough
#: that the blocks' final float64 atomics (k·(d + 1) each) stay negligible.
BLOCKS_PER_SM = 8

#: Largest per-block float64 accumulator, bytes: k·(d + 1)·8 within the 48 KiB a block
#: gets without opting in, leaving room for two blocks per multiprocessor.
MAX_SUMS_BYTES = 40 * 1024


#: Largest k·d for which explorer.kmeans takes the fused step (and any k that fits when
#: d <= :data:`FUSED_ANY_K_MAX_D`). Each thread walks the k centres with scalar loads,
#: so its cost grows with k·d, while the GEMM path's grows with k (the n × k distance
#: block) plus ~15 kernels per chunk whatever n is. One step on an H200, fused against
#: GEMM (benchmarks/fast.py, ``kmeans.*.step_by_path_s``), n = 5·10⁶: k = d = 10, 1.29
#: against 6.36 ms; 16, 4.99 / 9.60; 24, 7.18 / 11.9; 32, 27.1 / 15.0; 64, 126 / 27.3.
#: n = 2.4·10⁵, k = d = 10: 0.16 / 1.02 ms (with the GEMM path, k-means on the
#: MNIST240K embedding took 1.74 s; fused, 0.53 s).
FUSED_MAX_KD = 576

#: Up to this many features the fused step is taken for every k whose sums fit: its
#: per-centre work is a few registers. n = 10⁶, d = 4, k = 1024: 4.0 against 48 ms.
FUSED_ANY_K_MAX_D = 4


def fused_step_fits(k: int, d: int) -> bool:
    """Whether the fused step can handle `k` centres in `d` dimensions (its sums fit a
    block's shared memory)."""
    return k * (d + 1) * 8 <= MAX_SUMS_BYTES


def fused_step_pays(k: int, d: int) -> bool:
    """Whether explorer.kmeans should use the fused step (see :data:`FUSED_MAX_KD` and
    :data:`FUSED_ANY_K_MAX_D`)."""
    return (k * d <= FUSED_MAX_KD or d <= FUSED_ANY_K_MAX_D) and fused_step_fits(k, d)


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
    C32 = centers.astype(cupy.float32)
    neg2c = cupy.ascontiguousarray(-2.0 * C32)
    c_sq = (C32 * C32).sum(axis=1)
    labels = cupy.empty(n, dtype=cupy.int32)
    mind = cupy.empty(n, dtype=cupy.float32)
    sums = cupy.zeros((k, d + 1), dtype=cupy.float64) if want_sums else None
    sms = cupy.cuda.Device().attributes["MultiProcessorCount"]
    grid = max(1, min(-(-n // BLOCK), sms * BLOCKS_PER_SM))
    shared = k * (d + 1) * 8 if want_sums else 0
    launch("kmeans", "kmeans_step", (), (grid,), (BLOCK,),
           (X, cupy.ascontiguousarray(x_sq, dtype=cupy.float32), neg2c, c_sq,
            np.int64(n), np.int32(d), np.int32(k), labels, mind,
            sums if want_sums else np.uint64(0)),
           shared_mem=shared)
    return labels, mind, sums
