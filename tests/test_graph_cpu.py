"""The CPU builders equal the float64 reference bit for bit; build_graph's contract.

Thresholds are drawn from the data's own pair values, often *exactly equal* to one
of them, so the strict comparisons are exercised where builders go wrong.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import explorer.graph._cpu as cpu
from explorer.graph import CPU_METHODS, build_graph
from explorer.graph.reference import pair_values, reference_csr
from explorer.graph.rule import EdgeRule
from explorer.memory import check_cpu_memory
from explorer.testing import DATA_FLAVOURS, check_canonical, tricky_data

KIND_NAMES = ("gaussian-sqdist", "gaussian-sim", "cosine", "uniform")


def assert_identical(a, b):
    """Same canonical CSR to the last bit: pattern, index dtypes and float32 values."""
    assert a.shape == b.shape
    for name in ("indptr", "indices", "data"):
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype, (name, x.dtype, y.dtype)
        assert np.array_equal(x, y), f"{name} differs"


def rule_from_pairs(kind, X, q, tie):
    """A rule of `kind` whose threshold is a pair value of X (tie) or between two.

    For a gaussian similarity rule the tie is only approximate: its cutoff
    ``-2σ² ln s`` is recomputed from σ and s.
    """
    probe = EdgeRule.from_args(
        "cosine", threshold_sim=0.0) if kind == "cosine" else EdgeRule.from_args(
        "uniform", threshold_sqdist=1.0)
    compared, _ = pair_values(X, X, probe)
    vals = np.unique(compared[np.isfinite(compared)])
    vals = vals[(vals > 0) & (vals < 1)] if kind == "cosine" else vals[vals > 0]
    if vals.size == 0:
        t = 0.5
    elif tie or vals.size == 1:
        t = vals[int(q * (vals.size - 1))]
    else:
        k = int(q * (vals.size - 2))
        t = 0.5 * (vals[k] + vals[k + 1])
    if kind == "gaussian-sqdist":
        return EdgeRule.from_args("gaussian", 0.7, threshold_sqdist=t)
    if kind == "uniform":
        return EdgeRule.from_args("uniform", threshold_sqdist=t)
    if kind == "cosine":
        return EdgeRule.from_args("cosine", threshold_sim=t)
    # σ² = t: the similarity threshold exp(-1/2) stays far from float underflow.
    return EdgeRule.from_args("gaussian", float(np.sqrt(t)), threshold_sim=float(np.exp(-0.5)))


def build(X, params, method):
    kw = dict(metric=params.metric, sigma=params.sigma)
    kw["threshold_" + params.threshold_kind] = params.threshold
    return build_graph(X, method=method, backend="cpu", **kw)


@settings(max_examples=400)
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(2, 60),
    d=st.integers(1, 12),
    flavour=st.sampled_from(DATA_FLAVOURS),
    kind=st.sampled_from(KIND_NAMES),
    q=st.floats(0, 1),
    tie=st.booleans(),
)
def test_cpu_builders_equal_reference_exactly(seed, n, d, flavour, kind, q, tie):
    rng = np.random.default_rng(seed)
    X = tricky_data(rng, n, d, flavour)
    params = rule_from_pairs(kind, X, q, tie)
    expected = reference_csr(X, params)
    check_canonical(expected)
    counts = np.diff(expected.indptr)
    rows = np.sort(rng.choice(n, int(rng.integers(1, n + 1)), replace=False))
    for method in CPU_METHODS:
        if method == "kdtree" and params.compares != "sqdist":
            continue
        g = build(X, params, method)
        check_canonical(g.csr)
        assert_identical(g.csr, expected)
        assert g.method == method and g.method_reason == "asked for"
        # The counting passes behind graph_stats, every path.
        assert np.array_equal(cpu.count_rows_cpu(X, params, method), counts)
        assert np.array_equal(cpu.count_rows_cpu(X, params, method, low_memory=True), counts)
        assert np.array_equal(cpu.count_rows_cpu(X, params, method, rows), counts[rows])


@pytest.mark.parametrize("kind", KIND_NAMES)
@pytest.mark.parametrize("flavour", ["uniform", "zeros", "duplicates"])
def test_bruteforce_in_784_dimensions(rng, kind, flavour):
    X = tricky_data(rng, int(rng.integers(40, 120)), 784, flavour)
    params = rule_from_pairs(kind, X, rng.random(), tie=bool(rng.integers(2)))
    g = build(X, params, "auto")
    assert g.method == "bruteforce"
    check_canonical(g.csr)
    assert_identical(g.csr, reference_csr(X, params))


@pytest.mark.parametrize("method", CPU_METHODS)
def test_far_from_origin_and_exact_ties(rng, method):
    # Points near 1000 in float32 sit on a grid of 6.1e-5: many pairs share a squared
    # distance exactly, and the matrix-product expansion cancels badly there.
    X = tricky_data(rng, 300, 3, "offset")
    params = rule_from_pairs("uniform", X, rng.random(), tie=True)
    assert_identical(build(X, params, method).csr, reference_csr(X, params))


@pytest.mark.parametrize("method", CPU_METHODS)
def test_integer_lattice_ties_are_excluded(method):
    # 5x5 lattice with t = 1: neighbours at distance exactly 1 are not edges; t just
    # above 1 makes them edges (each inner point has 4).
    g = np.stack(np.meshgrid(np.arange(5), np.arange(5)), -1).reshape(-1, 2).astype(np.float32)
    assert build(g, EdgeRule.from_args("uniform", threshold_sqdist=1.0), method).csr.nnz == 0
    above = build(g, EdgeRule.from_args("uniform", threshold_sqdist=1.0000001), method)
    assert above.csr.nnz == 2 * 2 * 5 * 4  # 2 directions × 2 axes × 5 lines × 4 links


@pytest.mark.parametrize("method", CPU_METHODS)
def test_small_blocks_do_not_change_the_result(rng, method, monkeypatch):
    X = tricky_data(rng, 97, 2, "blobs")
    params = EdgeRule.from_args("gaussian", 0.5, threshold_sqdist=0.2)
    whole = build(X, params, method).csr
    monkeypatch.setattr(cpu, "_BLOCK_BYTES", 8 * 97 * 5)  # five rows per block
    assert_identical(build(X, params, method).csr, whole)


def test_float64_input_is_converted_to_float32(rng):
    X64 = rng.random((50, 3))
    params = EdgeRule.from_args("gaussian", 0.3, threshold_sqdist=0.1)
    g = build(X64, params, "bruteforce")
    assert_identical(g.csr, reference_csr(X64.astype(np.float32), params))


@pytest.mark.parametrize("method", CPU_METHODS)
def test_empty_complete_and_two_point_graphs(rng, method):
    X = tricky_data(rng, 30, 2, "uniform")
    empty = build(X, EdgeRule.from_args("uniform", threshold_sqdist=1e-12), method)
    check_canonical(empty.csr)
    assert empty.csr.nnz == 0 and empty.stats.n_isolated == 30 and empty.stats.n_components == 30
    full = build(X, EdgeRule.from_args("gaussian", 1.0, threshold_sqdist=10.0), method)
    check_canonical(full.csr)
    assert full.csr.nnz == 30 * 29 and full.stats.n_components == 1
    two = np.array([[0, 0], [0.1, 0]], dtype=np.float32)
    g = build(two, EdgeRule.from_args("gaussian", 0.1, threshold_sqdist=0.0101), method)
    assert g.csr.nnz == 2
    np.testing.assert_allclose(g.csr.data, np.exp(-0.5 * (0.1**2) / 0.1**2), rtol=1e-6)


def test_auto_picks_by_metric_and_dimension(rng):
    low = tricky_data(rng, 200, 2, "uniform")
    g = build_graph(low, metric="gaussian", sigma=0.1, threshold_sqdist=0.01, backend="cpu")
    assert g.method == "kdtree" and "kd-tree" in g.method_reason and "d=2" in g.method_reason
    high = tricky_data(rng, 200, 9, "uniform")
    g = build_graph(high, metric="uniform", threshold_sqdist=0.5, backend="cpu")
    assert g.method == "bruteforce" and "d=9" in g.method_reason
    g = build_graph(low, metric="cosine", threshold_sim=0.9, backend="cpu")
    assert g.method == "bruteforce" and "cosine" in g.method_reason
    assert g.backend == "cpu"
    assert {"build", "stats", "total"} <= set(g.timings)
    assert all(v >= 0 for v in g.timings.values())
    assert g.info["edges"] * 2 == g.csr.nnz


@pytest.mark.parametrize(
    "kwargs, words",
    [
        (dict(method="csr2"), ["method='csr2'", "GPU", "backend", "'bruteforce'", "'kdtree'"]),
        (dict(method="gemm"), ["method='gemm'", "GPU"]),
        (dict(method="quick"), ["method='quick'", "'auto'", "'bruteforce'"]),
        (dict(method="kdtree", metric="cosine", threshold_sim=0.5, threshold_sqdist=None),
         ["method='kdtree'", "cosine", "bruteforce"]),
        (dict(hypo_max_nnz_row=0), ["hypo_max_nnz_row=0", "[1, inf]"]),
        (dict(sp_max_nz_pct=0), ["sp_max_nz_pct=0.0", "(0.0, 100.0]"]),
        (dict(sp_max_nz_pct=150), ["sp_max_nz_pct=150.0"]),
        (dict(mem_use_rate=1.5), ["mem_use_rate=1.5", "(0.0, 1.0]"]),
        (dict(mem_use_rate=0.0), ["mem_use_rate=0.0"]),
        (dict(sigma=None), ["sigma"]),
        (dict(sigma=-1.0), ["sigma=-1.0"]),
        (dict(threshold_sqdist=0.0), ["threshold_sqdist=0.0"]),
        (dict(threshold_sim=0.5), ["threshold_sqdist", "threshold_sim", "both"]),
        (dict(metric="manhattan"), ["metric='manhattan'", "'gaussian'"]),
        (dict(backend="tpu"), ["backend='tpu'", "auto"]),
    ],
)
def test_invalid_arguments_are_named(kwargs, words):
    X = np.random.default_rng(0).random((10, 2)).astype(np.float32)
    args = dict(metric="gaussian", sigma=0.1, threshold_sqdist=0.1, backend="cpu")
    args.update(kwargs)
    with pytest.raises(ValueError) as err:
        build_graph(X, **args)
    for w in words:
        assert w in str(err.value), (w, str(err.value))


@pytest.mark.parametrize(
    "X, exc, words",
    [
        (np.zeros((1, 3), np.float32), ValueError, ["n=1", "n >= 2"]),
        (np.zeros((5, 0), np.float32), ValueError, ["d=0"]),
        (np.array([[0.0, np.nan], [1.0, 2.0]]), ValueError, ["non-finite"]),
        (np.array([["a", "b"], ["c", "d"]]), TypeError, ["numeric"]),
        (np.zeros(5), ValueError, ["2-D"]),
    ],
)
def test_invalid_data_is_named(X, exc, words):
    with pytest.raises(exc) as err:
        build_graph(X, metric="uniform", threshold_sqdist=1.0, backend="cpu")
    for w in words:
        assert w in str(err.value)


def test_block_shapes_must_be_a_mapping():
    X = np.zeros((4, 2), np.float32)
    with pytest.raises(TypeError, match="block_shapes"):
        build_graph(X, metric="uniform", threshold_sqdist=1.0, block_shapes=(32, 4), backend="cpu")


def test_hypo_width_feeds_the_statistics(rng):
    X = tricky_data(rng, 300, 2, "uniform")
    g = build_graph(X, metric="uniform", threshold_sqdist=0.01, hypo_max_nnz_row=3, backend="cpu")
    counts = np.diff(g.csr.indptr)
    assert g.stats.hypo_max_nnz_row == 3
    assert g.stats.rows_over_hypo == np.count_nonzero(counts > 3)
    assert g.stats.bytes_ellpack == 300 * 3 * 8


@pytest.mark.parametrize("method", CPU_METHODS)
def test_memory_guard_refuses_a_graph_that_cannot_fit(rng, method):
    X = tricky_data(rng, 3000, 2, "uniform")
    params = EdgeRule.from_args("uniform", threshold_sqdist=0.5)  # ~half of all pairs
    with pytest.raises(ValueError, match=r"too large.*estimated nnz ≈ [0-9.e+]+"):
        check_cpu_memory(3000, cpu.row_counter(X, params, method), params,
                         available=10 * 2**20)
    check_cpu_memory(3000, cpu.row_counter(X, params, method), params,
                     available=64 * 2**30)  # fits: no error


@pytest.mark.parametrize("method", CPU_METHODS)
@pytest.mark.parametrize("kind", KIND_NAMES)
def test_threaded_exact_step_and_sorted_assembly_equal_reference(rng, method, kind, monkeypatch):
    """Tasks of 7 pairs spread over the threads, pairs sorted and assembled in one
    counting pass: the reference CSR bit for bit."""
    if method == "kdtree" and kind == "cosine":
        pytest.skip("a kd-tree serves distance rules only")
    X = tricky_data(rng, 300, 3, "blobs")
    params = rule_from_pairs(kind, X, 0.3, False)
    monkeypatch.setattr(cpu, "_PAIR_TASK", 7)
    assert_identical(build(X, params, method).csr, reference_csr(X, params))


def test_sort_pairs_orders_by_row_then_column(rng):
    n = 1000
    i = rng.integers(0, n - 1, 5000)
    j = i + 1 + rng.integers(0, 50, 5000) % (n - 1 - i)
    pairs = np.unique(np.stack([i, j], 1), axis=0)
    shuffled = pairs[rng.permutation(len(pairs))]
    si, sj = cpu.sort_pairs(n, shuffled[:, 0], shuffled[:, 1])
    assert si.dtype == sj.dtype == np.int32
    assert np.array_equal(np.stack([si, sj], 1), pairs)
