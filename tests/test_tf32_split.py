"""The split ("3xTF32") product's arithmetic on the CPU: the TF32 rounding of
kernels/kmeans.cu (``tf32_round``, twinned by ``explorer.kernels._tf32.round_tf32``),
the exactness of ``x = x_hi + x_lo``, and ``split_dot_error`` against a NumPy emulation
of the product with the worst arithmetic the bound allows (the low parts truncated to
TF32, every float32 addition truncated); plus DeviceStarts's choice of product."""

from __future__ import annotations

import numpy as np
import pytest
from explorer.kernels._tf32 import (
    U32,
    dot_error,
    round_tf32,
    split_dot_error,
    split_tf32,
)


def truncate_tf32(a):
    """Conversion to TF32 by truncation (the worse of what tensor cores may do)."""
    bits = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
    return (bits & np.uint32(0xFFFFE000)).view(np.float32)


def toward_zero_f32(v64):
    """float64 values rounded to float32 toward zero (a truncating accumulator)."""
    f = v64.astype(np.float32)
    over = np.abs(f.astype(np.float64)) > np.abs(v64)
    return np.where(over, np.nextafter(f, np.float32(0)), f).astype(np.float32)


def reference_round(x):
    """Round to 11 significant bits, ties to even, through frexp (normal numbers)."""
    m, e = np.frexp(x.astype(np.float64))
    return np.ldexp(np.rint(m * 2.0**11), e - 11)


def wide_values(rng, size):
    signs = rng.choice([-1.0, 1.0], size=size)
    return (signs * rng.uniform(1, 2, size=size) * 2.0 ** rng.integers(-100, 100, size=size)
            ).astype(np.float32)


def test_round_tf32_is_round_to_nearest_even_on_11_bits(rng):
    x = wide_values(rng, 200_000)
    # Ties and values next to them: 13 dropped bits 0x1000 (a tie), 0x0fff, 0x1001,
    # on odd and even kept mantissas.
    base = rng.integers(0x00800000, 0x7F000000, size=6_000, dtype=np.uint32) & np.uint32(
        0xFFFFE000)
    for low in (0x1000, 0x0FFF, 0x1001, 0x1FFF, 0x0001):
        x = np.concatenate([x, (base | np.uint32(low)).view(np.float32),
                            (base | np.uint32(0x2000 | low)).view(np.float32)])
    hi = round_tf32(x)
    assert not (hi.view(np.uint32) & np.uint32(0x1FFF)).any()  # 10 stored bits
    np.testing.assert_array_equal(hi.astype(np.float64), reference_round(x))


def test_split_is_exact_and_lo_is_small(rng):
    x = np.concatenate([wide_values(rng, 100_000), rng.standard_normal(100_000).astype(
        np.float32), np.float32([0.0, -0.0, 1.0, -3.0, 1e-45, -1e-40, 2.0**-126,
                                 np.finfo(np.float32).max, -np.finfo(np.float32).max,
                                 (np.float32(2) - np.float32(2**-23)) * np.float32(2**126)])])
    hi, lo = split_tf32(x)
    # x = hi + lo exactly (float64 holds the sum of two float32 of close exponents).
    np.testing.assert_array_equal(hi.astype(np.float64) + lo.astype(np.float64),
                                  x.astype(np.float64))
    assert np.all(np.isfinite(hi))
    normal = np.abs(x) < np.float32(2.0**127)  # not within 2^-12 of the largest float
    # Relative to x, up to half the subnormals' TF32 step (2^-136) in absolute terms.
    assert np.all(np.abs(lo[normal]).astype(np.float64)
                  <= 2.0**-11 * np.abs(x[normal]).astype(np.float64) + 2.0**-137)
    assert np.all(np.abs(hi[normal]).astype(np.float64)
                  <= (1 + 2.0**-11) * np.abs(x[normal]).astype(np.float64) + 2.0**-137)
    # Rounding to TF32 again changes nothing (what the tensor cores see of hi).
    np.testing.assert_array_equal(round_tf32(hi), hi)
    np.testing.assert_array_equal(truncate_tf32(hi), hi)
    # Infinities and NaN: kept in hi, lo 0.
    hi, lo = split_tf32(np.float32([np.inf, -np.inf, np.nan]))
    assert np.isinf(hi[:2]).all() and np.isnan(hi[2]) and not lo.any()


def emulated_split_product(X, C, accumulate):
    """``[x_hi, x_lo, x_hi] · [c_hi, c_hi, c_lo]`` as the GEMM may form it: the low
    parts truncated to TF32, the 3d products summed in float32 term by term, each
    addition rounded by `accumulate` (float64 -> float32)."""
    xh, xl = split_tf32(X)
    ch, cl = split_tf32(C)
    xl, cl = truncate_tf32(xl), truncate_tf32(cl)
    Xs = np.concatenate([xh, xl, xh], axis=1).astype(np.float64)
    Cs = np.concatenate([ch, ch, cl], axis=1).astype(np.float64)
    acc = np.zeros((X.shape[0], C.shape[0]), dtype=np.float32)
    for t in range(Xs.shape[1]):  # each product of TF32 values is exact in float32
        acc = accumulate(acc.astype(np.float64) + np.outer(Xs[:, t], Cs[:, t]))
    return acc


@pytest.mark.parametrize("d", [1, 3, 37, 128])
@pytest.mark.parametrize("accumulate", [toward_zero_f32, lambda v: v.astype(np.float32)],
                         ids=["truncating", "rounding"])
def test_split_dot_error_bounds_the_emulated_product(d, accumulate, rng):
    n, k = 300, 40
    X = (rng.standard_normal((n, d)) * 10.0 ** rng.uniform(-3, 3, size=(n, 1))).astype(
        np.float32)
    C = (rng.standard_normal((k, d)) + 3.0).astype(np.float32)  # same-sign terms too
    X[:20] = np.abs(X[:20])  # rows whose products all add up (the worst case for sums)
    got = emulated_split_product(X, C, accumulate).astype(np.float64)
    exact = X.astype(np.float64) @ C.astype(np.float64).T
    s = np.abs(X.astype(np.float64)) @ np.abs(C.astype(np.float64)).T
    err = np.abs(got - exact)
    assert np.all(err <= split_dot_error(d) * s)
    # The split product is far more accurate than the plain TF32 one, whose bound it
    # replaces: the worst error seen stays well inside the split bound too.
    assert split_dot_error(d) < dot_error(d) / 20
    assert (err / s).max() < 0.5 * split_dot_error(d)


def test_split_dot_error_is_dominated_by_the_float32_sum():
    # 2^-22 + 2^-20 (1 + 2^-11) for the operands, 2 (3d + 2) u (1 + 2^-8) for the sum.
    for d in (1, 33, 128, 784):
        operands = 2.0**-22 + 2.0**-20 * (1 + 2.0**-11)
        assert split_dot_error(d) == pytest.approx(
            operands + 2 * (3 * d + 2) * U32 * (1 + 2.0**-8), rel=1e-15)
    assert dot_error(128) / split_dot_error(128) > 40


def test_checked_bound_split_is_smaller_by_the_products_bound():
    from explorer.kernels.kmeans import CHECKED_SAFETY, checked_bound

    for d in (33, 128, 300):
        a, b = checked_bound(d)
        a_s, b_s = checked_bound(d, split=True)
        assert b_s == b
        assert a_s == pytest.approx(CHECKED_SAFETY * (2 * split_dot_error(d) * (1 + U32)
                                                      + 2 * U32))
        assert a_s < a / (40 if d <= 128 else 15)  # the float32 sum of 3d terms grows


def test_split_prepared_fits_counts_three_copies_of_the_data():
    from explorer.kernels.kmeans import SPLIT_PREPARED_FRACTION, split_prepared_fits

    n, d = 6_000_000, 128
    need = 12 * n * d
    assert split_prepared_fits(n, d, free=int(need / SPLIT_PREPARED_FRACTION) + 1)
    assert not split_prepared_fits(n, d, free=int(need / SPLIT_PREPARED_FRACTION) - 1)


def test_device_starts_chooses_its_product():
    # The rule alone (no device): split first, plain TF32 while the estimate of its
    # re-checks is small, back to split above twice that share, float32 for good
    # when even the split product re-checks too many rows.
    from explorer.kernels.kmeans import CHECKED_MAX_FRACTION, SPLIT_MIN_FRACTION, DeviceStarts

    n = 1_000_000
    runner = object.__new__(DeviceStarts)
    runner.product, runner._split_rows = "split", True
    runner.choose_product({"rechecked": 10, "within_tf32": int(0.5 * SPLIT_MIN_FRACTION * n)}, n)
    assert runner.product == "tf32"
    runner.choose_product({"rechecked": int(1.5 * SPLIT_MIN_FRACTION * n)}, n)
    assert runner.product == "tf32"  # hysteresis: not yet back
    runner.choose_product({"rechecked": int(2.5 * SPLIT_MIN_FRACTION * n)}, n)
    assert runner.product == "split"
    runner.choose_product({"rechecked": 10, "within_tf32": int(3 * SPLIT_MIN_FRACTION * n)}, n)
    assert runner.product == "split"
    # What counts is the rows the split product saves from the re-check.
    runner.choose_product({"rechecked": int(2 * SPLIT_MIN_FRACTION * n),
                            "within_tf32": int(2.5 * SPLIT_MIN_FRACTION * n)}, n)
    assert runner.product == "tf32"
    runner.product = "split"
    runner.choose_product({"rechecked": int(2 * CHECKED_MAX_FRACTION * n),
                            "within_tf32": n}, n)
    assert runner.product == "float32" and runner._split_rows is None
