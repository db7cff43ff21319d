"""GPU graph builders (CSR-1, CSR-2, CSR-3), the counting pass and device components.

Every builder is compared with the float64 reference on fresh random data (the
``rng`` fixture of conftest.py: new each run, replayable), with every new device
allocation poisoned (0xFF bytes: NaN floats, -1 integers), so an output element a
kernel forgets to write is caught.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components as scipy_components

cupy = pytest.importorskip("cupy")
cpsparse = pytest.importorskip("cupyx.scipy.sparse")

from explorer.kernels import csr as kcsr  # noqa: E402

from explorer.components import count_components  # noqa: E402
from explorer.graph import (  # noqa: E402
    EdgeRule,
    build_graph,
    gpu,
)
from explorer.graph.reference import pair_values, reference_csr  # noqa: E402
from explorer.testing import assert_same_graph, check_canonical  # noqa: E402

# Every test runs with poisoned allocations (tests/conftest.py).
pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("poisoned")]

METHODS = gpu.PAPER_METHODS  # grid and gemm: tests/test_gpu_grid.py, test_gpu_gemm.py
KINDS = ("gaussian-sqdist", "gaussian-sim", "cosine-sim", "uniform-sqdist")


# --------------------------------------------------------------------------- data


def clustered(rng, n, d, k=6, spread=0.15):
    """Points around k random centres: densities vary, so rows have varied degrees."""
    centres = rng.random((k, d))
    X = centres[rng.integers(k, size=n)] + spread * rng.standard_normal((n, d))
    return np.ascontiguousarray(X, dtype=np.float32)


def directional(rng, n, d, k=10, noise=0.8):
    """Points around k random directions: cosines spread over (-1, 1)."""
    centres = rng.standard_normal((k, d))
    X = centres[rng.integers(k, size=n)] + noise * rng.standard_normal((n, d))
    return np.ascontiguousarray(X, dtype=np.float32)


def _quantile(values, degree, n):
    return float(np.quantile(values, min(1.0, degree / n)))


def rule(kind, X, rng, degree=12, x_max=2.0):
    """Parameters of the given kind giving about `degree` neighbours per row.

    For gaussian-sim, `x_max` is the largest exponent cutoff/(2σ²): <= 8 runs __expf,
    above runs expf (kernels._launch.FAST_EXP_MAX_ARG).
    """
    n = X.shape[0]
    sample = X[rng.choice(n, size=min(n, 200), replace=False)]
    if kind == "cosine-sim":
        p = EdgeRule.from_args("cosine", threshold_sim=0.0)
        cos, _ = pair_values(sample, X, p)
        cos = cos[np.isfinite(cos)]
        return EdgeRule.from_args("cosine", threshold_sim=float(np.clip(
            np.quantile(cos, 1.0 - min(1.0, (degree + 1) / n)), -0.99, 0.99)))
    p = EdgeRule.from_args("uniform", threshold_sqdist=1.0)
    d2, _ = pair_values(sample, X, p)
    cutoff = max(_quantile(d2, degree + 1, n), 1e-6)
    if kind == "uniform-sqdist":
        return EdgeRule.from_args("uniform", threshold_sqdist=cutoff)
    sigma = float(np.sqrt(cutoff / (2.0 * x_max)))
    if kind == "gaussian-sqdist":
        return EdgeRule.from_args("gaussian", sigma=sigma, threshold_sqdist=cutoff)
    return EdgeRule.from_args("gaussian", sigma=sigma, threshold_sim=float(np.exp(-x_max)))


def build(method, X, params, **options):
    csr, timings, info = gpu.build_gpu(cupy.asarray(X), params, method, **options)
    assert isinstance(csr, cpsparse.csr_matrix) and csr.dtype == np.float32
    check_canonical(csr)
    assert timings and all(v >= 0 for v in timings.values())
    return csr, timings, info


def check_against_reference(method, X, params, **options):
    csr, timings, info = build(method, X, params, **options)
    assert_same_graph(csr, reference_csr(X, params), X, params)
    return csr, timings, info


# --------------------------------------------------------------------------- builders


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("method", METHODS)
def test_every_rule_n_off_block_sizes(method, kind, rng):
    # n = 1237 is a multiple of no tile size, d = 2 uses the register path.
    X = clustered(rng, 1237, 2) if kind != "cosine-sim" else directional(rng, 1237, 2)
    check_against_reference(method, X, rule(kind, X, rng))


@pytest.mark.parametrize("kind", ["gaussian-sqdist", "cosine-sim"])
@pytest.mark.parametrize("method", METHODS)
def test_two_points(method, kind, rng):
    X = clustered(rng, 2, 3)
    params = rule(kind, X, rng, degree=1)
    check_against_reference(method, X, params)
    # Two points within the cutoff: one edge each way.
    near = np.array([[0.0, 0.0, 0.0], [0.1, 0.0, 0.0]], dtype=np.float32)
    p = EdgeRule.from_args("gaussian", sigma=0.1, threshold_sqdist=0.05)
    csr, _, _ = check_against_reference(method, near, p)
    assert csr.nnz == 2


@pytest.mark.parametrize("method", METHODS)
def test_one_dimension(method, rng):
    X = clustered(rng, 613, 1)
    check_against_reference(method, X, rule("uniform-sqdist", X, rng))


@pytest.mark.parametrize("kind", ["cosine-sim", "gaussian-sim"])
@pytest.mark.parametrize("method", METHODS)
def test_mnist_dimension(method, kind, rng):
    # d = 784: dimensions staged through shared memory, Table 4's MNIST block shapes.
    X = directional(rng, 450, 784) if kind == "cosine-sim" else clustered(rng, 450, 784, 4, 0.05)
    _, _, info = check_against_reference(method, X, rule(kind, X, rng, degree=20))
    assert info["dimensions"].startswith("shared")


@pytest.mark.parametrize("x_max", [2.0, 20.0])
def test_gaussian_weights_both_exp_paths(x_max, rng):
    X = clustered(rng, 900, 3)
    params = rule("gaussian-sim", X, rng, degree=30, x_max=x_max)
    _, _, info = check_against_reference("csr1", X, params)
    assert info["exp"] == ("__expf" if x_max <= 8 else "expf")


@pytest.mark.parametrize("threshold", [-0.3, 0.2])
@pytest.mark.parametrize("method", METHODS)
def test_cosine_zero_vectors_have_no_edges(method, threshold, rng):
    X = directional(rng, 800, 5)
    zero = rng.choice(800, size=80, replace=False)
    X[zero] = 0.0
    params = EdgeRule.from_args("cosine", threshold_sim=threshold)
    csr, _, _ = build(method, X, params)
    # Cosines near 0 (kept by a negative threshold) carry float32's absolute error.
    assert_same_graph(csr, reference_csr(X, params), X, params, atol=2e-6)
    counts = cupy.diff(csr.indptr).get()
    assert not counts[zero].any()
    # A negative threshold: every other pair with cosine > -0.3 is an edge, and a zero
    # vector would have passed as "cosine 0" had it not been excluded.
    assert counts.sum() > 0


def test_csr2_hypo_below_at_and_above_the_maximum(rng):
    X = clustered(rng, 1500, 3)
    params = rule("gaussian-sqdist", X, rng, degree=25)
    ref = reference_csr(X, params)
    top = int(np.diff(ref.indptr).max())
    for hypo in (1, top // 2, top, top + 7):
        csr, _, info = build("csr2", X, params, hypo_max_nnz_row=hypo)
        assert_same_graph(csr, ref, X, params)
        assert info["max_nnz_row"] == top
        over = int(np.count_nonzero(np.diff(ref.indptr) > hypo))
        assert abs(info["rows_over_hypo"] - over) <= 2  # band pairs may move a row


def test_csr2_hypo_one_high_dimension(rng):
    X = directional(rng, 400, 784)
    params = rule("cosine-sim", X, rng, degree=30)
    _, _, info = check_against_reference("csr2", X, params, hypo_max_nnz_row=1)
    assert info["rows_over_hypo"] > 0.9 * 400


@pytest.mark.parametrize("d", [3, 784])
def test_csr3_many_small_chunks(d, rng):
    X = clustered(rng, 1100, d) if d < 8 else directional(rng, 700, d)
    params = rule("gaussian-sqdist" if d < 8 else "cosine-sim", X, rng, degree=15)
    _, _, info = check_against_reference("csr3", X, params, _max_chunk_rows=1)
    assert info["n_chunks"] >= 5


def test_csr3_overflow_names_the_real_nnz(rng):
    X = clustered(rng, 2000, 3)
    params = rule("uniform-sqdist", X, rng, degree=40)
    expected = reference_csr(X, params).nnz
    with pytest.raises(ValueError, match=r"the graph has nnz=(\d+)") as err:
        build("csr3", X, params, sp_max_nz_pct=0.01)
    message = str(err.value)
    real = int(re.search(r"the graph has nnz=(\d+)", message).group(1))
    assert abs(real - expected) <= 4  # pairs in the rounding band may go either way
    advice = float(message.rsplit(">= ", 1)[1])
    csr, _, info = build("csr3", X, params, sp_max_nz_pct=advice)
    assert csr.nnz == real and info["capacity"] >= real


def test_csr3_default_sp_max_nz_pct_fits(rng):
    X = clustered(rng, 3000, 2)
    csr, _, info = check_against_reference("csr3", X, rule("gaussian-sqdist", X, rng, degree=30))
    assert info["capacity"] >= csr.nnz
    assert info["capacity"] <= 20 * max(csr.nnz, 3000)


@pytest.mark.parametrize("method", ["csr1", "csr3"])
def test_grid_y_limit_split_into_several_launches(method, rng):
    # The 2-D grids (1stPass, chkPass) launch in row chunks past the y limit; lower the
    # limit so that small data takes that path.
    X = clustered(rng, 1500, 4)
    check_against_reference(method, X, rule("gaussian-sqdist", X, rng), _max_grid_y=2)


def test_rows_past_grid_y_limit(rng):
    X = clustered(rng, 70_001, 2, k=20, spread=0.3)
    params = rule("gaussian-sqdist", X, rng, degree=10)
    expected = build_graph(X, metric=params.metric, sigma=params.sigma,
                           threshold_sqdist=params.threshold, method="kdtree",
                           backend="cpu").csr
    for method in METHODS:
        csr, _, _ = build(method, X, params)
        assert_same_graph(csr, expected, X, params)


@pytest.mark.parametrize(
    "shapes",
    [
        {"1stPass": (64, 4), "2ndPass": (64, 2)},
        {"fullPass": (128, 1), "supPass": (32, 8)},
        {"chkPass": (64, 2), "denseToCSR": (32, 4)},
    ],
)
@pytest.mark.parametrize("d", [3, 40])
def test_custom_block_shapes(shapes, d, rng):
    # bsx > 32: a block row spans several warps, so the segment walk uses block barriers.
    method = next(m for m, ks in kcsr.KERNELS.items() if set(shapes) <= set(ks))
    X = clustered(rng, 1000, d)
    _, _, info = check_against_reference(
        method, X, rule("gaussian-sqdist", X, rng, degree=20), block_shapes=shapes,
        hypo_max_nnz_row=8,
    )
    for name, shape in shapes.items():
        assert info["block_shapes"][name] == shape


@pytest.mark.parametrize(
    "shapes", [{"2ndPass": (48, 4)}, {"2ndPass": (64, 32)}, {"2ndPass": (32,)}, {"bogus": (32, 4)}]
)
def test_bad_block_shapes_are_refused(shapes, rng):
    X = clustered(rng, 100, 2)
    with pytest.raises(ValueError, match="block_shapes"):
        gpu.build_gpu(cupy.asarray(X), rule("uniform-sqdist", X, rng), "csr1",
                       block_shapes=shapes)


@pytest.mark.slow
def test_methods_agree_on_200k_points(rng):
    X = clustered(rng, 200_000, 4, k=8, spread=0.2)
    params = rule("gaussian-sqdist", X, rng, degree=20)
    expected = build_graph(X, metric=params.metric, sigma=params.sigma,
                           threshold_sqdist=params.threshold, method="kdtree",
                           backend="cpu").csr
    first = None
    for method in METHODS:
        csr, _, _ = build(method, X, params)
        assert_same_graph(csr, expected, X, params)
        if first is None:
            first = csr
        else:  # one arithmetic for every pass: bit-identical graphs
            assert cupy.array_equal(csr.indptr, first.indptr)
            assert cupy.array_equal(csr.indices, first.indices)
            assert cupy.array_equal(csr.data.view(cupy.int32), first.data.view(cupy.int32))


@pytest.mark.slow
def test_int64_indices_past_2_31_nonzeros():
    # A complete graph of 46 500 points has 2 162 203 500 > 2**31 nonzeros.
    n = 46_500
    X = np.linspace(0.0, 1.0, n, dtype=np.float32)[:, None]
    params = EdgeRule.from_args("uniform", threshold_sqdist=4.0)
    csr, _, info = gpu.build_gpu(cupy.asarray(X), params, "csr1")
    assert csr.nnz == n * (n - 1) and info["index_dtype"] == "int64"
    assert csr.indptr.dtype == cupy.int64 and csr.indices.dtype == cupy.int64
    assert cupy.array_equal(csr.indptr, cupy.arange(n + 1, dtype=cupy.int64) * (n - 1))
    for i in (0, 1, n // 2, n - 1):
        row = csr.indices[int(csr.indptr[i]) : int(csr.indptr[i + 1])].get()
        assert np.array_equal(row, np.delete(np.arange(n), i))
    assert bool((csr.data == 1.0).all())


# --------------------------------------------------------------------------- statistics


def _band_counts(X, rows, params):
    """Per row of `rows`: pairs whose float64 value lies in the rounding band."""
    compared, _ = pair_values(X[rows], X, params)
    thr = params.threshold if params.compares == "cosine" else params.sqdist_cutoff
    with np.errstate(invalid="ignore"):
        return (np.abs(compared - thr) <= params.band).sum(axis=1)


@pytest.mark.parametrize("kind", ["gaussian-sqdist", "cosine-sim"])
@pytest.mark.parametrize("sampled", [False, True])
def test_count_rows_equals_reference(kind, sampled, rng):
    n = 3001
    X = clustered(rng, n, 3) if kind != "cosine-sim" else directional(rng, n, 3)
    if kind == "cosine-sim":
        X[rng.choice(n, 30, replace=False)] = 0.0
    params = rule(kind, X, rng, degree=25)
    rows = np.sort(rng.choice(n, 700, replace=False)) if sampled else np.arange(n)
    counts, degrees = gpu.count_rows_gpu(cupy.asarray(X), params,
                                          cupy.asarray(rows) if sampled else None)
    assert counts.shape == (rows.size,) and degrees.shape == (rows.size,)
    ref = reference_csr(X, params)
    want = np.diff(ref.indptr)[rows]
    got = counts.get()
    assert np.all(np.abs(got - want) <= _band_counts(X, rows, params))
    ref_deg = np.asarray(ref.astype(np.float64).sum(axis=1)).ravel()[rows]
    same = got == want
    np.testing.assert_allclose(degrees.get()[same], ref_deg[same], rtol=1e-4, atol=1e-6)


def test_count_rows_order_and_repeats(rng):
    X = clustered(rng, 500, 2)
    params = rule("uniform-sqdist", X, rng)
    rows = np.array([7, 3, 3, 499, 0])
    counts, _ = gpu.count_rows_gpu(cupy.asarray(X), params, rows)
    full, _ = gpu.count_rows_gpu(cupy.asarray(X), params)
    assert np.array_equal(counts.get(), full.get()[rows])


@pytest.mark.parametrize("rows", [np.array([0, 500]), np.array([[1, 2]]), np.array([0.5])])
def test_count_rows_refuses_bad_rows(rows, rng):
    X = clustered(rng, 500, 2)
    with pytest.raises(ValueError, match="rows"):
        gpu.count_rows_gpu(cupy.asarray(X), rule("uniform-sqdist", X, rng), rows)


@pytest.mark.slow
def test_grid_and_paper_counting_agree_on_one_million_points(rng):
    # Live statistics of low-d data count through the grid; the paper's counting pass
    # (n² pairs) must give the same rows. Timings live in benchmarks/, not here.
    X = cupy.asarray(clustered(rng, 1_000_000, 4, k=4, spread=0.1))
    params = EdgeRule.from_args("gaussian", sigma=0.01, threshold_sqdist=0.0008)
    grid_counts, grid_deg = gpu.count_rows_gpu(X, params)
    paper_counts, paper_deg = gpu.count_rows_paper(X, params)
    assert int(paper_counts.sum()) > 0
    assert cupy.array_equal(grid_counts, paper_counts)
    cupy.testing.assert_allclose(grid_deg, paper_deg, rtol=1e-5)


def _random_graph(rng, n, degree):
    m = n * degree // 2
    i, j = rng.integers(n, size=m), rng.integers(n, size=m)
    keep = i != j
    a = sp.coo_matrix((np.ones(keep.sum(), np.float32), (i[keep], j[keep])), shape=(n, n))
    return ((a + a.T) > 0).astype(np.float32).tocsr()


@pytest.mark.parametrize("n, degree", [(1, 0), (50, 0), (5000, 1), (20000, 2), (3000, 8)])
def test_connected_components_equal_scipy(n, degree, rng):
    host = _random_graph(rng, n, degree)
    want = scipy_components(host, directed=False, return_labels=False)
    assert count_components(cpsparse.csr_matrix(host)) == want


def test_connected_components_of_a_long_path():
    n = 200_000
    i = np.arange(n - 1)
    a = sp.coo_matrix((np.ones(n - 1, np.float32), (i, i + 1)), shape=(n, n))
    host = (a + a.T).tocsr()
    assert count_components(cpsparse.csr_matrix(host)) == 1


def test_connected_components_of_built_graphs(rng):
    X = clustered(rng, 4000, 2, k=12, spread=0.05)
    params = rule("gaussian-sqdist", X, rng, degree=6)
    csr, _, _ = build("csr2", X, params)
    want = scipy_components(csr.get(), directed=False, return_labels=False)
    assert count_components(csr) == want


def test_paper_choice_follows_the_paper():
    assert gpu.paper_choice(60_000, 784)[0] == "csr3"
    method, reason = gpu.paper_choice(1_000_000, 4)
    assert method == "csr2" and "4.6" in reason


def test_auto_prefers_grid_and_gemm_where_they_apply():
    cos = EdgeRule.from_args("cosine", threshold_sim=0.8)
    dist = EdgeRule.from_args("gaussian", sigma=0.01, threshold_sqdist=8e-4)
    assert gpu.choose_method(60_000, 784, cos)[0] == "gemm"
    assert gpu.choose_method(1_000_000, 4, dist)[0] == "grid"
    assert gpu.choose_method(10_000, 16, dist)[0] == "csr2"   # between the two
    assert gpu.choose_method(10_000, 4, cos)[0] == "csr2"     # cosine in low d


def test_label_counts_on_the_device_are_uniques_counts(rng):
    # label_counts (a bincount) against CuPy's unique, on device labels: vertex ids.
    from explorer.components import label_counts

    for _ in range(100):
        n = int(rng.integers(1, 5000))
        labels = cupy.asarray(rng.integers(0, n, size=int(rng.integers(0, 2 * n))),
                              dtype=cupy.int32)
        found, counts = label_counts(labels)
        want, want_counts = cupy.unique(labels, return_counts=True)
        assert found.dtype == cupy.int32
        assert cupy.array_equal(found, want) and cupy.array_equal(counts, want_counts)
