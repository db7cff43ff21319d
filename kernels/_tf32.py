"""Products on TF32 tensor cores (cuBLAS ``gemmEx``) and the bound on their error.

cuBLAS forms ``CUBLAS_COMPUTE_32F_FAST_TF32`` products from float32 operands rounded
(or truncated) to TF32, 10 stored mantissa bits, and accumulates them in float32. For
float32 vectors x and y of d features the result g̃ of ``x·y`` then satisfies

    |g̃ − x·y| <= :func:`dot_error`\\ (d) · Σ|x_t y_t| <= dot_error(d) · ||x|| ||y||,

with ``dot_error(d) = 2 u_tf32 + u_tf32² + 2 (d + 2) u``: each product is off by at most
``2 u_tf32 + u_tf32²`` of itself (each operand by ``u_tf32 = 2⁻¹⁰``), the d-term float32
sum by ``(d + 2) u`` (``u = 2⁻²⁴``; tensor cores may truncate: 2u per addition). The
checked k-means assignment (:mod:`.kmeans`) and the kNN search (:mod:`.knn`) build their
bounds on it. This module imports CuPy only inside :func:`tf32_product`'s callers.
"""

from __future__ import annotations

import numpy as np

#: Unit roundoff of float32, and the relative error of a TF32 operand.
U32 = 2.0**-24
U_TF32 = 2.0**-10

#: cuBLAS enums for the TF32 product (cublas_api.h / library_types.h).
_OP_N, _OP_T = 0, 1
_R_32F = 0
_COMPUTE_32F_FAST_TF32 = 77
_GEMM_DEFAULT = -1
POINTER_MODE_HOST = 0


def dot_error(d: int) -> float:
    """The relative bound ``2 u_tf32 + u_tf32² + 2 (d + 2) u`` of a TF32 product of d
    terms against ``Σ|x_t y_t|`` (see the module)."""
    return 2 * U_TF32 + U_TF32**2 + 2 * (d + 2) * U32


def tf32_product(handle, cublas, N, Xb, out):
    """``out[r, j] = Xb[r] · N[j]`` (float32, C-contiguous; TF32 tensor cores).

    `handle` is the device's cuBLAS handle in host pointer mode
    (:data:`POINTER_MODE_HOST`), `cublas` the ``cupy_backends.cuda.libs.cublas`` module;
    `out` has shape ``(len(Xb), len(N))``.
    """
    k, d = N.shape
    rows = Xb.shape[0]
    one = np.ones(1, dtype=np.float32)
    zero = np.zeros(1, dtype=np.float32)
    cublas.gemmEx(handle, _OP_T, _OP_N, k, rows, d, one.ctypes.data, N.data.ptr, _R_32F, d,
                  Xb.data.ptr, _R_32F, d, zero.ctypes.data, out.data.ptr, _R_32F, k,
                  _COMPUTE_32F_FAST_TF32, _GEMM_DEFAULT)
