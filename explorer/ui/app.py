"""The explorer app: the sidebar and views on one state, and the jobs that feed it.

``ExplorerApp()`` displays inline in a notebook (after ``pn.extension()``);
``ExplorerApp().template()`` is the full page that ``panel serve app.py`` serves.
"""

from __future__ import annotations

import asyncio
from concurrent.futures.process import BrokenProcessPool

import panel as pn
import param

from ._errors import describe_error, log
from ._graph import STATS_PARAMS
from ._jobs import LatestOnly, publishing, run_in_process
from ._run import RunOutcome, execute
from .controls import DataControls, GraphControls, RunControls
from .state import ExplorerState
from .views import (
    ClustersView,
    EigenvectorView,
    ExportView,
    SparsityView,
    SpectrumView,
    StatsCard,
    TeachingView,
    TimingsView,
)

ACCENT = "#3b6ea8"

#: Data settings whose change reloads the data.
_DATA_PARAMS = ["source", "dataset", "n_samples", "noise", "random_state", "uploads",
                "label_choice"]
#: Graph settings whose change refreshes the live statistics.
_STATS_PARAMS = list(STATS_PARAMS)


class ExplorerApp(pn.viewable.Viewer):
    """Spectral Explorer: tune the graph with live statistics, run, look at the results.

    Parameters
    ----------
    state : ExplorerState, optional
        The session's state (a new one by default). The default data set is loaded
        synchronously when the state has none, so the first page shows data.

    Notes
    -----
    Concurrency. Loading and statistics execute on worker threads
    (:data:`explorer.ui._jobs.EXECUTOR`, shared by the sessions of a server), runs in
    worker processes at a lower CPU priority (:func:`explorer.ui._jobs.run_in_process`),
    never on the event loop. Loads and statistics are "latest wins": at most one of
    each kind is in flight per session, and requests made meanwhile (a slider being
    dragged) collapse into one more job with the latest parameters. Statistics
    arrive in two steps: nonzeros per row first, then the connected components. A run disables
    the Run button until it finishes, so a second Run cannot be started (the button
    reads "Running…"); parameter changes during a run affect the statistics only.
    """

    state = param.ClassSelector(class_=ExplorerState)

    def __init__(self, **params):
        params.setdefault("state", ExplorerState())
        super().__init__(**params)
        s = self.state
        if s.dataset is None:
            s.load()
        self._loader = LatestOnly(s.prepare_load, s.apply_load)
        self._stats = LatestOnly(s.prepare_stats, s.apply_stats)
        self._components = LatestOnly(s.prepare_components, s.apply_stats)
        self._tour = LatestOnly(self._prepare_tour, s.teaching.apply_graph)

        self.data_controls = DataControls(state=s)
        self.graph_controls = GraphControls(state=s)
        self.run_controls = RunControls(state=s)
        self.stats = StatsCard(state=s)
        self.clusters = ClustersView(state=s)
        self.eigenvectors = EigenvectorView(state=s)
        self.spectrum = SpectrumView(state=s)
        self.sparsity = SparsityView(state=s)
        self.timings = TimingsView(state=s)
        self.teaching = TeachingView(state=s)
        self.export = ExportView(state=s)

        s.data.param.watch(self._data_changed, _DATA_PARAMS)
        s.data.param.watch(self._new_data, "current")
        s.graph.param.watch(self._graph_changed, _STATS_PARAMS)
        s.graph.param.watch(self._complete_stats, "stats")
        s.teaching.param.watch(self._tour_step, "step")
        s.run_state.param.watch(self._tour_step, "result")
        self.run_controls.button.on_click(self._run)

        if s.dataset is not None and s.graph.stats is None:
            s.refresh_stats()
        self.tabs = pn.Tabs(
            ("Clusters", self.clusters),
            ("Eigenvectors", self.eigenvectors),
            ("Spectrum", self.spectrum),
            ("Sparsity", self.sparsity),
            ("Timings", self.timings),
            ("Guided tour", self.teaching),
            ("Export", self.export),
            dynamic=True, sizing_mode="stretch_width",
        )

    # -- jobs ------------------------------------------------------------------------
    def _data_changed(self, *events) -> None:
        pn.state.execute(self._loader.request)

    def _new_data(self, *events) -> None:
        pn.state.execute(self._stats.request)
        if self.state.teaching.current.key == "graph":
            pn.state.execute(self._tour.request)

    def _graph_changed(self, *events) -> None:
        pn.state.execute(self._stats.request)
        if self.state.teaching.current.key == "graph":
            pn.state.execute(self._tour.request)

    def _complete_stats(self, *events) -> None:
        if not self.state.graph.stats_complete:
            pn.state.execute(self._components.request)

    def _tour_step(self, *events) -> None:
        if self.state.teaching.current.key == "graph":
            pn.state.execute(self._tour.request)

    def _prepare_tour(self):
        s = self.state
        if s.dataset is None:
            raise ValueError("no data")
        run_csr = None if s.result is None else s.result.csr
        return s.teaching.prepare_graph(s.dataset.X, s.graph.edge_kwargs(), run_csr)

    async def idle(self) -> None:
        """Wait until no load, statistics or run job of this app is in flight.

        For code that drives the state in a notebook: parameter changes start jobs in
        the background, and ``await app.idle()`` waits for their results.
        """
        runners = (self._loader, self._stats, self._components, self._tour)
        while any(r.running for r in runners) or self.state.run_state.running:
            await asyncio.sleep(0.02)

    async def _run(self, event) -> None:
        try:
            job = self.state.prepare_run()
        except (ValueError, RuntimeError) as exc:
            self.state.run_state.error = str(exc)
            return
        try:
            outcome = await run_in_process(execute, job.spec, job.report)
        except BrokenProcessPool:
            log.error("a run's worker process ended abruptly")
            outcome = RunOutcome(error=(
                "The run's worker process ended abruptly: the system stops a process "
                "that takes too much memory. Lower the threshold (fewer edges per row) or "
                "subsample the data; the next run starts a new worker."))
        except Exception as exc:  # e.g. data that does not pickle
            outcome = RunOutcome(error=describe_error(exc, "running the clustering"))
        async with publishing():
            self.state.apply_run(outcome)

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
        ]

    def main(self) -> list:
        """The main area: live statistics above the result tabs."""
        return [self.stats, self.tabs]

    def template(self) -> pn.template.BootstrapTemplate:
        """The full page (what ``panel serve app.py`` serves).

        Bootstrap rather than the Fast templates: the Fast design fetches its font from
        Google Fonts, which a machine without internet access (a lab, a GPU server)
        answers with errors; every resource of this page comes from the Panel server.
        """
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
