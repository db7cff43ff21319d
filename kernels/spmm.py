"""Launcher of the warp-per-row sparse × dense block product (``spmm.cu``), the
product of the GPU Chebyshev eigensolver.

A warp reads whole rows of the row-major block and splits a row's nonzeros among its
lanes, so each nonzero gathers one contiguous row of Y. It beats cuSPARSE's generic
SpMM on the same row-major float32 block for 8 to 32 columns; narrower blocks stay
with cuSPARSE, where idle lanes cost more than they save (benchmarks/README.md,
"Figures moved from library comments").
"""

from __future__ import annotations

import numpy as np

from ._launch import launch

#: Widest block the kernel takes (one warp's lanes); wider blocks go to cuSPARSE.
MAX_BLOCK = 32

#: Narrowest block it takes (measured faster from 8 on; the Chebyshev block is >= 8):
#: below, a slot of 8 lanes leaves lanes idle.
MIN_BLOCK = 8

#: Threads per block (8 rows, a warp each).
THREADS = 256

_VALUE = {np.dtype(np.float32): "f32", np.dtype(np.float64): "f64"}
_INDEX = {np.dtype(np.int32): "i32", np.dtype(np.int64): "i64"}


def supports(A, Y) -> bool:
    """Whether :func:`csr_times_block` takes CSR `A` and block `Y`: a 2-D block of
    :data:`MIN_BLOCK`-:data:`MAX_BLOCK` columns of A's value type (float32 or
    float64), int32 or int64 indices."""
    return (
        Y.ndim == 2
        and MIN_BLOCK <= Y.shape[1] <= MAX_BLOCK
        and np.dtype(A.dtype) in _VALUE
        and np.dtype(Y.dtype) == np.dtype(A.dtype)
        and np.dtype(A.indices.dtype) in _INDEX
        and np.dtype(A.indptr.dtype) == np.dtype(A.indices.dtype)
    )


def csr_times_block(A, Y, out=None):
    """``A @ Y`` for a CuPy CSR matrix `A` (canonical or not: duplicates add up) and a
    dense block `Y`, row-major.

    Parameters
    ----------
    A : cupyx.scipy.sparse.csr_matrix of shape (n, m)
    Y : cupy.ndarray of shape (m, b)
        Made C-contiguous if it is not; see :func:`supports` for the shapes and dtypes.
    out : cupy.ndarray of shape (n, b), optional
        C-contiguous, of Y's dtype; every entry is written.

    Returns
    -------
    cupy.ndarray of shape (n, b), C-contiguous
    """
    import cupy

    if not supports(A, Y):
        raise ValueError(
            f"csr_times_block takes a float32/float64 CSR with int32/int64 indices and a "
            f"block of {MIN_BLOCK}-{MAX_BLOCK} columns of its dtype; got A {A.dtype} "
            f"(indices {A.indices.dtype}), Y {Y.dtype} of shape {tuple(Y.shape)}"
        )
    n, m = A.shape
    if Y.shape[0] != m:
        raise ValueError(f"A is {n} × {m} but Y has {Y.shape[0]} rows")
    b = int(Y.shape[1])
    Y = cupy.ascontiguousarray(Y)
    if out is None:
        out = cupy.empty((n, b), dtype=Y.dtype)
    elif out.shape != (n, b) or out.dtype != Y.dtype or not out.flags.c_contiguous:
        raise ValueError(f"out must be a C-contiguous ({n}, {b}) {Y.dtype} array")
    if n == 0:
        return out
    group = 8 if b <= 8 else 16 if b <= 16 else 32
    name = f"spmm_g{group}_{_VALUE[np.dtype(Y.dtype)]}_{_INDEX[np.dtype(A.indices.dtype)]}"
    blocks = -(-n * 32 // THREADS)
    launch("spmm", name, (), (blocks,), (THREADS,),
           (A.indptr, A.indices, A.data, Y, out, np.int64(n), np.int32(b)))
    return out
