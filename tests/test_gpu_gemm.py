"""``method="gemm"`` (kernels/gemm.py): tensor-core screening plus exact re-check.

GPU tests (``-m gpu``) compare with the float64 reference on MNIST-shaped digits
(d = 784) and on small d, for every metric and both threshold kinds, with zero
vectors, duplicates, pairs exactly at the threshold, many tiles of odd sizes, a COO
list sized too small (the re-run path), n = 2, and output buffers poisoned with 0xFF.
The error bound the screen relies on is checked on the CPU against an emulation of
fp16 rounding, and on the GPU against cuBLAS's own tiles.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from explorer.data import load
from explorer.kernels import gemm as kgemm

from explorer.graph import EdgeRule
from explorer.graph._gpu_rule import kernel_rule  # the launchers' Rule; no CuPy import
from explorer.graph.reference import reference_csr
from explorer.testing import assert_same_graph, check_canonical


@pytest.fixture(scope="module")
def digits():
    """MNIST-shaped data (784 features in [0, 1]), with a zero row and a duplicate."""
    X = load("infinite-digits", n_samples=700, random_state=11).X.copy()
    X[5] = 0.0
    X[9] = X[3]
    return X


def build(X, params, **options):
    import cupy

    return kgemm.build_gemm(cupy.asarray(X), kernel_rule(params), **options)


def check(X, params, **options):
    csr, timings, info = build(X, params, **options)
    check_canonical(csr)
    assert_same_graph(csr, reference_csr(X, params), X, params)
    return csr, timings, info


def params_of(kind, X, rng):
    """A rule of each kind, with a threshold giving a sparse but non-empty graph."""
    if kind == "cosine":
        return EdgeRule.from_args("cosine", threshold_sim=float(rng.uniform(0.75, 0.9)))
    n = X.shape[0]
    i, j = rng.integers(0, n, (2, 5000))
    d2 = ((X[i].astype(np.float64) - X[j]) ** 2).sum(axis=1)
    t = float(np.quantile(d2[i != j], 0.03))
    sigma = math.sqrt(t) / 2
    if kind == "gaussian":
        return EdgeRule.from_args("gaussian", sigma=sigma, threshold_sqdist=t)
    if kind == "gaussian-sim":
        return EdgeRule.from_args("gaussian", sigma=sigma,
                                     threshold_sim=math.exp(-t / (2 * sigma**2)))
    return EdgeRule.from_args("uniform", threshold_sqdist=t)


KINDS = ["cosine", "gaussian", "gaussian-sim", "uniform"]


@pytest.mark.gpu
@pytest.mark.parametrize("kind", KINDS)
def test_mnist_shaped_digits(poisoned, digits, rng, kind):
    params = params_of(kind, digits, rng)
    csr, timings, info = check(digits, params, tile_rows=int(rng.integers(100, 300)))
    assert csr.nnz > 0
    assert info["tiles"] >= 3
    assert info["pairs_checked"] >= csr.nnz // 2
    assert {"prepare", "estimate", "gemm", "screen", "assemble", "sort"} <= set(timings)
    host = csr.get()
    if kind == "cosine":
        assert host[5].nnz == 0  # the zero vector
        assert host[3, 9] == pytest.approx(1.0)  # the duplicate


@pytest.mark.gpu
@pytest.mark.parametrize("d", [1, 2, 3, 5, 17, 40])
@pytest.mark.parametrize("kind", KINDS)
def test_small_dimensions(poisoned, rng, d, kind):
    n = int(rng.integers(300, 900))
    k = int(rng.integers(2, 6))
    centres = rng.uniform(-1, 1, (k, d)) + float(rng.choice([0.0, 50.0]))
    X = (centres[rng.integers(0, k, n)] + 0.2 * rng.standard_normal((n, d))).astype(np.float32)
    check(X, params_of(kind, X, rng))


@pytest.mark.gpu
def test_negative_cosine_threshold_and_zero_vectors(poisoned, rng):
    """A dense graph (most pairs have cos > -0.3), zero rows without a single edge.

    Here many edges have cosines near 0, where a float32 dot product (any float32
    builder's) is exact only to an absolute ``(d + 10) 2^-24`` (docs/fast-builders.md),
    not to 1e-5 relative: the values are compared with that absolute tolerance.
    """
    d = 24
    X = rng.standard_normal((400, d)).astype(np.float32)
    X[rng.choice(400, 7, replace=False)] = 0.0
    params = EdgeRule.from_args("cosine", threshold_sim=-0.3)
    csr, _, _ = build(X, params)
    check_canonical(csr)
    assert_same_graph(csr, reference_csr(X, params), X, params, atol=(d + 10) * 2.0**-24)
    zero = np.flatnonzero(~X.any(axis=1))
    assert np.all(np.diff(csr.get().indptr)[zero] == 0)


@pytest.mark.gpu
def test_pairs_exactly_at_the_threshold(poisoned, rng):
    """cos((3, 4), (4, 3)) = 0.96 and dyadic lattices at distance exactly √t."""
    X = rng.random((300, 2)).astype(np.float32)
    X[0], X[1] = (3.0, 4.0), (4.0, 3.0)
    check(X, EdgeRule.from_args("cosine", threshold_sim=0.96))
    L = (rng.integers(-8, 8, (500, 3)) * 0.125).astype(np.float32)
    for t in (0.015625, 0.03125, 0.0625):
        check(L, EdgeRule.from_args("uniform", threshold_sqdist=t))
        check(L, EdgeRule.from_args("gaussian", sigma=0.1, threshold_sqdist=t))


@pytest.mark.gpu
@pytest.mark.parametrize("kind", KINDS)
def test_two_points(poisoned, kind):
    X = np.array([[1.0, 0.0, 0.5], [0.9, 0.1, 0.5]], dtype=np.float32)
    params = {
        "cosine": EdgeRule.from_args("cosine", threshold_sim=0.9),
        "gaussian": EdgeRule.from_args("gaussian", sigma=0.1, threshold_sqdist=0.05),
        "gaussian-sim": EdgeRule.from_args("gaussian", sigma=0.1, threshold_sim=0.1),
        "uniform": EdgeRule.from_args("uniform", threshold_sqdist=0.05),
    }[kind]
    csr, _, _ = check(X, params)
    assert csr.nnz == 2


@pytest.mark.gpu
def test_short_coo_list_reruns(poisoned, digits, rng, monkeypatch):
    """An estimate below the real count costs a second pass, never an edge."""
    monkeypatch.setattr(kgemm, "CAP_MARGIN", 0.2)
    monkeypatch.setattr(kgemm, "CAP_SLACK", 0)
    params = params_of("cosine", digits, rng)
    csr, _, info = check(digits, params, tile_rows=64)
    assert info["coo_rerun"]


@pytest.mark.gpu
def test_row_sorts_and_tiles_give_identical_matrices(poisoned, digits, rng):
    params = params_of("gaussian", digits, rng)
    ref, _, info = check(digits, params)
    assert info["tiles"] == 1
    for options in ({"tile_rows": 1}, {"tile_rows": 77, "row_sort": "global"},
                    {"tile_bytes": 40000, "row_sort": "rank"}):
        csr, _, _ = build(digits, params, **options)
        assert bool((csr.indptr == ref.indptr).all())
        assert bool((csr.indices == ref.indices).all())
        assert bool((csr.data == ref.data).all())


@pytest.mark.gpu
def test_refuses_a_graph_that_cannot_fit(digits, monkeypatch):
    monkeypatch.setattr(kgemm, "SAMPLE_ROWS", 16)
    monkeypatch.setattr(kgemm, "BYTES_PER_NNZ", 2**50)
    with pytest.raises(ValueError, match="estimated nnz"):
        build(digits, EdgeRule.from_args("cosine", threshold_sim=0.5))


@pytest.mark.gpu
def test_rejects_bad_input():
    import cupy

    params = kernel_rule(EdgeRule.from_args("cosine", threshold_sim=0.5))
    with pytest.raises(TypeError, match="cupy.ndarray"):
        kgemm.build_gemm(np.ones((4, 3), dtype=np.float32), params)
    with pytest.raises(ValueError, match="C-contiguous"):
        kgemm.build_gemm(cupy.ones((3, 4), dtype=cupy.float32).T, params)
    with pytest.raises(ValueError, match="tile_rows"):
        kgemm.build_gemm(cupy.ones((4, 3), dtype=cupy.float32), params, tile_rows=0)


@pytest.mark.gpu
def test_tiles_obey_the_error_bound(rng):
    """cuBLAS's fp16 tiles differ from the exact products of the scaled rows by no more
    than the bound the screen assumes (measured slack reported on failure)."""
    import cupy

    X = load("infinite-digits", n_samples=512, random_state=int(rng.integers(1000))).X
    Xd = cupy.asarray(X)
    for kind in ("cosine", "gaussian"):
        params = params_of(kind, X, rng)
        H, nrm, rnrm, scale = kgemm._prepare(Xd, kernel_rule(params))
        C = cupy.empty((512, 512), dtype=cupy.float16)
        gemm = kgemm.TileGemm()
        try:
            gemm.tile(H, H, C, 512)
        finally:
            gemm.close()
        x64 = X.astype(np.float64)
        if kind == "cosine":
            norms = np.sqrt((x64**2).sum(axis=1))
            Y = x64 / np.where(norms > 0, norms, 1.0)[:, None]
        else:
            Y = (x64 - x64.mean(axis=0)) * scale
        exact = Y @ Y.T
        r = np.sqrt((Y**2).sum(axis=1))
        a, b, c = kgemm.gemm_error_bound(X.shape[1], H.shape[1])
        bound = a * np.outer(r, r) + b * (r[:, None] + r[None, :]) + c
        err = np.abs(C.get().astype(np.float64) - exact)
        assert np.all(err <= bound), f"worst error / bound {np.max(err / bound):.3g}"


def test_error_bound_covers_emulated_fp16_products(rng):
    """CPU: exact products of fp16-rounded unit rows, rounded to fp16, stay inside the
    bound (the accumulation term is then pure slack)."""
    d = 784
    Y = np.abs(rng.standard_normal((64, d))) * (rng.random((64, d)) < 0.2)
    Y /= np.sqrt((Y**2).sum(axis=1))[:, None]
    Hh = Y.astype(np.float16).astype(np.float64)
    tile = (Hh @ Hh.T).astype(np.float16).astype(np.float64)
    a, b, c = kgemm.gemm_error_bound(d, d)
    assert np.max(np.abs(tile - Y @ Y.T)) <= a + 2 * b + c
    # and the bound is not vacuous: about a thousandth, the width of the screen's band
    assert 1e-3 < a + 2 * b + c < 3e-3


# --- GPU: row blocks (the distributed build's) ----------------------------------------


def check_row_blocks(X, params, splits, **options):
    """The GEMM row blocks, stacked, are the whole GEMM graph exactly, canonical, and
    the float64 reference outside the band."""
    import cupy
    import scipy.sparse as sp

    from explorer.graph import build_graph
    from explorer.testing import check_row_block

    n = X.shape[0]
    whole = build_graph(X, params, method="gemm", backend="gpu").csr.get()
    Xd = cupy.asarray(X)
    parts = []
    for r0, r1 in zip(splits[:-1], splits[1:], strict=True):
        block, _, info = kgemm.build_gemm_rows(Xd, kernel_rule(params), r0, r1, **options)
        assert block.shape == (r1 - r0, n) and info["rows"] == (r0, r1)
        check_row_block(block, r0, n)
        parts.append(block.get())
    stacked = sp.vstack([p for p in parts if p.shape[0]], format="csr")
    assert stacked.shape == whole.shape
    assert np.array_equal(stacked.indptr, whole.indptr)
    assert np.array_equal(stacked.indices, whole.indices)
    assert np.array_equal(stacked.data, whole.data)  # bit for bit
    check_canonical(stacked)
    assert_same_graph(stacked, reference_csr(X, params), X, params)


def gemm_splits(n, rng):
    cuts = sorted(int(c) for c in rng.integers(2, n - 2, 3))
    return [[0, n], [0, 0, 1, n // 2, n // 2 + 1, n], [0, *cuts, n - 1, n]]


@pytest.mark.gpu
@pytest.mark.parametrize("kind", KINDS)
def test_row_blocks_stack_to_the_whole_graph(poisoned, digits, rng, kind):
    params = params_of(kind, digits, rng)
    for splits in gemm_splits(digits.shape[0], rng):
        check_row_blocks(digits, params, splits)


@pytest.mark.gpu
def test_row_blocks_many_tiles_and_small_d(poisoned, rng):
    """Tiles of odd sizes within a block (tile_rows=37), and d = 3 (one fp16 row)."""
    X = rng.standard_normal((500, 3)).astype(np.float32)
    X[7] = X[8]  # a duplicate
    for kind in KINDS:
        params = params_of(kind, X, rng)
        check_row_blocks(X, params, [0, 0, 1, 230, 499, 500], tile_rows=37)


@pytest.mark.gpu
def test_row_blocks_coo_rerun(poisoned, digits, rng, monkeypatch):
    """A COO list sized too small for the block is re-run with the exact size."""
    params = params_of("cosine", digits, rng)
    monkeypatch.setattr(kgemm, "CAP_MARGIN", 0.0)
    monkeypatch.setattr(kgemm, "CAP_SLACK", 0)
    monkeypatch.setattr(kgemm, "SAMPLE_ROWS", 2)
    check_row_blocks(digits, params, [0, 300, 700])
