"""The distributed mode (explorer.distributed, issue 19) against the single-process path.

A LocalCluster of 2 workers × 1 thread in this process (``processes=False``: starts in
milliseconds and shares the test's imports) runs most tests; one test starts real
worker processes, where every task and result crosses a process boundary by pickling.
"""

from __future__ import annotations

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

from explorer import KMeans  # noqa: E402
from explorer.distributed import kmeans_fit  # noqa: E402


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                       dashboard_address=None)
    with distributed.Client(cluster) as c:
        yield c
    cluster.close()


def _blobs(rng, n_per=300, d=3, centres=4, spread=0.4):
    parts = [rng.normal(3.0 * c, spread, size=(n_per, d)) for c in range(centres)]
    X = np.concatenate(parts)
    return X[rng.permutation(X.shape[0])]


# ------------------------------------------------------------------------ k-means


@pytest.mark.parametrize("init", ["k-means++", "random"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_kmeans_same_labels_as_single_process(client, rng, init, dtype):
    """Same data, same seed: same labels, centres to float64 rounding, same inertia."""
    X = _blobs(rng).astype(dtype)
    seed = int(rng.integers(2**31))
    ref = KMeans(4, init=init, n_init=3, random_state=seed).fit(X)
    got = kmeans_fit(da.from_array(X, chunks=(350, -1)), 4, init=init, n_init=3,
                     random_state=seed, client=client)
    assert got.blocks.n_blocks == 4
    np.testing.assert_array_equal(got.labels_numpy(), ref.labels_)
    assert got.cluster_centers.dtype == ref.cluster_centers_.dtype
    np.testing.assert_allclose(got.cluster_centers, ref.cluster_centers_, rtol=1e-6, atol=1e-6)
    assert got.inertia == pytest.approx(ref.inertia_, rel=1e-9)
    assert got.n_iter == ref.n_iter_


def test_kmeans_parallel_seeding_is_deterministic(client, rng):
    """k-means|| draws on the workers from per-block streams: repeats are identical,
    and on separated blobs the clustering is the single-process one."""
    X = _blobs(rng, n_per=250, d=2, centres=5)
    Xd = da.from_array(X, chunks=(400, -1))
    a = kmeans_fit(Xd, 5, init="k-means||", n_init=2, random_state=3, client=client)
    b = kmeans_fit(Xd, 5, init="k-means||", n_init=2, random_state=3, client=client)
    np.testing.assert_array_equal(a.labels_numpy(), b.labels_numpy())
    np.testing.assert_array_equal(a.cluster_centers, b.cluster_centers)
    from sklearn.metrics import adjusted_rand_score

    ref = KMeans(5, init="k-means||", n_init=2, random_state=3).fit(X)
    assert adjusted_rand_score(ref.labels_, a.labels_numpy()) == 1.0


def test_kmeans_estimator_on_dask_array(client, rng):
    """KMeans.fit(dask_array) runs distributed; labels_ is a Dask array with X's chunks."""
    X = _blobs(rng, n_per=200)
    Xd = da.from_array(X, chunks=(300, -1))
    km = KMeans(4, n_init=2, random_state=0).fit(Xd)
    assert isinstance(km.labels_, da.Array)
    assert km.labels_.chunks[0] == Xd.chunks[0]
    ref = KMeans(4, n_init=2, random_state=0).fit(X)
    np.testing.assert_array_equal(km.labels_.compute(), ref.labels_)
    assert km.n_features_in_ == 3


def test_kmeans_empty_cluster_reseeded(client):
    """Initial centres with one empty cluster: re-seeded at the farthest point, as in
    the single-process run."""
    X = np.array([[0.0, 0], [0.1, 0], [0, 0.1], [5, 5], [5.1, 5], [5, 5.2], [9, 0], [9.2, 0]])
    init = np.array([[0.0, 0.0], [5.0, 5.0], [100.0, 100.0]])
    ref = KMeans(3, init=init, n_init=1).fit(X)
    got = kmeans_fit(da.from_array(X, chunks=(3, -1)), 3, init=init, client=client)
    np.testing.assert_array_equal(got.labels_numpy(), ref.labels_)
    np.testing.assert_allclose(got.cluster_centers, ref.cluster_centers_)


def test_empty_row_chunks_and_dataframes(client, rng):
    """Empty row chunks are no blocks (labels keep X's chunks); a Dask DataFrame is
    refused with the conversion to use."""
    X = _blobs(rng, n_per=100)
    Xd = da.concatenate([da.from_array(X[:150]), da.zeros((0, 3)), da.from_array(X[150:])])
    km = KMeans(4, n_init=1, random_state=0).fit(Xd)
    assert km.labels_.chunks == Xd.chunks[:1]
    np.testing.assert_array_equal(km.labels_.compute(),
                                  KMeans(4, n_init=1, random_state=0).fit(X).labels_)
    dd = pytest.importorskip("dask.dataframe")
    pytest.importorskip("pandas")
    with pytest.raises(TypeError, match="to_dask_array"):
        kmeans_fit(dd.from_array(X, chunksize=100), 4, client=client)


def test_no_client_is_a_clear_error(monkeypatch):
    from explorer.distributed import get_client

    def none_in_scope():
        raise ValueError("No clients found")

    monkeypatch.setattr(distributed, "default_client", none_in_scope)
    with pytest.raises(ValueError, match="no Client is in scope"):
        get_client()


# ------------------------------------------------------------------------ graph


@pytest.mark.parametrize(
    ("d", "rule_args", "method", "picked"),
    [
        (2, {"metric": "gaussian", "sigma": 0.03, "threshold_sqdist": 0.004}, "auto", "kdtree"),
        (3, {"metric": "uniform", "threshold_sqdist": 0.02}, "bruteforce", "bruteforce"),
        (12, {"metric": "cosine", "threshold_sim": 0.8}, "auto", "bruteforce"),
    ],
)
def test_row_block_graph_is_the_single_process_graph(client, rng, d, rule_args, method,
                                                     picked):
    """The row blocks put together are canonical and equal build_graph's CSR exactly
    (pattern, float32 weights, index dtype)."""
    from explorer import EdgeRule, build_graph
    from explorer.distributed import build_row_blocks
    from explorer.testing import assert_same_graph, check_canonical

    X = rng.random((900, d)).astype(np.float32)
    rule = EdgeRule.from_args(**rule_args)
    ref = build_graph(X, rule, backend="cpu").csr
    g = build_row_blocks(da.from_array(X, chunks=(250, -1)), rule, method=method,
                         client=client)
    assert g.method == picked and g.blocks.n_blocks == 4
    csr = g.to_csr()
    check_canonical(csr)
    assert_same_graph(csr, ref, X, rule, rtol=0.0)
    assert csr.indptr.dtype == ref.indptr.dtype
    np.testing.assert_array_equal(csr.indptr, ref.indptr)
    np.testing.assert_array_equal(csr.indices, ref.indices)
    np.testing.assert_array_equal(csr.data, ref.data)
    assert g.nnz == ref.nnz
    np.testing.assert_array_equal(g.counts, np.diff(ref.indptr))
    assert g.stats.nnz == ref.nnz


def test_row_blocks_stay_on_their_data_workers(client, rng):
    """Each graph block is built and held where its data block is, though the gathered
    points (every block's other input) are larger and on one worker."""
    from explorer import EdgeRule
    from explorer.distributed import build_row_blocks

    X = rng.random((4000, 2)).astype(np.float32)
    workers = sorted(client.scheduler_info(n_workers=-1)["workers"])
    futures = [client.scatter(X[a : a + 1000], workers=[workers[i % 2]], hash=False)
               for i, a in enumerate(range(0, 4000, 1000))]
    Xd = da.concatenate([da.from_delayed(f, shape=(1000, 2), dtype=X.dtype)
                         for f in futures])
    g = build_row_blocks(Xd, EdgeRule.from_args("uniform", threshold_sqdist=0.001),
                         client=client)
    data = client.who_has(futures)
    built = client.who_has(g.blocks.futures)
    assert [built[f.key] for f in g.blocks.futures] == [data[f.key] for f in futures]


def _where(block):
    """The address of the worker running this task."""
    from distributed import get_worker

    return get_worker().address


def test_block_tasks_run_on_their_blocks_workers(client, rng):
    """RowBlocks.map holds each task to its block's worker, even where the scheduler
    would rather balance: all the blocks' other input sits on one worker and the
    blocks come in a skewed order (three on one worker, one on the other)."""
    from explorer.distributed._blocks import RowBlocks

    workers = sorted(client.scheduler_info(n_workers=-1)["workers"])
    where = [0, 0, 0, 1]
    futures = [client.scatter(rng.random((500, 3)), workers=[workers[w]], hash=False)
               for w in where]
    big = client.scatter(rng.random((200_000, 3)), workers=[workers[1]], hash=False)
    blocks = RowBlocks(client, futures, np.arange(0, 2001, 500, dtype=np.int64))
    ran = client.gather(blocks.map(lambda blk, other: _where(blk), big))
    assert ran == [workers[w] for w in where]


def test_gpu_row_block_method_choice_and_checks(client, rng):
    """``method="auto"`` for CuPy chunks (no CuPy needed to decide): grid for distance
    rules with d <= 8, gemm for d >= 32, the host's CPU builder between, with the
    reason; grid and gemm refuse NumPy chunks, the grid refuses cosine rules."""
    from explorer import EdgeRule
    from explorer.distributed import build_row_blocks
    from explorer.graph._gpu_choice import choose_rows_method  # public in graph.gpu (CuPy)

    dist = EdgeRule.from_args("uniform", threshold_sqdist=0.02)
    cos = EdgeRule.from_args("cosine", threshold_sim=0.8)
    assert choose_rows_method(1000, 4, dist)[0] == "grid"
    assert choose_rows_method(1000, 8, dist)[0] == "grid"
    assert choose_rows_method(1000, 32, dist)[0] == "gemm"
    assert choose_rows_method(1000, 64, cos)[0] == "gemm"
    method, why = choose_rows_method(1000, 16, dist)
    assert method == "bruteforce" and "not its GPU" in why
    method, why = choose_rows_method(1000, 4, cos)
    assert method == "bruteforce" and "cosine" in why and "not its GPU" in why
    Xd = da.from_array(rng.random((100, 3)).astype(np.float32), chunks=(50, -1))
    for m in ("grid", "gemm"):
        with pytest.raises(ValueError, match="needs CuPy chunks"):
            build_row_blocks(Xd, dist, method=m, client=client)


def test_row_block_memory_preflight(rng):
    """A block estimated (from a sample of its rows) not to fit is refused before it
    is built, with the estimate in the message; a small one passes."""
    from explorer import EdgeRule
    from explorer.distributed._graph import preflight
    from explorer.memory import MemoryEstimateError

    X = rng.random((2000, 2)).astype(np.float32)
    rule = EdgeRule.from_args(metric="uniform", threshold_sqdist=0.5)
    with pytest.raises(MemoryEstimateError, match=r"row block 1000:2000 .* nnz ≈") as info:
        preflight(X, 1000, 1000, rule, "kdtree", available=10**6)
    assert info.value.nnz > 1e5
    preflight(X, 1000, 1000, rule, "kdtree", available=10**12)


# ------------------------------------------------------------------------ the pipeline


def _moons(rng, n=1200):
    from sklearn.datasets import make_moons

    X, _ = make_moons(n, noise=0.05, random_state=int(rng.integers(2**31)))
    return X


@pytest.mark.parametrize("solver", ["lobpcg", "dense"])
def test_spectral_clustering_on_dask_array_same_as_single_process(client, rng, solver):
    """SpectralClustering(...).fit(dask_array) with a Client in scope: the distributed
    products equal the single-process ones bit for bit, so the embedding is identical
    and so are the labels."""
    from explorer import SpectralClustering

    X = _moons(rng)
    seed = int(rng.integers(2**31))
    kw = dict(n_clusters=2, threshold_sqdist=0.02, eigen_solver=solver, n_init=3,
              random_state=seed)
    ref = SpectralClustering(**kw, backend="cpu").fit(X)
    Xd = da.from_array(X, chunks=(500, -1))
    sc = SpectralClustering(**kw).fit(Xd)
    assert sc.backend_ == "dask"
    assert isinstance(sc.labels_, da.Array) and sc.labels_.chunks[0] == Xd.chunks[0]
    np.testing.assert_array_equal(sc.labels_.compute(), ref.labels_)
    np.testing.assert_array_equal(sc.embedding_, ref.embedding_)
    np.testing.assert_array_equal(sc.eigenvalues_, ref.eigenvalues_)
    assert sc.eigen_solver_ == ref.eigen_solver_ == solver
    assert sc.eigen_iterations_ == ref.eigen_iterations_
    assert sc.graph_stats_.nnz == ref.graph_stats_.nnz
    from explorer.testing import assert_same_graph

    assert_same_graph(sc.graph_.to_csr(), ref.affinity_matrix_, X, ref.edge_rule_, rtol=0.0)
    # A fitted estimator pickles; its graph's blocks stay on the cluster.
    import pickle

    back = pickle.loads(pickle.dumps(sc))
    np.testing.assert_array_equal(back.labels_.compute(), ref.labels_)
    assert back.graph_stats_.nnz == ref.graph_stats_.nnz
    with pytest.raises(ValueError, match="stayed on the cluster"):
        back.graph_.to_csr()


def test_operator_product_equals_single_process_product(client, rng):
    """RowBlockOperator @ X is A @ X bit for bit, A formed as spectral_embedding forms
    it (isolated vertices dropped, symmetric scaling)."""
    from explorer import EdgeRule, build_graph
    from explorer._csr import with_values
    from explorer.distributed import build_row_blocks
    from explorer.distributed._operator import RowBlockOperator, normalised_blocks
    from explorer.embedding import laplacian

    X = rng.random((700, 2)).astype(np.float32)
    X[:5] += 10.0  # a few isolated points
    rule = EdgeRule.from_args(metric="gaussian", sigma=0.03, threshold_sqdist=0.003)
    S = build_graph(X, rule, backend="cpu").csr
    S64 = with_values(S, S.data.astype(np.float64))
    degree = np.asarray(S64.sum(axis=1)).ravel()
    keep = np.flatnonzero(degree > 0)
    assert keep.size < X.shape[0]
    dinv = 1.0 / np.sqrt(degree[keep])
    A = laplacian.scale_symmetric(laplacian.submatrix(S64, keep, np), dinv, np)

    g = build_row_blocks(da.from_array(X, chunks=(200, -1)), rule, client=client)
    np.testing.assert_array_equal(g.degrees > 0, degree > 0)
    new_id = np.full(X.shape[0], -1)
    new_id[keep] = np.arange(keep.size)
    op = RowBlockOperator(normalised_blocks(g, new_id, 1.0 / np.sqrt(g.degrees[keep])), g.nnz)
    assert op.shape == A.shape
    V = rng.standard_normal((keep.size, 3))
    np.testing.assert_array_equal(op @ V, A @ V)
    np.testing.assert_array_equal((op.to_csr() != A).nnz, 0)


def test_components_rule_as_single_process(client, rng):
    """More components than k: the k largest are clustered, the others' points get −1
    with the same warning; then exactly k, so ``"auto"`` takes the components solver.
    Same labels as the single-process fit."""
    from explorer import SpectralClustering
    from explorer.distributed._components import component_labels

    centres = [(0, 0), (4, 0), (0, 4), (4, 4)]
    X = np.concatenate([rng.normal(c, 0.2, size=(120, 2)) for c in centres]
                       + [rng.normal((9, 9), 0.05, size=(6, 2))])
    X = X[rng.permutation(X.shape[0])]
    kw = dict(n_clusters=4, threshold_sqdist=0.3, n_init=2, random_state=1)
    with pytest.warns(UserWarning, match="5 connected components"):
        ref = SpectralClustering(**kw, backend="cpu").fit(X)
    with pytest.warns(UserWarning, match="5 connected components"):
        sc = SpectralClustering(**kw).fit(da.from_array(X, chunks=(130, -1)))
    assert ref.eigen_solver_ == sc.eigen_solver_ == "components"
    labels = sc.labels_.compute()
    assert (labels == -1).sum() == 6
    np.testing.assert_array_equal(labels, ref.labels_)
    # The embedding stayed on the workers (Dask arrays); it is the single-process one.
    assert isinstance(sc.embedding_, da.Array) and isinstance(sc.eigenvectors_, da.Array)
    np.testing.assert_array_equal(sc.embedding_.compute(), ref.embedding_)
    np.testing.assert_allclose(sc.eigenvectors_.compute(), ref.eigenvectors_, rtol=1e-12)
    np.testing.assert_array_equal(sc.eigenvalues_, ref.eigenvalues_)
    np.testing.assert_allclose(sc.eigen_residuals_, ref.eigen_residuals_, atol=1e-14)
    from explorer.components import component_labels as single_labels

    ours, theirs = component_labels(sc.graph_), single_labels(ref.affinity_matrix_)
    pairs = set(zip(ours.tolist(), theirs.tolist(), strict=True))
    assert len(pairs) == len(set(ours.tolist())) == len(set(theirs.tolist()))  # a bijection
    assert ours.min() == 0 and all(ours[v] <= v for v in range(X.shape[0]))


def _components_data(rng, sizes, spread=0.15):
    """Blobs of the given sizes on a line, 3 apart (one component each at ε² = 0.3)."""
    X = np.concatenate([rng.normal((3.0 * i, 0.0), spread, size=(s, 2))
                        for i, s in enumerate(sizes)])
    return X[rng.permutation(X.shape[0])]


def test_stray_pieces_and_largest_components_as_single_process(client, rng):
    """A stray piece (3 points, under 1 % of the mean cluster size) is left out first,
    then the k largest of the rest: the single-process labels, warning and embedding."""
    from explorer import SpectralClustering

    X = _components_data(rng, [500, 500, 500, 500, 50, 3])
    kw = dict(n_clusters=4, threshold_sqdist=0.3, n_init=2, random_state=2)
    with pytest.warns(UserWarning) as ref_warning:
        ref = SpectralClustering(**kw, backend="cpu").fit(X)
    with pytest.warns(UserWarning) as got_warning:
        sc = SpectralClustering(**kw).fit(da.from_array(X, chunks=(301, -1)))
    assert str(got_warning[0].message) == str(ref_warning[0].message)
    assert "stray" in str(ref_warning[0].message)
    assert sc.eigen_solver_ == ref.eigen_solver_ == "components"
    labels = sc.labels_.compute()
    assert (labels == -1).sum() == 53
    np.testing.assert_array_equal(labels, ref.labels_)
    np.testing.assert_array_equal(sc.embedding_.compute(), ref.embedding_)
    # The labels are the workers' blocks: a pickled estimator reads them while the
    # cluster holds them.
    import pickle

    back = pickle.loads(pickle.dumps(sc))
    np.testing.assert_array_equal(back.labels_.compute(), ref.labels_)


@pytest.mark.parametrize(("chunks", "few_links"),
                         [((1, 1, 997, 3, 498), True), ((250,), True), ((64,), False)])
def test_block_components_exchange_only_cross_block_links(client, rng, chunks, few_links):
    """Labels per block, merged from the links between blocks: the single-process
    components (a bijection, each labelled by its smallest vertex), and no array of n
    labels gathered to the client. Blocks of a few hundred rows of clustered data hold
    each cluster in few pieces, so the links are far fewer than the vertices; blocks
    of 64 rows hold it in many (the links are then most cross-block vertices, still
    fewer than the gathered size bound)."""
    from explorer import EdgeRule
    from explorer.components import component_labels as single_labels
    from explorer.distributed import build_row_blocks
    from explorer.distributed._components import block_components

    X = _components_data(rng, [400, 400, 400, 300])
    n = X.shape[0]
    rule = EdgeRule.from_args("gaussian", sigma=0.1, threshold_sqdist=0.05)
    Xd = da.from_array(X, chunks=(chunks if len(chunks) > 1 else chunks[0], -1))
    g = build_row_blocks(Xd, rule, client=client)
    gathered = []
    gather = client.gather

    def recording(futures, *args, **kwargs):
        out = gather(futures, *args, **kwargs)
        gathered.append(out)
        return out

    client.gather = recording
    try:
        comps = block_components(g)
    finally:
        del client.gather

    def largest(value):
        if isinstance(value, np.ndarray):
            return value.size
        if isinstance(value, list | tuple):
            return max((largest(v) for v in value), default=0)
        return 0

    assert max(largest(v) for v in gathered) < n // 10
    ours = comps.gather()
    theirs = single_labels(g.to_csr())
    pairs = set(zip(ours.tolist(), theirs.tolist(), strict=True))
    assert len(pairs) == len(set(ours.tolist())) == len(set(theirs.tolist()))
    assert all(ours[v] <= v for v in range(n)) and (ours[ours] == ours).all()
    if few_links:
        assert comps.links < n // 10
    live = g.degrees > 0
    found, counts = np.unique(ours[live], return_counts=True)
    np.testing.assert_array_equal(comps.found, found)
    np.testing.assert_array_equal(comps.counts, counts)


def test_halo_product_equals_single_process_product(client, rng):
    """The product with vectors fetched worker to worker (each block's halo, only from
    the blocks its edges reach) is the one-process D^-1/2 S D^-1/2 product bit for
    bit."""
    from explorer import EdgeRule, build_graph
    from explorer.distributed import build_row_blocks
    from explorer.distributed._components import block_components
    from explorer.distributed._halo import halo_product

    X = rng.random((900, 2)).astype(np.float32)
    X = X[np.argsort(X[:, 0])]  # rows in x order: blocks far apart share no edge
    rule = EdgeRule.from_args(metric="gaussian", sigma=0.03, threshold_sqdist=0.004)
    S = build_graph(X, rule, backend="cpu").csr
    S64 = S.astype(np.float64)
    d = np.asarray(S64.sum(axis=1)).ravel()
    scale = np.where(d > 0, 1.0 / np.sqrt(np.where(d > 0, d, 1.0)), 0.0)
    V = rng.standard_normal((900, 3))
    g = build_row_blocks(da.from_array(X, chunks=(200, -1)), rule, client=client)
    comps = block_components(g)
    r = g.blocks.offsets
    values = [client.scatter(V[a:b]) for a, b in zip(r[:-1], r[1:], strict=True)]
    scales = [client.scatter(scale[a:b]) for a, b in zip(r[:-1], r[1:], strict=True)]
    assert comps.reach[0, 2] == 0 and comps.reach[0, 1] > 0  # pairs without an edge
    want = (S64 @ V) * scale[:, None]
    for reach in (comps.reach, None):  # fetching only from the blocks reached, or all
        got = halo_product(g, comps.forests, values, scales, reach)
        np.testing.assert_array_equal(np.concatenate(client.gather(got)), want)


def test_distributed_fit_refuses_what_it_cannot_do(client, rng):
    from explorer import SpectralClustering

    Xd = da.from_array(_moons(rng, 300), chunks=(100, -1))
    with pytest.raises(ValueError, match="eigen_solver"):
        SpectralClustering(2, threshold_sqdist=0.02, eigen_solver="amg").fit(Xd)
    with pytest.raises(ValueError, match="method"):
        SpectralClustering(2, threshold_sqdist=0.02, method="csr2").fit(Xd)
    with pytest.raises(ValueError, match="no edge"):
        SpectralClustering(2, threshold_sqdist=1e-12, sigma=0.1).fit(Xd)


def test_chebyshev_on_cpu_workers_is_lobpcg_from_the_client(client, rng):
    """Several CPU workers have no collective for the resident Chebyshev solve
    (explorer.distributed._exact): eigen_solver='chebyshev' runs LOBPCG from the client,
    and the reason says so."""
    from explorer import SpectralClustering

    Xd = da.from_array(_moons(rng, 1200), chunks=(300, -1))
    sc = SpectralClustering(2, threshold_sqdist=0.02, eigen_solver="chebyshev", n_init=2,
                            random_state=0).fit(Xd)
    if "on the one worker" in sc.eigen_solver_why_:  # the scheduler put every block on one
        assert sc.eigen_solver_ == "chebyshev"
    else:
        assert sc.eigen_solver_ == "lobpcg"
        assert "client-driven LOBPCG: 2 CPU workers" in sc.eigen_solver_why_, \
            sc.eigen_solver_why_


def test_spectral_clustering_with_worker_processes(rng):
    """Real worker processes (every task, block and result pickled across processes),
    parameters chosen from the data on a worker, n_clusters='auto': the single-process
    answer."""
    from explorer import SpectralClustering

    X = np.concatenate([rng.normal(c, 0.15, size=(150, 2)) for c in ((0, 0), (3, 0), (0, 3))])
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=":0") as cluster, \
            distributed.Client(cluster):
        sc = SpectralClustering("auto", eigen_solver="lobpcg", n_init=2, random_state=0)
        sc.fit(da.from_array(X, chunks=(200, -1)))
    ref = SpectralClustering("auto", eigen_solver="lobpcg", n_init=2, random_state=0,
                             backend="cpu").fit(X)
    assert sc.suggested_params_ == ref.suggested_params_ != ()
    assert sc.edge_rule_ == ref.edge_rule_
    assert sc.n_clusters_ == ref.n_clusters_ == 3
    np.testing.assert_array_equal(sc.labels_.compute(), ref.labels_)


# ------------------------------------------------------------------------ command line


def test_cli_run_on_a_scheduler(client, capsys, tmp_path):
    """``spectral-explorer run --scheduler ADDRESS``: the same clustering as the local
    run (same scores), reported as a Dask run, the cut scores summed on the workers."""
    import json

    from explorer.cli import main

    args = ["run", "blobs", "--n-samples", "500", "--n-clusters", "3", "--sigma", "0.05",
            "--threshold-sqdist", "0.004", "--eigen-solver", "lobpcg", "--n-init", "2"]
    path = tmp_path / "d.json"
    code = main([*args, "--scheduler", client.scheduler.address, "--row-chunks", "150",
                 "--json", str(path)])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "dask" in out and "4 row blocks" in out
    local = tmp_path / "l.json"
    assert main([*args, "--backend", "cpu", "--json", str(local)]) == 0
    got, ref = json.loads(path.read_text()), json.loads(local.read_text())
    assert got["backend"]["name"] == "dask"
    assert got["stats"]["nnz"] == ref["stats"]["nnz"]
    assert got["scores"]["ari"] == ref["scores"]["ari"]
    assert got["scores"]["normalized_cut"] == pytest.approx(ref["scores"]["normalized_cut"],
                                                            rel=1e-12)
    assert got["eigenvalues"] == ref["eigenvalues"]


def test_cli_scheduler_bad_row_chunks(capsys):
    from explorer.cli import main

    code = main(["run", "blobs", "--n-samples", "200", "--scheduler", "tcp://127.0.0.1:1",
                 "--row-chunks", "0"])
    assert code == 2
    assert "--row-chunks must be >= 1" in capsys.readouterr().err


# ------------------------------------------------------------------------ GPU


@pytest.mark.gpu
def test_local_cuda_cluster_one_worker_same_as_one_gpu(rng):
    """A LocalCUDACluster of one worker on the GPU, CuPy chunks: the one-GPU fit's
    answer (same solver; the GPU's graph equals the distributed one outside the float32
    band, and GPU k-means sums with atomics, so labels are compared by ARI = 1 and by
    equality outside ties)."""
    import cupy
    from sklearn.metrics import adjusted_rand_score

    from explorer import KMeans, SpectralClustering
    from explorer.testing import assert_same_graph

    dask_cuda = pytest.importorskip("dask_cuda")
    X = _moons(rng, 3000)
    kw = dict(n_clusters=2, threshold_sqdist=0.01, eigen_solver="lobpcg", n_init=3,
              random_state=0)
    ref = SpectralClustering(**kw, backend="gpu").fit(cupy.asarray(X))
    with dask_cuda.LocalCUDACluster(n_workers=1, threads_per_worker=1) as cluster, \
            distributed.Client(cluster):
        Xd = da.from_array(X, chunks=(1000, -1)).map_blocks(cupy.asarray)
        sc = SpectralClustering(**kw).fit(Xd)
        labels = sc.labels_.compute()
        assert isinstance(labels, cupy.ndarray)
        assert_same_graph(sc.graph_.to_csr(), ref.affinity_matrix_.get(), X, ref.edge_rule_)
        km = KMeans(2, n_init=2, random_state=0).fit(Xd)
        km_labels = km.labels_.compute()
    ref_km = KMeans(2, n_init=2, random_state=0).fit(cupy.asarray(X))
    assert adjusted_rand_score(ref.labels_.get(), labels.get()) == 1.0
    assert adjusted_rand_score(ref_km.labels_.get(), km_labels.get()) == 1.0
    np.testing.assert_allclose(sc.eigenvalues_, ref.eigenvalues_, atol=1e-6)


@pytest.mark.gpu
def test_local_cuda_cluster_components_embedding_on_the_worker(rng):
    """CuPy chunks with exactly k components: each row block's forest by the device
    union-find, the embedding per block on the worker: the one-GPU fit's clusters and
    embedding (one-hot rows, exactly), CuPy labels."""
    import cupy
    from sklearn.metrics import adjusted_rand_score

    from explorer import SpectralClustering

    dask_cuda = pytest.importorskip("dask_cuda")
    X = _components_data(rng, [700, 700, 700, 700])
    kw = dict(n_clusters=4, threshold_sqdist=0.3, n_init=2, random_state=0)
    ref = SpectralClustering(**kw, backend="gpu").fit(cupy.asarray(X))
    with dask_cuda.LocalCUDACluster(n_workers=1, threads_per_worker=1) as cluster, \
            distributed.Client(cluster):
        Xd = da.from_array(X, chunks=(900, -1)).map_blocks(cupy.asarray)
        sc = SpectralClustering(**kw).fit(Xd)
        labels = sc.labels_.compute()
        embedding = sc.embedding_.compute()
    assert sc.eigen_solver_ == ref.eigen_solver_ == "components"
    assert isinstance(labels, cupy.ndarray)
    assert adjusted_rand_score(ref.labels_.get(), labels.get()) == 1.0
    np.testing.assert_array_equal(embedding, ref.embedding_.get())


@pytest.mark.gpu
@pytest.mark.parametrize(
    ("d", "rule_args", "picked"),
    [
        (3, {"metric": "gaussian", "sigma": 0.05, "threshold_sqdist": 0.01}, "grid"),
        (40, {"metric": "cosine", "threshold_sim": 0.8}, "gemm"),
        (40, {"metric": "uniform", "threshold_sqdist": 5.0}, "gemm"),
        (16, {"metric": "uniform", "threshold_sqdist": 1.0}, "bruteforce"),
    ],
)
def test_gpu_row_blocks_are_the_one_gpu_graph(client, poisoned, rng, d, rule_args, picked):
    """CuPy chunks: each row block built on its worker's GPU (grid, gemm) against all
    points; put together they are build_graph's GPU matrix of that method exactly
    (chunks of one row and of odd sizes), canonical, and the reference outside the
    band. Between the two the host build runs and says why."""
    import cupy

    from explorer import EdgeRule, build_graph
    from explorer.distributed import build_row_blocks
    from explorer.graph.reference import reference_csr
    from explorer.testing import assert_same_graph, check_canonical

    n = 1000
    X = rng.random((n, d)).astype(np.float32)
    rule = EdgeRule.from_args(**rule_args)
    Xd = da.from_array(X, chunks=((1, 499, 1, 499), (d,))).map_blocks(cupy.asarray)
    g = build_row_blocks(Xd, rule, client=client)
    assert g.method == picked, g.method_reason
    csr = g.to_csr()
    check_canonical(csr)
    assert_same_graph(csr, reference_csr(X, rule), X, rule)
    if picked in ("grid", "gemm"):
        ref = build_graph(X, rule, method=picked, backend="gpu").csr.get()
        assert "GPU row block" in g.method_reason
    else:
        ref = build_graph(X, rule, method=picked, backend="cpu").csr
        assert "not its GPU" in g.method_reason
    np.testing.assert_array_equal(csr.indptr, ref.indptr)
    np.testing.assert_array_equal(csr.indices, ref.indices)
    np.testing.assert_array_equal(csr.data, ref.data)
    np.testing.assert_array_equal(g.counts, np.diff(ref.indptr))
    blocks = client.gather(g.blocks.futures)
    assert all(type(b).__module__.startswith("cupyx") for b in blocks)  # on the GPU
