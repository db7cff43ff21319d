"""Numbers float32 cannot carry: every path scales or centres in float64 first (the input
stage, explorer.inputs; a precomputed affinity's weights in check_affinity), so data in
any units cluster as they do in ordinary ones."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from sklearn.datasets import make_blobs
from sklearn.metrics.pairwise import rbf_kernel

from explorer import EdgeRule, KMeans, SpectralClustering


@pytest.fixture(scope="module")
def blobs():
    return make_blobs(400, centers=[[0, 0], [6, 0], [0, 6]], cluster_std=0.8, random_state=3)


@pytest.mark.parametrize("unit", [1e20, 1e-25, 1e150, 1e-150])
@pytest.mark.parametrize("kind", ["ndarray", "DataFrame", "list"])
def test_kmeans_in_any_units(blobs, unit, kind):
    X, _ = blobs
    ref = KMeans(3, random_state=0).fit(X)
    data = X * unit
    data = {"ndarray": data, "DataFrame": pd.DataFrame(data), "list": data.tolist()}[kind]
    km = KMeans(3, random_state=0).fit(data)
    np.testing.assert_array_equal(km.labels_, ref.labels_)
    np.testing.assert_allclose(km.cluster_centers_ / unit, ref.cluster_centers_, rtol=1e-5,
                               atol=1e-5)
    assert km.inertia_ / unit**2 == pytest.approx(ref.inertia_, rel=1e-5)
    np.testing.assert_array_equal(km.predict(data), km.labels_)


@pytest.mark.parametrize("unit", [1e20, 1e-25])
def test_spectral_clustering_and_its_rule_in_any_units(blobs, unit):
    X, _ = blobs
    kw = {"affinity": "epsilon", "random_state": 0, "backend": "cpu"}
    ref = SpectralClustering(3, **kw).fit(X)
    sc = SpectralClustering(3, **kw).fit(X * unit)
    np.testing.assert_array_equal(sc.labels_, ref.labels_)
    # the rule in the input's units: σ times the unit, the threshold times its square
    # (to the suggestion's two significant digits, rounded in the units it searched in)
    assert sc.sigma_ == pytest.approx(ref.sigma_ * unit, rel=0.05)
    assert sc.threshold_sqdist_ == pytest.approx(ref.threshold_sqdist_ * unit**2, rel=0.05)
    assert EdgeRule.suggest(X * unit, n_clusters=3).sigma == pytest.approx(sc.sigma_)
    given = SpectralClustering(3, sigma=ref.sigma_ * unit,
                               threshold_sqdist=ref.threshold_sqdist_ * unit**2, **kw)
    np.testing.assert_array_equal(given.fit(X * unit).labels_, ref.labels_)


@pytest.mark.parametrize("scale", [1e-60, 1e60])
@pytest.mark.parametrize("container", [np.asarray, sp.csr_matrix])
def test_precomputed_weights_beyond_float32(blobs, scale, container):
    X, _ = blobs
    K = rbf_kernel(X, gamma=0.5)
    kw = {"affinity": "precomputed", "random_state": 0, "backend": "cpu"}
    ref = SpectralClustering(3, **kw).fit(K).labels_
    np.testing.assert_array_equal(SpectralClustering(3, **kw).fit(container(K * scale)).labels_,
                                  ref)


@pytest.mark.parametrize("unit", [1e15, 1e-17])  # rules float32 holds, data it squares badly
def test_build_graph_and_its_statistics_in_any_units(blobs, unit):
    from explorer import build_graph, graph_stats

    X, _ = blobs
    ref = build_graph(X, metric="gaussian", sigma=0.5, threshold_sqdist=1.0, backend="cpu")
    g = build_graph(X * unit, metric="gaussian", sigma=0.5 * unit,
                    threshold_sqdist=1.0 * unit**2, backend="cpu")
    assert g.rule.sigma == 0.5 * unit  # recorded as given
    assert g.stats.nnz == ref.stats.nnz
    np.testing.assert_array_equal(g.csr.indices, ref.csr.indices)
    np.testing.assert_allclose(g.csr.data, ref.csr.data, rtol=1e-5)
    st = graph_stats(X * unit, metric="gaussian", sigma=0.5 * unit,
                     threshold_sqdist=1.0 * unit**2, backend="cpu")
    assert st.nnz == ref.stats.nnz
