"""scikit-learn conformance of the public estimators (issue 23): its estimator checks,
tags, parameter round trips and pickling on both backends.

``parametrize_with_checks`` runs scikit-learn's own checks (``check_estimator``) on
every public estimator as CI runs the suite. On a GPU machine ``backend="auto"`` takes
the GPU, so there the same checks run the GPU path with NumPy input.
"""

from __future__ import annotations

import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.utils import get_tags
from sklearn.utils.estimator_checks import parametrize_with_checks

from explorer import KMeans, SpectralClustering, build_graph
from explorer._persistence import host_copy

ROOT = Path(__file__).resolve().parents[1]

#: Every public estimator: SpectralClustering with its defaults (affinity="auto"), the
#: ε-graph chosen from the data and with an explicit edge rule, on a precomputed
#: affinity matrix, the kNN graph, and KMeans.
ESTIMATORS = [
    SpectralClustering(),
    SpectralClustering(affinity="epsilon"),
    SpectralClustering(metric="gaussian", sigma=0.5, threshold_sqdist=4.0),
    SpectralClustering(affinity="precomputed"),
    SpectralClustering(affinity="nearest_neighbors"),
    KMeans(),
]


def _expected_failed_checks(estimator):
    if isinstance(estimator, SpectralClustering) and estimator.affinity == "precomputed":
        return {
            "check_clustering": (
                "check_clustering fits the points of make_blobs (50 x 2) without applying "
                "the pairwise tag, unlike every other check; an estimator taking an "
                "n_samples x n_samples affinity matrix must refuse them, as "
                "check_nonsquare_error demands"
            ),
        }
    return {}


@parametrize_with_checks(ESTIMATORS, expected_failed_checks=_expected_failed_checks)
def test_scikit_learn_estimator_checks(estimator, check):
    check(estimator)


# ------------------------------------------------------------------------------ tags


def test_tags_say_what_input_is_accepted():
    points = get_tags(SpectralClustering(backend="cpu"))
    graph = get_tags(SpectralClustering(affinity="precomputed", backend="cpu"))
    kmeans = get_tags(KMeans())
    assert not points.input_tags.pairwise and not points.input_tags.sparse
    assert not points.input_tags.positive_only and not points.input_tags.allow_nan
    assert graph.input_tags.pairwise and graph.input_tags.sparse
    assert graph.input_tags.positive_only  # affinities are >= 0
    assert not kmeans.input_tags.sparse and not kmeans.input_tags.pairwise
    # The CPU path repeats exactly for a fixed random_state; KMeans on NumPy too.
    assert not points.non_deterministic and not graph.non_deterministic
    assert not kmeans.non_deterministic


@pytest.mark.gpu
def test_gpu_runs_are_tagged_non_deterministic():
    assert get_tags(SpectralClustering(backend="gpu")).non_deterministic
    assert get_tags(SpectralClustering()).non_deterministic  # auto takes the GPU here


# --------------------------------------------------------------- parameters, clone


@pytest.mark.parametrize("estimator", ESTIMATORS, ids=repr)
def test_get_params_set_params_clone_round_trip(estimator):
    params = estimator.get_params()
    twin = clone(estimator)
    assert twin is not estimator and twin.get_params() == params
    changed = {"n_clusters": 3, "random_state": 7}
    if isinstance(estimator, SpectralClustering):
        changed["affinity"] = "epsilon" if estimator.affinity == "precomputed" else "precomputed"
    assert twin.set_params(**changed) is twin
    assert twin.get_params() == {**params, **changed}
    assert estimator.get_params() == params  # the original is untouched
    assert clone(twin).get_params() == twin.get_params()


def test_affinity_is_validated_with_the_allowed_values():
    X = np.random.default_rng(0).random((10, 2))
    for bad in ("gaussian", "rbf_kernel", None):
        with pytest.raises(ValueError, match=rf"affinity={bad!r} is not allowed; use one of "
                                             r"'auto', 'epsilon', 'knn', 'mutual_knn', "
                                             r"'nearest_neighbors', 'precomputed', "
                                             r"'precomputed_nearest_neighbors', 'rbf'"):
            SpectralClustering(2, affinity=bad, backend="cpu").fit(X)
    # scikit-learn's names are taken, with its meanings
    for good in ("rbf", "laplacian", "nearest_neighbors", lambda a, b: 1.0):
        labels = SpectralClustering(2, affinity=good, random_state=0, backend="cpu").fit(X)
        assert labels.labels_.shape == (10,)


# ------------------------------------------------------------------- input messages


def test_sparse_points_are_refused_pointing_at_precomputed():
    X = sp.csr_matrix(np.eye(4))
    with pytest.raises(TypeError, match=r"sparse input is not supported.*affinity='precomputed'"):
        SpectralClustering(2, metric="uniform", threshold_sqdist=1.0, backend="cpu").fit(X)
    with pytest.raises(TypeError, match=r"Sparse data was passed for X"):
        KMeans(2).fit(X)


def test_feature_names_in_from_a_dataframe():
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(0)
    X = pd.DataFrame(rng.random((30, 3)), columns=["a", "b", "c"])
    km = KMeans(2, random_state=0).fit(X)
    assert list(km.feature_names_in_) == ["a", "b", "c"] and km.n_features_in_ == 3
    with pytest.raises(ValueError, match="The feature names should match"):
        km.predict(X[["c", "b", "a"]])
    with pytest.raises(ValueError, match="X has 2 features, but KMeans is expecting 3"):
        km.predict(X.to_numpy()[:, :2])
    sc = SpectralClustering(2, metric="gaussian", sigma=0.5, threshold_sqdist=4.0,
                            backend="cpu", random_state=0).fit(X)
    assert list(sc.feature_names_in_) == ["a", "b", "c"] and sc.n_features_in_ == 3
    assert not hasattr(KMeans(2).fit(X.to_numpy()), "feature_names_in_")


# ----------------------------------------------------------------------- pickling

#: Loads a pickle in a fresh process where importing CuPy fails, as on a machine
#: without it, and reports the kinds of the fitted attributes.
_LOAD_WITHOUT_CUPY = textwrap.dedent("""
    import pickle, sys
    sys.modules["cupy"] = None   # import cupy raises ImportError
    sys.modules["cupyx"] = None
    est = pickle.load(open(sys.argv[1], "rb"))
    kinds = {}
    for name, value in vars(est).items():
        kinds[name] = type(value).__module__.split(".")[0]
    graph = getattr(est, "graph_", None)
    if graph is not None:
        kinds["graph_.csr"] = type(graph.csr).__module__.split(".")[0]
    assert not any(m.startswith("cupy") for m in sys.modules if sys.modules[m] is not None)
    print(repr(kinds))
    pickle.dump(est, open(sys.argv[1] + ".back", "wb"))
""")


def _load_without_cupy(est, tmp_path):
    path = tmp_path / "est.pkl"
    path.write_bytes(pickle.dumps(est))
    done = subprocess.run(
        [sys.executable, "-c", _LOAD_WITHOUT_CUPY, str(path)], capture_output=True, text=True,
        cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}, timeout=120,
    )
    assert done.returncode == 0, done.stderr
    kinds = eval(done.stdout.strip().splitlines()[-1])  # a dict of str literals
    assert not any(kind in ("cupy", "cupyx") for kind in kinds.values()), kinds
    return kinds, pickle.loads(Path(str(path) + ".back").read_bytes())


def _blobs(rng, n=60):
    centres = np.array([[0.0, 0.0], [3.0, 3.0], [0.0, 4.0]])
    return (centres[np.arange(n) % 3] + 0.3 * rng.standard_normal((n, 2))).astype(np.float32)


def test_pickle_round_trip_on_the_cpu(rng, tmp_path):
    X = _blobs(rng)
    for est in (
        SpectralClustering(3, metric="gaussian", sigma=0.5, threshold_sqdist=2.0,
                           backend="cpu", random_state=0),
        SpectralClustering(3, affinity="precomputed", backend="cpu", random_state=0),
        KMeans(3, random_state=0),
    ):
        data = X
        if getattr(est, "affinity", None) == "precomputed":
            data = build_graph(X, metric="gaussian", sigma=0.5, threshold_sqdist=2.0,
                               backend="cpu").csr
        est.fit(data)
        kinds, back = _load_without_cupy(est, tmp_path)
        assert kinds["labels_"] == "numpy"
        np.testing.assert_array_equal(back.labels_, est.labels_)
        assert back.get_params() == est.get_params()
        if isinstance(est, KMeans):
            np.testing.assert_array_equal(back.predict(X), est.predict(X))
        else:
            assert (back.affinity_matrix_ != est.affinity_matrix_).nnz == 0
            np.testing.assert_array_equal(back.embedding_, est.embedding_)
            assert back.graph_stats_.to_dict() == est.graph_stats_.to_dict()


class _FakeDeviceArray:
    """Stands for a CuPy array on a machine without CuPy: its type's module says
    ``cupy`` and ``get()`` gives the host copy, which is all ``host_copy`` relies on."""

    __module__ = "cupy._core.core"

    def __init__(self, host):
        self.host = host

    def get(self):
        return self.host


def test_host_copy_replaces_device_objects_everywhere():
    from explorer.graph import Graph

    a = np.arange(3)
    csr = sp.csr_matrix(np.eye(2))
    graph = Graph(csr=_FakeDeviceArray(csr), rule=None, stats=None, info={"x": [a]})
    state = {"labels_": _FakeDeviceArray(a), "graph_": graph, "pair": (1, _FakeDeviceArray(a)),
             "plain": a}
    out = host_copy(state)
    assert out["labels_"] is a and out["pair"] == (1, a) and out["plain"] is a
    assert out["graph_"].csr is csr and out["graph_"].info["x"][0] is a
    assert state["graph_"].csr.host is csr  # the estimator's own objects are untouched
    assert host_copy(graph.info) is graph.info  # nothing on a device: the same object


@pytest.mark.gpu
def test_a_gpu_fit_unpickles_without_cupy(rng, tmp_path):
    import cupy
    import cupyx.scipy.sparse

    X = _blobs(rng, 300)
    Xd = cupy.asarray(X)
    rule = {"metric": "gaussian", "sigma": 0.5, "threshold_sqdist": 2.0}
    for est, data in (
        (SpectralClustering(3, **rule, backend="gpu", random_state=0), Xd),
        (SpectralClustering(3, affinity="precomputed", backend="gpu", random_state=0),
         build_graph(Xd, **rule, backend="gpu").csr),
        (KMeans(3, random_state=0), Xd),
    ):
        est.fit(data)
        assert isinstance(est.labels_, cupy.ndarray)  # CuPy in, CuPy out
        if isinstance(est, SpectralClustering):
            assert est.backend_ == "gpu"
            assert isinstance(est.affinity_matrix_, cupyx.scipy.sparse.csr_matrix)
            assert isinstance(est.embedding_, cupy.ndarray)
        kinds, back = _load_without_cupy(est, tmp_path)
        assert kinds["labels_"] == "numpy", kinds
        np.testing.assert_array_equal(back.labels_, cupy.asnumpy(est.labels_))
        assert isinstance(est.labels_, cupy.ndarray)  # pickling left the estimator as it was
        if isinstance(est, KMeans):
            assert kinds["cluster_centers_"] == "numpy"
            np.testing.assert_array_equal(back.cluster_centers_,
                                          cupy.asnumpy(est.cluster_centers_))
            np.testing.assert_array_equal(back.predict(X), cupy.asnumpy(est.predict(Xd)))
        else:
            for name in ("embedding_", "eigenvectors_", "isolated_"):
                assert kinds[name] == "numpy", (name, kinds)
                np.testing.assert_array_equal(getattr(back, name),
                                              cupy.asnumpy(getattr(est, name)))
            assert kinds["affinity_matrix_"] == "scipy" and kinds["graph_.csr"] == "scipy"
            assert back.backend_ == "gpu"
            assert (back.affinity_matrix_ != est.affinity_matrix_.get()).nnz == 0
