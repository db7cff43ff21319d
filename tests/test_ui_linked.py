"""Linked views and two runs side by side in the app, without a browser
(tests/test_browser_linked.py drives the same in Chromium)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("panel", reason="the views need Panel (pip install -e '.[app]')")

import holoviews as hv  # noqa: E402
import panel as pn  # noqa: E402

from explorer.metrics import RunComparison, adjusted_rand_score  # noqa: E402
from explorer.ui import ExplorerApp, plots  # noqa: E402
from explorer.ui.state import ExplorerState  # noqa: E402
from tests._session import act  # noqa: E402

hv.extension("bokeh")
pytestmark = pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")


def _layers(layout):
    """Each linked view's drawing now: (all points, the selected points)."""
    return [(view[()].get(0), view[()].get(1)) for view in layout]


@pytest.mark.parametrize("n", [300, plots.DATASHADE_ABOVE + 1000])
def test_a_selection_in_one_view_filters_the_others(n):
    rng = np.random.default_rng(0)
    xy = rng.normal(size=(n, 2))
    emb = xy[:, ::-1].copy()  # the embedding: the data's axes swapped
    emb[0] = np.nan  # an isolated point: no embedding row
    labels = (xy[:, 0] > 0).astype(int)
    layout, selection = plots.linked_views(xy, emb, xy[:, 1], labels, 1 - labels)
    assert isinstance(selection, hv.selection.link_selections) and len(layout) == 4
    selection.selection_expr = hv.dim("emb_x") > 1  # a box in the embedding: data y > 1
    chosen = xy[:, 1] > 1
    if n <= plots.DATASHADE_ABOVE:
        for every, picked in _layers(layout):
            assert len(every) == n and len(picked) == chosen.sum() > 0
            assert np.all(picked.dimension_values("y") > 1)
    else:  # datashaded: the selection's image holds the selected points only
        data_view = layout[0][()]
        image = data_view.get(1)
        alpha = image.dimension_values("A", flat=False)
        ys = image.dimension_values("y", flat=False)
        pixel = abs(float(np.diff(image.dimension_values("y", expanded=False))[0]))
        assert (alpha > 0).sum() > 10 and ys[alpha > 0].min() > 1 - 4 * pixel
        every = data_view.get(0)  # the first layer: every point
        assert every.dimension_values("y", flat=False)[
            every.dimension_values("A", flat=False) > 0].min() < -1
        values = layout[2][()].get(1)  # the eigenvector's mean image, selection only
        assert np.isfinite(values.dimension_values("value")).sum() < 0.5 * (
            np.isfinite(layout[2][()].get(0).dimension_values("value")).sum())
        return
    hv.render(layout, backend="bokeh")


def _streams(dmap) -> list:
    """The streams of a DynamicMap and of every DynamicMap it is computed from (no
    evaluation: rasterizing the first time compiles datashader's kernels)."""
    found = list(dmap.streams)
    for source in getattr(dmap.callback, "inputs", []):
        if isinstance(source, hv.DynamicMap):
            found += _streams(source)
    return found


@pytest.fixture
def app():
    state = ExplorerState()
    state.data.param.update(dataset="moons")
    state.data.n_samples = 400
    return ExplorerApp(state=state)


def _run(app):
    act(lambda: app.run_controls.button.param.trigger("clicks"))
    assert app.state.result is not None and not app.state.run_state.error


def test_the_linked_tab_counts_the_selection_marks_its_rows_and_clears_it(app):
    assert app.linked.plot.object is None and "Run" in app.linked.count.object
    _run(app)
    linked, sv = app.linked, app.sparsity
    assert isinstance(linked.plot.object, hv.Layout) and linked.clear.disabled
    assert sv.linked is linked and sv.spy.object is not None and sv.marked_rows is None
    assert "Select points in the **Linked views** tab" in sv.marked_note.object
    linked.selection.selection_expr = hv.dim("x") < np.median(app.state.data.result.xy[:, 0])
    assert "**200 of 400 points selected**" in linked.count.object
    assert linked.selected().sum() == 200 and not linked.clear.disabled
    # The spy plot marks the selected points' rows: its marked layer holds exactly
    # their nonzeros, in the order drawn.
    chosen = np.flatnonzero(linked.selected())
    assert linked.picked.shown is app.state.views.result
    assert np.array_equal(linked.picked.points, chosen)
    assert np.array_equal(sv.marked_rows, chosen)
    csr, order = app.state.result.csr.tocoo(), sv._drawn.current
    keep = np.isin(csr.row, chosen)
    want = sorted(zip(order.positions(csr.row[keep]).tolist(),
                      order.positions(csr.col[keep]).tolist(), strict=True))
    rows, cols = sv.marked.data
    assert sorted(zip(rows.tolist(), cols.tolist(), strict=True)) == want and len(want) > 0
    assert "**200 points selected** in the Linked views tab: their 200 rows marked" \
        in sv.marked_note.object
    assert sv.marked in _streams(sv.spy.object)  # what the spy plot's marked layer draws
    linked.clear.param.trigger("clicks")
    assert linked.selection.selection_expr is None and linked.selected() is None
    assert linked.picked is None and sv.marked_rows is None and len(sv.marked.data[0]) == 0
    app.tabs.active = app._tab("Linked views")
    pn.panel(app).get_root()  # the tab's Bokeh models


def test_row_entries_samples_above_the_limit():
    import scipy.sparse as sp

    from explorer.ui.views import row_entries

    csr = sp.random(50, 50, density=0.3, format="csr", random_state=0)
    rows, cols = row_entries(csr, [3, 7, 40])
    assert sorted(zip(rows.tolist(), cols.tolist(), strict=True)) == sorted(
        (r, int(c)) for r in (3, 7, 40) for c in csr[r].indices)
    rows, cols = row_entries(csr, [3, 7, 40], limit=10)
    assert len(rows) == 10 and all(c in csr[r].indices for r, c in zip(rows, cols,
                                                                          strict=True))


def test_pin_then_compare_two_runs(app):
    with pytest.raises(ValueError, match="pin: there is no run to pin yet"):
        app.pin()
    assert app.pin_button.disabled
    _run(app)
    with pytest.raises(ValueError, match="compare: no run is pinned"):
        app.compare()
    act(lambda: app.pin_button.param.trigger("clicks"))
    a = app.state.pinned
    assert a is app.state.result and app.tabs.active == app._tab("Compare A/B")
    assert "Run A pinned" in app.comparison.text.object
    with pytest.raises(ValueError, match="the last run is the pinned run A"):
        app.compare()
    act(lambda: setattr(app.state.run_state, "n_clusters", 3))
    _run(app)
    b = app.state.result
    c = app.compare()
    assert isinstance(c, RunComparison) and c.n_clusters == (2, 3)
    assert c.ari == pytest.approx(adjusted_rand_score(a.labels, b.labels))
    assert c.parameters["n_clusters"] == (2, 3)
    assert c.n_changed == int((c.labels_a != c.labels_b).sum()) > 0
    view = app.comparison
    assert view.comparison is not None and view.comparison.ari == pytest.approx(c.ari)
    assert f"| ARI A vs B | {c.ari:.4f} |" in view.text.object
    assert len(view.plot.object) == 3 and view.spectra.object is not None
    # Both nonzeros-per-row histograms on one axis: each run's own graph statistics.
    hists = view.histograms.object
    assert [h.label for h in hists] == ["A", "B"]
    for h, run in zip(hists, (a, b), strict=True):
        counts, edges = run.graph_stats.nnz_row_hist
        assert h.dimension_values("rows").tolist() == list(counts)
        assert h.edges.tolist() == list(edges)
    assert "run A: " in view.histograms_note.object
    pn.panel(app).get_root()  # the Compare A/B tab is the active one


def test_runs_of_other_data_are_not_compared(app):
    _run(app)
    app.pin()
    act(lambda: setattr(app.state.data, "n_samples", 500))
    _run(app)
    with pytest.raises(ValueError, match="two runs compare only on the same data"):
        app.compare()
    assert app.comparison.message.visible  # said in the tab; the app goes on
    assert "same data" in app.comparison.message.object


def test_two_nonzero_histograms_on_one_axis():
    a = (np.array([3, 5, 2]), np.arange(4))
    b = (np.array([1, 4]), np.array([0, 2, 4]))  # another run's bins
    overlay = plots.nnz_histograms({"A": a, "B": b, "C": None})  # C: no graph
    assert [h.label for h in overlay] == ["A", "B"]
    assert overlay.get(1).dimension_values("rows").tolist() == [1, 4]
    hv.render(overlay, backend="bokeh")
    with pytest.raises(ValueError, match="nothing to draw"):
        plots.nnz_histograms({"A": None})
