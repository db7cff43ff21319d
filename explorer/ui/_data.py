"""The data a session works on: a built-in set or an uploaded file, and its 2-D picture."""

from __future__ import annotations

import dataclasses
import re
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import param

from explorer import SpectralClustering, memory
from explorer import data as datasets
from explorer._backend import to_numpy
from explorer.graph import EdgeRule
from explorer.preprocessing import SCALINGS, check_feature_scales, choose_scaling, fit_scaler

from ._errors import describe_error
from ._stage import Failed, Inputs, Stage

#: Generator options the "noise" control drives, by the name the generator uses.
NOISE_OPTIONS = ("noise", "cluster_std")

#: The size of the data set the app opens on (moons: its suggested parameters give
#: two connected components, no "more than k components" warning on the first Run).
DEFAULT_N = 5000


#: Rows used to fit the PCA projection of high-dimensional data (all rows are
#: projected; the fit only needs the covariance, which a sample estimates well).
PROJECTION_FIT_ROWS = 20_000

#: File types the upload accepts (the suffixes explorer.data.read knows).
UPLOAD_SUFFIXES = (".csv", ".tsv", ".txt", ".npy", ".npz", ".parquet", ".pq")


@dataclass(eq=False)
class LoadResult:
    """A loaded data set and its picture: the data stage's result.

    Attributes
    ----------
    dataset : explorer.data.Dataset
    xy : ndarray, shape (n, 2)
        Coordinates to draw the points in (:func:`project_2d`).
    projection_note : str
        Says when `xy` is a projection.
    label_options : dict or None
        Label-column choices of a file (None: keep the current ones).
    label_column : int or None
        The file's label column used.
    from_file : bool
    scale : {"standard", "minmax"} or None
        The feature scaling the data are shown, measured and suggested for (the
        estimator's ``scale``, which a run passes on).
    X : ndarray of float32, shape (n, d), or None
        The points as the graph sees them: ``dataset.X`` scaled by `scaler` (the same
        :func:`explorer.preprocessing.fit_scaler` the estimator fits), or
        ``dataset.X`` itself without scaling (None: ``dataset.X``).
    scaler : explorer.preprocessing.FeatureScaler or None
    scale_warning : str
        The library's :class:`~explorer.preprocessing.FeatureScaleWarning` (spreads
        that differ by orders of magnitude, no scaling chosen) or
        :class:`~explorer.preprocessing.ConstantFeatureWarning`, as it is worded.
    projection : Projection or None
        The map from `X`'s space to `xy` (representatives and landmarks are drawn
        through it).
    rule : explorer.EdgeRule or None
        The library's choice of graph for `X` (:meth:`explorer.SpectralClustering.plan`
        with its defaults: the graph kind, σ and threshold a default fit would take),
        which the sidebar adopts.
    epsilon_rule : explorer.EdgeRule or None
        The library's ε-graph rule for the same points (the sliders of σ and the
        threshold centre on it, whatever kind `rule` is).
    plan_lines : tuple of (str, str)
        The plan behind `rule`, as the library words it.
    representatives : ndarray of float32, shape (m, d), or None
        When that plan clusters k-means representatives (``mode="auto"`` on many
        points): the representatives, whose graph the live statistics describe.
    columns : tuple or None
        Every column of a file's table (names, or 0-based positions without a header),
        which the user may leave out.
    ignored : dict or None
        The columns of a file left out of the features, and why (``Dataset.params
        ["read"]["ignored"]``).
    read_note : str
        What the reader detected, in one line (:func:`explorer.data.describe_read`).
    """

    dataset: object
    xy: np.ndarray
    projection_note: str = ""
    label_options: dict | None = None
    label_column: object = None
    from_file: bool = False
    scale: str | None = None
    X: np.ndarray | None = None
    scaler: object = None
    scale_warning: str = ""
    projection: object = None
    rule: object = None
    epsilon_rule: object = None
    plan_lines: tuple = ()
    representatives: np.ndarray | None = None
    columns: tuple | None = None
    ignored: dict | None = None
    read_note: str = ""

    def __post_init__(self):
        if self.X is None:
            self.X = self.dataset.X

    @property
    def n(self) -> int:
        return int(self.dataset.n)

    def describe(self) -> str:
        """One line naming the data, e.g. ``moons, n = 2,000`` (``, standard-scaled``)."""
        scaled = "" if self.scale is None else f", {self.scale}-scaled"
        return f"{self.dataset.name}, n = {self.dataset.n:,}{scaled}"

    def axis_labels(self) -> tuple[str, str]:
        """The labels of the drawing's axes: the features (by the names a file's header
        gives them, else ``x0``, ``x1``) or principal components, and the scaling when
        one is chosen (``x0 (standard-scaled)``). Every view of the data's space uses
        them."""
        d = self.dataset.d
        names = ("x0", "x1") if d == 2 else ("x0", "") if d == 1 else ("PC 1", "PC 2")
        features = getattr(self.dataset, "feature_names", None)  # a file's column names
        if features and d <= 2 and len(features) == d:
            names = (str(features[0]), str(features[1]) if d == 2 else "")
        if self.scale is None:
            return names
        return tuple(f"{name} ({self.scale}-scaled)" if name else name for name in names)


@dataclass(frozen=True)
class Projection:
    """The map from a data set's d features to the 2-D drawing (:func:`fit_projection`).

    Attributes
    ----------
    d : int
    mean, components : ndarray or None
        For d > 2: the centre and the two leading principal axes (2 × d), float32.
    note : str
        What the drawing is ("" for 2-D data).
    """

    d: int
    mean: np.ndarray | None = None
    components: np.ndarray | None = None
    note: str = ""

    def __call__(self, points) -> np.ndarray:
        """The (m, 2) coordinates of `points` (m × d, in the space fitted)."""
        points = np.asarray(points, dtype=np.float32)
        if points.ndim != 2 or points.shape[1] != self.d:
            raise ValueError(f"points must have {self.d} features, as the data the projection "
                             f"was fitted on; got shape {points.shape}")
        if self.d == 2:
            return points
        if self.d == 1:
            return np.column_stack([points[:, 0], np.zeros(len(points), dtype=np.float32)])
        return ((points - self.mean) @ self.components.T).astype(np.float32)


def fit_projection(X) -> Projection:
    """The drawing of `X`: 2-D data as is; 1-D data on a line; higher-dimensional data
    projected onto its two leading principal components (an SVD of the centred data,
    fitted on at most :data:`PROJECTION_FIT_ROWS` rows). Presentation only: the
    clustering always uses every feature."""
    X = np.asarray(X, dtype=np.float32)
    n, d = X.shape
    if d == 2:
        return Projection(2)
    if d == 1:
        return Projection(1, note="1-D data drawn on a line.")
    rows = np.arange(n)
    if n > PROJECTION_FIT_ROWS:
        rows = np.sort(np.random.default_rng(0).choice(n, PROJECTION_FIT_ROWS, replace=False))
    fit = X[rows].astype(np.float64)
    mean = fit.mean(axis=0)
    _, s, vt = np.linalg.svd(fit - mean, full_matrices=False)
    share = float((s[:2] ** 2).sum() / max((s**2).sum(), np.finfo(float).tiny))
    note = (
        f"d = {d}: drawn as a PCA projection onto the 2 leading principal components "
        f"({100 * share:.0f}% of the variance); clustering uses all {d} features."
    )
    return Projection(d, mean.astype(np.float32), vt[:2].astype(np.float32), note)


def project_2d(X) -> tuple[np.ndarray, str]:
    """Coordinates to draw `X` in, and a sentence saying what they are
    (:func:`fit_projection` applied to `X`)."""
    projection = fit_projection(X)
    return projection(X), projection.note


def with_scale(result: LoadResult, scale: str | None) -> LoadResult:
    """`result` measured under `scale`: the scaled points (or the data as given), their
    drawing and projection, the scale warning, and the edge rule suggested for them.

    The scaling is :func:`explorer.preprocessing.fit_scaler`, the one the estimator
    fits (a run passes ``scale`` on, and the estimator scales the data itself); the
    suggestion is :meth:`explorer.EdgeRule.suggest`'s (the data set's own suggestion,
    made for unscaled data, is reused only without scaling).
    """
    ds = result.dataset
    if scale == "auto":  # the library's choice (explorer.preprocessing.choose_scaling)
        scale, _ = choose_scaling(ds.X)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if scale is None:
            scaler, X = None, ds.X
            check_feature_scales(X, name=ds.name)
        else:
            scaler = fit_scaler(ds.X, scale, name=ds.name)
            X = scaler.transform(ds.X)
    projection = fit_projection(X)
    note = projection.note
    if "offset" in ds.params:  # a file centred on reading (the app's graphs are distances)
        shift = ", ".join(f"{v:.6g}" for v in ds.params["offset"])
        note = f"{note} Centred by ({shift}): float32 could not carry the offset.".strip()
    if scale is not None:
        note = f"{note} Drawn, measured and clustered {scale}-scaled.".strip()
    plan, epsilon_rule = library_choice(X, ds)
    reps = plan.representatives
    return dataclasses.replace(
        result, scale=scale, X=X, scaler=scaler, xy=projection(X), projection=projection,
        projection_note=note, rule=plan.user_rule, epsilon_rule=epsilon_rule,
        plan_lines=tuple(plan.lines()),
        representatives=None if reps is None else np.asarray(to_numpy(plan.points)),
        scale_warning="  \n".join(str(w.message) for w in caught),
    )


#: The seed of the plan a new data set opens on: the run's default ``random_state``,
#: so the representatives the statistics describe are those a default Run clusters.
PLAN_SEED = 0


def library_choice(X, ds):
    """What a default fit of `X` would do (:meth:`explorer.SpectralClustering.plan`, k the
    data set's classes or "auto"), and the library's ε-graph rule for the same points
    (the points the plan's graph joins: the representatives in that mode)."""
    k = "auto" if ds.y is None else int(ds.n_classes)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the scale warning is recorded once, above
        # X is scaled as the app decided already (the library's "auto" included)
        plan = SpectralClustering(n_clusters=k, random_state=PLAN_SEED, scale=None).plan(X)
        epsilon = plan.rule
        if plan.rule.graph != "epsilon":
            epsilon = EdgeRule.suggest(plan.points, n_clusters=k)
    return plan, epsilon


def _label_options(columns) -> dict:
    """Label-column choices of a table: display text (the column's name, or "column j"
    without a header) -> what ``explorer.data.read`` takes as its label column."""
    options = {"(none)": None}
    for c in columns:
        options[str(c) if isinstance(c, str) else f"column {c}"] = c
    return options


#: Most values (n × d) a generated data set may have in the app: the data lives in the
#: server process (and is copied to each run's worker), shared by every session. 2·10⁸
#: float32 values are 0.75 GiB: 5·10⁶ points of 2-D data but 255,000 digits of 784.
APP_MAX_VALUES = 200_000_000


def app_max_n(name: str) -> int:
    """The largest n the app generates for the built-in set `name`: capped by the set's
    own size, by :data:`APP_MAX_VALUES` over its d, and by the free memory
    (:func:`explorer.data._registry.memory_max_n`)."""
    info = datasets.DATASETS[name]
    caps = [APP_MAX_VALUES // info.d]
    if info.max_n is not None:
        caps.append(int(info.max_n))
    free = datasets._registry.memory_max_n(name)
    if free is not None:
        caps.append(free)
    return max(2, min(caps))


#: Largest upload read (bytes). The upload widget (Panel's FileDropper) refuses a
#: larger file in the browser, before it is sent, and the server checks it again.
UPLOAD_MAX_BYTES = 12 * 2**20

#: What an uploaded file may hold once decompressed (an NPZ member, a Parquet file):
#: 512 MiB (the library allows 2 GiB): the server process is shared by every session.
UPLOAD_CONTENT_BYTES = 2**29


def too_large_message(name: str, size: int) -> str:
    """Why a file of `size` bytes is not read (the browser's refusal says the same)."""
    return (f"{name}: the file is {size / 2**20:.1f} MiB, more than the "
            f"{UPLOAD_MAX_BYTES / 2**20:.0f} MiB an upload may have; subsample it, or "
            "read it with the library or the command line")


class DataState(Stage):
    """Where the data comes from, and the data loaded (the pipeline's first stage).

    Its inputs are the source settings (built-in set, size, noise, seed; or the
    uploaded file and its label column); its result a :class:`LoadResult`. A load
    that fails leaves the last data in place and says why in `error`.
    """

    source = param.Selector(default="built-in", objects=["built-in", "file"])
    dataset = param.Selector(default="moons", objects=list(datasets.DATASETS))
    n_samples = param.Integer(default=DEFAULT_N, bounds=(2, None), doc="Rows to generate.")
    noise = param.Number(
        default=0.05, bounds=(0.0, 1.0),
        doc="The generator's noise (moons, circles, spirals) or cluster spread (blobs, aniso).",
    )
    random_state = param.Integer(default=0, bounds=(0, 2**31 - 1), doc="Generator seed.")
    scale = param.Selector(
        default="auto", objects=["auto", None, *SCALINGS],
        doc="Feature scaling (the estimator's scale): the data are drawn, measured and "
            "clustered scaled. auto: the library's choice (standard for features in "
            "mixed units); None: as given.",
    )

    file_name = param.String(default="", doc="Name of the uploaded file.")
    uploads = param.Integer(default=0, doc="Files taken so far (a change means: read the new one).")
    label_choice = param.Parameter(default=None, doc="The label column the user asked for.")
    label_column = param.Parameter(default=None,
                                   doc="0-based label column of the loaded file, or None.")
    label_options = param.Dict(default={"(none)": None}, doc="Label-column choices of the file.")
    ignore_choice = param.Parameter(
        default=None, doc="Columns of the file the user left out (a list), or None: those "
                          "the reader leaves out on its own (index, ID and date columns).")
    columns = param.List(default=[], doc="Every column of the loaded file.")
    ignored = param.Dict(default={}, doc="Columns of the loaded file left out, and why.")
    read_note = param.String(default="", doc="What the reader detected in the loaded file.")
    refused = param.Integer(default=0, doc="Uploads whose first read failed (a change: the "
                                           "upload widget withdraws the file).")

    input_names = ("source", "dataset", "n_samples", "noise", "random_state", "uploads",
                   "label_choice", "ignore_choice", "scale")
    doing = "loading the data"

    def __init__(self, **params):
        super().__init__(**params)
        self._file_bytes: bytes | None = None
        self._label_chosen = False
        self._n_chosen: dict[str, int] = {}  # n the user chose, by built-in set
        self._set_defaults()
        self.param.watch(self._dataset_changed, ["dataset", "n_samples"])

    # -- what was loaded -----------------------------------------------------------
    @property
    def current(self):
        """The loaded explorer.data.Dataset, or None before the first load."""
        return None if self.result is None else self.result.dataset

    @property
    def xy(self):
        """n×2 coordinates to draw the loaded data in (None before the first load)."""
        return None if self.result is None else self.result.xy

    @property
    def projection_note(self) -> str:
        return "" if self.result is None else self.result.projection_note

    # -- built-in sets -------------------------------------------------------------
    @property
    def info(self):
        """The catalogue entry of the selected built-in set."""
        return datasets.DATASETS[self.dataset]

    @property
    def noise_option(self) -> str | None:
        """The generator option the noise control drives for this set (None: none)."""
        for name in NOISE_OPTIONS:
            default = self.info.options.get(name)
            # One number only ("varied" takes a spread per cluster: left as it is).
            if isinstance(default, (int, float)) and not isinstance(default, bool):
                return name
        return None

    def default_n(self, name: str) -> int:
        """The n a built-in set opens with: :data:`DEFAULT_N`, or all the set has."""
        return int(min(DEFAULT_N, app_max_n(name)))

    def _set_defaults(self, n: int | None = None) -> None:
        """The selected set's own noise, and `n` (default: the n now) clipped to what
        the set has, in one update."""
        n = self.n_samples if n is None else n
        values = {"n_samples": int(min(n, app_max_n(self.dataset)))}
        if self.noise_option is not None:
            values["noise"] = float(self.info.options[self.noise_option])
        self.param.update(**values)

    def _dataset_changed(self, *events) -> None:
        """Each set keeps its own n: the one the user chose for it, else its default
        (digits' 1,797 does not carry over to moons). An update that sets the set and
        n together keeps that n."""
        changed = {e.name: e for e in events}
        if "dataset" not in changed:
            return
        before = changed["dataset"].old
        n_before = changed["n_samples"].old if "n_samples" in changed else self.n_samples
        if n_before != self.default_n(before):
            self._n_chosen[before] = n_before
        else:
            self._n_chosen.pop(before, None)
        n = (changed["n_samples"].new if "n_samples" in changed
             else self._n_chosen.get(self.dataset, self.default_n(self.dataset)))
        self._set_defaults(n)

    # -- files -------------------------------------------------------------------
    def set_file(self, file_name: str, content: bytes) -> None:
        """Take an uploaded file (its name decides the format); the next load reads it."""
        self._file_bytes = bytes(content)
        self._label_chosen = False
        # One batch: watchers (the app's reload) see a single change.
        self.param.update(file_name=Path(file_name).name, uploads=self.uploads + 1,
                          label_choice=None, ignore_choice=None, source="file")

    def refuse_file(self, file_name: str, size: int) -> None:
        """The browser refused a file over :data:`UPLOAD_MAX_BYTES` before sending it:
        say so (the data loaded before stays)."""
        self.error = too_large_message(Path(str(file_name)).name, int(size))

    def choose_label(self, column) -> None:
        """Use the file's column `column` (0-based, or None) as ground truth."""
        self._label_chosen = True  # an input too: a choice equal to the guess reloads
        with param.parameterized.discard_events(self):
            self.label_choice = column
        self.param.trigger("label_choice")  # an event even when the value is unchanged

    def choose_ignored(self, columns) -> None:
        """Leave the file's `columns` (names or 0-based positions) out of the features,
        and no others (the automatic choice is then the user's to undo)."""
        self.ignore_choice = list(columns)

    def accept(self, job, outcome, final: bool = True) -> bool:
        done = super().accept(job, outcome, final)
        params = job.inputs.params
        if (done and outcome.error and params.get("source") == "file"
                and not params.get("label_chosen") and params.get("ignore_choice") is None):
            self.refused += 1  # the first read of an upload failed: the file is refused
        return done

    # -- loading -----------------------------------------------------------------
    def snapshot(self) -> Inputs:
        """The current inputs (the file's bytes are named by the upload count).

        Raises
        ------
        ValueError
            ``source="file"`` before any upload.
        """
        if self.source == "file" and self._file_bytes is None:
            raise ValueError("source='file' but no file was uploaded; upload one first")
        if self.source == "file":  # the built-in settings do not matter, nor the reverse
            ignore = None if self.ignore_choice is None else tuple(self.ignore_choice)
            return Inputs((), {"source": "file", "uploads": self.uploads,
                               "label_choice": self.label_choice,
                               "label_chosen": self._label_chosen,
                               "ignore_choice": ignore, "scale": self.scale})
        noise = None if self.noise_option is None else self.noise
        return Inputs((), {"source": "built-in", "dataset": self.dataset,
                           "n_samples": self.n_samples, "random_state": self.random_state,
                           "noise": noise, "scale": self.scale})

    def steps(self, inputs: Inputs) -> list:
        scale = inputs["scale"]
        current = self.result
        if current is not None and _same_source(self.inputs, inputs):
            # Only the scaling changed: the data stay, rescaled (no new generation or
            # read; the label choices are kept).
            kept = dataclasses.replace(current, label_options=None)
            return [lambda report: with_scale(kept, scale)]
        if inputs["source"] == "file":
            content, name = self._file_bytes, self.file_name
            column, chosen = inputs["label_choice"], inputs["label_chosen"]
            ignore = inputs["ignore_choice"]
            return [lambda report: with_scale(
                self._read_file(content, name, column, chosen, ignore), scale)]
        name, n, seed = inputs["dataset"], inputs["n_samples"], inputs["random_state"]
        option = self.noise_option
        options = {} if option is None else {option: inputs["noise"]}
        return [lambda report: with_scale(self._generate(name, n, seed, options), scale)]

    def publish(self, inputs, value, seconds=0.0, final=True) -> None:
        with param.parameterized.batch_call_watchers(self):
            if value.label_options is not None:
                self.label_options = value.label_options
            if value.from_file:
                self.param.update(label_column=value.label_column,
                                  columns=list(value.columns or ()),
                                  ignored=dict(value.ignored or {}), read_note=value.read_note)
            super().publish(inputs, value, seconds, final)

    def load(self) -> bool:
        """Load the current settings here; True when new data was published."""
        return self.compute()

    @staticmethod
    def _generate(name, n, seed, options) -> LoadResult:
        top = app_max_n(name)
        if n > top:
            raise Failed(
                f"n_samples={n:,} is too many for {name} in the app: at most {top:,} "
                f"rows of {datasets.DATASETS[name].d} features (the app holds at most "
                f"{APP_MAX_VALUES:,} values, and what this machine's free memory allows); "
                "lower n, or use the library or the command line for larger sets")
        try:
            ds = datasets.load(name, n_samples=n, random_state=seed, **options)
        except Exception as exc:  # shown to the user; the previous data stays
            raise Failed(describe_error(exc, f"loading {name!r}")) from None
        return LoadResult(dataset=ds, xy=np.empty((0, 2), np.float32))

    @staticmethod
    def _read_file(content, name, column, chosen, ignore=None) -> LoadResult:
        suffix = Path(name).suffix.lower()
        if suffix not in UPLOAD_SUFFIXES:
            raise Failed(f"{name}: unknown file type {suffix or '(none)'!r}; allowed: "
                         f"{', '.join(UPLOAD_SUFFIXES)}")
        if len(content) > UPLOAD_MAX_BYTES:
            raise Failed(too_large_message(name, len(content)))
        # explorer.data.read takes a path: the bytes go to a private temporary folder
        # under a fixed name (the user's may be anything: too long for the file system,
        # a path), removed with the folder whatever happens; the reader is given the
        # user's name for its messages.
        try:
            with tempfile.TemporaryDirectory(prefix="explorer-upload-") as folder:
                path = Path(folder) / f"upload{suffix}"
                path.write_bytes(content)
                with memory.file_limit(UPLOAD_CONTENT_BYTES, "the app's limit on what an "
                                       "upload may expand to"):
                    ds, options, column = DataState._read_with_labels(
                        path, column, chosen, ignore, name)
        except Exception as exc:
            # A reader may quote the path it opened: never show a server path.
            text = _UPLOAD_PATH.sub(lambda _: name, describe_error(exc, f"reading {name}"))
            raise Failed(text) from None
        ds.description = f"uploaded file {name}: {ds.n} rows × {ds.d} features"
        if "offset" in ds.params:  # centred on reading (the app's graphs are distances)
            shift = ", ".join(f"{v:.6g}" for v in ds.params["offset"])
            ds.description += f"; Centred by ({shift}): float32 could not carry the offset."
        read = ds.params.get("read", {})
        return LoadResult(
            dataset=ds, xy=np.empty((0, 2), np.float32), label_options=options,
            label_column=column, from_file=True, columns=tuple(ds.params["columns"]),
            ignored=dict(read.get("ignored", {})), read_note=datasets.describe_read(read),
        )

    @staticmethod
    def _read_with_labels(path, column, chosen, ignore=None, name=None):
        """Read the file: ``(dataset, label options or None to keep them, label column)``.

        On first sight of a file :func:`explorer.data.read` picks the label column
        (``label_column="auto"``: a column named like a label, else the only text
        column, or the only one whose values repeat) and the columns to leave out
        (index, ID and date columns), and names the table's columns, which the options
        offer by name; a column the user chose is read as the labels, and the columns
        the user left out (`ignore`, a sequence) replace the automatic choice.
        """
        ignoring = ({} if ignore is None
                    else {"ignore_columns": list(ignore), "auto_ignore": False})
        ds = datasets.read(path, label_column=column if chosen else datasets.AUTO, center=True,
                           name=name, **ignoring)
        options = None if chosen else _label_options(ds.params["columns"])
        return ds, options, ds.params["label_column"]


#: The temporary upload in a message (a reader quoting the path it opened).
_UPLOAD_PATH = re.compile(r"\S*explorer-upload-[^/\s]*/upload\.\w+")


def _same_source(before: Inputs | None, now: Inputs) -> bool:
    """`now` asks for the data `before` loaded, perhaps under another scaling."""
    if before is None:
        return False
    return _source_params(before) == _source_params(now)


def _source_params(inputs: Inputs) -> dict:
    return {k: v for k, v in inputs.params.items() if k != "scale"}
