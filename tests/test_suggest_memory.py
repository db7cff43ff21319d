"""The suggestion's graph size is bounded by the memory of the backend that builds it,
and at moderate n the suggested ε-graph keeps each true cluster of the shapes connected."""

import numpy as np
import pytest

from explorer import build_graph, datasets, memory
from explorer.components import component_labels
from explorer.graph import EdgeRule, suggest


def test_budget_follows_the_memory_query(monkeypatch):
    monkeypatch.setattr(memory, "available_host_bytes", lambda: 64 * 2**30)
    budget, why = suggest.graph_nnz_budget("cpu")
    assert budget == pytest.approx(0.8 * 64 * 2**30 / 64)
    assert why.startswith("CPU: 64 GiB available")
    monkeypatch.setattr(memory, "available_host_bytes", lambda: None)
    assert suggest.graph_nnz_budget("cpu") == (suggest.FALLBACK_MAX_NNZ,
                                               "CPU memory unknown: the fallback budget")
    gpu, why = suggest.nnz_budget("gpu", 140 * 2**30)  # an idle H200
    assert gpu == pytest.approx(0.9 * 140 * 2**30 / 24) and gpu > 5e9
    assert why.startswith("GPU: 140 GiB free")


def test_mean_degree_bound_scales_with_the_budget():
    assert suggest.max_mean_degree(10**6, 2e7) == 20  # the old constant's bound
    assert suggest.max_mean_degree(2 * 10**6, 2e7) == suggest.MIN_MEAN_DEGREE
    assert suggest.max_mean_degree(2 * 10**6, 5e9) == 500  # an H200 affords the cap
    assert suggest.max_mean_degree(10**7, 5e9) == 500
    assert suggest.max_mean_degree(10**7, 1e9) == 100


def _mean_degree(X, threshold):
    g = build_graph(X, EdgeRule.from_args("gaussian", 1.0, threshold_sqdist=threshold),
                    backend="cpu")
    return g.stats.nnz_row_mean


def test_suggestion_is_bounded_by_the_memory_it_is_given(monkeypatch):
    ds = datasets.load("blobs", n_samples=40_000, random_state=0)
    small = suggest.sqdist_search(ds.X, n_classes=3, max_nnz=40_000 * 20)
    large = suggest.sqdist_search(ds.X, n_classes=3, max_nnz=1e12)
    assert small.max_nnz == 800_000 and small.budget_reason == "given"
    assert small.threshold < large.threshold
    # measured on all rows: the level chosen on the sample carries over (rounding aside)
    assert _mean_degree(ds.X, small.threshold) <= 20 * 1.25
    # A machine with little memory gets the small graph through the real query.
    monkeypatch.setattr(memory, "available_host_bytes", lambda: 40_000 * 20 * 64 / 0.8)
    assert suggest.suggest_sqdist(ds.X, n_classes=3, backend="cpu") == small.threshold
    assert not small.clean  # every affordable level is "dense" or splits
    assert small.level < large.level


@pytest.mark.parametrize("name, opts", [("moons", {"noise": 0.05}),
                                        ("circles", {"noise": 0.05}),
                                        ("blobs", {}), ("spirals", {})])
def test_suggested_graph_keeps_each_true_cluster_connected(name, opts):
    n = 60_000
    ds = datasets.load(name, n_samples=n, random_state=1, **opts)
    k = ds.n_classes
    search = suggest.sqdist_search(ds.X, n_classes=k, backend="cpu")
    rule = EdgeRule.from_args("gaussian", suggest.sigma_for(search.threshold),
                              threshold_sqdist=search.threshold)
    g = build_graph(ds.X, rule, backend="cpu")
    labels = component_labels(g.csr)
    has_edge = np.diff(g.csr.indptr) > 0
    assert has_edge.mean() > 0.99
    mains = []
    for c in range(k):
        comps = labels[(ds.y == c) & has_edge]
        counts = np.bincount(comps)
        # one component holds (nearly) all of the class: the class is not split
        assert counts.max() >= 0.995 * comps.size, (name, c, np.sort(counts)[::-1][:5])
        mains.append(int(np.argmax(counts)))
    assert len(set(mains)) == k  # and the classes are apart
