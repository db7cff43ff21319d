"""kNN graphs and self-tuning σ on the CPU: semantics, the float64 reference, the builders.

The CPU builders decide every pair with the reference arithmetic, so they equal
:func:`explorer.graph.reference.reference_csr` bit for bit on every data flavour,
duplicates and lattice ties included. The reference itself is checked against the
definitions on small cases worked by hand and by an independent dense computation.
"""

import warnings

import numpy as np
import pytest

from explorer import SpectralClustering
from explorer.cli import main as cli_main
from explorer.graph import build_graph, graph_stats
from explorer.graph.knn import edge_sqdist, knn_csr
from explorer.graph.reference import (
    pair_values,
    reference_csr,
    reference_knn,
    reference_local_sqdist,
)
from explorer.graph.rule import EDGE_FIELDS, EdgeRule
from explorer.metrics import adjusted_rand_score
from explorer.testing import (
    assert_same_knn_graph,
    check_canonical,
    tricky_data,
)

GRAPHS = ("knn", "mutual_knn")
WEIGHTS = (("gaussian", 0.4), ("gaussian", "local"), ("cosine", None), ("uniform", None))


def assert_identical(a, b):
    assert a.shape == b.shape
    for name in ("indptr", "indices", "data"):
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype, (name, x.dtype, y.dtype)
        assert np.array_equal(x.view(np.uint8), y.view(np.uint8)), f"{name} differs"


def dense_knn_graph(X, rule):
    """An independent dense float64 kNN graph (for tiny n): argsort with a stable
    sort on the key is 'ties by the lower index'."""
    compared, _ = pair_values(X, X, rule)
    key = compared if rule.compares == "sqdist" else -compared
    key = np.where(np.isnan(key), np.inf, key)
    n = X.shape[0]
    np.fill_diagonal(key, np.inf)
    A = np.zeros((n, n), dtype=bool)
    for i in range(n):
        order = np.argsort(key[i], kind="stable")[: rule.n_neighbors]
        A[i, order[np.isfinite(key[i, order])]] = True
    S = (A | A.T) if rule.graph == "knn" else (A & A.T)
    if rule.has_threshold:
        S &= (compared < rule.sqdist_cutoff) if rule.compares == "sqdist" else (
            compared > rule.threshold)
    return S, compared


# ----------------------------------------------------------------- the edge rule


def test_rule_fields_are_declared_for_the_front_ends():
    assert EDGE_FIELDS["graph"].choices == ("epsilon", "knn", "mutual_knn")
    assert EDGE_FIELDS["n_neighbors"].check(3) == 3
    assert EDGE_FIELDS["sigma"].check("local") == "local"
    with pytest.raises(TypeError, match=r"sigma must be a real number; got 'wide'"):
        EDGE_FIELDS["sigma"].check("wide")
    with pytest.raises(ValueError, match=r"n_neighbors=0 is out of range"):
        EdgeRule.from_args("uniform", graph="knn", n_neighbors=0)
    with pytest.raises(ValueError, match=r"graph='star' is not allowed"):
        EdgeRule.from_args("uniform", threshold_sqdist=1.0, graph="star")


def test_knn_rules_need_no_threshold_and_epsilon_rules_do():
    rule = EdgeRule.from_args("gaussian", "local", graph="mutual_knn", n_neighbors=4)
    assert not rule.has_threshold and rule.local_sigma and rule.is_knn
    assert rule.threshold_sqdist is None and rule.radius is None
    assert rule.describe() == "mutual_knn k=4 (mutual), gaussian σ=local (m=7)"
    assert EdgeRule.from_args(**rule.to_kwargs()) == rule
    with pytest.raises(ValueError, match="give exactly one of threshold_sqdist"):
        EdgeRule.from_args("uniform")
    with pytest.raises(ValueError, match="graph='epsilon' needs a threshold"):
        EdgeRule("uniform", None, None, None)
    with pytest.raises(ValueError, match=r"sigma='local' with threshold_sim"):
        EdgeRule.from_args("gaussian", "local", threshold_sim=0.5)
    with pytest.raises(ValueError, match=r"metric='gaussian' needs sigma"):
        EdgeRule.from_args("gaussian", graph="knn")
    # The ε rule's keywords are unchanged (the suggestion's dictionaries keep their keys).
    eps = EdgeRule.from_args("gaussian", 0.1, threshold_sqdist=0.2)
    assert set(eps.to_kwargs()) == {"metric", "sigma", "threshold_sqdist", "threshold_sim"}
    local = EdgeRule.from_args("gaussian", "local", threshold_sqdist=0.2, local_neighbor=3)
    assert local.pattern_rule == EdgeRule.from_args("uniform", threshold_sqdist=0.2)
    assert local.to_kwargs()["local_neighbor"] == 3


def test_suggest_for_a_knn_graph_searches_no_threshold():
    X = np.random.default_rng(0).random((200, 2)).astype(np.float32)
    rule = EdgeRule.suggest(X, graph="knn", n_neighbors=5)
    assert (rule.graph, rule.n_neighbors, rule.metric, rule.sigma) == ("knn", 5, "gaussian",
                                                                         "local")
    assert not rule.has_threshold and set(rule.suggested) == {"metric", "sigma"}
    given = EdgeRule.suggest(X, "cosine", graph="mutual_knn", threshold_sim=0.1)
    assert (given.metric, given.threshold_sim, given.suggested) == ("cosine", 0.1, ())


# ----------------------------------------------------------------- the reference


def test_reference_breaks_ties_by_the_lower_index():
    # Point 2 has points 1 and 3 at the same distance: with k=1 it takes 1.
    X = np.array([[0.0], [1.0], [2.0], [3.0], [10.0]], dtype=np.float32)
    rule = EdgeRule.from_args("uniform", graph="knn", n_neighbors=1)
    nbr, val = reference_knn(X, rule, 1)
    assert nbr[:, 0].tolist() == [1, 0, 1, 2, 3]
    assert val[:, 0].tolist() == [1.0, 1.0, 1.0, 1.0, 49.0]
    S = reference_csr(X, rule).toarray() > 0
    expect = {(0, 1), (1, 2), (2, 3), (3, 4)}
    assert set(map(tuple, np.argwhere(np.triu(S)).tolist())) == expect
    mutual = reference_csr(X, EdgeRule.from_args("uniform", graph="mutual_knn", n_neighbors=1))
    assert set(map(tuple, np.argwhere(np.triu(mutual.toarray())).tolist())) == {(0, 1)}


def test_reference_local_sigma_by_hand():
    X = np.array([[0.0], [1.0], [3.0], [7.0]], dtype=np.float32)
    rule = EdgeRule.from_args("gaussian", "local", graph="knn", n_neighbors=1, local_neighbor=2)
    sig2 = reference_local_sqdist(X, 2)
    assert sig2.tolist() == [9.0, 4.0, 9.0, 36.0]  # second nearest of each
    S = reference_csr(X, rule).toarray()
    sig = np.sqrt(sig2)
    assert S[0, 1] == np.float32(np.exp(-1.0 / (sig[0] * sig[1])))
    assert S[2, 3] == np.float32(np.exp(-16.0 / (sig[2] * sig[3])))
    assert S[0, 2] == 0 and S[1, 3] == 0


def test_local_sigma_of_duplicates_follows_the_limits():
    # Three copies: σ = 0 for them with m = 2; a coincident pair weighs 1, others 0.
    X = np.array([[0.0], [0.0], [0.0], [5.0]], dtype=np.float32)
    rule = EdgeRule.from_args("gaussian", "local", graph="knn", n_neighbors=3, local_neighbor=2)
    S = reference_csr(X, rule).toarray()
    assert S[0, 1] == 1.0 and S[1, 2] == 1.0
    assert S[0, 3] == 0.0 and S[3, 0] == 0.0
    G = build_graph(X, rule, backend="cpu")
    assert_identical(G.csr, reference_csr(X, rule))


@pytest.mark.parametrize("graph", GRAPHS)
@pytest.mark.parametrize("metric", ("uniform", "cosine"))
def test_reference_equals_an_independent_dense_computation(graph, metric, rng):
    X = tricky_data(rng, 40, 3, "lattice" if metric == "uniform" else "zeros")
    for k in (1, 4, 39, 60):
        for kw in ({}, {"threshold_sqdist": 2.0} if metric == "uniform" else
                   {"threshold_sim": 0.2}):
            rule = EdgeRule.from_args(metric, graph=graph, n_neighbors=k, **kw)
            S, compared = dense_knn_graph(X, rule)
            R = reference_csr(X, rule)
            check_canonical(R)
            assert np.array_equal(_pattern(R), S)


def _pattern(csr):
    P = np.zeros(csr.shape, dtype=bool)
    rows = np.repeat(np.arange(csr.shape[0]), np.diff(csr.indptr))
    P[rows, csr.indices] = True
    return P


# ----------------------------------------------------------------- the CPU builders


@pytest.mark.parametrize("flavour", ("uniform", "blobs", "lattice", "duplicates", "offset",
                                     "zeros"))
@pytest.mark.parametrize("graph", GRAPHS)
def test_cpu_builders_equal_the_reference_bit_for_bit(flavour, graph, rng):
    for n, d in ((300, 2), (120, 5), (80, 40)):
        X = tricky_data(rng, n, d, flavour)
        for metric, sigma in WEIGHTS:
            k = int(rng.integers(1, 12))
            rule = EdgeRule.from_args(metric, sigma, graph=graph, n_neighbors=k,
                                      local_neighbor=int(rng.integers(1, 9)))
            expected = reference_csr(X, rule)
            for method in ("bruteforce", "kdtree"):
                if method == "kdtree" and metric == "cosine":
                    continue
                g = build_graph(X, rule, method=method, backend="cpu")
                check_canonical(g.csr)
                assert_identical(g.csr, expected)
                assert g.method == method and g.rule == rule


def test_kdtree_settles_ties_in_later_rounds():
    # 60 copies of each of 5 points: every row ties far past k + 4 candidates.
    X = np.repeat(np.arange(5, dtype=np.float32)[:, None], 60, axis=0)
    X = np.hstack([X, np.zeros_like(X)])
    rule = EdgeRule.from_args("uniform", graph="knn", n_neighbors=5)
    g = build_graph(X, rule, method="kdtree", backend="cpu")
    assert g.info["rounds"] > 1
    assert_identical(g.csr, reference_csr(X, rule))
    # Ties by the lower index: each point's 5 are the first 5 copies of its own value.
    assert set(g.csr[0].indices.tolist()) >= {1, 2, 3, 4, 5}


def test_a_threshold_with_a_knn_graph_drops_edges(rng):
    X = rng.random((200, 2)).astype(np.float32)
    plain = EdgeRule.from_args("gaussian", 0.2, graph="knn", n_neighbors=8)
    cut = EdgeRule.from_args("gaussian", 0.2, threshold_sqdist=0.004, graph="knn",
                             n_neighbors=8)
    a = build_graph(X, plain, backend="cpu").csr
    b = build_graph(X, cut, backend="cpu").csr
    assert b.nnz < a.nnz
    assert_identical(b, reference_csr(X, cut))
    d2, _ = pair_values(X, X, EdgeRule.from_args("uniform", threshold_sqdist=1.0))
    rows = np.repeat(np.arange(200), np.diff(b.indptr))
    assert (d2[rows, b.indices] < 0.004).all()


def test_union_and_mutual_degrees(rng):
    X = rng.standard_normal((500, 3)).astype(np.float32)
    k = 7
    union = build_graph(X, graph="knn", n_neighbors=k, metric="uniform", backend="cpu")
    mutual = build_graph(X, graph="mutual_knn", n_neighbors=k, metric="uniform",
                         backend="cpu")
    assert union.stats.nnz_row_min >= k and mutual.stats.nnz_row_max <= k
    assert (mutual.csr - mutual.csr.multiply(union.csr)).nnz == 0  # mutual ⊆ union
    check_canonical(union.csr)
    check_canonical(mutual.csr)


def test_epsilon_graph_with_local_sigma_equals_the_reference(rng):
    for flavour in ("uniform", "duplicates", "lattice"):
        X = tricky_data(rng, 250, 2, flavour)
        rule = EdgeRule.from_args("gaussian", "local", threshold_sqdist=0.05 if flavour !=
                                  "lattice" else 2.0, local_neighbor=5)
        for method in ("kdtree", "bruteforce"):
            g = build_graph(X, rule, method=method, backend="cpu")
            assert_identical(g.csr, reference_csr(X, rule))
            assert "build.local_sigma" in g.timings
        stats = graph_stats(X, rule, backend="cpu", sample_rows=50)
        assert stats.degree_mean is None or stats.degree_mean > 0


def test_the_shared_assembly_and_distances_are_the_reference_arithmetic(rng):
    X = tricky_data(rng, 100, 7, "offset")
    rows = rng.integers(0, 100, 500)
    cols = rng.integers(0, 100, 500)
    ref, _ = pair_values(X, X, EdgeRule.from_args("uniform", threshold_sqdist=1.0))
    got = edge_sqdist(X, rows, cols)
    assert np.array_equal(got.view(np.uint64), ref[rows, cols].view(np.uint64))
    # Empty lists and all-padding rows assemble to an empty, canonical graph.
    rule = EdgeRule.from_args("uniform", graph="mutual_knn", n_neighbors=2)
    csr, vals = knn_csr(5, np.full((5, 2), -1, dtype=np.int64), np.full((5, 2), np.nan), rule)
    assert csr.nnz == 0 and vals.size == 0 and csr.indptr.tolist() == [0] * 6


def test_assert_same_knn_graph_allows_only_ties_at_the_kth_place():
    X = np.array([[0.0], [1.0], [2.0], [3.0], [10.0]], dtype=np.float32)
    rule = EdgeRule.from_args("uniform", graph="knn", n_neighbors=1)
    ref = reference_csr(X, rule)
    tie = ref.tolil()
    tie[1, 2] = tie[2, 1] = 0  # point 2 takes 3 instead of 1: a tie, allowed
    tie[2, 3] = tie[3, 2] = 1
    tie[3, 4] = tie[4, 3] = 1
    assert_same_knn_graph(tie.tocsr(), ref, X, rule)
    wrong = ref.tolil()
    wrong[0, 4] = wrong[4, 0] = 1  # not near anyone's k-th distance
    with pytest.raises(AssertionError, match="extra outside the band 2"):
        assert_same_knn_graph(wrong.tocsr(), ref, X, rule)


# ----------------------------------------------------------------- statistics, front ends


def test_graph_stats_of_a_knn_graph_are_the_built_graphs(rng):
    X = rng.random((2000, 2)).astype(np.float32)
    kw = dict(metric="gaussian", sigma="local", graph="knn", n_neighbors=6)
    built = build_graph(X, backend="cpu", **kw).stats
    for sample in (None, 100):
        stats = graph_stats(X, backend="cpu", sample_rows=sample, components=False, **kw)
        assert stats.to_dict() == built.to_dict()
        assert stats.n_components is not None and not stats.estimated


def test_nearest_neighbors_is_scikit_learns_connectivity_graph():
    # scikit-learn's affinity="nearest_neighbors": each point and its n_neighbors - 1
    # nearest (itself counted), weights (C + Cᵀ)/2; the diagonal is no edge.
    from explorer.data import load
    from sklearn.neighbors import kneighbors_graph

    X = load("moons", n_samples=600, random_state=0).X
    sc = SpectralClustering(2, affinity="nearest_neighbors", n_neighbors=10, random_state=0,
                            backend="cpu").fit(X)
    C = kneighbors_graph(X.astype(np.float64), 10, include_self=True)
    want = (0.5 * (C + C.T)).tolil()
    want.setdiag(0)
    diff = sc.affinity_matrix_ - want.tocsr().astype(np.float32)
    assert abs(diff).max() == 0 and sc.edge_rule_ is None
    assert sc.affinity_ == "nearest_neighbors"


@pytest.mark.parametrize("affinity", ("knn", "mutual_knn"))
def test_spectral_clustering_on_knn_graphs(affinity):
    from explorer.data import load

    ds = load("moons", n_samples=1500, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a mutual graph may leave a few points apart
        sc = SpectralClustering(2, affinity=affinity, n_neighbors=10, random_state=0,
                                backend="cpu").fit(ds.X)
    assert sc.edge_rule_.graph == ("knn" if affinity != "mutual_knn" else "mutual_knn")
    assert sc.edge_rule_.n_neighbors == 10 and sc.sigma_ == "local"
    assert sc.threshold_sqdist_ is None and sc.threshold_sim_ is None
    assert adjusted_rand_score(ds.y, sc.labels_) > 0.95


def test_cli_builds_knn_graphs(capsys):
    code = cli_main(["stats", "blobs", "--n-samples", "500", "--graph", "knn",
                     "--n-neighbors", "5", "--sigma", "local", "--backend", "cpu"])
    out = capsys.readouterr().out
    assert code in (0, None)
    assert "knn k=5 (union), gaussian σ=local (m=7)" in out
    code = cli_main(["run", "blobs", "--n-samples", "400", "--graph", "mutual_knn",
                     "--n-neighbors", "8", "--backend", "cpu"])
    out = capsys.readouterr().out
    assert code in (0, None) and "mutual_knn k=8" in out


@pytest.mark.parametrize("kw", [{"affinity": "knn"}, {"sigma": "local"}])
def test_dask_arrays_refuse_knn_and_local_sigma_by_name(kw):
    da = pytest.importorskip("dask.array")
    X = da.from_array(np.random.default_rng(0).random((100, 2)), chunks=50)
    with pytest.raises(ValueError, match="is not available for a Dask array yet"):
        SpectralClustering(2, backend="cpu", **kw).fit(X)


@pytest.mark.parametrize("union", [True, False])
def test_host_pairing_equals_the_key_sort_the_gpu_runs(rng, union):
    # knn_csr pairs (i, j) with (j, i) by SciPy's transpose on the host and by one sort
    # of pair keys on the GPU: both must give the same pairs, order and values, on
    # lists with padding, pairs listed one way and both ways, and a zero value.
    from explorer.graph.knn import _pair_up_by_keys, _pair_up_host

    n, k = 300, 6
    sym = rng.random((n, n))
    sym = np.triu(sym, 1) + np.triu(sym, 1).T  # (i, j) and (j, i) compare equal
    sym[0, 1] = sym[1, 0] = 0.0  # duplicates: a compared value of 0
    nbr = np.full((n, k), -1, dtype=np.int64)
    for i in range(n):
        m = int(rng.integers(0, k + 1))  # some rows padded, some empty
        if i in (0, 1):  # 0 and 1 list each other first
            rest = rng.choice(np.arange(2, n), max(m, 1) - 1, replace=False)
            others = np.concatenate([[1 - i], rest])
        else:
            others = rng.choice(np.delete(np.arange(n), i), m, replace=False)
        nbr[i, : others.size] = others
    comp = np.where(nbr >= 0, sym[np.arange(n)[:, None], np.maximum(nbr, 0)], np.nan)
    rows = np.repeat(np.arange(n, dtype=np.int64), k)
    ok = nbr.ravel() >= 0
    args = (n, rows[ok], nbr.ravel()[ok], comp.ravel()[ok])
    got = _pair_up_host(*args, union=union)
    want = _pair_up_by_keys(np, *args, union=union)
    for a, b in zip(got, want, strict=True):
        assert np.array_equal(a, b)
    r, c, v = got
    assert np.array_equal(v, sym[r, c]) and (v == 0).any()
    listed = {(i, j) for i in range(n) for j in nbr[i] if j >= 0}
    expected = {p for p in listed if union or p[::-1] in listed}
    expected |= {p[::-1] for p in expected}
    assert set(zip(r.tolist(), c.tolist(), strict=True)) == expected


def _tf32(Z):
    """Float32 values truncated to TF32 (10 stored mantissa bits), as tensor cores may."""
    return (Z.view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)


@pytest.mark.parametrize("flavour", ["blobs", "lattice", "offset", "zeros"])
def test_gpu_knn_key_slack_covers_tensor_core_and_float64_keys(rng, flavour):
    # The bound the GPU's GEMM search settles rows by (kernels/knn.py key_slack),
    # checked against keys formed here as the device forms them: TF32-truncated
    # operands with float32 sums, fp16 operands scaled into [-1, 1] with float32 sums
    # rounded to an fp16 tile (and float64 products for the re-decision), against the
    # reference's squared distances and cosines of every pair.
    from explorer.kernels.gemm import padded_width
    from explorer.kernels.knn import fp16_scale, key_slack

    n, d = 300, int(rng.choice([3, 50, 300]))
    X = tricky_data(rng, n, d, flavour)
    off = ~np.eye(n, dtype=bool)
    for metric in ("uniform", "cosine"):
        cosine = metric == "cosine"
        ref, _ = pair_values(X, X, EdgeRule.from_args(metric, graph="knn"))
        if cosine:
            norms = np.sqrt(np.einsum("ij,ij->i", X.astype(np.float64), X.astype(np.float64)))
            ok = norms > 0
            Z = np.where(ok[:, None], X / np.where(ok, norms, 1.0).astype(np.float32)[:, None],
                         0).astype(np.float32)
            pairs = off & ok[:, None] & ok[None, :]
            ref_key = -ref
        else:
            Z = (X - X.mean(axis=0, dtype=np.float64).astype(np.float32)).astype(np.float32)
            pairs = off
            ref_key = ref
        zn = np.sqrt(np.einsum("ij,ij->i", Z.astype(np.float64), Z.astype(np.float64)))
        M = float(zn.max())
        G = _tf32(Z) @ _tf32(Z).T
        sq = (Z * Z).sum(axis=1)
        key = -G if cosine else (sq[:, None] + sq[None, :]) - np.float32(2.0) * G
        slack = key_slack(zn, M, d, cosine, "tf32")[:, None]
        assert np.all(np.abs(key.astype(np.float64) - ref_key)[pairs]
                      <= np.broadcast_to(slack, key.shape)[pairs])
        scale = fp16_scale(Z)
        if scale is not None:
            H = np.zeros((n, padded_width(d)), dtype=np.float32)
            H[:, :d] = (Z * np.float32(scale)).astype(np.float16)
            tile = (H @ H.T).astype(np.float16).astype(np.float32) * np.float32(scale**-2)
            key = -tile if cosine else (sq[:, None] + sq[None, :]) - np.float32(2.0) * tile
            slack = key_slack(zn, M, d, cosine, "fp16", 1.0 / scale)[:, None]
            assert np.all(np.abs(key.astype(np.float64) - ref_key)[pairs]
                          <= np.broadcast_to(slack, key.shape)[pairs])
        Z64 = Z.astype(np.float64)
        G64 = Z64 @ Z64.T
        key64 = -G64 if cosine else (Z64 * Z64).sum(axis=1)[None, :] - 2.0 * G64 + (
            zn**2)[:, None]
        slack64 = key_slack(zn, M, d, cosine, "float64")[:, None]
        assert np.all(np.abs(key64 - ref_key)[pairs]
                      <= np.broadcast_to(slack64, key.shape)[pairs])
