"""The column statistics of the input stage on the CPU (the GPU kernel's reference
path): extremes with NaN and ±inf, centred sums in float64 over blocks of rows."""

from __future__ import annotations

import numpy as np

from explorer._backend import chunk_rows, column_centred_sums, column_extremes


def test_extremes_equal_numpy_and_propagate_nan(rng):
    X = rng.standard_normal((4000, 5)).astype(np.float32)
    X[10, 2] = np.nan
    X[11, 4] = -np.inf
    lo, hi = column_extremes(X)
    assert lo.dtype == np.float64 and np.isnan(lo[2]) and np.isnan(hi[2])
    assert lo[4] == -np.inf
    np.testing.assert_array_equal(lo[[0, 1, 3]], X[:, [0, 1, 3]].min(axis=0))


def test_centred_sums_span_blocks(rng):
    d = 3
    n = chunk_rows(np, d) * 2 + 17  # three blocks
    X = (rng.standard_normal((n, d)) + 1e4).astype(np.float32)
    c = X.astype(np.float64).mean(axis=0)
    s1, s2 = column_centred_sums(X, c)
    np.testing.assert_allclose(s1, (X - c).sum(axis=0), atol=1e-6 * n)
    np.testing.assert_allclose(s2, ((X.astype(np.float64) - c) ** 2).sum(axis=0), rtol=1e-10)
