"""Worker-resident Lloyd iterations (explorer.distributed._resident, issue 33) and the
labels a distributed fit hands back (explorer.distributed._labels).

The CPU tests run on a one-worker LocalCluster in this process: there the loop's
all-reduce is the identity, so the worker-resident loop runs for real. The GPU tests
need two GPUs and dask_cuda: two workers, the partial sums all-reduced by NCCL.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

from explorer import KMeans  # noqa: E402
from explorer.distributed import kmeans_fit  # noqa: E402


def _blobs(rng, n_per=200, d=3, centres=4, spread=0.4):
    X = np.concatenate([rng.normal(3.0 * c, spread, size=(n_per, d)) for c in range(centres)])
    return X[rng.permutation(X.shape[0])]


@pytest.mark.parametrize("init", ["k-means++", "random"])
def test_resident_loop_same_as_single_process(one_worker, rng, init):
    """One worker holding 3 blocks: the loop runs on the worker and gives the
    single-process labels, centres, inertia and iterations (and the client-reduced
    loop's)."""
    X = _blobs(rng).astype(np.float32)
    seed = int(rng.integers(2**31))
    ref = KMeans(4, init=init, n_init=2, random_state=seed).fit(X)
    Xd = da.from_array(X, chunks=(300, -1))
    got = kmeans_fit(Xd, 4, init=init, n_init=2, random_state=seed, client=one_worker)
    assert got.lloyd.startswith("worker-resident"), got.lloyd
    assert got.timings["lloyd_iterations"] >= got.n_iter
    np.testing.assert_array_equal(got.labels_numpy(), ref.labels_)
    np.testing.assert_allclose(got.cluster_centers, ref.cluster_centers_, rtol=1e-6, atol=1e-6)
    assert got.inertia == pytest.approx(ref.inertia_, rel=1e-9)
    assert got.n_iter == ref.n_iter_
    old = kmeans_fit(Xd, 4, init=init, n_init=2, random_state=seed, client=one_worker,
                     resident=False)
    assert old.lloyd.startswith("client-reduced")
    np.testing.assert_array_equal(old.labels_numpy(), got.labels_numpy())
    assert old.inertia == got.inertia


def test_resident_loop_reseeds_empty_clusters(one_worker):
    """An empty cluster is moved to the farthest row, as in the single-process loop."""
    X = np.array([[0.0, 0], [0.1, 0], [0, 0.1], [5, 5], [5.1, 5], [5, 5.2], [9, 0], [9.2, 0]])
    init = np.array([[0.0, 0.0], [5.0, 5.0], [100.0, 100.0]])
    ref = KMeans(3, init=init, n_init=1).fit(X)
    got = kmeans_fit(da.from_array(X, chunks=(3, -1)), 3, init=init, client=one_worker)
    assert got.lloyd.startswith("worker-resident")
    np.testing.assert_array_equal(got.labels_numpy(), ref.labels_)
    np.testing.assert_allclose(got.cluster_centers, ref.cluster_centers_)


def test_labels_after_the_client_closed(rng, monkeypatch):
    """Labels within the client budget are computed at the fit and outlive the
    client; labels left on the workers say, once the client closed, to compute them
    first (instead of dask's "Missing dependency")."""
    from explorer.distributed import _labels

    X = _blobs(rng, n_per=50)
    ref = KMeans(4, n_init=1, random_state=0).fit(X).labels_
    Xd = da.from_array(X, chunks=(120, -1))
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                                  dashboard_address=":0") as cluster, \
            distributed.Client(cluster):
        small = KMeans(4, n_init=1, random_state=0).fit(Xd).labels_
        monkeypatch.setattr(_labels, "LABELS_TO_CLIENT_MAX_BYTES", 0)
        kept = KMeans(4, n_init=1, random_state=0).fit(Xd).labels_
        assert isinstance(kept, _labels.WorkerLabels)
        np.testing.assert_array_equal(kept.compute(), ref)  # while the client is open
    assert small.chunks == Xd.chunks[:1]
    np.testing.assert_array_equal(small.compute(), ref)
    with pytest.raises(RuntimeError, match=r"labels_\.compute\(\)"):
        kept.compute()
    with pytest.raises(RuntimeError, match="client has closed"):
        np.asarray(kept[:5])


# ------------------------------------------------------------------------ GPU


def _two_gpu_cluster(monkeypatch):
    import cupy

    dask_cuda = pytest.importorskip("dask_cuda")
    if cupy.cuda.runtime.getDeviceCount() < 2:
        pytest.skip("needs 2 GPUs")
    from cupy.cuda import nccl

    if not getattr(nccl, "available", True):
        pytest.skip("CuPy without NCCL")
    # NVLink multicast off in every worker (they inherit this environment).
    monkeypatch.setenv("NCCL_NVLS_ENABLE", os.environ.get("NCCL_NVLS_ENABLE", "0"))
    return dask_cuda.LocalCUDACluster(n_workers=2, threads_per_worker=1,
                                      CUDA_VISIBLE_DEVICES="0,1", dashboard_address=":0")


def _pinned(client, X, parts):
    """X as a Dask array of CuPy row blocks, block i on worker i % workers."""
    import cupy

    workers = sorted(client.scheduler_info(n_workers=-1)["workers"])
    edges = np.linspace(0, X.shape[0], parts + 1).astype(int)
    futures = [client.submit(cupy.asarray, X[a:b], workers=[workers[i % len(workers)]],
                             pure=False)
               for i, (a, b) in enumerate(zip(edges[:-1], edges[1:], strict=True))]
    distributed.wait(futures)
    return da.concatenate([
        da.from_delayed(f, shape=(b - a, X.shape[1]), dtype=X.dtype,
                        meta=cupy.empty((0, X.shape[1]), X.dtype))
        for f, a, b in zip(futures, edges[:-1], edges[1:], strict=True)])


@pytest.mark.gpu
def test_two_gpu_workers_nccl_loop_same_as_one_gpu(rng, monkeypatch):
    """Two GPU workers, CuPy blocks on each: the Lloyd loop on the workers with the
    sums all-reduced by NCCL gives the one-GPU labels, centres and iterations from the
    same initial centres, the client-reduced loop's labels with every seeding, the
    one-GPU clusters (ARI 1) with k-means++; an empty cluster is re-seeded across the
    workers; the SpectralClustering fit's labels are the one-GPU fit's, and in
    representatives mode (the sample's k-means on both GPUs) its clusters."""
    import cupy
    from sklearn.metrics import adjusted_rand_score

    from explorer import SpectralClustering

    X = _blobs(rng, n_per=2000, d=8, centres=6, spread=0.3).astype(np.float32)
    with _two_gpu_cluster(monkeypatch) as cluster, distributed.Client(cluster) as client:
        Xd = _pinned(client, X, 4)
        start = X[:6].astype(np.float64)
        ref = KMeans(6, init=start, n_init=1).fit(cupy.asarray(X))
        got = kmeans_fit(Xd, 6, init=start, n_init=1, client=client)
        assert got.lloyd.startswith("worker-resident") and "NCCL" in got.lloyd, got.lloyd
        np.testing.assert_array_equal(got.labels_numpy(), ref.labels_.get())
        np.testing.assert_allclose(got.cluster_centers, ref.cluster_centers_.get(),
                                   rtol=1e-5, atol=1e-5)
        assert got.n_iter == ref.n_iter_
        assert got.inertia == pytest.approx(ref.inertia_, rel=1e-6)
        for init in ("k-means++", "random"):
            got = kmeans_fit(Xd, 6, init=init, n_init=2, random_state=3, client=client)
            old = kmeans_fit(Xd, 6, init=init, n_init=2, random_state=3, client=client,
                             resident=False)
            np.testing.assert_array_equal(old.labels_numpy(), got.labels_numpy())
            assert old.n_iter == got.n_iter
            ref = KMeans(6, init=init, n_init=2, random_state=3).fit(cupy.asarray(X))
            assert adjusted_rand_score(ref.labels_.get(), got.labels_numpy()) == 1.0
        # One empty cluster at the start: re-seeded at the farthest row of either GPU.
        start = np.concatenate([X[:5].astype(np.float64), [[1e3] * 8]])
        ref = KMeans(6, init=start, n_init=1).fit(cupy.asarray(X))
        got = kmeans_fit(Xd, 6, init=start, n_init=1, client=client)
        np.testing.assert_array_equal(got.labels_numpy(), ref.labels_.get())
        kw = dict(n_clusters=6, threshold_sqdist=4.0, n_init=2, random_state=0)
        sc = SpectralClustering(**kw).fit(Xd)
        labels = sc.labels_.compute()
        rk = dict(n_clusters=6, mode="representatives", n_representatives=60, n_init=2,
                  random_state=0)
        rsc = SpectralClustering(**rk).fit(Xd)
        assert "NCCL" in rsc.mode_why_, rsc.mode_why_
    ref = SpectralClustering(**kw, backend="gpu").fit(cupy.asarray(X))
    assert isinstance(labels, cupy.ndarray)  # computed at the fit, valid after close
    assert adjusted_rand_score(ref.labels_.get(), labels.get()) == 1.0
    np.testing.assert_array_equal(labels.get(), ref.labels_.get())
    rref = SpectralClustering(**rk, backend="gpu").fit(cupy.asarray(X))
    assert adjusted_rand_score(rref.labels_.get(), rsc.labels_.compute().get()) == 1.0


def test_representatives_mode_on_dask_array(one_worker, rng):
    """mode='representatives' on a Dask array: the sample's k-means on the worker, every
    row assigned on its worker, the representatives' graph in this process: the
    single-process representatives fit (same representatives, assignment and labels)."""
    from explorer import SpectralClustering

    C = rng.normal(0.0, 6.0, (4, 5))
    X = (C[rng.integers(0, 4, 3000)] + rng.normal(size=(3000, 5))).astype(np.float32)
    kw = dict(n_clusters=4, mode="representatives", n_representatives=40, n_init=2,
              random_state=0)
    ref = SpectralClustering(**kw, backend="cpu").fit(X)
    sc = SpectralClustering(**kw, backend="cpu").fit(da.from_array(X, chunks=(1100, -1)))
    assert sc.mode_ == "representatives" and "worker-resident" in sc.mode_why_
    assert sc.edge_rule_ == ref.edge_rule_
    np.testing.assert_allclose(sc.representatives_, ref.representatives_, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(sc.representative_of_.compute(), ref.representative_of_)
    np.testing.assert_array_equal(sc.labels_.compute(), ref.labels_)
    np.testing.assert_array_equal(sc.isolated_.compute(), ref.isolated_)


class _ThreadComm:
    """Ranks as threads of this process, for the loop's collectives (float64 NumPy)."""

    def __init__(self, shared, rank):
        self.shared, self.rank = shared, rank
        self.size = shared["size"]

    def _exchange(self, a):
        self.shared["parts"][self.rank] = np.array(a, dtype=np.float64)
        self.shared["barrier"].wait()
        parts = list(self.shared["parts"])
        self.shared["barrier"].wait()
        return parts

    def allreduce_sum(self, a):
        parts = self._exchange(a)
        return sum(parts[1:], parts[0].copy())

    def allgather(self, a):
        return np.stack(self._exchange(a))


def test_resident_loop_across_ranks(rng):
    """The loop itself on 3 ranks (threads with a shared-memory all-reduce: the
    collectives' contract, without GPUs), ranks holding 1 or 2 blocks, with an empty
    cluster re-seeded across ranks: the single-process labels, centres and inertia."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from explorer import kmeans as km
    from explorer.distributed._resident import resident_lloyd

    X = _blobs(rng, n_per=150, d=3).astype(np.float32)
    Xc = km.centre(X)[0]
    x_sq = km.row_sq_norms(Xc, np)
    start = np.concatenate([Xc[:3].astype(np.float64), [[50.0, 50.0, 50.0]]])
    ref_c, ref_l, ref_i, ref_n = km._lloyd_starts(Xc, x_sq, start[None], 100, 0.0, np)
    cuts = [0, 100, 250, 400, 600]
    blocks = [(Xc[a:b], x_sq[a:b]) for a, b in zip(cuts[:-1], cuts[1:], strict=True)]
    ranks = [[0], [1, 2], [3]]
    shared = {"size": 3, "parts": [None] * 3, "barrier": threading.Barrier(3)}

    def rank(r):
        return resident_lloyd([blocks[b] for b in ranks[r]], [cuts[b] for b in ranks[r]],
                              [start], 100, 0.0, _ThreadComm(shared, r))

    with ThreadPoolExecutor(3) as pool:
        results = list(pool.map(rank, range(3)))
    labels = np.concatenate([lab for r in results for lab in r["labels"]])
    np.testing.assert_array_equal(labels, ref_l)
    for r in results:
        np.testing.assert_allclose(r["centers"], ref_c, rtol=1e-9, atol=1e-9)
        assert r["inertia"] == pytest.approx(ref_i, rel=1e-9)
        assert r["n_iter"] == ref_n
