"""One pipeline, one truth: the same data give the same rule and the same clusters on
every path — every input kind, every mode, k-means, the command line.

The data carry a large float64 offset (timestamps in ms, 1.7·10¹²), which float32 cannot
carry on top of their variation: the input stage (explorer.inputs) must take it off in
float64 on every path, or some path clusters noise.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from explorer import EdgeRule, KMeans, SpectralClustering, cli
from explorer.metrics import adjusted_rand_score

OFFSET = 1.7e12


@pytest.fixture(scope="module")
def blobs():
    rng = np.random.default_rng(20261127)
    centres = np.array([[0.0, 0.0], [6.0, 0.0], [0.0, 6.0]])
    y = np.repeat(np.arange(3), 200)
    X = centres[y] + rng.normal(scale=0.7, size=(600, 2))
    order = rng.permutation(600)
    return X[order] + OFFSET, y[order]


def _kinds(X):
    """The input kinds a user passes, all holding the same float64 values."""
    return {
        "ndarray": X,
        "DataFrame": pd.DataFrame(X, columns=["t_ms", "value_ms"]),
        "list": X.tolist(),
    }


@pytest.fixture(scope="module")
def client():
    distributed = pytest.importorskip("distributed")
    with distributed.Client(processes=False, n_workers=2, threads_per_worker=1,
                            dashboard_address=None) as c:
        yield c


MODES = {
    "exact": {"mode": "exact"},
    "representatives": {"mode": "representatives", "n_representatives": 150},
    "landmarks": {"mode": "landmarks", "n_landmarks": 100},
}


@pytest.mark.parametrize("mode", list(MODES))
def test_every_input_kind_gets_the_same_rule_and_clusters(blobs, mode):
    X, y = blobs
    fits = {}
    for kind, data in _kinds(X).items():
        sc = SpectralClustering(3, affinity="epsilon", random_state=0, backend="cpu",
                                **MODES[mode]).fit(data)
        fits[kind] = sc
        assert sc.mode_ == mode
        assert adjusted_rand_score(y, sc.labels_) > 0.99, (kind, mode)
        assert any("offset" in note for note in sc.plan_.data.notes), kind
    ref = fits["ndarray"]
    for kind, sc in fits.items():
        assert sc.edge_rule_ == ref.edge_rule_, kind
        assert sc.sigma_ == ref.sigma_, kind
        np.testing.assert_array_equal(sc.labels_, ref.labels_)
    if mode != "landmarks":  # the rule is the one of the data without the offset
        plain = SpectralClustering(3, affinity="epsilon", random_state=0, backend="cpu",
                                   **MODES[mode]).fit(X - OFFSET)
        assert plain.edge_rule_ == ref.edge_rule_
        np.testing.assert_array_equal(plain.labels_, ref.labels_)


def test_a_dask_array_gets_the_same_rule_and_clusters(blobs, client):
    da = pytest.importorskip("dask.array")
    X, y = blobs
    ref = SpectralClustering(3, affinity="epsilon", random_state=0, backend="cpu",
                             mode="exact").fit(X)
    sc = SpectralClustering(3, affinity="epsilon", random_state=0).fit(
        da.from_array(X, chunks=(150, -1)))
    assert sc.backend_ == "dask" and sc.mode_ == "exact"
    assert sc.edge_rule_ == ref.edge_rule_
    labels = sc.labels_.compute()
    assert adjusted_rand_score(ref.labels_, labels) == 1.0
    assert adjusted_rand_score(y, labels) > 0.99
    km = KMeans(3, random_state=0).fit(da.from_array(X, chunks=(150, -1)))
    assert adjusted_rand_score(y, km.labels_.compute()) > 0.99
    np.testing.assert_allclose(km.cluster_centers_.mean(axis=0), X.mean(axis=0), rtol=1e-9)


def test_kmeans_takes_every_input_kind_alike(blobs):
    X, y = blobs
    ref = KMeans(3, random_state=0).fit(X)
    assert adjusted_rand_score(y, ref.labels_) > 0.99
    for kind, data in _kinds(X).items():
        km = KMeans(3, random_state=0).fit(data)
        np.testing.assert_array_equal(km.labels_, ref.labels_, err_msg=kind)
        np.testing.assert_array_equal(km.predict(data), km.labels_, err_msg=kind)
        np.testing.assert_allclose(km.cluster_centers_, ref.cluster_centers_, rtol=0,
                                   atol=1e-3)
    # the centres are in the data's units: near the blobs, not near 0
    assert np.all(np.abs(ref.cluster_centers_ - OFFSET) < 10)


def test_edge_rule_suggest_is_the_estimators_rule(blobs):
    X, _ = blobs
    rule = EdgeRule.suggest(X, n_clusters=3)
    assert rule == EdgeRule.suggest(X - OFFSET, n_clusters=3)
    assert rule == SpectralClustering(3, affinity="epsilon", backend="cpu").plan(X).rule
    # a clean graph: each point joined to a few dozen others, not to all 600
    from explorer import build_graph

    assert build_graph(X, rule).stats.nnz_row_mean < 100


def test_the_command_line_prints_the_librarys_plan_and_clusters_alike(blobs, tmp_path,
                                                                        capsys):
    X, y = blobs
    path, out = tmp_path / "t.csv", tmp_path / "r.json"
    pd.DataFrame({"t_ms": X[:, 0], "value_ms": X[:, 1], "label": y}).to_csv(
        path, index=False, float_format="%.6f")
    code = cli.main(["run", "--file", str(path), "--label-column", "label", "--graph",
                     "epsilon", "--backend", "cpu", "--mode", "exact", "--json", str(out)])
    printed = capsys.readouterr().out
    assert code == 0
    doc = json.loads(out.read_text())
    ref = SpectralClustering(3, affinity="epsilon", random_state=0, backend="cpu",
                             mode="exact").fit(X)
    assert doc["edge_rule"] == ref.edge_rule_.describe()
    assert doc["mode"] == {"name": "exact", "reason": "mode='exact' given"}
    assert doc["scores"]["ari"] > 0.99
    # the plan as the library words it, nothing re-derived
    for label, text in ref.plan_.lines():
        if label in ("mode", "graph kind", "edge rule"):
            assert text in printed, label
    code = cli.main(["run", "--file", str(path), "--label-column", "label", "--backend",
                     "cpu", "--json", str(out)])
    doc = json.loads(out.read_text())
    capsys.readouterr()
    assert "given" not in doc["mode"]["reason"]  # not passed: the library decided


@pytest.mark.parametrize("kw", [{}, {"affinity": "nearest_neighbors"},
                                {"metric": "gaussian", "sigma": 0.5,
                                 "threshold_sqdist": 2.0}])
def test_a_fit_reads_the_points_in_one_input_stage(monkeypatch, kw):
    # The entries a fit calls again (the edge rule's suggestion, the affinity choice's
    # sample graphs, the graph build) take the fit's points as prepared: one read of
    # the n × d points for their extremes, not one per entry (k-means reads the
    # embedding, n × k, which this count leaves out).
    import explorer._validation as validation
    import explorer.inputs as inputs

    rng = np.random.default_rng(7)
    X = np.concatenate([rng.normal(c, 0.3, size=(300, 3)) for c in (0.0, 4.0)])
    X = X.astype(np.float32)
    reads = []
    for module in (inputs, validation):
        real = module.column_extremes

        def counted(A, real=real):
            if A.shape == X.shape:
                reads.append(A.shape)
            return real(A)

        monkeypatch.setattr(module, "column_extremes", counted)
    sc = SpectralClustering(2, random_state=0, **kw).fit(X)
    assert len(reads) == 1
    assert np.unique(sc.labels_).size == 2
