"""SpectralClustering.predict / transform: the Nyström extension (explorer.extension).

The cross edges against a float64 brute-force reference written from the rule's
definition; the extension giving back a training point's own row; held-out halves of
the built-in shapes labelled as a refit on all the data labels them; points out of
reach; the fitted space (offsets, scaling); batches, memory preflight, pickling.
"""

from __future__ import annotations

import pickle
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.exceptions import NotFittedError
from sklearn.metrics import adjusted_rand_score

from explorer import EdgeRule, SpectralClustering, data
from explorer import extension as ext
from explorer._backend import array_module
from explorer.graph._reference import (
    local_weights_from,
    pair_values,
    reference_knn,
    reference_local_sqdist,
    weights_from,
)
from explorer.memory import MemoryEstimateError

# ------------------------------------------------------------------ reference


def _key(compared, rule):
    key = compared if rule.compares == "sqdist" else -compared
    return np.where(np.isnan(key), np.inf, key)


def reference_cross(Q, P, rule: EdgeRule, exclude=None):
    """The cross edges by definition, float64, dense (test sizes): an (b, n) matrix."""
    # Compared values only (a uniform rule of the same comparison: no σ needed).
    compares_like = rule if rule.compares == "cosine" else EdgeRule.from_args(
        "uniform", None, threshold_sqdist=1.0)
    compared, _ = pair_values(Q, P, compares_like)
    b, n = compared.shape
    key = _key(compared, rule)
    if exclude is not None:
        key[np.arange(b), exclude] = np.inf
    if rule.is_knn:
        k = min(rule.n_neighbors, n - (exclude is not None))
        order = np.lexsort((np.broadcast_to(np.arange(n), key.shape), key), axis=1)[:, :k]
        forward = np.zeros((b, n), bool)
        forward[np.repeat(np.arange(b), k), order.ravel()] = True
        nbr, val = reference_knn(P, rule, rule.n_neighbors)
        kth = _key(val[:, min(rule.n_neighbors, nbr.shape[1]) - 1], rule)
        reverse = key <= kth[None, :]
        edge = forward | reverse if rule.graph == "knn" else forward & reverse
    else:
        edge = compared < rule.sqdist_cutoff if rule.compares == "sqdist" else (
            compared > rule.threshold)
    if rule.has_threshold and rule.is_knn:
        edge &= (compared < rule.sqdist_cutoff if rule.compares == "sqdist"
                 else compared > rule.threshold)
    if exclude is not None:
        edge[np.arange(b), exclude] = False
    if rule.local_sigma:
        m = min(rule.local_neighbor, n - (exclude is not None))
        sq = np.where(np.isinf(key), np.inf, compared)
        sigma_q = np.sqrt(np.sort(sq, axis=1)[:, m - 1])
        sigma_p = np.sqrt(reference_local_sqdist(P, rule.local_neighbor))
        w = local_weights_from(compared, sigma_q[:, None], sigma_p[None, :])
    else:
        w = weights_from(compared, rule)
    return np.where(edge, w, 0.0), edge


def _as_dense(rows, cols, weights, shape):
    W = sp.coo_matrix((weights, (rows, cols)), shape=shape).toarray()
    E = sp.coo_matrix((np.ones(len(rows)), (rows, cols)), shape=shape).toarray()
    return W, E


def _model(P, rule):
    """A bare exact model of training points P (for the cross edges' training radii)."""
    vectors = array_module(P).ones((P.shape[0], 1))
    return ext.exact_model(P, rule, vectors, np.zeros(1), kmeans=None)


RULES = [
    EdgeRule.from_args("gaussian", 0.3, threshold_sqdist=0.4),
    EdgeRule.from_args("gaussian", 0.3, threshold_sim=0.2),
    EdgeRule.from_args("uniform", None, threshold_sqdist=0.3),
    EdgeRule.from_args("cosine", None, threshold_sim=0.9),
    EdgeRule.from_args("gaussian", "local", threshold_sqdist=0.5),
    EdgeRule.from_args("gaussian", "local", graph="knn", n_neighbors=6),
    EdgeRule.from_args("gaussian", 0.5, graph="mutual_knn", n_neighbors=8),
    EdgeRule.from_args("gaussian", "local", graph="knn", n_neighbors=5, threshold_sqdist=0.8),
    EdgeRule.from_args("cosine", None, graph="knn", n_neighbors=7),
]


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.describe())
@pytest.mark.parametrize("method", ["bruteforce", "kdtree"])
@pytest.mark.parametrize("self_excluded", [False, True])
def test_cross_edges_match_the_float64_reference(rng, rule, method, self_excluded):
    if method == "kdtree" and rule.compares == "cosine":
        pytest.skip("the kd-tree serves distance rules only")
    P = rng.normal(size=(300, 3)).astype(np.float32)
    if self_excluded:
        idx = rng.choice(300, 40, replace=False)
        Q, exclude = P[idx], idx
    else:
        Q, exclude = rng.normal(size=(40, 3)).astype(np.float32) * 1.3, None
    model = _model(P, rule)
    ext.training_neighborhoods(model)
    r, c, w = ext.cross_edges(Q, P, rule, neighbor_key=model.neighbor_key,
                              local_sigma=model.local_sigma, exclude=exclude, method=method)
    assert len(set(zip(r.tolist(), c.tolist(), strict=True))) == r.size  # each pair once
    W, E = _as_dense(r, c, w, (Q.shape[0], P.shape[0]))
    W_ref, E_ref = reference_cross(Q, P, rule, exclude)
    assert E_ref.any(axis=1).mean() > 0.3  # the rule joins many points: a real test
    np.testing.assert_array_equal(E.astype(bool), E_ref)
    np.testing.assert_allclose(W, W_ref, rtol=1e-12, atol=0)


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.describe())
def test_float32_products_keep_every_edge(rng, rule):
    """The GPU's float32 candidate products (here on the host), with their rounding
    slack, give the reference's edges; far from the origin too (centred products)."""
    P = (rng.normal(size=(300, 3)) + 50.0).astype(np.float32)
    Q = (rng.normal(size=(40, 3)) * 1.3 + 50.0).astype(np.float32)
    if rule.compares == "cosine":
        P, Q = P - 50.0, Q - 50.0
    model = _model(P, rule)
    ext.training_neighborhoods(model)
    r, c, w = ext.cross_edges(Q, P, rule, neighbor_key=model.neighbor_key,
                              local_sigma=model.local_sigma, method="bruteforce",
                              products=np.float32)
    W, E = _as_dense(r, c, w, (40, 300))
    W_ref, E_ref = reference_cross(Q, P, rule)
    np.testing.assert_array_equal(E.astype(bool), E_ref)
    np.testing.assert_allclose(W, W_ref, rtol=1e-12, atol=0)


@pytest.mark.parametrize("by_min", [False, True])
def test_the_smallest_keys_in_order_ties_to_the_lower_column(rng, by_min):
    key = rng.integers(0, 6, size=(50, 40)).astype(np.float32)  # many ties
    ref = np.lexsort((np.broadcast_to(np.arange(40), key.shape), key), axis=1)[:, :7]
    np.testing.assert_array_equal(ext._smallest(key.copy(), 7, by_min=by_min), ref)


def test_cross_edges_refuse_an_unknown_method():
    P = np.zeros((5, 2), np.float32)
    rule = EdgeRule.from_args("cosine", None, threshold_sim=0.5)
    with pytest.raises(ValueError, match="method='kdtree'"):
        ext.cross_edges(P, P, rule, method="kdtree")
    with pytest.raises(ValueError, match="method='grid'"):
        ext.cross_edges(P, P, rule, method="grid")


# ------------------------------------------------------------------ the formula


FITS = [
    {"affinity": "epsilon", "sigma": 0.3, "threshold_sqdist": 0.5},
    {"affinity": "epsilon", "sigma": "local", "threshold_sqdist": 0.3},
    {"affinity": "knn"},
    {"affinity": "mutual_knn", "n_neighbors": 15},
    {"affinity": "knn", "metric": "cosine", "n_neighbors": 12},
]


@pytest.mark.parametrize("params", FITS, ids=lambda p: "-".join(map(str, p.values())))
@pytest.mark.parametrize("method", ["auto", "bruteforce"])
def test_a_training_point_gets_its_own_row_back(params, method):
    """u(x_i) = row i of D^-1 S U diag(1/μ) = u_i when x_i's own edge is left out."""
    X = data.load("moons", 600, random_state=3).X
    fit = SpectralClustering(3, random_state=0, backend="cpu", eigen_solver="dense",
                             **params).fit(X)
    assert fit.eigen_solver_ == "dense"
    model = fit.extension_
    Xv = ext.fitted_space(model, X)
    rows = ext.transform(model, Xv, exclude=np.arange(len(X)), method=method)
    ok = np.isfinite(fit.embedding_).all(axis=1)
    assert ok.mean() > 0.95
    np.testing.assert_allclose(rows[ok], fit.embedding_[ok], atol=1e-6)
    # With its own edge (weight 1) the row moves: the exclusion is what is tested.
    assert np.nanmax(np.abs(ext.transform(model, Xv) - fit.embedding_)) > 1e-4


def test_landmarks_give_back_the_training_rows():
    """Mode landmarks: Ẑ(x_i) V Σ^-1 is the left singular vector's row i."""
    X = data.load("blobs", 1500, random_state=2).X
    fit = SpectralClustering(3, mode="landmarks", n_landmarks=200, random_state=0,
                             backend="cpu").fit(X)
    rows = fit.transform(X)
    ok = np.isfinite(fit.embedding_).all(axis=1)
    np.testing.assert_allclose(rows[ok], fit.embedding_[ok], atol=1e-4)
    np.testing.assert_array_equal(fit.predict(X), fit.labels_)


def test_representatives_transform_through_their_weighted_graph():
    """Mode representatives: a representative given as new (its own edge left out)
    gets its fitted row back through the count-weighted graph."""
    X = data.load("moons", 3000, random_state=4).X
    fit = SpectralClustering(2, mode="representatives", n_representatives=300,
                             eigen_solver="dense", random_state=0, backend="cpu").fit(X)
    model = fit.extension_
    assert model.mode == "representatives"
    R = fit.representatives_
    rows = ext.transform(model, R, exclude=np.arange(R.shape[0]))
    ok = np.isfinite(fit.embedding_).all(axis=1)
    np.testing.assert_allclose(rows[ok], fit.embedding_[ok], atol=1e-6)
    # predict is the nearest representative's label: the fit's own labels back.
    np.testing.assert_array_equal(fit.predict(X), fit.labels_)
    # The two rules agree on new points: the Nyström row's k-means centre and the
    # nearest representative's label (measured 0.9995 to 1.0 on the six shapes).
    new = data.load("moons", 3000, random_state=5).X
    emb = ext.transform(model, ext.fitted_space(model, new))
    ok = np.isfinite(emb).all(axis=1)
    through = model.kmeans.predict(emb[ok].astype(np.float32))
    assert np.mean(through == fit.predict(new)[ok]) >= 0.99


# ------------------------------------------------------------------ held-out halves


SHAPES = ["moons", "circles", "blobs", "aniso", "varied", "spirals"]


@pytest.mark.parametrize("name", SHAPES)
@pytest.mark.parametrize("mode", ["exact", "representatives", "landmarks"])
def test_predict_on_a_held_out_half_agrees_with_a_refit(name, mode):
    ds = data.load(name, 4000, random_state=1)
    k = data.DATASETS[name].n_classes
    X = ds.X
    perm = np.random.default_rng(0).permutation(len(X))
    a, b = perm[: len(X) // 2], perm[len(X) // 2:]
    kw = {"exact": {"mode": "exact"},
          "representatives": {"mode": "representatives", "n_representatives": 400},
          "landmarks": {"mode": "landmarks", "n_landmarks": 300}}[mode]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        full = SpectralClustering(k, random_state=0, backend="cpu", **kw).fit(X)
        half = SpectralClustering(k, random_state=0, backend="cpu", **kw).fit(X[a])
    # Separated shapes, whose halves are separated too (on 1,500 points the spirals'
    # kNN graph falls apart: a fit leaving points unclustered is not what is tested).
    assert adjusted_rand_score(ds.y, full.labels_) >= 0.99
    assert adjusted_rand_score(ds.y[a], half.labels_) >= 0.99
    with warnings.catch_warnings():
        warnings.simplefilter("error", ext.UnreachableWarning)
        labels = half.predict(X[b])
    assert labels.dtype == np.int32 and labels.shape == (len(b),)
    assert adjusted_rand_score(full.labels_[b], labels) >= 0.99
    emb = half.transform(X[b])
    assert emb.shape == (len(b), half.n_clusters_) and emb.dtype == np.float64
    # Mode representatives: a new point may have no edge to a representative under
    # their rule (its label is the nearest representative's all the same).
    ok = np.isfinite(emb).all(axis=1)
    assert ok.all() if mode != "representatives" else ok.mean() > 0.95
    np.testing.assert_allclose(np.linalg.norm(emb[ok], axis=1), 1.0, rtol=1e-12)


def test_predict_on_the_training_points_gives_their_labels():
    X = data.load("circles", 2000, random_state=5).X
    fit = SpectralClustering(2, random_state=0, backend="cpu").fit(X)
    np.testing.assert_array_equal(fit.predict(X), fit.labels_)
    np.testing.assert_array_equal(fit.fit_predict(X), fit.labels_)  # unchanged


def test_points_out_of_reach_get_minus_one_with_a_warning():
    X = data.load("blobs", 1000, random_state=0).X
    fit = SpectralClustering(3, affinity="epsilon", sigma=0.3, threshold_sqdist=0.5,
                             random_state=0, backend="cpu").fit(X)
    far = np.array([[1e3, 1e3], [-1e3, 5.0], [2e3, 0.0]], dtype=np.float32)
    new = np.concatenate([X[:10], far])
    with pytest.warns(ext.UnreachableWarning, match="3 of the 13 new points"):
        labels = fit.predict(new)
    np.testing.assert_array_equal(labels[10:], -1)
    np.testing.assert_array_equal(labels[:10], fit.labels_[:10])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        emb = fit.transform(new)
    assert np.isnan(emb[10:]).all() and np.isfinite(emb[:10]).all()


def test_kmeans_landmarks_far_points_still_have_landmarks():
    """Gaussian landmark weights never vanish (relative to the nearest landmark): a far
    point takes the nearest landmarks' cluster rather than −1."""
    X = data.load("blobs", 1000, random_state=0).X
    fit = SpectralClustering(3, mode="landmarks", n_landmarks=100, random_state=0,
                             backend="cpu").fit(X)
    labels = fit.predict(np.array([[1e3, 1e3]], dtype=np.float32))
    assert labels[0] >= 0


# ------------------------------------------------------------------ the fitted space


def test_new_points_go_through_the_fits_offsets_and_scaling():
    ds = data.load("moons", 1200, random_state=6)
    X = ds.X.astype(np.float64) * np.array([1.0, 1e-3]) + np.array([5e6, 0.0])
    fit = SpectralClustering(2, scale="standard", random_state=0, backend="cpu").fit(X[:800])
    assert fit.extension_.data.shift is not None and fit.extension_.scaler is not None
    assert adjusted_rand_score(ds.y[800:], fit.predict(X[800:])) >= 0.99
    np.testing.assert_array_equal(fit.predict(X[:800]), fit.labels_)


def test_batches_give_the_same_rows():
    X = data.load("moons", 800, random_state=7).X
    fit = SpectralClustering(2, random_state=0, backend="cpu").fit(X[:500])
    model = fit.extension_
    Xv = ext.fitted_space(model, X[500:])
    whole = ext.transform(model, Xv)
    np.testing.assert_array_equal(ext.transform(model, Xv, batch=7), whole)


def test_the_memory_preflight_refuses_what_does_not_fit(monkeypatch):
    from explorer import memory

    X = data.load("moons", 500, random_state=7).X
    fit = SpectralClustering(2, random_state=0, backend="cpu").fit(X)
    assert ext.batch_rows(fit.extension_, 10**6) >= 1
    monkeypatch.setattr(memory, "available_host_bytes", lambda: 10**6)
    with pytest.raises(MemoryEstimateError, match="extension of 1,000,000 new points"):
        fit.predict(np.zeros((10**6, 2), np.float32))


# ------------------------------------------------------------------ the estimator


def test_no_predict_on_a_precomputed_graph():
    est = SpectralClustering(affinity="precomputed")
    assert not hasattr(est, "predict") and not hasattr(est, "transform")
    assert hasattr(SpectralClustering(), "predict")


def test_predict_checks_fit_and_features():
    X = data.load("blobs", 300, random_state=0).X
    with pytest.raises(NotFittedError):
        SpectralClustering(3).predict(X)
    fit = SpectralClustering(3, random_state=0, backend="cpu").fit(X)
    with pytest.raises(ValueError, match="X has 3 features, but SpectralClustering is "
                                         "expecting 2 features"):
        fit.predict(np.zeros((4, 3), np.float32))
    with pytest.raises(ValueError, match="NaN"):
        fit.transform(np.array([[np.nan, 0.0]]))


def test_a_pickled_fit_predicts_the_same():
    X = data.load("blobs", 600, random_state=0).X
    fit = SpectralClustering(3, random_state=0, backend="cpu", affinity="knn").fit(X[:400])
    before = fit.predict(X[400:])
    again = pickle.loads(pickle.dumps(fit))
    np.testing.assert_array_equal(again.predict(X[400:]), before)


@pytest.mark.gpu
@pytest.mark.parametrize("params", [{"affinity": "epsilon"}, {"affinity": "knn"},
                                    {"mode": "landmarks", "n_landmarks": 300},
                                    {"mode": "representatives", "n_representatives": 300}],
                         ids=lambda p: "-".join(map(str, p.values())))
def test_gpu_predict_agrees_with_the_cpu(params):
    import cupy

    ds = data.load("moons", 4000, random_state=1)
    X = ds.X
    gpu = SpectralClustering(2, random_state=0, backend="gpu", **params).fit(X[:2000])
    cpu = SpectralClustering(2, random_state=0, backend="cpu", **params).fit(X[:2000])
    assert isinstance(gpu.extension_.points, cupy.ndarray)
    on_gpu = gpu.predict(cupy.asarray(X[2000:]))
    assert isinstance(on_gpu, cupy.ndarray)
    assert adjusted_rand_score(cpu.predict(X[2000:]), cupy.asnumpy(on_gpu)) >= 0.99
    assert adjusted_rand_score(ds.y[2000:], gpu.predict(X[2000:])) >= 0.99


@pytest.mark.gpu
@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.describe())
def test_gpu_cross_edges_match_the_float64_reference(rng, rule):
    import cupy

    P = rng.normal(size=(300, 3)).astype(np.float32)
    Q = rng.normal(size=(40, 3)).astype(np.float32) * 1.3
    model = _model(cupy.asarray(P), rule)
    ext.training_neighborhoods(model)
    r, c, w = ext.cross_edges(cupy.asarray(Q), model.points, rule,
                              neighbor_key=model.neighbor_key, local_sigma=model.local_sigma)
    W, E = _as_dense(cupy.asnumpy(r), cupy.asnumpy(c), cupy.asnumpy(w), (40, 300))
    W_ref, E_ref = reference_cross(Q, P, rule)
    np.testing.assert_array_equal(E.astype(bool), E_ref)
    np.testing.assert_allclose(W, W_ref, rtol=1e-12, atol=0)


@pytest.mark.gpu
@pytest.mark.parametrize("self_excluded", [False, True])
def test_gpu_grid_cross_edges_are_exact_at_the_threshold(rng, self_excluded):
    """The grid's widened threshold keeps every pair the float64 rule keeps, on integer
    lattices where many pairs lie exactly at the threshold (strict: no edge) and just
    inside it; the pairs among the new points it also builds are not returned."""
    import cupy

    P = rng.integers(0, 12, size=(2000, 2)).astype(np.float32) * 0.25
    if self_excluded:
        idx = rng.choice(2000, 300, replace=False)
        Q, exclude = P[idx], idx
    else:
        Q, exclude = rng.integers(0, 12, size=(300, 2)).astype(np.float32) * 0.25, None
    for threshold in (0.0625, 0.0625 * (1 + 1e-7), 0.125):
        rule = EdgeRule.from_args("gaussian", 0.3, threshold_sqdist=threshold)
        assert ext._cross_method("auto", rule, cupy.asarray(P)) == "grid"
        r, c, w = ext.cross_edges(cupy.asarray(Q), cupy.asarray(P), rule, exclude=exclude,
                                  method="grid")
        pairs = cupy.asnumpy(r), cupy.asnumpy(c)
        assert len(set(zip(*(a.tolist() for a in pairs), strict=True))) == r.size
        W, E = _as_dense(*pairs, cupy.asnumpy(w), (300, 2000))
        W_ref, E_ref = reference_cross(Q, P, rule, exclude)
        assert E_ref.sum() > 300  # the lattice's neighbours are edges: a real test
        np.testing.assert_array_equal(E.astype(bool), E_ref)
        np.testing.assert_allclose(W, W_ref, rtol=1e-12, atol=0)
