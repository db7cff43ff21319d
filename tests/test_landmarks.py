"""Landmark spectral clustering on the CPU (explorer.landmarks): the nearest landmarks
against float64 brute force, LSC's normalisation, the block Krylov SVD against a float64
dense SVD, the partition against the exact pipeline, and the errors."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import make_blobs
from sklearn.metrics import adjusted_rand_score

from explorer import SpectralClustering
from explorer.landmarks import (
    LandmarkAffinity,
    block_krylov_svd,
    estimate_bytes,
    landmark_affinity,
    landmark_partition,
    nearest_landmarks,
)


def reference_nearest(X, C, r, metric):
    """float64 keys (squared distance, or negated cosine) and the r best per row."""
    X64, C64 = X.astype(np.float64), C.astype(np.float64)
    if metric == "gaussian":
        keys = ((X64[:, None, :] - C64[None, :, :]) ** 2).sum(-1)
    else:
        norms = np.linalg.norm(X64, axis=1)
        keys = -(X64 @ C64.T) / np.where(norms > 0, norms, np.inf)[:, None]
    order = np.argsort(keys, axis=1, kind="stable")
    return keys, order[:, :r]


def check_nearest(X, C, r, metric, cols, vals):
    keys, best = reference_nearest(X, C, r, metric)
    n = X.shape[0]
    rows = np.arange(n)[:, None]
    sorted_keys = np.sort(keys, axis=1)
    scale = 1e-5 * (1.0 + np.abs(sorted_keys[:, : r + 1]).max(axis=1))
    # Where the r-th and (r+1)-th keys are clearly apart, the same set of landmarks.
    clear = (sorted_keys[:, r] - sorted_keys[:, r - 1] > 4 * scale) if keys.shape[1] > r \
        else np.ones(n, bool)
    np.testing.assert_array_equal(np.sort(cols[clear], 1), np.sort(best[clear], 1))
    # Every chosen landmark is within rounding of the r best, in ascending order.
    chosen = keys[rows, cols]
    assert np.all(chosen <= sorted_keys[:, r - 1 : r] + 4 * scale[:, None])
    assert np.all(np.diff(chosen, axis=1) >= -4 * scale[:, None])
    want = chosen if metric == "gaussian" else -chosen
    np.testing.assert_allclose(vals, want, rtol=1e-4, atol=1e-4 * (1 + np.abs(want).max()))


@pytest.mark.parametrize("metric", ["gaussian", "cosine"])
@pytest.mark.parametrize(("n", "p", "r"), [(1, 1, 1), (97, 13, 5), (300, 40, 32)])
def test_nearest_landmarks_match_float64(metric, n, p, r, rng):
    d = 7
    X = rng.standard_normal((n, d)).astype(np.float32)
    C = rng.standard_normal((p, d)).astype(np.float32)
    if metric == "cosine":
        C /= np.linalg.norm(C, axis=1, keepdims=True)
        X[0] = 0.0  # a zero row: cosine 0 with every landmark
    cols, vals = nearest_landmarks(X, C, r, metric)
    assert cols.dtype == np.int32 and vals.dtype == np.float32 and cols.shape == (n, r)
    if metric == "cosine":
        np.testing.assert_array_equal(vals[0], 0.0)
        if n > 1:
            check_nearest(X[1:], C, r, metric, cols[1:], vals[1:])
    else:
        check_nearest(X, C, r, metric, cols, vals)


def dense(affinity):
    return affinity.matrix.toarray().astype(np.float64)


@pytest.mark.parametrize("metric", ["gaussian", "cosine"])
def test_affinity_is_lsc_normalised(metric, rng):
    n, p, r = 300, 20, 4
    X = rng.standard_normal((n, 5)).astype(np.float32)
    C = X[rng.choice(n, p, replace=False)]
    if metric == "cosine":
        C = C / np.linalg.norm(C, axis=1, keepdims=True)
    cols, vals = nearest_landmarks(X, C, r, metric)
    aff, isolated, sigma = landmark_affinity(cols, vals, p, metric, "auto", "scipy")
    Zhat = dense(aff)
    # Z's rows sum to 1 (isolated rows: 0) and Ẑ = Z D^-1/2, D = Z's column sums.
    if metric == "gaussian":
        assert sigma == pytest.approx(np.sqrt(np.maximum(vals, 0).astype(np.float64)).mean())
        w = np.exp(-vals.astype(np.float64) / (2 * sigma**2))
        assert not isolated.any()
    else:
        assert sigma is None
        w = np.maximum(vals.astype(np.float64), 0.0)
        np.testing.assert_array_equal(isolated, w.sum(1) <= 0)
    s = w.sum(1, keepdims=True)
    Z = np.zeros((n, p))
    np.add.at(Z, (np.arange(n)[:, None], cols), np.divide(w, s, out=np.zeros_like(w), where=s > 0))
    D = Z.sum(0)
    want = Z / np.sqrt(np.where(D > 0, D, 1.0))[None, :]
    np.testing.assert_allclose(Zhat, want, rtol=1e-5, atol=1e-7)
    # The landmark graph W = Ẑ Ẑᵀ has every degree 1 (0 for isolated rows).
    np.testing.assert_allclose((Zhat @ (Zhat.T @ np.ones(n))), (~isolated).astype(float),
                               atol=1e-5)
    # Its trivial pair: Ẑ v = constant (on rows with an edge) and Ẑᵀ Ẑ v = v, |v| = 1.
    v = aff.trivial
    assert np.linalg.norm(v) == pytest.approx(1.0)
    u = Zhat @ v
    np.testing.assert_allclose(u[~isolated], u[~isolated][0], rtol=1e-5)
    np.testing.assert_allclose(Zhat.T @ u, v, atol=1e-6)


def random_affinity(rng, n, p, r):
    cols = np.stack([rng.choice(p, r, replace=False) for _ in range(n)]).astype(np.int32)
    vals = rng.uniform(0.0, 1.0, size=(n, r)).astype(np.float32)
    return LandmarkAffinity(cols, vals, p, "scipy")


def check_svd(A, svd, k, tol):
    U, s, Vt = np.linalg.svd(A, full_matrices=False)
    np.testing.assert_allclose(svd.singular_values, s[:k], rtol=tol)
    left = np.asarray(svd.left, dtype=np.float64)
    V = svd.right
    # Singular triplets: A v = σ u and Aᵀ u = σ v, orthonormal vectors.
    np.testing.assert_allclose(A @ V, left * svd.singular_values, atol=10 * tol * s[0])
    np.testing.assert_allclose(A.T @ left, V * svd.singular_values, atol=10 * tol * s[0])
    np.testing.assert_allclose(V.T @ V, np.eye(k), atol=1e-8)
    np.testing.assert_allclose(left.T @ left, np.eye(k), atol=10 * tol)
    # The span agrees with the dense SVD's where the singular values are apart.
    gap = s[k - 1] - s[k] if k < len(s) else np.inf
    if gap > 1e-2 * s[0]:
        cosines = np.linalg.svd(Vt[:k] @ V, compute_uv=False)
        assert cosines.min() > 1 - 1e-4


@pytest.mark.parametrize(("n", "p", "r", "k", "block"),
                         [(500, 60, 5, 6, 8), (401, 33, 3, 10, 3), (200, 7, 2, 5, 4),
                          (300, 50, 5, 1, 1)])
def test_block_krylov_svd_matches_dense_svd(n, p, r, k, block, rng):
    aff = random_affinity(rng, n, p, r)
    svd = block_krylov_svd(aff, k, block_size=block, tol=1e-6, max_iter=500,
                           random_state=int(rng.integers(2**31)))
    assert svd.converged and svd.block_size == min(block, p)
    assert svd.singular_values.shape == (k,) and svd.left.shape == (n, k)
    assert np.all(svd.residuals <= 1e-6 * svd.singular_values[0] ** 2 + 1e-12) or \
        svd.iterations * svd.block_size >= p
    check_svd(dense(aff), svd, k, 1e-5)


def test_block_krylov_svd_spans_small_p_exactly(rng):
    # p = 6 columns, blocks of 4: the basis spans all of them after two blocks.
    aff = random_affinity(rng, 100, 6, 3)
    svd = block_krylov_svd(aff, 5, block_size=4, tol=1e-14, random_state=0)
    assert svd.converged and svd.iterations == 2
    check_svd(dense(aff), svd, 5, 1e-5)


def blobs(rng, n=3000, k=5, d=8):
    X, y = make_blobs(n, n_features=d, centers=k, cluster_std=1.0, center_box=(-20, 20),
                      random_state=int(rng.integers(2**31)))
    return X.astype(np.float32), y


@pytest.mark.parametrize("metric", ["gaussian", "cosine"])
def test_easy_blobs_within_002_ari_of_the_exact_pipeline(metric, rng):
    X, y = blobs(rng)
    if metric == "cosine":
        X += 60.0  # blobs far from the origin: distinct directions
    exact = SpectralClustering(5, metric=metric, backend="cpu", random_state=0).fit(X)
    part = landmark_partition(X, 5, n_landmarks=200, metric=metric, backend="cpu",
                              random_state=0)
    a_exact = adjusted_rand_score(y, exact.labels_)
    a_land = adjusted_rand_score(y, part.labels)
    assert a_land >= a_exact - 0.02
    if a_exact >= 0.98:  # (the exact cosine graph sometimes merges two blobs)
        assert adjusted_rand_score(exact.labels_, part.labels) >= 0.98
    assert part.backend == "cpu" and part.solver == "block-krylov"
    assert part.labels.dtype == np.int32 and part.labels.shape == (len(X),)
    assert part.landmarks.shape == (200, X.shape[1])
    assert part.embedding.shape == (len(X), 5)
    np.testing.assert_allclose(np.linalg.norm(part.embedding, axis=1), 1.0, rtol=1e-5)
    assert set(part.timings) == {"landmarks", "affinity", "svd", "kmeans", "total"}
    # σ₁ = 1 (the trivial pair, deflated), then the k used, below it.
    assert part.singular_values.shape == (6,) and part.singular_values[0] == 1.0
    assert np.all(np.diff(part.singular_values) <= 1e-6)


def test_auto_k_and_random_landmarks(rng):
    X, y = blobs(rng, n=2000, k=4)
    part = landmark_partition(X, "auto", n_landmarks=150, landmark_method="random",
                              backend="cpu", random_state=1)
    assert part.n_clusters == 4 and part.landmark_method == "random"
    assert adjusted_rand_score(y, part.labels) > 0.99
    # Random landmarks are rows of X.
    rows = {tuple(r) for r in X}
    assert all(tuple(c) in rows for c in part.landmarks)


def test_same_seed_same_labels_on_the_cpu(rng):
    X, _ = blobs(rng, n=1500, k=3)
    a = landmark_partition(X, 3, n_landmarks=100, backend="cpu", random_state=7)
    b = landmark_partition(X, 3, n_landmarks=100, backend="cpu", random_state=7)
    np.testing.assert_array_equal(a.labels, b.labels)


def test_cosine_isolated_points_get_minus_one(rng):
    X, _ = blobs(rng, n=800, k=3)
    X += 60.0
    X[5] = 0.0  # cosine 0 with every landmark: no positive weight
    part = landmark_partition(X, 3, n_landmarks=50, metric="cosine", backend="cpu",
                              random_state=0)
    assert part.labels[5] == -1 and part.isolated[5]
    assert np.isnan(part.embedding[5]).all()
    assert (part.labels[np.arange(len(X)) != 5] >= 0).all()


@pytest.mark.parametrize(("kwargs", "match", "exc"), [
    ({"n_landmarks": 1}, r"n_landmarks=1 is out of range", ValueError),
    ({"n_landmarks": 101}, r"n_landmarks=101 is out of range for n_samples=100", ValueError),
    ({"n_landmarks": 2.5}, r"n_landmarks must be an integer", TypeError),
    ({"n_landmarks": 4}, r"n_clusters=4 is out of range: n_landmarks=4 give 3 singular "
                         r"vectors besides the trivial one", ValueError),
    ({"n_nearest": 0}, r"n_nearest=0 is out of range", ValueError),
    ({"n_nearest": 33}, r"n_nearest=33 is out of range; allowed: 1 <= n_nearest <= "
                        r"min\(n_landmarks=50, 32\)", ValueError),
    ({"n_landmarks": 6, "n_nearest": 7}, r"n_nearest=7 is out of range", ValueError),
    ({"metric": "uniform"}, r"metric='uniform' is not allowed", ValueError),
    ({"sigma": 0.0}, r"sigma=0.0 is out of range", ValueError),
    ({"sigma": "wide"}, r"sigma='wide' is not allowed", ValueError),
    ({"landmark_method": "grid"}, r"landmark_method='grid' is not allowed", ValueError),
    ({"spmm": "csr"}, r"spmm='csr' is not allowed", ValueError),
    ({"block_size": 65}, r"block_size=65 is out of range", ValueError),
    ({"svd_tol": 0.0}, r"svd_tol=0.0 is out of range", ValueError),
    ({"svd_max_iter": 0}, r"svd_max_iter=0 is out of range", ValueError),
    ({"backend": "tpu"}, r"backend='tpu' is not allowed", ValueError),
])
def test_bad_arguments_are_named(kwargs, match, exc, rng):
    X = rng.standard_normal((100, 3)).astype(np.float32)
    args = {"n_landmarks": 50, "backend": "cpu", **kwargs}
    with pytest.raises(exc, match=match):
        landmark_partition(X, 4, **args)


def test_bad_n_clusters_and_data(rng):
    X = rng.standard_normal((100, 3)).astype(np.float32)
    with pytest.raises(ValueError, match=r"n_clusters='many' is not allowed"):
        landmark_partition(X, "many", n_landmarks=50, backend="cpu")
    with pytest.raises(ValueError, match=r"n_clusters=0 is out of range"):
        landmark_partition(X, 0, n_landmarks=50, backend="cpu")
    X[3, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        landmark_partition(X, 2, n_landmarks=50, backend="cpu")


def test_memory_estimate_grows_with_the_work():
    def est(n):
        return estimate_bytes(n, 784, 1000, 5, 10, 16, gpu=True, copy_data=False)

    small = est(10**5)
    # Linear in n once the fixed block of products is counted.
    assert est(10**7) - est(10**6) == pytest.approx(10 * (est(10**6) - est(10**5)))
    assert estimate_bytes(10**5, 784, 1000, 5, 10, 16, gpu=True, copy_data=True) == \
        pytest.approx(small + 4.0 * 10**5 * 784)
    # 10^7 × 784 with 5 landmarks per point: the selections, not the data, dominate.
    big = estimate_bytes(10**7, 784, 1000, 5, 10, 16, gpu=True, copy_data=False)
    assert 2e9 < big < 1e10


def test_estimator_mode_landmarks(rng):
    from explorer import SpectralClustering

    X, y = blobs(rng, n=2000, k=4)
    sc = SpectralClustering(4, mode="landmarks", n_landmarks=120, backend="cpu",
                            random_state=3).fit(X)
    part = landmark_partition(X, 4, n_landmarks=120, backend="cpu", random_state=3)
    np.testing.assert_array_equal(sc.labels_, part.labels)
    assert sc.mode_ == "landmarks" and sc.landmarks_.shape == (120, X.shape[1])
    assert sc.affinity_matrix_ is None and sc.graph_ is None and sc.edge_rule_ is None
    assert sc.landmark_partition_.affinity is None
    assert sc.metric_ == "gaussian" and sc.eigen_solver_ == "block-krylov"
    np.testing.assert_allclose(sc.eigenvalues_, 1 - part.singular_values[:4] ** 2)
    assert sc.eigenvalues_[0] == 0.0 and sc.embedding_.shape == (2000, 4)
    assert set(sc.timings_) == {"landmarks", "affinity", "svd", "kmeans", "total"}
    assert adjusted_rand_score(y, sc.labels_) > 0.99
    # The default number of landmarks: min(1000, n).
    small = SpectralClustering(3, mode="landmarks", backend="cpu", random_state=0).fit(X[:300])
    assert small.landmarks_.shape[0] == 300
    exact = SpectralClustering(4, backend="cpu", random_state=0).fit(X)
    assert exact.mode_ == "exact" and exact.landmarks_ is None


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"mode": "fast"},
     r"mode='fast' is not allowed; use one of 'auto', 'exact', 'representatives', 'landmarks'"),
    ({"mode": "landmarks", "affinity": "precomputed"},
     r"affinity='precomputed' is not allowed with mode='landmarks'"),
    ({"mode": "landmarks", "metric": "uniform"}, r"metric='uniform' is not allowed"),
    ({"mode": "landmarks", "n_nearest_landmarks": 0}, r"n_nearest_landmarks=0 is out of range"),
])
def test_estimator_mode_errors(kwargs, match, rng):
    from explorer import SpectralClustering

    X = rng.standard_normal((200, 3)).astype(np.float32)
    with pytest.raises(ValueError, match=match):
        SpectralClustering(2, backend="cpu", **kwargs).fit(X)


def test_cli_run_landmarks(tmp_path):
    import json

    from explorer.cli import main

    path = tmp_path / "run.json"
    assert main(["run", "blobs", "--n-samples", "3000", "--mode", "landmarks",
                 "--n-landmarks", "150", "--backend", "cpu", "--json", str(path)]) == 0
    result = json.loads(path.read_text())
    assert result["mode"]["name"] == "landmarks" and result["landmarks"]["n_landmarks"] == 150
    assert result["scores"]["ari"] > 0.9
    assert main(["run", "blobs", "--mode", "landmarks", "--threshold-sqdist", "0.1",
                 "--backend", "cpu"]) == 2


def test_landmark_mode_applies_scale(rng):
    # One feature in metres, one in millimetres: scale="standard" is applied before
    # the landmarks are drawn, as in the other modes (it was ignored here once).
    import warnings

    from explorer.preprocessing import FeatureScaleWarning, fit_scaler

    X, y = make_blobs(600, centers=3, cluster_std=0.4, random_state=int(rng.integers(2**31)))
    X = X * np.array([1.0, 1000.0])
    kw = dict(mode="landmarks", n_landmarks=60, backend="cpu", random_state=0)
    scaled = SpectralClustering(3, scale="standard", **kw).fit(X)
    assert scaled.scaler_ is not None and scaled.scaler_.method == "standard"
    by_hand = SpectralClustering(3, scale=None, **kw).fit(
        fit_scaler(X, "standard").transform(X))
    auto = SpectralClustering(3, **kw).fit(X)  # scale="auto": ranges 1000-fold apart
    assert auto.scaler_.method == "standard"
    # The same partition as the fit of the data scaled by hand (float32 either way,
    # scaled in another order: the landmarks' k-means may part by rounding, so the
    # landmarks are compared by the space they lie in, not value by value).
    assert adjusted_rand_score(scaled.labels_, by_hand.labels_) > 0.99
    assert np.abs(scaled.landmarks_).max() < 10  # standard units
    with warnings.catch_warnings():  # the scale warning, when the spreads differ enough
        warnings.simplefilter("ignore", FeatureScaleWarning)
        unscaled = SpectralClustering(3, scale=None, **kw).fit(X)
    assert np.abs(unscaled.landmarks_[:, 1]).max() > 100  # millimetres
