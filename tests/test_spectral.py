"""SpectralClustering end to end on the CPU: quality, the eigengap k, isolated points."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.cluster import spectral_clustering
from sklearn.datasets import load_digits, make_blobs, make_circles, make_moons

from explorer import KMeans, SpectralClustering, build_graph, partition_graph
from explorer.kmeans import number_by_first_point
from explorer.metrics import adjusted_rand_score
from explorer.partition import _component_rows

CENTRES = [[-6, -6], [6, 6], [-6, 6], [6, -6]]

#: name -> (generator(seed), ε-radius used as σ and sqrt(threshold), true k). At
#: n = 1500 these radii make each shape exactly one connected component (checked
#: over 2000 seeds; a smaller radius leaves stray points, a larger one bridges the
#: moons): "sensible parameters".
SHAPES = {
    "moons": (lambda s: make_moons(1500, noise=0.05, random_state=s), 0.15, 2),
    "circles": (lambda s: make_circles(1500, noise=0.03, factor=0.5, random_state=s), 0.15, 2),
    "blobs": (lambda s: make_blobs(1500, centers=CENTRES, cluster_std=0.5, random_state=s), 1.5, 4),
}


def shape(name, rng):
    make, radius, k = SHAPES[name]
    X, y = make(int(rng.integers(2**31)))
    params = {"metric": "gaussian", "sigma": radius, "threshold_sqdist": radius**2}
    return X.astype(np.float32), y, params, k


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_shapes_are_recovered(name, rng):
    X, y, params, k = shape(name, rng)
    sc = SpectralClustering(k, **params, eigen_solver="chebyshev", random_state=0,
                            backend="cpu").fit(X)
    assert adjusted_rand_score(y, sc.labels_) >= 0.99
    assert sc.n_clusters_ == k
    # Chebyshev at its default tolerance 1e-4: the zero eigenvalues are accurate to
    # about tol² / gap.
    assert sc.eigen_solver_ == "chebyshev" and sc.eigen_residuals_.max() <= 2e-4
    np.testing.assert_allclose(sc.eigenvalues_[:k], 0.0, atol=1e-5)


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_exactly_k_components_are_the_clusters_without_iterations(name, rng):
    # Each shape is one component: "auto" takes the components' indicators.
    X, y, params, k = shape(name, rng)
    sc = SpectralClustering(k, **params, random_state=0, backend="cpu").fit(X)
    assert sc.eigen_solver_ == "components" and sc.eigen_iterations_ is None
    np.testing.assert_array_equal(sc.eigenvalues_, 0.0)
    assert sc.eigen_residuals_.max() <= 1e-12
    kept = ~sc.isolated_
    _, component = sp.csgraph.connected_components(sc.affinity_matrix_)
    assert adjusted_rand_score(component[kept], sc.labels_[kept]) == 1.0
    assert adjusted_rand_score(y, sc.labels_) >= 0.99
    # More eigenpairs than k (the app's spectrum view) need a real solver.
    wider = partition_graph(sc.affinity_matrix_, k, n_eigenpairs=k + 2, random_state=0)
    # (dense or Chebyshev, whichever the cost model predicts faster on this graph)
    assert wider.embedding.solver in ("dense", "chebyshev")
    assert wider.embedding.eigenvalues[k] > 1e-4
    assert adjusted_rand_score(wider.labels, sc.labels_) == 1.0


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_components_kmeans_starts_at_its_one_optimum(name, rng):
    # The components embedding's unit rows are k distinct points: k-means started at
    # them (one step) gives what n_init restarts of k-means++ give.
    X, y, params, k = shape(name, rng)
    graph = build_graph(X, **params, backend="cpu")
    part = partition_graph(graph.csr, k, random_state=0)
    assert part.embedding.solver == "components"
    kept = part.labels >= 0
    E = part.clustered.embedding[kept]
    restarts = number_by_first_point(KMeans(k, n_init=10, random_state=int(
        rng.integers(2**31))).fit(E))
    np.testing.assert_array_equal(part.labels[kept], restarts.labels_)
    np.testing.assert_allclose(part.kmeans.cluster_centers_, restarts.cluster_centers_,
                               atol=1e-6)
    assert part.kmeans.n_iter_ == 1 and part.kmeans.inertia_ <= 1e-6


def test_component_rows_refuse_what_is_not_one_hot(rng):
    E = np.eye(3)[rng.integers(3, size=50)]
    assert _component_rows(E, 3, np).shape == (3, 3)
    assert _component_rows(E, 4, np) is None  # k != columns
    E[7, (np.argmax(E[7]) + 1) % 3] = 0.5  # a row with two nonzeros
    assert _component_rows(E, 3, np) is None
    assert _component_rows(np.eye(3)[np.zeros(50, dtype=int)], 3, np) is None  # one only


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_auto_finds_the_true_k(name, rng):
    X, y, params, k = shape(name, rng)
    sc = SpectralClustering("auto", **params, random_state=0, backend="cpu").fit(X)
    assert sc.n_clusters_ == k
    assert sc.eigenvalues_.shape == (k,) and sc.embedding_.shape == (len(X), k)
    assert adjusted_rand_score(y, sc.labels_) >= 0.99


def test_digits_match_scikit_learn_on_the_same_affinity():
    X, y = load_digits(return_X_y=True)
    sc = SpectralClustering(10, metric="cosine", threshold_sim=0.8, random_state=0, backend="cpu")
    labels = sc.fit_predict(X)
    affinity = build_graph(X, metric="cosine", threshold_sim=0.8, backend="cpu").csr
    assert (sc.affinity_matrix_ != affinity).nnz == 0
    reference = max(
        adjusted_rand_score(y, spectral_clustering(affinity, n_clusters=10, random_state=0)),
        adjusted_rand_score(
            y,
            spectral_clustering(
                affinity, n_clusters=10, random_state=0, assign_labels="discretize"
            ),
        ),
    )
    assert adjusted_rand_score(y, labels) >= reference - 0.03


def test_isolated_points_get_minus_one(rng):
    X, y, params, k = shape("blobs", rng)
    outliers = np.array([[50.0, 50.0], [-50.0, 40.0], [0.0, 80.0]], np.float32)
    X = np.vstack([X, outliers])
    sc = SpectralClustering(k, **params, random_state=0, backend="cpu").fit(X)
    np.testing.assert_array_equal(sc.isolated_, np.r_[np.zeros(len(y), bool), np.ones(3, bool)])
    np.testing.assert_array_equal(sc.labels_ == -1, sc.isolated_)
    assert np.isnan(sc.embedding_[-3:]).all() and np.isnan(sc.eigenvectors_[-3:]).all()
    assert np.isfinite(sc.embedding_[:-3]).all()
    assert adjusted_rand_score(y, sc.labels_[:-3]) >= 0.99


def test_fitted_attributes(rng):
    X, _, params, k = shape("moons", rng)
    X = X[:400]
    sc = SpectralClustering(k, **params, random_state=0, backend="cpu")
    labels = sc.fit_predict(X)
    n = len(X)
    assert isinstance(sc.labels_, np.ndarray) and sc.labels_.dtype == np.int32
    np.testing.assert_array_equal(labels, sc.labels_)
    assert sc.embedding_.shape == sc.eigenvectors_.shape == (n, k)
    assert sc.eigenvalues_.shape == sc.eigen_residuals_.shape == (k,)
    assert sp.issparse(sc.affinity_matrix_) and sc.affinity_matrix_.shape == (n, n)
    assert sc.graph_.csr is sc.affinity_matrix_ and sc.graph_stats_ is sc.graph_.stats
    assert sc.backend_ == "cpu" and sc.backend_reason_ == "asked for the CPU"
    # Two moons, each at least one component: the two largest are the clusters, and
    # their indicators the embedding (no iterative solver).
    assert sc.eigen_solver_ == "components" and sc.eigen_iterations_ is None
    assert sc.n_features_in_ == 2
    assert set(sc.timings_) == {"graph", "embedding", "kmeans", "total"}
    assert sc.timings_["total"] >= sc.timings_["graph"] + sc.timings_["embedding"]


def test_a_list_in_gives_numpy_out_and_seeds_reproduce(rng):
    X, _, params, k = shape("circles", rng)
    X = X[:300]
    a = SpectralClustering(k, **params, eigen_solver="lobpcg", random_state=4, backend="cpu")
    b = clone(a)
    la = a.fit_predict(X.tolist())
    assert isinstance(la, np.ndarray)
    np.testing.assert_array_equal(la, b.fit_predict(X))
    # The two circles are apart (at least k components): LOBPCG starts from the exact
    # component indicators and confirms them without iterating.
    assert a.eigen_solver_ == "lobpcg" and a.eigen_iterations_ == 0


def test_too_many_components_warn(rng):
    X, _, params, _ = shape("blobs", rng)
    with pytest.warns(UserWarning, match="4 connected components .* more than k=2: the 2 "
                      "largest are the clusters"):
        SpectralClustering(2, **params, random_state=0, backend="cpu").fit(X)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        SpectralClustering(4, **params, random_state=0, backend="cpu").fit(X)


@pytest.mark.parametrize(("solver", "backend"), [
    ("lobpcg", "cpu"), ("chebyshev", "cpu"), ("dense", "cpu"),
    pytest.param("chebyshev", "gpu", marks=pytest.mark.gpu),
])
def test_more_components_than_k_clusters_the_k_largest(solver, backend, rng):
    # Three large blobs of different sizes and a sprinkle of far-away pairs (small
    # components): with k = 3 the blobs are the clusters whatever the solver, and the
    # pairs' points are unclustered (-1) like the isolated points.
    sizes = [700, 500, 400]
    centres = np.array([[0.0, 0.0], [10.0, 0.0], [0.0, 10.0]])
    blobs = [c + rng.uniform(-1, 1, (s, 2)) for c, s in zip(centres, sizes, strict=True)]
    pairs = 50.0 + 5.0 * np.arange(12)[:, None] * np.ones((1, 2))
    pairs = np.repeat(pairs, 2, axis=0) + np.tile([[0.0, 0.0], [0.01, 0.0]], (12, 1))
    lonely = np.array([[-40.0, -40.0], [-60.0, 30.0]])
    X = np.vstack([*blobs, pairs, lonely]).astype(np.float32)
    truth = np.concatenate([np.full(s, i) for i, s in enumerate(sizes)])
    order = rng.permutation(X.shape[0])
    params = {"metric": "gaussian", "sigma": 0.5, "threshold_sqdist": 0.25}
    # The pairs are stray pieces (fewer than 1 % of the mean cluster size, 1600 / 3):
    # left out before the k largest are counted.
    with pytest.warns(UserWarning, match=r"15 connected components besides its 2 isolated "
                      r"vertices \(k=3\): 12 stray piece\(s\) of fewer than 6 points \(24 "
                      r"vertices\) are left unclustered"):
        sc = SpectralClustering(3, **params, eigen_solver=solver, random_state=0,
                                backend=backend).fit(X[order])
    assert sc.backend_ == backend
    labels = np.empty_like(sc.labels_)
    labels[order] = sc.labels_
    assert np.all(labels[len(truth):] == -1)
    assert adjusted_rand_score(truth, labels[: len(truth)]) == 1.0
    assert int(sc.isolated_.sum()) == 2 and sc.n_clusters_ == 3
    np.testing.assert_allclose(sc.eigenvalues_, 0.0, atol=1e-6)


def test_partition_graph_is_the_estimator_after_its_graph(rng):
    X, y, params, k = shape("blobs", rng)
    sc = SpectralClustering(k, **params, random_state=3, backend="cpu").fit(X)
    graph = build_graph(X, **params, backend="cpu")
    stages = []
    part = partition_graph(graph.csr, k, random_state=3, on_kmeans=stages.append)
    np.testing.assert_array_equal(part.labels, sc.labels_)
    np.testing.assert_array_equal(part.embedding.eigenvalues, sc.eigenvalues_)
    assert stages == [k] and part.n_clusters == k and part.n_clusters_suggested == k
    assert part.kmeans.n_clusters == k and part.n_dropped == 0
    assert set(part.timings) == {"embedding", "kmeans"}
    assert adjusted_rand_score(y, part.labels) >= 0.99


def test_partition_graph_extra_eigenpairs_and_auto(rng):
    X, _, params, k = shape("moons", rng)
    csr = build_graph(X, **params, backend="cpu").csr
    exact = partition_graph(csr, k, eigen_solver="dense", random_state=0)
    wider = partition_graph(csr, k, n_eigenpairs=6, eigen_solver="dense", random_state=0)
    assert wider.embedding.n_components == 6 and exact.embedding.n_components == k
    np.testing.assert_allclose(wider.embedding.eigenvalues[:k], exact.embedding.eigenvalues,
                               atol=1e-10)
    # The first k unit rows are the same up to each vector's sign: the same partition.
    assert adjusted_rand_score(exact.labels, wider.labels) == 1.0
    auto = partition_graph(csr, "auto", random_state=0)
    assert auto.n_clusters == k == auto.n_clusters_suggested


def test_auto_k_sees_two_moons_joined_by_one_edge(rng):
    # A draw where the ε-graph bridges the moons: one component, λ_2 near zero, and
    # the path-like spectrum's later absolute gaps larger than λ_3 − λ_2. The
    # eigengap's ratio rule still sees the two pieces.
    # The moons are the two largest pieces: a draw may leave a stray point outside both
    # (isolated, or a piece the fit's stray rule drops), which is no moon.
    X, y, params, k = shape("moons", rng)
    csr = build_graph(X, **params, backend="cpu").csr
    _, piece = sp.csgraph.connected_components(csr)
    sizes = np.bincount(piece)
    moons = np.argsort(-sizes, kind="stable")[:k]
    assert sizes[moons].min() > 0.4 * len(X)
    on_moons = np.isin(piece, moons)
    a, b = (np.flatnonzero(piece == m)[0] for m in moons)
    bridge = sp.csr_matrix(([1.0, 1.0], ([a, b], [b, a])), shape=csr.shape)
    joined = (csr + bridge).tocsr()
    assert np.unique(sp.csgraph.connected_components(joined)[1][on_moons]).size == 1
    auto = partition_graph(joined, "auto", eigen_solver="dense", random_state=0)
    assert auto.n_clusters == k
    assert adjusted_rand_score(piece[on_moons], auto.labels[on_moons]) == 1.0


def test_partition_graph_names_a_bad_n_clusters(rng):
    X, _, params, _ = shape("blobs", rng)
    csr = build_graph(X, **params, backend="cpu").csr
    with pytest.raises(ValueError, match=f"n_clusters={len(X) + 1} is out of range: only"):
        partition_graph(csr, len(X) + 1)
    with pytest.raises(TypeError, match="n_clusters must be an integer"):
        partition_graph(csr, 2.5)


def test_estimator_protocol():
    sc = SpectralClustering(3, metric="cosine", threshold_sim=0.5, n_init=2)
    params = sc.get_params()
    assert params["n_clusters"] == 3 and params["threshold_sim"] == 0.5 and params["n_init"] == 2
    assert params["backend"] == "auto" and params["eigen_solver"] == "auto"
    other = clone(sc).set_params(n_clusters="auto")
    assert other.n_clusters == "auto" and sc.n_clusters == 3
    assert not hasattr(sc, "labels_")


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"n_clusters": 0}, ValueError, "n_clusters=0"),
        ({"n_clusters": "Auto"}, ValueError, "n_clusters='Auto'"),
        ({"n_clusters": 2.0}, TypeError, "n_clusters must be an integer"),
        ({"n_clusters": 500}, ValueError, "n_clusters=500 is out of range: only"),
        ({"sigma": None}, ValueError, "needs sigma"),
        ({"sigma": -1.0}, ValueError, "sigma=-1.0"),
        ({"threshold_sim": 0.5}, ValueError, "exactly one of threshold_sqdist"),
        ({"eigen_solver": "eigh"}, ValueError, "eigen_solver='eigh'"),
        ({"eigen_tol": 0.0}, ValueError, "eigen_tol=0.0"),
        ({"eigen_max_iter": 0}, ValueError, "eigen_max_iter=0"),
        ({"n_init": 0}, ValueError, "n_init=0"),
        ({"kmeans_tol": 2.0}, ValueError, "kmeans_tol=2.0"),
        ({"kmeans_max_iter": -1}, ValueError, "kmeans_max_iter=-1"),
        ({"backend": "tpu"}, ValueError, "backend='tpu'"),
        ({"method": "csr9"}, ValueError, "csr9"),
    ],
)
def test_invalid_parameters_are_named(kwargs, error, match, rng):
    X = rng.random((100, 2)).astype(np.float32)
    base = {"n_clusters": 2, "metric": "gaussian", "sigma": 0.3, "threshold_sqdist": 0.09}
    with pytest.raises(error, match=match):
        SpectralClustering(**{**base, "backend": "cpu", **kwargs}).fit(X)


def test_a_graph_without_edges_is_an_error(rng):
    X = rng.random((50, 2)) * 100
    with pytest.raises(ValueError, match="all n=50 points are isolated"):
        SpectralClustering(2, metric="uniform", threshold_sqdist=1e-9, backend="cpu").fit(X)


@pytest.mark.gpu
def test_numpy_in_numpy_out_on_the_gpu(rng):
    cupy = pytest.importorskip("cupy")
    X, y, params, k = shape("moons", rng)
    sc = SpectralClustering(k, **params, random_state=0, backend="gpu").fit(X)
    assert isinstance(sc.labels_, np.ndarray) and sc.backend_ == "gpu"
    assert isinstance(sc.embedding_, cupy.ndarray)
    assert adjusted_rand_score(y, sc.labels_) >= 0.99


def test_keep_largest_components_finds_isolated_points_itself_and_trusts_a_count(rng):
    from explorer.components import keep_largest_components
    from explorer.embedding import isolated_vertices

    X = np.vstack([rng.uniform(0, 1, (300, 2)), rng.uniform(5, 6, (200, 2)),
                   [[50, 50], [50, 50.01], [90, 90]]]).astype(np.float32)
    csr = build_graph(X, metric="gaussian", sigma=0.2, threshold_sqdist=0.04, backend="cpu").csr
    given, n_given, dropped_given = keep_largest_components(
        csr, 2, isolated=isolated_vertices(csr))
    found, n_found, dropped_found = keep_largest_components(csr, 2)
    assert (n_given, dropped_given) == (n_found, dropped_found) == (3, 2)
    assert (given != found).nnz == 0
    # A known count of at most k components returns the matrix untouched.
    assert keep_largest_components(csr, 2, n_components=2)[0] is csr


@pytest.mark.parametrize("on_gpu", [False, pytest.param(True, marks=pytest.mark.gpu)])
def test_keep_largest_components_breaks_ties_by_first_vertex(on_gpu, rng):
    from explorer.components import keep_largest_components

    # Components of 5, 3, 3, 3 and 2 vertices (paths) on shuffled vertex ids: with k = 3
    # the 5 and the two 3s whose smallest vertex comes first are kept.
    sizes = [5, 3, 3, 3, 2]
    members = np.split(rng.permutation(sum(sizes)), np.cumsum(sizes)[:-1])
    rows = np.concatenate([m[:-1] for m in members] + [m[1:] for m in members])
    cols = np.concatenate([m[1:] for m in members] + [m[:-1] for m in members])
    n = sum(sizes)
    csr = sp.csr_matrix((np.ones(rows.size, np.float32), (rows, cols)), shape=(n, n))
    threes = sorted(members[1:4], key=min)
    want = np.zeros(n, bool)
    for m in [members[0], *threes[:2]]:
        want[m] = True
    graph = csr
    if on_gpu:
        pytest.importorskip("cupy")
        import cupyx.scipy.sparse as csp

        graph = csp.csr_matrix(csr)
    kept, n_components, n_dropped = keep_largest_components(graph, 3)
    kept = kept.get() if on_gpu else kept
    assert (n_components, n_dropped) == (5, 5)
    np.testing.assert_array_equal(np.asarray(kept.sum(axis=1)).ravel() > 0, want)


def test_components_solver_asked_for_by_name(rng):
    X, y, params, k = shape("blobs", rng)
    csr = build_graph(X, **params, backend="cpu").csr
    # It gives exactly k eigenpairs, whatever n_eigenpairs asks for.
    part = partition_graph(csr, k, n_eigenpairs=k + 3, eigen_solver="components")
    assert part.embedding.solver == "components" and part.embedding.n_components == k
    assert adjusted_rand_score(y, part.labels) >= 0.99
    with pytest.raises(ValueError, match="eigen_solver='components' needs a fixed n_clusters"):
        SpectralClustering("auto", **params, eigen_solver="components", backend="cpu").fit(X)
    with pytest.raises(ValueError, match=f"needs exactly n_components={k + 1} connected "
                       f"components among the non-isolated vertices, the graph has {k}"):
        partition_graph(csr, k + 1, eigen_solver="components")


# --------------------------------------------------- affinity="precomputed" (issue 13)


def _same_graph_two_ways(rng, name="blobs"):
    X, y, params, k = shape(name, rng)
    points = SpectralClustering(k, **params, random_state=0, backend="cpu").fit(X)
    return X, y, params, k, points


@pytest.mark.parametrize("form", ["csr", "csr_array", "coo", "csc", "dense", "with diagonal",
                                  "float64 int64"])
def test_precomputed_affinity_gives_what_the_points_give(form, rng):
    X, y, params, k, points = _same_graph_two_ways(rng)
    S = build_graph(X, **params, backend="cpu").csr
    given = {
        "csr": S,
        "csr_array": sp.csr_array(S),
        "coo": S.tocoo(),
        "csc": S.tocsc(),
        "dense": S.toarray(),
        # A kernel's diagonal (self-similarity 1) is ignored, as in scikit-learn.
        "with diagonal": (S + sp.identity(S.shape[0], dtype=np.float32)).tocsr(),
        "float64 int64": sp.csr_matrix(
            (S.data.astype(np.float64), S.indices.astype(np.int64), S.indptr.astype(np.int64)),
            shape=S.shape),
    }[form]
    sc = SpectralClustering(k, affinity="precomputed", random_state=0, backend="cpu")
    labels = sc.fit_predict(given)
    assert isinstance(labels, np.ndarray) and labels.dtype == points.labels_.dtype
    np.testing.assert_array_equal(labels, points.labels_)
    assert (sc.affinity_matrix_ != S).nnz == 0 and sc.affinity_matrix_.dtype == np.float32
    assert sc.affinity_matrix_.diagonal().max() == 0
    assert sc.n_features_in_ == X.shape[0] and sc.graph_.method == "precomputed"
    assert sc.graph_.rule is None and sc.graph_stats_.n_components is not None
    assert sc.graph_stats_.nnz == S.nnz and "graph" in sc.timings_
    np.testing.assert_allclose(sc.eigenvalues_, points.eigenvalues_, atol=1e-6)
    assert adjusted_rand_score(y, labels) >= 0.99


def test_precomputed_ignores_the_edge_rule_and_keeps_int64_indices(rng):
    X, y, params, k, points = _same_graph_two_ways(rng)
    S = build_graph(X, **params, backend="cpu").csr
    from test_int64 import widen

    S64 = widen(S)
    # metric="cosine" with no threshold would be an error with points; unused here.
    sc = SpectralClustering(k, affinity="precomputed", metric="cosine", random_state=0,
                            backend="cpu").fit(S64)
    assert sc.affinity_matrix_.indices.dtype == np.int64
    np.testing.assert_array_equal(sc.labels_, points.labels_)


def test_precomputed_sklearn_kernel_matches_scikit_learn(rng):
    from sklearn.cluster import SpectralClustering as SkSpectralClustering
    from sklearn.metrics.pairwise import rbf_kernel

    X, y = make_blobs(300, centers=CENTRES, cluster_std=1.0, random_state=int(rng.integers(1000)))
    K = rbf_kernel(X, gamma=0.1)  # dense, with ones on the diagonal
    ours = SpectralClustering(4, affinity="precomputed", random_state=0, backend="cpu").fit(K)
    theirs = SkSpectralClustering(4, affinity="precomputed", random_state=0).fit(K)
    assert adjusted_rand_score(ours.labels_, theirs.labels_) >= 0.99
    assert adjusted_rand_score(y, ours.labels_) >= 0.99


@pytest.mark.parametrize(("bad", "exc", "match"), [
    (np.ones((4, 3)), ValueError,
     r"affinity='precomputed' needs X to be a square \(n_samples, n_samples\) affinity "
     r"matrix; got shape \(4, 3\)"),
    (sp.csr_matrix(np.ones((3, 4))), ValueError, r"got shape \(3, 4\)"),
    (np.array([[0, -1.0, 0], [-1, 0, 1], [0, 1, 0]]), ValueError,
     r"Negative values in data passed as X with affinity='precomputed': 2 negative value\(s\) "
     r"\(min -1\); allowed: affinities >= 0"),
    (np.array([[0, 1.0, 0], [0.5, 0, 1], [0, 1, 0]]), ValueError,
     r"affinity='precomputed' needs a symmetric affinity matrix; X is not symmetric"),
    (sp.csr_matrix(np.array([[0, np.nan], [np.nan, 0]])), ValueError,
     r"Input X contains 2 non-finite value\(s\) \(NaN or inf\)"),
    (np.ones((2, 2), dtype=complex), ValueError, r"Complex data not supported"),
    (np.ones(4), ValueError, r"Expected 2D array, got 1D array"),
    (np.ones((1, 1)), ValueError, r"X has n=1 samples .*need n >= 2"),
    (np.zeros((3, 3)), ValueError,
     r"the affinity matrix has no edge: all n=3 vertices are isolated"),
    (np.eye(3), ValueError, r"the affinity matrix has no edge"),  # the diagonal is ignored
    (np.array([["a", "b"], ["c", "d"]]), TypeError, r"X must be numeric; got dtype <U1"),
])
def test_precomputed_affinity_errors_name_the_problem(bad, exc, match):
    with pytest.raises(exc, match=match):
        SpectralClustering(2, affinity="precomputed", backend="cpu").fit(bad)


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["cupyx", "cupy dense", "scipy"])
def test_precomputed_affinity_on_the_gpu(kind, rng):
    cupy = pytest.importorskip("cupy")
    import cupyx.scipy.sparse as csp

    X, y, params, k, points = _same_graph_two_ways(rng)
    S = build_graph(X, **params, backend="cpu").csr
    given = {"cupyx": csp.csr_matrix(S), "cupy dense": cupy.asarray(S.toarray()),
             "scipy": S}[kind]
    sc = SpectralClustering(k, affinity="precomputed", random_state=0, backend="gpu").fit(given)
    assert sc.backend_ == "gpu" and isinstance(sc.affinity_matrix_, csp.csr_matrix)
    labels = sc.labels_
    assert isinstance(labels, np.ndarray if kind == "scipy" else cupy.ndarray)
    labels = cupy.asnumpy(labels)
    assert adjusted_rand_score(points.labels_, labels) == 1.0
    assert (sc.affinity_matrix_.get() != S).nnz == 0


def test_n_jobs_limits_the_threads_only_when_asked(monkeypatch):
    """``n_jobs`` goes to threadpoolctl for the whole fit; without it (None, -1) no
    limit is set, and the library search threadpoolctl makes on each call is skipped."""
    import contextlib

    from explorer.data import load

    import explorer.spectral as spectral_module

    asked = []

    def record(limits=None, **kw):
        asked.append(limits)
        return contextlib.nullcontext()

    monkeypatch.setattr(spectral_module, "threadpool_limits", record)
    X = load("moons", n_samples=300, random_state=0).X
    for n_jobs in (None, -1, 2):
        SpectralClustering(2, n_jobs=n_jobs, random_state=0).fit(X)
    assert asked == [2]
