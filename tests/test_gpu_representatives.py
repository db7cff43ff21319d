"""The representatives chain on the GPU: the same labels as the CPU path on clean blobs
(up to a permutation), the assignment of every row against float64, labels mapped back."""

from __future__ import annotations

import numpy as np
import pytest

from explorer import SpectralClustering
from explorer.metrics import adjusted_rand_score

pytestmark = pytest.mark.gpu


def blobs(rng, n, d, k, spread=0.3):
    # Centres at least 10 spreads apart, so that every draw is easy data (two close
    # centres make overlapping blobs, whose labels no mode recovers exactly).
    while True:
        centres = rng.uniform(-10, 10, size=(k, d))
        gaps = np.linalg.norm(centres[:, None] - centres[None], axis=-1)
        if gaps[np.triu_indices(k, 1)].min() > 10 * spread:
            break
    y = rng.integers(0, k, size=n)
    return (centres[y] + spread * rng.standard_normal((n, d))).astype(np.float32), y


@pytest.mark.parametrize(("d", "k"), [(2, 4), (20, 5)])
def test_gpu_and_cpu_give_the_same_clusters(d, k, rng):
    import cupy

    X, y = blobs(rng, 20_000, d, k)
    seed = int(rng.integers(1000))
    kw = dict(mode="representatives", n_representatives=256, random_state=seed)
    cpu = SpectralClustering(k, backend="cpu", **kw).fit(X)
    gpu = SpectralClustering(k, backend="gpu", **kw).fit(cupy.asarray(X))
    assert isinstance(gpu.labels_, cupy.ndarray) and gpu.backend_ == "gpu"
    assert isinstance(gpu.representatives_, cupy.ndarray)
    assert adjusted_rand_score(cpu.labels_, cupy.asnumpy(gpu.labels_)) == pytest.approx(1.0)
    assert adjusted_rand_score(y, cupy.asnumpy(gpu.labels_)) == pytest.approx(1.0)
    np.testing.assert_array_equal(
        cupy.asnumpy(gpu.labels_),
        cupy.asnumpy(gpu.representative_labels_[gpu.representative_of_]))


def test_numpy_input_on_the_gpu_backend(rng):
    # 100 representatives in 8-D: a fringe representative may be isolated in their
    # graph, and then its points are unlabelled (-1), so ARI 0.99, not 1.
    X, y = blobs(rng, 5000, 8, 3)
    sc = SpectralClustering(3, mode="representatives", n_representatives=100, backend="gpu",
                            random_state=0).fit(X)
    assert isinstance(sc.labels_, np.ndarray) and sc.backend_ == "gpu"
    assert adjusted_rand_score(y, sc.labels_) >= 0.99
    assert np.all(sc.labels_[sc.isolated_.get()] == -1)


@pytest.mark.parametrize(("n", "d", "m"), [(50_001, 4, 4096), (20_000, 784, 1000),
                                           (30_000, 17, 700)])
def test_assign_rows_matches_float64(n, d, m, rng, poisoned):
    import cupy

    from explorer.representatives import assign_rows

    C = rng.standard_normal((m, d)).astype(np.float32)
    X = (C[rng.integers(0, m, size=n)] + 0.3 * rng.standard_normal((n, d))).astype(np.float32)
    labels, total = assign_rows(cupy.asarray(X), cupy.asarray(C))
    labels = labels.get()
    C64 = C.astype(np.float64)
    best = np.empty(n)
    second = np.empty(n)
    for s in range(0, n, 2000):  # float64 reference in blocks
        Xb = X[s : s + 2000].astype(np.float64)
        D = (Xb * Xb).sum(1)[:, None] - 2 * Xb @ C64.T + (C64 * C64).sum(1)[None]
        part = np.partition(D, 1, axis=1)
        best[s : s + 2000], second[s : s + 2000] = part[:, 0], part[:, 1]
        got = D[np.arange(len(Xb)), labels[s : s + 2000]]
        scale = 1e-5 * ((Xb * Xb).sum(1) + (C64 * C64).sum(1).max() + 1)
        assert np.all(got - part[:, 0] <= scale)
    assert total == pytest.approx(np.maximum(best, 0).sum(), rel=1e-4)


def test_infinite_digits_rendered_on_the_gpu_match_the_host(rng):
    # The same draws; bilinear resampling is continuous, so float32 rounding of the
    # source coordinates moves a pixel by far less than 1e-4.
    import cupy
    from explorer.data import infinite_digits_gpu, load

    seed = int(rng.integers(1000))
    n = 70_000  # past the 60 000 originals: both affine ranges
    host = load("infinite-digits", n_samples=n, random_state=seed)
    X, y = infinite_digits_gpu(n, np.random.default_rng(seed))
    assert isinstance(X, cupy.ndarray) and X.shape == (n, 784) and X.dtype == np.float32
    np.testing.assert_array_equal(y, host.y)
    np.testing.assert_allclose(X.get(), host.X, rtol=0, atol=1e-4)
