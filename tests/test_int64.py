"""int64 indices end to end on the CPU: statistics, embedding, clustering and the NPZ export.

SciPy narrows int64 index arrays to int32 whenever a constructor sees values that fit
(``astype``, ``copy``, ``transpose``, ``sum_duplicates``, ``load_npz`` all do), so a
small graph only carries int64 indices if they are assigned after construction, as
:func:`widen` does. Each test runs the same graph with int32 and with int64 indices:
the results must be the same bits, and the matrices the stages hand on must still
hold int64 indices (checked by spies on the stages), so that the >= 2**31-nonzero
path, where int64 is the only choice, is the path these tests run.
"""

from __future__ import annotations

import io
from types import SimpleNamespace

import numpy as np
import pytest
import scipy.sparse as sp

import explorer.pipeline.runners
from explorer import SpectralClustering, _csr, build_graph
from explorer._backend import array_module
from explorer._csr import cast_values, csr_from_arrays, with_values
from explorer.embedding import isolated_vertices, laplacian, spectral_embedding
from explorer.embedding.chebyshev import ChebyshevBlock
from explorer.graph import csr_stats
from explorer.graph._stats import csr_bytes, stats_from_counts
from explorer.ui._export import graph_npz, map_graph_npz, save_graph_npz

# ------------------------------------------------------------------------- helpers


def widen(csr):
    """A copy of a SciPy or cupyx CSR matrix whose indices and row offsets are int64
    (assigned: a constructor would narrow them back to int32 while the values fit)."""
    xp = array_module(csr.data)
    out = csr_from_arrays(csr.data.copy(), csr.indices.astype(xp.int64),
                          csr.indptr.astype(xp.int64), csr.shape, canonical=True)
    assert out.indices.dtype == out.indptr.dtype == xp.int64
    return out


def clustered_points(rng, sizes=(150, 120, 130), n_isolated=4):
    """Separated 2-D boxes of points (one component each at the radius below) and
    far-away isolated points, shuffled; float32."""
    parts = [np.array([20.0 * i, 0.0]) + rng.random((s, 2)) * 2.0 for i, s in enumerate(sizes)]
    far = 1e4 + 1e3 * np.arange(n_isolated)[:, None] * np.ones((1, 2))
    X = np.vstack([*parts, far]).astype(np.float32)
    y = np.concatenate([np.full(s, i) for i, s in enumerate(sizes)] + [np.full(n_isolated, -1)])
    order = rng.permutation(X.shape[0])
    return X[order], y[order]


RULE = {"metric": "gaussian", "sigma": 0.6, "threshold_sqdist": 0.36}


@pytest.fixture
def graph(rng):
    """(int32 CSR, its int64 twin, labels) of a 3-component graph with isolated points."""
    X, y = clustered_points(rng)
    csr = build_graph(X, **RULE, backend="cpu").csr
    assert csr.indices.dtype == np.int32
    return csr, widen(csr), y


@pytest.fixture
def spy_dtypes(monkeypatch):
    """Record the index dtypes of the matrices the embedding stages hand on."""
    seen = []

    def spy(name, fn):
        def wrapper(*args, **kwargs):
            out = fn(*args, **kwargs)
            seen.append((name, out.indices.dtype, out.indptr.dtype))
            return out

        monkeypatch.setattr(laplacian, name, wrapper)

    spy("submatrix", laplacian.submatrix)
    spy("scale_symmetric", laplacian.scale_symmetric)
    block_init = ChebyshevBlock.__init__

    def init(self, A, *args, **kwargs):
        block_init(self, A, *args, **kwargs)
        seen.append(("ChebyshevBlock.A", self.A.indices.dtype, self.A.indptr.dtype))
        seen.append(("ChebyshevBlock.A64", self.A64.indices.dtype, self.A64.indptr.dtype))

    monkeypatch.setattr(ChebyshevBlock, "__init__", init)
    return seen


def assert_same_embedding(a, b):
    np.testing.assert_array_equal(a.eigenvalues, b.eigenvalues)
    np.testing.assert_array_equal(a.vectors, b.vectors)  # NaN rows compare equal
    np.testing.assert_array_equal(a.embedding, b.embedding)
    np.testing.assert_array_equal(a.isolated, b.isolated)
    np.testing.assert_array_equal(a.residual_norms, b.residual_norms)
    assert (a.solver, a.iterations) == (b.solver, b.iterations)


# -------------------------------------------------------- shared-index CSR helpers


def test_value_helpers_share_the_int64_index_arrays(graph):
    _, csr, _ = graph
    wide = with_values(csr, csr.data.astype(np.float64))
    assert wide.dtype == np.float64 and wide.indices is csr.indices and wide.indptr is csr.indptr
    assert wide.has_canonical_format
    np.testing.assert_array_equal((wide @ np.ones(csr.shape[0])),
                                  csr.astype(np.float64) @ np.ones(csr.shape[0]))
    assert cast_values(csr, np.float32) is csr
    narrow = cast_values(wide, np.float32)
    assert narrow.indices is csr.indices and narrow.dtype == np.float32
    with pytest.raises(ValueError, match="one value per stored entry"):
        with_values(csr, csr.data[:-1])
    built = csr_from_arrays(csr.data, csr.indices, csr.indptr, csr.shape, canonical=True)
    assert built.indices is csr.indices and built.nnz == csr.nnz


# ----------------------------------------------------------------------- statistics


def test_graph_statistics_of_an_int64_graph_equal_int32(graph):
    csr32, csr64, _ = graph
    want = csr_stats(csr32).to_dict()
    got = csr_stats(csr64).to_dict()
    assert got == want
    assert got["n_components"] == 3 + 4  # three boxes and four isolated points
    assert csr64.indices.dtype == np.int64  # statistics leave the matrix alone


def test_statistics_sum_counts_past_2_31():
    # 50 000 rows of 46 000 nonzeros: 2.3e9 in all, more than an int32 sum holds.
    n, per_row = 50_000, 46_000
    stats = stats_from_counts(np.full(n, per_row, dtype=np.int32), n=n, n_components=1)
    nnz = n * per_row
    assert stats.nnz == nnz > 2**31
    assert stats.bytes_csr == csr_bytes(n, nnz) == 12 * nnz + 8 * (n + 1)
    assert stats.nnz_row_max == per_row and stats.n_isolated == 0
    assert stats.sparsity == pytest.approx(100.0 * (1 - nnz / n**2))
    assert csr_bytes(n, 2**31 - 1) == 8 * (2**31 - 1) + 4 * (n + 1)


# ------------------------------------------------------------------------ embedding


@pytest.mark.parametrize("solver", ["dense", "lanczos", "lobpcg", "chebyshev"])
def test_embedding_of_an_int64_graph_equals_int32(solver, graph, spy_dtypes):
    csr32, csr64, _ = graph
    want = spectral_embedding(csr32, 3, solver=solver, random_state=0)
    del spy_dtypes[:]
    got = spectral_embedding(csr64, 3, solver=solver, random_state=0)
    assert_same_embedding(got, want)
    assert int(np.count_nonzero(got.isolated)) == 4
    names = {name for name, _, _ in spy_dtypes}
    assert {"submatrix", "scale_symmetric"} <= names
    if solver == "chebyshev":
        assert {"ChebyshevBlock.A", "ChebyshevBlock.A64"} <= names
    assert all(i == p == np.int64 for _, i, p in spy_dtypes), spy_dtypes
    assert csr64.indices.dtype == np.int64 and csr64.dtype == np.float32  # not modified


def test_blockwise_passes_equal_whole_matrix_passes(graph, monkeypatch):
    # Blocks of 7 entries: every block boundary case (rows longer than a block, empty
    # rows of isolated points, a block ending on a row end) on a small graph.
    csr32, csr64, _ = graph
    want = spectral_embedding(csr32, 3, solver="lobpcg", random_state=0)
    monkeypatch.setattr(_csr, "ENTRY_BLOCK", 7)
    assert_same_embedding(spectral_embedding(csr64, 3, solver="lobpcg", random_state=0), want)

    S = with_values(csr64, csr64.data.astype(np.float64))
    keep = np.flatnonzero(~isolated_vertices(csr64))
    sub = laplacian.submatrix(S, keep, np)
    dense = csr32.toarray().astype(np.float64)[np.ix_(keep, keep)]
    np.testing.assert_array_equal(sub.toarray(), dense)
    assert sub.indices.dtype == sub.indptr.dtype == np.int64
    assert sub.has_canonical_format and sub.nnz == np.count_nonzero(dense)
    dinv = 1.0 / np.sqrt(dense.sum(axis=1))
    A = laplacian.scale_symmetric(sub, dinv, np)
    assert A.indices is sub.indices and A.data is not sub.data
    np.testing.assert_allclose(A.toarray(), dense * dinv[:, None] * dinv[None, :], rtol=1e-15)
    before = sub.data.copy()
    B = laplacian.scale_symmetric(sub, dinv, np, inplace=True)
    assert B is sub and not np.array_equal(sub.data, before)
    np.testing.assert_array_equal(B.data, A.data)


def test_a_non_canonical_int64_matrix_is_summed_on_a_copy(graph):
    csr32, _, _ = graph
    # Every row reversed, and each entry split in two halves: unsorted with duplicates.
    rows = np.repeat(np.arange(csr32.shape[0]), np.diff(csr32.indptr))
    order = np.lexsort((-csr32.indices, rows))
    half = (csr32.data[order] / 2).astype(np.float32)
    indices = np.repeat(csr32.indices[order], 2).astype(np.int64)
    data = np.repeat(half, 2)
    indptr = (2 * csr32.indptr).astype(np.int64)
    messy = csr_from_arrays(data, indices, indptr, csr32.shape, canonical=False)
    assert not messy.has_canonical_format
    kept = (messy.data.copy(), messy.indices.copy(), messy.indptr.copy())
    checked = laplacian.check_affinity(messy)
    assert checked.has_canonical_format and checked.indices.dtype == np.int64
    np.testing.assert_allclose(checked.toarray(), csr32.toarray(), rtol=1e-6)
    for before, after in zip(kept, (messy.data, messy.indices, messy.indptr), strict=True):
        np.testing.assert_array_equal(before, after)
    want = spectral_embedding(csr32, 3, solver="dense")
    got = spectral_embedding(messy, 3, solver="dense")
    np.testing.assert_allclose(got.eigenvalues, want.eigenvalues, atol=1e-12)


@pytest.mark.parametrize(("value", "message"), [(np.nan, "non-finite"), (-np.inf, "non-finite"),
                                                (np.inf, "non-finite"), (-0.5, "negative")])
def test_bad_weights_of_an_int64_graph_are_refused(value, message, graph):
    _, csr64, _ = graph
    bad = csr64.copy()
    bad.indices, bad.indptr = csr64.indices, csr64.indptr
    bad.data[3] = value
    with pytest.raises(ValueError, match=message):
        spectral_embedding(bad, 2)


# ----------------------------------------------------------------------- clustering


def test_spectral_clustering_of_an_int64_graph_equals_int32(rng, monkeypatch, spy_dtypes):
    X, y = clustered_points(rng)
    # Chebyshev, not "auto" (which takes the components' indicators without forming A):
    # the spies see A formed and filtered on int64 indices.
    fit = dict(eigen_solver="chebyshev", backend="cpu", random_state=0)
    want = SpectralClustering(3, **RULE, **fit).fit(X)

    def build_int64(*args, **kwargs):
        g = build_graph(*args, **kwargs)
        g.csr = widen(g.csr)
        return g

    monkeypatch.setattr(explorer.pipeline.runners, "build_graph", build_int64)
    del spy_dtypes[:]
    got = SpectralClustering(3, **RULE, **fit).fit(X)
    assert got.affinity_matrix_.indices.dtype == np.int64
    assert spy_dtypes and all(i == p == np.int64 for _, i, p in spy_dtypes), spy_dtypes
    np.testing.assert_array_equal(got.labels_, want.labels_)
    np.testing.assert_array_equal(got.eigenvalues_, want.eigenvalues_)
    np.testing.assert_array_equal(got.embedding_, want.embedding_)
    np.testing.assert_array_equal(got.isolated_, want.isolated_)
    assert np.count_nonzero(got.labels_ == -1) == 4
    from explorer.metrics import adjusted_rand_score

    assert adjusted_rand_score(y, got.labels_) == 1.0


# --------------------------------------------------------------------------- export


@pytest.mark.parametrize("compressed", [True, False])
def test_npz_export_keeps_int64_and_reads_back_equal(compressed, graph, tmp_path):
    csr32, csr64, _ = graph
    path = tmp_path / "graph.npz"
    save_graph_npz(csr64, path, compressed=compressed)
    with np.load(path) as stored:
        assert stored["indices"].dtype == stored["indptr"].dtype == np.int64
        assert stored["data"].dtype == np.float32
    back = sp.load_npz(path)
    assert (back != csr32).nnz == 0 and back.nnz == csr32.nnz and back.shape == csr32.shape
    np.testing.assert_array_equal(back.indptr, csr32.indptr)
    np.testing.assert_array_equal(back.indices, csr32.indices)
    np.testing.assert_array_equal(back.data, csr32.data)
    assert csr64.indices.dtype == np.int64
    if compressed:
        with pytest.raises(ValueError, match="compressed=False"):
            map_graph_npz(path)
    else:
        mapped = map_graph_npz(path)  # the file's own dtypes, without reading it in
        assert isinstance(mapped.indices, np.memmap)
        assert mapped.indices.dtype == mapped.indptr.dtype == np.int64
        np.testing.assert_array_equal(mapped.indptr, csr64.indptr)
        np.testing.assert_array_equal(mapped.indices, csr64.indices)
        np.testing.assert_array_equal(mapped.data, csr64.data)
        assert (mapped != csr32).nnz == 0


def test_mapping_refuses_a_matrix_that_is_not_csr(tmp_path):
    path = tmp_path / "coo.npz"
    sp.save_npz(path, sp.coo_matrix(np.eye(3, dtype=np.float32)), compressed=False)
    with pytest.raises(ValueError, match="maps CSR files"):
        map_graph_npz(path)


def test_app_download_is_the_same_file(graph):
    _, csr64, _ = graph
    out = io.BytesIO()
    save_graph_npz(csr64, out)
    assert graph_npz(SimpleNamespace(csr=csr64)) == out.getvalue()
    back = sp.load_npz(io.BytesIO(out.getvalue()))
    assert (back != csr64).nnz == 0


def test_scores_and_row_sums_in_row_blocks_equal_whole_matrix(graph, rng, monkeypatch):
    # The cut terms of the scores and the statistics' degrees run over blocks of rows;
    # with int64 indices and blocks of 5 entries they equal the int32 whole-matrix pass.
    from explorer import metrics
    from explorer._csr import row_sums

    csr32, csr64, y = graph
    labels = np.where(y >= 0, rng.integers(0, 3, y.shape[0]), -1)
    want = metrics.clustering_scores(csr32, labels, y)
    want_degrees = np.asarray(csr32.astype(np.float64).sum(axis=1)).ravel()
    monkeypatch.setattr(_csr, "ENTRY_BLOCK", 5)
    assert metrics.clustering_scores(csr64, labels, y) == pytest.approx(want, rel=1e-12)
    np.testing.assert_allclose(row_sums(csr64, np), want_degrees, rtol=1e-12)


@pytest.mark.parametrize("solver", ["lanczos", "lobpcg", "chebyshev"])
def test_products_in_row_slabs_equal_whole_matrix_products(graph, solver, monkeypatch):
    # Past PRODUCT_MAX_ENTRIES (2**30) entries every product with the matrix goes a slab
    # of rows at a time (one cuSPARSE call failed at 2.2·10⁹ nonzeros); with slabs of
    # 40 entries the embedding equals the one-call products (sums in another order:
    # to rounding) and A.T @ x summed over slabs equals the transposed product.
    from explorer._csr import matmul, rmatmul, row_slabs

    csr32, csr64, _ = graph
    want = spectral_embedding(csr32, 3, solver=solver, tol=1e-8, random_state=0)
    monkeypatch.setattr(_csr, "PRODUCT_MAX_ENTRIES", 40)
    assert len(row_slabs(csr64)) > 10
    got = spectral_embedding(csr64, 3, solver=solver, tol=1e-8, random_state=0)
    np.testing.assert_allclose(got.eigenvalues, want.eigenvalues, atol=1e-9)
    assert got.solver == want.solver and got.residual_norms.max() <= 2e-8
    x = np.random.default_rng(0).standard_normal((csr64.shape[0], 2))
    np.testing.assert_allclose(matmul(csr64, x), csr32 @ x, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(rmatmul(csr64, x), csr32.T @ x, rtol=1e-12, atol=1e-12)
