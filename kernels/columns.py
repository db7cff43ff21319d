"""Launcher of the per-column statistics pass (``columns.cu``): minimum, maximum and
the float64 sums of ``x - c`` and ``(x - c)²`` of every column in one read of the
matrix, where CuPy's ``min(axis=0)`` reads each column with a stride of d values."""

from __future__ import annotations

import numpy as np

from ._launch import launch, multiprocessors

#: Threads per block (``THREADS`` in ``columns.cu``): the widest column tile.
THREADS = 256

_KERNEL = {np.dtype(np.float32): "column_stats_f32", np.dtype(np.float64): "column_stats_f64"}


def supports(X) -> bool:
    """Whether :func:`column_stats` takes `X`: a 2-D float32 or float64 CuPy array whose
    rows are contiguous (a row slice or a C-contiguous array), with at least one row and
    one column."""
    return (getattr(X, "ndim", 0) == 2 and np.dtype(X.dtype) in _KERNEL
            and X.shape[0] > 0 and X.shape[1] > 0
            and (X.shape[1] == 1 or X.strides[1] == X.itemsize)
            and X.strides[0] % X.itemsize == 0 and X.strides[0] > 0)


def column_stats(X, centre=None):
    """Per-column ``(min, max, Σ(x − c), Σ(x − c)²)`` of `X`, float64 CuPy arrays of
    shape (d,).

    Parameters
    ----------
    X : cupy.ndarray of shape (n, d)
        See :func:`supports`.
    centre : cupy.ndarray of shape (d,), optional
        The c of each column (float64); 0 when None.

    Returns
    -------
    lo, hi, s1, s2 : cupy.ndarray of shape (d,), float64
        NaN in a column makes its minimum and maximum NaN (as ``numpy.min`` does).
    """
    import cupy

    if not supports(X):
        raise ValueError(f"column_stats takes a 2-D float32/float64 CuPy array with "
                         f"contiguous rows; got {X.dtype} of shape {tuple(X.shape)} and "
                         f"strides {X.strides}")
    n, d = (int(s) for s in X.shape)
    ld = X.strides[0] // X.itemsize if n > 1 else d
    tiles = -(-d // THREADS)
    # Enough slabs to fill the device about four times over, and no slab so short
    # that the folding dominates.
    slabs = max(1, min(-(-n // 64), -(-4 * multiprocessors() // tiles)))
    slab_rows = -(-n // slabs)
    slabs = -(-n // slab_rows)
    if centre is None:
        centre = cupy.zeros(d, dtype=cupy.float64)
    centre = cupy.ascontiguousarray(centre, dtype=cupy.float64)
    if centre.shape != (d,):
        raise ValueError(f"centre must have shape ({d},); got {tuple(centre.shape)}")
    parts = cupy.empty((4, slabs, d), dtype=cupy.float64)
    launch("columns", _KERNEL[np.dtype(X.dtype)], (), (tiles, slabs), (THREADS,),
           (X, np.int64(n), np.int32(d), np.int64(ld), np.int64(slab_rows),
            centre, parts[0], parts[1], parts[2], parts[3]))
    return parts[0].min(axis=0), parts[1].max(axis=0), parts[2].sum(axis=0), \
        parts[3].sum(axis=0)
