"""The app's options for the library's newer keywords (issues 16, 17), without a browser.

Feature scaling (``scale``), kNN graphs (``graph``, ``n_neighbors``, self-tuning σ),
``affinity="auto"`` and the pipelines (``mode``, ``n_representatives``,
``n_landmarks``): each parameter reaches the estimator's keywords, the statistics and
the drawings are those of the points as the graph sees them, and an approximate run's
representatives or landmarks are drawn over its clusters.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("panel", reason="the views need Panel (pip install -e '.[app]')")

import holoviews as hv  # noqa: E402

import explorer  # noqa: E402
from explorer.preprocessing import scale_features  # noqa: E402
from explorer.ui import ExplorerApp, plots  # noqa: E402
from explorer.ui.state import ExplorerState, anchors_drawn  # noqa: E402
from explorer.ui.views import NO_GRAPH, mode_markdown  # noqa: E402
from tests._session import act as _act  # noqa: E402

hv.extension("bokeh")

pytestmark = pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")


def _state(dataset="moons", n=400, graph="epsilon", **data) -> ExplorerState:
    """A loaded state; on the ε-graph the sidebar is centred on (the tests of ε
    behaviour), or with ``graph=None`` on the library's choice the app opens on."""
    s = ExplorerState()
    s.data.param.update(dataset=dataset, n_samples=n, **data)
    assert s.load(), s.data.error
    if graph is not None:
        s.graph.graph = graph
    return s


def _estimator(s: ExplorerState) -> dict:
    """The keywords a Run would pass to SpectralClustering now."""
    return s.run_state.spec(s.run_state.snapshot()).estimator


def _spectral_plot(obj):
    """The spectral clusters' plot of the Clusters view (the first of its layout)."""
    return obj.values()[0] if isinstance(obj, hv.Layout) else obj


def _wide_csv(rng) -> bytes:
    """Two blobs whose second feature spreads 1000 times wider than the first."""
    y = np.repeat([0, 1], 60)
    X = np.column_stack([y * 3.0 + rng.normal(scale=0.3, size=120),
                         rng.normal(scale=1000.0, size=120)])
    rows = "\n".join(f"{a:.6f},{b:.3f},{c}" for (a, b), c in zip(X, y, strict=True))
    return ("a,b,label\n" + rows + "\n").encode()


# --------------------------------------------------------------------------- scaling


def test_scale_reaches_the_run_and_the_data_are_shown_and_measured_scaled():
    s = _state("blobs", 500, random_state=2)
    raw = s.data.result
    # scale="auto" (the default): blobs are in one unit, kept as given
    assert raw.scale is None and raw.X is raw.dataset.X and _estimator(s)["scale"] is None
    s.data.scale = "standard"
    assert s.load(), s.data.error
    scaled = s.data.result
    assert scaled.dataset is raw.dataset  # only the scaling changed: the data stay
    expected = scale_features(raw.dataset.X, "standard")  # the estimator's own scaling
    np.testing.assert_array_equal(scaled.X, expected)
    np.testing.assert_array_equal(scaled.xy, expected)  # 2-D: drawn as scaled
    assert scaled.axis_labels() == ("x0 (standard-scaled)", "x1 (standard-scaled)")
    assert "standard-scaled" in scaled.describe() and "standard-scaled" in scaled.projection_note
    # the sliders moved to the library's ε rule for the scaled points
    assert s.graph.threshold_sqdist == pytest.approx(scaled.epsilon_rule.threshold)
    assert _estimator(s)["scale"] == "standard"
    assert s.refresh_stats(), s.graph.error
    library = explorer.graph_stats(expected, s.graph.rule)
    assert (s.graph.stats.nnz, s.graph.stats.n_components) == (library.nnz,
                                                               library.n_components)
    assert s.run(), s.run_state.error
    assert s.result.fit_scale == "standard"


def test_high_dimensional_scaled_data_are_projected_after_scaling():
    s = _state("digits", 300, scale="minmax")
    result = s.data.result
    assert result.xy.shape == (300, 2) and result.axis_labels()[0] == "PC 1 (minmax-scaled)"
    np.testing.assert_allclose(result.xy, result.projection(result.X), rtol=1e-6)
    assert result.X.min() >= 0 and result.X.max() <= 1


def test_the_feature_scale_warning_is_shown_until_a_scale_is_chosen(rng):
    s = ExplorerState()
    app = ExplorerApp(state=s)
    _act(lambda: s.data.set_file("wide.csv", _wide_csv(rng)))
    assert s.dataset.name == "wide.csv"
    # scale="auto" (the default): mixed units, standardised as the library would
    assert s.data.result.scale == "standard" and s.data.result.scale_warning == ""
    _act(lambda: setattr(app.data_controls.scale, "value", "none (as given)"))
    text = s.data.result.scale_warning
    assert "differ in range" in text and "scale='auto'" in text  # the library's words
    alert = app.data_controls.scale_warning
    assert alert.visible and alert.object == text
    _act(lambda: setattr(app.data_controls.scale, "value", "standard"))
    assert s.data.scale == "standard" and s.data.result.scale_warning == ""
    assert not app.data_controls.scale_warning.visible
    # the clusters view draws the scaled points, its axes say so
    plot = hv.render(app.clusters.plot.object, backend="bokeh")
    assert "standard-scaled" in plot.xaxis[0].axis_label


# --------------------------------------------------------------------------- kNN graphs


def test_knn_statistics_are_the_library_statistics_of_the_knn_graph():
    s = _state("moons", 400, random_state=1)
    s.graph.graph = "knn"
    s.graph.n_neighbors = 6
    job = s.graph.prepare()
    assert len(job.steps) == 1  # a kNN graph's rows are counted by building it
    assert s.refresh_stats(), s.graph.error
    rule = explorer.EdgeRule("gaussian", s.graph.sigma, None, None, graph="knn", n_neighbors=6)
    library = explorer.graph_stats(s.data.result.X, rule)
    st = s.graph.stats
    assert (st.nnz, st.n_isolated, st.n_components, st.bytes_csr) == (
        library.nnz, library.n_isolated, library.n_components, library.bytes_csr)
    assert st.nnz_row_min >= 6 and not st.estimated
    before = st.nnz
    s.graph.graph = "mutual_knn"
    assert s.refresh_stats() and s.graph.stats.nnz < before  # the intersection
    kw = _estimator(s)
    assert kw["affinity"] == "mutual_knn" and kw["n_neighbors"] == 6
    assert kw["threshold_sqdist"] is None and kw["threshold_sim"] is None
    assert "graph" not in kw  # the estimator's name for it is affinity


def test_self_tuning_sigma_is_a_weight_option():
    s = _state("moons", 300)
    s.graph.threshold_kind = "sim"
    s.graph.local_sigma = True
    assert s.graph.threshold_kind == "sqdist"  # a similarity threshold needs one σ
    assert s.graph.rule.sigma == "local"
    s.graph.local_neighbor = 5
    kw = _estimator(s)
    assert (kw["sigma"], kw["local_neighbor"], kw["affinity"]) == ("local", 5, "epsilon")
    assert s.refresh_stats(), s.graph.error


def test_knn_controls_replace_the_epsilon_controls_and_update_the_card():
    s = ExplorerState()
    s.data.n_samples = 500
    app = ExplorerApp(state=s)
    g = app.graph_controls
    _act(lambda: setattr(g.graph, "value", "epsilon"))
    assert g.sqdist.widget.visible and not g.n_neighbors.visible
    _act(lambda: setattr(g.graph, "value", "knn"))
    assert s.graph.graph == "knn"
    assert not g.sqdist.widget.visible and not g.sim.visible and not g.kind.visible
    assert g.n_neighbors.visible and "knn, k = 10" in g.epsilon.object
    first = s.graph.stats.nnz
    assert "knn, k = 10" in app.stats.table.object
    _act(lambda: setattr(g.n_neighbors, "value", 20))
    assert s.graph.stats.nnz > first and "knn, k = 20" in app.stats.table.object
    _act(lambda: g.local_sigma.widget.param.update(value=[g.local_sigma.label]))
    assert s.graph.local_sigma and g.local_neighbor.visible and not g.sigma.widget.visible


def test_the_run_builds_the_graph_the_sidebar_shows():
    # The sidebar opens on the library's choice; a run passes the sidebar's graph as
    # given, so the run's graph and the live statistics are of one rule.
    s = _state("moons", 400, graph=None, random_state=1)
    kw = _estimator(s)
    assert kw["affinity"] == s.graph.graph
    assert s.run(), s.run_state.error
    r = s.result
    assert r.params["edge_rule"] == s.graph.rule.describe()
    assert s.refresh_stats() and r.graph_stats.nnz == s.graph.stats.nnz
    assert r.affinity_why == "given" and r.affinity_why in mode_markdown(r)


# --------------------------------------------------------------------------- modes


def test_mode_and_its_sizes_reach_the_estimator():
    s = _state("moons", 300)
    assert _estimator(s)["mode"] == "auto"
    assert _estimator(s)["n_representatives"] == "auto"  # None in the app
    s.run_state.param.update(mode="representatives", n_representatives=50)
    kw = _estimator(s)
    assert (kw["mode"], kw["n_representatives"]) == ("representatives", 50)
    # the sidebar's graph reaches the run as it is, in every mode (the statistics
    # describe the graph of the points the run joins)
    assert kw["threshold_sqdist"] == s.graph.threshold_sqdist
    assert kw["sigma"] == s.graph.sigma
    s.run_state.param.update(mode="landmarks", n_landmarks=40)
    kw = _estimator(s)
    assert (kw["mode"], kw["n_landmarks"], kw["affinity"]) == ("landmarks", 40, "epsilon")
    explorer.SpectralClustering(**kw)


def test_representatives_run_is_drawn_with_its_representatives():
    s = ExplorerState()
    s.data.n_samples = 600
    app = ExplorerApp(state=s)
    _act(lambda: setattr(app.run_controls.mode, "value", "representatives"))
    assert app.run_controls.n_representatives.widget.visible
    assert not app.run_controls.n_landmarks.widget.visible
    s.run_state.n_representatives = 60
    assert s.run(), s.run_state.error
    r, shown = s.result, s.views.result
    est = explorer.SpectralClustering(**_estimator(s)).fit(s.dataset.X)
    np.testing.assert_array_equal(r.anchors, est.representatives_)
    assert r.mode == "representatives" and r.mode_why == est.mode_why_
    assert r.anchor_counts.sum() == 600 and r.csr.shape == (60, 60)
    # each point shows its representative's eigenvector entries
    assert r.vectors.shape[0] == 600 and r.embedding.shape[0] == 600
    np.testing.assert_array_equal(shown.anchor_xy, r.anchors)  # 2-D, unscaled
    # the representatives' clusters, renamed as the points' were
    of = np.asarray(est.representative_of_)
    np.testing.assert_array_equal(shown.anchor_labels[of], shown.labels)
    # the overlay: the cluster view holds the points and the representatives
    spectral = _spectral_plot(app.clusters.plot.object)
    assert isinstance(spectral, hv.Overlay)
    anchors = spectral.values()[1]
    assert len(anchors) == 60 and anchors.label == "representatives"
    hv.render(app.clusters.plot.object, backend="bokeh")
    assert "mode='representatives' given" in app.clusters.mode.object
    assert app.clusters.anchors.widget.visible
    # hidden at will
    app.clusters.show_anchors = False
    assert not isinstance(_spectral_plot(app.clusters.plot.object), hv.Overlay)
    # the graph views draw the representatives' graph
    assert app.sparsity.text.object.startswith("n = 60,")
    # points selected in the linked views mark their representatives' rows there
    np.testing.assert_array_equal(r.anchor_of, of)
    app.linked.selection.selection_expr = hv.dim("x") < np.median(s.data.result.xy[:, 0])
    chosen = app.linked.selected()
    assert chosen.sum() == 300
    np.testing.assert_array_equal(app.sparsity.marked_rows, np.unique(of[chosen]))
    assert "rows of their representatives marked" in app.sparsity.marked_note.object


def test_landmark_run_draws_its_landmarks_and_has_no_graph_views():
    s = ExplorerState()
    s.data.param.update(n_samples=500, scale="standard")
    app = ExplorerApp(state=s)
    s.run_state.param.update(mode="landmarks", n_landmarks=30)
    assert s.run(), s.run_state.error
    r, shown = s.result, s.views.result
    assert r.mode == "landmarks" and r.csr is None and r.graph_stats is None
    assert r.anchors.shape == (30, 2) and "normalized_cut" not in r.scores["spectral"]
    # the landmark mode fits the scaled data, as the points are drawn: its landmarks
    # lie among the drawn points
    assert r.fit_scale == "standard"
    np.testing.assert_allclose(shown.anchor_xy, s.data.result.projection(r.anchors),
                               rtol=1e-6)
    np.testing.assert_array_equal(shown.anchor_xy, anchors_drawn(r))
    lo, hi = s.data.result.xy.min(axis=0), s.data.result.xy.max(axis=0)
    assert ((shown.anchor_xy >= lo - 1e-6) & (shown.anchor_xy <= hi + 1e-6)).all()
    assert "Fitted on the standard-scaled features" in app.clusters.mode.object
    assert _spectral_plot(app.clusters.plot.object).values()[1].label == "landmarks"
    assert app.sparsity.text.object == NO_GRAPH
    app.linked.selection.selection_expr = hv.dim("x") < np.median(s.data.result.xy[:, 0])
    assert app.linked.picked is not None and app.sparsity.marked_rows is None  # no rows
    assert app.export.graph.disabled and not app.export.json.disabled
    from explorer.ui import _export

    assert _export.result_dict(r)["mode"] == "landmarks"


def test_high_dimensional_representatives_are_projected_like_the_points():
    s = _state("digits", 400, graph=None, random_state=0)
    _ = s.graph.rule  # the library's rule stands
    s.run_state.param.update(mode="representatives", n_representatives=40, auto_k=False,
                             n_clusters=10)
    assert s.run(), s.run_state.error
    shown = s.views.result
    r = shown.run
    np.testing.assert_allclose(shown.anchor_xy, s.data.result.projection(r.anchors), rtol=1e-6)
    # a representative is drawn amid the points it stands for
    of = explorer.SpectralClustering(**_estimator(s)).fit(s.dataset.X).representative_of_
    for j in np.flatnonzero(r.anchor_counts >= 5)[:5]:
        centre = s.data.result.xy[np.asarray(of) == j].mean(axis=0)
        spread = s.data.result.xy.std(axis=0).max()
        assert np.linalg.norm(centre - shown.anchor_xy[j]) < 0.5 * spread


def test_anchor_points_are_markers_or_datashaded_when_many():
    xy = np.random.default_rng(0).normal(size=(50, 2))
    few = plots.anchor_points(xy, labels=np.arange(50) % 3)
    assert isinstance(few, hv.Points) and len(few) == 50
    hv.render(few, backend="bokeh")
    many = plots.anchor_points(np.random.default_rng(1).normal(
        size=(plots.DATASHADE_ABOVE + 1, 2)), kind="landmarks")
    assert not isinstance(many, hv.Points)  # an image, re-aggregated on zoom
    # over datashaded data (more points than DATASHADE_ABOVE) the overlay still renders
    big = np.random.default_rng(2).normal(size=(plots.DATASHADE_ABOVE + 5, 2))
    overlay = plots.labelled_points(big, np.zeros(len(big), dtype=np.int64)) * few
    hv.render(overlay, backend="bokeh")
    with pytest.raises(ValueError, match="kind must be one of"):
        plots.anchor_points(xy, kind="centres")
    with pytest.raises(ValueError, match="one entry per anchor"):
        plots.anchor_points(xy, labels=np.arange(3))


@pytest.mark.gpu
@pytest.mark.parametrize("mode", ["representatives", "landmarks"])
def test_gpu_approximate_runs_carry_host_arrays_and_are_drawn(mode):
    """On the GPU the representatives / landmarks and every array a view draws come
    back to the host, and k-means on the raw data runs on the device too."""
    s = _state("moons", 3000, scale="standard")
    s.graph.param.update(backend="gpu", graph="knn", local_sigma=True)
    s.run_state.param.update(mode=mode, n_representatives=200, n_landmarks=100)
    assert s.run(), s.run_state.error
    r, shown = s.result, s.views.result
    assert r.backend == "gpu" and r.mode == mode
    for array in (r.labels, r.vectors, r.embedding, r.anchors, shown.anchor_xy):
        assert isinstance(array, np.ndarray)
    assert shown.anchor_xy.shape == (200 if mode == "representatives" else 100, 2)
    assert "ari" in r.scores["spectral"] and r.scores["spectral"]["ari"] > 0.9
    hv.render(_spectral_plot(ExplorerApp(state=s).clusters.plot.object), backend="bokeh")
