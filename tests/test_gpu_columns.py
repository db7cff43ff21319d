"""The per-column statistics pass (kernels/columns.cu) against NumPy in float64:
one to hundreds of columns (one tile, several, a last narrow one), one row to many,
row slices of wider arrays, NaN and ±inf; the output memory poisoned first."""

from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.gpu


def poison_pool(nbytes):
    """Fill memory the pool will hand out next with NaN (freed, not returned)."""
    import cupy

    junk = cupy.full(max(1, nbytes // 8), np.nan)
    del junk


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(("n", "d"), [(1, 1), (5, 3), (1000, 4), (3001, 257), (700, 784),
                                      (64, 600), (200_003, 2)])
def test_column_stats_equal_float64(rng, n, d, dtype, width_extra=(0, 5)):
    import cupy
    from explorer.kernels import columns

    for extra in width_extra:
        wide = (rng.standard_normal((n, d + extra)) * 10 ** rng.uniform(-3, 3)
                + rng.normal(size=d + extra) * 100).astype(dtype)
        X = wide[:, :d]
        centre = rng.normal(size=d)
        poison_pool(4 * d * 1024 * 8)
        got = columns.column_stats(cupy.asarray(wide)[:, :d], cupy.asarray(centre))
        X64 = X.astype(np.float64)
        want = (X64.min(axis=0), X64.max(axis=0), (X64 - centre).sum(axis=0),
                ((X64 - centre) ** 2).sum(axis=0))
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(g.get(), w, rtol=1e-11, atol=1e-9 * np.abs(w).max())


def test_column_extremes_propagate_nan_and_inf(rng):
    import cupy

    from explorer._backend import column_extremes

    X = rng.standard_normal((5000, 6)).astype(np.float32)
    X[4321, 1] = np.nan
    X[17, 3] = np.inf
    X[2, 4] = -np.inf
    lo, hi = (v.get() for v in column_extremes(cupy.asarray(X)))
    assert np.isnan(lo[1]) and np.isnan(hi[1])
    assert hi[3] == np.inf and lo[4] == -np.inf
    keep = [0, 2, 5]
    np.testing.assert_array_equal(lo[keep], X[:, keep].min(axis=0))
    np.testing.assert_array_equal(hi[keep], X[:, keep].max(axis=0))


def test_unsupported_inputs_fall_back(rng):
    import cupy

    from explorer._backend import column_centred_sums, column_extremes

    X = rng.integers(-5, 5, size=(300, 7)).astype(np.int64)
    F = np.asfortranarray(rng.standard_normal((300, 7)))
    for A in (X, F):
        lo, hi = column_extremes(cupy.asarray(A))
        np.testing.assert_array_equal(lo.get(), A.min(axis=0))
        np.testing.assert_array_equal(hi.get(), A.max(axis=0))
        s1, s2 = column_centred_sums(cupy.asarray(A), np.ones(7))
        np.testing.assert_allclose(s2.get(), ((A - 1.0) ** 2).sum(axis=0), rtol=1e-12)
