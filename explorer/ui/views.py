"""The main area's views: each renders a stage's result and nothing else.

Every view is a :class:`panel.viewable.Viewer` over an
:class:`~explorer.ui.state.ExplorerState`. It draws one stage's result and the
arrays that result carries (a run's labels with the points of the data *it*
clustered), never arrays of two stages side by side, so no view can index an array
of another generation. A result whose inputs have changed since is drawn greyed,
under a badge naming the parameters that produced it; a view with nothing to draw
says what it waits for. They can be used on their own in a notebook, e.g.
``pn.Column(SpectrumView(state=app.state))``.
"""

from __future__ import annotations

import html
from dataclasses import dataclass

import holoviews as hv
import numpy as np
import pandas as pd
import panel as pn
import param

from explorer.components import components_besides_isolated
from explorer.embedding import eigengap_choice

from . import _export, _jobs, plots
from ._order import MODES, OrderState
from .controls import LabelledCheckbox
from .state import STAGES, STEPS, ExplorerState

_WIDE = dict(sizing_mode="stretch_width")
_PLOT = dict(sizing_mode="stretch_width", min_height=380)

#: The CSS class a layout holding a stale result's drawings gets: greyed, still readable.
STALE_CLASS = "stale-result"
#: Its rule, given to those layouts once (toggling a class changes one string property
#: in the browser; changing `styles` makes new style-sheet models, which raced with the
#: drawings' own updates: "reference ... isn't known" in the browser).
STALE_CSS = f":host(.{STALE_CLASS}) {{ opacity: 0.45; filter: grayscale(0.8); }}"


def _body(layout, *objects, **params):
    """A layout (pn.Column or pn.Row) that can be greyed by :class:`StaleBadge`."""
    return layout(*objects, stylesheets=[STALE_CSS], **params)

#: What a view waiting for a run says.
NO_RUN = "Waiting for a run: press **Run** (sidebar, step 3) to compute this view."


def _bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


def _count(n) -> str:
    n = float(n)
    if n >= 1e9:
        return f"{n / 1e9:.2f} G"
    if n >= 1e6:
        return f"{n / 1e6:.2f} M"
    if n >= 1e4:
        return f"{n / 1e3:.1f} K"
    return f"{n:,.0f}"


def _value(v) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def stale_text(stage) -> str:
    """Why `stage`'s result is stale: the inputs that produced it, where they differ
    from the current ones ('' when it is current or there is none)."""
    if stage.result is None or not stage.stale or stage.inputs is None:
        return ""
    now = stage.inputs_now()
    parts = []
    data = getattr(stage.result, "data", None)
    if now is None or any(a is not b for a, b in zip(stage.inputs.upstream, now.upstream,
                                                      strict=False)):
        if data is not None:
            parts.append(f"data {data.describe()}")
    if now is not None:
        parts += [f"{name} = {_value(stage.inputs[name])}"
                  for name in stage.inputs.changed(now)]
    how = ", ".join(parts) if parts else "other inputs"
    return f"**Stale result**, computed with {how}. Press **Run** to update it."


class StaleBadge:
    """A warning line over a view while the run it draws is stale, and the greying
    of the layouts that hold its drawings (layouts, not the plot panes themselves:
    styles set on a HoloViews pane reach its Bokeh model, which refuses them)."""

    def __init__(self, state: ExplorerState, *panes, when=lambda: True):
        self.state, self.panes, self.when = state, panes, when
        self.pane = pn.pane.Alert("", alert_type="warning", visible=False,
                                  css_classes=["stale-badge"], **_WIDE)
        state.run_state.param.watch(self.update, ["stale", "result"])
        self.update()

    def update(self, *events) -> None:
        text = stale_text(self.state.run_state) if self.when() else ""
        if text != self.pane.object or bool(text) != self.pane.visible:
            self.pane.param.update(object=text, visible=bool(text))
        for pane in self.panes:
            _grey(pane, bool(text))


def _grey(layout, stale: bool) -> None:
    """Grey `layout` (made by :func:`_body`) or not; only changes reach the browser."""
    classes = [c for c in layout.css_classes if c != STALE_CLASS]
    if stale:
        classes.append(STALE_CLASS)
    if classes != list(layout.css_classes):
        layout.css_classes = classes


class PipelineStatus(pn.viewable.Viewer):
    """The top of the main area: which stage is working, the run's progress, and
    whether the results shown are stale."""

    state = param.ClassSelector(class_=ExplorerState)

    def __init__(self, **params):
        super().__init__(**params)
        self.text = pn.pane.HTML("", css_classes=["pipeline-status"], **_WIDE)
        self.progress = pn.indicators.Progress(value=0, max=len(STAGES), active=False,
                                               visible=False, bar_color="primary", **_WIDE)
        s = self.state
        for stage in s.stages:
            stage.param.watch(self._render, ["busy", "progress", "stale", "error", "result"])
        s.run_state.param.watch(self._render, "stages_done")
        self._render()

    def _render(self, *events) -> None:
        s = self.state
        r = s.run_state
        lines = []
        if s.data.busy:
            lines.append("Loading the data…")
        if s.graph.busy:
            lines.append(f"Graph statistics: {s.graph.progress or 'computing'}…")
        if r.busy:
            lines.append(f"<b>Run</b>: {html.escape(r.progress or 'starting')}")
        elif s.views.busy:
            lines.append("Drawing the run…")
        if not lines:
            if r.result is None:
                lines.append("Ready: tune the graph in the sidebar, then press <b>Run</b>.")
            elif r.stale:
                lines.append("The parameters changed since the last run: its results are "
                             "greyed; press <b>Run</b> to update them.")
            else:
                lines.append(f"Showing the run on {html.escape(r.result.data.describe())} "
                             f"({r.result.timings['total']:.2f} s).")
        self.text.object = ("<div style='font-size:0.95em;color:#333'>"
                            + " · ".join(lines) + "</div>")
        self.progress.param.update(value=r.stages_done, active=r.busy, visible=r.busy)

    def __panel__(self):
        return pn.Column(self.text, self.progress, css_classes=["pipeline"], **_WIDE)


class StatsCard(pn.viewable.Viewer):
    """Live statistics of the graph the current parameters give (no full run)."""

    state = param.ClassSelector(class_=ExplorerState)

    def __init__(self, **params):
        super().__init__(**params)
        self.table = pn.pane.HTML("", css_classes=["stats-table"], **_WIDE)
        self.error = pn.pane.Alert("", alert_type="warning", visible=False, **_WIDE)
        self.histogram = plots.LiveHistogram()
        self.hist = pn.pane.Bokeh(self.histogram.figure, sizing_mode="stretch_width", height=230)
        g = self.state.graph
        g.param.watch(self._render, ["result", "error", "stale", "busy", "waiting"])
        self._drawn = None  # the statistics the histogram shows
        self._render()

    def _render(self, *events) -> None:
        g = self.state.graph
        self.error.object = g.error
        self.error.visible = bool(g.error)
        s = g.stats
        if s is None:
            self.table.object = f"<i>No statistics yet{': ' + g.waiting if g.waiting else ''}.</i>"
            if self._drawn is not None or not events:
                self._drawn = None
                self._draw([0], [0, 1], None)
            return
        approx = "≈ " if s.estimated else ""
        components = components_besides_isolated(s)
        if components is not None:
            comps = (f"{components:,} <small>(besides the {s.n_isolated:,} isolated "
                     f"vertices; {s.n_components:,} counting each as one)</small>")
        else:
            comps = "not counted (sampled)" if s.estimated else "<i>counting…</i>"
        how = (
            f"estimated from {s.sample_rows:,} sampled rows of {s.n:,}" if s.estimated
            else f"exact, all {s.n:,} rows"
        )
        seconds = "" if g.seconds is None else f" · {1000 * g.seconds:.0f} ms"
        kind = _graph_kind(g.inputs)
        if not kind.startswith("ε-graph"):
            how += " (a kNN graph's statistics come from building it)"
        if g.representatives is not None:
            how += (f" · the graph of the {s.n:,} k-means <b>representatives</b> a run "
                    "clusters (representatives mode), not of the points")
        if self.state.run_state.mode == "landmarks":
            how += (" · <b>landmark mode</b> builds no graph of the points (each point is "
                    "joined to its nearest landmarks): these statistics are of the graph "
                    "set here, which exact mode would build")
        if g.stale:
            how += " · <b>updating…</b>" if g.busy else " · <b>not for the current parameters</b>"
        rows = [
            ("graph", kind),
            ("nnz", f"{approx}{_count(s.nnz)}"),
            ("nnz / row",
             f"mean {s.nnz_row_mean:.1f} · max {s.nnz_row_max:,} · min {s.nnz_row_min:,}"),
            ("sparsity", f"{approx}{s.sparsity:.4f} % zeros"),
            ("memory: CSR", f"{approx}{_bytes(s.bytes_csr)}"),
            ("memory: dense", _bytes(s.bytes_dense)),
            (f"memory: ELLPACK ({s.hypo_max_nnz_row}/row)", f"{approx}{_bytes(s.bytes_ellpack)}"),
            (f"rows over hypoMaxNnzRow = {s.hypo_max_nnz_row}",
             f"{approx}{s.rows_over_hypo:,} <small>(CSR-2 supplementary pass)</small>"),
            ("suggested hypoMaxNnzRow", f"{s.suggested_hypo_max_nnz_row}"),
            ("isolated vertices", f"{approx}{s.n_isolated:,}"),
            ("connected components", comps),
        ]
        cell = "padding:1px 8px;border-bottom:1px solid #eee;text-align:left"
        body = "".join(
            f"<tr><th style='{cell};font-weight:600;color:#444'>{k}</th>"
            f"<td style='{cell}'>{v}</td></tr>" for k, v in rows
        )
        self.table.object = (
            "<table class='stats' style='width:100%;border-collapse:collapse;font-size:0.9em'>"
            f"{body}</table><div class='stats-how' style='color:#666;font-size:0.8em;"
            f"margin-top:4px'>{how}{seconds}</div>"
        )
        if s is not self._drawn:  # the histogram changes with the statistics only
            self._drawn = s
            counts, edges = s.nnz_row_hist
            self._draw(counts, edges, s.hypo_max_nnz_row)

    def _draw(self, counts, edges, hypo) -> None:
        def draw():
            self.histogram.update(counts, edges, hypo)
            # In a notebook, changed Bokeh models are sent explicitly (no-op on a server).
            pn.io.push_notebook(self.hist)

        # The figure's models are changed directly, which on a server must happen under
        # the document lock: Panel schedules the change on the session's event loop
        # (and runs it at once in a notebook).
        pn.state.execute(draw, schedule=True)

    def __panel__(self):
        return pn.Card(
            pn.Row(pn.Column(self.table, self.error, width=420), self.hist, **_WIDE),
            title="Graph statistics (live)", collapsible=False, css_classes=["stats-card"], **_WIDE,
        )


def _graph_kind(inputs) -> str:
    """The graph statistics were computed for, in words (``knn, k = 10``)."""
    params = {} if inputs is None else inputs.params
    graph = params.get("graph", "epsilon")
    kind = "ε-graph" if graph == "epsilon" else f"{graph}, k = {params.get('n_neighbors')}"
    if params.get("local_sigma") and params.get("metric") == "gaussian":
        kind += f" · σ local (m = {params.get('local_neighbor')})"
    return kind


def graph_vertices(shown):
    """The vertices of a run's graph, for the views that draw the graph itself:
    ``(labels, xy, n)``, the points' in exact mode, the representatives' (their
    clusters and drawing positions) in representatives mode; None in landmark mode,
    which builds no graph."""
    run = shown.run
    if run.graph_of == "points":
        return shown.labels, shown.data.xy, run.n
    if run.graph_of == "representatives":
        return shown.anchor_labels, shown.anchor_xy, int(run.csr.shape[0])
    return None


#: What a graph view says in landmark mode.
NO_GRAPH = ("Landmark mode builds no graph of the points (each point is joined to its "
            "nearest landmarks; see the Clusters tab): nothing to draw here.")


def _presentation(state: ExplorerState):
    """The views stage's result (the run with matched labels), or None."""
    return state.views.result


class ClustersView(pn.viewable.Viewer):
    """Spectral clusters beside k-means on the raw data, with ARI / NMI; the data
    coloured by its ground truth until there is a run of these data."""

    state = param.ClassSelector(class_=ExplorerState)

    show_anchors = param.Boolean(default=True, doc="Draw the run's representatives or "
                                 "landmarks over its clusters.")

    def __init__(self, **params):
        super().__init__(**params)
        self.scores = pn.pane.Markdown("", css_classes=["scores"], **_WIDE)
        self.mode = pn.pane.Markdown("", css_classes=["run-mode"], **_WIDE)
        self.warning = pn.pane.Alert("", alert_type="warning", visible=False, **_WIDE)
        self.note = pn.pane.Markdown("", styles={"color": "#555"}, **_WIDE)
        self.anchors = LabelledCheckbox(self, "show_anchors",
                                        "show the representatives / landmarks")
        self.anchors.widget.visible = False
        self.plot = pn.pane.HoloViews(None, **_PLOT)
        self.body = _body(pn.Column, self.scores, self.mode, self.plot, **_WIDE)
        self._drawing_run = False
        self._drawn = None
        self.badge = StaleBadge(self.state, self.body, when=lambda: self._drawing_run)
        self.state.views.param.watch(self._render, "result")
        self.state.data.param.watch(self._render, "result")
        self.param.watch(self._render, "show_anchors")
        self._render()

    def _render(self, *events) -> None:
        data = self.state.data.result
        shown = _presentation(self.state)
        if shown is not None and data is not None and shown.data is not data:
            shown = None  # a run of other data: these data are shown until the next run
        self._drawing_run = shown is not None
        self.badge.update()
        key = (data, shown, self.show_anchors)
        if key == self._drawn:  # what is drawn is drawn already
            return
        self._drawn = key
        if shown is None:
            self.warning.visible = False
            self.anchors.widget.visible = False
            self.mode.object = ""
            if data is None:
                self.scores.object, self.plot.object, self.note.object = \
                    "*Waiting for data.*", None, ""
                return
            ds = data.dataset
            truth = ds.y if ds.y is not None else np.zeros(ds.n, dtype=np.int64)
            title = "Ground truth" if ds.y is not None else "Data"
            last = self.state.result
            before = ("" if last is None else
                      f" (The last run was on {last.data.describe()}.)")
            self.scores.object = "Press **Run** to cluster these data. Shown: the data" + (
                ", coloured by its ground-truth classes." if ds.y is not None else ".") + before
            xlabel, ylabel = data.axis_labels()
            self.plot.object = plots.labelled_points(data.xy, truth, names=ds.classes,
                                                     title=title, xlabel=xlabel, ylabel=ylabel)
            self.note.object = data.projection_note
            return
        result, xy = shown.run, shown.data.xy
        self.warning.object = "  \n".join(result.warnings)
        self.warning.visible = bool(result.warnings)
        self.note.object = shown.data.projection_note
        xlabel, ylabel = shown.data.axis_labels()
        # The plot first: the browser then has it when the scores appear (tests and
        # users alike read the scores as "the run is shown").
        spectral = plots.labelled_points(xy, shown.labels, xlabel=xlabel, ylabel=ylabel,
                                         title=f"Spectral clustering (k = {result.n_clusters})")
        self.anchors.widget.visible = shown.anchor_xy is not None
        if shown.anchor_xy is not None and self.show_anchors:
            spectral = spectral * plots.anchor_points(
                shown.anchor_xy, labels=shown.anchor_labels, kind=result.anchor_kind,
                xlabel=xlabel, ylabel=ylabel)
        if shown.kmeans_labels is None:
            self.plot.object = spectral
        else:
            kmeans = plots.labelled_points(
                xy, shown.kmeans_labels, xlabel=xlabel, ylabel=ylabel,
                title=f"k-means on the raw data (k = {result.n_clusters})",
            )
            self.plot.object = (spectral + kmeans).opts(shared_axes=True)
        self.mode.object = mode_markdown(result)
        self.scores.object = _scores_markdown(result)

    def __panel__(self):
        return pn.Column(self.badge.pane, self.warning, self.anchors, self.body, self.note,
                         **_WIDE)


def mode_markdown(result) -> str:
    """What a run did, in the library's words: the mode and why (``mode_``,
    ``mode_why_``), the graph and why (``affinity_``, ``affinity_why_``), the edge
    rule, the scaling, and what an approximate mode's markers are."""
    def text(value):
        return html.escape(value, quote=False)

    lines = [f"**Mode**: {result.mode} — {text(result.mode_why)}"]
    if result.affinity:
        rule = result.params.get("edge_rule", "")
        lines.append(f"**Graph**: {result.affinity} ({text(rule)}) — "
                     f"{text(result.affinity_why)}")
    if result.mode == "representatives":
        counts = result.anchor_counts
        lines.append(
            f"**{len(result.anchors):,} representatives** (circles, in their cluster's "
            f"colour; {int(counts.min()):,}–{int(counts.max()):,} points each): the graph, "
            "the eigenvectors and k-means are theirs; every point takes its "
            "representative's label.")
    elif result.mode == "landmarks":
        lines.append(
            f"**{len(result.anchors):,} landmarks** (outlined triangles): no graph of the "
            "points is built; each point is joined to its nearest landmarks (W = Ẑ Ẑᵀ).")
    if result.fit_scale is not None:
        lines.append(f"Fitted on the {result.fit_scale}-scaled features (`scale`), as drawn.")
    return "  \n".join(lines)


def _scores_markdown(result) -> str:
    sc = result.scores["spectral"]
    parts = []
    if "ari" in sc:
        line = f"**Spectral**: ARI **{sc['ari']:.3f}**, NMI **{sc['nmi']:.3f}**"
        km = result.scores.get("kmeans")
        if km is not None:
            line += f" · **k-means (raw data)**: ARI **{km['ari']:.3f}**, NMI **{km['nmi']:.3f}**"
        parts.append(line)
    else:
        parts.append("No ground truth: ARI/NMI need labels.")
    if "normalized_cut" in sc:
        of = (" (of the representatives' graph)" if result.graph_of == "representatives"
              else "")
        cuts = f"Normalised cut {sc['normalized_cut']:.4g}, ratio cut {sc['ratio_cut']:.4g}{of}; "
    else:
        cuts = "No cut scores (no graph of the points in this mode); "
    parts.append(
        f"{cuts}{result.counts()} (grey points: label −1). Ran on **{result.backend}** "
        f"({result.method}), {result.timings['total']:.2f} s."
    )
    return "  \n".join(parts)


class EigenvectorView(pn.viewable.Viewer):
    """Points coloured by eigenvector i; the embedding in eigenvector coordinates."""

    state = param.ClassSelector(class_=ExplorerState)

    def __init__(self, **params):
        super().__init__(**params)
        self.index = pn.widgets.IntSlider(name="eigenvector i", start=1, end=2, value=2,
                                          width=260, css_classes=["eigen-index"])
        self.axis_x = pn.widgets.Select(name="embedding x axis", options=[1], width=150)
        self.axis_y = pn.widgets.Select(name="embedding y axis", options=[1], width=150)
        self.values = pn.pane.HoloViews(None, **_PLOT)
        self.embedding = pn.pane.HoloViews(None, **_PLOT)
        self.caption = pn.pane.Markdown(NO_RUN, **_WIDE)
        self._updating = False
        self.body = _body(pn.Row, self.values, self.embedding, **_WIDE)
        self.badge = StaleBadge(self.state, self.body)
        self.state.views.param.watch(self._new_result, "result")
        self.index.param.watch(self._render_values, "value")
        self.axis_x.param.watch(self._render_embedding, "value")
        self.axis_y.param.watch(self._render_embedding, "value")
        self._new_result()

    def _new_result(self, *events) -> None:
        shown = _presentation(self.state)
        if shown is None:
            self.values.object = self.embedding.object = None
            self.caption.object = NO_RUN
            return
        result = shown.run
        m = result.vectors.shape[1]
        k = result.embedding.shape[1]
        axes = list(range(1, k + 1))
        self._updating = True  # one drawing below, not one per widget change
        try:
            self.index.param.update(end=max(m, 2), value=min(2, m))
            self.axis_x.param.update(options=axes, value=1)
            self.axis_y.param.update(options=axes, value=min(2, k))
        finally:
            self._updating = False
        self._render_values()
        self._render_embedding()

    def _render_values(self, *events) -> None:
        shown = _presentation(self.state)
        if shown is None or self._updating:
            return
        result = shown.run
        i = min(self.index.value, result.vectors.shape[1])
        xlabel, ylabel = shown.data.axis_labels()
        self.values.object = plots.valued_points(
            shown.data.xy, result.vectors[:, i - 1], clabel=f"u{i}", xlabel=xlabel, ylabel=ylabel,
            title=f"Eigenvector u{i} = D^-1/2 v{i}, v{i} of L_sym "
                  f"(λ{i} = {_eig(result.eigenvalues[i - 1])})",
        )
        self.caption.object = (
            f"Left: each point coloured by its entry in u{i} = D^-1/2 v{i}, where v{i} is "
            f"the eigenvector of L_sym = I − D^-1/2 S D^-1/2 for λ{i} (red positive, blue "
            "negative, grey isolated). Right: the rows of the first k eigenvectors scaled "
            "to unit length (the points k-means clusters), in two of their coordinates, "
            "coloured by spectral cluster."
        )

    def _render_embedding(self, *events) -> None:
        shown = _presentation(self.state)
        if shown is None or self._updating:
            return
        emb = shown.run.embedding
        k = emb.shape[1]
        i, j = min(self.axis_x.value, k), min(self.axis_y.value, k)
        keep = np.isfinite(emb).all(axis=1)
        coords = np.column_stack([emb[:, i - 1], emb[:, j - 1]])[keep]
        self.embedding.object = plots.labelled_points(
            coords, shown.labels[keep], title="Spectral embedding (unit rows)",
            xlabel=f"embedding {i}", ylabel=f"embedding {j}", space="embedding",
        )

    def __panel__(self):
        return pn.Column(
            self.badge.pane, pn.Row(self.index, self.axis_x, self.axis_y),
            self.body, self.caption, **_WIDE,
        )


def _eig(value: float) -> str:
    """An eigenvalue for a title: rounding noise around 0 shown as 0."""
    return "0" if abs(value) < 1e-12 else f"{value:.3g}"


class SpectrumView(pn.viewable.Viewer):
    """Eigenvalues of L_sym with the eigengap and the k it suggests."""

    state = param.ClassSelector(class_=ExplorerState)

    def __init__(self, **params):
        super().__init__(**params)
        self.plot = pn.pane.HoloViews(None, **_PLOT)
        self.text = pn.pane.Markdown(NO_RUN, **_WIDE)
        self.body = _body(pn.Column, self.text, self.plot, **_WIDE)
        self.badge = StaleBadge(self.state, self.body)
        self.state.views.param.watch(self._render, "result")
        self._render()

    def _render(self, *events) -> None:
        shown = _presentation(self.state)
        if shown is None:
            self.plot.object = None
            self.text.object = NO_RUN
            return
        result = shown.run
        lam = result.eigenvalues
        self.plot.object = plots.spectrum(lam, k_used=result.n_clusters,
                                          k_suggested=result.k_suggested)
        rule = eigengap_choice(lam).describe()
        self.text.object = (
            f"The {len(lam)} smallest eigenvalues of L_sym = I − D^-1/2 S D^-1/2. Here {rule}: "
            f"the eigengap heuristic suggests **k = {result.k_suggested}** (shaded gap); the "
            f"run used **k = {result.n_clusters}** (dashed line)."
        )

    def __panel__(self):
        return pn.Column(self.badge.pane, self.body, **_WIDE)


class SparsityView(pn.viewable.Viewer):
    """Spy plot of the run's S in the order chosen (as loaded, reordered before any
    clustering, by cluster) with what the order does to the product traffic, and the
    run's nnz histogram. The rows of the points selected in the linked views
    (`linked`) are marked: their nonzeros drawn over the matrix in
    :data:`~explorer.ui.plots.MARKED_COLOR`."""

    state = param.ClassSelector(class_=ExplorerState)
    linked = param.Parameter(default=None, allow_refs=False,
                             doc="The LinkedView whose selection marks rows (none: no "
                                 "marks).")

    def __init__(self, **params):
        super().__init__(**params)
        self.marked = None  # the stream of the marked entries of the spy plot drawn
        self.marked_rows = None  # the graph's rows marked now (indices), or None
        self.marked_note = pn.pane.Markdown("", css_classes=["spy-marked"], **_WIDE)
        self.orders = OrderState(self.state.views)
        self.mode = pn.widgets.RadioButtonGroup.from_param(
            self.orders.param.mode, name="order", button_type="primary",
            button_style="outline", css_classes=["spy-order"])
        self.method = pn.widgets.Select.from_param(
            self.orders.param.method, name="row order (reordered, and within clusters)",
            width=260, css_classes=["spy-method"])
        self.spy = pn.pane.HoloViews(None, sizing_mode="stretch_width", min_height=440)
        self.hist = pn.pane.HoloViews(None, sizing_mode="stretch_width", min_height=300)
        self.text = pn.pane.Markdown(NO_RUN, **_WIDE)
        self.note = pn.pane.Markdown("", css_classes=["spy-note"], styles={"color": "#555"},
                                     **_WIDE)
        self.body = _body(pn.Row, self.spy, self.hist, **_WIDE)
        self.badge = StaleBadge(self.state, self.body)
        self._shown = None  # the run whose histogram and text are drawn
        self._drawn = None  # the orders the spy plot draws
        self._coords = None  # (run, rows, cols): the run's entries, sampled once
        self.state.views.param.watch(self._render, "result")
        self.orders.param.watch(self._render, ["result", "busy", "error"])
        if self.linked is not None:
            self.linked.param.watch(self._mark, "picked")
        _in_background(self.orders)
        self._render()

    def _render(self, *events) -> None:
        shown = _presentation(self.state)
        if shown is None:
            self.spy.object = self.hist.object = None
            self.text.object, self.note.object = NO_RUN, ""
            self._shown = self._drawn = self._coords = self.marked = None
            self._mark()
            return
        result = shown.run
        if graph_vertices(shown) is None:  # landmark mode: no graph of the points
            self.spy.object = self.hist.object = None
            self.text.object, self.note.object = NO_GRAPH, ""
            self._shown = self._drawn = self._coords = self.marked = None
            self._mark()
            return
        if shown is not self._shown:
            self._shown = shown
            s = result.graph_stats
            counts, edges = s.nnz_row_hist
            self.hist.object = plots.nnz_histogram(counts, edges, hypo=s.hypo_max_nnz_row)
            drawn = min(int(result.csr.nnz), SPY_MAX_ENTRIES)
            sampled = (f" The plot shows a uniform sample of {drawn:,} of the nonzeros."
                       if drawn < result.csr.nnz else "")
            self.text.object = (
                f"n = {s.n:,}, nnz = {s.nnz:,} ({s.nnz_row_mean:.1f} per row, max "
                f"{s.nnz_row_max:,}), {s.sparsity:.4f} % zeros. Built by **{result.method}** on "
                f"**{result.backend}**: {result.method_reason}.{sampled}"
            )
        o = self.orders
        orders = o.result if o.result is not None and o.result.shown is shown else None
        if orders is None and self._drawn is not None and self._drawn.shown is not shown:
            self.spy.object, self._drawn, self.marked = None, None, None  # another run's
            self._mark()
        if orders is not None and orders is not self._drawn:
            self._drawn = orders
            order = orders.current
            rows, cols = self._entries(result)
            self.marked = plots.marked_entries()
            self._mark()
            self.spy.object = plots.spy(order.positions(rows), order.positions(cols),
                                        int(result.csr.shape[0]),
                                        title=order.title(), blocks=order.blocks,
                                        marked=self.marked)
        if o.error:
            self.note.object = f"**The order could not be computed**: {o.error}"
        elif o.busy or orders is None or (orders.mode, orders.method) != (o.mode, o.method):
            self.note.object = (f"*Computing the order ({o.mode}, {o.method})…*"
                                if o.mode != "as loaded" else "*Measuring the order…*")
        else:
            self.note.object = _order_note(orders.current)

    def _mark(self, *events) -> None:
        """Mark the rows of the linked selection's points in the spy plot drawn: their
        entries, read from the run's matrix (nothing rebuilt), sent to the marked
        layer alone (the matrix under it is not re-aggregated)."""
        shown = _presentation(self.state)
        if shown is not None and graph_vertices(shown) is None:
            shown = None  # landmark mode: no graph, no rows
        picked = None if self.linked is None else self.linked.picked
        if shown is None or picked is None or picked.shown is not shown:
            rows = None
        elif shown.run.graph_of == "representatives":  # the points' representatives
            rows = np.unique(shown.run.anchor_of[picked.points])
        else:
            rows = picked.points
        self.marked_rows = rows
        if self.marked is not None and self._drawn is not None and self._drawn.shown is shown:
            if rows is None:
                self.marked.send((np.zeros(0, np.int64), np.zeros(0, np.int64)))
            else:
                order = self._drawn.current
                r, c = row_entries(shown.run.csr, rows)
                self.marked.send((order.positions(r), order.positions(c)))
        if rows is None:
            self.marked_note.object = (
                "" if self.linked is None or shown is None else
                "<small>Select points in the **Linked views** tab: their rows are marked "
                "here, their nonzeros in orange.</small>")
            return
        of = ("rows of their representatives" if shown.run.graph_of == "representatives"
              else "rows")
        self.marked_note.object = (
            f"**{len(picked.points):,} points selected** in the Linked views tab: their "
            f"{len(rows):,} {of} marked, their nonzeros in orange.")

    def _entries(self, result):
        """The run's stored entries (a sample above SPY_MAX_ENTRIES), read once a run."""
        if self._coords is None or self._coords[0] is not result:
            self._coords = (result, *_entries(result.csr, SPY_MAX_ENTRIES))
        return self._coords[1:]

    def __panel__(self):
        return pn.Column(self.badge.pane, pn.Row(self.mode, self.method), self.note,
                         self.text, self.marked_note, self.body, **_WIDE)


def _order_note(order) -> str:
    """What the spy plot's order is and what it does to a product's traffic."""
    traffic = (f"A product S·X moves {order.traffic.ratio:.2f}× the bytes of its floor in "
               "this order (the rows of X a tile of 256 rows needs, fetched once per tile)")
    if order.mode == "as loaded":
        return (f"Rows and columns in the data's order. {traffic}. Rows that are neighbours "
                "in the graph need not be near in the file: shuffled data give a cloud.")
    why = f" The rule: {order.reason}." if order.reason else ""
    if order.mode == "reordered":
        return (f"Rows and columns in the **{order.method}** order ({order.how}), computed "
                f"from S alone, before any clustering, in {order.seconds:.2g} s: neighbours "
                f"get nearby numbers, so the entries gather in bands. {traffic}; as loaded "
                f"{order.baseline.ratio:.2f}×.{why}")
    return (f"Rows and columns grouped by the run's clusters (in label order, unclustered "
            f"−1 last), each cluster in the **{order.method}** order ({order.how}): a "
            f"cluster's edges fill its diagonal block (outlined in red), the edges between "
            f"clusters are the specks off the blocks. {traffic}; as loaded "
            f"{order.baseline.ratio:.2f}×.")


def _in_background(stage) -> None:
    """Run `stage`'s jobs as the app runs its state's (:class:`~explorer.ui.app.ExplorerApp`):
    on worker threads, asked for whenever its inputs change, latest wins."""
    stage.executor = _jobs.in_threads

    def schedule() -> None:
        if stage.claim():
            pn.state.execute(stage.request)

    stage.on_change = schedule
    stage.refresh()


class TimingsView(pn.viewable.Viewer):
    """Stage timings of the last run, and what ran where."""

    state = param.ClassSelector(class_=ExplorerState)

    def __init__(self, **params):
        super().__init__(**params)
        self.bars = pn.pane.HoloViews(None, sizing_mode="stretch_width", min_height=260)
        self.table = pn.pane.Markdown(NO_RUN, css_classes=["timings"], **_WIDE)
        self.body = _body(pn.Row, pn.Column(self.table, width=520), self.bars, **_WIDE)
        self.badge = StaleBadge(self.state, self.body)
        self.state.views.param.watch(self._render, "result")
        self._render()

    def _render(self, *events) -> None:
        shown = _presentation(self.state)
        if shown is None:
            self.bars.object = None
            self.table.object = NO_RUN
            return
        r = shown.run
        stages = {k: v for k, v in r.timings.items() if k != "total"}
        self.bars.object = plots.timings_bars(stages)
        lines = ["| stage | seconds |", "| --- | ---: |"]
        lines += [f"| {k} | {v:.3f} |" for k, v in r.timings.items()]
        it = "—" if r.eigen_iterations is None else f"{r.eigen_iterations:,}"
        why = (" (the clustered graph has exactly k connected components, whose indicators "
               "are the eigenvectors: nothing to iterate)" if r.solver == "components" else "")
        residual = (f"{float(np.max(r.eigen_residuals)):.2e}" if len(r.eigen_residuals)
                    else "—")
        lines += [
            "",
            f"**Backend**: {r.backend} — {r.backend_reason}  ",
            f"**Graph builder**: {r.method} — {r.method_reason}  ",
            f"**Eigensolver**: {r.solver}{why}, iterations {it}, largest residual "
            f"‖Av − μv‖ = {residual}",
        ]
        self.table.object = "\n".join(lines)

    def __panel__(self):
        return pn.Column(self.badge.pane, self.body, **_WIDE)


#: The guided tour's headings: fixed sizes, whatever style sheets the page has loaded.
_HEADING = "<h3 style='font-size:1.3rem;font-weight:600;margin:0.3em 0 0.4em 0'>{}</h3>"


#: The tour's steps that draw S in the orders of :mod:`explorer.ui._order`.
ORDER_STEPS = ("blocks", "laplacian")

#: The titles of the blocks step's three pictures (formatted with the row order's name).
_TOUR_TITLES = {"as loaded": "S as loaded: a cloud", "reordered": "reordered ({}): bands",
                "by cluster": "by cluster: diagonal blocks"}


class TeachingView(pn.viewable.Viewer):
    """The guided pipeline, one step at a time."""

    state = param.ClassSelector(class_=ExplorerState)

    def __init__(self, **params):
        super().__init__(**params)
        self.previous = pn.widgets.Button(name="◀ Previous", width=120)
        self.next = pn.widgets.Button(name="Next ▶", width=120, button_type="primary")
        self.where = pn.pane.Markdown("", margin=(8, 10))
        self.heading = pn.pane.HTML("", css_classes=["teaching-heading"], **_WIDE)
        self.text = pn.pane.Markdown("", css_classes=["teaching-text"], **_WIDE)
        self.plot = pn.pane.HoloViews(None, **_PLOT)
        self.body = _body(pn.Column, self.plot, **_WIDE)
        self.extra = pn.pane.Markdown("", styles={"color": "#555"}, **_WIDE)
        self._drawn = None
        s = self.state
        t = s.teaching
        # S in three orders (the blocks step; the Laplacian step draws the last),
        # computed only while one of those steps is shown.
        self.orders = OrderState(s.views, mode="by cluster", active=False)
        self.previous.on_click(lambda e: t.previous())
        self.next.on_click(lambda e: t.next())
        t.param.watch(self._activate, "step")  # before the drawing: it shows the job
        t.param.watch(self._render, "step")
        s.tour.param.watch(self._render, ["result", "busy"])
        s.run_state.param.watch(self._render, "stale")
        s.views.param.watch(self._render, "result")
        s.data.param.watch(self._render, "result")
        self.orders.param.watch(self._render, ["result", "busy", "error"])
        _in_background(self.orders)
        self._activate()
        self._render()

    def _activate(self, *events) -> None:
        self.orders.active = self.state.teaching.current.key in ORDER_STEPS

    def _render(self, *events) -> None:
        s = self.state
        t, data, shown = s.teaching, s.data.result, _presentation(s)
        step = t.current
        o = self.orders
        key = (t.step, data, shown, s.tour.result, s.tour.busy, s.run_state.stale, o.result,
               o.busy, o.error)
        if key == self._drawn:  # what is drawn is drawn already
            return
        self._drawn = key
        self.where.object = f"Step {t.step + 1} of {len(STEPS)}"
        self.previous.disabled, self.next.disabled = t.at_start, t.at_end
        self.heading.object = _HEADING.format(html.escape(step.title))
        self.text.object = step.text
        self.extra.object = ""
        _grey(self.body, shown is not None and step.needs_run and s.run_state.stale)
        if data is None:
            self.plot.object = None
            self.extra.object = "Waiting for data."
            return
        if step.needs_run and shown is None:
            self.plot.object = None
            self.extra.object = "Waiting for a run: press **Run** (sidebar) to compute this step."
            return
        if step.key == "data":
            ds = data.dataset
            labels = ds.y if ds.y is not None else np.zeros(ds.n, np.int64)
            xlabel, ylabel = data.axis_labels()
            self.plot.object = plots.labelled_points(data.xy, labels, names=ds.classes,
                                                     title="The data", xlabel=xlabel,
                                                     ylabel=ylabel)
        elif step.key == "graph":
            tour = s.tour.result
            if tour is None or tour.csr is None:
                self.plot.object = None
                self.extra.object = ("Building the graph…" if s.tour.busy or tour is None
                                     else tour.note)
                return
            # Each edge is stored twice; 20 entries per drawn edge is ample to sample from.
            rows, cols = _entries(tour.csr, 20 * plots.MAX_EDGES_DRAWN)
            xlabel, ylabel = tour.data.axis_labels()
            overlay, drawn = plots.graph_edges(tour.data.xy, rows, cols, xlabel=xlabel,
                                               ylabel=ylabel)
            total = int(tour.csr.nnz) // 2
            self.plot.object = overlay
            sample = f", {drawn:,} of them drawn (a random sample)" if drawn < total else ""
            stale = "" if not s.tour.stale else " (updating…)"
            self.extra.object = f"{total:,} edges{sample}. {tour.note}{stale}"
        else:
            result, xy = shown.run, shown.data.xy
            xlabel, ylabel = shown.data.axis_labels()
            if s.run_state.stale:
                self.extra.object = stale_text(s.run_state)
            if step.key in ORDER_STEPS:
                orders = o.result if o.result is not None and o.result.shown is shown else None
                spectrum = plots.spectrum(result.eigenvalues, k_suggested=result.k_suggested)
                if graph_vertices(shown) is None:  # landmark mode: no graph of the points
                    self.plot.object = spectrum
                    self.extra.object = NO_GRAPH
                    return
                n = int(result.csr.shape[0])  # the representatives' graph in that mode
                if orders is None:  # the orders are being computed (or failed)
                    self.plot.object = spectrum if step.key == "laplacian" else None
                    self.extra.object = (f"The orders could not be computed: {o.error}"
                                         if o.error else "Ordering the rows of S…")
                    return
                rows, cols = _entries(result.csr, SPY_MAX_ENTRIES)
                by_cluster = orders["by cluster"]
                if step.key == "laplacian":
                    self.plot.object = plots.spy(
                        by_cluster.positions(rows), by_cluster.positions(cols), n,
                        title="S, ordered by cluster", blocks=by_cluster.blocks) + spectrum
                    return
                spies = [plots.spy(orders[m].positions(rows), orders[m].positions(cols),
                                   n, title=_TOUR_TITLES[m].format(orders[m].method),
                                   blocks=orders[m].blocks)
                         for m in MODES]
                self.plot.object = (spies[0] + spies[1] + spies[2]).cols(3).opts(
                    shared_axes=False)
                ratios = ", ".join(f"{m} {orders[m].traffic.ratio:.2f}×" for m in MODES)
                self.extra.object = " ".join(filter(None, [
                    f"Product traffic over its floor (the bytes one eigensolver product S·X "
                    f"moves): {ratios}. Reordered by {orders['reordered'].method} "
                    f"({orders['reordered'].how}).",
                    self.extra.object]))
            elif step.key == "eigenvectors":
                i = min(2, result.vectors.shape[1])
                self.plot.object = plots.valued_points(
                    xy, result.vectors[:, i - 1], clabel=f"u{i}", xlabel=xlabel, ylabel=ylabel,
                    title=f"Eigenvector u{i} = D^-1/2 v{i} of L_sym "
                          f"(λ{i} = {_eig(result.eigenvalues[i - 1])})",
                )
            else:
                emb = result.embedding
                right = None
                if emb.shape[1] >= 2:
                    keep = np.isfinite(emb).all(axis=1)
                    right = plots.labelled_points(emb[keep][:, :2], shown.labels[keep],
                                                  title="k-means in the embedding",
                                                  xlabel="embedding 1", ylabel="embedding 2",
                                                  space="embedding")
                left = plots.labelled_points(xy, shown.labels, title="Spectral clusters",
                                             xlabel=xlabel, ylabel=ylabel)
                self.plot.object = left if right is None else left + right

    def __panel__(self):
        return pn.Column(
            pn.Row(self.previous, self.next, self.where), self.heading, self.text, self.body,
            self.extra, **_WIDE,
        )


class _FileDownload(pn.widgets.FileDownload):
    """Panel's FileDownload with its colour: Panel 1.9 renames ``button_type`` to
    ``color`` and then drops ``color`` on the way to the browser, so every download
    button was drawn in the default grey and looked disabled beside the blue Run."""

    _rename = {**pn.widgets.FileDownload._rename, "color": "button_type"}


#: The download buttons' label: the button's own text colour, not a link's.
DOWNLOAD_CSS = ".bk-btn a { color: inherit; text-decoration: none; }"


def _download(callback, filename: str, label: str, **params):
    return _FileDownload(callback=callback, filename=filename, label=label,
                         button_type="primary", embed=False, stylesheets=[DOWNLOAD_CSS],
                         **params)


class ExportView(pn.viewable.Viewer):
    """Download the last run: labels (CSV), the graph (NPZ), the result (JSON); and the
    views as figures for slides (PNG, SVG) at a chosen size, the guided tour's steps as a
    numbered set.

    Parameters
    ----------
    figures : dict, optional
        View name -> a function returning what the view draws now (a HoloViews object,
        or None); the app passes its views'.
    tour : async function, optional
        Returns the tour's steps as (title, figure) pairs, in order.
    """

    state = param.ClassSelector(class_=ExplorerState)
    # allow_refs=False: functions, not references for Panel to resolve to their values.
    figures = param.Dict(default={}, allow_refs=False,
                         doc="View name -> function returning its figure.")
    tour = param.Callable(default=None, allow_refs=False,
                          doc="async () -> [(step title, figure)].")

    def __init__(self, **params):
        super().__init__(**params)
        self.labels = _download(self._labels, "labels.csv", "Labels (CSV)", width=220)
        self.graph = _download(self._graph, "graph.npz", "Graph (NPZ)", width=220)
        self.json = _download(self._json, "result.json", "Result (JSON)", width=220)
        self.text = pn.pane.Markdown("", **_WIDE)
        # Figures for slides.
        self.view = pn.widgets.Select(name="View", options=list(self.figures), width=200,
                                      css_classes=["figure-view"])
        self.fig_width = pn.widgets.IntInput(name="width (px)", value=1280, step=10,
                                             start=_export.FIGURE_MIN_PX,
                                             end=_export.FIGURE_MAX_PX, width=110)
        self.fig_height = pn.widgets.IntInput(name="height (px)", value=720, step=10,
                                              start=_export.FIGURE_MIN_PX,
                                              end=_export.FIGURE_MAX_PX, width=110)
        self.png = _download(self._png, "figure.png", "Figure (PNG)", width=170)
        self.svg = _download(self._svg, "figure.svg", "Figure (SVG)", width=170)
        self.tour_zip = _download(self._tour_zip, "tour.zip", "Tour steps (ZIP)", width=190)
        self.figure_note = pn.pane.Markdown(
            "<small>PNG at twice the pixels (sharp on a projector), SVG to scale; drawn "
            "in headless Chromium as the page draws them (a few seconds each). The tour's "
            "steps come numbered, PNG and SVG each.</small>", **_WIDE)
        self.figure_error = pn.pane.Alert("", alert_type="danger", visible=False, **_WIDE)
        self.badge = StaleBadge(self.state)
        self.state.run_state.param.watch(self._enable, "result")
        self._enable()

    def _enable(self, *events) -> None:
        result = self.state.result
        for w in (self.labels, self.graph, self.json):
            w.disabled = result is None
        self.graph.disabled = result is None or result.csr is None  # landmark mode
        if result is None:
            self.text.object = ("Waiting for a run: press **Run** first; the downloads hold "
                                "the last run.")
        else:
            stem = _safe_stem(result.dataset)
            self.labels.filename = f"{stem}-labels.csv"
            self.graph.filename = f"{stem}-graph.npz"
            self.json.filename = f"{stem}-result.json"
            self.text.object = (
                "**Labels**: one row per point (`index,spectral,kmeans,truth`; −1 = isolated). "
                "**Graph**: the similarity matrix S, `scipy.sparse.load_npz`. **Result**: "
                "parameters, statistics, timings, eigenvalues and scores."
            )

    def _labels(self):
        return _as_file(_export.labels_csv(self.state.result))

    def _stem(self) -> str:
        result = self.state.result
        data = self.state.data.result
        return _safe_stem(result.dataset if result is not None
                          else data.dataset.name if data is not None else "explorer")

    async def _figure(self, fmt: str):
        """The chosen view as a `fmt` file (None, with a message, when it draws nothing
        or the drawing fails)."""
        import asyncio

        self.figure_error.visible = False
        name = self.view.value
        obj = self.figures[name]() if name in self.figures else None
        if obj is None:
            self._figure_failed(f"The {name} view has nothing to draw yet.")
            return None
        try:
            files = await asyncio.to_thread(
                _export.figure_files, obj, width=self.fig_width.value,
                height=self.fig_height.value, formats=(fmt,))
        except (ValueError, RuntimeError) as exc:
            self._figure_failed(f"The figure could not be drawn: {exc}")
            return None
        widget = self.png if fmt == "png" else self.svg
        widget.filename = f"{self._stem()}-{_export._slug(name)}.{fmt}"
        return _as_file(files[fmt])

    async def _png(self):
        return await self._figure("png")

    async def _svg(self):
        return await self._figure("svg")

    async def _tour_zip(self):
        import asyncio

        self.figure_error.visible = False
        if self.tour is None:
            self._figure_failed("No tour to export.")
            return None
        steps = await self.tour()
        try:
            content = await asyncio.to_thread(
                _export.figure_zip, steps, width=self.fig_width.value,
                height=self.fig_height.value)
        except (ValueError, RuntimeError) as exc:
            self._figure_failed(f"The tour could not be drawn: {exc}")
            return None
        self.tour_zip.filename = f"{self._stem()}-tour.zip"
        return _as_file(content)

    def _figure_failed(self, text: str) -> None:
        self.figure_error.object = text
        self.figure_error.visible = True

    def _graph(self):
        return _as_file(_export.graph_npz(self.state.result))

    def _json(self):
        return _as_file(_export.result_json(self.state.result))

    def __panel__(self):
        return pn.Column(
            self.badge.pane, self.text, pn.Row(self.labels, self.graph, self.json),
            pn.pane.Markdown("#### Figures for slides", margin=(15, 10, 0, 10)),
            pn.Row(self.view, self.fig_width, self.fig_height),
            pn.Row(self.png, self.svg, self.tour_zip), self.figure_note, self.figure_error,
            **_WIDE)


#: Nonzeros drawn at most in a spy plot: beyond, a uniform sample (the aggregated
#: picture is the same, and the COO coordinates of 10⁸ nonzeros would take gigabytes).
SPY_MAX_ENTRIES = 20_000_000


def _entries(csr, limit: int, seed: int = 0):
    """Row and column of the stored entries of `csr`, a seeded uniform sample of
    `limit` of them when there are more (read from indptr/indices, no COO copy)."""
    nnz = int(csr.nnz)
    if nnz <= limit:
        rows = np.repeat(np.arange(csr.shape[0], dtype=np.int64), np.diff(csr.indptr))
        return rows, np.asarray(csr.indices)
    pick = np.sort(np.random.default_rng(seed).choice(nnz, limit, replace=False))
    rows = np.searchsorted(csr.indptr, pick, side="right") - 1
    return rows, np.asarray(csr.indices)[pick]


#: Entries of the selected rows marked at most in the spy plot: beyond, every s-th
#: of them (the marked layer shows where they are, one colour, at pixel resolution;
#: the entries of 10⁶ selected rows of 30 nonzeros each are read in about 0.2 s).
MARKED_MAX_ENTRIES = 2_000_000


def row_entries(csr, rows, limit: int = MARKED_MAX_ENTRIES):
    """Row and column of the stored entries of `csr` in the given `rows` (read from
    indptr/indices: no copy of the matrix), evenly thinned to `limit` of them when
    there are more (in O(limit): a selection changes often, a sample without
    replacement of 10⁷ entries took seconds)."""
    indptr = np.asarray(csr.indptr)
    rows = np.asarray(rows, dtype=np.int64)
    starts = indptr[rows].astype(np.int64)
    counts = indptr[rows + 1].astype(np.int64) - starts
    total = int(counts.sum())
    if total <= limit:
        which = np.repeat(np.arange(len(rows)), counts)
        offset = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(counts) - counts,
                                                              counts)
    else:
        pick = np.arange(limit, dtype=np.int64) * total // limit
        ends = np.cumsum(counts)
        which = np.searchsorted(ends, pick, side="right")
        offset = pick - (ends[which] - counts[which])
    return rows[which], np.asarray(csr.indices)[starts[which] + offset].astype(np.int64)


def _as_file(content: bytes):
    import io

    return io.BytesIO(content)


def _safe_stem(name: str) -> str:
    stem = "".join(c if c.isalnum() or c in "-_" else "-" for c in str(name).rsplit(".", 1)[0])
    return stem.strip("-") or "run"


@dataclass(frozen=True, eq=False)
class PointSelection:
    """The points selected in the linked views, with the run they are points of.

    Attributes
    ----------
    shown : object
        The views stage's result (a run with its data) whose points these are.
    points : ndarray of int64
        Their indices, ascending.
    """

    shown: object
    points: np.ndarray


class LinkedView(pn.viewable.Viewer):
    """The run's views linked: a box or lasso drawn in one (the data by spectral
    cluster, the embedding, an eigenvector, k-means on the raw data) selects the same
    points in all of them (HoloViews' ``link_selections``; datashaded views included).
    `picked` publishes the selection to the other tabs (the Sparsity tab marks its
    points' rows)."""

    state = param.ClassSelector(class_=ExplorerState)
    picked = param.Parameter(default=None, doc="The selection (a PointSelection), or "
                             "None when nothing is selected; a new object each change.")

    def __init__(self, **params):
        super().__init__(**params)
        self.selection = hv.link_selections.instance(unselected_alpha=plots.UNSELECTED_ALPHA)
        self.plot = pn.pane.HoloViews(None, sizing_mode="stretch_width", min_height=700,
                                     css_classes=["linked-plot"])
        self.count = pn.pane.Markdown(NO_RUN, css_classes=["linked-count"], **_WIDE)
        self.clear = pn.widgets.Button(name="Clear the selection", width=180,
                                       css_classes=["linked-clear"], disabled=True)
        self.clear.on_click(lambda event: setattr(self.selection, "selection_expr", None))
        self.body = _body(pn.Column, self.plot, **_WIDE)
        self.badge = StaleBadge(self.state, self.body)
        self._frame = None
        self._shown = None  # the presentation the frame holds the points of
        self.state.views.param.watch(self._render, "result")
        self.selection.param.watch(self._count, "selection_expr")
        self._render()

    def _render(self, *events) -> None:
        shown = _presentation(self.state)
        self.selection.selection_expr = None
        if shown is None:
            self.plot.object, self._frame, self._shown = None, None, None
            self._count()
            return
        result = shown.run
        emb, vectors = result.embedding, result.vectors
        j = min(2, emb.shape[1])
        i = min(2, vectors.shape[1])
        xlabel, ylabel = shown.data.axis_labels()
        layout, _ = plots.linked_views(
            shown.data.xy, np.column_stack([emb[:, 0], emb[:, j - 1]]), vectors[:, i - 1],
            shown.labels, shown.kmeans_labels, xlabel=xlabel, ylabel=ylabel,
            emb_labels=("embedding 1", f"embedding {j}"), clabel=f"u{i}",
            value_title=f"Eigenvector u{i} (λ{i} = {_eig(result.eigenvalues[i - 1])})",
            selection=self.selection)
        self._frame = (shown.data.xy, emb[:, 0], emb[:, j - 1])
        self._shown = shown
        self.plot.object = layout
        self._count()

    def selected(self) -> np.ndarray | None:
        """Which points the selection holds (a bool per point), or None when nothing is
        selected or there is no run."""
        expr = self.selection.selection_expr
        if expr is None or self._frame is None:
            return None
        xy, ex, ey = self._frame
        table = {"x": xy[:, 0], "y": xy[:, 1], "emb_x": ex, "emb_y": ey}
        return np.asarray(expr.apply(hv.Dataset(pd.DataFrame(table)), expanded=True,
                                     keep_index=False), dtype=bool)

    def _count(self, *events) -> None:
        if self._frame is None:
            self.count.object, self.clear.disabled = NO_RUN, True
            if self.picked is not None:
                self.picked = None
            return
        chosen = self.selected()
        points = None if chosen is None else np.flatnonzero(chosen)
        old = self.picked
        # link_selections may set its expression several times for one change (through
        # None when an expression replaces another): the other tabs hear of changes only.
        if points is None:
            if old is not None:
                self.picked = None
        elif old is None or old.shown is not self._shown or not np.array_equal(old.points,
                                                                               points):
            self.picked = PointSelection(self._shown, points)
        n = len(self._frame[0])
        self.clear.disabled = chosen is None
        self.count.object = (
            f"Draw a box (or a lasso) in any view: the same points are picked out in all "
            f"of them ({n:,} points; the embedding leaves out points without a cluster)."
            if chosen is None else
            f"**{int(chosen.sum()):,} of {n:,} points selected**, shown in every view "
            "(the others dimmed). Shift adds to the selection.")

    def __panel__(self):
        return pn.Column(self.badge.pane, pn.Row(self.count, self.clear), self.body, **_WIDE)


NO_PIN = ("No run pinned. Press **Pin this run (A)** (sidebar, step 3) after a run, change "
          "σ, the threshold, the graph kind or the mode, and press **Run**: this tab sets "
          "the two runs side by side.")


class CompareView(pn.viewable.Viewer):
    """The pinned run (A) beside the last run (B): the library's comparison
    (:meth:`ExplorerState.compare`), their clusters in matched colours, the points that
    changed cluster, both spectra on one axis, both nonzeros-per-row histograms on one
    axis (each run's graph statistics, as its Sparsity tab draws them)."""

    state = param.ClassSelector(class_=ExplorerState)

    def __init__(self, **params):
        super().__init__(**params)
        self.text = pn.pane.Markdown(NO_PIN, css_classes=["compare-text"], **_WIDE)
        self.message = pn.pane.Alert("", alert_type="info", visible=False,
                                     css_classes=["compare-message"], **_WIDE)
        self.plot = pn.pane.HoloViews(None, **_PLOT)
        self.spectra = pn.pane.HoloViews(None, sizing_mode="stretch_width", min_height=300)
        self.histograms = pn.pane.HoloViews(None, sizing_mode="stretch_width", min_height=300)
        self.histograms_note = pn.pane.Markdown("", css_classes=["compare-hist-note"],
                                                styles={"color": "#555"}, **_WIDE)
        self.comparison = None
        self.state.param.watch(self._render, "pinned")
        self.state.views.param.watch(self._render, "result")
        self._render()

    def _render(self, *events) -> None:
        a, shown = self.state.pinned, _presentation(self.state)
        self.comparison = None
        if a is None or shown is None or shown.run is a:
            self._clear()
            self.message.visible = False
            self.text.object = NO_PIN if a is None else (
                f"**Run A pinned** ({a.n:,} points, k = {a.n_clusters}). Change a "
                "parameter and press **Run**: that run (B) appears here beside A.  \n"
                + mode_markdown(a))
            return
        try:
            c = self.state.compare()
        except ValueError as exc:
            self._clear()
            self.text.object = ""
            self.message.param.update(object=str(exc), visible=True)
            return
        self.message.visible = False
        self.comparison, b = c, shown.run
        rows = "\n".join(f"| {html.escape(label)} | {html.escape(text)} |"
                         for label, text in c.lines())
        self.text.object = ("| run A (pinned) vs run B (last) | |\n| --- | --- |\n" + rows)
        xy = shown.data.xy
        xlabel, ylabel = shown.data.axis_labels()
        self.plot.object = (
            plots.labelled_points(xy, c.labels_a, xlabel=xlabel, ylabel=ylabel,
                                  title=f"A (pinned): k = {c.n_clusters[0]}")
            + plots.labelled_points(xy, c.labels_b, xlabel=xlabel, ylabel=ylabel,
                                    title=f"B (last run): k = {c.n_clusters[1]}, "
                                          f"ARI vs A {c.ari:.3f}")
            + plots.changed_points(xy, c.changed, xlabel=xlabel, ylabel=ylabel,
                                   title=f"{c.n_changed:,} points changed cluster")
        ).opts(shared_axes=True)
        self.spectra.object = plots.spectra({"A": a.eigenvalues, "B": b.eigenvalues})
        self._histograms(a, b)

    def _clear(self) -> None:
        self.plot.object = self.spectra.object = self.histograms.object = None
        self.histograms_note.object = ""

    def _histograms(self, a, b) -> None:
        """Both runs' nonzeros per row, from the statistics each run kept of its graph
        (no graph is built or read again)."""
        hists = {name: None if run.graph_stats is None else run.graph_stats.nnz_row_hist
                 for name, run in (("A", a), ("B", b))}
        notes = []
        for name, run in (("A", a), ("B", b)):
            if run.graph_stats is None:
                notes.append(f"run {name} built no graph of the points (landmark mode): "
                             "no histogram")
            elif run.graph_of == "representatives":
                notes.append(f"run {name}'s graph is that of its "
                             f"{run.graph_stats.n:,} representatives")
            else:
                s = run.graph_stats
                notes.append(f"run {name}: {s.nnz_row_mean:.1f} nonzeros per row on "
                             f"average, max {s.nnz_row_max:,}, {s.n_isolated:,} isolated")
        self.histograms.object = (None if all(h is None for h in hists.values())
                                  else plots.nnz_histograms(hists))
        self.histograms_note.object = "; ".join(notes) + "."

    def __panel__(self):
        return pn.Column(self.message, self.text, self.plot,
                         pn.Row(self.spectra, self.histograms, **_WIDE),
                         self.histograms_note, **_WIDE)
