"""Clustering scores against scikit-learn and brute-force float64 definitions."""

from __future__ import annotations

import json

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given
from hypothesis import strategies as st
from sklearn import metrics as skm

from explorer.metrics import (
    adjusted_rand_score,
    clustering_scores,
    compare_runs,
    normalized_cut,
    ratio_cut,
)


def random_graph(rng, n, density=0.3):
    W = rng.random((n, n)) * (rng.random((n, n)) < density)
    W = np.triu(W, 1)
    return sp.csr_matrix((W + W.T).astype(np.float32))


def brute_force_cuts(csr, labels):
    """von Luxburg's definitions, term by term, on the dense float64 matrix."""
    W = csr.toarray().astype(np.float64)
    ncut = rcut = 0.0
    for c in np.unique(labels[labels >= 0]):
        inside = labels == c
        cut = W[np.ix_(inside, ~inside)].sum()
        vol = W[inside].sum()
        ncut += cut / vol if vol > 0 else 0.0
        rcut += cut / inside.sum()
    return ncut, rcut


@given(
    n=st.integers(2, 40),
    k=st.integers(1, 6),
    noise=st.floats(0, 0.5),
    seed=st.integers(0, 2**32 - 1),
)
def test_cuts_match_the_definitions(n, k, noise, seed):
    r = np.random.default_rng(seed)
    csr = random_graph(r, n)
    labels = r.integers(0, k, n) * 3  # non-contiguous ids
    labels[r.random(n) < noise] = -1
    ncut, rcut = brute_force_cuts(csr, labels)
    assert normalized_cut(csr, labels) == pytest.approx(ncut, rel=1e-9, abs=1e-12)
    assert ratio_cut(csr, labels) == pytest.approx(rcut, rel=1e-9, abs=1e-12)


def test_cuts_of_a_path():
    # 0 - 1 - 2 - 3 with unit weights, split in the middle: each side has cut 1,
    # volume 1 + 2 = 3 and 2 vertices.
    W = np.diag(np.ones(3), 1)
    csr = sp.csr_matrix(W + W.T)
    labels = np.array([0, 0, 1, 1])
    assert normalized_cut(csr, labels) == pytest.approx(2 / 3)
    assert ratio_cut(csr, labels) == pytest.approx(1.0)
    # Vertex 3 in no cluster: edge 2-3 is cut for cluster 1 = {2}.
    labels = np.array([0, 0, 1, -1])
    assert normalized_cut(csr, labels) == pytest.approx(1 / 3 + 2 / 2)
    assert ratio_cut(csr, labels) == pytest.approx(1 / 2 + 2 / 1)


def test_components_cost_nothing_and_isolated_vertices_change_nothing(rng):
    a, b = random_graph(rng, 10, 0.8), random_graph(rng, 7, 0.8)
    csr = sp.block_diag([a, b, sp.csr_matrix((3, 3))], format="csr")
    labels = np.r_[np.zeros(10, int), np.ones(7, int), -np.ones(3, int)]
    assert normalized_cut(csr, labels) == 0.0
    assert ratio_cut(csr, labels) == 0.0


def test_a_cluster_without_edges_adds_zero():
    csr = sp.csr_matrix((4, 4), dtype=np.float32)
    assert normalized_cut(csr, np.array([0, 0, 1, 1])) == 0.0
    assert ratio_cut(csr, np.array([0, 0, 1, 1])) == 0.0


@given(
    a=st.lists(st.integers(-1, 4), min_size=2, max_size=60),
    seed=st.integers(0, 2**32 - 1),
)
def test_ari_and_nmi_are_scikit_learns_with_noise_as_a_label(a, seed):
    y_true = np.array(a)
    y_pred = np.random.default_rng(seed).integers(-1, 3, len(a))
    assert adjusted_rand_score(y_true, y_pred) == skm.adjusted_rand_score(y_true, y_pred)
    scores = clustering_scores(sp.csr_matrix((len(a), len(a))), y_pred, y_true)
    assert scores["nmi"] == skm.normalized_mutual_info_score(y_true, y_pred)


def test_unclustered_points_lower_the_agreement():
    y = np.repeat([0, 1, 2], 10)
    pred = y.copy()
    assert adjusted_rand_score(y, pred) == 1.0
    pred[:5] = -1
    assert adjusted_rand_score(y, pred) < 1.0


def test_clustering_scores_collects_everything(rng):
    csr = random_graph(rng, 30)
    labels = rng.integers(-1, 3, 30)
    labels[:3] = [0, 1, 2]
    y = rng.integers(0, 3, 30)
    scores = clustering_scores(csr, labels, y)
    ncut, rcut = brute_force_cuts(csr, labels)
    assert scores == pytest.approx(
        {
            "n_clusters": 3,
            "n_unclustered": int((labels == -1).sum()),
            "normalized_cut": ncut,
            "ratio_cut": rcut,
            "ari": skm.adjusted_rand_score(y, labels),
            "nmi": skm.normalized_mutual_info_score(y, labels),
        }
    )
    assert set(clustering_scores(csr, labels)) == {
        "n_clusters",
        "n_unclustered",
        "normalized_cut",
        "ratio_cut",
    }
    assert all(type(v) in (int, float) for v in scores.values())


def test_invalid_input_is_named():
    csr = sp.csr_matrix(np.ones((3, 3)))
    with pytest.raises(ValueError, match="y_true and y_pred must have the same length"):
        adjusted_rand_score([0, 1], [0, 1, 1])
    with pytest.raises(ValueError, match="y_true must be a 1-D"):
        adjusted_rand_score([[0, 1]], [0, 1])
    with pytest.raises(ValueError, match="labels has 2 labels but the graph has n=3"):
        normalized_cut(csr, [0, 1])
    with pytest.raises(TypeError, match="labels must be integers"):
        normalized_cut(csr, [0.0, 1.0, 1.0])
    with pytest.raises(ValueError, match="-1 for a vertex in no cluster"):
        ratio_cut(csr, [0, -2, 1])
    with pytest.raises(TypeError, match="csr must be a scipy.sparse"):
        normalized_cut(np.ones((3, 3)), [0, 1, 1])
    with pytest.raises(ValueError, match="square"):
        normalized_cut(sp.csr_matrix(np.ones((3, 2))), [0, 1, 1])


@pytest.mark.gpu
def test_cupy_inputs(rng):
    cupy = pytest.importorskip("cupy")
    import cupyx.scipy.sparse as csp

    csr = random_graph(rng, 50)
    labels = rng.integers(-1, 4, 50)
    y = rng.integers(0, 4, 50)
    host = clustering_scores(csr, labels, y)
    device = clustering_scores(csp.csr_matrix(csr), cupy.asarray(labels), cupy.asarray(y))
    assert device == pytest.approx(host, rel=1e-9)


# --------------------------------------------------------------- two runs compared


def test_compare_runs_names_the_changed_points_and_the_differences():
    a = np.array([0, 0, 0, 1, 1, 1, -1])
    b = np.array([5, 5, 2, 2, 2, 2, 5])  # B's ids differ; points 2 and 6 moved
    c = compare_runs(a, b, y_true=a, params_a={"sigma": 0.1, "k": 2},
                     params_b={"sigma": 0.3, "k": 2, "mode": "exact"},
                     plan_a=[("mode", "exact"), ("backend", "cpu")],
                     plan_b=[("mode", "exact"), ("backend", "gpu")])
    assert c.labels_b.tolist() == [0, 0, 1, 1, 1, 1, 0]  # named after A's clusters
    assert c.changed.tolist() == [False, False, True, False, False, False, True]
    assert c.n_changed == 2 and c.n_clusters == (2, 2)
    assert c.ari == pytest.approx(skm.adjusted_rand_score(a, b))
    assert c.ari_truth == (1.0, pytest.approx(c.ari))
    assert c.parameters == {"sigma": (0.1, 0.3), "mode": (None, "exact")}
    assert c.plan == {"backend": ("cpu", "gpu")}
    rows = dict(c.lines())
    assert rows["changed"].startswith("2 of 7 points") and rows["sigma"] == "A 0.1 → B 0.3"
    assert rows["plan: backend"] == "A cpu → B gpu"
    doc = json.loads(json.dumps(c.to_dict()))  # JSON-ready as it is
    assert doc["changed"] == [2, 6] and doc["n_changed"] == 2 and doc["n_clusters"] == [2, 2]
    assert doc["parameters"] == {"sigma": [0.1, 0.3], "mode": [None, "exact"]}
    assert doc["labels_b"] == [0, 0, 1, 1, 1, 1, 0] and doc["ari_truth"][0] == 1.0
    assert doc["plan"] == {"backend": ["cpu", "gpu"]}


def test_compare_runs_refuses_other_data():
    with pytest.raises(ValueError, match="labels_b has 3 points and labels_a 4"):
        compare_runs([0, 0, 1, 1], [0, 1, 1])
    with pytest.raises(ValueError, match="y_true has 2 entries"):
        compare_runs([0, 1, 1], [0, 1, 1], y_true=[0, 1])
