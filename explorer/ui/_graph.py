"""Graph parameters and their live statistics.

The parameters of the edge rule and of the builders are generated from their one
declaration (:data:`explorer.graph.EDGE_FIELDS`, :data:`explorer.graph.BUILD_FIELDS`:
type, bounds, help); :attr:`GraphState.rule` and :attr:`GraphState.options` are the
validated objects every job takes (:class:`explorer.EdgeRule`,
:class:`explorer.graph.BuildOptions`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

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

from ._errors import describe_error

#: The GraphState parameters the statistics depend on (the app watches them).
STATS_PARAMS = (*EDGE_FIELDS, "threshold_kind", "hypo_max_nnz_row", "backend")


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


def gpu_methods() -> tuple[str, ...]:
    """The GPU builders the GPU bridge offers; empty where no GPU can be used."""
    ok, _ = gpu_status()
    if not ok:
        return ()
    from explorer.graph import gpu  # imports CuPy: only where a device answers

    return tuple(gpu.GPU_METHODS)


@dataclass
class StatsOutcome:
    """What a statistics job produced."""

    stats: object = None
    seconds: float = 0.0
    error: str = ""
    key: tuple = ()


class GraphState(param.Parameterized):
    """The edge rule, the builder and its knobs, and the statistics they give.

    :meth:`prepare_stats` snapshots the parameters and returns a job that calls
    :func:`explorer.graph_stats` (any thread); :meth:`apply_stats` publishes its
    outcome if it still describes the current parameters. The statistics come in two
    steps: the nonzeros per row first (fast: what a moving slider needs), then,
    unless sampled, the connected components (a graph build, several times slower).
    """

    graph = _param(EDGE_FIELDS["graph"], "epsilon")
    n_neighbors = _param(EDGE_FIELDS["n_neighbors"], 10)
    local_neighbor = _param(EDGE_FIELDS["local_neighbor"], 7)
    metric = _param(EDGE_FIELDS["metric"], "gaussian")
    sigma = _param(EDGE_FIELDS["sigma"], 0.05)
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

    # Published statistics (apply_stats only).
    stats = param.Parameter(default=None, doc="explorer.GraphStats of the current parameters.")
    stats_seconds = param.Number(default=None, allow_None=True,
                                 doc="Seconds explorer.graph_stats took.")
    stats_error = param.String(default="")

    def __init__(self, **params):
        super().__init__(**params)
        self._published: tuple | None = None  # the key of the published statistics
        self._methods_for_backend()

    # -- consistency between parameters ----------------------------------------------
    @param.depends("metric", watch=True)
    def _threshold_kind_for_metric(self):
        allowed = THRESHOLD_KINDS[self.metric]
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
        sigma = self.sigma if self.metric == "gaussian" else None
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

    def build_kwargs(self) -> dict:
        """The graph keywords of explorer.build_graph: the validated ``rule`` and
        ``options`` objects, ``method`` and ``backend``."""
        return {"rule": self.rule, "options": self.options, "method": self.method,
                "backend": self.backend}

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

    def _key(self, X) -> tuple:
        """What the statistics depend on: a result is published only for the current key."""
        return (id(X), X.shape, self.graph, self.n_neighbors, self.local_neighbor,
                self.metric, self.sigma, self.threshold_kind,
                self.threshold_sqdist, self.threshold_sim, self.hypo_max_nnz_row, self.backend,
                self.exact_max_n, self.sample_rows)

    @property
    def stats_complete(self) -> bool:
        """True when the published statistics need no components job."""
        s = self.stats
        return s is None or s.estimated or s.n_components is not None

    def prepare_stats(self, X, components: bool = False) -> Callable[[], StatsOutcome]:
        """Snapshot the parameters; return the job computing the statistics of `X`.

        Parameters
        ----------
        X : ndarray
        components : bool
            False: the fast job (nonzeros per row; sampled on large data). True: the
            complete statistics with connected components (a transient graph build).

        Raises
        ------
        ValueError
            For ``components=True`` when there is nothing to add: the statistics are
            sampled (components cannot be estimated) or already complete.
        """
        key = self._key(X)
        policy = self.stats_policy(X.shape[0])
        if components:
            if policy["sample_rows"] is not None:
                raise ValueError("sampled statistics have no connected components")
            if self._published == key and self.stats_complete:
                raise ValueError("the statistics of these parameters are complete")
        try:
            rule, invalid = self.rule, None
        except ValueError as exc:
            rule, invalid = None, exc
        kwargs = {
            "hypo_max_nnz_row": self.hypo_max_nnz_row,
            "backend": self.backend,
            "components": components,
            **policy,
        }

        def job() -> StatsOutcome:
            t0 = time.perf_counter()
            try:
                if invalid is not None:
                    raise invalid
                stats = explorer.graph_stats(X, rule, **kwargs)
            except Exception as exc:
                return StatsOutcome(error=describe_error(exc, "computing graph statistics"),
                                    key=key)
            return StatsOutcome(stats=stats, seconds=time.perf_counter() - t0, key=key)

        return job

    def apply_stats(self, outcome: StatsOutcome, X) -> bool:
        """Publish statistics if they describe the current parameters and data `X`.

        Outcomes of older parameters (a slider moved on) are dropped, and fast
        statistics never replace complete ones of the same parameters.
        """
        key = self._key(X)
        if outcome.key != key:
            return False
        if (not outcome.error and outcome.stats.n_components is None and self._published == key
                and self.stats is not None and self.stats.n_components is not None):
            return False
        with param.parameterized.batch_call_watchers(self):
            self._published = key
            if outcome.error:
                self.stats_error = outcome.error
                self.stats = None
            else:
                self.stats_error = ""
                self.stats_seconds = outcome.seconds
                self.stats = outcome.stats
        return not outcome.error

    def refresh_stats(self, X) -> bool:
        """Compute and publish the complete statistics of `X` synchronously."""
        if not self.apply_stats(self.prepare_stats(X)(), X):
            return False
        if self.stats_complete:
            return True
        return self.apply_stats(self.prepare_stats(X, components=True)(), X)
