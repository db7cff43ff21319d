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

**The split ("3xTF32") product.** :func:`split_tf32` writes a float32 ``v`` as
``hi = rn_tf32(v)`` (rounded to TF32 on its bits, so exactly representable in TF32
and left alone by any tensor-core conversion) and ``lo = v − hi`` (exact in float32,
``|lo| <= 2⁻¹¹ |v|``). One TF32 GEMM over the concatenated inner dimension,
``[x_hi, x_lo, x_hi] · [c_hi, c_hi, c_lo]``, then forms
``x_hi·c_hi + x_lo·c_hi + x_hi·c_lo`` and misses only ``x_lo·c_lo``. Its error
against ``x·c`` (:func:`split_dot_error`), per term t, with ``s = Σ|x_t c_t|``:

- the missing term: ``|x_lo c_lo| <= 2⁻²² |x_t c_t|``;
- ``x_lo`` and ``c_lo`` are converted to TF32 inside the GEMM (rounded or truncated,
  ``u_tf32 = 2⁻¹⁰`` relative): ``2 u_tf32 2⁻¹¹ (1 + 2⁻¹¹) |x_t c_t|``
  (``|x_hi| <= (1 + 2⁻¹¹) |x|``); ``x_hi`` and ``c_hi`` are not changed;
- the float32 sum of the 3d products, as for :func:`dot_error` (``2 u`` an addition,
  the products counted in): ``2 (3d + 2) u Σ|terms|``, and
  ``Σ|terms| <= ((1 + 2⁻¹¹)² + 2 (1 + 2⁻¹⁰)(1 + 2⁻¹¹) 2⁻¹¹) s <= (1 + 2⁻⁸) s``.

So ``|g̃ − x·c| <= (2⁻²² + 2⁻²⁰ (1 + 2⁻¹¹) + 2 (3d + 2) u (1 + 2⁻⁸)) s``: at d = 128
4.7·10⁻⁵ against 1.97·10⁻³ for the plain TF32 product, 42 times less; the float32
accumulation, not the TF32 operands, is now most of it (a sum of 3d terms). As for
:func:`dot_error`, underflow is left out (the input stage keeps the data's scale near
1, :mod:`explorer.inputs`; the device may flush a subnormal ``lo`` to zero); a value
within 2⁻¹² of the largest float is truncated, not rounded, but its row's squared norm
overflows and no bound settles it.
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


def split_dot_error(d: int) -> float:
    """The relative bound of the split product of d features (3d TF32 terms) against
    ``Σ|x_t y_t|``: ``2⁻²² + 2⁻²⁰ (1 + 2⁻¹¹) + 2 (3d + 2) u (1 + 2⁻⁸)`` (see the
    module)."""
    return 2.0**-22 + 2.0**-20 * (1 + 2.0**-11) + 2 * (3 * d + 2) * U32 * (1 + 2.0**-8)


def round_tf32(a: np.ndarray) -> np.ndarray:
    """NumPy twin of ``tf32_round`` in kmeans.cu: float32 values rounded to TF32 (10
    stored mantissa bits, to nearest, ties to even) on their bits; infinities and NaN
    kept, a value that would round past the largest float truncated."""
    bits = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
    hi = (bits + np.uint32(0x0FFF) + ((bits >> np.uint32(13)) & np.uint32(1))) & np.uint32(
        0xFFFFE000)
    special = (bits & np.uint32(0x7F800000)) == np.uint32(0x7F800000)
    over = (hi & np.uint32(0x7F800000)) == np.uint32(0x7F800000)
    hi = np.where(over, bits & np.uint32(0xFFFFE000), hi)
    hi = np.where(special, bits, hi)
    return hi.astype(np.uint32).view(np.float32).reshape(np.shape(a))


def split_tf32(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """NumPy twin of the split: ``(hi, lo)`` with ``hi = round_tf32(a)`` and
    ``lo = a - hi`` in float32 (exact; 0 where a is not finite)."""
    a = np.asarray(a, dtype=np.float32)
    hi = round_tf32(a)
    with np.errstate(invalid="ignore"):
        lo = np.where(np.isfinite(a), a - hi, np.float32(0)).astype(np.float32)
    return hi, lo


def tf32_product(handle, cublas, N, Xb, out, ldc=None):
    """``out[r, j] = Xb[r] · N[j]`` (float32, C-contiguous; TF32 tensor cores).

    `handle` is the device's cuBLAS handle in host pointer mode
    (:data:`POINTER_MODE_HOST`), `cublas` the ``cupy_backends.cuda.libs.cublas`` module;
    `out` has shape ``(len(Xb), len(N))``, or ``(len(Xb), ldc)`` with rows of `ldc`
    values of which the first ``len(N)`` are written. The inner dimension is N's
    second: with the split operands (n × 3d and k × 3d) this is the split product.
    """
    k, d = N.shape
    ldc = k if ldc is None else int(ldc)
    rows = Xb.shape[0]
    one = np.ones(1, dtype=np.float32)
    zero = np.zeros(1, dtype=np.float32)
    cublas.gemmEx(handle, _OP_T, _OP_N, k, rows, d, one.ctypes.data, N.data.ptr, _R_32F, d,
                  Xb.data.ptr, _R_32F, d, zero.ctypes.data, out.data.ptr, _R_32F, ldc,
                  _COMPUTE_32F_FAST_TF32, _GEMM_DEFAULT)
