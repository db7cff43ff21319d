"""Graph statistics: checked against figures computed independently from a dense matrix."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from explorer.graph import CPU_METHODS, build_graph, graph_stats, suggest_hypo
from explorer.graph._cpu import count_rows_cpu
from explorer.graph._stats import (
    HYPO_CAP,
    MAX_HIST_BINS,
    csr_bytes,
    nnz_histogram,
    stats_from_counts,
)
from explorer.graph.reference import edge_mask, pair_values, reference_csr
from explorer.graph.rule import EdgeRule
from explorer.testing import tricky_data


def union_find_components(adjacency):
    """Connected components of a dense boolean adjacency, by plain union-find."""
    n = adjacency.shape[0]
    parent = list(range(n))

    def find(a):
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    for i, j in zip(*np.nonzero(adjacency), strict=True):
        ri, rj = find(i), find(j)
        if ri != rj:
            parent[ri] = rj
    return len({find(a) for a in range(n)})


def dense_graph(X, params):
    """Dense adjacency and float32 weights straight from the edge rule."""
    compared, weights = pair_values(X, X, params)
    adj = edge_mask(compared, params)
    np.fill_diagonal(adj, False)
    return adj, np.where(adj, weights.astype(np.float32), 0).astype(np.float64)


RULES = [
    dict(metric="gaussian", sigma=0.2, threshold_sqdist=0.02),
    dict(metric="uniform", threshold_sqdist=0.05),
    dict(metric="cosine", threshold_sim=0.95),
    dict(metric="gaussian", sigma=0.2, threshold_sim=0.7),
]


@pytest.mark.parametrize("rule", RULES, ids=lambda r: f"{r['metric']}-{sorted(r)[-1]}")
@pytest.mark.parametrize("hypo", [None, 1, 4])
def test_build_stats_equal_dense_figures(rng, rule, hypo):
    n = int(rng.integers(20, 150))
    X = tricky_data(rng, n, 2, "blobs" if rng.random() < 0.5 else "uniform")
    X /= X.max()
    g = build_graph(X, backend="cpu", hypo_max_nnz_row=hypo, **rule)
    adj, w = dense_graph(X, g.rule)
    counts = adj.sum(axis=1)
    nnz = int(adj.sum())
    s = g.stats
    assert (s.n, s.nnz) == (n, nnz)
    assert (s.nnz_row_min, s.nnz_row_max) == (counts.min(), counts.max())
    assert s.nnz_row_mean == pytest.approx(nnz / n, rel=1e-12)
    assert s.n_isolated == np.count_nonzero(counts == 0)
    assert s.n_components == union_find_components(adj)
    assert s.sparsity == pytest.approx(100 * (n * n - nnz) / (n * n), rel=1e-12)
    width = s.suggested_hypo_max_nnz_row if hypo is None else hypo
    assert s.hypo_max_nnz_row == width
    assert s.rows_over_hypo == np.count_nonzero(counts > width)
    assert s.bytes_csr == 8 * nnz + 4 * (n + 1)
    assert s.bytes_dense == 4 * n * n
    assert s.bytes_ellpack == 8 * n * width
    deg = w.sum(axis=1)
    assert s.degree_min == pytest.approx(deg.min(), rel=1e-9, abs=1e-12)
    assert s.degree_mean == pytest.approx(deg.mean(), rel=1e-9)
    assert s.degree_max == pytest.approx(deg.max(), rel=1e-9)
    hist, edges = s.nnz_row_hist
    for k in range(hist.size):
        assert hist[k] == np.count_nonzero((counts >= edges[k]) & (counts < edges[k + 1]))
    assert hist.sum() == n
    assert not s.estimated and s.sample_rows is None
    assert s.to_dict()["nnz_row_hist"]["counts"] == hist.tolist()


@given(st.lists(st.integers(0, 5000), min_size=1, max_size=400))
def test_histogram_bins_are_whole_numbers(counts):
    counts = np.array(counts)
    hist, edges = nnz_histogram(counts)
    width = edges[1] - edges[0]
    assert edges.dtype.kind == "i" and edges[0] == 0
    assert np.all(np.diff(edges) == width)
    assert hist.size <= MAX_HIST_BINS and edges[-1] > counts.max()
    assert width == 1 or counts.max() >= MAX_HIST_BINS
    assert hist.sum() == counts.size
    assert np.array_equal(hist, np.histogram(counts, bins=edges)[0])


@given(st.lists(st.integers(0, 3000), min_size=1, max_size=500))
def test_suggest_hypo_rule(counts):
    counts = np.array(counts)
    h = suggest_hypo(counts)
    top = int(counts.max())
    assert 1 <= h <= max(1, min(top, HYPO_CAP))
    assert h % 16 == 0 or h == top or h == 1
    if h < min(top, HYPO_CAP):  # neither capped: at most 1% of rows overflow ...
        assert np.count_nonzero(counts > h) <= 0.01 * counts.size
        # ... and 16 less would overflow more than 1%.
        assert h < 16 or np.count_nonzero(counts > h - 16) > 0.01 * counts.size


def test_suggest_hypo_examples():
    assert suggest_hypo(np.zeros(10, dtype=int)) == 1
    regular = np.r_[np.full(990, 23), np.full(10, 54)]  # a Syn1M-like regular pattern
    assert suggest_hypo(regular) == 32
    assert suggest_hypo(np.r_[np.full(98, 23), np.full(2, 54)]) == 54  # capped at the max
    heavy = np.r_[np.full(900, 250), np.full(100, 5000)]  # MNIST-like tail
    assert suggest_hypo(heavy) == HYPO_CAP


def test_csr_bytes_switches_to_int64_past_int32():
    assert csr_bytes(10, 20) == 20 * 8 + 11 * 4
    big = 2**31
    assert csr_bytes(1000, big - 1) == (big - 1) * 8 + 1001 * 4
    assert csr_bytes(1000, big) == big * 12 + 1001 * 8


def test_sampled_counts_scale_to_n():
    counts = np.array([0, 2, 4, 6])
    s = stats_from_counts(counts, n=400, hypo_max_nnz_row=3, estimated=True)
    assert s.estimated and s.sample_rows == 4 and s.n == 400
    assert s.nnz == 1200 and s.nnz_row_mean == 3.0
    assert (s.nnz_row_min, s.nnz_row_max) == (0, 6)
    assert s.n_isolated == 100 and s.rows_over_hypo == 200 and s.n_components is None
    assert s.nnz_row_hist[0].sum() == 400
    assert s.bytes_csr == csr_bytes(400, 1200)
    assert s.sparsity == pytest.approx(100 * (1 - 1200 / 160000))


def _rule_kwargs(params):
    kw = dict(metric=params.metric, sigma=params.sigma)
    kw["threshold_" + params.threshold_kind] = params.threshold
    return kw


@pytest.mark.parametrize("rule", RULES, ids=lambda r: f"{r['metric']}-{sorted(r)[-1]}")
def test_graph_stats_equals_build_stats(rng, rule):
    X = tricky_data(rng, 400, 3, "uniform")
    built = build_graph(X, backend="cpu", **rule).stats
    assert graph_stats(X, backend="cpu", **rule).to_dict() == built.to_dict()
    quick = graph_stats(X, backend="cpu", components=False, **rule).to_dict()
    full = built.to_dict()
    for key in ("n_components", "degree_min", "degree_mean", "degree_max"):
        assert quick.pop(key) is None
        full.pop(key)
    assert quick == full


@pytest.mark.parametrize("method", CPU_METHODS)
@pytest.mark.parametrize("flavour", ["uniform", "lattice", "offset", "duplicates"])
def test_counting_paths_equal_reference_rows(rng, method, flavour):
    X = tricky_data(rng, 250, 2, flavour)
    # Integer threshold on the lattice: many pairs exactly at it (the unsure shell).
    t = {"lattice": 2.0, "offset": 3e-5}.get(flavour, 0.01)
    params = EdgeRule.from_args("uniform", threshold_sqdist=t)
    expected = np.diff(reference_csr(X, params).indptr)
    assert np.array_equal(count_rows_cpu(X, params, method), expected)
    assert np.array_equal(count_rows_cpu(X, params, method, low_memory=True), expected)
    rows = np.sort(rng.choice(250, 40, replace=False))
    assert np.array_equal(count_rows_cpu(X, params, method, rows), expected[rows])


def test_sampled_stats_are_a_sane_estimate(rng):
    X = tricky_data(rng, 6000, 2, "uniform")
    rule = dict(metric="gaussian", sigma=0.05, threshold_sqdist=0.002)  # ~35 per row
    exact = graph_stats(X, components=False, backend="cpu", **rule)
    est = graph_stats(X, sample_rows=1500, backend="cpu", **rule)
    assert est.estimated and est.sample_rows == 1500 and est.n_components is None
    assert est.n == exact.n == 6000
    assert est.nnz == pytest.approx(exact.nnz, rel=0.05)
    assert est.nnz_row_min >= exact.nnz_row_min and est.nnz_row_max <= exact.nnz_row_max
    assert est.bytes_csr == pytest.approx(exact.bytes_csr, rel=0.05)
    assert est.sparsity == pytest.approx(exact.sparsity, abs=0.1)
    assert abs(est.nnz_row_hist[0].sum() - 6000) <= est.nnz_row_hist[0].size
    # The same sample every call: a slider moved back and forth shows the same figure.
    assert graph_stats(X, sample_rows=1500, backend="cpu", **rule).to_dict() == est.to_dict()
    # Asking for at least n rows counts them all, exactly.
    whole = graph_stats(X, sample_rows=6000, components=False, backend="cpu", **rule)
    assert not whole.estimated and whole.nnz == exact.nnz


def test_sampled_counts_are_the_rows_exact_counts(rng):
    X = tricky_data(rng, 500, 784, "zeros")
    rule = dict(metric="cosine", threshold_sim=0.05)
    est = graph_stats(X, sample_rows=100, backend="cpu", **rule)
    rows = np.sort(np.random.default_rng(0).choice(500, 100, replace=False))
    counts = np.diff(reference_csr(X, EdgeRule.from_args(**rule)).indptr)[rows]
    assert est.nnz == round(counts.sum() * 5)
    assert est.nnz_row_max == counts.max() and est.nnz_row_min == counts.min()


@pytest.mark.parametrize(
    "kwargs, exc, words",
    [
        (dict(sample_rows=0), ValueError, ["sample_rows=0"]),
        (dict(sample_rows=2.5), TypeError, ["sample_rows"]),
        (dict(components="yes"), TypeError, ["components"]),
        (dict(hypo_max_nnz_row=-3), ValueError, ["hypo_max_nnz_row=-3"]),
        (dict(backend="tpu"), ValueError, ["backend='tpu'"]),
    ],
)
def test_graph_stats_validation(kwargs, exc, words):
    X = np.random.default_rng(0).random((10, 2)).astype(np.float32)
    with pytest.raises(exc) as err:
        graph_stats(X, metric="uniform", threshold_sqdist=0.1, **kwargs)
    for w in words:
        assert w in str(err.value)


def test_components_count_explicit_zero_edges():
    # Far pairs joined by underflowed (zero) gaussian weights are still edges.
    X = np.array([[0.0], [1.0], [2.0]], dtype=np.float32)
    s = graph_stats(X, metric="gaussian", sigma=0.01, threshold_sqdist=1.5, backend="cpu")
    assert s.nnz == 4 and s.n_components == 1 and s.n_isolated == 0
    assert math.isclose(s.degree_max, 0.0, abs_tol=0.0)
