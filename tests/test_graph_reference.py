"""The float64 reference: pair values, the strict edge rule, reference_csr.

The reference is checked against SciPy's ``cdist`` (an independent float64
computation) with thresholds placed between pair values, so that last-bit
differences between the two computations cannot flip an edge.
"""

import numpy as np
import pytest
from scipy.spatial.distance import cdist

from explorer.graph import EdgeRule
from explorer.graph.reference import (
    PairValues,
    edge_mask,
    pair_values,
    pair_values_at,
    reference_csr,
    threshold_value,
)
from explorer.testing import check_canonical, tricky_data

KINDS = {
    "gaussian-sqdist": dict(metric="gaussian", sigma=0.3, threshold_sqdist=1.0),
    "gaussian-sim": dict(metric="gaussian", sigma=0.3, threshold_sim=0.2),
    "cosine": dict(metric="cosine", threshold_sim=0.5),
    "uniform": dict(metric="uniform", threshold_sqdist=1.0),
}


def independent_values(X, params):
    """Compared values and weights from scipy's cdist, float64 (zero rows: -inf)."""
    X64 = X.astype(np.float64)
    if params.compares == "sqdist":
        compared = cdist(X64, X64, "sqeuclidean")
    else:
        zero = ~X64.any(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            compared = 1.0 - cdist(X64, X64, "cosine")
        compared[zero, :] = -np.inf
        compared[:, zero] = -np.inf
    if params.metric == "gaussian":
        weights = np.exp(-compared / (2 * params.sigma**2))
    elif params.metric == "uniform":
        weights = np.ones_like(compared)
    else:
        weights = np.where(np.isfinite(compared), compared, 0.0)
    return compared, weights


def params_between_values(kind, compared, q):
    """Rule of `kind` whose threshold sits midway between two distinct pair values."""
    vals = np.unique(compared[np.isfinite(compared)])
    if kind != "cosine":
        vals = vals[vals > 0]
    k = int(q * (vals.size - 2))
    mid = 0.5 * (vals[k] + vals[k + 1])
    if kind == "gaussian-sqdist":
        return EdgeRule.from_args("gaussian", 0.3, threshold_sqdist=mid)
    if kind == "uniform":
        return EdgeRule.from_args("uniform", threshold_sqdist=mid)
    if kind == "cosine":
        return EdgeRule.from_args("cosine", threshold_sim=min(mid, 0.999))
    # Widen σ for far-apart data so the similarity threshold stays a normal float
    # (exp(-mid / 2σ²) >= e^-30) instead of underflowing to the invalid value 0.
    sigma = max(0.3, float(np.sqrt(mid / 60.0)))
    return EdgeRule.from_args("gaussian", sigma, threshold_sim=np.exp(-mid / (2 * sigma**2)))


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("d", [1, 3, 784])
def test_pair_values_match_cdist(rng, kind, d):
    params = EdgeRule.from_args(**KINDS[kind])
    X = tricky_data(rng, 40, d, "zeros" if kind == "cosine" else "uniform")
    compared, weights = pair_values(X, X, params)
    ref_c, ref_w = independent_values(X, params)
    finite = np.isfinite(ref_c)
    assert np.array_equal(finite, np.isfinite(compared))
    assert np.all(compared[~finite] == -np.inf)
    scale = np.abs(ref_c[finite]).max()
    np.testing.assert_allclose(compared[finite], ref_c[finite], rtol=1e-12, atol=1e-12 * scale)
    np.testing.assert_allclose(weights, ref_w, rtol=1e-11, atol=1e-14)


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("d", [1, 5, 784])
def test_dense_and_pair_forms_agree_bit_for_bit(rng, kind, d):
    params = EdgeRule.from_args(**KINDS[kind])
    X = tricky_data(rng, 30, d, "zeros")
    compared, weights = pair_values(X, X, params)
    assert np.array_equal(compared, compared.T)  # symmetric to the last bit
    i = rng.integers(0, 30, 200)
    j = rng.integers(0, 30, 200)
    c_at, w_at = pair_values_at(X, i, j, params)
    assert np.array_equal(c_at, compared[i, j])
    assert np.array_equal(w_at, weights[i, j])


def test_edge_rule_is_strict():
    sq = EdgeRule.from_args("uniform", threshold_sqdist=0.5)
    assert edge_mask(np.array([0.0, 0.4999999, 0.5, 0.6, np.nan]), sq).tolist() == [
        True, True, False, False, False]
    cos = EdgeRule.from_args("cosine", threshold_sim=0.25)
    assert edge_mask(np.array([1.0, 0.25, 0.2500001, -np.inf, np.nan]), cos).tolist() == [
        True, False, True, False, False]
    # A gaussian similarity threshold is decided on its squared-distance cutoff.
    sim = EdgeRule.from_args("gaussian", 0.5, threshold_sim=0.3)
    cut = sim.sqdist_cutoff
    assert threshold_value(sim) == cut
    assert edge_mask(np.array([np.nextafter(cut, 0), cut]), sim).tolist() == [True, False]


def test_pairs_exactly_at_the_threshold_are_not_edges():
    # Integer coordinates: squared distances are exact integers.
    X = np.array([[0, 0], [1, 0], [0, 2], [1, 1]], dtype=np.float32)
    g = reference_csr(X, EdgeRule.from_args("uniform", threshold_sqdist=1.0))
    assert g.nnz == 0
    g = reference_csr(X, EdgeRule.from_args("uniform", threshold_sqdist=2.0))
    assert sorted(zip(*_coords(g), strict=True)) == [(0, 1), (1, 0), (1, 3), (3, 1)]
    # cos((3, 4), (1, 0)) = 3/5, exactly float64(0.6); orthogonal vectors: exactly 0.
    V = np.array([[3, 4], [1, 0], [0, 5]], dtype=np.float32)
    g = reference_csr(V, EdgeRule.from_args("cosine", threshold_sim=0.6))
    assert sorted(zip(*_coords(g), strict=True)) == [(0, 2), (2, 0)]  # cos = 4/5 > 0.6
    g = reference_csr(V, EdgeRule.from_args("cosine", threshold_sim=0.0))
    assert sorted(zip(*_coords(g), strict=True)) == [(0, 1), (0, 2), (1, 0), (2, 0)]


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("flavour", ["uniform", "blobs", "duplicates", "zeros"])
def test_reference_csr_equals_independent_dense_rule(rng, kind, flavour):
    probe = EdgeRule.from_args(**KINDS[kind])
    for _ in range(20):  # small n with duplicates or zero rows can leave < 3 values
        n, d = int(rng.integers(3, 70)), int(rng.integers(1, 9))
        X = tricky_data(rng, n, d, flavour)
        ref_c, _ = independent_values(X, probe)
        if np.unique(ref_c[np.isfinite(ref_c) & (ref_c > 0)]).size >= 3:
            break
    else:
        raise AssertionError("could not draw data with 3 distinct pair values")
    params = params_between_values(kind, ref_c, rng.random())
    compared, weights = independent_values(X, params)
    mask = edge_mask(compared, params)
    np.fill_diagonal(mask, False)
    g = reference_csr(X, params)
    check_canonical(g)
    assert np.array_equal(_pattern(g), mask)
    np.testing.assert_allclose(g.toarray()[mask], weights[mask].astype(np.float32), rtol=1e-6)


def _coords(g):
    """Stored (row, col) pairs, explicit zeros included (``nonzero()`` drops them)."""
    rows = np.repeat(np.arange(g.shape[0]), np.diff(g.indptr))
    return rows, g.indices


def _pattern(g):
    dense = np.zeros(g.shape, dtype=bool)
    dense[_coords(g)] = True
    return dense


def test_duplicates_are_edges_with_weight_one():
    X = np.array([[0.5, 0.5], [0.5, 0.5], [3.0, 3.0]], dtype=np.float32)
    for params in (
        EdgeRule.from_args("gaussian", 0.1, threshold_sqdist=1e-6),
        EdgeRule.from_args("uniform", threshold_sqdist=1e-6),
        EdgeRule.from_args("cosine", threshold_sim=0.9999),
    ):
        g = reference_csr(X, params)
        check_canonical(g)
        expected = [(0, 1), (1, 0)] if params.metric != "cosine" else [
            (0, 1), (0, 2), (1, 0), (1, 2), (2, 0), (2, 1)]  # all three share a direction
        assert sorted(zip(*_coords(g), strict=True)) == expected
        assert np.all(g.data == 1.0)


def test_zero_vectors_have_no_cosine_edges_even_at_the_lowest_threshold():
    X = np.array([[0, 0, 0], [1, 2, 3], [0, 0, 0], [-1, 0, 2]], dtype=np.float32)
    g = reference_csr(X, EdgeRule.from_args("cosine", threshold_sim=-1.0))
    check_canonical(g)
    assert np.diff(g.indptr).tolist() == [0, 1, 0, 1]
    compared, weights = pair_values(X, X, EdgeRule.from_args("cosine", threshold_sim=0.0))
    assert np.all(compared[0] == -np.inf) and np.all(weights[0] == 0)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_n_equals_two(kind):
    X = np.array([[0.0, 1.0], [0.6, 1.2]], dtype=np.float32)
    g = reference_csr(X, EdgeRule.from_args(**KINDS[kind]))
    check_canonical(g)
    compared, weights = independent_values(X, EdgeRule.from_args(**KINDS[kind]))
    is_edge = bool(edge_mask(compared[0, 1], EdgeRule.from_args(**KINDS[kind])))
    assert g.nnz == (2 if is_edge else 0)
    if is_edge:
        np.testing.assert_allclose(g.data, weights[0, 1], rtol=1e-7)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_empty_and_complete_graphs(rng, kind):
    n = 25
    X = tricky_data(rng, n, 3, "uniform")
    tiny = dict(KINDS[kind])
    huge = dict(KINDS[kind])
    if kind in ("gaussian-sqdist", "uniform"):
        tiny["threshold_sqdist"], huge["threshold_sqdist"] = 1e-9, 10.0
    elif kind == "gaussian-sim":
        tiny["threshold_sim"], huge["threshold_sim"] = 0.999999, 1e-12
    else:
        tiny["threshold_sim"], huge["threshold_sim"] = 0.99999999, -1.0
    empty = reference_csr(X, EdgeRule.from_args(**tiny))
    check_canonical(empty)
    assert empty.nnz == 0 and empty.indptr.tolist() == [0] * (n + 1)
    full = reference_csr(X, EdgeRule.from_args(**huge))
    check_canonical(full)
    assert full.nnz == n * (n - 1)


def test_underflowed_gaussian_weights_are_kept_as_explicit_zeros():
    X = np.array([[0.0], [0.001], [1.0]], dtype=np.float32)
    # exp(-1 / (2 * 0.01**2)) = exp(-5000) is 0 even in float64; the rule says edge.
    params = EdgeRule.from_args("gaussian", 0.01, threshold_sqdist=2.0)
    g = reference_csr(X, params)
    check_canonical(g)
    assert g.nnz == 6
    assert np.count_nonzero(g.data == 0) == 4  # (0, 2), (1, 2) and their mirrors


def test_reference_blocks_do_not_change_the_result(rng, monkeypatch):
    import explorer.graph._reference as ref

    X = tricky_data(rng, 50, 4, "blobs")
    params = EdgeRule.from_args("gaussian", 1.0, threshold_sqdist=0.5)
    whole = reference_csr(X, params)
    monkeypatch.setattr(ref, "_BLOCK_BYTES", 8 * 50 * 3)  # three rows per block
    pieces = reference_csr(X, params)
    for name in ("indptr", "indices", "data"):
        assert np.array_equal(getattr(whole, name), getattr(pieces, name))


@pytest.mark.parametrize("metric", ["uniform", "cosine"])
def test_very_wide_data_sums_features_in_the_loops_order(rng, metric):
    # Few pairs of very wide data take the features in blocks (d / block Python steps,
    # not d); the values must keep the bits of the one-feature-at-a-time loop that
    # larger sums use, so that the pair and dense paths still decide pairs alike.
    X = (rng.normal(size=(3, 40_000)) * 100).astype(np.float32)
    rule = (EdgeRule.from_args("cosine", threshold_sim=0.0) if metric == "cosine"
            else EdgeRule.from_args("uniform", threshold_sqdist=1e9))
    values = PairValues(X, rule)
    cols = X.astype(np.float64).T
    i, j = np.array([0, 0, 1]), np.array([1, 2, 2])
    want = np.zeros(3)
    norms = np.zeros(3)
    for c in cols:
        want += (c[i] - c[j]) ** 2 if metric == "uniform" else c[i] * c[j]
        norms += c * c
    if metric == "cosine":
        want = want / (np.sqrt(norms)[i] * np.sqrt(norms)[j])
    np.testing.assert_array_equal(values.at(i, j), want)
    np.testing.assert_array_equal(values.block(np.arange(3))[i, j], want)


@pytest.mark.parametrize("offset", [-1, 0])
def test_pair_sums_either_side_of_the_per_feature_size_keep_the_bits(rng, offset):
    # Below _PER_FEATURE_MIN_SIZE pairs the features are summed in blocks, from it
    # one at a time (faster there): both must give the loop's bits.
    from explorer.graph._reference import _PER_FEATURE_MIN_SIZE

    m = _PER_FEATURE_MIN_SIZE + offset
    X = (rng.normal(size=(60, 300)) * 10).astype(np.float32)
    rule = EdgeRule.from_args("uniform", threshold_sqdist=1e9)
    i, j = rng.integers(0, 60, m), rng.integers(0, 60, m)
    want = np.zeros(m)
    for c in X.astype(np.float64).T:
        want += (c[i] - c[j]) ** 2
    np.testing.assert_array_equal(PairValues(X, rule).at(i, j), want)
