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

import numpy as np
import param

import explorer
from explorer._backend import gpu_status, to_numpy
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
from explorer.params import SPECTRAL_PARAMS, check_params
from explorer.pipeline import plan_points

from ._data import PLAN_SEED
from ._stage import Inputs, Stage

#: The GraphState parameters the statistics depend on.
STATS_PARAMS = (*EDGE_FIELDS, "threshold_kind", "local_sigma", "hypo_max_nnz_row", "backend",
                "representatives")

#: The GraphState parameters a run depends on (the graph it builds).
RUN_PARAMS = (*EDGE_FIELDS, "threshold_kind", "local_sigma", *BUILD_FIELDS, "method",
              "backend")

#: The graph kinds of the ``graph`` field and the estimator's ``affinity`` that builds
#: each (the estimator names the kNN union scikit-learn's way too, "nearest_neighbors").
GRAPH_AFFINITY = {"epsilon": "epsilon", "knn": "knn", "mutual_knn": "mutual_knn"}


def estimator_defaults() -> dict:
    """:class:`explorer.SpectralClustering`'s parameters and their defaults."""
    return explorer.SpectralClustering().get_params()


def field_param(f: Field, default, doc: str | None = None, **extra):
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

    graph = field_param(EDGE_FIELDS["graph"], "epsilon")
    n_neighbors = field_param(EDGE_FIELDS["n_neighbors"], 10)
    local_neighbor = field_param(EDGE_FIELDS["local_neighbor"], 7)
    metric = field_param(EDGE_FIELDS["metric"], "gaussian")
    sigma = field_param(EDGE_FIELDS["sigma"], 0.05)
    local_sigma = param.Boolean(
        default=False,
        doc="Self-tuning σ (sigma='local'): σi = the distance from i to its "
            "local_neighbor-th nearest other point, weight exp(-d²/(σiσj)); gaussian only.",
    )
    graph_note = param.String(
        default="",
        doc="The library's choice of graph for the data loaded and why (its plan), which "
            "the sidebar adopted on loading; '' before any data.",
    )
    representatives = param.Dict(
        default=None, allow_None=True,
        doc="None when a run builds the graph of the points; in representatives mode the "
            "keywords of the representatives it extracts (n_representatives, "
            "random_state, n_clusters): the statistics then describe their graph.",
    )
    threshold_kind = param.Selector(default="sqdist", objects=["sqdist", "sim"],
                                    doc="Threshold on the squared distance or on the similarity.")
    threshold_sqdist = field_param(EDGE_FIELDS["threshold_sqdist"], 0.01)
    threshold_sim = field_param(EDGE_FIELDS["threshold_sim"], 0.5)
    method = param.Selector(default="auto", objects=["auto", *CPU_METHODS])
    hypo_max_nnz_row = field_param(
        BUILD_FIELDS["hypo_max_nnz_row"], None, allow_None=True,
        doc="CSR-2's ELLPACK width hypoMaxNnzRow. None: a CSR-2 run takes its default "
            f"({DEFAULT_HYPO_LOW_D} for d < {HYPO_HIGH_D}, else {DEFAULT_HYPO_HIGH_D}) and "
            "the statistics show the suggested width (explorer.graph.suggest_hypo).",
    )
    sp_max_nz_pct = field_param(BUILD_FIELDS["sp_max_nz_pct"], None, allow_None=True,
                           doc="CSR-3's bound on the % of nonzeros; None: estimated.")
    mem_use_rate = field_param(BUILD_FIELDS["mem_use_rate"], None, allow_None=True,
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
        # σ = local goes with the library's kNN graphs, a number with its ε rule: the
        # weights follow a change of graph kind, as they would in the library.
        self._epsilon_local = False
        self._reps_cache = None  # (key, representatives) of representatives_of
        self.param.watch(self._kind_changed, "graph")
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

    def adopt(self, rule: EdgeRule, epsilon: EdgeRule | None = None) -> None:
        """Take an edge rule (the library's choice for the data) and centre the σ and
        threshold sliders on `epsilon` (the library's ε-graph rule for the same points;
        `rule` itself when it is one)."""
        epsilon = rule if epsilon is None else epsilon
        self._epsilon_local = epsilon.local_sigma
        with param.parameterized.batch_call_watchers(self):
            if epsilon.graph == "epsilon":
                self.metric = epsilon.metric
                if isinstance(epsilon.sigma, float):
                    self.sigma = epsilon.sigma
                    c = math.log10(self.sigma)
                    self.log_sigma_range = (c - LOG_SPAN, c + LOG_SPAN)
                self.threshold_kind = epsilon.threshold_kind
                if epsilon.threshold_kind == "sqdist":
                    self.threshold_sqdist = epsilon.threshold
                    c = math.log10(self.threshold_sqdist)
                    self.log_sqdist_range = (c - LOG_SPAN, c + LOG_SPAN)
                else:
                    self.threshold_sim = epsilon.threshold
            self.graph = rule.graph
            if rule.is_knn:
                self.metric = rule.metric
                self.n_neighbors = rule.n_neighbors
            self.local_sigma = rule.local_sigma
            if rule.local_sigma:
                self.local_neighbor = rule.local_neighbor
            self.hypo_max_nnz_row = None

    def _kind_changed(self, event) -> None:
        """ε ↔ kNN by hand: the weights the library takes for that kind (σ = local for
        a kNN graph, the ε rule's σ for the ε-graph)."""
        if (event.old == "epsilon") == (event.new == "epsilon"):
            return
        self.local_sigma = self._epsilon_local if event.new == "epsilon" else (
            self.metric == "gaussian")

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
        load = inputs.upstream[0]
        X = load.X if inputs["representatives"] is None else self.representatives_of(
            load, inputs["representatives"], inputs["backend"])
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

    def representatives_of(self, load, keywords: dict, backend: str):
        """The representatives a run of `keywords` extracts from the loaded points
        (:func:`explorer.pipeline.plan_points`, the run's own first step), on the host;
        kept while the data and the keywords stay (the data's plan extracted those of
        the defaults already)."""
        key = (id(load), tuple(sorted(keywords.items())), backend)
        if self._reps_cache is not None and self._reps_cache[0] == key:
            return self._reps_cache[1]
        defaults = {"n_representatives": "auto", "random_state": PLAN_SEED}
        if load.representatives is not None and backend == "auto" and all(
                keywords.get(k) == v for k, v in defaults.items()):
            reps = load.representatives
        else:
            params = check_params(SPECTRAL_PARAMS, {
                **keywords, "mode": "representatives", "backend": backend})
            reps = np.asarray(to_numpy(plan_points(load.X, params).points))
        self._reps_cache = (key, reps)
        return reps

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
            GraphState.param.add_parameter(
                name, field_param(f, default, allow_None=default is None))


_declare_new_fields()
