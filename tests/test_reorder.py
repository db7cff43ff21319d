"""Row reordering (explorer.graph.reorder) on the CPU: orders are permutations, the
symmetric permutation is P A Pᵀ, the NumPy Jaccard rounds equal a plain-Python reading
of the algorithm, the traffic model of an order equals that of the permuted matrix, the
auto rule reorders a shuffled graph and keeps an ordered one, and clustering gives the
same labels with and without reordering."""

from __future__ import annotations

import json

import numpy as np
import pytest
import scipy.sparse as sp

from explorer import SpectralClustering, partition_graph
from explorer.graph import _jaccard as jaccard
from explorer.graph import build_graph
from explorer.graph.reorder import (
    METHODS,
    RowOrder,
    choose_order,
    label_order,
    permute,
    row_order,
    spatial_order,
    spmm_traffic,
)
from explorer.testing import check_canonical
from tests._reorder_data import bridged_blobs


def random_graph(rng, n, degree):
    """A random symmetric float32 CSR without a diagonal, sorted columns."""
    m = n * degree // 2
    i, j = rng.integers(0, n, m), rng.integers(0, n, m)
    keep = i != j
    A = sp.coo_matrix((rng.random(int(keep.sum())).astype(np.float32) + 0.1,
                       (i[keep], j[keep])), shape=(n, n)).tocsr()
    A = ((A + A.T) * 0.5).tocsr().astype(np.float32)
    A.sum_duplicates()
    A.sort_indices()
    return A


def blobs_threshold(n, degree=40):
    """A squared-distance cutoff giving about `degree` neighbours at the blobs' centres."""
    return degree * 2 * np.pi * 0.25 * 3 / (np.pi * n)


def blobs_graph(rng, n, spread=3.0, degree=40):
    """An ε-graph of 2-D points in three blobs (centres `spread` apart, about `degree`
    neighbours at the centres), rows in random order: three components at spread 3.0;
    one large component, a few stray pieces and isolated points at 1.5 and degree 80."""
    centres = np.array([[0.0, 0.0], [spread, 0.0], [0.0, spread]])
    X = (centres[rng.integers(0, 3, n)] + 0.5 * rng.standard_normal((n, 2))).astype(np.float32)
    t = blobs_threshold(n, degree)
    g = build_graph(X, metric="gaussian", sigma=float(np.sqrt(t / 8)), threshold_sqdist=t,
                    backend="cpu")
    return X, g


def assert_permutation(perm, n):
    perm = np.asarray(perm)
    assert perm.shape == (n,) and perm.dtype == np.int64
    np.testing.assert_array_equal(np.sort(perm), np.arange(n))


def python_round(indptr, indices, group, keys, min_sim):
    """One round as the docstring of _jaccard says it, with Python sets."""
    n = len(group)
    nb = [set(indices[indptr[i]:indptr[i + 1]].tolist()) for i in range(n)]
    leaders = [i for i in range(n) if group[i] < 0
               and all(keys[j] < keys[i] for j in nb[i] if group[j] < 0)]
    out = group.copy()
    for i in leaders:
        out[i] = i
    for i in range(n):
        if group[i] >= 0 or i in leaders:
            continue
        best = None
        for j in sorted(nb[i] & set(leaders)):
            a = len((nb[i] | {i}) & (nb[j] | {j}))
            b = len((nb[i] | {i}) | (nb[j] | {j}))
            if a >= min_sim * b and (best is None or a * best[1] > best[0] * b):
                best = (a, b, j)
        if best is not None:
            out[i] = best[2]
    return out


@pytest.mark.parametrize("tau", [0.0, 0.4, 0.8, 0.95])
def test_numpy_rounds_equal_python_sets(rng, tau):
    A = random_graph(rng, int(rng.integers(20, 120)), int(rng.integers(2, 9)))
    n = A.shape[0]
    seed = int(rng.integers(0, 2**32))
    keys = jaccard.priority_keys(n, seed)
    group = np.full(n, -1, dtype=np.int32)
    while (group < 0).any():
        want = python_round(A.indptr, A.indices, group, keys, 1.0 - tau)
        is_leader = jaccard.leaders_numpy(A.indptr, A.indices, group, keys)
        jaccard.join_numpy(A.indptr, A.indices, group, is_leader, 1.0 - tau)
        np.testing.assert_array_equal(group, want)
    # Every group is led by a row of its own group.
    np.testing.assert_array_equal(group[group], group)


def test_priority_keys_distinct_and_seeded():
    a, b = jaccard.priority_keys(1000, 1), jaccard.priority_keys(1000, 2)
    assert np.unique(a).size == 1000
    np.testing.assert_array_equal(a & np.uint64(0xFFFFFFFF), np.arange(1000))
    assert not np.array_equal(a >> np.uint64(32), b >> np.uint64(32))


@pytest.mark.parametrize("method", METHODS)
def test_orders_are_permutations(rng, method):
    X, g = blobs_graph(rng, int(rng.integers(300, 1500)))
    order = row_order(g, method, X=X)
    n = g.csr.shape[0]
    assert_permutation(order.perm, n)
    assert order.method == method and order.seconds >= 0
    assert order.after is not None and order.after.floor_bytes == order.before.floor_bytes


def test_jaccard_order_is_a_function_of_graph_and_seed(rng):
    _, g = blobs_graph(rng, 800)
    a, b = row_order(g, "jaccard", seed=3), row_order(g, "jaccard", seed=3)
    np.testing.assert_array_equal(a.perm, b.perm)
    assert a.info["level_rows"][0] == 800 and a.info["level_rows"][-1] < 800


def test_jaccard_groups_identical_rows_together():
    # Two cliques of 6 (every row of a clique has the same N[i]) joined by one edge.
    n = 12
    A = np.zeros((n, n), dtype=np.float32)
    A[:6, :6] = 1
    A[6:, 6:] = 1
    np.fill_diagonal(A, 0)
    A[5, 6] = A[6, 5] = 1
    perm = np.random.default_rng(0).permutation(n)
    S = sp.csr_matrix(A[perm][:, perm])
    parents, _ = jaccard.jaccard_levels(S.indptr, S.indices, tau=0.5)
    first = parents[0]
    side = perm < 6  # which clique each row of S is in
    for c in (side, ~side):
        rows = np.flatnonzero(c)
        # Rows 0..4 and 7..11 of A (not the bridge ends) share their group.
        inner = rows[(perm[rows] != 5) & (perm[rows] != 6)]
        assert np.unique(first[inner]).size == 1


def test_permute_is_symmetric_permutation(rng):
    A = random_graph(rng, 300, 6)
    perm = rng.permutation(300)
    B = permute(A, perm)
    check_canonical(B)
    np.testing.assert_array_equal(B.toarray(), A.toarray()[perm][:, perm])
    assert B.indices.dtype == A.indices.dtype and B.dtype == A.dtype


@pytest.mark.parametrize("bad", [np.arange(5), np.zeros(300, dtype=np.int64),
                                 np.arange(300) + 1, np.arange(300.0)])
def test_permute_refuses_non_permutations(rng, bad):
    A = random_graph(rng, 300, 4)
    with pytest.raises(ValueError, match="perm"):
        permute(A, bad)


def test_traffic_of_an_order_is_that_of_the_permuted_matrix(rng):
    A = random_graph(rng, 5000, 8)
    perm = rng.permutation(5000)
    for tile in (16, 256):
        a = spmm_traffic(A, perm=perm, tile=tile, sample_tiles=50)
        b = spmm_traffic(permute(A, perm), tile=tile, sample_tiles=50)
        assert a == b


def test_traffic_counts_distinct_columns():
    # A tile of 2 rows with columns {1, 2} and {2, 3} touches 3 columns.
    A = sp.csr_matrix(np.array([[0, 1, 1, 0], [1, 0, 1, 1], [1, 1, 0, 0], [0, 1, 0, 0]],
                               dtype=np.float32))
    t = spmm_traffic(A, tile=2, block=8)
    assert t.columns_per_tile == (3 + 3) / 2
    assert t.x_bytes == 6 * 32 and t.floor_bytes <= t.bytes


def test_auto_reorders_shuffled_and_keeps_ordered(rng):
    X, g = blobs_graph(rng, 20000)
    shuffled = choose_order(g, "auto", X=X, n_products=1000)
    assert shuffled.reordered, shuffled.reason
    assert shuffled.before.ratio > 2 and shuffled.after.ratio < 1.5
    ordered_csr = permute(g.csr, shuffled.perm)
    kept = choose_order(ordered_csr, "auto", X=X[shuffled.perm], n_products=1000)
    assert not kept.reordered and kept.method == "none"
    assert "kept" in kept.reason and "floor" in kept.reason
    none = choose_order(g, "auto", n_products=0)
    assert not none.reordered and "no sparse products" in none.reason


def test_errors_name_the_argument(rng):
    X, g = blobs_graph(rng, 300)
    with pytest.raises(ValueError, match="method='hilbert'"):
        row_order(g, "hilbert")
    with pytest.raises(ValueError, match="needs the points"):
        row_order(g, "spatial")
    with pytest.raises(ValueError, match="X must be"):
        row_order(g, "spatial", X=X[:10])
    with pytest.raises(ValueError, match="tau"):
        row_order(g, "jaccard", tau=1.0)
    with pytest.raises(ValueError, match="reorder='spatial' needs the points"):
        partition_graph(g.csr, 3, reorder="spatial")
    with pytest.raises(ValueError, match="reorder="):
        SpectralClustering(3, reorder="sorted").fit(X)


@pytest.mark.parametrize("reorder", ["jaccard", "rcm", "auto"])
def test_partition_labels_equal_with_and_without(rng, reorder):
    # Chebyshev (n > 1000) on a connected graph: the iterative path the rule is for.
    X, g = blobs_graph(rng, 2500)
    seed = int(rng.integers(0, 2**31))
    kw = dict(eigen_solver="chebyshev", eigen_tol=1e-6, random_state=seed)
    base = partition_graph(g.csr, 3, **kw)
    part = partition_graph(g.csr, 3, reorder=reorder, **kw)
    assert isinstance(part.reorder, RowOrder)
    if reorder != "auto":
        assert part.reorder.reordered and "reorder" in part.timings
    np.testing.assert_array_equal(part.labels, base.labels)
    # The same eigenspace (a basis of a repeated eigenvalue may rotate): the cosines of
    # the principal angles between the two spans are 1.
    ok = ~base.embedding.isolated
    q1 = np.linalg.qr(part.embedding.vectors[ok])[0]
    q2 = np.linalg.qr(base.embedding.vectors[ok])[0]
    np.testing.assert_allclose(np.linalg.svd(q1.T @ q2, compute_uv=False), 1.0, atol=1e-3)


@pytest.mark.filterwarnings("ignore:the graph has .* connected components")
@pytest.mark.parametrize("solver", ["chebyshev", "lobpcg", "lanczos"])
def test_labels_identical_over_seeds_and_solvers(rng, solver):
    # One component (stray pieces and isolated points dropped), so the solver
    # iterates from its random start at the default tolerance. The start is drawn in
    # the given row order, so the labels are identical, ids included.
    # Before clusters were numbered by first point, LOBPCG's ids differed in 3 of 80
    # fits (the same partition).
    X, t = bridged_blobs(rng, 3000, per_bridge=40)
    g = build_graph(X, metric="gaussian", sigma=float(np.sqrt(t / 8)), threshold_sqdist=t,
                    backend="cpu")
    for seed in rng.integers(0, 2**31, 3):
        kw = dict(eigen_solver=solver, random_state=int(seed))
        base = partition_graph(g.csr, 3, **kw)
        for reorder in ("jaccard", "rcm"):
            part = partition_graph(g.csr, 3, reorder=reorder, **kw)
            assert part.reorder.reordered
            if solver == "lobpcg":
                # Its vectors agree to its tolerance only (below): a point on a
                # boundary can move (seen: 1 of 3120 in 1 of 120 fits); the ids are
                # the same (numbered by first point).
                moved = int((part.labels != base.labels).sum())
                assert moved <= 3, (solver, seed, reorder, moved)
            else:
                assert np.array_equal(part.labels, base.labels), (solver, seed, reorder)
                # The same start and the same iterations: the vectors agree to the
                # products' rounding as the iteration carries it (up to 1.4e-9 seen on
                # Lanczos; drawn in the new order they differed by ~1e-4, the tolerance).
                # LOBPCG's search direction of an exact eigenvector (D^1/2 1) is
                # rounding noise that SVQB scales to unit length, so its iterates part
                # after a few steps and agree to its tolerance only (~1e-5 here).
                assert part.embedding.iterations == base.embedding.iterations
                np.testing.assert_allclose(part.embedding.vectors, base.embedding.vectors,
                                           atol=1e-7)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("solver, steps", [("chebyshev", 3), ("lobpcg", 2), ("lanczos", None)])
def test_embedding_row_ids_give_the_unpermuted_start(rng, solver, steps, monkeypatch):
    # spectral_embedding of P S Pᵀ with row_ids=perm, brought back, is the embedding
    # of S, with isolated vertices in both (the solver's rows are a subset).
    import scipy.sparse.linalg

    starts = []
    eigsh = scipy.sparse.linalg.eigsh

    def recording_eigsh(*args, v0=None, **kwargs):
        starts.append(np.array(v0))
        return eigsh(*args, v0=v0, **kwargs)

    monkeypatch.setattr(scipy.sparse.linalg, "eigsh", recording_eigsh)
    X, g = blobs_graph(rng, 2500, spread=1.5, degree=80)
    S = g.csr.copy()
    lone = rng.choice(S.shape[0], 20, replace=False)
    S = sp.diags(np.isin(np.arange(S.shape[0]), lone, invert=True).astype(np.float32))
    S = (S @ g.csr @ S).tocsr()
    S.eliminate_zeros()
    S = S.astype(np.float32)
    perm = rng.permutation(S.shape[0])
    from explorer import spectral_embedding

    seed = int(rng.integers(0, 2**31))
    a = spectral_embedding(S, 4, solver=solver, random_state=seed, max_iter=steps)
    b = spectral_embedding(permute(S, perm), 4, solver=solver, random_state=seed,
                           row_ids=perm, max_iter=steps)
    inv = np.argsort(perm)
    np.testing.assert_array_equal(b.isolated[inv], a.isolated)
    if solver == "lanczos":
        # ARPACK got the start of each user's row whatever its position.
        ids_a = np.flatnonzero(~a.isolated)
        ids_b = perm[np.flatnonzero(~b.isolated)]
        np.testing.assert_array_equal(starts[1][np.argsort(ids_b)], starts[0])
        # Its answers are not compared: the stray pieces make eigenvalue 0 of L_sym
        # multiple, and which basis of it converged (and, at times, whether ARPACK
        # finds every copy) turns with the permuted sums' rounding. Seen over seeds:
        # vectors 1.1 apart; one run found 0 four times, the other three.
        assert len(starts) == 2 and ids_a.size == starts[0].size
        return
    # From the same start: equal to rounding (the fixed step counts stop the solvers
    # before the rounding noise of their converged vectors' search directions has
    # grown); a start drawn in the permuted order gives another answer, apart by the
    # residual.
    np.testing.assert_allclose(np.abs(b.vectors[inv]), np.abs(a.vectors), atol=1e-9)
    c = spectral_embedding(permute(S, perm), 4, solver=solver, random_state=seed,
                           max_iter=steps)
    assert np.nanmax(np.abs(np.abs(c.vectors[inv]) - np.abs(a.vectors))) > 1e-6


def test_row_ids_are_checked(rng):
    from explorer import spectral_embedding

    _, g = blobs_graph(rng, 300)
    n = g.csr.shape[0]
    for bad in (np.zeros(n, dtype=np.int64), np.arange(n - 1), np.arange(n) + 1,
                np.arange(n, dtype=float)):
        with pytest.raises(ValueError, match="row_ids must"):
            spectral_embedding(g.csr, 3, row_ids=bad)


@pytest.mark.filterwarnings("ignore:the graph has .* connected components")
def test_components_labelled_once_with_stray_pieces(rng, monkeypatch):
    # Stray pieces dropped and more components than k: the stray search's labels serve
    # the k largest and the embedding (zeroed weights keep the pattern that connects).
    import explorer.components
    import explorer.partition

    # Most draws have stray pieces and more than 3 components; some (1 in ~8) not:
    # draw until one has.
    for _ in range(30):
        X, g = blobs_graph(rng, 3000, spread=1.5, degree=80)
        base = partition_graph(g.csr, 3, random_state=0)
        if base.stray_pieces > 0 and base.n_components > 3:
            break
    assert base.stray_pieces > 0 and base.n_components > 3
    calls = []
    real = explorer.components.component_labels

    def counted(csr):
        calls.append(csr.shape)
        return real(csr)

    monkeypatch.setattr(explorer.components, "component_labels", counted)
    monkeypatch.setattr(explorer.partition, "component_labels", counted)
    part = partition_graph(g.csr, 3, random_state=0)
    assert len(calls) == 1
    np.testing.assert_array_equal(part.labels, base.labels)
    assert (part.n_dropped, part.n_stray) == (base.n_dropped, base.n_stray)


@pytest.mark.filterwarnings("ignore:the graph has .* connected components")
def test_estimator_spatial_labels_equal(rng):
    X, _ = blobs_graph(rng, 1500)
    t = blobs_threshold(1500, degree=150)
    kw = dict(sigma=float(np.sqrt(t / 8)), threshold_sqdist=t, backend="cpu", random_state=0,
              eigen_solver="chebyshev", eigen_tol=1e-6)
    base = SpectralClustering(3, **kw).fit(X)
    sc = SpectralClustering(3, reorder="spatial", **kw).fit(X)
    assert sc.reorder_.method == "spatial" and sc.reorder_.reordered
    assert base.reorder_ is None
    np.testing.assert_array_equal(sc.labels_, base.labels_)


def test_given_row_order_is_used(rng):
    X, g = blobs_graph(rng, 1200)
    order = row_order(g, "rcm")
    part = partition_graph(g.csr, 3, reorder=order, random_state=0)
    assert part.reorder is order
    base = partition_graph(g.csr, 3, random_state=0)
    np.testing.assert_array_equal(part.labels, base.labels)


def test_label_order_groups_clusters(rng):
    labels = rng.integers(-1, 4, 500)
    within = rng.permutation(500)
    for w in (None, within):
        perm = label_order(labels, w)
        assert_permutation(perm, 500)
        seen = labels[perm]
        key = np.where(seen < 0, 4, seen)
        assert np.all(np.diff(key) >= 0)
        # Within a cluster, the order of `within` (or the given order).
        ref = np.arange(500) if w is None else w
        rank = np.empty(500, dtype=np.int64)
        rank[ref] = np.arange(500)
        for c in np.unique(key):
            assert np.all(np.diff(rank[perm[key == c]]) > 0)


def test_unsorted_columns_give_the_same_order(rng):
    A = random_graph(rng, 400, 8)
    shuffled = A.copy()
    for i in range(400):  # reverse every row's columns
        a, b = shuffled.indptr[i], shuffled.indptr[i + 1]
        shuffled.indices[a:b] = shuffled.indices[a:b][::-1].copy()
        shuffled.data[a:b] = shuffled.data[a:b][::-1].copy()
    shuffled.has_sorted_indices = False
    np.testing.assert_array_equal(row_order(shuffled, "jaccard").perm,
                                  row_order(A, "jaccard").perm)


def test_cli_reorder_prints_and_records_the_order(capsys, tmp_path):
    from explorer import cli

    path = tmp_path / "r.json"
    code = cli.main(["run", "syn4d", "--n-samples", "3000", "--backend", "cpu",
                     "--eigen-solver", "chebyshev", "--reorder", "jaccard", "--json", str(path)])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "row order" in out and "jaccard order" in out
    result = json.loads(path.read_text())
    assert result["reorder"]["method"] == "jaccard"
    assert result["reorder"]["after"]["ratio"] < result["reorder"]["before"]["ratio"]
    assert "reorder" in result["timings"] and result["scores"]["ari"] > 0.99


def test_dask_fit_refuses_reorder(rng):
    da = pytest.importorskip("dask.array")
    X = da.from_array(rng.random((200, 2)).astype(np.float32), chunks=(100, 2))
    with pytest.raises(ValueError, match="reorder='rcm' is for a single-process fit"):
        SpectralClustering(2, reorder="rcm").fit(X)


def test_spatial_order_of_many_features_follows_the_principal_axes(rng):
    # 12-D points on a line (plus noise): the Morton order of the leading axes sorts them
    # along it.
    t = rng.random(3000)
    direction = rng.standard_normal(12)
    X = (np.outer(t, direction) + 1e-4 * rng.standard_normal((3000, 12))).astype(np.float32)
    perm = spatial_order(X, np)
    assert_permutation(perm, 3000)
    along = t[perm]
    assert abs(np.corrcoef(along, np.arange(3000))[0, 1]) > 0.99
