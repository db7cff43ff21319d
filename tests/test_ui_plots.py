"""The plot functions at every size the app draws: 100, 10⁵ and 5·10⁶ points.

Each plot is built and rendered to its Bokeh figure (what the browser receives), and
the test reads that figure: datashaded above the threshold, axes and colour bars
labelled with what they show (never datashader's ``x_y value``), the one tick
formatter everywhere, integer ticks on index axes, the edges of the graph picture drawn
at every size, one colour per label across views.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

hv = pytest.importorskip("holoviews", reason="the app's plots need HoloViews (pip install "
                         "-e '.[app]'); the GPU machine has none")
from bokeh.models import BasicTicker, ColorBar, CustomJSTickFormatter, Legend  # noqa: E402

from explorer.ui import plots  # noqa: E402

SIZES = [100, 100_000, 5_000_000]


def _figure(obj):
    return hv.render(obj, backend="bokeh")


def _glyphs(fig) -> list[str]:
    return [type(getattr(r, "glyph", r)).__name__ for r in fig.renderers]


def _legend_texts(fig) -> list[str]:
    """The legend's entries: labels of its items, or the category names of a
    datashaded plot's legend (one item whose label is a field of its source)."""
    texts = []
    for legend in fig.select(Legend):
        for item in legend.items:
            label = item.label
            if isinstance(label, dict) or hasattr(label, "field"):
                field = label["field"] if isinstance(label, dict) else label.field
                for r in item.renderers:
                    texts += [str(v) for v in r.data_source.data[field]]
            else:
                texts.append(str(label.get("value") if isinstance(label, dict) else label))
    return texts


def _assert_readable_axes(fig, xlabel, ylabel):
    assert fig.xaxis[0].axis_label == xlabel and fig.yaxis[0].axis_label == ylabel
    for axis in (fig.xaxis[0], fig.yaxis[0]):
        assert isinstance(axis.formatter, CustomJSTickFormatter), axis.formatter


@pytest.fixture(scope="module", params=SIZES, ids=lambda n: f"n={n:g}")
def cloud(request):
    n = request.param
    rng = np.random.default_rng(n)
    labels = rng.integers(-1, 3, n)
    xy = rng.normal(size=(n, 2)) + 4 * np.maximum(labels, 0)[:, None]
    return n, xy, labels, rng


def test_labelled_points_at_every_size(cloud):
    n, xy, labels, _ = cloud
    names = ("setosa", "versicolor", "virginica")
    obj = plots.labelled_points(xy, labels, names=names, title="Ground truth",
                                xlabel="x0", ylabel="x1")
    assert isinstance(obj, hv.DynamicMap) == (n > plots.DATASHADE_ABOVE)
    fig = _figure(obj)
    _assert_readable_axes(fig, "x0", "x1")
    assert fig.title.text == "Ground truth"
    glyphs = _glyphs(fig)
    assert ("ImageRGBA" in glyphs) == (n > plots.DATASHADE_ABOVE), glyphs
    # The legend names the classes (not their codes) and the unclustered points.
    assert sorted(set(_legend_texts(fig))) == sorted([*names, plots.ISOLATED_NAME])


def test_valued_points_have_a_titled_colour_bar(cloud):
    n, xy, labels, rng = cloud
    values = rng.normal(size=n) * 4e-4
    values[labels < 0] = np.nan  # isolated vertices have no eigenvector entry
    obj = plots.valued_points(xy, values, clabel="u2", title="Eigenvector u2")
    assert isinstance(obj, hv.DynamicMap) == (n > plots.DATASHADE_ABOVE)
    fig = _figure(obj)
    _assert_readable_axes(fig, "x", "y")
    bars = list(fig.select(ColorBar))
    assert len(bars) == 1
    assert bars[0].title == "u2"  # not datashader's "x_y value"
    assert isinstance(bars[0].formatter, CustomJSTickFormatter)
    # Centred on 0: the colour map's span is symmetric about the largest |value|.
    mapper = bars[0].color_mapper
    span = np.nanmax(np.abs(values))
    assert mapper.low == pytest.approx(-span) and mapper.high == pytest.approx(span)


def test_spy_plot_counts_every_entry_and_has_integer_ticks(cloud):
    n, _, _, rng = cloud
    nnz = min(20 * n, 4_000_000)
    rows, cols = rng.integers(0, n, nnz), rng.integers(0, n, nnz)
    obj = plots.spy(rows, cols, n, title="S")
    fig = _figure(obj)
    _assert_readable_axes(fig, "column j", "row i")
    for axis in (fig.xaxis[0], fig.yaxis[0]):
        assert isinstance(axis.ticker, BasicTicker) and axis.ticker.min_interval == 1
    image = next(r for r in fig.renderers
                 if type(getattr(r, "glyph", None)).__name__ == "Image")
    counts = np.asarray(image.data_source.data["image"][0])
    assert np.nansum(counts) > 0  # the entries are drawn
    assert (fig.x_range.start, fig.x_range.end) == pytest.approx((0, n), abs=0.05 * n)


def test_graph_edges_are_drawn_at_every_size(cloud):
    n, xy, labels, rng = cloud
    m = min(8 * n, 3_000_000)
    i, j = rng.integers(0, n, m), rng.integers(0, n, m)
    keep = i != j
    S = sp.coo_matrix((np.ones(keep.sum()), (i[keep], j[keep])), shape=(n, n)).tocsr()
    S = (S + S.T).tocsr()
    rows, cols, total = plots.edges_of(S)
    assert total == S.nnz // 2
    obj, drawn = plots.graph_edges(xy, rows, cols, labels=labels)
    assert drawn == min(total, plots.MAX_EDGES_DRAWN) == len(rows)
    fig = _figure(obj)
    _assert_readable_axes(fig, "x", "y")
    glyphs = _glyphs(fig)
    if drawn > plots.EDGES_RASTERIZE_ABOVE:
        assert "Image" in glyphs, glyphs  # the edges' line aggregation
    else:
        assert "Segment" in glyphs, glyphs
    assert ("ImageRGBA" in glyphs) == (n > plots.DATASHADE_ABOVE)


def test_edges_of_returns_each_edge_once_and_samples_without_copying(rng):
    n = 3000
    A = sp.random(n, n, density=0.01, random_state=np.random.default_rng(rng.integers(2**32)),
                  format="csr")
    A = ((A + A.T) > 0).astype(np.float32).tocsr()
    A.setdiag(0)
    A.eliminate_zeros()
    A.sort_indices()
    upper = sp.triu(A, k=1).tocoo()
    everything = set(zip(upper.row.tolist(), upper.col.tolist(), strict=True))
    rows, cols, total = plots.edges_of(A, max_edges=10**9)
    assert total == len(everything) == A.nnz // 2
    assert set(zip(rows.tolist(), cols.tolist(), strict=True)) == everything
    rows, cols, total = plots.edges_of(A, max_edges=5000, seed=3)
    pairs = set(zip(rows.tolist(), cols.tolist(), strict=True))
    assert len(pairs) == len(rows) == 5000 and pairs <= everything
    assert total == len(everything)
    again = plots.edges_of(A, max_edges=5000, seed=3)
    np.testing.assert_array_equal(again[0], rows)  # seeded


def test_small_graph_pictures_draw_every_edge_as_a_segment(rng):
    n = 50
    xy = rng.normal(size=(n, 2))
    rows, cols = np.array([0, 1, 1, 2, 5, 7]), np.array([1, 0, 2, 1, 7, 5])
    obj, drawn = plots.graph_edges(xy, rows, cols)
    assert drawn == 3
    fig = _figure(obj)
    segment = next(r for r in fig.renderers
                   if type(getattr(r, "glyph", None)).__name__ == "Segment")
    data, g = segment.data_source.data, segment.glyph
    ends = {tuple(np.round(v, 6)) for v in zip(data[g.x0], data[g.y0], data[g.x1], data[g.y1],
                                                strict=True)}
    want = {tuple(np.round([*xy[a], *xy[b]], 6)) for a, b in [(0, 1), (1, 2), (5, 7)]}
    assert ends == want


def test_one_colour_per_label_everywhere(rng):
    labels = rng.integers(0, 6, 500)
    sub = labels[labels >= 3]  # another view shows only some of the labels
    full, part = plots.cluster_colors(labels), plots.cluster_colors(np.r_[sub, -1])
    for name, colour in part.items():
        if name == plots.ISOLATED_NAME:
            assert colour == plots.ISOLATED_COLOR
        else:
            assert full[name] == colour == plots.cluster_color(int(name))
    assert len(set(full.values())) == 6
    named = plots.cluster_colors(labels, names=list("abcdef"))
    assert list(named) == list("abcdef")
    assert list(named.values()) == list(full.values())
    # The legend of a drawn view uses the same colours (small and datashaded).
    for n in (300, 30_000):
        lab = rng.integers(0, 4, n)
        fig = _figure(plots.labelled_points(rng.normal(size=(n, 2)), lab))
        glyph_colours = _legend_colours(fig)
        assert glyph_colours == {str(k): plots.cluster_color(k) for k in range(4)}


def _legend_colours(fig) -> dict:
    """Legend text -> colour as the figure draws them (categorical colour mapper)."""
    from bokeh.models import CategoricalColorMapper

    mapper = next(iter(fig.select(CategoricalColorMapper)))
    return dict(zip(mapper.factors, mapper.palette, strict=False))


def test_bad_shapes_name_the_argument(rng):
    with pytest.raises(ValueError, match=r"xy must be an \(n, 2\) array.*\(10, 3\)"):
        plots.labelled_points(rng.normal(size=(10, 3)), np.zeros(10, int))
    with pytest.raises(ValueError, match=r"labels must have one entry per point \(10\)"):
        plots.labelled_points(rng.normal(size=(10, 2)), np.zeros(9, int))
    with pytest.raises(ValueError, match=r"values must have one entry per point"):
        plots.valued_points(rng.normal(size=(10, 2)), np.zeros(11))
    with pytest.raises(ValueError, match=r"rows and cols must have the same shape"):
        plots.spy(np.zeros(3, int), np.zeros(4, int), 5)


@pytest.mark.browser
def test_tick_formatter_in_the_browser():
    """The formatter's JavaScript, run in Chromium on ticks Bokeh produces."""
    from playwright.sync_api import sync_playwright

    from tests._server import CHROMIUM, CHROMIUM_ARGS

    code = plots.tick_formatter().code
    cases = {
        "small": ([-4e-4, -2e-4, 0.0, 2e-4, 4e-4], ["-0.0004", "-0.0002", "0", "0.0002", "0.0004"]),
        "counts": ([0, 20000, 40000, 60000], ["0", "20,000", "40,000", "60,000"]),
        "millions": ([0, 1e6, 2e6, 5e6], ["0", "1,000,000", "2,000,000", "5,000,000"]),
        "plain": ([-1.5, -1, -0.5, 0, 0.5], ["-1.5", "-1", "-0.5", "0", "0.5"]),
        "rounding": ([-0.2, -0.1, 2.7755575615628914e-17, 0.1], ["-0.2", "-0.1", "0", "0.1"]),
        "tiny": ([0, 2e-7, 4e-7], ["0", "2e-7", "4e-7"]),
        "huge": ([0, 5e7, 1e8], ["0", "5e7", "1e8"]),
    }
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_page()
            for name, (ticks, want) in cases.items():
                got = page.evaluate(
                    "([code, ticks]) => { const f = new Function('tick', 'index', 'ticks', code);"
                    " return ticks.map((t, i) => f(t, i, ticks)); }", [code, ticks])
                assert got == want, name
        finally:
            browser.close()


def test_spectrum_axis_reads_as_a_label():
    """The spectrum's value axis is a label with a real subscript, not the text
    ``λ_i`` of a dimension name."""
    fig = hv.render(plots.spectrum(np.array([0.0, 0.01, 0.5, 0.7]), k_suggested=2),
                    backend="bokeh")
    assert fig.yaxis[0].axis_label == plots.EIGENVALUE_LABEL == "eigenvalue λᵢ"
    assert fig.xaxis[0].axis_label == "index i"


def test_landmarks_let_the_clusters_show_through():
    """A thousand landmarks are drawn small, outlined and nearly transparent; the
    representatives keep their cluster's solid fill."""
    xy = np.random.default_rng(0).normal(size=(1000, 2))
    marks = hv.render(plots.anchor_points(xy, kind="landmarks"), backend="bokeh")
    glyph = marks.renderers[-1].glyph
    assert glyph.fill_alpha < 0.3 and glyph.line_alpha > 0.5 and glyph.size <= 6
    reps = hv.render(plots.anchor_points(xy, labels=np.zeros(1000, int)), backend="bokeh")
    assert reps.renderers[-1].glyph.fill_alpha > 0.8


def test_ten_classes_legend_in_two_columns():
    """Ten classes (the digits) in one legend column were as tall as the plot and ran
    over it: beyond six labels the legend has two columns."""
    xy = np.random.default_rng(1).normal(size=(500, 2))
    fig = hv.render(plots.labelled_points(xy, np.arange(500) % 10), backend="bokeh")
    assert [legend.ncols for legend in fig.select(Legend)] == [2]
    fig = hv.render(plots.labelled_points(xy, np.arange(500) % 3), backend="bokeh")
    assert [legend.ncols for legend in fig.select(Legend)] != [2]
