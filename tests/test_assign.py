"""explorer.assign: discretize and cluster_qr against scikit-learn's on the same vectors.

Both are written from the papers ("Multiclass spectral clustering", Yu & Shi 2003;
"Simple, direct and efficient multi-way spectral clustering", Damle, Minden & Ying
2019) with scikit-learn's semantics, so on the same eigenvectors (and, for
discretize, the same seed) they must give scikit-learn's labels.
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.cluster._spectral import cluster_qr as sk_cluster_qr
from sklearn.cluster._spectral import discretize as sk_discretize
from sklearn.datasets import make_blobs
from sklearn.manifold import spectral_embedding
from sklearn.metrics import adjusted_rand_score
from sklearn.metrics.pairwise import rbf_kernel

from explorer.assign import ASSIGN_LABELS, _labels_from_pivots, _pivots, cluster_qr, discretize


def _blob_embedding(rng, n=300, k=4, std=0.6):
    """Separated blobs (centres 10 apart on a circle, turned at random), their rbf
    affinity's spectral embedding (k columns), the truth."""
    seed = int(rng.integers(2**31))
    angles = rng.uniform(0, 2 * np.pi) + 2 * np.pi * np.arange(k) / k
    radius = 5.0 / np.sin(np.pi / k)  # neighbouring centres 10 apart
    centers = radius * np.column_stack([np.cos(angles), np.sin(angles)])
    X, y = make_blobs(n, centers=centers, cluster_std=std, random_state=seed)
    A = rbf_kernel(X, gamma=0.5)
    V = spectral_embedding(A, n_components=k, random_state=seed, drop_first=False)
    return V, y, seed


def _same_partition(a, b):
    """Equal up to renaming the labels: a bijection between the two label sets."""
    pairs = set(zip(a.tolist(), b.tolist(), strict=True))
    return len(pairs) == len(set(a.tolist())) == len(set(b.tolist()))


def test_assign_labels_are_scikit_learns_names():
    assert ASSIGN_LABELS == ("kmeans", "discretize", "cluster_qr")


@pytest.mark.parametrize("k", [2, 3, 5])
def test_on_separated_blobs_both_recover_the_blobs_and_match_scikit_learn(rng, k):
    V, y, seed = _blob_embedding(rng, k=k)
    ours_d = discretize(V, random_state=seed)
    ours_q = cluster_qr(V)
    assert adjusted_rand_score(y, ours_d) == 1.0
    assert adjusted_rand_score(y, ours_q) == 1.0
    assert _same_partition(ours_d, sk_discretize(V, random_state=seed))
    assert _same_partition(ours_q, sk_cluster_qr(V))


def test_same_labels_as_scikit_learn_on_noise(rng):
    # No cluster structure at all: every argmax and every rotation step must agree.
    for _ in range(5):
        n, k = int(rng.integers(20, 300)), int(rng.integers(2, 9))
        V = rng.standard_normal((n, k))
        seed = int(rng.integers(2**31))
        np.testing.assert_array_equal(discretize(V, seed), sk_discretize(V, random_state=seed))
        np.testing.assert_array_equal(cluster_qr(V), sk_cluster_qr(V))


def test_random_state_instance_is_consumed_as_scikit_learn_does(rng):
    V = rng.standard_normal((200, 4))
    ours, theirs = np.random.RandomState(7), np.random.RandomState(7)
    for _ in range(3):  # a shared RandomState advances the same way on both sides
        np.testing.assert_array_equal(discretize(V, ours), sk_discretize(V, random_state=theirs))


def test_float32_and_float64_vectors_give_the_same_labels(rng):
    V = rng.standard_normal((150, 5))
    assert np.array_equal(cluster_qr(V), cluster_qr(V.astype(np.float32)))
    assert np.array_equal(discretize(V, 3), discretize(V.astype(np.float32), 3))


def test_labels_are_int64_in_range_and_the_input_is_untouched(rng):
    V = rng.standard_normal((100, 6))
    before = V.copy()
    for labels in (discretize(V, 0), cluster_qr(V)):
        assert labels.dtype == np.int64 and labels.shape == (100,)
        assert labels.min() >= 0 and labels.max() < 6
    np.testing.assert_array_equal(V, before)


def test_cluster_qr_does_not_depend_on_the_order_of_the_points(rng):
    V = rng.standard_normal((120, 4))
    perm = rng.permutation(120)
    np.testing.assert_array_equal(cluster_qr(V)[perm], cluster_qr(V[perm]))


def test_device_pivots_are_lapacks_column_pivots(rng):
    # The pivot rule CuPy runs (explorer.assign._pivots), here in NumPy, against LAPACK's.
    import scipy.linalg

    for _ in range(5):  # no ties: the same pivots
        V = rng.standard_normal((int(rng.integers(50, 400)), int(rng.integers(2, 10))))
        k = V.shape[1]
        lapack = scipy.linalg.qr(V.T, mode="r", pivoting=True)[1][:k]
        assert _pivots(np, V.T, k) == lapack.tolist()
    for k in (2, 4, 6):  # tight clusters: pivots may differ among near ties, labels do not
        V, y, _ = _blob_embedding(rng, k=k)
        labels = _labels_from_pivots(np, V, _pivots(np, V.T, k))
        assert _same_partition(labels, cluster_qr(V))
        assert adjusted_rand_score(y, labels) == 1.0
    # rank below k: the columns not yet taken, first one first, as LAPACK does
    V = np.zeros((6, 3))
    V[2] = [1.0, 0.0, 0.0]
    assert _pivots(np, V.T, 3)[:1] == [2] and sorted(_pivots(np, V.T, 3)) == [0, 1, 2]


def test_discretize_with_a_zero_row_stays_finite(rng):
    # An isolated point of the graph can embed as an all-zero row.
    V, y, seed = _blob_embedding(rng, k=3)
    V = np.vstack([V, np.zeros((1, 3))])
    labels = discretize(V, random_state=seed)
    assert labels[-1] == 0
    assert adjusted_rand_score(y, labels[:-1]) == 1.0
    assert discretize(np.zeros((5, 2)), random_state=seed).tolist() == [0] * 5


def test_discretize_gives_up_with_linalgerror_after_max_svd_restarts(monkeypatch):
    calls = []

    def failing_svd(*args, **kwargs):
        calls.append(1)
        raise np.linalg.LinAlgError("no")

    monkeypatch.setattr(np.linalg, "svd", failing_svd)
    with pytest.raises(np.linalg.LinAlgError, match="SVD did not converge.*max_svd_restarts=4"):
        discretize(np.ones((10, 4)), random_state=0, max_svd_restarts=4)
    assert len(calls) == 4


@pytest.mark.parametrize("bad", [np.ones(5), np.ones((0, 3)), np.ones((4, 0)),
                                 np.array([[1.0, np.nan], [0.0, 1.0]])])
def test_bad_vectors_are_refused_naming_the_argument(bad):
    for f in (discretize, cluster_qr):
        with pytest.raises(ValueError, match="vectors"):
            f(bad)


def test_bad_iteration_counts_and_too_few_samples_are_refused():
    with pytest.raises(ValueError, match="max_svd_restarts"):
        discretize(np.eye(3), max_svd_restarts=0)
    with pytest.raises(ValueError, match="n_iter_max"):
        discretize(np.eye(3), n_iter_max=1.5)
    with pytest.raises(ValueError, match="at least as many samples"):
        cluster_qr(np.ones((2, 3)))


@pytest.mark.gpu
def test_cupy_vectors_give_the_numpy_labels_on_the_device(rng):
    import cupy

    for k in (2, 4):
        V, y, seed = _blob_embedding(rng, n=2000, k=k)
        for dtype in (np.float64, np.float32):
            Vd = cupy.asarray(V, dtype=dtype)
            d, q = discretize(Vd, random_state=seed), cluster_qr(Vd)
            assert isinstance(d, cupy.ndarray) and isinstance(q, cupy.ndarray)
            assert d.dtype == q.dtype == cupy.int64
            assert _same_partition(d.get(), discretize(V, random_state=seed))
            assert _same_partition(q.get(), cluster_qr(V))
            assert adjusted_rand_score(y, d.get()) == 1.0
            assert adjusted_rand_score(y, q.get()) == 1.0
    noise = rng.standard_normal((500, 5))
    np.testing.assert_array_equal(discretize(cupy.asarray(noise), 1).get(), discretize(noise, 1))
    np.testing.assert_array_equal(cluster_qr(cupy.asarray(noise)).get(), cluster_qr(noise))
