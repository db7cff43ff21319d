"""The exact mode's eigensolver resident on the workers (explorer.distributed._exact,
issue 33 item 2): Chebyshev-filtered subspace iteration SPMD, halo rows exchanged per
product, Gram matrices all-reduced.

On the CPU: the halo bookkeeping of several ranks in one process (each rank's
functions called with its data, the buffers exchanged by hand, and the whole solve on
ranks as threads with a shared-memory exchange), and the fit on a one-worker
LocalCluster, where the loop runs for real with LocalComm. The GPU test needs two GPUs
and dask_cuda: two workers, halo by NCCL send/recv.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import scipy.sparse as sp

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

from explorer import SpectralClustering  # noqa: E402
from explorer.distributed._exact import (  # noqa: E402
    RankRows,
    extend,
    resident_chebyshev,
    send_lists,
    split_rows,
)
from explorer.embedding import chebyshev  # noqa: E402


def _random_normalised(rng, m, density, bands=False):
    """A random symmetric non-negative m × m CSR scaled to D^-1/2 S D^-1/2 (float64);
    `bands`: entries near the diagonal only (small halos), and the first off-diagonal
    (a path through every row), so that every split of the rows has a halo whatever
    the draw."""
    S = sp.random(m, m, density=density, random_state=int(rng.integers(2**31)), format="csr")
    if bands:
        S = sp.triu(sp.tril(S, 12), -12) + sp.eye(m, k=1) * 0.5
    S = S + S.T + sp.eye(m) * 1e-3
    S = sp.csr_matrix(S)
    S.sum_duplicates()
    S.sort_indices()
    dinv = 1.0 / np.sqrt(np.asarray(S.sum(axis=1)).ravel())
    A = sp.csr_matrix(sp.diags(dinv) @ S @ sp.diags(dinv))
    A.sort_indices()
    return A


def _ranks(A, bounds):
    rows = [RankRows(A[bounds[r] : bounds[r + 1]], r, bounds) for r in range(len(bounds) - 1)]
    needs = [r.needs for r in rows]
    sends = [send_lists(r, bounds, needs) for r in range(len(rows))]
    return rows, sends


def _exchange_by_hand(rows, sends, X, bounds):
    """Rank r's received halo: from each peer p, in rank order, the rows p sends r."""
    out = []
    for r in range(len(rows)):
        parts = [X[bounds[p] : bounds[p + 1]][sends[p][r]] for p in range(len(rows))
                 if sends[p][r] is not None]
        out.append(np.concatenate(parts) if parts else X[:0])
    return out


@pytest.mark.parametrize("bands", [False, True])
@pytest.mark.parametrize("n_ranks", [1, 2, 3])
def test_halo_bookkeeping_product(rng, n_ranks, bands):
    """Each rank's renumbered rows times ``[halo below, own, halo above]``, the halo
    rows exchanged by hand from the send lists, equal its rows of A @ X bit for bit;
    the halo is exactly the remote rows the columns name."""
    m = 240
    A = _random_normalised(rng, m, 0.03, bands)
    X = rng.standard_normal((m, 5))
    bounds = split_rows(m, n_ranks)
    rows, sends = _ranks(A, bounds)
    halos = _exchange_by_hand(rows, sends, X, bounds)
    want = A @ X
    for r, rank in enumerate(rows):
        lo, hi = bounds[r], bounds[r + 1]
        cols = np.unique(A[lo:hi].indices)
        remote = cols[(cols < lo) | (cols >= hi)]
        np.testing.assert_array_equal(np.concatenate(rank.needs), remote)
        assert rank.halo_rows == remote.shape[0] == halos[r].shape[0]
        assert rank.A.has_sorted_indices or sp.csr_matrix(rank.A).has_sorted_indices
        got = rank.A @ extend(X[lo:hi], halos[r], rank.n_below, np)
        np.testing.assert_array_equal(got, want[lo:hi])
    if n_ranks == 1:
        assert rows[0].halo_rows == 0


class _ThreadComm:
    """Ranks as threads of this process: all-reduce and halo exchange through shared
    memory (the collectives' contract, without GPUs)."""

    def __init__(self, shared, rank):
        self.shared, self.rank = shared, rank
        self.size = shared["size"]

    def _post(self, value):
        self.shared["parts"][self.rank] = value
        self.shared["barrier"].wait()
        parts = list(self.shared["parts"])
        self.shared["barrier"].wait()
        return parts

    def allreduce_sum(self, a):
        parts = self._post(np.array(a, dtype=np.float64))
        return sum(parts[1:], parts[0].copy())

    def allgather(self, a):
        return np.stack(self._post(np.array(a, dtype=np.float64)))

    def exchange(self, Y, sends, recv_counts):
        posted = self._post([None if s is None else Y[s].copy() for s in sends])
        got = [posted[p][self.rank] for p in range(self.size)
               if posted[p][self.rank] is not None]
        assert [g.shape[0] for g in got] == [c for c in recv_counts if c]
        return np.concatenate(got) if got else Y[:0]


def test_resident_solve_across_ranks(rng):
    """The SPMD Chebyshev solve on 3 ranks (threads, shared-memory exchange): every rank
    takes the same steps and the eigenpairs are the one-process solve's."""
    m, k = 300, 3
    A = _random_normalised(rng, m, 0.02, bands=True)
    mu, V, products, _ = chebyshev.chebyshev_subspace(A, k, random_state=7)
    bounds = split_rows(m, 3)
    rows, sends = _ranks(A, bounds)
    shared = {"size": 3, "parts": [None] * 3, "barrier": threading.Barrier(3)}
    seed = np.random.RandomState(7).randint(2**31 - 1)
    block = chebyshev.default_block(k, m)

    def rank(r):
        return resident_chebyshev(rows[r], sends[r], None, k, block, chebyshev.DEFAULT_DEGREE,
                                  chebyshev.DEFAULT_TOL, chebyshev.DEFAULT_MAX_ITER,
                                  "float64", seed, session=_ThreadComm(shared, r))

    with ThreadPoolExecutor(3) as pool:
        results = list(pool.map(rank, range(3)))
    for res in results:
        assert res["products"] == results[0]["products"]
        np.testing.assert_array_equal(res["values"], results[0]["values"])
        assert res["exchanges"] > 0 and res["halo_rows"] > 0
    np.testing.assert_allclose(results[0]["values"], mu, rtol=0, atol=1e-9)
    got = np.concatenate([res["vectors"] for res in results])
    # The same span: |V^T W| is the identity up to the tolerance's angles.
    np.testing.assert_allclose(np.abs(V.T @ got), np.eye(k), atol=1e-4)


def _blobs2d(rng, n, centres=3):
    """n points of `centres` Gaussian blobs, 20 of them on a line from each centre to
    the next (0.25 apart at most, inside the tests' ε radius 0.77): one connected graph
    whatever the draw (the blobs' tails alone join them only now and then)."""
    C = np.array([[0.0, 0.0], [4.0, 0.5], [1.0, 4.0]])[:centres]
    t = np.linspace(0.0, 1.0, 20)[:, None]
    bridges = [C[i] + t * (C[i + 1] - C[i]) for i in range(centres - 1)]
    m = n - 20 * (centres - 1)
    X = np.concatenate([C[rng.integers(0, centres, m)] + rng.normal(scale=0.6, size=(m, 2)),
                        *bridges])
    return X[rng.permutation(n)].astype(np.float32)


@pytest.mark.parametrize(("n", "chunks", "solver"), [(2400, 500, "chebyshev"),
                                                       (1500, 1500, "auto")])
def test_resident_fit_same_as_single_process(one_worker, rng, n, chunks, solver):
    """A connected graph on a one-worker cluster (5 blocks or one): the Chebyshev
    solve runs on the worker (LocalComm) and gives the one-process fit's eigenvalues
    and clusters."""
    X = _blobs2d(rng, n)
    kw = dict(n_clusters=3, threshold_sqdist=0.6, n_init=2, random_state=0)
    ref = SpectralClustering(**kw, eigen_solver="chebyshev", backend="cpu").fit(X)
    sc = SpectralClustering(**kw, eigen_solver=solver).fit(da.from_array(X, chunks=(chunks, -1)))
    assert sc.eigen_solver_ == "chebyshev", sc.eigen_solver_
    assert "worker-resident Chebyshev" in sc.eigen_solver_why_, sc.eigen_solver_why_
    assert sc.timings_["resident.ranks"] == 1 and sc.timings_["resident.halo_rows"] == 0
    np.testing.assert_allclose(sc.eigenvalues_, ref.eigenvalues_, rtol=0, atol=1e-6)
    from sklearn.metrics import adjusted_rand_score

    assert adjusted_rand_score(ref.labels_, sc.labels_.compute()) == 1.0


def test_spatial_order_on_one_worker(one_worker, rng):
    """The spatial order's path (a rank's rows rebuilt in the points' Morton order, the
    vectors put back) on one worker: the embedding of the blocks as built."""
    from explorer import EdgeRule
    from explorer.distributed import build_row_blocks, distributed_embedding
    from explorer.distributed._blocks import RowBlocks
    from explorer.distributed._exact import exact_plan
    from explorer.distributed._graph import gather_points

    X = _blobs2d(rng, 1800)
    Xd = da.from_array(X, chunks=(400, -1))
    rule = EdgeRule.from_args(metric="gaussian", sigma=0.5, threshold_sqdist=0.6)
    g = build_row_blocks(Xd, rule, client=one_worker)
    points = one_worker.submit(gather_points, RowBlocks.from_dask(one_worker, Xd).futures)
    plan = exact_plan(g.blocks)
    assert plan[1] == "local"
    given, _ = distributed_embedding(g, 3, solver="chebyshev", random_state=1, resident=plan)
    spatial, _ = distributed_embedding(g, 3, solver="chebyshev", random_state=1,
                                       resident=plan, order="spatial", points=points)
    np.testing.assert_allclose(spatial.eigenvalues, given.eigenvalues, rtol=0, atol=1e-9)
    # The same embedding up to a rotation within eigenvalues that tie to rounding
    # (two blobs barely joined give 0 and 1e-11): the columns span the same space.
    qa = np.linalg.qr(np.nan_to_num(given.embedding))[0]
    qb = np.linalg.qr(np.nan_to_num(spatial.embedding))[0]
    assert np.linalg.svd(qa.T @ qb, compute_uv=False).min() > 1 - 1e-9
    np.testing.assert_array_equal(spatial.isolated, given.isolated)


def test_resident_product_equals_assembled_product(one_worker, rng):
    """One worker, several blocks of a random graph: the rank's rows (its A blocks
    stacked, :func:`rank_rows`) times a block equal A @ X of the assembled matrix."""
    from explorer import EdgeRule
    from explorer.distributed import build_row_blocks
    from explorer.distributed._exact import HaloBlock, rank_rows
    from explorer.distributed._operator import normalised_blocks
    from explorer.distributed._resident import LocalComm

    X = rng.random((900, 3)).astype(np.float32)
    g = build_row_blocks(da.from_array(X, chunks=(250, -1)), EdgeRule.from_args(
        metric="gaussian", sigma=0.1, threshold_sqdist=0.01), client=one_worker)
    keep = np.flatnonzero(g.degrees > 0)
    new_id = np.full(g.n, -1)
    new_id[keep] = np.arange(keep.shape[0])
    blocks = normalised_blocks(g, new_id, 1.0 / np.sqrt(g.degrees[keep]))
    parts = one_worker.gather(blocks.futures)
    whole = sp.vstack(parts, format="csr")
    rows = rank_rows([0, keep.shape[0]], 0, *parts)
    V = rng.standard_normal((keep.shape[0], 8))
    ops = HaloBlock(rows, LocalComm(), [None], np.dtype(np.float64), 0)
    np.testing.assert_array_equal(ops.product(V), whole @ V)


# ------------------------------------------------------------------------ GPU


@pytest.mark.gpu
def test_two_gpu_workers_resident_exact_fit_same_as_one_gpu(rng, monkeypatch):
    """Two GPU workers: the exact fit's Chebyshev solve on both (rows in the Morton
    order, halo rows by NCCL send/recv, Gram matrices all-reduced) gives the one-GPU
    fit's clusters and eigenvalues."""
    import cupy
    from sklearn.metrics import adjusted_rand_score
    from test_distributed_resident import _pinned, _two_gpu_cluster

    X = _blobs2d(rng, 20_000)
    kw = dict(n_clusters=3, threshold_sqdist=0.05, n_init=2, random_state=0)
    ref = SpectralClustering(**kw, eigen_solver="chebyshev", backend="gpu").fit(cupy.asarray(X))
    with _two_gpu_cluster(monkeypatch) as cluster, distributed.Client(cluster) as client:
        Xd = _pinned(client, X, 4)
        sc = SpectralClustering(**kw, eigen_solver="chebyshev").fit(Xd)
        labels = sc.labels_.compute()
    assert sc.eigen_solver_ == "chebyshev"
    assert "NCCL" in sc.eigen_solver_why_, sc.eigen_solver_why_
    assert sc.timings_["resident.ranks"] == 2
    assert 0 < sc.timings_["resident.halo_rows"] < 0.2 * X.shape[0]  # the cut only
    assert sc.timings_["resident.exchanges"] > 0
    np.testing.assert_allclose(sc.eigenvalues_, ref.eigenvalues_, rtol=0, atol=1e-5)
    assert adjusted_rand_score(ref.labels_.get(), labels.get()) == 1.0
