"""What an edge is (:class:`EdgeRule`) and how a builder may build it (:class:`BuildOptions`).

Both are frozen and validated when they are made, once, at the public entry
(:func:`explorer.build_graph`, :func:`explorer.graph_stats`,
:class:`explorer.SpectralClustering`, the CLI, the app), and carried down to the
builders, which never validate again. Every builder (CPU and GPU, CSR-1/2/3 and the
rest) obeys the table of docs/architecture.md "Semantics":

=========  ===================  ============================  ==========================
metric     threshold            edge (i, j), i != j, iff      weight s_ij
=========  ===================  ============================  ==========================
gaussian   threshold_sqdist=t   ||xi - xj||^2 < t             exp(-||xi - xj||^2 / 2σ^2)
gaussian   threshold_sim=t      s_ij > t                      exp(-||xi - xj||^2 / 2σ^2)
cosine     threshold_sim=t      s_ij > t                      xi·xj / (||xi|| ||xj||)
uniform    threshold_sqdist=t   ||xi - xj||^2 < t             1
=========  ===================  ============================  ==========================

A gaussian similarity threshold is the distance threshold ``-2σ² ln t`` in disguise
(exp is monotone), so the builders only ever compare either a squared distance
(``compares == "sqdist"``) or a cosine (``compares == "cosine"``).

The graph kind (``graph``): ``"epsilon"`` (the table above), ``"knn"`` (edge iff j is
among the `n_neighbors` nearest other points of i or i among those of j: the union) or
``"mutual_knn"`` (both: the intersection); "nearest" is by squared distance (cosine:
by similarity), ties broken by the lower index. A kNN graph needs no threshold; one
given as well drops the kNN edges that fail it. Self-tuning σ (``sigma="local"``,
Zelnik-Manor & Perona): σi is the distance from i to its `local_neighbor`-th nearest
other point and the weight is ``exp(-‖xi - xj‖² / (σi σj))``, for every graph kind.

The fields are declared once, in :data:`EDGE_FIELDS` and :data:`BUILD_FIELDS` (name,
type, bounds, help); the validation here, the command line's flags and the app's
parameters are generated from those declarations. Defaults the builders need are
computed here only: :func:`default_hypo_max_nnz_row` (CSR-2's width) and, from the
data, :meth:`EdgeRule.suggest` (σ and the threshold).
"""

from __future__ import annotations

import math
import numbers
import types
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from .._validation import check_choice, check_float
from ..inputs import prepare_input
from ..params import (  # noqa: F401  (the declarations, re-exported for the graph layer)
    BUILD_FIELDS,
    DEFAULT_LOCAL_NEIGHBOR,
    DEFAULT_N_NEIGHBORS,
    EDGE_FIELDS,
    GRAPHS,
    LOCAL_SIGMA,
    MAX_NEIGHBORS,
    METRICS,
    SPECTRAL_PARAMS,
    Field,
)

#: Threshold kinds each metric takes (docs/architecture.md "Semantics"), the first its default.
THRESHOLD_KINDS = {"gaussian": ("sqdist", "sim"), "cosine": ("sim",), "uniform": ("sqdist",)}

#: Relative width of the float32 rounding band around a threshold
#: (docs/architecture.md "Exactness"): pairs whose float64 value lies this close to the
#: threshold may be decided either way by a float32 builder.
BAND_RTOL = 1e-5

#: CSR-2's ELLPACK width when none is given, by dimension: the smallest widths of the
#: paper's runs (Table 5: 16-64 on the 4-D sets, 512-2048 on MNIST). CSR-2 exists to
#: avoid a counting pass, so the default is a constant, not a count; rows past it go
#: to supPass. See :func:`default_hypo_max_nnz_row`.
DEFAULT_HYPO_LOW_D = 32
DEFAULT_HYPO_HIGH_D = 512
#: From this many features the high-d width applies (the kernels' ``HIGH_D``).
HYPO_HIGH_D = 64

#: float32's range: every builder compares and weighs in float32 (DESIGN.md
#: "Semantics"), so the derived values of a rule (2σ², its inverse, the cutoffs) must
#: be normal float32 numbers.
F32_TINY = float(np.finfo(np.float32).tiny)
F32_MAX = float(np.finfo(np.float32).max)
#: exp(-x) is 0 in float32 (below its smallest subnormal) from this x on.
F32_EXP_UNDERFLOW = -math.log(float(np.finfo(np.float32).smallest_subnormal))
#: sigma's range: 2σ² and 1/(2σ²) both normal float32 numbers.
SIGMA_MIN = math.sqrt(F32_TINY / 2.0) * (1.0 + 1e-6)
SIGMA_MAX = math.sqrt(F32_MAX / 2.0) * (1.0 - 1e-6)

#: CSR-3's memUseRate when not given: the paper's best on every benchmark (sect. 6.3.3).
DEFAULT_MEM_USE_RATE = 0.8


def default_hypo_max_nnz_row(d: int) -> int:
    """CSR-2's ``hypoMaxNnzRow`` when none is given: 32 for ``d < 64``, else 512.

    The one place this default is worked out; the GPU builder runs with it and the
    :class:`~explorer.Graph` it returns records it (``graph.options``).
    """
    return DEFAULT_HYPO_HIGH_D if int(d) >= HYPO_HIGH_D else DEFAULT_HYPO_LOW_D


# --- the edge rule ---------------------------------------------------------------------


def _at_most_one_threshold(threshold_sqdist, threshold_sim) -> None:
    if threshold_sqdist is not None and threshold_sim is not None:
        raise ValueError(
            "give exactly one of threshold_sqdist and threshold_sim; got both "
            f"(threshold_sqdist={threshold_sqdist!r}, threshold_sim={threshold_sim!r})"
        )


class MissingThreshold(ValueError):
    """A ready suggestion has no threshold for the metric asked for.

    Attributes
    ----------
    metric : str
    kind : {"sqdist", "sim"}
        The threshold kind the metric needs.
    """

    def __init__(self, metric: str, kind: str, message: str):
        super().__init__(message)
        self.metric, self.kind = metric, kind


@dataclass(frozen=True)
class EdgeRule:
    """A validated edge rule: which pairs are edges and what they weigh.

    Make one with :meth:`from_args` (the keywords of :func:`explorer.build_graph`) or
    :meth:`suggest` (choose what is left out from the data); constructing it directly
    validates the fields too.

    Attributes
    ----------
    metric : {"gaussian", "cosine", "uniform"}
    sigma : float, "local" or None
        Gaussian width, or ``"local"`` for self-tuning σ (σi: the distance from i to
        its `local_neighbor`-th nearest other point; weight ``exp(-d²/(σi σj))``);
        None for the other metrics.
    threshold_kind : {"sqdist", "sim"} or None
        Which threshold keyword the rule has; None for a kNN graph without one.
    threshold : float or None
        Its value.
    suggested : tuple of str
        The keywords :meth:`suggest` chose from the data (not compared: a rule is its
        values, however they were found).
    graph : {"epsilon", "knn", "mutual_knn"}
        The graph kind: edges by the threshold, or the `n_neighbors` nearest others of
        each point symmetrised as the union (``"knn"``) or the intersection
        (``"mutual_knn"``); a threshold given with a kNN graph also drops the kNN
        edges that fail it.
    n_neighbors : int
        k of the kNN graphs (ignored by ``"epsilon"``).
    local_neighbor : int
        m of ``sigma="local"`` (ignored otherwise).

    Examples
    --------
    >>> from explorer import EdgeRule
    >>> rule = EdgeRule.from_args("gaussian", sigma=0.1, threshold_sim=0.5)
    >>> round(rule.sqdist_cutoff, 6), rule.threshold_sqdist, rule.threshold_sim
    (0.013863, None, 0.5)
    >>> EdgeRule.from_args("gaussian", sigma="local", graph="knn", n_neighbors=10).describe()
    'knn k=10 (union), gaussian σ=local (m=7)'
    """

    metric: str
    sigma: float | str | None
    threshold_kind: str | None
    threshold: float | None
    suggested: tuple = field(default=(), compare=False)
    graph: str = "epsilon"
    n_neighbors: int = DEFAULT_N_NEIGHBORS
    local_neighbor: int = DEFAULT_LOCAL_NEIGHBOR

    def __post_init__(self):
        check_choice(self.metric, "metric", METRICS)
        graph = EDGE_FIELDS["graph"].check(self.graph)
        k = EDGE_FIELDS["n_neighbors"].check(self.n_neighbors)
        m = EDGE_FIELDS["local_neighbor"].check(self.local_neighbor)
        object.__setattr__(self, "n_neighbors", k)
        object.__setattr__(self, "local_neighbor", m)
        if self.threshold_kind is None or self.threshold is None:
            if graph == "epsilon":
                raise ValueError(
                    "graph='epsilon' needs a threshold: give exactly one of threshold_sqdist "
                    f"and threshold_sim (got threshold_kind={self.threshold_kind!r}, "
                    f"threshold={self.threshold!r}); a kNN graph (graph='knn' or "
                    "'mutual_knn') needs none"
                )
            if (self.threshold_kind, self.threshold) != (None, None):
                raise ValueError(
                    "threshold_kind and threshold go together: both None (no threshold) or "
                    f"both given; got threshold_kind={self.threshold_kind!r}, "
                    f"threshold={self.threshold!r}"
                )
            t = None
        else:
            t = self._check_threshold()
        local = isinstance(self.sigma, str) and self.sigma == LOCAL_SIGMA
        if self.metric == "gaussian":
            if self.sigma is None:
                raise ValueError("metric='gaussian' needs sigma > 0; got sigma=None "
                                 "(sigma='local' for self-tuning weights)")
            sigma = EDGE_FIELDS["sigma"].check(self.sigma)
        else:
            sigma = None
        if local and self.metric == "gaussian" and self.threshold_kind == "sim":
            raise ValueError(
                f"sigma='local' with threshold_sim={t!r}: a similarity threshold is a "
                "distance cutoff -2σ² ln t, which no single σ gives under local scaling; "
                "give threshold_sqdist (or a kNN graph without a threshold)"
            )
        if isinstance(sigma, float) and not SIGMA_MIN <= sigma <= SIGMA_MAX:
            two = 2.0 * sigma * sigma  # float64: 0 or inf at the extremes, never raises
            what = "underflows" if sigma < SIGMA_MIN else "overflows"
            raise ValueError(
                f"sigma={sigma!r} is out of range: 2σ² = {two:.3g} {what} float32, the "
                f"precision every builder weighs in (exp(-‖xi−xj‖²/(2σ²))); allowed: "
                f"[{SIGMA_MIN:.3g}, {SIGMA_MAX:.3g}]; rescale the data (and sigma with it)"
            )
        if isinstance(sigma, float) and self.threshold_kind == "sim":
            cutoff = -2.0 * sigma * sigma * math.log(t)
            if not F32_TINY <= cutoff <= F32_MAX:
                raise ValueError(
                    f"sigma={sigma!r} with threshold_sim={t!r} gives the squared-distance "
                    f"cutoff -2σ² ln t = {cutoff:.3g}, beyond float32's normal range "
                    f"[{F32_TINY:.3g}, {F32_MAX:.3g}]; raise sigma or lower threshold_sim"
                )
        object.__setattr__(self, "threshold", t)
        object.__setattr__(self, "sigma", sigma)
        object.__setattr__(self, "graph", graph)
        object.__setattr__(self, "suggested", tuple(self.suggested))

    def _check_threshold(self) -> float:
        """Validate the threshold kind and value against the metric; return the value."""
        check_choice(self.threshold_kind, "threshold_kind", ("sqdist", "sim"))
        name = f"threshold_{self.threshold_kind}"
        if self.threshold_kind not in THRESHOLD_KINDS[self.metric]:
            if self.metric == "cosine":
                raise ValueError(
                    "metric='cosine' takes threshold_sim in [-1, 1); "
                    f"got threshold_sqdist={self.threshold!r}"
                )
            raise ValueError(
                f"metric='uniform' takes threshold_sqdist > 0; got threshold_sim={self.threshold!r}"
            )
        if self.threshold_kind == "sqdist" or self.metric == "cosine":
            t = EDGE_FIELDS[name].check(self.threshold)
        else:  # gaussian similarity lies in (0, 1]; t = 0 would keep underflowed pairs
            t = check_float(self.threshold, name, low=0.0, high=1.0, low_inclusive=False,
                            high_inclusive=False)
        if self.threshold_kind == "sqdist" and not F32_TINY <= t <= F32_MAX:
            raise ValueError(
                f"{name}={t!r} is out of range: beyond float32's normal range "
                f"[{F32_TINY:.3g}, {F32_MAX:.3g}], the precision every builder compares in; "
                "rescale the data (and the threshold with it)"
            )
        return t

    @property
    def is_knn(self) -> bool:
        """True for the kNN graph kinds (``"knn"``, ``"mutual_knn"``)."""
        return self.graph != "epsilon"

    @property
    def local_sigma(self) -> bool:
        """True when the weights are self-tuning (``sigma="local"``, gaussian)."""
        return self.sigma == LOCAL_SIGMA

    @property
    def has_threshold(self) -> bool:
        """Whether the rule thresholds pairs (always for ε; optional for kNN graphs)."""
        return self.threshold_kind is not None

    @property
    def pattern_rule(self) -> EdgeRule:
        """The ε rule the ε builders run for this rule's pattern and fixed weights.

        The rule itself for a fixed σ; under ``sigma="local"`` the uniform rule of the
        same squared-distance threshold (same edges; the weights are recomputed from
        the data afterwards, :func:`explorer.graph.knn.local_scale_weights`). Only for
        rules with a threshold.
        """
        if not self.has_threshold:
            raise AttributeError("a kNN rule without a threshold has no ε pattern rule")
        base = EdgeRule(self.metric, self.sigma, self.threshold_kind, self.threshold)
        if self.local_sigma:
            return EdgeRule("uniform", None, "sqdist", self.threshold)
        return base

    @property
    def zero_weight_sqdist(self) -> float | None:
        """Squared distance from which a gaussian weight is 0 in float32 (it underflows:
        ``2σ² · 103.3``); None for the other metrics (no weight vanishes) and for
        ``sigma="local"`` (the point depends on the pair)."""
        if self.metric != "gaussian" or self.local_sigma:
            return None
        return 2.0 * self.sigma * self.sigma * F32_EXP_UNDERFLOW

    @property
    def weights_can_vanish(self) -> bool:
        """Whether some edges under this rule may have weight 0 in float32 (gaussian,
        squared-distance threshold beyond :attr:`zero_weight_sqdist`)."""
        z = self.zero_weight_sqdist
        return z is not None and self.threshold_kind == "sqdist" and self.threshold > z

    @classmethod
    def from_args(cls, metric="gaussian", sigma=None, threshold_sqdist=None, threshold_sim=None,
                  *, graph="epsilon", n_neighbors=DEFAULT_N_NEIGHBORS,
                  local_neighbor=DEFAULT_LOCAL_NEIGHBOR):
        """Validate the user's keywords and return the edge rule.

        `sigma` (a number or ``"local"``) is required for ``metric="gaussian"`` and
        ignored by the others (as scikit-learn ignores ``gamma`` for kernels that do
        not use it), so switching metric in an estimator or a UI needs no other change.
        ``graph="epsilon"`` needs exactly one threshold; the kNN graphs take at most one.

        Raises
        ------
        ValueError
            Unknown metric or graph, a missing or doubled threshold, a threshold kind
            the metric does not take, or a value out of its range.
        """
        check_choice(metric, "metric", METRICS)
        EDGE_FIELDS["graph"].check(graph)
        _at_most_one_threshold(threshold_sqdist, threshold_sim)
        if threshold_sqdist is None and threshold_sim is None and graph == "epsilon":
            raise ValueError(
                "give exactly one of threshold_sqdist and threshold_sim; got neither "
                "(threshold_sqdist=None, threshold_sim=None); EdgeRule.suggest(X) chooses "
                "one from the data, and graph='knn' needs none"
            )
        knn = {"graph": graph, "n_neighbors": n_neighbors, "local_neighbor": local_neighbor}
        if threshold_sqdist is not None:
            return cls(metric, sigma, "sqdist", threshold_sqdist, **knn)
        if threshold_sim is not None:
            return cls(metric, sigma, "sim", threshold_sim, **knn)
        return cls(metric, sigma, None, None, **knn)

    @classmethod
    def suggest(cls, X, metric="auto", sigma="auto", threshold_sqdist=None, threshold_sim=None,
                *, n_clusters=None, suggestion=None, n_neighbors=DEFAULT_N_NEIGHBORS,
                random_state=0, graph="epsilon", local_neighbor=DEFAULT_LOCAL_NEIGHBOR):
        """The edge rule of the given keywords, with what is left out chosen from `X`.

        Explicit values always win; ``"auto"`` (or no threshold at all) is filled in
        by the rule of :func:`explorer.graph.suggest_params` (see Notes there and in
        :class:`explorer.SpectralClustering`). :class:`explorer.SpectralClustering`,
        the command line and the app all come here.

        Parameters
        ----------
        X : ndarray of shape (n, d)
            The data (validated: :func:`explorer.build_graph` checks it; NumPy or
            CuPy, copied to the host only when a threshold or σ must be searched).
        metric : {"auto", "gaussian", "cosine", "uniform"}
            ``"auto"``: ``"gaussian"`` when a `threshold_sqdist` is given or
            ``d <= 8``, else ``"cosine"`` (the suggestion's metric, when given) unless
            the cosine rule finds no positive threshold (rows pointing every which
            way, as centred data do), where ``"gaussian"`` is taken.
        sigma : float or "auto"
            ``"auto"``: ``sqrt(t / 8)`` for the squared-distance cutoff ``t``
            (given, or chosen from the data); ignored by the other metrics.
        threshold_sqdist, threshold_sim : float or None
            At most one; neither: chosen from the data for the metric.
        n_clusters : int or "auto", optional
            The k the graph is for: no more components than k is one of the
            threshold search's tests.
        suggestion : dict, optional
            Graph keywords to take the missing values from instead of computing them
            (a data set's ``preset``: the paper's settings).
        n_neighbors : int
            The neighbour count the threshold is measured in, and k of a kNN graph.
        random_state : int
            Seeds the row samples of the search (fixed, so the same data gets the
            same rule).
        graph : {"epsilon", "knn", "mutual_knn"}
            A kNN graph needs no threshold and none is searched: ``metric="auto"`` is
            the suggestion's metric when given, else ``"gaussian"`` (Euclidean
            neighbours, as scikit-learn's ``affinity="nearest_neighbors"``), and
            ``sigma="auto"`` is ``"local"`` (self-tuning; the ε rule's σ when a
            gaussian similarity threshold is given, which needs one σ).
        local_neighbor : int
            m of ``sigma="local"``.

        Returns
        -------
        EdgeRule
            With :attr:`suggested` naming the keywords that were chosen.

        Raises
        ------
        ValueError
            Invalid given values; a `suggestion` without a threshold for the metric.
        """
        if metric != "auto":
            check_choice(metric, "metric", METRICS)
        n_neighbors = EDGE_FIELDS["n_neighbors"].check(n_neighbors)
        graph = EDGE_FIELDS["graph"].check(graph)
        local_neighbor = EDGE_FIELDS["local_neighbor"].check(local_neighbor)
        _at_most_one_threshold(threshold_sqdist, threshold_sim)
        for name, value in (("threshold_sqdist", threshold_sqdist),
                            ("threshold_sim", threshold_sim)):
            EDGE_FIELDS[name].check(value, allow_none=True)
        if sigma is not None and not (isinstance(sigma, str) and sigma == "auto"):
            EDGE_FIELDS["sigma"].check(sigma)
        if n_clusters is not None:
            SPECTRAL_PARAMS["n_clusters"].check(n_clusters)
        knn = {"graph": graph, "n_neighbors": n_neighbors, "local_neighbor": local_neighbor}
        # The one input stage: validated, a large offset taken off for distance rules,
        # data of extreme magnitude brought into float32's range (given lengths with it).
        data = prepare_input(X, center=metric != "cosine")
        unit = data.unit
        if unit != 1.0:
            if isinstance(sigma, numbers.Real) and not isinstance(sigma, bool):
                sigma = float(sigma) * unit
            if threshold_sqdist is not None:
                threshold_sqdist = float(threshold_sqdist) * unit * unit
        args = (metric, sigma, threshold_sqdist, threshold_sim, n_clusters, suggestion,
                n_neighbors, random_state, knn)
        rule = cls._suggest_prepared(data.X, *args)
        if rule.compares == "cosine" and data.shift is not None:
            # "auto" chose the cosine, which is not translation invariant: the data as
            # given, not centred.
            rule = cls._suggest_prepared(prepare_input(X, center=False).X, *args)
        return rule.rescaled(1.0 / unit)

    @classmethod
    def _suggest_prepared(cls, X, metric, sigma, threshold_sqdist, threshold_sim, n_clusters,
                          suggestion, n_neighbors, random_state, knn) -> EdgeRule:
        """:meth:`suggest` on validated float32 points, the keywords checked."""
        if knn["graph"] != "epsilon":
            return cls._suggest_knn(X, metric, sigma, threshold_sqdist, threshold_sim,
                                    suggestion, knn)
        from .._backend import to_numpy
        from . import suggest as data_suggest

        d = int(X.shape[1])
        host = []  # X on the host, converted once if a search needs it

        def data():
            if not host:
                host.append(np.ascontiguousarray(to_numpy(X), dtype=np.float32))
            return host[0]

        chosen = []
        base = dict(suggestion) if suggestion is not None else None
        if metric == "auto":
            if threshold_sqdist is not None:  # the one metric that takes it and a σ
                metric = "gaussian"
            else:
                if base is not None and base.get("metric") in METRICS:
                    metric = base["metric"]
                    if threshold_sim is not None and metric == "uniform":
                        metric = "gaussian"
                else:
                    metric = "gaussian" if d <= data_suggest.LOW_D else "cosine"
                chosen.append("metric")
        if metric == "cosine" and threshold_sqdist is not None:
            cls.from_args(metric, None, threshold_sqdist)  # raises: cosine takes sim only
        integral = isinstance(n_clusters, numbers.Integral) and not isinstance(n_clusters, bool)
        n_classes = int(n_clusters) if integral else None

        cutoff = [None]  # the squared-distance cutoff chosen from the data, computed once

        def data_cutoff():
            if cutoff[0] is None:
                cutoff[0] = data_suggest.suggest_sqdist(
                    data(), n_classes=n_classes, n_neighbors=n_neighbors,
                    random_state=random_state)
            return cutoff[0]

        if threshold_sqdist is None and threshold_sim is None:
            kind = THRESHOLD_KINDS[metric][0]
            if base is not None:
                value = base.get(f"threshold_{kind}")
                same = (base.get("metric") == "cosine") == (metric == "cosine")
                if value is None or not same:
                    raise MissingThreshold(metric, kind,
                        f"metric={metric!r} needs threshold_{kind}: the suggestion for this data "
                        f"({base}) has no threshold of that kind"
                    )
            else:
                value = None
                if metric == "cosine":
                    value = data_suggest.suggest_cosine(data(), n_neighbors=n_neighbors,
                                                    random_state=random_state)
                    if value <= 0 and "metric" in chosen:
                        # Rows pointing every which way (centred data): no cosine
                        # neighbourhoods; the squared distance is taken instead.
                        metric, kind, value = "gaussian", "sqdist", None
                if value is None:
                    value = data_cutoff()
            if kind == "sqdist":
                threshold_sqdist = value
            else:
                threshold_sim = value
            chosen.append(f"threshold_{kind}")
        if isinstance(sigma, str) and sigma == "auto":
            if metric != "gaussian":
                sigma = None
            else:
                if base is not None and base.get("sigma") is not None:
                    sigma = base["sigma"]
                elif threshold_sqdist is not None:
                    sigma = data_suggest.sigma_for(threshold_sqdist)
                else:
                    sigma = data_suggest.sigma_for(data_cutoff())
                chosen.append("sigma")
        rule = cls.from_args(metric, sigma, threshold_sqdist, threshold_sim, **knn)
        return cls(rule.metric, rule.sigma, rule.threshold_kind, rule.threshold,
                   suggested=tuple(chosen), **knn)

    @classmethod
    def _suggest_knn(cls, X, metric, sigma, threshold_sqdist, threshold_sim, suggestion,
                     knn) -> EdgeRule:
        """:meth:`suggest` for a kNN graph (validated keywords): no threshold search."""
        chosen = []
        base = dict(suggestion) if suggestion is not None else {}
        if metric == "auto":
            metric = "gaussian"
            if threshold_sqdist is None and base.get("metric") in METRICS:
                metric = base["metric"]
                if threshold_sim is not None and metric == "uniform":
                    metric = "gaussian"
            chosen.append("metric")
        if isinstance(sigma, str) and sigma == "auto":
            sigma = None
            if metric == "gaussian":
                sigma = LOCAL_SIGMA
                if threshold_sim is not None:  # a similarity cutoff needs one σ
                    from .._backend import to_numpy
                    from . import suggest as data_suggest

                    host = np.ascontiguousarray(to_numpy(X), dtype=np.float32)
                    sigma = base.get("sigma") or data_suggest.sigma_for(
                        data_suggest.suggest_sqdist(host, n_neighbors=knn["n_neighbors"]))
                chosen.append("sigma")
        rule = cls.from_args(metric, sigma, threshold_sqdist, threshold_sim, **knn)
        return cls(rule.metric, rule.sigma, rule.threshold_kind, rule.threshold,
                   suggested=tuple(chosen), **knn)

    def rescaled(self, factor: float) -> EdgeRule:
        """The same rule for points multiplied by `factor`: σ times `factor`, a
        squared-distance threshold times its square (similarity thresholds, cosines and
        self-tuning σ do not change). The input stage brings data of extreme magnitude
        into float32's range this way, and reports rules in the input's units."""
        if factor == 1.0:
            return self
        sigma = self.sigma * factor if isinstance(self.sigma, float) else self.sigma
        threshold = self.threshold
        if self.threshold_kind == "sqdist":
            threshold = self.threshold * factor * factor
        out = object.__new__(type(self))
        for name, value in self.__dict__.items():
            object.__setattr__(out, name, value)
        object.__setattr__(out, "sigma", sigma)
        object.__setattr__(out, "threshold", threshold)
        return out

    @property
    def compares(self) -> str:
        """``"cosine"`` or ``"sqdist"``: the quantity a builder thresholds."""
        return "cosine" if self.metric == "cosine" else "sqdist"

    @property
    def threshold_sqdist(self) -> float | None:
        """The `threshold_sqdist` keyword of the rule (None for a similarity rule or none)."""
        return self.threshold if self.threshold_kind == "sqdist" else None

    @property
    def threshold_sim(self) -> float | None:
        """The `threshold_sim` keyword of the rule (None for a distance rule)."""
        return self.threshold if self.threshold_kind == "sim" else None

    @property
    def sqdist_cutoff(self) -> float:
        """Edge iff squared distance < this (metrics that compare distances only)."""
        if self.compares != "sqdist":
            raise AttributeError("a cosine rule has no squared-distance cutoff")
        if not self.has_threshold:
            raise AttributeError("a kNN rule without a threshold has no squared-distance cutoff")
        if self.threshold_kind == "sqdist":
            return self.threshold
        return -2.0 * self.sigma**2 * math.log(self.threshold)

    @property
    def radius(self) -> float | None:
        """ε = sqrt(sqdist_cutoff): the neighbourhood radius; None for a cosine rule or
        a kNN rule without a threshold."""
        if self.compares != "sqdist" or not self.has_threshold:
            return None
        return math.sqrt(self.sqdist_cutoff)

    @property
    def band(self) -> float:
        """Half-width of the rounding band around the compared threshold, in its units.

        Relative to the threshold for squared distances. Cosines are bounded by 1 and a
        float32 dot product errs in absolute terms, so their band is relative to
        ``max(|t|, 1)``: a threshold near 0 would otherwise get a band far narrower
        than float32 can resolve.
        """
        if self.compares == "sqdist":
            return BAND_RTOL * self.sqdist_cutoff
        return BAND_RTOL * max(abs(self.threshold), 1.0)

    def to_kwargs(self) -> dict:
        """The rule as the keywords of :func:`explorer.build_graph` that make it.

        Always the four of the ε rule (``metric``, ``sigma``, ``threshold_sqdist``,
        ``threshold_sim``; None where unused); ``graph`` and ``n_neighbors`` too for a
        kNN graph, and ``local_neighbor`` for ``sigma="local"``.
        """
        out = {"metric": self.metric, "sigma": self.sigma,
               "threshold_sqdist": self.threshold_sqdist, "threshold_sim": self.threshold_sim}
        if self.is_knn:
            out.update(graph=self.graph, n_neighbors=self.n_neighbors)
        if self.local_sigma:
            out["local_neighbor"] = self.local_neighbor
        return out

    def describe(self) -> str:
        """One line for tables and logs, e.g. ``gaussian σ=0.01, ‖xi−xj‖² < 0.0008`` or
        ``knn k=10 (union), gaussian σ=local (m=7)``."""
        if self.metric == "cosine":
            head = "cosine"
        elif self.metric == "uniform":
            head = "uniform"
        elif self.local_sigma:
            head = f"gaussian σ=local (m={self.local_neighbor})"
        else:
            head = f"gaussian σ={self.sigma:g}"
        if self.threshold_kind == "sim" and self.metric == "cosine":
            tail = f", s > {self.threshold:g}"
        elif self.threshold_kind == "sim":
            tail = f", s > {self.threshold:g} (‖xi−xj‖² < {self.sqdist_cutoff:.6g})"
        elif self.threshold_kind == "sqdist":
            tail = f", ‖xi−xj‖² < {self.threshold:g}"
        else:
            tail = ""
        if self.is_knn:
            how = "union" if self.graph == "knn" else "mutual"
            return f"{self.graph} k={self.n_neighbors} ({how}), {head}{tail}"
        return head + tail


# --- the build options -----------------------------------------------------------------


@dataclass(frozen=True)
class BuildOptions:
    """The builders' knobs, validated: None means the builder's default.

    Attributes
    ----------
    hypo_max_nnz_row : int or None
        CSR-2's ELLPACK width (default :func:`default_hypo_max_nnz_row`).
    sp_max_nz_pct : float or None
        CSR-3's bound on the percentage of nonzeros (default: from a counting pass
        on a sample of rows, GPU only).
    mem_use_rate : float or None
        CSR-3's share of free GPU memory (default 0.8, GPU only).
    block_shapes : mapping or None
        Kernel name to CUDA block shape (read-only; GPU only).
    """

    hypo_max_nnz_row: int | None = None
    sp_max_nz_pct: float | None = None
    mem_use_rate: float | None = None
    block_shapes: Mapping | None = field(default=None, hash=False)

    def __post_init__(self):
        for name, f in BUILD_FIELDS.items():
            object.__setattr__(self, name, f.check(getattr(self, name), allow_none=True))
        shapes = self.block_shapes
        if shapes is not None:
            if not isinstance(shapes, Mapping):
                raise TypeError(
                    "block_shapes must be None or a mapping of kernel name to block shape, "
                    f"e.g. {{'fullPass': (32, 4)}}; got {shapes!r} ({type(shapes).__name__})"
                )
            object.__setattr__(self, "block_shapes", types.MappingProxyType(dict(shapes)))

    @classmethod
    def from_args(cls, hypo_max_nnz_row=None, sp_max_nz_pct=None, mem_use_rate=None,
                  block_shapes=None):
        """Validate the keywords of :func:`explorer.build_graph` and return the options."""
        return cls(hypo_max_nnz_row, sp_max_nz_pct, mem_use_rate, block_shapes)

    def __reduce__(self):  # the read-only mapping does not pickle; a dict copy does
        shapes = None if self.block_shapes is None else dict(self.block_shapes)
        return (type(self), (self.hypo_max_nnz_row, self.sp_max_nz_pct, self.mem_use_rate,
                             shapes))

    def hypo_for(self, d: int) -> int:
        """The width CSR-2 runs with on `d` features: the one given, else the default."""
        if self.hypo_max_nnz_row is not None:
            return self.hypo_max_nnz_row
        return default_hypo_max_nnz_row(d)

    def to_kwargs(self) -> dict:
        """The options as keywords of :func:`explorer.build_graph`."""
        return {"hypo_max_nnz_row": self.hypo_max_nnz_row, "sp_max_nz_pct": self.sp_max_nz_pct,
                "mem_use_rate": self.mem_use_rate,
                "block_shapes": None if self.block_shapes is None else dict(self.block_shapes)}


# --- the suggestion as keywords ------------------------------------------------------


def suggest_params(X, y=None, *, n_neighbors=10, random_state=0) -> dict:
    """Suggest keyword arguments for :class:`explorer.SpectralClustering`.

    Parameters
    ----------
    X : ndarray of shape (n, d)
        The data (float32, validated).
    y : ndarray of shape (n,) or None
        Ground truth; when given, ``n_clusters`` is its number of classes, otherwise
        ``"auto"`` (the eigengap heuristic).
    n_neighbors : int, default 10
        The neighbour count the threshold is measured in (see Notes).
    random_state : int, default 0
        Seeds the row samples.

    Returns
    -------
    dict
        ``n_clusters``, ``metric`` and, for ``d <= 8``, ``sigma`` and
        ``threshold_sqdist``; for ``d > 8``, ``threshold_sim`` (or, see Notes,
        ``sigma`` and ``threshold_sqdist``).

    Notes
    -----
    Spectral clustering needs a graph whose connected pieces are the clusters: an
    isolated vertex is harmless (it is left out and labelled −1), but a small
    component of a few stray points takes an eigenvector of its own and spoils the
    embedding, while too large a threshold joins clusters and costs memory.

    For ``d <= 8`` (squared distance, gaussian weight): candidate thresholds are
    quantiles (50 % to 100 %) of the squared distance from a row to its
    `n_neighbors`-th nearest neighbour, measured on a random subsample of at most
    20 000 rows. The smallest candidate (binary search) whose ε-graph on the
    subsample has no component of 2 to ``min(24, m // 10 - 1)`` points (``m`` the
    subsample's rows: on a few dozen rows, as in scikit-learn's estimator checks, a
    cluster is itself a small component), at most 1 % isolated rows and, with
    `y`, no more components of 2 points or more than classes, wins — among those
    whose mean degree stays below ``min(500, max(20, B / n))``; when none passes,
    the densest affordable one. ``B`` is the nonzero budget of the backend that will
    build the graph (:func:`graph_nnz_budget`: free GPU memory over 24 B per nonzero,
    or available host memory over 64 B; about 5·10⁹ on an idle H200, so a GPU fit of
    10⁶-10⁷ points may take the degree its clusters need, where a fixed 2·10⁷ allowed
    10 per row at 2·10⁶ and split them). For a larger n its quantile level is read
    off the distances to all rows (a kd-tree over them), so the rule carries over.
    :func:`sqdist_search` also says whether the subsample's graph passed the tests
    (``clean``), which ``SpectralClustering(affinity="auto")`` reads.
    ``sigma`` is ``sqrt(t / 8)``: the weight at the cutoff is ``exp(-4) ≈ 0.018``,
    the ratio of the paper's synthetic settings (σ = 0.01, t = 0.0008).

    Gaussian noise has tails: at large n a few stray points sit beyond any
    affordable threshold and form small components (measured with the default
    shapes: none at n = 5000 for moons, circles, blobs, aniso and spirals; several
    for blobs and aniso at 20 000); ``varied``, whose densities differ 25-fold,
    leaves stray pieces around its sparse blob from n = 5000. The estimator leaves
    such stray pieces out before it counts components (see
    :class:`explorer.SpectralClustering`, Notes).

    For ``d > 8`` (cosine): the similarity of 200 sampled rows to their
    `n_neighbors`-th most similar row (brute force against all rows, in blocks);
    the threshold is the 10 % quantile, so about 90 % of rows have at least
    `n_neighbors` neighbours. When that quantile is not positive (rows pointing every
    which way, as centred data do: a negative cosine would be an edge of negative
    weight) the rule above for ``d <= 8`` is taken instead, with a gaussian weight.

    All rows equal (no positive distance): ``threshold_sqdist = 1`` (any positive
    value gives the complete graph). All rows zero under cosine: 0 (no edges exist).

    :meth:`explorer.EdgeRule.suggest` applies the same rule to what an estimator, the
    command line or the app leaves out.

    Values are rounded to two significant digits so that they read well on a
    command line or a slider; the thresholds are strict, so each candidate is tested
    as rounded, the distance at the top level is rounded up and a cosine threshold
    down (the neighbours measured stay edges: on two rows, the one pair). Cost:
    about 0.3 s for 10⁴ 2-D rows, 2 s for 10⁵.
    """
    out = {"n_clusters": "auto" if y is None else int(np.unique(y).size)}
    rule = EdgeRule.suggest(X, n_clusters=out["n_clusters"], n_neighbors=n_neighbors,
                            random_state=random_state)
    out.update({k: v for k, v in rule.to_kwargs().items() if v is not None})
    return out


def dataset_params(ds) -> dict:
    """The graph keywords for a data set (:class:`explorer.data.Dataset`): its
    ``preset`` (the paper's settings) where it has one, with k its classes; else
    :func:`suggest_params` of its points."""
    if ds.preset is None:
        return suggest_params(ds.X, ds.y)
    return {"n_clusters": "auto" if ds.y is None else ds.n_classes, **ds.preset}
