"""The sidebar: widgets bound to the state's parameters (data, graph, run).

Widgets only read and write state parameters; the jobs those changes start are wired
in :mod:`explorer.ui.app`.
"""

from __future__ import annotations

import html
import math

import panel as pn
import param
from bokeh.models import CustomJSTickFormatter

from ._data import DEFAULT_N, UPLOAD_MAX_BYTES, app_max_n
from .state import ExplorerState

#: Sizes the n slider offers (the catalogue's default and maximum are added).
N_CHOICES = (200, 500, 1_000, 2_000, 5_000, 10_000, 20_000, 50_000, 100_000, 200_000,
             500_000, 1_000_000, 2_000_000, 5_000_000)

#: Feature scalings offered, by label (the estimator's ``scale``).
SCALE_OPTIONS = {"auto (the library's choice)": "auto", "none (as given)": None,
                 "standard": "standard", "minmax": "minmax"}

#: Graph kinds offered, by label (the ``graph`` field; the run's ``affinity``).
GRAPH_OPTIONS = {"ε-graph": "epsilon", "kNN (union)": "knn", "mutual kNN": "mutual_knn"}

#: What each mode does, under the mode selector.
MODE_NOTES = {
    "auto": "The library chooses (explorer.representatives.choose_mode): exact for "
            "distance rules on d ≤ 8 up to 10⁵ points or small n²·d, else "
            "representatives; the run says which and why.",
    "exact": "The graph of all n points.",
    "representatives": "k-means picks m representatives; their graph (the sidebar's, as "
                       "the statistics show it) is clustered and every point takes its "
                       "representative's label (the representatives chain).",
    "landmarks": "Each point is joined to its nearest of p landmarks (W = Ẑ Ẑᵀ, "
                 "a CSRC truncated SVD): no n × n graph; of the graph controls only the metric is "
                 "used (σ: the mean distance to the nearest landmarks).",
}

#: Eigensolver tolerances offered (None: the solver's default).
TOLERANCES = {"solver default": None, "1e-3": 1e-3, "1e-4": 1e-4, "1e-5": 1e-5,
              "1e-6": 1e-6, "1e-8": 1e-8, "1e-10": 1e-10}



def _pow10_formatter():
    """Shows x on a slider over log10(x). A new model per widget: a Bokeh model
    belongs to one document, and every browser session is a document."""
    return CustomJSTickFormatter(code="return Number((10 ** tick).toPrecision(3)).toString()")

_WIDE = dict(sizing_mode="stretch_width")


def _alert(text_param, obj, alert_type="danger"):
    """An alert showing `obj.<text_param>`, hidden while it is empty."""
    alert = pn.pane.Alert("", alert_type=alert_type, visible=False, **_WIDE)

    def show(event=None):
        text = getattr(obj, text_param)
        alert.object = text
        alert.visible = bool(text)

    obj.param.watch(show, text_param)
    show()
    return alert


class LabelledCheckbox(pn.viewable.Viewer):
    """A checkbox whose label toggles it too, bound to a boolean parameter.

    Panel's Checkbox draws its label as a plain ``div`` beside the input, which a click
    does not reach; Bokeh's checkbox group draws ``<label><input> text</label>``, so this
    is a group of one option whose value is the parameter (checked: ``[label]``).

    Parameters
    ----------
    obj : param.Parameterized
    name : str
        The boolean parameter of `obj` it shows and sets.
    label : str
    """

    value = param.Boolean(default=False)

    def __init__(self, obj, name: str, label: str, **params):
        super().__init__(value=bool(getattr(obj, name)), **params)
        self.label = label
        self.widget = pn.widgets.CheckBoxGroup(options=[label], inline=True,
                                               value=[label] if self.value else [], **_WIDE)
        self.widget.param.watch(lambda e: setattr(self, "value", label in e.new), "value")
        self.param.watch(lambda e: setattr(obj, name, e.new), "value")
        self.param.watch(self._show, "value")
        obj.param.watch(lambda e: setattr(self, "value", bool(e.new)), name)

    def _show(self, event) -> None:
        self.widget.value = [self.label] if event.new else []

    @property
    def disabled(self) -> bool:
        return self.widget.disabled

    @disabled.setter
    def disabled(self, value: bool) -> None:
        self.widget.disabled = value

    def __panel__(self):
        return self.widget


class LogSlider:
    """A FloatSlider over log10 of a positive state parameter, synced both ways.

    Parameters
    ----------
    obj : param.Parameterized
    name : str
        The positive parameter the slider sets (``10 ** slider``).
    range_name : str
        A (lo, hi) parameter of `obj` in log10 units: the slider's span.
    label : str
    """

    def __init__(self, obj, name: str, range_name: str, label: str, step: float = 0.01,
                 css_class: str = ""):
        self.obj, self.name, self.range_name = obj, name, range_name
        lo, hi = getattr(obj, range_name)
        self.widget = pn.widgets.FloatSlider(
            name=label, start=lo, end=hi, step=step, format=_pow10_formatter(),
            css_classes=[css_class] if css_class else [], **_WIDE,
        )
        self._syncing = False
        self._from_state()
        self.widget.param.watch(self._to_state, "value")
        obj.param.watch(self._from_state, [name, range_name])

    def _to_state(self, event) -> None:
        if self._syncing:
            return
        self._syncing = True
        try:
            setattr(self.obj, self.name, float(10 ** event.new))
        finally:
            self._syncing = False

    def _from_state(self, *events) -> None:
        if self._syncing:
            return
        self._syncing = True
        try:
            lo, hi = getattr(self.obj, self.range_name)
            value = math.log10(getattr(self.obj, self.name))
            # Widen the span rather than clip a value set from outside (a notebook).
            self.widget.param.update(start=min(lo, value), end=max(hi, value), value=value)
        finally:
            self._syncing = False


#: The stops of the hypoMaxNnzRow slider: every width up to 16, then about 25 % apart
#: up to 1,024. Useful widths are mostly under 100; a linear slider over 0-1,024 gave
#: them a tenth of its track.
HYPO_STOPS = (*range(17), 20, 24, 28, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 256,
              320, 384, 512, 640, 768, 1024)


class OptionalSlider:
    """A slider for a parameter that may be None, where 0 stands for None ("default").

    With `stops`, a stepped slider over those values (0 among them): a value set from
    outside (a notebook) that is not a stop is added to them, never rounded.
    """

    def __init__(self, obj, name: str, label: str, end, step, integer: bool = False,
                 stops=None):
        self.obj, self.name = obj, name
        self._stops = None if stops is None else sorted(set(stops) | {0})
        if self._stops is not None:
            self.widget = pn.widgets.DiscreteSlider(name=label, options=self._stops, value=0,
                                                    **_WIDE)
        else:
            cls = pn.widgets.IntSlider if integer else pn.widgets.FloatSlider
            self.widget = cls(name=label, start=0, end=end, step=step, **_WIDE)
        self._syncing = False
        self._from_state()
        self.widget.param.watch(self._to_state, "value")
        obj.param.watch(self._from_state, name)

    def _to_state(self, event) -> None:
        if not self._syncing:
            self._syncing = True
            try:
                setattr(self.obj, self.name, event.new if event.new > 0 else None)
            finally:
                self._syncing = False

    def _from_state(self, *events) -> None:
        if not self._syncing:
            self._syncing = True
            try:
                value = getattr(self.obj, self.name)
                value = 0 if value is None else value
                if self._stops is not None and value not in self._stops:
                    self._stops = sorted({*self._stops, value})
                    self.widget.param.update(options=self._stops, value=value)
                else:
                    self.widget.value = value
            finally:
                self._syncing = False


class UploadRefusals(pn.custom.JSComponent):
    """Tells the server which file the page's FileDropper refused in the browser.

    FilePond (the FileDropper's client) refuses a file over ``max_file_size`` before
    sending any of it, and shows why in the drop area only; it announces the refusal as
    a ``FilePond:error`` DOM event (bubbling, composed), which this component passes on
    as :attr:`refused` so that the app's alert can say it too. No imports: the module
    is served inline, nothing comes from a CDN.
    """

    refused = param.Dict(default={}, doc="{'name', 'size', 'main', 'n'} of the last refusal.")
    withdraw = param.Dict(default={}, doc="{'name', 'n'}: set by the server when it refused "
                                          "the file of that name: the drop area removes it, "
                                          "so that no 'Upload complete' stays beside the "
                                          "error.")

    # FilePond announces its items as DOM events (bubbling, composed); each carries its
    # pond. The server's verdict can arrive before FilePond marks the item complete (its
    # state machine runs on animation frames): a refused name waits until then.
    _esm = """
    export function render({ model, el }) {
      let n = 0
      const ponds = new Set()
      const pending = new Set()
      const COMPLETE = 5  // FilePond.FileStatus.PROCESSING_COMPLETE
      const refused = (event) => {
        const { error, file } = event.detail || {}
        if (!error || !file) { return }
        n += 1
        model.refused = { name: file.filename, size: file.fileSize, main: error.main, n }
      }
      const sweep = () => {
        for (const pond of ponds) {
          for (const file of pond.getFiles()) {
            if (pending.has(file.filename) && file.status === COMPLETE) {
              pending.delete(file.filename)
              try { pond.removeFile(file.id) } catch (e) {}
            }
          }
        }
      }
      const seen = (event) => {
        const { pond } = event.detail || {}
        if (pond) { ponds.add(pond) }
        sweep()
      }
      document.addEventListener("FilePond:error", refused)
      document.addEventListener("FilePond:addfile", seen)
      document.addEventListener("FilePond:processfile", seen)
      model.on("withdraw", () => {
        const { name } = model.withdraw || {}
        if (name) { pending.add(name); sweep() }
      })
      model.on("remove", () => {
        document.removeEventListener("FilePond:error", refused)
        document.removeEventListener("FilePond:addfile", seen)
        document.removeEventListener("FilePond:processfile", seen)
      })
      return document.createElement("span")
    }
    """


class DataControls(pn.viewable.Viewer):
    """Pick a built-in data set or upload a file; show what was loaded."""

    state = param.ClassSelector(class_=ExplorerState)

    def __init__(self, **params):
        super().__init__(**params)
        data = self.state.data
        self.source = pn.widgets.RadioButtonGroup.from_param(
            data.param.source, name="", button_type="primary", button_style="outline", **_WIDE,
        )
        self.dataset = pn.widgets.Select.from_param(data.param.dataset, name="Data set", **_WIDE)
        self.description = pn.pane.Markdown("", styles={"font-size": "0.85em"}, margin=(0, 10))
        self.n_samples = pn.widgets.DiscreteSlider(name="n (points)", options=[DEFAULT_N],
                                                   css_classes=["n-slider"], **_WIDE)
        self.noise = pn.widgets.FloatSlider.from_param(
            data.param.noise, name="noise", start=0.0, end=0.3, step=0.005, **_WIDE,
        )
        self.seed = pn.widgets.IntInput.from_param(data.param.random_state, name="seed", **_WIDE)
        # Chunked (FilePond): no file reaches Bokeh's 20 MiB websocket message limit,
        # and one over the app's limit is refused before it is sent. Any suffix is taken
        # here (FilePond checks MIME types, which browsers leave empty for .npy or
        # .parquet): the server names the suffixes it reads. The size is in bytes:
        # FilePond 4's size check reads "12.6MB" as 12 bytes (parseInt, letters dropped).
        self.upload = pn.widgets.FileDropper(
            multiple=False, max_file_size=str(UPLOAD_MAX_BYTES), chunk_size=2**22,
            previews=[], layout="compact", css_classes=["upload"], **_WIDE,
        )
        self.refusals = UploadRefusals(height=0, margin=0, **_WIDE)
        self._taken: dict[str, int] = {}  # name -> id() of the content taken
        self.label = pn.widgets.Select(name="Label column", options={"(none)": None}, **_WIDE)
        # The file's columns left out of the features: the reader's own choice (index, ID
        # and date columns) until the user changes it.
        self.ignore = pn.widgets.MultiChoice(name="Ignored columns", options={}, value=[],
                                             css_classes=["ignore-columns"], **_WIDE)
        self._ignore_syncing = False
        self.summary = pn.pane.Markdown("", css_classes=["data-summary"], **_WIDE)
        # Options are labels: a Select cannot show None as its value.
        self.scale = pn.widgets.Select(name="Feature scaling (scale)",
                                       options=list(SCALE_OPTIONS),
                                       css_classes=["scale-select"], **_WIDE)
        self.scale.param.watch(lambda e: setattr(data, "scale", SCALE_OPTIONS[e.new]), "value")
        data.param.watch(self._scale_label, "scale")
        self._scale_label()
        self.scale_warning = pn.pane.Alert("", alert_type="warning", visible=False,
                                           css_classes=["scale-warning"], **_WIDE)
        self.alert = _alert("error", data)

        # On release only: every size is a new data set to generate.
        self.n_samples.param.watch(lambda e: setattr(data, "n_samples", int(e.new)),
                                   "value_throttled")
        self.upload.param.watch(self._uploaded, "value")
        self.refusals.param.watch(self._refused, "refused")
        self.label.param.watch(self._label_chosen, "value")
        self.ignore.param.watch(self._ignore_chosen, "value")
        data.param.watch(self._ignored, ["columns", "ignored"])
        data.param.watch(self._withdraw, "refused")
        data.param.watch(self._catalogue, ["dataset", "n_samples"])
        data.param.watch(self._labels, ["label_options", "label_column"])
        data.param.watch(self._summary, ["result", "busy", "error"])
        data.param.watch(self._scale_warning, "result")
        data.param.watch(self._source, "source")
        self._catalogue()
        self._labels()
        self._summary()
        self._source()
        self._scale_warning()

    def _scale_label(self, *events) -> None:
        scale = self.state.data.scale
        self.scale.value = next(k for k, v in SCALE_OPTIONS.items() if v == scale)

    def _scale_warning(self, *events) -> None:
        # The library's FeatureScaleWarning (or ConstantFeatureWarning), as it words it.
        result = self.state.data.result
        text = "" if result is None else result.scale_warning
        self.scale_warning.param.update(object=text, visible=bool(text))

    def _catalogue(self, *events) -> None:
        data = self.state.data
        info = data.info
        top = app_max_n(data.dataset)  # the set's size, d and the free memory
        choices = sorted({n for n in N_CHOICES if n <= top}
                         | {min(info.default_n, top), min(data.n_samples, top)}
                         | ({info.max_n} if info.max_n and info.max_n <= top else set()))
        self.n_samples.param.update(options=choices, value=data.n_samples)
        self.description.object = info.description
        self.noise.visible = data.noise_option is not None and data.source == "built-in"

    def _labels(self, *events) -> None:
        data = self.state.data
        self.label.param.update(options=data.label_options, value=data.label_column)

    def _label_chosen(self, event) -> None:
        data = self.state.data
        if event.new != data.label_column:
            data.choose_label(event.new)

    def _withdraw(self, event) -> None:
        # The server refused the upload: the drop area must not go on saying it is fine.
        self.refusals.withdraw = {"name": self.state.data.file_name, "n": event.new}

    def _ignored(self, *events) -> None:
        data = self.state.data
        options = {str(c) if isinstance(c, str) else f"column {c}": c for c in data.columns}
        self._ignore_syncing = True
        try:
            self.ignore.param.update(options=options,
                                     value=[c for c in data.ignored if c in data.columns])
        finally:
            self._ignore_syncing = False

    def _ignore_chosen(self, event) -> None:
        data = self.state.data
        if not self._ignore_syncing and list(event.new) != list(data.ignored):
            data.choose_ignored(event.new)

    def _uploaded(self, event) -> None:
        # FileDropper's value maps names to contents and changes in place (event.old is
        # event.new): a content not taken before is the new upload.
        files = dict(self.upload.value)
        new = [(name, content) for name, content in files.items()
               if self._taken.get(name) != id(content)]
        self._taken = {name: id(content) for name, content in files.items()}
        for name, content in new[-1:]:
            if isinstance(content, str):  # text/* files arrive decoded as UTF-8
                content = content.encode("utf-8")
            self.state.data.set_file(name, content)

    def _refused(self, event) -> None:
        refused = event.new or {}
        if refused.get("name") and isinstance(refused.get("size"), (int, float)):
            self.state.data.refuse_file(refused["name"], int(refused["size"]))

    def _source(self, *events) -> None:
        builtin = self.state.data.source == "built-in"
        for w in (self.dataset, self.description, self.n_samples, self.seed):
            w.visible = builtin
        self.noise.visible = builtin and self.state.data.noise_option is not None
        self.upload.visible = self.label.visible = self.ignore.visible = not builtin

    def _summary(self, *events) -> None:
        data = self.state.data
        ds = data.current
        if ds is None:
            self.summary.object = "*Loading…*" if data.busy else "*No data loaded yet.*"
            return
        classes = "no labels" if ds.y is None else f"**{ds.n_classes}** classes"
        note = data.projection_note
        if data.busy:
            status = "<br><i>Loading the new settings…</i>"
        elif data.stale and data.error:
            status = "<br><small>Shown: the last data that loaded (see the message).</small>"
        else:
            status = ""
        read = data.read_note if data.source == "file" else ""
        self.summary.object = (
            f"**{ds.name}**: n = **{ds.n:,}**, d = **{ds.d}**, {classes}"
            + (f"<br><small>Read as {html.escape(read, quote=False)}.</small>" if read else "")
            + (f"<br><small>{note}</small>" if note else "") + status
        )

    def __panel__(self):
        return pn.Column(
            self.source, self.dataset, self.description, self.n_samples, self.noise, self.seed,
            self.upload, self.refusals, self.label, self.ignore, self.scale, self.summary,
            self.scale_warning, self.alert, **_WIDE,
        )


class GraphControls(pn.viewable.Viewer):
    """The edge rule (metric, σ, threshold), the builder and its knobs, the backend."""

    state = param.ClassSelector(class_=ExplorerState)

    def __init__(self, **params):
        super().__init__(**params)
        g = self.state.graph
        # The sidebar opens on the library's choice for the data; this takes it back.
        self.library_choice = pn.widgets.Button(
            name="Use the library's choice of graph", button_type="light",
            css_classes=["library-choice"], **_WIDE)
        self.library_choice.on_click(lambda event: self.state.use_library_choice())
        self.graph = pn.widgets.RadioButtonGroup.from_param(
            g.param.graph, name="", options=GRAPH_OPTIONS, button_style="outline",
            css_classes=["graph-kind"], **_WIDE)
        # The library's choice of graph for these data, and why.
        self.graph_note = pn.pane.Markdown("", margin=(0, 10), css_classes=["graph-note"])
        self.n_neighbors = pn.widgets.IntSlider.from_param(
            g.param.n_neighbors, name="k, neighbours per point (n_neighbors)", start=1, end=100,
            css_classes=["knn-slider"], **_WIDE)
        self.local_sigma = LabelledCheckbox(g, "local_sigma", "self-tuning σ (σ = local)")
        self.local_neighbor = pn.widgets.IntSlider.from_param(
            g.param.local_neighbor, name="m, σi = distance to the m-th neighbour", start=1,
            end=50, css_classes=["local-neighbor"], **_WIDE)
        self.metric = pn.widgets.Select.from_param(g.param.metric, name="Metric", **_WIDE)
        self.kind = pn.widgets.RadioButtonGroup(
            options={"‖xi−xj‖² < t": "sqdist", "similarity > t": "sim"}, button_style="outline",
            **_WIDE,
        )
        self.sigma = LogSlider(g, "sigma", "log_sigma_range", "σ (log scale)",
                               css_class="sigma-slider")
        self.sqdist = LogSlider(g, "threshold_sqdist", "log_sqdist_range",
                                "Threshold t on ‖xi−xj‖² (log scale)", step=0.005,
                                css_class="threshold-slider")
        self.sim = pn.widgets.FloatSlider(name="Threshold t on the similarity", start=0.0,
                                          end=0.999, step=0.001, **_WIDE)
        self.epsilon = pn.pane.Markdown("", margin=(0, 10), css_classes=["epsilon"])
        self.method = pn.widgets.Select.from_param(g.param.method, name="Method", **_WIDE)
        self.hypo = OptionalSlider(g, "hypo_max_nnz_row", "hypoMaxNnzRow, CSR-2 (0 = default)",
                                   1024, 1, integer=True, stops=HYPO_STOPS)
        # What 0 means, honestly: CSR-2's default width for these data, while the
        # statistics show the suggested one.
        self.hypo_note = pn.pane.Markdown("", margin=(0, 10), css_classes=["hypo-note"])
        self.sp_pct = OptionalSlider(g, "sp_max_nz_pct", "spMaxNzPct, CSR-3 (0 = default)",
                                     100.0, 0.5)
        self.mem_rate = OptionalSlider(g, "mem_use_rate", "memUseRate, CSR-3 (0 = default)",
                                       1.0, 0.05)
        ok, why = g.gpu_available
        self.backend = pn.widgets.Select.from_param(
            g.param.backend, name="Backend", disabled_options=[] if ok else ["gpu"], **_WIDE,
        )
        self.backend_note = pn.pane.Markdown(
            f"<small>{'GPU: ' + why if ok else 'GPU unavailable: ' + why}</small>", margin=(0, 10),
        )
        self._syncing = False
        self.kind.param.watch(self._kind_to_state, "value")
        self.sim.param.watch(self._sim_to_state, "value")
        g.param.watch(self._from_state, ["metric", "threshold_kind", "threshold_sim", "sigma",
                                         "threshold_sqdist", "backend", "hypo_max_nnz_row",
                                         "graph", "local_sigma", "n_neighbors",
                                         "local_neighbor", "graph_note"])
        self.state.data.param.watch(self._from_state, "result")
        self._from_state()

    def _kind_to_state(self, event) -> None:
        if not self._syncing:
            self.state.graph.threshold_kind = event.new

    def _sim_to_state(self, event) -> None:
        if not self._syncing:
            self.state.graph.threshold_sim = float(event.new)

    def _from_state(self, *events) -> None:
        g = self.state.graph
        self._syncing = True
        try:
            self.kind.value = g.threshold_kind
            self.sim.param.update(start=-1.0 if g.metric == "cosine" else 0.001,
                                  value=g.threshold_sim)
        finally:
            self._syncing = False
        gaussian = g.metric == "gaussian"
        local = gaussian and g.local_sigma
        epsilon_graph = g.graph == "epsilon"
        # The ε widgets with an ε-graph, the kNN ones with a kNN graph: only what the
        # graph chosen reads is shown.
        self.n_neighbors.visible = not epsilon_graph
        self.kind.visible = self.sqdist.widget.visible = self.sim.visible = epsilon_graph
        self.local_sigma.widget.visible = gaussian
        self.local_neighbor.visible = local
        self.sigma.widget.visible = gaussian and not local
        if epsilon_graph:
            self.sqdist.widget.visible = g.threshold_kind == "sqdist"
            self.sim.visible = g.threshold_kind == "sim"
        self.kind.disabled = g.metric != "gaussian" or local
        eps = g.epsilon
        if local:
            rule = f"σ = local (m = {g.local_neighbor})"
        else:
            rule = f"σ = {g.sigma:.3g}" if gaussian else ""
        if not epsilon_graph:
            what = "union" if g.graph == "knn" else "mutual"
            rule = ", ".join(filter(None, [f"{g.graph}, k = {g.n_neighbors} ({what})", rule]))
        elif g.threshold_kind == "sqdist":
            rule = ", ".join(filter(None, [rule, f"t = {g.threshold_sqdist:.3g}"]))
        else:
            rule = ", ".join(filter(None, [rule, f"t = {g.threshold_sim:.3g}"]))
        if epsilon_graph and eps is not None:
            rule += f", ε = {eps:.4g}"
        self.epsilon.object = rule
        self.graph_note.object = f"<small>{g.graph_note}</small>" if g.graph_note else ""
        self.graph_note.visible = bool(g.graph_note)
        gpu = g.backend_name == "gpu"
        self.sp_pct.widget.disabled = self.mem_rate.widget.disabled = not gpu
        ds = self.state.dataset
        self.hypo_note.object = f"<small>{g.hypo_note(None if ds is None else ds.d)}</small>"

    def __panel__(self):
        return pn.Column(
            self.library_choice, self.graph, self.graph_note, self.n_neighbors, self.metric,
            self.local_sigma, self.local_neighbor, self.kind, self.sigma.widget,
            self.sqdist.widget, self.sim, self.epsilon, self.method, self.hypo.widget,
            self.hypo_note, self.sp_pct.widget, self.mem_rate.widget, self.backend,
            self.backend_note, **_WIDE,
        )


class RunControls(pn.viewable.Viewer):
    """k, the eigensolver, k-means restarts; the Run button and its progress."""

    state = param.ClassSelector(class_=ExplorerState)

    def __init__(self, **params):
        super().__init__(**params)
        r = self.state.run_state
        self.k = pn.widgets.IntSlider.from_param(r.param.n_clusters, name="k (clusters)",
                                                 start=1, end=30, **_WIDE)
        self.auto_k = LabelledCheckbox(r, "auto_k", "choose k by eigengap")
        self.solver = pn.widgets.Select.from_param(r.param.eigen_solver, name="Eigensolver",
                                                   **_WIDE)
        # Options are labels: a Select cannot show None as its value.
        self.tol = pn.widgets.Select(name="Eigensolver tolerance", options=list(TOLERANCES),
                                     value="solver default", **_WIDE)
        self.eigenpairs = OptionalSlider(r, "n_eigenpairs", "eigenpairs at least (0 = auto)", 30, 1,
                                         integer=True)
        self.n_init = pn.widgets.IntSlider.from_param(r.param.n_init, name="k-means restarts",
                                                      start=1, end=30, **_WIDE)
        self.seed = pn.widgets.IntInput.from_param(r.param.random_state, name="seed", **_WIDE)
        self.compare = LabelledCheckbox(r, "compare_kmeans", "k-means on raw data too")
        self.mode = pn.widgets.Select.from_param(r.param.mode, name="Mode",
                                                 css_classes=["mode-select"], **_WIDE)
        self.n_representatives = OptionalSlider(
            r, "n_representatives", "m, representatives (0 = auto: 4,096 or n)", 8192, 1,
            integer=True)
        self.n_landmarks = OptionalSlider(r, "n_landmarks", "p, landmarks (0 = min(1,000, n))",
                                          4000, 1, integer=True)
        self.mode_note = pn.pane.Markdown("", margin=(0, 10), css_classes=["mode-note"])
        self.button = pn.widgets.Button(name="Run", button_type="primary",
                                        css_classes=["run-button"], **_WIDE)
        self.progress_text = pn.pane.Markdown("", margin=(0, 10), css_classes=["run-progress"])
        # A change made while a run is in flight is not lost, but the run in flight does
        # not take it: say so, until the next Run starts.
        self.pending = pn.pane.Alert("", alert_type="warning", visible=False,
                                     css_classes=["run-pending"], margin=(0, 10), **_WIDE)
        self._run_inputs = None  # the inputs of the run in flight
        self.alert = _alert("error", r)

        self.tol.param.watch(lambda e: setattr(r, "eigen_tol", TOLERANCES[e.new]), "value")
        r.param.watch(self._progress, ["busy", "progress"])
        r.param.watch(self._k_enabled, "auto_k")
        r.param.watch(self._mode, "mode")
        self.state.data.param.watch(self._enable, "result")
        self._k_enabled()
        self._progress()
        self._mode()

    def _mode(self, *events) -> None:
        mode = self.state.run_state.mode
        self.n_representatives.widget.visible = mode in ("auto", "representatives")
        self.n_landmarks.widget.visible = mode == "landmarks"
        self.mode_note.object = "<small>" + MODE_NOTES[mode] + "</small>"

    def _k_enabled(self, *events) -> None:
        self.k.disabled = self.state.run_state.auto_k

    def _enable(self, *events) -> None:
        r = self.state.run_state
        self.button.disabled = r.busy or self.state.data.current is None

    def _progress(self, *events) -> None:
        r = self.state.run_state
        self.progress_text.object = r.progress  # the bar is at the top of the main area
        self.button.name = "Running…" if r.busy else "Run"
        if any(e.name == "busy" for e in events):
            if r.busy:  # a run starts with the inputs of now
                self._run_inputs = r.inputs_now()
                self.pending.visible = False
            elif self.pending.visible:
                self.pending.object = ("Changed during the last run, which did not use the "
                                       "change: press **Run** to apply it.")
        self._enable()

    def inputs_changed(self) -> None:
        """An input of the run changed (the app calls it from ``RunState.on_change``):
        during a run, say that the change waits for the next Run."""
        r = self.state.run_state
        if not r.busy or self._run_inputs is None:
            return
        changed = r.inputs_now() != self._run_inputs
        if changed:
            self.pending.object = ("The run in progress uses the settings it started with; "
                                   "your change applies to the next **Run**.")
        self.pending.visible = changed

    def __panel__(self):
        return pn.Column(
            self.k, self.auto_k, self.mode, self.n_representatives.widget,
            self.n_landmarks.widget, self.mode_note, self.solver, self.tol,
            self.eigenpairs.widget, self.n_init, self.seed, self.compare,
            self.button, self.progress_text, self.pending, self.alert, **_WIDE,
        )

