"""HoloViews renderers: NumPy arrays in, HoloViews elements out.

Every function here is pure presentation. It draws what the library computed and
computes nothing the library should (no graph, no eigenvectors, no clustering).
Large point sets go through datashader (``rasterize`` / ``datashade`` + ``dynspread``)
so that millions of points stay interactive: on a Bokeh server the image is
re-aggregated on every zoom, and only an image travels to the browser. Edges are
aggregated as lines (datashader's line aggregation of ``hv.Segments``) above
:data:`EDGES_RASTERIZE_ABOVE`.

Readability at every size: one tick formatter (:func:`tick_formatter`: plain numbers
with thousands separators, an exponent only outside 10⁻⁴ … 10⁷) on every axis and
colour bar; colour bars titled by what they show (datashader's aggregates would
otherwise be titled ``x_y value``); integer ticks on index axes (rows, columns,
eigenvalue numbers). Cluster label ``i`` has the colour ``cluster_colors`` gives it in
every view (so matched labels share colours across spectral, k-means and the ground
truth); class names, when the data has them, label the legend.
"""

from __future__ import annotations

from collections.abc import Sequence

import colorcet
import datashader as ds
import holoviews as hv
import holoviews.plotting.bokeh  # noqa: F401  (registers the Bokeh backend the options below target)
import numpy as np
import pandas as pd
from bokeh.models import BasicTicker, CustomJSTickFormatter
from holoviews.operation.datashader import datashade, dynspread, rasterize, spread

#: Above this many points (or nonzeros, for the spy plot) plots are datashaded.
#: Bokeh draws a few tens of thousands of glyphs fluently; beyond that the
#: browser, not the server, becomes the bottleneck.
DATASHADE_ABOVE = 20_000

#: Above this many edges the graph picture aggregates its edges as lines (datashader)
#: instead of drawing one Bokeh segment each.
EDGES_RASTERIZE_ABOVE = 20_000

#: Edges drawn at most in the graph picture: a seeded uniform sample beyond (the
#: aggregated picture of a sample this size shows the same structure, and the line
#: aggregation of it takes a fraction of a second per zoom).
MAX_EDGES_DRAWN = 200_000

#: Pixels each datashaded point is grown by on every side (a 5×5 dot, as a glyph of
#: size 3 on small data).
SPREAD_PX = 2

ISOLATED_COLOR = "#b8b8b8"
ISOLATED_NAME = "isolated"

# Category10 followed by glasbey, without its grey (grey means "isolated" here).
_PALETTE = [c for c in colorcet.b_glasbey_category10 if c.lower() != "#7e7e7e"]

DIVERGING_CMAP = colorcet.coolwarm
EDGE_CMAP = ["#d9d9d9", "#6b6b6b", "#1f1f1f"]

# Plain numbers up to 10⁷ (thousands separated: "20,000"), down to 10⁻⁴ ("0.0004"),
# an exponent beyond ("3e-7"); a tick within 10⁻⁹ of the span of 0 is "0".
_TICK_JS = """
if (typeof tick !== "number") return String(tick);  // a categorical axis' factor
const span = Math.max(...ticks.map(Math.abs));
if (tick === 0 || Math.abs(tick) < 1e-9 * span) return "0";
const a = Math.abs(tick);
if (a >= 1e-4 && a < 1e7)
  return tick.toLocaleString("en-US", {maximumSignificantDigits: 4});
const [m, e] = tick.toExponential(2).split("e");
return Number(m) + "e" + Number(e);
"""


def tick_formatter() -> CustomJSTickFormatter:
    """The tick formatter of every axis and colour bar here.

    Plain numbers between 10⁻⁴ and 10⁷ with at most 4 significant digits and
    thousands separators (``0.0004``, ``1.5``, ``20,000``), an exponent outside
    (``3e-7``, ``5e+7``), and ``0`` for a tick that is zero up to rounding. Bokeh's
    default writes ``4.000e-4`` and ``2.000e+4``.
    """
    return CustomJSTickFormatter(code=_TICK_JS)


def _integer_ticker() -> BasicTicker:
    """Ticks at whole numbers only (row and column indices, eigenvalue numbers)."""
    return BasicTicker(min_interval=1)


def _axes_opts() -> dict:
    return dict(xformatter=tick_formatter(), yformatter=tick_formatter())


def _colorbar_opts(clabel: str) -> dict:
    return dict(colorbar=True, clabel=clabel,
                colorbar_opts={"formatter": tick_formatter(), "title": clabel})


_POINT_OPTS = dict(size=3, line_alpha=0, tools=["hover"], responsive=True, min_height=320)
_FRAME_OPTS = dict(responsive=True, min_height=320, padding=0.05,
                   default_tools=["pan", "wheel_zoom", "reset"])


def cluster_name(label: int, names: Sequence | None = None) -> str:
    """The legend text of a label: ``names[label]`` when given (class names),
    the label number otherwise; ``-1`` is an isolated vertex."""
    if label < 0:
        return ISOLATED_NAME
    if names is not None and label < len(names):
        return str(names[int(label)])
    return str(int(label))


def cluster_color(label: int) -> str:
    """The colour of label `label` in every view: a fixed palette entry per label
    number, grey for ``-1`` (isolated or unclustered)."""
    return ISOLATED_COLOR if label < 0 else _PALETTE[int(label) % len(_PALETTE)]


def cluster_colors(labels, names: Sequence | None = None) -> dict[str, str]:
    """Legend text -> colour of every label present in `labels`.

    Parameters
    ----------
    labels : array-like of int
        Cluster labels (or class codes); ``-1`` is grey.
    names : sequence, optional
        Display names by label number (e.g. a data set's ``classes``).

    Returns
    -------
    dict
        ``cluster_name(label, names) -> cluster_color(label)`` in label order. The
        colour depends on the label number only, so views that show matched labels
        (spectral, k-means and the ground truth) give one cluster one colour.
    """
    present = np.unique(np.asarray(labels))
    return {cluster_name(lab, names): cluster_color(lab) for lab in present}


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


def _check_xy(xy) -> np.ndarray:
    xy = np.asarray(xy)
    if xy.ndim != 2 or xy.shape[1] != 2:
        raise ValueError(f"xy must be an (n, 2) array of coordinates; got shape {xy.shape}")
    return xy


def labelled_points(xy, labels, *, names: Sequence | None = None, title: str = "",
                    xlabel: str = "x", ylabel: str = "y", space: str = "data",
                    spread_px: int = SPREAD_PX):
    """Points coloured by categorical `labels` (label −1 grey).

    Parameters
    ----------
    xy : ndarray, shape (n, 2)
        Coordinates to draw (data, a projection of it, or embedding columns).
    labels : ndarray of int, shape (n,)
        Cluster labels or class codes; the colour of label i is ``cluster_color(i)``.
    names : sequence, optional
        Legend text by label number, e.g. the data set's ``classes`` (class names
        of an uploaded file); label numbers otherwise.
    title, xlabel, ylabel : str
    space : str
        What the coordinates are: plots of the same space share their axis ranges
        (zooming one zooms the others); ``"data"`` for the data or its projection.
    spread_px : int
        Datashaded points are grown by this many pixels on every side.

    Returns
    -------
    holoviews.Element or holoviews.DynamicMap
        Plain points up to :data:`DATASHADE_ABOVE` points, a datashaded image beyond
        (its legend lists the labels as well, up to 16 of them).
    """
    xy = _check_xy(xy)
    labels = np.asarray(labels)
    if labels.shape != (len(xy),):
        raise ValueError(f"labels must have one entry per point ({len(xy)}); got shape "
                         f"{labels.shape}")
    colors = cluster_colors(labels, names)
    values = np.unique(labels)
    legend = list(colors)
    codes = np.searchsorted(values, labels)
    # Drawn (and listed in the legend) in label order.
    order = np.argsort(codes, kind="stable")
    cluster = pd.Categorical.from_codes(codes[order], categories=legend)
    kdims = _axes(space, xlabel, ylabel)
    frame = pd.DataFrame({kdims[0].name: xy[order, 0], kdims[1].name: xy[order, 1],
                          "cluster": cluster})
    points = hv.Points(frame, kdims=kdims, vdims=["cluster"], label=title)
    show_legend = len(colors) <= 16
    opts = dict(title=title, show_legend=show_legend, legend_position="right", **_axes_opts())
    if len(colors) > 6:
        # Ten digits' classes in one column were as tall as the plot and ran over it:
        # two columns, tighter rows.
        opts.update(legend_opts={"ncols": 2, "spacing": 0, "padding": 4,
                                 "label_text_font_size": "9pt"})
    if len(frame) > DATASHADE_ABOVE:
        shaded = datashade(points, aggregator=ds.count_cat("cluster"), color_key=colors,
                           min_alpha=80)
        # A fixed spread, as a glyph has a size: dynspread leaves compact clusters (the
        # unit-row embedding's, a few pixels each at any n) unspread, and so invisible.
        if spread_px:
            shaded = spread(shaded, px=spread_px)
        return shaded.opts(**_FRAME_OPTS, **opts)
    return points.opts(color="cluster", cmap=colors, **_POINT_OPTS, **opts)


def valued_points(xy, values, *, title: str = "", clabel: str = "value", xlabel="x", ylabel="y",
                  space: str = "data"):
    """Points coloured by a signed real value on a diverging colormap centred on 0.

    NaN values (e.g. isolated vertices, which have no eigenvector entry) are drawn
    grey on small data and left out of the aggregate on large data. The colour bar is
    titled `clabel`; above :data:`DATASHADE_ABOVE` points a pixel shows the mean of
    its points' values.
    """
    xy = _check_xy(xy)
    values = np.asarray(values, dtype=np.float64)
    if values.shape != (len(xy),):
        raise ValueError(f"values must have one entry per point ({len(xy)}); got shape "
                         f"{values.shape}")
    finite = values[np.isfinite(values)]
    span = float(np.max(np.abs(finite))) if finite.size else 1.0
    span = span if span > 0 else 1.0
    kdims = _axes(space, xlabel, ylabel)
    frame = pd.DataFrame({kdims[0].name: xy[:, 0], kdims[1].name: xy[:, 1], "value": values})
    vdim = hv.Dimension("value", label=clabel)
    points = hv.Points(frame, kdims=kdims, vdims=[vdim])
    opts = dict(title=title, cmap=DIVERGING_CMAP, clim=(-span, span), **_colorbar_opts(clabel),
                **_axes_opts())
    if len(frame) > DATASHADE_ABOVE:
        image = rasterize(points, aggregator=ds.mean("value"), vdim_prefix="")
        return dynspread(image, threshold=0.6, max_px=3).opts(**_FRAME_OPTS, **opts)
    return points.opts(color="value", nonselection_alpha=0.2, **_POINT_OPTS, **opts)


#: The spectrum's value axis: the i-th smallest eigenvalue, with a real subscript
#: (plain text, so it needs no MathJax and renders offline and in exports).
EIGENVALUE_LABEL = "eigenvalue λᵢ"


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
    i_dim = hv.Dimension("i", label="index i")
    lam_dim = hv.Dimension("lambda", label=EIGENVALUE_LABEL)
    curve = hv.Curve((index, lam), kdims=i_dim, vdims=lam_dim).opts(color="#4c72b0")
    dots = hv.Scatter((index, lam), kdims=i_dim, vdims=lam_dim).opts(size=7, color="#4c72b0",
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
        title=title, xlabel="index i", ylabel=EIGENVALUE_LABEL, responsive=True, min_height=320,
        show_grid=True, xticks=_integer_ticker(), **_axes_opts(),
    )


#: The outline of a diagonal block in the spy plot (a cluster's rows and columns).
BLOCK_COLOR = "#c44e52"


#: The colour of the marked rows' entries in the spy plot (the linked selection's).
MARKED_COLOR = "#ff7f0e"

_SPY_DIMS = (hv.Dimension("column", label="column j"), hv.Dimension("row", label="row i"))


def _spy_points(rows, cols):
    rows, cols = np.asarray(rows), np.asarray(cols)
    if rows.shape != cols.shape:
        raise ValueError(f"rows and cols must have the same shape; got {rows.shape} and "
                         f"{cols.shape}")
    return hv.Points(pd.DataFrame({"column": cols, "row": rows}), kdims=list(_SPY_DIMS))


def marked_entries(rows=(), cols=()) -> hv.streams.Pipe:
    """The stream of the entries :func:`spy` marks: ``send((rows, cols))`` redraws the
    marked layer alone (the matrix under it is not re-aggregated); empty arrays mark
    nothing."""
    return hv.streams.Pipe(data=(np.asarray(rows, dtype=np.int64),
                                 np.asarray(cols, dtype=np.int64)))


def spy(rows, cols, n: int, *, title: str = "Sparsity pattern", blocks=None, marked=None):
    """Spy plot of an n×n sparse matrix from its COO coordinates, rasterized.

    Rasterized always: one pixel stands for a block of entries, counted, so the plot
    costs the same for 10⁴ and 10⁸ nonzeros and dense blocks read as dark squares.
    The axes are row and column indices: integer ticks, thousands separated.

    Parameters
    ----------
    rows, cols : int arrays of one shape
        The entries' positions (in the order to draw).
    n : int
    title : str
    blocks : sequence of (start, stop), optional
        Diagonal blocks to outline, rows and columns ``start .. stop - 1`` (a
        cluster's, when the rows are grouped by cluster).
    marked : holoviews.streams.Pipe, optional
        Entries to mark over the matrix in :data:`MARKED_COLOR` (the rows of the points
        the linked views select), ``(rows, cols)`` in the same order as `rows` and
        `cols` (:func:`marked_entries`); rasterized as the matrix is, on a layer of
        their own that the stream redraws.
    """
    points = _spy_points(rows, cols)
    column, row = _SPY_DIMS
    image = rasterize(points, aggregator=ds.count(), x_range=(0, n), y_range=(0, n),
                      vdim_prefix="")
    opts = dict(invert_yaxis=True, title=title, xlabel="column j", ylabel="row i",
                responsive=True, min_height=360, data_aspect=1, xticks=_integer_ticker(),
                yticks=_integer_ticker(), **_axes_opts())
    drawn = dynspread(image, threshold=0.8, max_px=2).opts(
        cmap="kbc_r" if "kbc_r" in colorcet.palette else "Blues", cnorm="eq_hist",
        colorbar=False, tools=["hover"], **opts)
    layers = [drawn]
    if marked is not None:
        entries = hv.DynamicMap(lambda data: _spy_points(*data), streams=[marked])
        layer = rasterize(entries, aggregator=ds.count(), x_range=(0, n), y_range=(0, n),
                          vdim_prefix="")
        # One colour, whatever the count: a marked entry shows as plainly as a dense
        # block (empty pixels stay transparent).
        layers.append(spread(layer, px=1).opts(cmap=[MARKED_COLOR], colorbar=False,
                                               **opts))
    if blocks:
        # (x0, y0, x1, y1) per block; the pixel grid puts entry i in [i, i + 1).
        boxes = hv.Rectangles([(a, a, b, b) for a, b in blocks],
                              kdims=[column, row, "x1", "y1"])
        layers.append(boxes.opts(fill_alpha=0, line_color=BLOCK_COLOR, line_width=1.5,
                                 line_dash="dashed"))
    if len(layers) == 1:
        return drawn
    overlay = layers[0]
    for layer in layers[1:]:
        overlay = overlay * layer
    return overlay.opts(**opts)


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
        ylim=(0, top * 1.25), xticks=_integer_ticker(), **_axes_opts(),
    )


def timings_bars(timings: dict, *, title="Stage timings"):
    """Horizontal bars of stage -> seconds (in the order given)."""
    items = [(str(k), float(v)) for k, v in timings.items()]
    return hv.Bars(items, kdims="stage", vdims=hv.Dimension("seconds", unit="s")).opts(
        invert_axes=True, color="#55a868", tools=["hover"], title=title,
        responsive=True, min_height=max(160, 40 * len(items) + 60), show_grid=True,
        yformatter=tick_formatter(),
    )


def edges_of(csr, max_edges: int = MAX_EDGES_DRAWN, seed: int = 0):
    """The undirected edges (i < j) of a symmetric sparse matrix, at most `max_edges`.

    Parameters
    ----------
    csr : scipy.sparse.csr_matrix or csr_array
        A symmetric matrix (each edge stored as (i, j) and (j, i)).
    max_edges : int
        Beyond this many edges, a seeded uniform sample of them (drawn with
        replacement from the stored entries, duplicates removed: no permutation of
        all nonzeros is made, so this costs O(max_edges) memory at any nnz).
    seed : int

    Returns
    -------
    (rows, cols, total) : (ndarray, ndarray, int)
        Endpoints of the edges returned, and the number of edges of the graph.
    """
    indptr, indices = np.asarray(csr.indptr), np.asarray(csr.indices)
    nnz = int(indptr[-1])
    if nnz <= 2 * max_edges:
        rows = np.repeat(np.arange(len(indptr) - 1, dtype=np.int64), np.diff(indptr))
        cols = indices.astype(np.int64)
    else:
        # Stored entries drawn with replacement until `max_edges` distinct ones of the
        # upper triangle (about half of all) are among them.
        gen = np.random.default_rng(seed)
        pick = np.empty(0, dtype=np.int64)
        while True:
            pick = np.union1d(pick, gen.integers(0, nnz, 2 * max_edges))
            rows = np.searchsorted(indptr, pick, side="right") - 1
            cols = indices[pick].astype(np.int64)
            if np.count_nonzero(rows < cols) >= max_edges:
                break
    upper = rows < cols
    rows, cols = rows[upper], cols[upper]
    if len(rows) > max_edges:
        keep = np.sort(np.random.default_rng(seed).choice(len(rows), max_edges, replace=False))
        rows, cols = rows[keep], cols[keep]
    return rows, cols, nnz // 2


def graph_edges(xy, rows, cols, *, labels=None, names=None, max_edges: int = MAX_EDGES_DRAWN,
                seed: int = 0, title: str = "Similarity graph", xlabel: str = "x",
                ylabel: str = "y"):
    """The graph drawn over the points: one segment per undirected edge.

    Parameters
    ----------
    xy : ndarray, shape (n, 2)
    rows, cols : ndarray
        COO coordinates of the (symmetric) matrix; each edge is drawn once (i < j).
        :func:`edges_of` gives them from a CSR without copying all of it.
    labels : ndarray, optional
        Colour the points by label; one colour when None.
    names : sequence, optional
        Legend text by label number (see :func:`labelled_points`).
    max_edges : int
        At most this many edges are drawn, a seeded uniform sample beyond.
    xlabel, ylabel : str
        The axes' labels (the data's, ``LoadResult.axis_labels``).

    Returns
    -------
    (holoviews.Overlay or holoviews.DynamicMap, int)
        The picture and the number of edges drawn. Up to
        :data:`EDGES_RASTERIZE_ABOVE` edges are Bokeh segments; beyond, datashader
        aggregates them as lines (darker where more edges cross a pixel), so edges
        show at any n.
    """
    xy = _check_xy(xy)
    rows, cols = np.asarray(rows), np.asarray(cols)
    upper = rows < cols
    rows, cols = rows[upper], cols[upper]
    if len(rows) > max_edges:
        keep = np.random.default_rng(seed).choice(len(rows), max_edges, replace=False)
        rows, cols = rows[keep], cols[keep]
    kdims = [*_axes("data", xlabel, ylabel), "x1", "y1"]
    segments = hv.Segments((xy[rows, 0], xy[rows, 1], xy[cols, 0], xy[cols, 1]), kdims=kdims)
    if len(rows) > EDGES_RASTERIZE_ABOVE:
        edges = rasterize(segments, aggregator=ds.count(), vdim_prefix="").opts(
            cmap=EDGE_CMAP, cnorm="eq_hist", alpha=0.6, colorbar=False, **_FRAME_OPTS,
        )
    else:
        edges = segments.opts(color="#6b6b6b", alpha=0.35 if len(rows) > 2000 else 0.6,
                              line_width=0.7)
    if labels is None:
        labels = np.zeros(len(xy), dtype=np.int64)
        names, show_legend = None, False
    else:
        show_legend = True
    # Points under the edges, small: the edges stay visible between and over them.
    points = labelled_points(xy, labels, names=names, spread_px=0, xlabel=xlabel, ylabel=ylabel)
    if len(xy) <= DATASHADE_ABOVE:
        points = points.opts(size=2 if len(xy) > 2000 else 4)
    points = points.opts(show_legend=show_legend)
    overlay = (points * edges).opts(title=title, responsive=True, min_height=320,
                                    xlabel=xlabel, ylabel=ylabel, **_axes_opts())
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
        self.figure.xaxis.formatter = tick_formatter()
        self.figure.yaxis.formatter = tick_formatter()
        self.figure.quad(left="left", right="right", top="top", bottom="bottom",
                         source=self.source, fill_color="#4c72b0", line_color=None)
        self.figure.add_tools(HoverTool(tooltips=[("nnz", "@left{0} – @right{0}"),
                                                  ("rows", "@top")]))
        self.line = Span(dimension="height", location=0, line_color="#c44e52", line_width=2,
                         line_dash="dashed", visible=False)
        # On a white ground, above the tallest bar (the y range leaves room for it).
        self.label = Label(x=0, y=0, text="", text_color="#c44e52", text_font_size="9pt",
                           background_fill_color="white", background_fill_alpha=0.85,
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
            self.label.update(x=hypo, y=top * 1.08, visible=True,
                              text=f" hypoMaxNnzRow = {hypo:g}" if right
                              else f"hypoMaxNnzRow = {hypo:g} ",
                              text_align="left" if right else "right")
        else:
            self.line.visible = self.label.visible = False
        self.figure.x_range.update(start=lo, end=hi)
        self.figure.y_range.update(start=0, end=top * (1.45 if hypo is not None else 1.1))


#: Marker of each kind of anchor point drawn over the data (:func:`anchor_points`).
ANCHOR_MARKERS = {"representatives": "circle", "landmarks": "triangle"}


def anchor_points(xy, *, labels=None, kind: str = "representatives", xlabel: str = "x",
                  ylabel: str = "y"):
    """The representatives or landmarks of an approximate run, to overlay on the data.

    Parameters
    ----------
    xy : ndarray, shape (m, 2)
        Their coordinates in the drawing of the data (the same projection).
    labels : ndarray of int, shape (m,), optional
        Their clusters (representatives): each is filled with its cluster's colour and
        ringed in black, so that it shows over the points of its own cluster; without,
        black-outlined, nearly transparent markers (landmarks belong to no cluster, and
        a thousand of them must not hide the clusters under them).
    kind : {"representatives", "landmarks"}
        Circles for representatives, triangles for landmarks.
    xlabel, ylabel : str

    Returns
    -------
    holoviews.Element or holoviews.DynamicMap
        Markers up to :data:`DATASHADE_ABOVE` anchors, a black datashaded image beyond
        (``n_representatives`` may be as large as n).
    """
    xy = _check_xy(xy)
    if kind not in ANCHOR_MARKERS:
        raise ValueError(f"kind must be one of {sorted(ANCHOR_MARKERS)}; got {kind!r}")
    kdims = _axes("data", xlabel, ylabel)
    label = "representative" if kind == "representatives" else "landmark"
    if labels is None:
        values = np.full(len(xy), -2, dtype=np.int64)
    else:
        values = np.asarray(labels, dtype=np.int64)
        if values.shape != (len(xy),):
            raise ValueError(f"labels must have one entry per anchor ({len(xy)}); got shape "
                             f"{values.shape}")
    frame = pd.DataFrame({kdims[0].name: xy[:, 0], kdims[1].name: xy[:, 1],
                          "cluster": values})
    points = hv.Points(frame, kdims=kdims, vdims=["cluster"], label=f"{label}s")
    if len(frame) > DATASHADE_ABOVE:
        shaded = spread(datashade(points, cmap=["#000000"], min_alpha=200), px=1)
        return shaded.opts(**_FRAME_OPTS)
    fill = [("#111111" if v == -2 else cluster_color(v)) for v in values]
    frame["fill"] = fill
    points = hv.Points(frame, kdims=kdims, vdims=["cluster", "fill"], label=f"{label}s")
    # Smaller and thinner as they grow many, so that the points stay visible between them.
    size, line = (9, 1.0) if len(frame) <= 500 else (6, 0.8) if len(frame) <= 2000 else (4, 0.5)
    fill_alpha, line_alpha = 0.9, 1.0
    if labels is None:
        # Landmarks (often a thousand) cover the clusters they sit on: hollow-looking,
        # outlined markers, a size smaller, let the clusters' colours show through.
        size, fill_alpha, line_alpha = max(size - 2, 4), 0.15, 0.7
    return points.opts(color="fill", marker=ANCHOR_MARKERS[kind], size=size, line_color="black",
                       line_width=line, fill_alpha=fill_alpha, line_alpha=line_alpha,
                       tools=["hover"], show_legend=True, responsive=True, min_height=320)


# --------------------------------------------------------------- linked views

#: The columns of a linked-views frame that a selection can be made on: the data's
#: drawing and the embedding's (every linked view holds all four, so that a box drawn
#: in one filters the others).
LINKED_COORDS = ("x", "y", "emb_x", "emb_y")
#: What a selected point is drawn over: the unselected points at this opacity.
UNSELECTED_ALPHA = 0.08


def linked_views(xy, embedding_xy, values, labels, kmeans_labels=None, *,
                 names: Sequence | None = None, xlabel: str = "x", ylabel: str = "y",
                 emb_labels=("embedding 1", "embedding 2"), clabel: str = "u2",
                 value_title: str = "Eigenvector u2", selection=None):
    """The run's views over one table of points, linked by HoloViews'
    :class:`~holoviews.selection.link_selections`: a box or lasso drawn in any of them
    selects the same points in all (the others dim every point outside it).

    Parameters
    ----------
    xy : ndarray, shape (n, 2)
        The data's drawing (or projection).
    embedding_xy : ndarray, shape (n, 2)
        Two coordinates of each point's spectral embedding (NaN rows: isolated
        points, which the embedding view leaves out).
    values : ndarray, shape (n,)
        An eigenvector's entries (NaN: isolated).
    labels : ndarray of int, shape (n,)
        Spectral clusters (matched to the truth), the colours of the data and
        embedding views.
    kmeans_labels : ndarray of int, shape (n,), optional
        k-means on the raw data (matched to `labels`): a fourth view when given.
    names : sequence, optional
        Legend text by label number.
    xlabel, ylabel, emb_labels, clabel, value_title : str
        Axis, colour-bar and title texts.
    selection : holoviews.selection.link_selections, optional
        The linking object to use (a new one by default): a view that keeps it across
        runs keeps its selection mode and colours.

    Returns
    -------
    layout : holoviews.Layout
        The linked views (datashaded above :data:`DATASHADE_ABOVE` points, as
        :func:`labelled_points` does; the selection is re-aggregated on the server).
    selection : holoviews.selection.link_selections
        Its ``selection_expr`` is the current selection (settable from code), and
        ``selection.filter(frame)`` the selected rows of a table of these columns.
    """
    xy, emb = _check_xy(xy), _check_xy(embedding_xy)
    n = len(xy)
    labels = np.asarray(labels)
    values = np.asarray(values, dtype=np.float64)
    for name, arr in (("embedding_xy", emb), ("values", values), ("labels", labels)):
        if len(arr) != n:
            raise ValueError(f"{name} must have one row per point ({n}); got {len(arr)}")
    colors = cluster_colors(labels if kmeans_labels is None
                            else np.concatenate([labels, np.asarray(kmeans_labels)]), names)
    legend = list(colors)

    def categorical(lab):
        lab = np.asarray(lab)
        return pd.Categorical([cluster_name(v, names) for v in np.unique(lab)],
                              categories=legend)[np.searchsorted(np.unique(lab), lab)]

    frame = pd.DataFrame({"x": xy[:, 0], "y": xy[:, 1], "emb_x": emb[:, 0],
                          "emb_y": emb[:, 1], "value": values,
                          "spectral": categorical(labels)})
    if kmeans_labels is not None:
        frame["kmeans"] = categorical(kmeans_labels)
    table = hv.Dataset(frame)
    big = n > DATASHADE_ABOVE
    dims = {"x": hv.Dimension("x", label=xlabel), "y": hv.Dimension("y", label=ylabel),
            "emb_x": hv.Dimension("emb_x", label=emb_labels[0]),
            "emb_y": hv.Dimension("emb_y", label=emb_labels[1]),
            "value": hv.Dimension("value", label=clabel)}

    def view(kx, ky, color, title):
        # Every view holds the four coordinates (a selection's expression is over
        # them) and its colour: less to send to the browser than the whole table.
        rest = [dims[c] for c in LINKED_COORDS if c not in (kx, ky)] + [dims.get(color, color)]
        points = hv.Points(table, kdims=[dims[kx], dims[ky]], vdims=rest)
        # A drag selects (link_selections adds the box and lasso tools; pan stays a
        # click away in the toolbar).
        opts = dict(title=title, active_tools=["box_select"], **_axes_opts())
        if color == "value":
            finite = values[np.isfinite(values)]
            span = float(np.max(np.abs(finite))) if finite.size else 1.0
            opts.update(cmap=DIVERGING_CMAP, clim=(-(span or 1.0), span or 1.0),
                        **_colorbar_opts(clabel))
            if big:
                image = rasterize(points, aggregator=ds.mean("value"), vdim_prefix="")
                return spread(image, px=1).opts(**_FRAME_OPTS, **opts)
            return points.opts(color="value", **_POINT_OPTS, **opts)
        # No legend: the selection's layer repeats every cluster's entry with another
        # data source, which Bokeh refuses in one legend; the colours are the Clusters
        # tab's, whose legend names them.
        opts.update(show_legend=False)
        if big:
            shaded = datashade(points, aggregator=ds.count_cat(color), color_key=colors,
                               min_alpha=80)
            return spread(shaded, px=1).opts(**_FRAME_OPTS, **opts)
        return points.opts(color=color, cmap=colors, **_POINT_OPTS, **opts)

    panels = [view("x", "y", "spectral", "Data, by spectral cluster"),
              view("emb_x", "emb_y", "spectral", "Spectral embedding (unit rows)"),
              view("x", "y", "value", value_title)]
    if kmeans_labels is not None:
        panels.append(view("x", "y", "kmeans", "k-means on the raw data"))
    if selection is None:
        selection = hv.link_selections.instance(unselected_alpha=UNSELECTED_ALPHA)
    layout = selection(hv.Layout(panels).cols(2))
    return layout, selection


def changed_points(xy, changed, *, title: str = "Changed cluster", xlabel: str = "x",
                   ylabel: str = "y"):
    """The points that changed cluster between two runs (red) over the others (grey).

    Parameters
    ----------
    xy : ndarray, shape (n, 2)
    changed : ndarray of bool, shape (n,)
        :attr:`explorer.metrics.RunComparison.changed`.
    title, xlabel, ylabel : str
    """
    xy = _check_xy(xy)
    changed = np.asarray(changed, dtype=bool)
    if changed.shape != (len(xy),):
        raise ValueError(f"changed must have one entry per point ({len(xy)}); got shape "
                         f"{changed.shape}")
    colors = {"same cluster": ISOLATED_COLOR, "changed": "#d62728"}
    order = np.argsort(changed, kind="stable")  # the changed points drawn last, on top
    status = pd.Categorical.from_codes(changed[order].astype(np.int8), categories=list(colors))
    kdims = _axes("data", xlabel, ylabel)
    frame = pd.DataFrame({kdims[0].name: xy[order, 0], kdims[1].name: xy[order, 1],
                          "status": status})
    points = hv.Points(frame, kdims=kdims, vdims=["status"])
    opts = dict(title=title, show_legend=True, legend_position="right", **_axes_opts())
    if len(frame) > DATASHADE_ABOVE:
        shaded = spread(datashade(points, aggregator=ds.count_cat("status"), color_key=colors,
                                  min_alpha=80), px=SPREAD_PX)
        return shaded.opts(**_FRAME_OPTS, **opts)
    return points.opts(color="status", cmap=colors, **_POINT_OPTS, **opts)


def spectra(eigenvalues: dict, *, title: str = "Eigenvalues of L_sym, both runs"):
    """Several runs' smallest eigenvalues on one axis (a line and markers each).

    Parameters
    ----------
    eigenvalues : dict of str to ndarray
        Run name (the legend) → its eigenvalues, ascending.
    """
    curves = []
    for i, (name, ev) in enumerate(eigenvalues.items()):
        ev = np.asarray(ev, dtype=np.float64)
        index = np.arange(1, len(ev) + 1)
        kd = hv.Dimension("i", label="index i")
        vd = hv.Dimension("eigenvalue", label=EIGENVALUE_LABEL)
        color = _PALETTE[i % len(_PALETTE)]
        curves += [hv.Curve((index, ev), kd, vd, label=name).opts(color=color),
                   hv.Scatter((index, ev), kd, vd, label=name).opts(color=color, size=6)]
    return hv.Overlay(curves).opts(title=title, responsive=True, min_height=300,
                                   legend_position="top_left", xticks=_integer_ticker(),
                                   yformatter=tick_formatter())


def nnz_histograms(histograms: dict, *, title: str = "Nonzeros per row, both runs"):
    """Several runs' nonzeros-per-row histograms on one axis, as outlined steps over a
    light fill (each run keeps its bins: the library's whole-number bins of its own
    graph, :attr:`explorer.GraphStats.nnz_row_hist`).

    Parameters
    ----------
    histograms : dict of str to (counts, edges)
        Run name (the legend) → ``numpy.histogram``'s counts and bin edges; None for a
        run without a graph (landmark mode), which is left out.

    Returns
    -------
    holoviews.Overlay
        The runs in the colours :func:`spectra` gives them (A first, solid; the others
        dashed).
    """
    layers = []
    for i, (name, hist) in enumerate(histograms.items()):
        if hist is None:
            continue
        counts, edges = (np.asarray(v) for v in hist)
        edges = edges.astype(np.float64)
        if len(edges) != len(counts) + 1:
            raise ValueError(f"{name}: a histogram has one more edge than counts; got "
                             f"{len(counts)} counts and {len(edges)} edges")
        color = _PALETTE[i % len(_PALETTE)]
        # The later runs' outlines dashed: equal histograms show both colours.
        layers.append(hv.Histogram((edges, counts), kdims="nnz in row", vdims="rows",
                                   label=name).opts(fill_color=color, fill_alpha=0.25,
                                                    line_color=color, line_width=1.5,
                                                    line_dash="solid" if i == 0 else "dashed",
                                                    tools=["hover"]))
    if not layers:
        raise ValueError("no run with a graph: nothing to draw")
    return hv.Overlay(layers).opts(title=title, responsive=True, min_height=260,
                                   show_grid=True, legend_position="top_right",
                                   xticks=_integer_ticker(), **_axes_opts())
