"""``method="grid"`` (kernels/grid.py): the uniform-grid builder against the float64 reference.

GPU tests (``-m gpu``) build graphs on fresh random data, on points placed exactly on
cell boundaries, with duplicates and pairs exactly at the threshold, for d = 1..8 and
both distance metrics, into output buffers poisoned with 0xFF bytes; every graph must
be canonical and equal the reference outside the rounding band. Different cell plans
(cell dimensions, a small table that wraps the grid onto a torus, both row sorts) must
give bit-identical matrices. The planner's tests run on the CPU.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from explorer.kernels.grid import MAX_CELL_DIMS, MAX_TABLE, plan_grid
from hypothesis import given
from hypothesis import strategies as st

from explorer.graph import EdgeRule
from explorer.graph._gpu_rule import kernel_rule  # the launchers' Rule; no CuPy import
from explorer.graph.reference import reference_csr
from explorer.testing import assert_same_graph, check_canonical


def threshold_for_degree(X, degree, rng):
    """A squared-distance cutoff giving about `degree` neighbours per point."""
    n = X.shape[0]
    i = rng.integers(0, n, 20000)
    j = rng.integers(0, n, 20000)
    d2 = ((X[i].astype(np.float64) - X[j]) ** 2).sum(axis=1)
    return float(np.quantile(d2[i != j], min(0.5, degree / n)))


def clustered(rng, n, d, offset=0.0):
    """Gaussian blobs of random widths plus uniform noise, shifted by `offset`."""
    k = int(rng.integers(2, 6))
    centres = rng.uniform(-1, 1, (k, d))
    widths = rng.uniform(0.02, 0.3, k)
    lab = rng.integers(0, k, n)
    X = centres[lab] + rng.standard_normal((n, d)) * widths[lab, None]
    noise = rng.random(n) < 0.1
    X[noise] = rng.uniform(-1.5, 1.5, (int(noise.sum()), d))
    return (X + offset).astype(np.float32)


def build(X, params, **options):
    import cupy
    from explorer.kernels.grid import build_grid

    csr, timings, info = build_grid(cupy.asarray(X), kernel_rule(params), **options)
    return csr, timings, info


def check(X, params, **options):
    csr, timings, info = build(X, params, **options)
    check_canonical(csr)
    assert_same_graph(csr, reference_csr(X, params), X, params)
    return csr, timings, info


def same_matrix(a, b):
    assert a.shape == b.shape
    assert a.indptr.dtype == b.indptr.dtype
    assert bool((a.indptr == b.indptr).all())
    assert bool((a.indices == b.indices).all())
    assert bool((a.data == b.data).all())


# --- GPU: against the reference ---------------------------------------------------


@pytest.mark.gpu
@pytest.mark.parametrize("d", range(1, 9))
@pytest.mark.parametrize("metric", ["gaussian", "uniform"])
def test_random_clusters_every_dimension(poisoned, rng, d, metric):
    n = int(rng.integers(500, 2500))
    offset = float(rng.choice([0.0, 1000.0]))  # far from 0: cells hold large coordinates
    X = clustered(rng, n, d, offset)
    t = threshold_for_degree(X, float(rng.uniform(5, 40)), rng)
    params = EdgeRule.from_args(metric, sigma=math.sqrt(t) if metric == "gaussian" else None,
                                   threshold_sqdist=t)
    csr, timings, info = check(X, params)
    assert csr.nnz > 0
    assert {"bbox", "bin", "count", "scan", "fill", "sort"} <= set(timings)
    assert info["nnz"] == csr.nnz


@pytest.mark.gpu
@pytest.mark.parametrize("d", [1, 2, 3, 4, 5, 8])
@pytest.mark.parametrize("n", [1, 2, 255, 257, 1_000_003])
def test_bounding_box_equals_numpy(poisoned, rng, d, n):
    import cupy
    from explorer.kernels.grid import _bounding_box

    X = (rng.standard_normal((n, d)) * rng.uniform(0.1, 100, d) + rng.uniform(-50, 50, d))
    X = X.astype(np.float32)
    # Extremes at the first and last rows too (the ends of the strided walk).
    X[0, 0], X[-1, -1] = -1e6, 1e6
    box = _bounding_box(cupy.asarray(X))
    assert box.dtype == np.float64 and box.shape == (2, d)
    np.testing.assert_array_equal(box, np.stack([X.min(axis=0), X.max(axis=0)]))


@pytest.mark.gpu
@pytest.mark.parametrize("d", [1, 2, 3, 4, 6])
def test_points_on_cell_boundaries_and_ties(poisoned, rng, d):
    """A lattice of step ε/2 (ε a power of two): many pairs exactly at distance ε,
    points exactly on multiples of ε, cell sides within 1e-4 of them."""
    eps = 2.0**-4
    n = int(rng.integers(300, 1500))
    X = (rng.integers(-12, 12, (n, d)) * (eps / 2)).astype(np.float32)
    for t in (eps * eps, 1.5 * eps * eps, 4.0 * eps * eps):  # ties at t, and at 4t
        params = EdgeRule.from_args("uniform", threshold_sqdist=t)
        check(X, params)


@pytest.mark.gpu
def test_duplicates_and_isolated_points(poisoned, rng):
    base = rng.random((400, 3)).astype(np.float32)
    X = np.repeat(base, rng.integers(1, 5, 400), axis=0)
    X = X[rng.permutation(X.shape[0])]
    params = EdgeRule.from_args("gaussian", sigma=0.05, threshold_sqdist=1e-7)
    csr, _, _ = check(X, params)
    host = csr.get()
    dup = np.unique(X, axis=0, return_counts=True)[1]
    assert host.nnz == int((dup * (dup - 1)).sum())  # only the copies are that close
    assert np.all(host.data == 1.0)  # distance 0: weight exp(0)


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["float64", "float32", "sim"])
def test_pairs_exactly_at_the_threshold(poisoned, rng, kind):
    """The cutoff is the squared distance of chosen pairs: the builder may decide those
    either way only if they sit inside the rounding band (assert_same_graph checks)."""
    n, d = 800, int(rng.integers(1, 9))
    X = rng.random((n, d)).astype(np.float32)
    X[1] = X[0] + np.float32(0.01)
    d2 = float(((X[0].astype(np.float64) - X[1]) ** 2).sum())
    if kind == "sim":
        sigma = 0.02
        params = EdgeRule.from_args("gaussian", sigma=sigma,
                                       threshold_sim=math.exp(-d2 / (2 * sigma**2)))
    else:
        t = d2 if kind == "float64" else float(np.float32(d2))
        params = EdgeRule.from_args("gaussian", sigma=0.02, threshold_sqdist=t)
    check(X, params)


@pytest.mark.gpu
@pytest.mark.parametrize("close", [True, False])
def test_two_points(poisoned, close):
    X = np.array([[0.0, 0.0], [0.1, 0.0]], dtype=np.float32)
    params = EdgeRule.from_args("uniform", threshold_sqdist=0.02 if close else 0.005)
    csr, _, _ = check(X, params)
    assert csr.nnz == (2 if close else 0)


@pytest.mark.gpu
def test_all_points_in_one_cell_and_empty_graph(poisoned, rng):
    X = (rng.random((300, 2)) * 0.01).astype(np.float32)
    check(X, EdgeRule.from_args("uniform", threshold_sqdist=1.0))  # complete graph
    csr, _, _ = check(X, EdgeRule.from_args("uniform", threshold_sqdist=1e-30))
    assert csr.nnz == 0


@pytest.mark.gpu
def test_plans_and_row_sorts_give_identical_matrices(poisoned, rng):
    """Cell dimensions, a wrapped torus (aliased cells) and both row sorts change the
    work, never the result: same pairs, same float32 arithmetic, same bits."""
    d = int(rng.integers(2, 7))
    X = clustered(rng, int(rng.integers(1500, 3000)), d)
    t = threshold_for_degree(X, 30.0, rng)
    params = EdgeRule.from_args("gaussian", sigma=0.1, threshold_sqdist=t)
    ref, _, _ = check(X, params)
    wrapped = 0
    for dc in range(1, min(d, MAX_CELL_DIMS) + 1):
        for table in (None, 27, 200):
            csr, _, info = build(X, params, cell_dims=dc, table_size=table)
            assert info["cell_dims"] == dc
            wrapped += info["wrapped"]
            same_matrix(csr, ref)
    assert wrapped > 0
    for how in ("rank", "global"):
        csr, _, info = build(X, params, row_sort=how)
        assert info["row_sort"] == how
        same_matrix(csr, ref)


@pytest.mark.gpu
def test_same_pattern_as_csr_kernels(rng):
    """grid and the paper's CSR-1 share the float32 squared distance bit for bit."""
    import cupy

    from explorer.graph.gpu import build_gpu

    X = clustered(rng, 2000, 4)
    t = threshold_for_degree(X, 25.0, rng)
    params = EdgeRule.from_args("gaussian", sigma=0.05, threshold_sqdist=t)
    grid, _, _ = build(X, params)
    csr1, _, _ = build_gpu(cupy.asarray(X), params, "csr1")
    assert bool((grid.indptr == csr1.indptr).all())
    assert bool((grid.indices == csr1.indices).all())
    assert bool(cupy.allclose(grid.data, csr1.data, rtol=2e-6, atol=0))


@pytest.mark.gpu
@pytest.mark.parametrize("metric", ["gaussian", "uniform"])
def test_count_rows_matches_the_graph(poisoned, rng, metric):
    import cupy
    from explorer.kernels.grid import count_rows_grid

    d = int(rng.integers(1, 9))
    X = clustered(rng, 1500, d)
    t = threshold_for_degree(X, 20.0, rng)
    params = EdgeRule.from_args(metric, sigma=0.1 if metric == "gaussian" else None,
                                   threshold_sqdist=t)
    graph = check(X, params)[0].get()  # equal to the reference outside the band
    Xd = cupy.asarray(X)
    counts = count_rows_grid(Xd, kernel_rule(params))
    assert counts.dtype == cupy.int32
    np.testing.assert_array_equal(counts.get(), np.diff(graph.indptr))  # same arithmetic
    rows = rng.choice(1500, 200, replace=True)
    sub, deg = count_rows_grid(Xd, kernel_rule(params), rows, degrees=True)
    np.testing.assert_array_equal(sub.get(), counts.get()[rows])
    sums = np.asarray(graph.astype(np.float64).sum(axis=1)).ravel()
    np.testing.assert_allclose(deg.get(), sums[rows], rtol=1e-6, atol=0)


@pytest.mark.gpu
def test_rejects_what_it_cannot_build():
    import cupy
    from explorer.kernels.grid import build_grid, count_rows_grid

    X = cupy.zeros((10, 3), dtype=cupy.float32)
    dist = kernel_rule(EdgeRule.from_args("uniform", threshold_sqdist=0.1))
    with pytest.raises(ValueError, match="distance rules"):
        build_grid(X, kernel_rule(EdgeRule.from_args("cosine", threshold_sim=0.5)))
    with pytest.raises(ValueError, match="d <= 16"):
        build_grid(cupy.zeros((10, 17), dtype=cupy.float32), dist)
    with pytest.raises(TypeError, match="cupy.ndarray"):
        build_grid(np.zeros((10, 3), dtype=np.float32), dist)
    with pytest.raises(TypeError, match="float32"):
        build_grid(cupy.zeros((10, 3)), dist)
    with pytest.raises(ValueError, match="cell_dims"):
        build_grid(X, dist, cell_dims=4)
    with pytest.raises(ValueError, match="row_sort"):
        build_grid(X, dist, row_sort="bubble")
    with pytest.raises(ValueError, match=r"rows must lie in \[0, 10\)"):
        count_rows_grid(X, dist, [0, 10])


# --- CPU: the planner --------------------------------------------------------------


@given(
    d=st.integers(1, 8),
    n=st.integers(2, 10**7),
    log_t=st.floats(-12, 2),
    extents=st.lists(st.floats(0.0, 1e6), min_size=8, max_size=8),
    table=st.one_of(st.none(), st.integers(1, 10**6)),
)
def test_plan_is_a_consistent_torus(d, n, log_t, extents, table):
    lo = np.zeros(d)
    hi = np.array(extents[:d])
    t = 10.0**log_t
    plan = plan_grid(lo, hi, n, t, table_size=table)
    dc = plan.cell_dims
    assert 1 <= dc <= min(d, MAX_CELL_DIMS)
    assert len(set(plan.dims)) == dc
    for side, cells, m, k in zip(plan.side, plan.cells, plan.torus, plan.dims, strict=True):
        assert side >= math.sqrt(t)  # neighbours within one cell
        assert cells == math.floor(hi[k] / side) + 1
        assert 1 <= m <= cells
        assert m == cells or m >= 3  # a wrapped dimension keeps 3 distinct neighbours
    assert plan.stride[-1] == 1
    for k in range(dc - 1):
        assert plan.stride[k] == plan.stride[k + 1] * plan.torus[k + 1]
    assert plan.table_size <= MAX_TABLE
    assert plan.cells[-1] == max(plan.cells)  # the innermost dimension is the widest
    gd, gi = plan.arrays()
    assert gd.shape == (2 * MAX_CELL_DIMS,) and gi.shape == (4 * MAX_CELL_DIMS,)


def test_plan_for_the_papers_synthetic_shape():
    """Syn1M: 36 cells of side ε per feature fit a table of 2n, all four are used."""
    plan = plan_grid(np.zeros(4), np.ones(4), 10**6, 0.0008)
    assert plan.cell_dims == 4
    assert plan.cells == (36, 36, 36, 36)
    assert not plan.wrapped
    forced = plan_grid(np.zeros(4), np.ones(4), 10**6, 0.0008, cell_dims=2, table_size=100)
    assert forced.cell_dims == 2 and forced.wrapped and forced.table_size <= 100


def test_cell_coordinates_keep_neighbours_adjacent(rng):
    """The kernel's cell coordinate, floor((x - lo) / side) in double on float32 data,
    differs by at most one cell for every pair a float32 test can accept."""
    t = float(rng.uniform(1e-6, 1e-2))
    eps = math.sqrt(t)
    x = rng.uniform(-1e3, 1e3, 100000).astype(np.float32)
    # partners a hair under ε away, as far as float32 rounding allows
    y = (x.astype(np.float64) + eps * (1 + 4e-7) * rng.choice([-1, 1], x.size)).astype(np.float32)
    lo = float(min(x.min(), y.min()))
    plan = plan_grid(np.array([lo]), np.array([float(max(x.max(), y.max()))]), x.size, t)
    inv = 1.0 / plan.side[0]
    cx = np.floor((x.astype(np.float64) - lo) * inv)
    cy = np.floor((y.astype(np.float64) - lo) * inv)
    close = (x.astype(np.float64) - y) ** 2 <= t * (1 + 1e-6)
    assert close.sum() > 0
    assert np.abs(cx - cy)[close].max() <= 1


# --- GPU: row blocks (the distributed build's) ----------------------------------------


def row_splits(n, rng):
    """Block boundaries with an empty block, blocks of one row, the last row alone and
    random cuts."""
    cuts = sorted(int(c) for c in rng.integers(2, n - 2, 3))
    return [
        [0, n],
        [0, 0, 1, n // 2, n // 2 + 1, n],
        [0, *cuts, n - 1, n],
        [0, 1, 2, n, n],
    ]


def check_row_blocks(X, params, method, splits):
    """The row blocks built on the GPU, stacked, are the whole GPU graph of `method`
    exactly, canonical, and the float64 reference outside the band."""
    import cupy
    import scipy.sparse as sp

    from explorer.graph import build_graph
    from explorer.graph.gpu import build_rows_gpu
    from explorer.testing import check_row_block

    n = X.shape[0]
    whole = build_graph(X, params, method=method, backend="gpu").csr.get()
    Xd = cupy.asarray(X)
    parts = []
    for r0, r1 in zip(splits[:-1], splits[1:], strict=True):
        block, _, info = build_rows_gpu(Xd, params, r0, r1, method)
        assert block.shape == (r1 - r0, n)
        assert info["rows"] == (r0, r1)
        check_row_block(block, r0, n)
        parts.append(block.get())
    stacked = sp.vstack([p for p in parts if p.shape[0]], format="csr")
    assert stacked.shape == whole.shape
    assert np.array_equal(stacked.indptr, whole.indptr)
    assert np.array_equal(stacked.indices, whole.indices)
    assert np.array_equal(stacked.data, whole.data)  # bit for bit, explicit zeros too
    check_canonical(stacked)
    assert_same_graph(stacked, reference_csr(X, params), X, params)


@pytest.mark.gpu
@pytest.mark.parametrize("d", [1, 2, 4, 8])
@pytest.mark.parametrize("metric", ["gaussian", "uniform"])
def test_row_blocks_stack_to_the_whole_graph(poisoned, rng, d, metric):
    X = clustered(rng, 1500, d)
    t = threshold_for_degree(X, 20, rng)
    params = (EdgeRule.from_args("gaussian", sigma=math.sqrt(t), threshold_sqdist=t)
              if metric == "gaussian" else EdgeRule.from_args("uniform", threshold_sqdist=t))
    for splits in row_splits(X.shape[0], rng):
        check_row_blocks(X, params, "grid", splits)


@pytest.mark.gpu
def test_row_blocks_edge_cases(poisoned, rng):
    """No edge at all, a complete graph, and the global row sort on a block."""
    import cupy
    from explorer.kernels.grid import build_grid_rows

    X = clustered(rng, 300, 3)
    for t in (1e-30, 100.0):
        check_row_blocks(X, EdgeRule.from_args("uniform", threshold_sqdist=t), "grid",
                         [0, 0, 1, 150, 300])
    params = EdgeRule.from_args("uniform", threshold_sqdist=threshold_for_degree(X, 30, rng))
    whole = build(X, params)[0].get()
    rank, _, a = build_grid_rows(cupy.asarray(X), kernel_rule(params), 50, 220, row_sort="rank")
    glob, _, b = build_grid_rows(cupy.asarray(X), kernel_rule(params), 50, 220,
                                 row_sort="global")
    assert (a["row_sort"], b["row_sort"]) == ("rank", "global")
    for m in (rank.get(), glob.get()):
        assert np.array_equal(m.indptr, whole[50:220].indptr)
        assert np.array_equal(m.indices, whole[50:220].indices)
        assert np.array_equal(m.data, whole[50:220].data)


@pytest.mark.gpu
def test_row_range_is_checked():
    import cupy
    from explorer.kernels.grid import build_grid_rows

    X = cupy.zeros((10, 2), dtype=cupy.float32)
    rule = kernel_rule(EdgeRule.from_args("uniform", threshold_sqdist=1.0))
    for r0, r1 in ((-1, 3), (4, 3), (0, 11)):
        with pytest.raises(ValueError, match="0 <= r0 <= r1 <= n=10"):
            build_grid_rows(X, rule, r0, r1)
    with pytest.raises(TypeError, match="r1 must be an integer"):
        build_grid_rows(X, rule, 0, 2.0)
