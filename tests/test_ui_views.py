"""The Panel views and HoloViews renderers, without a browser.

Widgets are driven the way a browser drives them (setting widget values, clicking),
Bokeh models are built from the views, and plots are rendered to Bokeh figures.
Without a running server Panel executes the app's asynchronous jobs to completion on
the spot, so every wire from widget to state to view is exercised here.
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import io

import numpy as np
import pytest
import scipy.sparse as sp

# The app's packages are optional (a GPU server often has none): skip, saying why.
pytest.importorskip("panel", reason="the views need Panel (pip install -e '.[app]')")

import holoviews as hv  # noqa: E402
import panel as pn  # noqa: E402
import param  # noqa: E402
from bokeh.models import Axis  # noqa: E402
from holoviews.core.spaces import DynamicMap  # noqa: E402

import explorer  # noqa: E402
from explorer.ui import ExplorerApp, plots  # noqa: E402
from explorer.ui._teaching import STEPS  # noqa: E402
from explorer.ui.state import ExplorerState  # noqa: E402
from tests._session import act as _act  # noqa: E402
from tests._session import act_async as _act_async  # noqa: E402

hv.extension("bokeh")

# The app keeps the widget API of Panel 1.4+ (``name``, ``button_type``), which Panel
# 1.9 marks as pending deprecation.
pytestmark = pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")


@pytest.fixture
def app():
    state = ExplorerState()
    state.data.param.update(dataset="moons")
    state.data.n_samples = 400
    app = ExplorerApp(state=state)
    # The ε-graph the sidebar is centred on (the app opens on the library's choice, a
    # kNN graph for the moons), picked as a user who tunes ε does.
    _act(lambda: setattr(app.graph_controls.graph, "value", "epsilon"))
    return app


def _connect(state, factor=6.0):
    state.graph.threshold_sqdist *= factor
    state.graph.sigma = float(np.sqrt(state.graph.threshold_sqdist / 8))


def _render(obj):
    return hv.render(obj, backend="bokeh")


# --------------------------------------------------------------------------- app


def test_app_builds_page_and_bokeh_models(app):
    assert app.state.dataset.n == 400 and app.state.graph.stats is not None
    page = app.template()
    assert isinstance(page, pn.template.BootstrapTemplate)
    root = pn.panel(app).get_root()
    assert root is not None
    assert "nnz" in app.stats.table.object and "connected components" in app.stats.table.object
    assert app.clusters.plot.object is not None  # the data, before any run


def test_timings_say_why_no_solver_iterated(app):
    _connect(app.state)
    _act(lambda: app.run_controls.button.param.trigger("clicks"))  # the defaults first
    csr = sp.load_npz(app.export._graph())
    isolated = int((np.asarray(csr.sum(axis=1)).ravel() == 0).sum())
    k = sp.csgraph.connected_components(csr)[0] - isolated
    r = app.state.run_state
    _act(lambda: r.param.update(n_clusters=k, eigen_solver="components"))
    _act(lambda: app.run_controls.button.param.trigger("clicks"))
    assert app.state.result is not None and app.state.result.solver == "components"
    assert "exactly k connected components" in app.timings.table.object
    assert "iterations —" in app.timings.table.object


def test_run_button_runs_and_fills_every_view(app):
    _connect(app.state)
    _act(lambda: app.run_controls.button.param.trigger("clicks"))  # a click in the browser
    r = app.state.result
    assert r is not None and not app.state.run_state.running
    scores = app.clusters.scores.object
    assert "ARI" in scores and "k-means (raw data)" in scores
    assert isinstance(app.clusters.plot.object, hv.Layout) and len(app.clusters.plot.object) == 2
    assert app.eigenvectors.values.object is not None and app.eigenvectors.embedding.object
    assert app.eigenvectors.index.end == r.vectors.shape[1]
    assert f"k = {r.k_suggested}" in app.spectrum.text.object
    assert app.sparsity.spy.object is not None and app.timings.bars.object is not None
    assert "Eigensolver" in app.timings.table.object
    assert not app.export.labels.disabled
    assert app.export._labels().read().startswith(b"index,spectral,kmeans,truth")
    assert sp.load_npz(app.export._graph()).shape == (400, 400)
    assert app.run_controls.button.name == "Run" and not app.run_controls.button.disabled
    pn.panel(app).get_root()  # every view renders its result


def test_sliders_drive_statistics(app):
    s = app.state
    before = s.graph.stats.nnz
    slider = app.graph_controls.sqdist.widget
    _act(lambda: setattr(slider, "value", slider.value + 0.5))  # log10: threshold × 10^0.5
    assert s.graph.threshold_sqdist == pytest.approx(10 ** slider.value)
    assert s.graph.stats.nnz > before
    expected = explorer.graph_stats(s.dataset.X, **s.graph.edge_kwargs())
    assert s.graph.stats.nnz == expected.nnz
    assert f"ε = {np.sqrt(s.graph.threshold_sqdist):.4g}" in app.graph_controls.epsilon.object


def test_log_slider_follows_the_state(app):
    g = app.state.graph
    g.sigma = 0.0123
    assert app.graph_controls.sigma.widget.value == pytest.approx(np.log10(0.0123))
    g.sigma = 1e-9  # outside the span: the span widens instead of clipping
    w = app.graph_controls.sigma.widget
    assert w.start <= np.log10(1e-9) and w.value == pytest.approx(-9)


def test_optional_slider_zero_means_default(app):
    g, hypo = app.state.graph, app.graph_controls.hypo.widget
    _act(lambda: setattr(hypo, "value", 7))
    assert g.hypo_max_nnz_row == 7 and app.state.graph.stats.hypo_max_nnz_row == 7
    assert "hypoMaxNnzRow = 7" in app.stats.table.object
    hist = app.stats.histogram  # the card's histogram: the statistics' bars and the line
    counts, edges = app.state.graph.stats.nnz_row_hist
    np.testing.assert_array_equal(hist.source.data["top"], counts)
    np.testing.assert_array_equal(hist.source.data["left"], edges[:-1])
    assert hist.line.location == 7 and hist.line.visible
    _act(lambda: setattr(hypo, "value", 0))
    assert g.hypo_max_nnz_row is None
    g.hypo_max_nnz_row = 12
    assert hypo.value == 12


def test_metric_controls(app):
    gc = app.graph_controls
    _act(lambda: setattr(gc.metric, "value", "cosine"))
    assert app.state.graph.threshold_kind == "sim"
    assert gc.kind.disabled and gc.sim.visible and not gc.sqdist.widget.visible
    assert gc.sim.start == -1.0 and not gc.sigma.widget.visible
    _act(lambda: setattr(gc.sim, "value", 0.9))
    assert app.state.graph.threshold_sim == pytest.approx(0.9)
    assert app.state.graph.stats is not None


def test_the_sidebar_says_the_librarys_choice_and_takes_it_back(app):
    # New data open on the library's choice of graph, with its reason under the graph
    # kind; after a change by hand, the button takes the library's choice back.
    s, gc = app.state, app.graph_controls
    plan_kind = dict(s.data.result.plan_lines)["graph kind"]
    assert gc.graph_note.visible and plan_kind in gc.graph_note.object
    chosen = s.data.result.rule  # the library's (the fixture picked the ε-graph since)
    assert chosen.graph == "knn" and s.graph.rule != chosen
    _act(lambda: setattr(gc.library_choice, "clicks", gc.library_choice.clicks + 1))
    assert s.graph.rule == chosen and gc.graph.value == chosen.graph


def test_gpu_choice_is_disabled_with_a_reason_when_there_is_none(app):
    ok, why = app.state.graph.gpu_available
    if ok:
        assert app.graph_controls.backend.disabled_options == []
    else:
        assert app.graph_controls.backend.disabled_options == ["gpu"]
        assert why in app.graph_controls.backend_note.object


def test_dataset_widgets_load_data(app):
    dc = app.data_controls
    _act(lambda: setattr(dc.dataset, "value", "blobs"))
    # Each set opens at its own n (the 400 chosen for moons stays with moons).
    assert app.state.dataset.name == "blobs"
    assert app.state.dataset.n == app.state.data.default_n("blobs")
    expected = explorer.graph_stats(app.state.dataset.X, **app.state.graph.edge_kwargs())
    assert app.state.graph.stats.to_dict() == expected.to_dict()  # stats of the new data
    assert "blobs" in dc.summary.object and "3** classes" in dc.summary.object
    def release():  # what a released slider sends
        with param.edit_constant(dc.n_samples):
            dc.n_samples.value_throttled = 1000

    _act(release)
    assert app.state.dataset.n == 1000
    _act(lambda: setattr(dc.dataset, "value", "digits"))
    assert app.state.dataset.d == 64 and "PCA" in dc.summary.object
    assert app.state.graph.graph == "knn"  # the library's choice for 64 features


def test_upload_widget_reads_the_file_and_bad_files_alert(app, rng):
    dc = app.data_controls
    X = rng.normal(size=(90, 2)).round(4)
    text = "a,b,label\n" + "\n".join(f"{x},{y},{int(x > 0)}" for x, y in X)
    # FileDropper's value maps file names to contents (CSV arrives as text)
    _act(lambda: dc.upload.param.update(value={"up.csv": text}))
    ds = app.state.dataset
    assert ds.name == "up.csv" and ds.n == 90 and ds.y is not None
    assert dc.label.visible and dc.label.value == "label" and not dc.dataset.visible
    _act(lambda: setattr(dc.label, "value", None))
    assert app.state.dataset.d == 3 and app.state.dataset.y is None
    _act(lambda: dc.upload.param.update(value={"bad.csv": b"1,2\n3\n"}))
    assert dc.alert.visible and "bad.csv" in dc.alert.object
    assert app.state.dataset.n == 90  # the previous data stays


def test_run_error_is_shown_in_an_alert_and_cleared_by_a_good_run(app):
    app.state.graph.threshold_sqdist = 1e-12
    _act(lambda: app.run_controls.button.param.trigger("clicks"))
    alert = app.run_controls.alert
    assert alert.visible and "isolated" in alert.object and alert.alert_type == "danger"
    app.state.graph.threshold_sqdist = 0.01
    _connect(app.state, 1.0)  # sigma to match
    _act(lambda: app.run_controls.button.param.trigger("clicks"))
    assert not alert.visible and app.state.result is not None


def test_teaching_view_walks_the_steps(app):
    tv = app.teaching
    assert tv.previous.disabled and not tv.next.disabled
    _act(lambda: tv.next.param.trigger("clicks"))
    assert app.state.teaching.current.key == "graph"
    assert isinstance(tv.plot.object, hv.Overlay) and "edges" in tv.extra.object
    _act(lambda: tv.next.param.trigger("clicks"))
    assert tv.plot.object is None and "Run" in tv.extra.object  # needs a run
    assert "font-size:1.3rem" in tv.heading.object  # a fixed size, whatever CSS loads
    _connect(app.state)
    _act(lambda: app.run_controls.button.param.trigger("clicks"))  # the tour's orders too
    for key in ("blocks", "laplacian", "eigenvectors", "kmeans"):
        assert app.state.teaching.current.key == key and tv.plot.object is not None
        _render(tv.plot.object)
        _act(lambda: tv.next.param.trigger("clicks"))
    assert tv.next.disabled


def test_changing_n_or_the_data_set_after_a_run_never_mixes_generations(app):
    """Issue 14: Run, then change n (either way) or the data set: every view draws one
    stage's arrays, the clusters view the new data, the others the old run greyed."""
    s = app.state
    _connect(s)
    _act(lambda: app.run_controls.button.param.trigger("clicks"))
    first = s.result
    assert first is not None and not s.run_state.stale
    assert not app.spectrum.badge.pane.visible
    assert "stale-result" not in app.spectrum.body.css_classes
    dc = app.data_controls
    for n in (200, 1000):
        def release(n=n):  # what a released slider sends
            with param.edit_constant(dc.n_samples):
                dc.n_samples.value_throttled = n

        _act(release)
        assert s.dataset.n == n and s.run_state.stale and s.result is first
        assert "Press **Run** to cluster these data" in app.clusters.scores.object
        assert "The last run was on moons, n = 400" in app.clusters.scores.object
        assert app.spectrum.badge.pane.visible and "data moons, n = 400" in \
            app.spectrum.badge.pane.object
        assert "stale-result" in app.eigenvectors.body.css_classes  # greyed
        pn.panel(app).get_root()  # everything renders
        _render(app.clusters.plot.object)
        _render(app.eigenvectors.values.object)
    _act(lambda: setattr(dc.dataset, "value", "digits"))
    assert s.dataset.name == "digits" and s.graph.stats.n == s.dataset.n
    _act(lambda: app.run_controls.button.param.trigger("clicks"))
    assert s.run_state.error == "" and s.result.data is s.data.result
    assert not s.run_state.stale and not app.spectrum.badge.pane.visible
    assert "digits" in app.status.text.object
    _render(app.clusters.plot.object)


def test_a_parameter_change_after_a_run_shows_the_stale_state(app):
    s = app.state
    _connect(s)
    _act(lambda: app.run_controls.button.param.trigger("clicks"))
    old = s.graph.threshold_sqdist
    slider = app.graph_controls.sqdist.widget
    _act(lambda: setattr(slider, "value", slider.value + 0.3))
    badge = app.clusters.badge.pane
    assert badge.visible and f"threshold_sqdist = {old:.4g}" in badge.object
    assert "stale-result" in app.clusters.body.css_classes  # greyed
    assert "parameters changed since the last run" in app.status.text.object
    _act(lambda: app.run_controls.button.param.trigger("clicks"))
    assert not badge.visible and "stale-result" not in app.clusters.body.css_classes


def test_placeholders_say_what_each_tab_waits_for(app):
    for view in (app.eigenvectors.caption, app.spectrum.text, app.sparsity.text,
                 app.timings.table):
        assert view.object.startswith("Waiting for a run")
    assert app.export.text.object.startswith("Waiting for a run")
    assert "press <b>Run</b>" in app.status.text.object


def test_cluster_colours_agree_across_views(app):
    s = app.state
    s.data.param.update(dataset="blobs")
    _connect(s, 3.0)
    s.run_state.n_clusters = 3
    _act(lambda: app.run_controls.button.param.trigger("clicks"))
    shown = s.views.result
    assert np.mean(shown.labels == s.dataset.y) > 0.95  # spectral ids = truth ids
    # the plot draws the renamed labels: the legend lists the truth's class ids
    spectral = app.clusters.plot.object[0]
    assert set(spectral.data["cluster"].astype(str)) <= {"0", "1", "2", "isolated"}


def test_idle_waits_for_the_work_it_triggered_even_before_it_starts(app):
    s = app.state
    seen = {}

    async def scenario():
        s.data.param.update(dataset="circles", n_samples=300)  # the load is only asked for
        assert s.data.busy  # marked at once: idle() cannot miss it
        await app.idle()
        seen.update(name=s.dataset.name, n=s.dataset.n, stats_n=s.graph.stats.n,
                    stale=s.graph.stale, complete=s.graph.stats_complete)

    _act_async(scenario)
    assert seen == {"name": "circles", "n": 300, "stats_n": 300, "stale": False,
                    "complete": True}


def test_exports_are_disabled_before_a_run(app):
    assert app.export.labels.disabled and app.export.graph.disabled and app.export.json.disabled


def test_notebook_display_of_single_views(app):
    from explorer.ui.views import SpectrumView, StatsCard

    col = pn.Column(StatsCard(state=app.state), SpectrumView(state=app.state))
    assert col.get_root() is not None


# --------------------------------------------------------------------------- plots


def test_labelled_points_colours_and_datashading(rng):
    xy = rng.normal(size=(300, 2))
    labels = rng.integers(-1, 4, 300)
    el = plots.labelled_points(xy, labels, title="t")
    assert isinstance(el, hv.Points)
    colors = plots.cluster_colors(labels)
    assert colors["isolated"] == plots.ISOLATED_COLOR
    assert len(set(colors.values())) == len(colors)
    assert plots.cluster_colors(np.array([2]))["2"] == colors["2"]  # stable per label
    _render(el)
    big = plots.DATASHADE_ABOVE + 1
    shaded = plots.labelled_points(rng.normal(size=(big, 2)), rng.integers(0, 3, big))
    assert isinstance(shaded, DynamicMap)
    _render(shaded)


def test_valued_points_are_centred_on_zero(rng):
    values = rng.normal(size=200) + 3.0
    el = plots.valued_points(rng.normal(size=(200, 2)), values)
    lo, hi = el.opts.get().kwargs["clim"]
    assert lo == -hi == pytest.approx(-np.abs(values).max())
    _render(el)


def test_spy_histogram_spectrum_timings_edges_render(rng):
    A = sp.random(200, 200, density=0.05, random_state=1, format="coo")
    A = (A + A.T).tocoo()
    _render(plots.spy(A.row, A.col, 200))
    counts, edges = np.histogram(rng.integers(0, 40, 200), bins=10)
    hist = plots.nnz_histogram(counts, edges, hypo=64)
    assert hist.opts.get().kwargs["xlim"][1] >= 64  # the line stays in view
    _render(hist)
    _render(plots.spectrum(np.sort(rng.random(8)), k_used=2, k_suggested=3))
    _render(plots.timings_bars({"graph": 0.1, "embedding": 0.2}))
    overlay, drawn = plots.graph_edges(rng.normal(size=(200, 2)), A.row, A.col, max_edges=50)
    assert drawn == 50 < int((A.row < A.col).sum())
    _render(overlay)


def test_entries_of_a_csr_exact_and_sampled(rng):
    from explorer.ui.views import _entries

    A = sp.random(300, 300, density=0.05, random_state=int(rng.integers(2**31)), format="csr")
    rows, cols = _entries(A, A.nnz)
    coo = A.tocoo()
    np.testing.assert_array_equal(rows, coo.row)
    np.testing.assert_array_equal(cols, coo.col)
    rows, cols = _entries(A, 100)
    assert len(rows) == 100 and len(set(zip(rows, cols, strict=True))) == 100
    assert np.all(np.asarray(A[rows, cols]).ravel() != 0)  # every sampled pair is stored


def test_export_download_callbacks_return_files(app):
    _connect(app.state)
    app.state.run()
    data = app.export._json().read()
    assert data.startswith(b"{") and b'"graph_stats"' in data
    labels = np.loadtxt(io.BytesIO(app.export._labels().read()), delimiter=",", skiprows=1)
    assert labels.shape[0] == 400


# --------------------------------------------------------------------------- notebook


def test_notebook_is_clean_and_its_cells_run():
    """examples/explorer.ipynb: nbformat 4 with outputs cleared, and every code cell runs
    (one after the other, each cell's jobs finished as a kernel's event loop would)."""
    import json
    from pathlib import Path

    nb = json.loads((Path(__file__).parents[1] / "examples" / "explorer.ipynb").read_text())
    assert nb["nbformat"] == 4 and nb["cells"]
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert all(c["outputs"] == [] and c["execution_count"] is None for c in code)
    assert all(isinstance(c["id"], str) and c["id"] for c in nb["cells"])
    namespace: dict = {}

    async def run_cell(source):  # as IPython does, with top-level await
        flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
        result = eval(compile(source, "<cell>", "exec", flags=flags), namespace)
        if inspect.iscoroutine(result):
            await result

    for cell in code:
        _act_async(lambda cell=cell: run_cell("".join(cell["source"])))
    state = namespace["state"]
    assert state.dataset.name == "circles" and state.dataset.n == 3000
    assert state.result is not None and state.result.scores["spectral"]["ari"] > 0.99
    assert namespace["app"].clusters.plot.object is not None


def test_hypo_slider_is_stepped_where_widths_are_useful(app):
    """hypoMaxNnzRow's useful widths are mostly under 100: the slider's stops are dense
    there (every width to 16) and sparse up to 1,024; a width set from code that is no
    stop becomes one, not rounded."""
    g, hypo = app.state.graph, app.graph_controls.hypo.widget
    assert isinstance(hypo, pn.widgets.DiscreteSlider)
    stops = list(hypo.options)
    assert stops[0] == 0 and stops[-1] == 1024 and set(range(17)) <= set(stops)
    assert sum(v < 100 for v in stops) > len(stops) / 2
    g.hypo_max_nnz_row = 300
    assert hypo.value == 300 and 300 in hypo.options
    _act(lambda: setattr(hypo, "value", 64))
    assert g.hypo_max_nnz_row == 64


def test_a_change_during_a_run_says_it_waits_for_the_next_run(app):
    """A setting changed while a run is in flight does not reach that run: the sidebar
    says so during the run, still after it, and no more once the next Run starts."""
    r, controls = app.state.run_state, app.run_controls
    k = r.n_clusters

    async def change_while_running():
        run = asyncio.ensure_future(r.request())
        while not r.busy:
            await asyncio.sleep(0.005)
        assert not controls.pending.visible
        r.n_clusters = k + 1
        assert controls.pending.visible and "next **Run**" in controls.pending.object
        await run

    _act_async(change_while_running)
    assert app.state.result.n_clusters == k and r.stale  # the run used the old k
    assert controls.pending.visible and "press **Run**" in controls.pending.object
    _act(lambda: controls.button.param.trigger("clicks"))
    assert not controls.pending.visible and app.state.result.n_clusters == k + 1


def test_views_label_axes_with_the_files_column_names(app, tmp_path):
    """Uploaded data are drawn under their columns' names in every view of the data's
    space (clusters, eigenvector, the tour's steps), not x0/x1 or x/y."""
    rng = np.random.default_rng(3)
    X = np.vstack([rng.normal(0, 0.2, (60, 2)), rng.normal(3, 0.2, (60, 2))])
    text = "height,weight\n" + "".join(f"{a:.4f},{b:.4f}\n" for a, b in X)
    d = app.state.data
    _act(lambda: (d.set_file("people.csv", text.encode()), setattr(d, "source", "file")))
    assert app.state.dataset.name == "people.csv"
    assert d.result.axis_labels() == ("height", "weight")
    _connect(app.state)
    _act(lambda: app.run_controls.button.param.trigger("clicks"))
    def axis_labels(obj) -> set:
        fig = _render(obj)
        return {ax.axis_label for ax in fig.select({"type": Axis})}

    assert {"height", "weight"} <= axis_labels(app.clusters.plot.object)
    assert axis_labels(app.eigenvectors.values.object) == {"height", "weight"}
    t = app.state.teaching
    for i, step in enumerate(STEPS):
        if step.key in ("data", "graph", "eigenvectors", "kmeans"):
            _act(lambda i=i: setattr(t, "step", i))
            assert {"height", "weight"} <= axis_labels(app.teaching.plot.object), step.key


def _png_size(content: bytes) -> tuple[int, int]:
    """Width and height of a PNG from its header (the IHDR chunk comes first)."""
    assert content[:8] == b"\x89PNG\r\n\x1a\n", content[:8]
    assert content[12:16] == b"IHDR"
    return int.from_bytes(content[16:20], "big"), int.from_bytes(content[20:24], "big")


@pytest.mark.browser
@pytest.mark.slow
def test_a_view_exports_as_png_and_svg_at_the_size_asked(app):
    """The Export tab draws a view as a figure for slides: a PNG of twice the pixels
    asked (a projector's full screen) and an SVG of the size asked that parses, with
    the view's axis labels in it; the guided tour's steps come as a numbered set."""
    import xml.etree.ElementTree as ET
    import zipfile

    from explorer.ui import _export

    if not __import__("os").path.exists(_export.CHROMIUM):
        pytest.skip(f"no Chromium at {_export.CHROMIUM}")
    _connect(app.state)
    _act(lambda: app.run_controls.button.param.trigger("clicks"))
    export = app.export
    export.view.value = "Spectrum"
    export.fig_width.value, export.fig_height.value = 640, 360
    files = {}

    async def draw():
        files["png"] = (await export._png()).getvalue()
        files["svg"] = (await export._svg()).getvalue()

    _act_async(draw)
    assert not export.figure_error.visible, export.figure_error.object
    assert _png_size(files["png"]) == (1280, 720)
    svg = ET.fromstring(files["svg"])
    assert svg.tag == "{http://www.w3.org/2000/svg}svg"
    assert (svg.get("width"), svg.get("height")) == ("640", "360")
    assert "eigenvalue λᵢ" in files["svg"].decode()
    assert export.png.filename.endswith("-spectrum.png")

    steps = {}

    async def tour():
        steps["figures"] = await app.tour_figures()

    _act_async(tour)
    figures = steps["figures"]
    assert [t for t, _ in figures][0] == "The data" and len(figures) == len(STEPS)
    content = _export.figure_zip(figures[:2], width=400, height=300, formats=("png",))
    with zipfile.ZipFile(io.BytesIO(content)) as archive:
        names = archive.namelist()
        assert names[0] == "01-the-data.png", names
        assert all(_png_size(archive.read(n)) == (800, 600) for n in names)


def test_figure_export_refuses_sizes_and_formats_it_cannot_draw():
    from explorer.ui import _export

    element = plots.spectrum(np.array([0.0, 0.5]))
    with pytest.raises(ValueError, match=r"width must be a whole number of pixels in \[200"):
        _export.figure_files(element, width=50)
    with pytest.raises(ValueError, match="formats must be among"):
        _export.figure_files(element, formats=("pdf",))
    with pytest.raises(ValueError, match="nothing to export"):
        _export.figure_zip([("empty", None)])
