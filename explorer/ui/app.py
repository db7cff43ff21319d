"""The explorer app: the sidebar and views on one state, and the jobs that feed it.

``ExplorerApp()`` displays inline in a notebook (after ``pn.extension()``);
``ExplorerApp().template()`` is the full page that ``panel serve app.py`` serves.
"""

from __future__ import annotations

import asyncio

import holoviews as hv
import panel as pn
import param

from .controls import DataControls, GraphControls, RunControls
from .offline import use_local_resources
from .state import STEPS, ExplorerState
from .views import (
    ClustersView,
    CompareView,
    EigenvectorView,
    ExportView,
    LinkedView,
    PipelineStatus,
    SparsityView,
    SpectrumView,
    StatsCard,
    TeachingView,
    TimingsView,
)

ACCENT = "#3b6ea8"


class ExplorerApp(pn.viewable.Viewer):
    """Spectral Explorer: tune the graph with live statistics, run, look at the results.

    Parameters
    ----------
    state : ExplorerState, optional
        The session's state (a new one by default). The default data set is loaded
        synchronously when the state has none, so the first page shows data.

    Notes
    -----
    Concurrency. Every stage of the state (data, statistics, run, views, tour) runs
    its jobs off the event loop: loads, statistics and the rest on worker threads
    (:data:`explorer.ui._jobs.EXECUTOR`, shared by the sessions of a server), runs in
    worker processes at a lower CPU priority (:func:`explorer.ui._jobs.run_in_process`).
    Each automatic stage is "latest wins" (:meth:`explorer.ui._stage.Stage.request`):
    a change of its inputs asks for a job; requests made while one runs (a slider
    being dragged) collapse into one more job with the latest inputs, and a result
    is published only for the inputs of the moment. The run computes when Run is
    clicked; the button is disabled until it finishes, and parameter changes made
    meanwhile mark its result stale when it arrives.
    """

    state = param.ClassSelector(class_=ExplorerState)

    def __init__(self, **params):
        params.setdefault("state", ExplorerState())
        super().__init__(**params)
        s = self.state
        if s.dataset is None:
            s.load()
        if s.dataset is not None and s.graph.stats is None:
            s.refresh_stats()
        for stage in s.stages:
            if stage.automatic:
                stage.on_change = lambda stage=stage: self._schedule(stage)

        self.data_controls = DataControls(state=s)
        self.graph_controls = GraphControls(state=s)
        self.run_controls = RunControls(state=s)
        self.status = PipelineStatus(state=s)
        self.stats = StatsCard(state=s)
        self.clusters = ClustersView(state=s)
        self.eigenvectors = EigenvectorView(state=s)
        self.spectrum = SpectrumView(state=s)
        self.linked = LinkedView(state=s)
        self.sparsity = SparsityView(state=s, linked=self.linked)
        self.timings = TimingsView(state=s)
        self.teaching = TeachingView(state=s)
        self.comparison = CompareView(state=s)
        self.pin_button = pn.widgets.Button(name="Pin this run (A)", button_type="default",
                                            css_classes=["pin-run"], disabled=s.result is None,
                                            sizing_mode="stretch_width")
        self.pin_button.on_click(self._pin)
        s.run_state.param.watch(self._pinnable, "result")
        self.export = ExportView(state=s, figures=self._figures(), tour=self.tour_figures)
        self.run_controls.button.on_click(self._run)
        # The run computes on Run only; its input changes tell the sidebar, which says
        # when a change made during a run waits for the next one.
        s.run_state.on_change = self.run_controls.inputs_changed

        self.tabs = pn.Tabs(
            ("Clusters", self.clusters),
            ("Linked views", self.linked),
            ("Eigenvectors", self.eigenvectors),
            ("Spectrum", self.spectrum),
            ("Sparsity", self.sparsity),
            ("Timings", self.timings),
            ("Compare A/B", self.comparison),
            ("Guided tour", self.teaching),
            ("Export", self.export),
            dynamic=True, sizing_mode="stretch_width",
        )

    # -- jobs ------------------------------------------------------------------------
    def _schedule(self, stage) -> None:
        """An input of `stage` changed: ask for its job (busy from now on)."""
        if stage.claim():
            pn.state.execute(stage.request)

    async def _run(self, event=None) -> None:
        """The Run button: run the current inputs (refused, with a message, while a
        run is in flight or before there is data)."""
        try:
            await self.state.run_state.request()
        except (ValueError, RuntimeError) as exc:
            self.state.run_state.error = str(exc)

    def _pinnable(self, *events) -> None:
        self.pin_button.disabled = self.state.result is None

    def _pin(self, event=None) -> None:
        """The pin button: pin the last run and show the Compare tab."""
        try:
            self.pin()
        except ValueError as exc:
            self.state.run_state.error = str(exc)

    def pin(self):
        """:meth:`ExplorerState.pin` (the last run becomes run A; its return value and
        error), then the Compare A/B tab is shown, where every later run is set beside it."""
        run = self.state.pin()
        self.tabs.active = self._tab("Compare A/B")
        return run

    def compare(self):
        """The pinned run (A) and the last run (B), compared by the library.

        Returns
        -------
        explorer.metrics.RunComparison
            ARI between them (and against the truth), the points that changed cluster
            (``changed``), the parameters and plan lines that differ (``lines()`` for
            a printout); the Compare A/B tab (``app.comparison``) draws it.

        Raises
        ------
        ValueError
            With nothing pinned, when the last run is the pinned one, or for runs of
            different data.
        """
        comparison = self.state.compare()
        self.tabs.active = self._tab("Compare A/B")
        return comparison

    def _tab(self, name: str) -> int:
        return list(self.tabs._names).index(name)

    def _figures(self) -> dict:
        """What each view draws now, by name, for the Export tab's figures."""

        def joined(*panes):
            objs = [p.object for p in panes if p.object is not None]
            return None if not objs else objs[0] if len(objs) == 1 else hv.Layout(objs)

        return {
            "Clusters": lambda: self.clusters.plot.object,
            "Eigenvectors": lambda: joined(self.eigenvectors.values,
                                           self.eigenvectors.embedding),
            "Spectrum": lambda: self.spectrum.plot.object,
            "Sparsity": lambda: joined(self.sparsity.spy, self.sparsity.hist),
            "Timings": lambda: self.timings.bars.object,
            "Linked views": lambda: self.linked.plot.object,
            "Compare A/B": lambda: joined(self.comparison.plot, self.comparison.spectra,
                                          self.comparison.histograms),
            "Guided tour (this step)": lambda: self.teaching.plot.object,
        }

    async def tour_figures(self, timeout_s: float = 120.0) -> list:
        """The guided tour's steps as (title, figure) pairs, in order: each step is
        shown in turn, its jobs (the tour's graph, the orders of S) awaited, its
        figure taken; the step shown before comes back at the end. A step with nothing
        to draw (no run yet) gives None."""
        t, out = self.state.teaching, []
        start = t.step
        try:
            for i, step in enumerate(STEPS):
                t.step = i
                deadline = asyncio.get_running_loop().time() + timeout_s
                await asyncio.sleep(0)
                while (self.teaching.orders.busy or any(st.busy for st in self.state.stages)) \
                        and asyncio.get_running_loop().time() < deadline:
                    await asyncio.sleep(0.05)
                out.append((step.title.split("·", 1)[-1].strip(), self.teaching.plot.object))
        finally:
            t.step = start
        return out

    async def idle(self) -> None:
        """Wait until no stage of this app has work asked for or in flight.

        For code that drives the state in a notebook: parameter changes start jobs in
        the background (a change marks its stage busy at once, before its job
        starts), and ``await app.idle()`` waits for their results, and for the
        results of the stages they feed.
        """
        stages = self.state.stages
        while any(st.busy or (st.automatic and st.wanted) for st in stages):
            await asyncio.sleep(0.02)

    # -- layouts -----------------------------------------------------------------------
    def sidebar(self) -> list:
        """The sidebar's sections (data, graph, run)."""
        return [
            pn.pane.Markdown("### 1 · Data", margin=(0, 10)),
            self.data_controls,
            pn.layout.Divider(),
            pn.pane.Markdown("### 2 · Similarity graph", margin=(0, 10)),
            self.graph_controls,
            pn.layout.Divider(),
            pn.pane.Markdown("### 3 · Clustering", margin=(0, 10)),
            self.run_controls,
            self.pin_button,
        ]

    def main(self) -> list:
        """The main area: the pipeline's status (stage in progress, stale results), the
        live statistics, the result tabs."""
        return [self.status, self.stats, self.tabs]

    def template(self) -> pn.template.BootstrapTemplate:
        """The full page (what ``panel serve app.py`` serves).

        Bootstrap rather than the Fast templates: the Fast design fetches its font from
        Google Fonts, which a machine without internet access (a lab, a GPU server)
        answers with errors; every resource of this page comes from the Panel server (in
        a served session the document gets its local stylesheet address before the page
        is built into it: :func:`explorer.ui.offline.use_local_resources`).
        """
        use_local_resources()
        return pn.template.BootstrapTemplate(
            title="Spectral Explorer",
            sidebar=self.sidebar(),
            main=self.main(),
            header_background=ACCENT,
            sidebar_width=340,
        )

    def __panel__(self):
        return pn.Row(
            pn.Column(*self.sidebar(), width=340),
            pn.Column(*self.main(), sizing_mode="stretch_width"),
            sizing_mode="stretch_width",
        )
