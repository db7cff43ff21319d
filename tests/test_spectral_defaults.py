"""SpectralClustering with no graph parameters: chosen from the data at fit, recorded."""

import warnings

import numpy as np
import pytest
from sklearn.datasets import make_blobs
from sklearn.preprocessing import StandardScaler

from explorer import EdgeRule, SpectralClustering, datasets
from explorer.metrics import adjusted_rand_score


def test_readme_example_fits_with_no_graph_parameters():
    ds = datasets.load("moons", n_samples=2000, noise=0.05, random_state=0)
    sc = SpectralClustering(n_clusters=2, random_state=0, backend="cpu")
    labels = sc.fit_predict(ds.X)
    # the same rule as the data set's suggestion, so the same score
    ref = SpectralClustering(**ds.suggested, random_state=0, backend="cpu").fit(ds.X)
    assert np.array_equal(labels, ref.labels_)
    assert adjusted_rand_score(ds.y, labels) > 0.95
    assert sc.edge_rule_ == ref.edge_rule_
    assert sc.metric_ == ds.suggested["metric"] == "gaussian"
    assert sc.sigma_ == ds.suggested["sigma"]
    assert sc.threshold_sqdist_ == ds.suggested["threshold_sqdist"]
    assert sc.threshold_sim_ is None
    assert set(sc.suggested_params_) == {"metric", "sigma", "threshold_sqdist"}
    assert ref.suggested_params_ == () and "suggest" not in ref.timings_
    assert sc.timings_["suggest"] > 0 and list(sc.timings_)[0] == "suggest"
    assert sc.graph_.rule is sc.edge_rule_


def test_init_stores_parameters_unchanged_and_explicit_values_win(rng):
    sc = SpectralClustering(2)
    params = sc.get_params()
    assert params["metric"] == "auto" and params["sigma"] == "auto"
    assert params["threshold_sqdist"] is None and params["threshold_sim"] is None
    X = rng.normal(size=(200, 2)).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        given = SpectralClustering(2, sigma=0.5, threshold_sqdist=0.5, random_state=0,
                                   backend="cpu").fit(X)
        half = SpectralClustering(2, threshold_sqdist=0.5, random_state=0, backend="cpu").fit(X)
    assert given.edge_rule_ == EdgeRule.from_args("gaussian", 0.5, threshold_sqdist=0.5)
    assert given.suggested_params_ == ()
    assert half.suggested_params_ == ("sigma",) and half.sigma_ == 0.25  # sqrt(0.5 / 8)
    assert half.get_params()["sigma"] == "auto"


@pytest.mark.parametrize("n", [20, 30, 50])
@pytest.mark.parametrize("d", [1, 2, 5, 10])
def test_tiny_blobs_as_scikit_learn_checks_them(n, d):
    # check_clustering: make_blobs, StandardScaler, 3 clusters, ARI > 0.4
    X, y = make_blobs(n_samples=n, n_features=d, random_state=1)
    X = StandardScaler().fit_transform(X)
    sc = SpectralClustering(n_clusters=3, random_state=0, backend="cpu").fit(X)
    assert sc.labels_.shape == (n,)
    assert adjusted_rand_score(y, sc.labels_) > 0.4


def test_identical_rows_and_two_rows_fit():
    X = np.ones((20, 3))
    sc = SpectralClustering(n_clusters=3, random_state=0, backend="cpu").fit(X)
    assert (sc.labels_ >= 0).all() and sc.threshold_sqdist_ > 0
    two = SpectralClustering(n_clusters=1, random_state=0, backend="cpu").fit([[0.0], [1.0]])
    assert list(two.labels_) == [0, 0]


def test_auto_rule_errors_name_the_parameter(rng):
    X = rng.normal(size=(30, 2))
    with pytest.raises(ValueError, match="metric='l2' is not allowed"):
        SpectralClustering(2, metric="l2", backend="cpu").fit(X)
    with pytest.raises(TypeError, match="sigma must be a real number; got 'wide'"):
        SpectralClustering(2, sigma="wide", backend="cpu").fit(X)
    with pytest.raises(ValueError, match="got both"):
        SpectralClustering(2, threshold_sqdist=1.0, threshold_sim=0.5, backend="cpu").fit(X)
