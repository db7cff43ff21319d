"""explorer.graph.pairwise: scikit-learn's kernel affinities, dense and as an rbf ε-graph."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from sklearn.cluster import SpectralClustering as SkSpectralClustering
from sklearn.datasets import make_blobs
from sklearn.metrics import pairwise_distances
from sklearn.metrics.pairwise import kernel_metrics, pairwise_kernels

from explorer import build_graph
from explorer.graph.pairwise import (
    DEFAULT_MAX_DROPPED,
    KERNELS,
    gamma_from_sigma,
    kernel_affinity,
    rbf_edge_rule,
    sigma_from_gamma,
)
from explorer.memory import MemoryEstimateError

# ----------------------------------------------------------------------- dense kernels


def test_kernels_are_scikit_learns_kernel_metrics():
    assert set(KERNELS) == set(kernel_metrics())


@pytest.mark.parametrize("kernel", KERNELS)
def test_each_kernel_is_scikit_learns_spectral_clustering_affinity(rng, kernel):
    X = rng.random((30, 4)) * 10  # >= 0: the chi2 kernels need it
    for gamma, degree, coef0 in ((1.0, 3, 1), (0.25, 2, 0.5)):
        sk = SkSpectralClustering(n_clusters=2, affinity=kernel, gamma=gamma, degree=degree,
                                  coef0=coef0, random_state=0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # additive_chi2's negative affinity
            try:
                sk.fit(X)
            except ValueError:  # additive_chi2: the Laplacian of a negative matrix
                assert kernel == "additive_chi2"
                expected = pairwise_kernels(X, metric=kernel)
            else:
                expected = sk.affinity_matrix_
        ours = kernel_affinity(X, kernel, gamma=gamma, degree=degree, coef0=coef0)
        assert ours.dtype == np.float64 and ours.shape == (30, 30)
        np.testing.assert_array_equal(ours, expected)


@pytest.mark.parametrize("kernel", KERNELS)
def test_gamma_none_is_each_kernels_own_default(rng, kernel):
    X = rng.random((20, 3))
    np.testing.assert_array_equal(kernel_affinity(X, kernel), pairwise_kernels(X, metric=kernel))


def test_float32_data_gives_a_float32_affinity(rng):
    X = rng.random((25, 3)).astype(np.float32)
    K = kernel_affinity(X, "rbf", gamma=1.0)
    assert K.dtype == np.float32
    np.testing.assert_allclose(K, pairwise_kernels(X.astype(np.float64), metric="rbf",
                                                   gamma=1.0), rtol=1e-6)


def test_lists_of_rows_are_taken(rng):
    X = rng.random((10, 2))
    np.testing.assert_array_equal(kernel_affinity(X.tolist(), "rbf"), kernel_affinity(X, "rbf"))
    assert rbf_edge_rule(X.tolist()).rule == rbf_edge_rule(X).rule


def test_kernel_params_as_scikit_learn_passes_them(rng):
    X = rng.random((15, 3))
    # named kernel: gamma/degree/coef0 win over kernel_params, unknown keys are dropped
    K = kernel_affinity(X, "poly", gamma=0.5, degree=2, coef0=0.0,
                        kernel_params={"gamma": 9.0, "unused": 1})
    np.testing.assert_allclose(K, (0.5 * X @ X.T) ** 2)
    # callable: called on pairs of 1-D rows with kernel_params only
    calls = []

    def scaled_dot(x, y, scale):
        calls.append((x.shape, y.shape))
        return scale * float(x @ y)

    K = kernel_affinity(X, scaled_dot, gamma=3.0, kernel_params={"scale": 2.0})
    np.testing.assert_allclose(K, 2.0 * X @ X.T)
    assert set(calls) == {((3,), (3,))}
    assert len(calls) == 15 * 14 // 2 + 15  # the upper triangle, then the diagonal


def test_callable_without_parameters_gets_no_keywords(rng):
    X = rng.random((12, 4))

    def histogram(x, y, **kwargs):
        assert kwargs == {}
        return np.minimum(x, y).sum()

    sk = SkSpectralClustering(n_clusters=2, affinity=histogram, random_state=0).fit(X)
    np.testing.assert_array_equal(kernel_affinity(X, histogram), sk.affinity_matrix_)


@pytest.mark.parametrize("kernel, match", [("gaussian", "kernel='gaussian'"),
                                           ("precomputed", "kernel='precomputed'"),
                                           (3, "kernel=3")])
def test_unknown_kernels_are_refused_with_the_allowed_names(kernel, match):
    with pytest.raises(ValueError, match=match) as info:
        kernel_affinity(np.ones((3, 2)), kernel)
    assert "rbf" in str(info.value) and "callable" in str(info.value)


@pytest.mark.parametrize("gamma", [-1.0, float("nan"), float("inf"), "1", True])
def test_bad_gamma_is_refused(gamma):
    with pytest.raises(ValueError, match="gamma"):
        kernel_affinity(np.ones((3, 2)), "rbf", gamma=gamma)


def test_the_dense_matrix_is_refused_before_allocation_naming_its_size():
    X = np.zeros((200_000, 2))  # 200000² x 8 bytes = 298 GiB
    with pytest.raises(MemoryEstimateError, match=r"200000 x 200000 float64.*298 GiB") as info:
        kernel_affinity(X, "rbf", gamma=1.0, available=16 * 2**30)
    assert "rbf_edge_rule" in str(info.value)
    assert info.value.need_bytes == 200_000**2 * 8
    # laplacian holds a second n x n matrix on the host
    with pytest.raises(MemoryEstimateError) as info:
        kernel_affinity(np.zeros((1000, 2)), "laplacian", available=10**7)
    assert info.value.need_bytes == 2 * 1000**2 * 8
    # what fits is computed
    assert kernel_affinity(np.zeros((1000, 2)), "rbf", available=10**8).shape == (1000, 1000)


# ----------------------------------------------------------------------- gamma and sigma


def test_gamma_and_sigma_are_the_same_weight(rng):
    for gamma in (1e-3, 0.5, 1.0, 7.0):
        sigma = sigma_from_gamma(gamma)
        assert math.isclose(gamma_from_sigma(sigma), gamma, rel_tol=1e-12)
        d2 = rng.random(10) * 5
        np.testing.assert_allclose(np.exp(-d2 / (2 * sigma**2)), np.exp(-gamma * d2))
    with pytest.raises(ValueError, match="gamma"):
        sigma_from_gamma(0.0)
    with pytest.raises(ValueError, match="sigma"):
        gamma_from_sigma(-1.0)


# ----------------------------------------------------------------------- rbf as an ε-graph


def _row_masses(X, gamma, t, rows):
    """Brute force, float64: per row, the mass kept (d² < t) and dropped (others)."""
    d2 = pairwise_distances(X[rows], X, metric="sqeuclidean")
    d2[np.arange(len(rows)), rows] = np.inf  # not the row itself
    w = np.exp(-gamma * d2)
    return (w * (d2 < t)).sum(axis=1), (w * (d2 >= t)).sum(axis=1)


@pytest.mark.parametrize("gamma", [0.1, 1.0, 10.0])
def test_rbf_edge_rule_bounds_the_dropped_mass_of_the_sampled_rows(rng, gamma):
    seed = int(rng.integers(2**31))
    X, _ = make_blobs(2000, centers=3, cluster_std=0.5, random_state=seed)
    r = rbf_edge_rule(X, gamma, n_sample_rows=128)
    assert r.rule.metric == "gaussian" and r.rule.threshold_kind == "sqdist"
    assert math.isclose(r.rule.sigma, 1.0 / math.sqrt(2.0 * gamma))
    assert r.gamma == gamma and r.max_dropped == DEFAULT_MAX_DROPPED and r.n_rows == 128
    t = r.rule.threshold
    rows = np.sort(np.random.default_rng(0).choice(2000, 128, replace=False))
    kept, dropped = _row_masses(X, gamma, t, rows)
    ratio = dropped / kept
    assert not r.capped
    assert ratio.max() <= DEFAULT_MAX_DROPPED
    assert math.isclose(r.dropped, ratio.max(), rel_tol=1e-6, abs_tol=1e-15)
    assert math.isclose(r.dropped_mean, ratio.mean(), rel_tol=1e-6, abs_tol=1e-15)
    d2 = pairwise_distances(X[rows], X, metric="sqeuclidean")
    assert math.isclose(r.edges_per_row, ((d2 < t).sum(axis=1) - 1).mean(), rel_tol=1e-9)
    # the smallest such threshold on the grid: one step less breaks the bound
    kept, dropped = _row_masses(X, gamma, t - 1.0 / 32 / gamma, rows)
    assert (dropped / kept).max() > DEFAULT_MAX_DROPPED
    assert "dropped weight mass <=" in r.describe() and "128 rows" in r.describe()


def test_a_tighter_bound_gives_a_larger_threshold(rng):
    X = rng.standard_normal((1500, 3))
    loose, tight = rbf_edge_rule(X, 2.0, max_dropped=1e-2), rbf_edge_rule(X, 2.0, max_dropped=1e-5)
    assert tight.rule.threshold > loose.rule.threshold
    assert tight.dropped <= 1e-5 and loose.dropped <= 1e-2
    assert tight.edges_per_row > loose.edges_per_row


def test_gamma_none_is_spectral_clusterings_default_one(rng):
    X = rng.standard_normal((300, 5))
    assert rbf_edge_rule(X).rule == rbf_edge_rule(X, 1.0).rule
    assert rbf_edge_rule(X).gamma == 1.0


def test_rbf_graph_weights_are_the_rbf_kernel_on_its_edges(rng):
    X = rng.standard_normal((400, 2))
    r = rbf_edge_rule(X, 1.5)
    g = build_graph(X, r.rule, backend="cpu")
    A = g.csr.tocoo()
    K = pairwise_kernels(X, metric="rbf", gamma=1.5)
    np.testing.assert_allclose(A.data, K[A.row, A.col], rtol=1e-5)
    assert A.nnz > 0


def test_an_isolated_point_caps_the_threshold_where_float32_weights_vanish(rng):
    # Weights exp(-γ d²) with γ d² > 103.3 are 0 in float32 but not in float64.
    # P at the origin: one neighbour just inside γ d² = 103.3, twenty just beyond
    far = np.column_stack([np.full(20, -np.sqrt(103.6)), 1e-3 * np.arange(20)])
    X = np.vstack([[[0.0, 0.0], [np.sqrt(103.0), 0.0]], far,
                   rng.standard_normal((200, 2)) * 0.5 + [0.0, 40.0]])
    r = rbf_edge_rule(X, 1.0, n_sample_rows=1000)  # every row, P too
    assert r.capped
    assert r.rule.threshold <= r.rule.zero_weight_sqdist
    assert r.dropped > DEFAULT_MAX_DROPPED and np.isfinite(r.dropped)
    assert "capped" in r.describe()
    # farther, the point has no neighbour within float32's range: it is isolated
    # whatever the threshold, is said to be, and does not widen the others' graph
    blob = X[22:]
    alone = rbf_edge_rule(np.vstack([blob, [[15.0, 40.0]]]), 1.0, n_sample_rows=1000)
    without = rbf_edge_rule(blob, 1.0, n_sample_rows=1000)
    assert alone.isolated == 1 and not alone.capped
    assert alone.rule.threshold == without.rule.threshold
    assert alone.dropped <= DEFAULT_MAX_DROPPED
    assert "isolated" in alone.describe() and "inf" not in alone.describe()
    # a point so far that its float64 weights vanish too constrains nothing
    r = rbf_edge_rule(np.vstack([blob, [[1e3, 1e3]]]), 1.0, n_sample_rows=1000)
    assert not r.capped and r.dropped <= DEFAULT_MAX_DROPPED


@pytest.mark.parametrize("kw, match", [({"max_dropped": 0.0}, "max_dropped"),
                                       ({"max_dropped": 2.0}, "max_dropped"),
                                       ({"n_sample_rows": 0}, "n_sample_rows"),
                                       ({"gamma": 0.0}, "gamma"),
                                       ({"gamma": -2.0}, "gamma")])
def test_rbf_edge_rule_refuses_bad_arguments(kw, match):
    with pytest.raises(ValueError, match=match):
        rbf_edge_rule(np.ones((5, 2)), **kw)


@pytest.mark.gpu
def test_cupy_kernels_match_scikit_learn(rng):
    import cupy

    X = rng.random((700, 5)) * 3
    for kernel in KERNELS:
        for dtype in (np.float64, np.float32):
            Xd = cupy.asarray(X, dtype=dtype)
            K = kernel_affinity(Xd, kernel, gamma=0.7, degree=2, coef0=0.5)
            assert isinstance(K, cupy.ndarray) and K.dtype == dtype
            expected = pairwise_kernels(X.astype(dtype), metric=kernel, filter_params=True,
                                        gamma=0.7, degree=2, coef0=0.5)
            rtol = 1e-10 if dtype == np.float64 else 2e-5
            np.testing.assert_allclose(K.get(), expected, rtol=rtol, atol=rtol)
    K = kernel_affinity(cupy.asarray(X), lambda x, y: float(np.minimum(x, y).sum()))
    np.testing.assert_allclose(K.get(), pairwise_kernels(
        X, metric=lambda x, y: float(np.minimum(x, y).sum())))


@pytest.mark.gpu
def test_cupy_rbf_edge_rule_is_the_numpy_rule(rng):
    import cupy

    X = rng.standard_normal((5000, 3))
    host, device = rbf_edge_rule(X, 2.0), rbf_edge_rule(cupy.asarray(X), 2.0)
    assert device.rule == host.rule
    assert math.isclose(device.dropped, host.dropped, rel_tol=1e-6)
    assert math.isclose(device.edges_per_row, host.edges_per_row, rel_tol=1e-9)


@pytest.mark.gpu
def test_cupy_dense_matrix_is_refused_before_allocation():
    import cupy

    with pytest.raises(MemoryEstimateError, match="GPU"):
        kernel_affinity(cupy.zeros((10_000, 2)), "rbf", free=10**8)
