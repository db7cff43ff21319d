"""int64 indices on the GPU: past 2**31 nonzeros, built, measured, clustered and exported.

The fast tests run the int64 code paths (cuSPARSE products on int64 index arrays, the
block passes of the embedding, components in row blocks, the export) on small graphs
whose cupyx CSR is given int64 indices, against the same graph with int32 indices.
The slow test runs the whole pipeline on a graph of 2.2·10⁹ nonzeros, where int64 is
the only choice: two groups of 33 300 points far apart on a line, each a complete
graph under a uniform threshold, so the answer is known (2 components, eigenvalue 0
twice, the groups as clusters). It needs about 55 GB of GPU memory, 27 GB of host
memory and 27 GB of disk, for one to two minutes (writing the NPZ is most of it:
the zip's CRC-32 runs at a few hundred MB/s on one core).
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components as scipy_components

cupy = pytest.importorskip("cupy")

from test_int64 import RULE, clustered_points, widen  # noqa: E402

from explorer import SpectralClustering, _csr, build_graph  # noqa: E402
from explorer._csr import csr_from_arrays  # noqa: E402
from explorer.components import count_components  # noqa: E402
from explorer.embedding import laplacian, spectral_embedding  # noqa: E402
from explorer.embedding.chebyshev import ChebyshevBlock  # noqa: E402
from explorer.graph import csr_stats  # noqa: E402
from explorer.metrics import adjusted_rand_score  # noqa: E402
from explorer.ui._export import map_graph_npz, save_graph_npz  # noqa: E402

pytestmark = pytest.mark.gpu

@pytest.fixture
def graph(rng):
    """(int32 cupyx CSR, its int64 twin, labels) of a 3-component graph with 4 isolated points."""
    X, y = clustered_points(rng)
    csr = build_graph(cupy.asarray(X), **RULE, backend="gpu").csr
    assert csr.indices.dtype == cupy.int32
    return csr, widen(csr), y


def unit_row_gram(emb):
    """E Eᵀ of the non-isolated unit rows: independent of the basis chosen within a
    repeated eigenvalue (E -> E Q for orthogonal Q)."""
    E = cupy.asnumpy(emb.embedding)[~cupy.asnumpy(emb.isolated)]
    return E @ E.T


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_row_blocks_of_device_offsets_equal_the_hosts(dtype, rng):
    # The blocks' ends are searched on the device (a few numbers read back): the same
    # blocks as on the host, rows longer than a block on their own, offsets not from 0.
    from explorer._csr import row_blocks

    counts = rng.integers(0, 40, size=5000)
    counts[rng.integers(5000, size=5)] = 300
    ptr = (np.r_[0, np.cumsum(counts)] + 7).astype(dtype)
    for block in (1, 50, 299, 4096, int(ptr[-1])):
        want = list(row_blocks(ptr, block))
        assert list(row_blocks(cupy.asarray(ptr), block)) == want
        assert len(want) > 1 or block == int(ptr[-1])


# --------------------------------------------------------------------- components


# block=None: the whole int64 graph converted at once; otherwise row blocks, down to
# one row each (rows longer than the block).
@pytest.mark.parametrize("block", [1, 37, 1000, None])
def test_int64_components_in_row_blocks_equal_scipy(block, rng):
    n = 3000
    rows, cols = rng.integers(n, size=(2, 2500))
    keep = rows != cols
    adj = sp.coo_matrix((np.ones(keep.sum(), np.float32), (rows[keep], cols[keep])), (n, n))
    host = (adj + adj.T).tocsr()
    host.sum_duplicates()
    want = scipy_components(host, directed=False)[0]
    assert np.diff(host.indptr).max() > 1  # rows longer than block=1
    int64 = csr_from_arrays(cupy.asarray(host.data), cupy.asarray(host.indices.astype(np.int64)),
                            cupy.asarray(host.indptr.astype(np.int64)), (n, n), canonical=True)
    got = count_components(int64, block=block)
    assert got == want


def test_statistics_of_an_int64_gpu_graph_equal_int32(graph):
    csr32, csr64, _ = graph
    want = csr_stats(csr32).to_dict()
    got = csr_stats(csr64).to_dict()
    assert got["n_components"] == want["n_components"] == 3 + 4
    for key, value in want.items():
        if key.startswith("degree_"):
            assert got[key] == pytest.approx(value, rel=1e-12)
        else:
            assert got[key] == value, key


# ---------------------------------------------------------------------- embedding


# Chebyshev at tol 1e-5 iterates in float32 (its own float32 copy of A's values).
@pytest.mark.parametrize(("solver", "tol"), [("lobpcg", 1e-9), ("chebyshev", 1e-9),
                                             ("chebyshev", 1e-5)])
def test_embedding_of_an_int64_gpu_graph_equals_int32(solver, tol, graph, monkeypatch):
    csr32, csr64, _ = graph
    want = spectral_embedding(csr32, 3, solver=solver, tol=tol, random_state=0)
    seen = []
    block_init = ChebyshevBlock.__init__

    def init(self, A, *args, **kwargs):
        block_init(self, A, *args, **kwargs)
        seen.extend([self.A.indices.dtype, self.A64.indices.dtype])

    scale = laplacian.scale_symmetric

    def scale_spy(*args, **kwargs):
        out = scale(*args, **kwargs)
        seen.extend([out.indices.dtype, out.indptr.dtype])
        return out

    monkeypatch.setattr(ChebyshevBlock, "__init__", init)
    monkeypatch.setattr(laplacian, "scale_symmetric", scale_spy)
    # Blocks of 50 entries: the block passes run many times on the device; products
    # in slabs of 400 entries, as past 2**30 (one cuSPARSE SpMV failed at 2.2·10⁹).
    monkeypatch.setattr(_csr, "ENTRY_BLOCK", 50)
    monkeypatch.setattr(_csr, "PRODUCT_MAX_ENTRIES", 400)
    got = spectral_embedding(csr64, 3, solver=solver, tol=tol, random_state=0)
    assert seen and all(dtype == cupy.int64 for dtype in seen), seen
    assert got.solver == want.solver == solver
    np.testing.assert_array_equal(cupy.asnumpy(got.isolated), cupy.asnumpy(want.isolated))
    # Three components: eigenvalue 0 three times, accurate to about tol² / gap.
    np.testing.assert_allclose(got.eigenvalues, want.eigenvalues, atol=1e-7)
    np.testing.assert_allclose(got.eigenvalues, 0.0, atol=1e-7)
    gram_tol = 1e-6 if tol < 1e-6 else 1e-3
    np.testing.assert_allclose(unit_row_gram(got), unit_row_gram(want), atol=gram_tol)
    assert csr64.indices.dtype == cupy.int64 and csr64.dtype == cupy.float32


def test_spectral_clustering_of_an_int64_gpu_graph(rng):
    X, y = clustered_points(rng)
    csr64 = widen(build_graph(cupy.asarray(X), **RULE, backend="gpu").csr)
    sc = SpectralClustering(3, affinity="precomputed", backend="gpu", random_state=0)
    sc.fit(csr64)
    assert sc.affinity_matrix_.indices.dtype == cupy.int64
    labels = cupy.asnumpy(sc.labels_)
    assert np.count_nonzero(labels == -1) == 4
    assert adjusted_rand_score(y, labels) == 1.0


def test_export_of_an_int64_gpu_graph(graph, tmp_path):
    csr32, csr64, _ = graph
    path = tmp_path / "graph.npz"
    save_graph_npz(csr64, path, compressed=False)
    with np.load(path) as stored:
        assert stored["indices"].dtype == stored["indptr"].dtype == np.int64
    back = sp.load_npz(path)
    host = csr32.get()
    assert (back != host).nnz == 0 and back.nnz == host.nnz
    mapped = map_graph_npz(path)
    assert mapped.indices.dtype == mapped.indptr.dtype == np.int64
    assert (mapped != host).nnz == 0


# --------------------------------------------------------- past 2**31 nonzeros


@pytest.mark.slow
def test_past_2_31_nonzeros_end_to_end(tmp_path):
    m = 33_300
    n, nnz = 2 * m, 2 * m * (m - 1)
    assert nnz > 2.2e9
    need, free = 12 * nnz + 2**30, shutil.disk_usage(tmp_path).free
    if free < need:  # checked before any device work
        pytest.skip(f"the export needs {need / 2**30:.0f} GiB of disk in {tmp_path}; "
                    f"{free / 2**30:.0f} GiB free")
    pool = cupy.get_default_memory_pool()
    pool.free_all_blocks()  # what earlier tests left cached
    groups = np.repeat([0, 1], m)
    X = (np.linspace(0.0, 1.0, m, dtype=np.float32)[None, :] + 10.0 * np.arange(2)[:, None])
    X = cupy.asarray(X.reshape(n, 1).astype(np.float32))
    path = tmp_path / "graph.npz"
    sc = csr = back = None
    try:
        # Within a group every squared distance is <= 1 < 4; across the groups >= 81.
        # Chebyshev named: "auto" would take the two components' indicators, and this is
        # the one test of its block products past 2³¹ entries.
        sc = SpectralClustering(2, metric="uniform", threshold_sqdist=4.0, method="csr1",
                                eigen_solver="chebyshev", backend="gpu", random_state=0)
        labels = cupy.asnumpy(sc.fit_predict(X))

        csr = sc.affinity_matrix_
        assert csr.nnz == nnz and csr.shape == (n, n)
        assert csr.indptr.dtype == csr.indices.dtype == cupy.int64
        st = sc.graph_stats_
        assert (st.nnz, st.n_components, st.n_isolated) == (nnz, 2, 0)
        assert st.nnz_row_min == st.nnz_row_max == m - 1
        assert st.degree_min == st.degree_max == m - 1
        assert st.bytes_csr == 12 * nnz + 8 * (n + 1)
        assert sc.eigen_solver_ == "chebyshev"
        np.testing.assert_allclose(sc.eigenvalues_, 0.0, atol=1e-6)
        assert adjusted_rand_score(groups, labels) == 1.0
        assert not bool(cupy.asnumpy(sc.isolated_).any())

        save_graph_npz(csr, path, compressed=False)
        assert path.stat().st_size >= 12 * nnz
        # Mapped, not loaded: load_npz would read 26.6 GB through the zip's CRC check
        # (minutes); the small tests above read back with load_npz.
        back = map_graph_npz(path)
        assert back.shape == (n, n) and back.nnz == nnz
        assert back.indptr.dtype == back.indices.dtype == np.int64
        np.testing.assert_array_equal(back.indptr, cupy.asnumpy(csr.indptr))
        step = 1 << 28  # compared in pieces: no host copy of the whole matrix
        for start in range(0, nnz, step):
            stop = min(start + step, nnz)
            np.testing.assert_array_equal(back.indices[start:stop],
                                          cupy.asnumpy(csr.indices[start:stop]))
            np.testing.assert_array_equal(back.data[start:stop],
                                          cupy.asnumpy(csr.data[start:stop]))
    finally:
        # A failure's traceback keeps this frame: drop the 26.6 GB on the device, on the
        # host and on disk anyway (pytest keeps the temporary folders of recent runs).
        sc = csr = back = None
        path.unlink(missing_ok=True)
        pool.free_all_blocks()
