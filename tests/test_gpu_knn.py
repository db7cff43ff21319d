"""GPU kNN graphs (kernels/knn.py) and self-tuning σ against the float64 reference.

Fresh random data each run (the seed is in the report), every output buffer poisoned
with 0xFF bytes: an unwritten neighbour reads as padding and shows as a missing edge.
The grid search decides on the reference's float64 values and stops only when no
unvisited point can tie; the GEMM search re-checks its fp16 or TF32 candidates in float64 and
decides the rows its rounding bound leaves open from float64 products: both lists
equal the reference's exactly, ties included.
"""

from __future__ import annotations

import numpy as np
import pytest

from explorer import SpectralClustering
from explorer.graph import build_graph
from explorer.graph.reference import reference_csr, reference_knn
from explorer.graph.rule import EdgeRule
from explorer.metrics import adjusted_rand_score
from explorer.testing import assert_same_graph, assert_same_knn_graph, check_canonical, tricky_data

pytestmark = pytest.mark.gpu


def lists(X, k, method, cosine=False, **kw):
    import cupy
    from explorer.kernels.knn import knn_gemm, knn_grid

    Xd = cupy.asarray(X)
    if method == "grid":
        idx, val, info = knn_grid(Xd, k)
    else:
        idx, val, info = knn_gemm(Xd, k, cosine, **kw)
    return idx.get(), val.get(), info


@pytest.mark.parametrize("flavour", ["uniform", "blobs", "lattice", "duplicates", "offset"])
@pytest.mark.parametrize("d", [1, 2, 3, 5])
def test_grid_lists_equal_the_reference_exactly(poisoned, rng, flavour, d):
    n = int(rng.integers(200, 1500))
    X = tricky_data(rng, n, d, flavour)
    k = int(rng.integers(1, min(40, n - 1)))
    idx, val, _ = lists(X, k, "grid")
    ref_idx, ref_val = reference_knn(X, EdgeRule.from_args("uniform", graph="knn"), k)
    assert np.array_equal(idx, ref_idx)
    assert np.array_equal(val.view(np.uint64), ref_val.view(np.uint64))


@pytest.mark.parametrize("product", ["fp16", "tf32"])
@pytest.mark.parametrize("cosine", [False, True])
@pytest.mark.parametrize("flavour", ["uniform", "blobs", "lattice", "duplicates", "offset",
                                     "zeros"])
@pytest.mark.parametrize("d", [8, 40, 200, 784])
def test_gemm_lists_equal_the_reference_exactly(poisoned, rng, cosine, flavour, d, product):
    # Ties (lattice, duplicates) and cancellation (offset) included: rows the tile's
    # bound leaves open are decided again, so nothing is left to the rounding. Small
    # tiles now and then, so that several row blocks and re-decided blocks run.
    n = int(rng.integers(300, 2000 if d <= 200 else 700))  # the reference's time
    X = tricky_data(rng, n, d, flavour)
    k = int(rng.integers(1, 30))
    tile = int(rng.choice([1 << 30, 4 * n * int(rng.integers(32, 200))]))
    idx, val, info = lists(X, k, "gemm", cosine, tile_bytes=tile, product=product)
    assert info["product"] == product
    rule = EdgeRule.from_args("cosine" if cosine else "uniform", graph="knn")
    ref_idx, ref_val = reference_knn(X, rule, k)
    assert np.array_equal(idx, ref_idx)
    assert np.array_equal(val.view(np.uint64), ref_val.view(np.uint64))
    assert 0 <= info["rows_rechecked"] <= n


def test_fp16_operands_round_to_nearest_even(rng):
    # The fp16 tile's bound (kernels/gemm.py gemm_error_bound) takes each operand
    # within 2⁻¹¹ of itself plus 2⁻²⁵ (subnormals): CuPy's float32 → float16 cast must
    # round to nearest even, as NumPy's does, bit for bit (subnormals and ties included).
    import cupy

    v = np.concatenate([
        rng.uniform(-1, 1, 100_000), rng.uniform(-2**-13, 2**-13, 100_000),
        rng.uniform(-2**-24, 2**-24, 10_000),
        (rng.integers(-2**11, 2**11, 10_000) + 0.5) * 2.0**-11,  # ties at 2^-12 steps
    ]).astype(np.float32)
    got = cupy.asarray(v).astype(cupy.float16).get()
    assert np.array_equal(got.view(np.uint16), v.astype(np.float16).view(np.uint16))


@pytest.mark.parametrize("product", ["fp16", "tf32"])
@pytest.mark.parametrize("cosine", [False, True])
def test_gemm_decides_tied_rows_again(poisoned, rng, cosine, product):
    # Groups of 60 identical points, k = 10: the cut (the 28th candidate) ties the
    # 10th, so no row settles on the tile's pass; every row goes through the float64
    # products and the exact pass, whose lists are the reference's (lowest indices).
    groups = int(rng.integers(5, 15))
    centres = rng.standard_normal((groups, 64)).astype(np.float32)
    X = np.ascontiguousarray(centres[rng.permutation(np.repeat(np.arange(groups), 60))])
    idx, val, info = lists(X, 10, "gemm", cosine, product=product)
    assert info["rows_rechecked"] == X.shape[0]
    rule = EdgeRule.from_args("cosine" if cosine else "uniform", graph="knn")
    ref_idx, ref_val = reference_knn(X, rule, 10)
    assert np.array_equal(idx, ref_idx)
    assert np.array_equal(val.view(np.uint64), ref_val.view(np.uint64))


@pytest.mark.parametrize("product", ["fp16", "tf32"])
@pytest.mark.parametrize("cosine", [False, True])
@pytest.mark.parametrize("flavour", ["uniform", "blobs", "lattice", "offset", "zeros"])
def test_bound_and_lists_list_the_same_columns(poisoned, rng, cosine, flavour, product):
    # The bound-and-filter selection against the per-lane lists on the same tiles:
    # the same candidates, so the same lists, values and rows re-decided; sizes where
    # the sampled quarter of the columns and several tiles both matter.
    n = int(rng.integers(3000, 9000))
    d = int(rng.choice([7, 32, 100]))
    X = tricky_data(rng, n, d, flavour)
    k = int(rng.integers(1, 29))  # C = 2k + 8 <= 64
    tile = int(rng.choice([1 << 30, 4 * n * int(rng.integers(32, 300))]))
    a = lists(X, k, "gemm", cosine, tile_bytes=tile, select="bound", product=product)
    b = lists(X, k, "gemm", cosine, tile_bytes=tile, select="lists", product=product)
    assert a[2]["select"] == "bound" and b[2]["rows_listed"] == n
    assert np.array_equal(a[0], b[0])
    assert np.array_equal(a[1].view(np.uint64), b[1].view(np.uint64))
    assert a[2]["rows_rechecked"] == b[2]["rows_rechecked"]
    if flavour in ("lattice", "offset"):  # the reference once per flavour with ties
        rule = EdgeRule.from_args("cosine" if cosine else "uniform", graph="knn")
        ref_idx, ref_val = reference_knn(X, rule, k)
        assert np.array_equal(a[0], ref_idx)
        assert np.array_equal(a[1].view(np.uint64), ref_val.view(np.uint64))


def test_bound_leaves_rows_tied_past_its_buffer_to_the_lists(poisoned, rng):
    # Groups of 700 identical points: each row's C-th key ties 699 columns, more than
    # the filter's buffer holds, so every row is listed by the lists kernel instead,
    # and decided again in float64 (the cut ties the k-th): the reference's lists.
    centres = rng.standard_normal((8, 24)).astype(np.float32)
    X = np.ascontiguousarray(centres[rng.permutation(np.repeat(np.arange(8), 700))])
    idx, val, info = lists(X, 10, "gemm", select="bound")
    assert info["rows_listed"] == X.shape[0]
    ref_idx, ref_val = reference_knn(X, EdgeRule.from_args("uniform", graph="knn"), 10)
    assert np.array_equal(idx, ref_idx)
    assert np.array_equal(val.view(np.uint64), ref_val.view(np.uint64))


def test_gemm_settles_rows_beside_a_few_of_huge_norm(poisoned, rng):
    # Standardised data with rarely used features: a few rows of huge norm set the
    # largest norm M, and the M-bound alone left almost every row to the float64
    # re-decision; the norm-aware bound knows those rows are far from everyone else.
    n, d = int(rng.integers(1500, 2500)), 40
    X = rng.random((n, d))
    rare = rng.choice(n, n // 100, replace=False)
    X[rare, rng.integers(0, d, rare.size)] += 1000.0
    X = np.ascontiguousarray(X, dtype=np.float32)
    idx, val, info = lists(X, 10, "gemm")
    assert info["rows_rechecked"] < 0.05 * n
    ref_idx, ref_val = reference_knn(X, EdgeRule.from_args("uniform", graph="knn"), 10)
    assert np.array_equal(idx, ref_idx)
    assert np.array_equal(val.view(np.uint64), ref_val.view(np.uint64))


@pytest.mark.parametrize("product", ["fp16", "tf32"])
def test_gemm_settles_most_rows_of_digits_on_the_tile(poisoned, product):
    # The point of the tensor-core pass: on 784-d digits almost every row is settled
    # by its cut, and the lists are still the reference's.
    from explorer.data import load

    X = np.ascontiguousarray(load("infinite-digits", n_samples=1500, random_state=1).X,
                             dtype=np.float32)
    idx, val, info = lists(X, 10, "gemm", product=product)
    assert info["product"] == product
    assert info["rows_rechecked"] < 0.2 * X.shape[0]
    ref_idx, ref_val = reference_knn(X, EdgeRule.from_args("uniform", graph="knn"), 10)
    assert np.array_equal(idx, ref_idx)
    assert np.array_equal(val.view(np.uint64), ref_val.view(np.uint64))


@pytest.mark.parametrize("graph", ["knn", "mutual_knn"])
@pytest.mark.parametrize("flavour", ["uniform", "lattice", "duplicates", "offset", "zeros"])
def test_gpu_graphs_equal_the_reference(poisoned, rng, graph, flavour):
    for d, methods in ((2, ("grid", "gemm")), (6, ("grid", "gemm")), (50, ("gemm",))):
        n = int(rng.integers(200, 1200))
        X = tricky_data(rng, n, d, flavour)
        for metric, sigma in (("gaussian", 0.5), ("gaussian", "local"), ("cosine", None),
                              ("uniform", None)):
            rule = EdgeRule.from_args(metric, sigma, graph=graph,
                                      n_neighbors=int(rng.integers(1, 25)),
                                      local_neighbor=int(rng.integers(1, 12)))
            expected = reference_csr(X, rule)
            for method in methods:
                if method == "grid" and metric == "cosine":
                    continue
                g = build_graph(X, rule, method=method, backend="gpu")
                assert g.backend == "gpu" and g.method == method
                check_canonical(g.csr)
                assert_same_knn_graph(g.csr, expected, X, rule)


def test_knn_with_a_threshold_on_the_gpu(poisoned, rng):
    X = tricky_data(rng, 800, 2, "blobs")
    rule = EdgeRule.from_args("gaussian", 0.3, threshold_sqdist=0.05, graph="knn",
                              n_neighbors=12)
    for method in ("grid", "gemm"):
        g = build_graph(X, rule, method=method, backend="gpu")
        assert_same_knn_graph(g.csr, reference_csr(X, rule), X, rule)


@pytest.mark.parametrize("method", ["grid", "gemm", "csr1"])
def test_epsilon_graph_with_local_sigma_on_the_gpu(poisoned, rng, method):
    X = tricky_data(rng, 1000, 3, "duplicates")
    rule = EdgeRule.from_args("gaussian", "local", threshold_sqdist=0.02,
                              local_neighbor=int(rng.integers(1, 10)))
    g = build_graph(X, rule, method=method, backend="gpu")
    check_canonical(g.csr)
    assert_same_graph(g.csr, reference_csr(X, rule), X, rule)


def test_spectral_clustering_with_knn_on_the_gpu(poisoned):
    from explorer.data import load

    ds = load("moons", n_samples=20000, random_state=0)
    sc = SpectralClustering(2, affinity="knn", random_state=0,  # our kNN graph (scikit-
                            backend="gpu").fit(ds.X)  # learn's name is its connectivity)
    assert sc.graph_.method == "grid" and sc.sigma_ == "local"
    assert adjusted_rand_score(ds.y, sc.labels_.get() if hasattr(sc.labels_, "get")
                               else sc.labels_) > 0.99
