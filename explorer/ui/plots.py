"""HoloViews renderers: NumPy arrays in, HoloViews elements out.

Every function here is pure presentation. It draws what the library computed and
computes nothing the library should (no graph, no eigenvectors, no clustering).
Large point sets go through datashader (``rasterize`` / ``datashade`` + ``dynspread``)
so that millions of points stay interactive: on a Bokeh server the image is
re-aggregated on every zoom, and only an image travels to the browser.
"""

from __future__ import annotations

import colorcet
import datashader as ds
import holoviews as hv
import holoviews.plotting.bokeh  # noqa: F401  (registers the Bokeh backend the options below target)
import numpy as np
import pandas as pd
from holoviews.operation.datashader import datashade, dynspread, rasterize

#: Above this many points (or nonzeros, for the spy plot) plots are datashaded.
#: Bokeh draws a few tens of thousands of glyphs fluently; beyond that the
#: browser, not the server, becomes the bottleneck.
DATASHADE_ABOVE = 20_000

#: Edges drawn at most in the teaching view's graph picture (a denser picture is a
#: grey smear that teaches nothing).
MAX_EDGES_DRAWN = 6_000

ISOLATED_COLOR = "#b8b8b8"
ISOLATED_NAME = "isolated"

# Category10 followed by glasbey, without its grey (grey means "isolated" here).
_PALETTE = [c for c in colorcet.b_glasbey_category10 if c.lower() != "#7e7e7e"]

DIVERGING_CMAP = colorcet.coolwarm

_POINT_OPTS = dict(size=3, line_alpha=0, tools=["hover"], responsive=True, min_height=320)
_FRAME_OPTS = dict(responsive=True, min_height=320, default_tools=["pan", "wheel_zoom", "reset"])


def cluster_name(label: int) -> str:
    """The legend text of a cluster label (``-1`` is an isolated vertex)."""
    return ISOLATED_NAME if label < 0 else str(int(label))


def cluster_colors(labels) -> dict[str, str]:
    """Categorical colour of every label present: a fixed colour per label number
    (so spectral and k-means views share colours), grey for isolated vertices."""
    present = np.unique(np.asarray(labels))
    return {
        cluster_name(lab): ISOLATED_COLOR if lab < 0 else _PALETTE[int(lab) % len(_PALETTE)]
        for lab in present
    }


def _frame(xy, **columns) -> pd.DataFrame:
    xy = np.asarray(xy)
    return pd.DataFrame({"x": xy[:, 0], "y": xy[:, 1], **columns})


def _axes(space: str, xlabel: str, ylabel: str) -> list:
    """Key dimensions of a point plot. Bokeh plots in one page share the ranges of
    equally named dimensions, which is right for pictures of the same space (data,
    clusters, eigenvector colours) and wrong across spaces (data vs embedding): the
    name carries the space, the label what the axis shows."""
    return [hv.Dimension("x", label=xlabel), hv.Dimension("y", label=ylabel)] if space == "data" \
        else [hv.Dimension(f"{space}_x", label=xlabel), hv.Dimension(f"{space}_y", label=ylabel)]


def labelled_points(xy, labels, *, title: str = "", xlabel: str = "x", ylabel: str = "y",
                    space: str = "data"):
    """Points coloured by categorical `labels` (label −1 grey).

    Parameters
    ----------
    xy : ndarray, shape (n, 2)
        Coordinates to draw (data, a projection of it, or embedding columns).
    labels : ndarray of int, shape (n,)
    title, xlabel, ylabel : str
    space : str
        What the coordinates are: plots of the same space share their axis ranges
        (zooming one zooms the others); ``"data"`` for the data or its projection.

    Returns
    -------
    holoviews.Element or holoviews.DynamicMap
        Plain points up to :data:`DATASHADE_ABOVE` points, a datashaded image beyond.
    """
    labels = np.asarray(labels)
    colors = cluster_colors(labels)
    values = np.unique(labels)
    names = [cluster_name(v) for v in values]
    codes = np.searchsorted(values, labels)
    # Drawn (and listed in the legend) in label order.
    order = np.argsort(codes, kind="stable")
    cluster = pd.Categorical.from_codes(codes[order], categories=names)
    frame = _frame(np.asarray(xy)[order], cluster=cluster)
    kdims = _axes(space, xlabel, ylabel)
    frame.columns = [kdims[0].name, kdims[1].name, "cluster"]
    points = hv.Points(frame, kdims=kdims, vdims=["cluster"], label=title)
    axes = dict(title=title)
    if len(frame) > DATASHADE_ABOVE:
        shaded = datashade(points, aggregator=ds.count_cat("cluster"), color_key=colors)
        return dynspread(shaded, threshold=0.6, max_px=3).opts(**_FRAME_OPTS, **axes)
    return points.opts(
        color="cluster", cmap=colors, show_legend=len(colors) <= 16, legend_position="right",
        **_POINT_OPTS, **axes,
    )


def valued_points(xy, values, *, title: str = "", clabel: str = "value", xlabel="x", ylabel="y",
                  space: str = "data"):
    """Points coloured by a signed real value on a diverging colormap centred on 0.

    NaN values (e.g. isolated vertices, which have no eigenvector entry) are drawn
    grey on small data and left out of the aggregate on large data.
    """
    values = np.asarray(values, dtype=np.float64)
    finite = values[np.isfinite(values)]
    span = float(np.max(np.abs(finite))) if finite.size else 1.0
    span = span if span > 0 else 1.0
    kdims = _axes(space, xlabel, ylabel)
    frame = _frame(xy, value=values)
    frame.columns = [kdims[0].name, kdims[1].name, "value"]
    points = hv.Points(frame, kdims=kdims, vdims=[hv.Dimension("value", label=clabel)])
    axes = dict(title=title)
    if len(frame) > DATASHADE_ABOVE:
        image = rasterize(points, aggregator=ds.mean("value"))
        return dynspread(image, threshold=0.6, max_px=3).opts(
            cmap=DIVERGING_CMAP, clim=(-span, span), colorbar=True, **_FRAME_OPTS, **axes,
        )
    return points.opts(
        color="value", cmap=DIVERGING_CMAP, clim=(-span, span), colorbar=True,
        nonselection_alpha=0.2, **_POINT_OPTS, **axes,
    )


def spectrum(eigenvalues, *, k_used=None, k_suggested=None, title="Eigenvalues of L_sym"):
    """Eigenvalue spectrum (ascending) with the largest gap marked.

    Parameters
    ----------
    eigenvalues : ndarray
        Smallest eigenvalues of the normalised Laplacian, ascending.
    k_used : int, optional
        The number of clusters the run used (a vertical line).
    k_suggested : int, optional
        The k the eigengap heuristic proposes: the gap between λ_k and λ_(k+1)
        is shaded.
    """
    lam = np.asarray(eigenvalues, dtype=np.float64)
    index = np.arange(1, len(lam) + 1)
    curve = hv.Curve((index, lam), kdims="i", vdims="λ_i").opts(color="#4c72b0")
    dots = hv.Scatter((index, lam), kdims="i", vdims="λ_i").opts(size=7, color="#4c72b0",
                                                                 tools=["hover"])
    layers = [curve, dots]
    if k_suggested is not None and 1 <= k_suggested < len(lam):
        lo, hi = lam[k_suggested - 1], lam[k_suggested]
        layers.append(hv.VSpan(k_suggested, k_suggested + 1).opts(color="#f2b701", alpha=0.25))
        layers.append(
            hv.Text(k_suggested + 0.5, (lo + hi) / 2, f" eigengap → k = {k_suggested}",
                    halign="left")
            .opts(text_font_size="10pt", text_color="#8a6d00")
        )
    if k_used is not None:
        layers.append(hv.VLine(k_used + 0.5).opts(color="#c44e52", line_dash="dashed",
                                                  line_width=1.5))
    return hv.Overlay(layers).opts(
        title=title, xlabel="i", ylabel="λ_i", responsive=True, min_height=320, show_grid=True,
        yformatter="%.2g",
    )


def spy(rows, cols, n: int, *, title: str = "Sparsity pattern"):
    """Spy plot of an n×n sparse matrix from its COO coordinates, rasterized.

    Rasterized always: one pixel stands for a block of entries, counted, so the plot
    costs the same for 10⁴ and 10⁸ nonzeros and dense blocks read as dark squares.
    """
    frame = pd.DataFrame({"column": np.asarray(cols), "row": np.asarray(rows)})
    points = hv.Points(frame, kdims=["column", "row"])
    image = rasterize(points, aggregator=ds.count(), x_range=(0, n), y_range=(0, n))
    return dynspread(image, threshold=0.8, max_px=2).opts(
        cmap="kbc_r" if "kbc_r" in colorcet.palette else "Blues", cnorm="eq_hist",
        invert_yaxis=True, title=title, xlabel="column j", ylabel="row i",
        responsive=True, min_height=360, data_aspect=1, colorbar=False, tools=["hover"],
    )


def nnz_histogram(counts, edges, *, hypo=None, title="Nonzeros per row"):
    """Histogram of nonzeros per row, with a line at ``hypoMaxNnzRow``."""
    edges = np.asarray(edges, dtype=np.float64)
    counts = np.asarray(counts)
    hist = hv.Histogram((edges, counts), kdims="nnz in row", vdims="rows").opts(
        color="#4c72b0", line_color=None, tools=["hover"],
    )
    layers = [hist]
    lo, hi = float(edges[0]), float(edges[-1])
    top = float(counts.max()) if counts.size else 1.0
    if hypo is not None:
        hypo = float(hypo)
        hi = max(hi, hypo * 1.05 + 1)
        # The label sits above the bars, on the side of the line with more room.
        right = hypo < lo + 0.6 * (hi - lo)
        layers.append(hv.VLine(hypo).opts(color="#c44e52", line_width=2, line_dash="dashed"))
        layers.append(
            hv.Text(hypo, top * 1.16, f" hypoMaxNnzRow = {hypo:g} " if right else
                    f"hypoMaxNnzRow = {hypo:g} ", halign="left" if right else "right",
                    valign="center")
            .opts(text_font_size="9pt", text_color="#c44e52")
        )
    return hv.Overlay(layers).opts(
        title=title, responsive=True, min_height=260, show_grid=True, xlim=(lo, hi),
        ylim=(0, top * 1.25),
    )


def timings_bars(timings: dict, *, title="Stage timings"):
    """Horizontal bars of stage -> seconds (in the order given)."""
    items = [(str(k), float(v)) for k, v in timings.items()]
    return hv.Bars(items, kdims="stage", vdims=hv.Dimension("seconds", unit="s")).opts(
        invert_axes=True, color="#55a868", tools=["hover"], title=title,
        responsive=True, min_height=max(160, 40 * len(items) + 60), show_grid=True,
    )


def graph_edges(xy, rows, cols, *, labels=None, max_edges: int = MAX_EDGES_DRAWN, seed: int = 0,
                title: str = "Similarity graph"):
    """The graph drawn over the points: one segment per undirected edge, capped.

    Parameters
    ----------
    xy : ndarray, shape (n, 2)
    rows, cols : ndarray
        COO coordinates of the (symmetric) matrix; each edge is drawn once (i < j).
    labels : ndarray, optional
        Colour the points by label; grey when None.
    max_edges : int
        At most this many edges are drawn, a seeded uniform sample beyond.

    Returns
    -------
    (holoviews.Overlay, int)
        The picture and the number of edges drawn.
    """
    xy = np.asarray(xy)
    rows, cols = np.asarray(rows), np.asarray(cols)
    upper = rows < cols
    rows, cols = rows[upper], cols[upper]
    if len(rows) > max_edges:
        keep = np.random.default_rng(seed).choice(len(rows), max_edges, replace=False)
        rows, cols = rows[keep], cols[keep]
    segments = hv.Segments(
        (xy[rows, 0], xy[rows, 1], xy[cols, 0], xy[cols, 1]), kdims=["x0", "y0", "x1", "y1"]
    ).opts(color="#6b6b6b", alpha=0.35, line_width=0.7)
    if labels is None:
        points = hv.Points(_frame(xy), kdims=["x", "y"]).opts(color="#4c72b0", size=3, line_alpha=0)
    else:
        points = labelled_points(xy, labels)
    overlay = (segments * points).opts(title=title, responsive=True, min_height=320,
                                       xlabel="x", ylabel="y")
    return overlay, len(rows)


class LiveHistogram:
    """The live statistics' nonzeros-per-row histogram as a plain Bokeh figure.

    The statistics card redraws on every slider step. A HoloViews update costs
    ~100 ms of Bokeh document bookkeeping per redraw on a page this size; here a redraw
    only replaces the bars' data source and moves the ``hypoMaxNnzRow`` line (a few
    milliseconds), so the card keeps up with a dragged slider.

    Attributes
    ----------
    figure : bokeh.plotting.figure
        Display it with ``pn.pane.Bokeh(histogram.figure)``.
    """

    def __init__(self, *, title="Nonzeros per row", height=230):
        from bokeh.models import ColumnDataSource, HoverTool, Label, Range1d, Span
        from bokeh.plotting import figure

        self.source = ColumnDataSource({"left": [], "right": [], "top": [], "bottom": []})
        # Fixed ranges, set on each update (a DataRange1d would keep its first fit).
        self.figure = figure(
            title=title, height=height, sizing_mode="stretch_width", tools="pan,wheel_zoom,reset",
            x_axis_label="nnz in row", y_axis_label="rows", toolbar_location="right",
            x_range=Range1d(0, 1), y_range=Range1d(0, 1),
        )
        self.figure.quad(left="left", right="right", top="top", bottom="bottom",
                         source=self.source, fill_color="#4c72b0", line_color=None)
        self.figure.add_tools(HoverTool(tooltips=[("nnz", "@left{0} – @right{0}"),
                                                  ("rows", "@top")]))
        self.line = Span(dimension="height", location=0, line_color="#c44e52", line_width=2,
                         line_dash="dashed", visible=False)
        self.label = Label(x=0, y=0, text="", text_color="#c44e52", text_font_size="9pt",
                           visible=False)
        self.figure.add_layout(self.line)
        self.figure.add_layout(self.label)

    def update(self, counts, edges, hypo=None) -> None:
        """Draw this histogram (``numpy.histogram``'s counts and edges) and line."""
        counts = np.asarray(counts)
        edges = np.asarray(edges, dtype=np.float64)
        self.source.data = {"left": edges[:-1], "right": edges[1:], "top": counts,
                            "bottom": np.zeros(len(counts))}
        lo, hi = float(edges[0]), float(edges[-1])
        top = float(counts.max()) if counts.size else 1.0
        if hypo is not None:
            hi = max(hi, hypo * 1.05 + 1)
            right = hypo < lo + 0.6 * (hi - lo)
            self.line.update(location=hypo, visible=True)
            self.label.update(x=hypo, y=top * 1.12, visible=True,
                              text=f" hypoMaxNnzRow = {hypo:g}" if right
                              else f"hypoMaxNnzRow = {hypo:g} ",
                              text_align="left" if right else "right")
        else:
            self.line.visible = self.label.visible = False
        self.figure.x_range.update(start=lo, end=hi)
        self.figure.y_range.update(start=0, end=top * 1.25)
