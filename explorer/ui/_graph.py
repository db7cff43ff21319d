"""Graph parameters and their live statistics (the pipeline's second stage).

The parameters of the edge rule and of the builders are generated from their one
declaration (:data:`explorer.graph.EDGE_FIELDS`, :data:`explorer.graph.BUILD_FIELDS`:
type, bounds, help; a field declared there later gets its parameter here with the
estimator's default); :attr:`GraphState.rule` and :attr:`GraphState.options` are the
validated objects the statistics take, and :meth:`GraphState.estimator_params` the
keywords a run passes to :class:`explorer.SpectralClustering`.
"""

from __future__ import annotations

import math

import param

import explorer
from explorer._backend import gpu_status
from explorer.graph import CPU_METHODS
from explorer.graph.rule import (
    BUILD_FIELDS,
    DEFAULT_HYPO_HIGH_D,
    DEFAULT_HYPO_LOW_D,
    EDGE_FIELDS,
    HYPO_HIGH_D,
    THRESHOLD_KINDS,
    BuildOptions,
    EdgeRule,
    Field,
    default_hypo_max_nnz_row,
)

from ._stage import Inputs, Stage

#: The GraphState parameters the statistics depend on.
STATS_PARAMS = (*EDGE_FIELDS, "threshold_kind", "local_sigma", "hypo_max_nnz_row", "backend")

#: The GraphState parameters a run depends on (the graph it builds).
RUN_PARAMS = (*EDGE_FIELDS, "threshold_kind", "local_sigma", "auto_affinity", *BUILD_FIELDS,
              "method", "backend")

#: The graph kinds of the ``graph`` field and the estimator's ``affinity`` that builds
#: each (the estimator names the kNN union scikit-learn's way too, "nearest_neighbors").
GRAPH_AFFINITY = {"epsilon": "epsilon", "knn": "knn", "mutual_knn": "mutual_knn"}


def estimator_defaults() -> dict:
    """:class:`explorer.SpectralClustering`'s parameters and their defaults."""
    return explorer.SpectralClustering().get_params()


def _param(f: Field, default, doc: str | None = None, **extra):
    """The param.Parameter of a declared field: its type, bounds and help."""
    doc = doc or f.help[0].upper() + f.help[1:] + "."
    if f.type is str:
        return param.Selector(default=default, objects=list(f.choices), doc=doc, **extra)
    # Whole bounds as int, so that param's messages read "greater than 0".
    bounds = tuple(None if b is None else int(b) if float(b).is_integer() else b
                   for b in f.bounds)
    if f.type is int:
        return param.Integer(default=default, bounds=bounds, doc=doc, **extra)
    return param.Number(default=default, bounds=bounds, inclusive_bounds=f.inclusive_bounds,
                        doc=doc, **extra)

#: Decades either side of the suggested σ and squared-distance threshold that the
#: log sliders span.
LOG_SPAN = 2.0


#: A session on the CPU backend opens new data on the ε-graph up to this many points and
#: on the kNN graph (self-tuning σ) beyond, where a run builds the graph of every point.
#: The suggested ε-graph of the built-in 2-D shapes is connected with a mean degree of
#: 50-270, and on two cores its Run took 0.4-0.6 s at 5,000 points, 0.9-1.8 s at 8,000,
#: 2.9-4.9 s at 14,000 and 4.4-9 s at 10⁵ (mostly the eigensolver); the kNN graph splits
#: the clusters apart, and its Run at 10⁵ takes under a second (benchmarks/results/
#: cpu.json, app-run). Where the run clusters representatives or landmarks instead
#: (beyond 10⁵ 2-D points) the ε-graph stays: its statistics are sampled (1-3 s at
#: 10⁶-5·10⁶ points), a kNN graph's come from building it (12 and 68 s there). The GPU
#: opens on the ε-graph whatever n.
CPU_EPSILON_MAX_N = 5_000


def opening_graph(n: int, backend: str, pipeline: str = "exact") -> tuple[str, str]:
    """The graph kind the app opens `n` points on, and why ("" for the ε-graph, the
    app's subject).

    Parameters
    ----------
    n : int
    backend : {"cpu", "gpu"}
    pipeline : {"exact", "representatives", "landmarks"}
        What a run of these points takes (:meth:`RunState.pipeline`): only "exact"
        builds the graph of every point.
    """
    if backend == "gpu" or n <= CPU_EPSILON_MAX_N or pipeline != "exact":
        return "epsilon", ""
    return "knn", (
        f"Opened on the kNN graph: n = {n:,} > {CPU_EPSILON_MAX_N:,} points on the CPU, where "
        "a Run builds the graph of every point and the suggested ε-graph takes seconds (it "
        "is connected and dense; the eigensolver needs many steps); the kNN graph with "
        "self-tuning σ runs in about a second. Pick ε-graph to tune ε: its sliders are "
        "centred on the suggestion.")


def gpu_methods() -> tuple[str, ...]:
    """The GPU builders the GPU bridge offers; empty where no GPU can be used."""
    ok, _ = gpu_status()
    if not ok:
        return ()
    from explorer.graph import gpu  # imports CuPy: only where a device answers

    return tuple(gpu.GPU_METHODS)


class GraphState(Stage):
    """The edge rule, the builder and its knobs, and the statistics they give.

    A stage (:class:`~explorer.ui._stage.Stage`) whose inputs are the loaded data
    and the parameters in :data:`STATS_PARAMS` (and the sampling policy), and whose
    result is the :class:`explorer.GraphStats` of :func:`explorer.graph_stats`. They
    come in two steps: the nonzeros per row first (fast: what a moving slider
    needs), then, unless sampled, the connected components (a graph build, several
    times slower).
    """

    graph = _param(EDGE_FIELDS["graph"], "epsilon")
    n_neighbors = _param(EDGE_FIELDS["n_neighbors"], 10)
    local_neighbor = _param(EDGE_FIELDS["local_neighbor"], 7)
    metric = _param(EDGE_FIELDS["metric"], "gaussian")
    sigma = _param(EDGE_FIELDS["sigma"], 0.05)
    local_sigma = param.Boolean(
        default=False,
        doc="Self-tuning σ (sigma='local'): σi = the distance from i to its "
            "local_neighbor-th nearest other point, weight exp(-d²/(σiσj)); gaussian only.",
    )
    auto_affinity = param.Boolean(
        default=False,
        doc="Let the library choose the graph of a run (affinity='auto', "
            "explorer.affinity.choose_affinity): the run then passes no σ or threshold, and "
            "the estimator records the graph it chose (affinity_, affinity_why_). The "
            "statistics stay those of the graph set here.",
    )
    graph_note = param.String(
        default="",
        doc="Why the app chose the graph kind for the data loaded ('' when it did not, or "
            "chose the ε-graph): see opening_graph. The app chooses until the graph kind "
            "is picked by hand.",
    )
    threshold_kind = param.Selector(default="sqdist", objects=["sqdist", "sim"],
                                    doc="Threshold on the squared distance or on the similarity.")
    threshold_sqdist = _param(EDGE_FIELDS["threshold_sqdist"], 0.01)
    threshold_sim = _param(EDGE_FIELDS["threshold_sim"], 0.5)
    method = param.Selector(default="auto", objects=["auto", *CPU_METHODS])
    hypo_max_nnz_row = _param(
        BUILD_FIELDS["hypo_max_nnz_row"], None, allow_None=True,
        doc="CSR-2's ELLPACK width hypoMaxNnzRow. None: a CSR-2 run takes its default "
            f"({DEFAULT_HYPO_LOW_D} for d < {HYPO_HIGH_D}, else {DEFAULT_HYPO_HIGH_D}) and "
            "the statistics show the suggested width (explorer.graph.suggest_hypo).",
    )
    sp_max_nz_pct = _param(BUILD_FIELDS["sp_max_nz_pct"], None, allow_None=True,
                           doc="CSR-3's bound on the % of nonzeros; None: estimated.")
    mem_use_rate = _param(BUILD_FIELDS["mem_use_rate"], None, allow_None=True,
                          doc="CSR-3's share of free GPU memory; None: 0.8.")
    backend = param.Selector(default="auto", objects=["auto", "cpu", "gpu"])

    exact_max_n = param.Integer(default=50_000, bounds=(2, None),
                                doc="Up to this n every row is counted and components too.")
    sample_rows = param.Integer(default=4096, bounds=(1, None),
                                doc="Rows counted to estimate the statistics beyond exact_max_n.")

    # Slider spans in log10 units, set from the data's suggested parameters.
    log_sigma_range = param.NumericTuple(default=(-3.0, 0.0), length=2)
    log_sqdist_range = param.NumericTuple(default=(-5.0, 0.0), length=2)

    input_names = (*STATS_PARAMS, "exact_max_n", "sample_rows")
    doing = "computing graph statistics"

    def __init__(self, data=None, **params):
        super().__init__(**params)
        self.data = data  # the DataState upstream (None: statistics wait for data)
        # The app chooses the graph kind (open_on) until it is picked by hand.
        self._graph_picked = False
        self._opening = False
        self._local_sigma_before_knn = None  # restored when the app goes back to ε
        self.param.watch(self._graph_set, "graph")
        if data is not None:
            self.follow(data)
        self._methods_for_backend()

    def upstream(self) -> tuple:
        return () if self.data is None else (("the data", self.data),)

    @property
    def stats(self):
        """The published explorer.GraphStats (None before any)."""
        return self.result

    # -- consistency between parameters ----------------------------------------------
    @param.depends("metric", "local_sigma", watch=True)
    def _threshold_kind_for_metric(self):
        allowed = THRESHOLD_KINDS[self.metric]
        if self.metric == "gaussian" and self.local_sigma:
            allowed = ("sqdist",)  # a similarity threshold needs one σ (EdgeRule refuses it)
        if self.threshold_kind not in allowed:
            self.threshold_kind = allowed[0]
        if self.metric == "cosine" and self.threshold_sim is not None:
            self.threshold_sim = min(max(self.threshold_sim, -1.0), 0.999)

    @param.depends("backend", watch=True)
    def _methods_for_backend(self):
        self.param.method.objects = ["auto", *self.methods]
        if self.method not in self.methods:
            self.method = "auto"

    @property
    def gpu_available(self) -> tuple[bool, str]:
        """Whether the GPU backend can be chosen, and why (not)."""
        return gpu_status()

    @property
    def backend_name(self) -> str:
        """The backend a run takes: "gpu" or "cpu"."""
        if self.backend == "auto":
            return "gpu" if self.gpu_available[0] else "cpu"
        return self.backend

    @property
    def methods(self) -> tuple[str, ...]:
        """The builders the chosen backend offers (besides "auto")."""
        return gpu_methods() if self.backend_name == "gpu" else tuple(CPU_METHODS)

    @property
    def rule(self) -> EdgeRule:
        """The edge rule of the current parameters, validated.

        Raises
        ------
        ValueError
            A combination the sliders' bounds let through but the rule refuses (a
            gaussian similarity threshold <= 0).
        """
        threshold = getattr(self, f"threshold_{self.threshold_kind}")
        sigma = None
        if self.metric == "gaussian":
            sigma = "local" if self.local_sigma else self.sigma
        knn = {"graph": self.graph, "n_neighbors": self.n_neighbors,
               "local_neighbor": self.local_neighbor}
        if self.graph != "epsilon":  # a kNN graph takes no threshold here
            return EdgeRule(self.metric, sigma, None, None, **knn)
        return EdgeRule(self.metric, sigma, self.threshold_kind, threshold, **knn)

    @property
    def options(self) -> BuildOptions:
        """The builders' knobs of the current parameters."""
        return BuildOptions(self.hypo_max_nnz_row, self.sp_max_nz_pct, self.mem_use_rate)

    @property
    def epsilon(self) -> float | None:
        """ε = √t of a squared-distance threshold, or of the distance a gaussian
        similarity threshold stands for (:attr:`explorer.EdgeRule.radius`); None for
        cosine and for a rule the parameters do not make."""
        try:
            return self.rule.radius
        except ValueError:
            return None

    def hypo_note(self, d: int | None = None) -> str:
        """What ``hypo_max_nnz_row = None`` means for data of `d` features (one line)."""
        if self.hypo_max_nnz_row is not None:
            return f"CSR-2 and the statistics use {self.hypo_max_nnz_row}."
        if d is None:
            csr2 = (f"{DEFAULT_HYPO_LOW_D} for d < {HYPO_HIGH_D}, "
                    f"else {DEFAULT_HYPO_HIGH_D}")
        else:
            csr2 = f"{default_hypo_max_nnz_row(d)} (d = {d})"
        return (f"0: a CSR-2 run uses its default, {csr2}; the statistics show the "
                "suggested width.")

    def edge_kwargs(self) -> dict:
        """The edge rule as keywords of explorer.build_graph / graph_stats.

        Parameters that make no rule give their raw keywords, so that the job using
        them reports why (as its error) rather than the caller raising.
        """
        try:
            return self.rule.to_kwargs()
        except ValueError:
            kind = f"threshold_{self.threshold_kind}"
            return {"metric": self.metric, "sigma": self.sigma, kind: getattr(self, kind)}

    def adopt(self, rule: EdgeRule) -> None:
        """Take an edge rule (a data set's suggestion) and centre the sliders on it."""
        with param.parameterized.batch_call_watchers(self):
            self.metric = rule.metric
            if rule.sigma is not None:
                self.sigma = rule.sigma
                c = math.log10(self.sigma)
                self.log_sigma_range = (c - LOG_SPAN, c + LOG_SPAN)
            self.threshold_kind = rule.threshold_kind
            if rule.threshold_kind == "sqdist":
                self.threshold_sqdist = rule.threshold
                c = math.log10(self.threshold_sqdist)
                self.log_sqdist_range = (c - LOG_SPAN, c + LOG_SPAN)
            else:
                self.threshold_sim = rule.threshold
            self.hypo_max_nnz_row = None

    def open_on(self, n: int, pipeline: str = "exact") -> None:
        """Choose the graph kind for `n` points run through `pipeline` on the current
        backend (:func:`opening_graph`), unless it was picked by hand;
        :attr:`graph_note` says why. Going to the kNN graph turns on self-tuning σ,
        going back restores it."""
        if self._graph_picked:
            return
        graph, why = opening_graph(n, self.backend_name, pipeline)
        self._opening = True
        try:
            with param.parameterized.batch_call_watchers(self):
                if graph != self.graph:
                    if graph == "epsilon":
                        self._restore_local_sigma()
                    else:
                        self._local_sigma_before_knn = self.local_sigma
                        self.local_sigma = True
                    self.graph = graph
                self.graph_note = why
        finally:
            self._opening = False

    def _graph_set(self, event) -> None:
        if self._opening:
            return
        self._graph_picked = True
        self.graph_note = ""
        if event.new == "epsilon":
            self._restore_local_sigma()
        self._local_sigma_before_knn = None

    def _restore_local_sigma(self) -> None:
        """Undo the self-tuning σ the app turned on with its kNN choice: an ε-graph
        gets the σ the sliders were centred on, as on smaller data."""
        if self._local_sigma_before_knn is not None:
            self.local_sigma = self._local_sigma_before_knn
        self._local_sigma_before_knn = None

    # -- statistics ----------------------------------------------------------------
    def stats_policy(self, n: int) -> dict:
        """How the statistics of n rows are computed.

        Up to :attr:`exact_max_n` rows every row is counted, and the connected
        components are counted in a second, slower job (they need the edges); beyond,
        :attr:`sample_rows` rows are counted and the figures extrapolated.
        """
        if n <= self.exact_max_n:
            return {"sample_rows": None}
        return {"sample_rows": self.sample_rows}

    @property
    def stats_complete(self) -> bool:
        """True when the published statistics need no components step."""
        s = self.stats
        return s is None or s.estimated or s.n_components is not None

    def steps(self, inputs: Inputs) -> list:
        """Nonzeros per row first; then, on exact statistics, the components too.

        The statistics are of the points as the graph sees them (the data stage's
        `X`: scaled when a scaling is chosen). A kNN graph's come in one step: a
        point's degree depends on who lists it, so :func:`explorer.graph_stats`
        builds it (exact, components counted, sampling notwithstanding).
        """
        X = inputs.upstream[0].X
        try:
            rule, invalid = self.rule, None
        except ValueError as exc:
            rule, invalid = None, exc
        if rule is not None and rule.is_knn:
            kwargs = {"hypo_max_nnz_row": inputs["hypo_max_nnz_row"],
                      "backend": inputs["backend"]}

            def knn_stats(report):
                report(f"building the {rule.graph} graph (k = {rule.n_neighbors})")
                return explorer.graph_stats(X, rule, components=True, **kwargs)

            return [knn_stats]
        policy = self.stats_policy(X.shape[0])
        kwargs = {"hypo_max_nnz_row": inputs["hypo_max_nnz_row"],
                  "backend": inputs["backend"], **policy}

        def stats(report, components):
            if invalid is not None:
                raise invalid
            report("counting the components" if components else "counting nonzeros per row")
            return explorer.graph_stats(X, rule, components=components, **kwargs)

        steps = [lambda report: stats(report, False)]
        if policy["sample_rows"] is None:
            steps.append(lambda report: stats(report, True))
        return steps

    def refresh_stats(self) -> bool:
        """Compute and publish the complete statistics here (what the app does in the
        background); True when they were published, False on an error."""
        return self.compute()

    def estimator_params(self) -> dict:
        """The keywords of :class:`explorer.SpectralClustering` these parameters set:
        the edge rule (the threshold of the chosen kind only), every other declared
        field, the builder's knobs, ``method`` and ``backend``.

        Raises
        ------
        ValueError
            Parameters that make no edge rule (a gaussian similarity threshold <= 0).
        """
        known = estimator_defaults()
        params = {name: getattr(self, name) for name in RUN_PARAMS if name in known}
        rule = self.rule.to_kwargs()
        rule.pop("graph", None)  # the estimator's name for the graph kind is `affinity`
        params.update(rule)
        if self.auto_affinity:
            # The library chooses the graph and its σ / threshold from the data: what is
            # given would decide for it ("threshold_sqdist given: the ε-graph").
            params.update(affinity="auto", sigma="auto", threshold_sqdist=None,
                          threshold_sim=None)
        else:
            params["affinity"] = GRAPH_AFFINITY[self.graph]
        return params


def _declare_new_fields() -> None:
    """Give every field of EDGE_FIELDS and BUILD_FIELDS that GraphState does not
    declare itself a parameter, with the estimator's default: a field added to the
    declaration needs a widget in the app, and no other change."""
    defaults = estimator_defaults()
    for fields in (EDGE_FIELDS, BUILD_FIELDS):
        for name, f in fields.items():
            if name in GraphState.param:
                continue
            default = defaults.get(name)
            if f.type is str and default not in f.choices:
                default = f.choices[0]
            GraphState.param.add_parameter(name, _param(f, default, allow_None=default is None))


_declare_new_fields()
