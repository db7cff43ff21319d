"""The plan of a fit: every decision made once, each with its reason.

:func:`plan_fit` takes the data through the input stage and decides, in order, the
engine (this process, or the engine registered for the data's kind), the backend,
the mode (exact, representatives, landmarks), the graph kind (``affinity``) and the
edge rule (explicit values win, the rest is chosen from the points the graph will
join). The estimator records the :class:`FitPlan` (``plan_``), the command line
prints it and the app shows it; neither re-derives any of it.

In representatives mode the plan extracts the representatives: the edge rule is
chosen from them, and the app's live statistics describe their graph.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace

import numpy as np

from .._backend import array_module, resolve_backend, to_numpy
from .._csr import csr_from_arrays
from .._validation import check_affinity, check_random_state, real_matrix, reject_matrix
from ..affinity import choose_affinity
from ..engines import engine_for
from ..graph import BuildOptions, EdgeRule, Graph, csr_stats, graph_stats
from ..graph.pairwise import kernel_affinity, rbf_edge_rule, sigma_from_gamma
from ..graph.rule import SIGMA_MAX, SIGMA_MIN
from ..graph.suggest import graph_nnz_budget
from ..inputs import InputData, Prepared, prepare_input
from ..memory import MemoryEstimateError
from ..params import AFFINITY_GRAPH, EIGEN_SOLVER_ALIASES, KERNELS, is_number
from ..preprocessing import check_feature_scales, choose_scaling, fit_scaler
from ..representatives import (
    EXACT_MAX_LOW_D,
    EXACT_MAX_MEAN_DEGREE_GPU,
    EXACT_MAX_N_LOW_D,
    check_memory,
    check_n_representatives,
    choose_mode,
    distinct_representatives,
    extract_representatives,
)

__all__ = ["FitPlan", "Points", "plan_fit", "plan_graph_of", "plan_points", "precomputed_graph"]

#: Rows counted to estimate the exact graph's nonzeros for ``mode="auto"``.
EXACT_ESTIMATE_ROWS = 4096


@dataclass
class FitPlan:
    """What a fit will do, decided before any graph is built.

    Attributes
    ----------
    params : dict
        The estimator's keywords, validated (:data:`explorer.params.SPECTRAL_PARAMS`).
    data : explorer.inputs.InputData or None
        The points after the input stage (None when X is a precomputed graph).
    engine, engine_why : str
        ``"in-process"`` or the name of a registered engine (``"dask"``), and why.
    backend, backend_why : str
        ``"gpu"``, ``"cpu"`` (or the engine's name), and why.
    mode, mode_why : str
        ``"exact"``, ``"representatives"`` or ``"landmarks"``, and why.
    affinity, affinity_why : str
        The graph kind (``"epsilon"``, ``"knn"``, ``"mutual_knn"``, ``"precomputed"``;
        ``"landmarks"`` in landmark mode), and why.
    rule : explorer.EdgeRule or None
        The edge rule in the units the graph is built in (None: no graph of points).
    options : explorer.graph.BuildOptions or None
        The builders' knobs.
    eigen_solver, eigen_solver_why : str
        The eigensolver asked for and how ``"auto"`` decides; the solver that ran is
        the result's (it depends on the graph's components).
    points : array or None
        The float32 points the graph is built on: the data, scaled if asked, or the
        representatives.
    representatives : explorer.representatives.Representatives or None
    scaler : explorer.preprocessing.FeatureScaler or None
    scale_why : str
        How the scaling was decided (``scale="auto"``: from the features' ranges).
    graph : explorer.Graph or None
        A graph already built: the precomputed one, or the one the affinity rule built
        on every row (the runner takes it when the rule and builder match).
    timings : dict of str to float
        Seconds of the planning steps (``"representatives.*"``, ``"suggest"``).
    """

    params: dict
    data: InputData | None
    engine: str
    engine_why: str
    backend: str
    backend_why: str
    mode: str
    mode_why: str
    affinity: str
    affinity_why: str
    rule: EdgeRule | None = None
    options: BuildOptions | None = None
    eigen_solver: str = "auto"
    eigen_solver_why: str = ""
    points: object = None
    representatives: object = None
    scaler: object = None
    scale_why: str = ""
    graph: Graph | None = None
    timings: dict = field(default_factory=dict)
    #: The one random stream of the fit: the representatives' k-means draw from it,
    #: then the eigensolver's start and k-means (a seed gives the same fit every time).
    rng: object = field(default=None, repr=False)
    #: Anything an engine keeps between planning and running (its client, row blocks).
    engine_state: object = field(default=None, repr=False)

    @property
    def user_rule(self) -> EdgeRule | None:
        """The edge rule in the input's units (lengths divided by the input stage's
        unit; the same rule when no unit was applied)."""
        if self.rule is None or self.data is None or self.data.unit == 1.0:
            return self.rule
        return self.rule.rescaled(1.0 / self.data.unit)

    def lines(self) -> list[tuple[str, str]]:
        """The plan as (label, sentence) rows, for the command line and the app."""
        rows = []
        if self.data is not None:
            rows.append(("input", self.data.describe()))
        if self.scale_why:
            what = "none" if self.scaler is None else self.scaler.describe()
            rows.append(("scaling", f"{what}: {self.scale_why}"))
        rows += [("engine", f"{self.engine}: {self.engine_why}"),
                 ("backend", f"{self.backend}: {self.backend_why}"),
                 ("mode", f"{self.mode}: {self.mode_why}")]
        if self.representatives is not None:
            what = ("distinct rows, weighted by their copies"
                    if self.representatives.kind == "distinct"
                    else "k-means centres of the points")
            rows.append(("representatives", f"{len(self.points)} {what}"))
        rows.append(("graph kind", f"{self.affinity}: {self.affinity_why}"))
        rule = self.user_rule
        if rule is not None:
            chosen = (f" (chosen from the data: {', '.join(rule.suggested)})"
                      if rule.suggested else " (as given)")
            rows.append(("edge rule", rule.describe() + chosen))
        rows.append(("eigensolver", f"{self.eigen_solver}: {self.eigen_solver_why}"))
        return rows


def plan_fit(X, params: dict) -> FitPlan:
    """Take `X` through the input stage and decide the fit (see the module docstring).

    Parameters
    ----------
    X : array-like, sparse matrix or Dask array
        What ``fit`` was given.
    params : dict
        Validated keywords of :class:`explorer.SpectralClustering`.

    Returns
    -------
    FitPlan

    Raises
    ------
    ValueError, TypeError
        Data or keywords that cannot go together (the message names them).
    """
    params, solver_why = _scikit_learn_keywords(params)
    plan = _plan(X, params)
    if solver_why:
        plan.eigen_solver_why = solver_why
    return plan


#: Up to this many points ``affinity="rbf"`` is scikit-learn's dense kernel, exactly
#: (n² float64 weights: 0.13 GiB at 4096); past it, the kernel thresholded into a sparse
#: ε-graph whose dropped weight mass is bounded (explorer.graph.pairwise.rbf_edge_rule).
RBF_DENSE_MAX_N = 4096


def _scikit_learn_keywords(params: dict) -> tuple[dict, str]:
    """scikit-learn's keywords in this pipeline's terms (its eigensolver names, ``"auto"``
    tolerance, gamma beside sigma), and why the eigensolver is the one named."""
    p = dict(params)
    why = ""
    solver = p["eigen_solver"]
    if solver is None:
        p["eigen_solver"], why = "auto", "eigen_solver=None: scikit-learn's default, 'auto' here"
    elif solver in EIGEN_SOLVER_ALIASES:
        p["eigen_solver"] = EIGEN_SOLVER_ALIASES[solver]
        why = (f"eigen_solver={solver!r}: scikit-learn's name of the Lanczos solver "
               "(ARPACK's implicitly restarted Lanczos, SciPy's eigsh, is ours)")
    if p["eigen_tol"] == "auto":
        p["eigen_tol"] = None
    gamma, sigma = p["gamma"], p["sigma"]
    kernel = callable(p["affinity"]) or p["affinity"] in KERNELS
    if gamma is not None and not kernel and p["affinity"] != "auto":
        # gamma beside an ε or kNN graph: scikit-learn's rbf width, σ = 1/sqrt(2 gamma)
        from_gamma = sigma_from_gamma(gamma)
        if is_number(sigma) and not math.isclose(float(sigma), from_gamma, rel_tol=1e-9):
            raise ValueError(
                f"gamma={gamma!r} and sigma={sigma!r} disagree: gamma sets sigma = "
                f"1/sqrt(2·gamma) = {from_gamma:.6g}; give one of them")
        p["sigma"] = from_gamma
    return p, why


def _plan(X, params) -> FitPlan:
    engine = engine_for(X)
    if engine is not None:
        if params["affinity"] == "precomputed":
            raise ValueError(f"affinity='precomputed' is not available for a {engine.name} "
                             "array; pass the points, or a SciPy/NumPy affinity matrix")
        data = prepare_input(X, center=params["metric"] != "cosine")
        return engine.plan(data, params)
    if params["mode"] == "landmarks":
        return _plan_landmarks(X, params)
    if params["affinity"] in ("precomputed", "precomputed_nearest_neighbors",
                              "nearest_neighbors"):
        return _plan_precomputed(X, params)
    affinity = params["affinity"]
    if callable(affinity) or affinity in KERNELS or (affinity == "auto"
                                                     and _scikit_learn_default(params)):
        return _plan_kernel(X, params)
    return _plan_graph(X, params)


def _scikit_learn_default(params) -> list[str]:
    """scikit-learn's keywords given that describe its default affinity, rbf (gamma, the
    kernel's coefficients, n_components): with ``affinity="auto"`` they choose it."""
    given = [name for name in ("gamma", "kernel_params", "n_components")
             if params[name] is not None]
    given += [name for name, default in (("degree", 3), ("coef0", 1))
              if params[name] != default]
    return given


def _eigen_why(solver: str) -> str:
    if solver != "auto":
        return "given"
    return ("decided on the graph: the components' indicators when it has exactly k "
            "components, otherwise by its size, the points' dimension and a cost model")


def _plan_precomputed(X, params) -> FitPlan:
    _no_scale(params, "applies to points, not to affinity='precomputed' (X is then the "
              "graph); use scale=None")
    backend = resolve_backend(params["backend"])
    why, data = "given", None
    if params["affinity"] == "nearest_neighbors":
        # scikit-learn's meaning: each point joined to its n_neighbors nearest, itself
        # included (connectivity 1), symmetrised as (C + Cᵀ) / 2; neighbours found on
        # the host by scikit-learn's tree search, as its users get them.
        from sklearn.neighbors import kneighbors_graph

        data = prepare_input(X)
        C = kneighbors_graph(to_numpy(data.X), params["n_neighbors"], include_self=True,
                             n_jobs=params["n_jobs"])
        X = 0.5 * (C + C.T)
        why = (f"scikit-learn's: each point joined to its {params['n_neighbors']} nearest "
               "(itself included), weights (C + Cᵀ)/2")
    elif params["affinity"] == "precomputed_nearest_neighbors":
        # scikit-learn's meaning: X holds distances; each point's n_neighbors nearest are
        # its neighbours (connectivity 1), symmetrised as (C + Cᵀ) / 2.
        from sklearn.neighbors import NearestNeighbors

        reject_matrix(X)
        nn = NearestNeighbors(n_neighbors=params["n_neighbors"], metric="precomputed",
                              n_jobs=params["n_jobs"]).fit(X)
        C = nn.kneighbors_graph(X, mode="connectivity")
        X = 0.5 * (C + C.T)
        why = (f"X holds distances: each point joined to its {params['n_neighbors']} "
               "nearest, weights (C + Cᵀ)/2 (scikit-learn's meaning)")
    graph = precomputed_graph(X, backend)
    return FitPlan(
        params=params, data=data, engine="in-process", engine_why="NumPy/CuPy input",
        backend=backend.name, backend_why=backend.reason, mode="exact",
        mode_why=("affinity='precomputed': X is the graph" if data is None else
                  "affinity='nearest_neighbors': the kNN graph of every point"),
        affinity=params["affinity"],
        affinity_why=why, eigen_solver=params["eigen_solver"],
        eigen_solver_why=_eigen_why(params["eigen_solver"]), graph=graph,
        rng=check_random_state(params["random_state"]),
    )


def _plan_kernel(X, params) -> FitPlan:
    """scikit-learn's kernel affinities: every pair weighed by the kernel (the dense
    matrix, then the precomputed path), or past :data:`RBF_DENSE_MAX_N` points for
    ``"rbf"`` its thresholded sparse graph with the dropped mass bounded."""
    affinity = params["affinity"]
    kernel = "rbf" if affinity == "auto" else affinity
    name = getattr(kernel, "__name__", "a callable") if callable(kernel) else repr(kernel)
    given = "" if affinity != "auto" else (
        f"{' and '.join(_scikit_learn_default(params))} given (scikit-learn's keywords, "
        "whose default affinity is rbf): ")
    _no_scale(params, f"is not available with affinity={name} (scikit-learn's kernels "
              "take the data as given); scale X first, or use scale=None")
    translation_invariant = kernel in ("rbf", "laplacian")
    data = prepare_input(X, center=translation_invariant)
    backend = resolve_backend(params["backend"])
    gamma = params["gamma"]
    if kernel == "rbf" and gamma is None:
        gamma = 1.0  # scikit-learn's SpectralClustering default
    if kernel == "rbf" and data.n > RBF_DENSE_MAX_N:
        points = data.X if backend.is_gpu == (array_module(data.X) is not np) else (
            backend.xp.asarray(data.X) if backend.is_gpu else to_numpy(data.X))
        t0 = time.perf_counter()
        found = rbf_edge_rule(points, gamma / data.unit**2)
        budget, budget_why = graph_nnz_budget(backend.name)
        if found.edges_per_row * data.n > budget:
            raise MemoryEstimateError(
                f"affinity='rbf' with gamma={gamma:g} keeps about {found.edges_per_row:.3g} "
                f"edges per point on these {data.n:,} points ({found.describe()}): about "
                f"{found.edges_per_row * data.n:.3g} nonzeros, over the {budget:.3g} "
                f"{budget_why}; the kernel is wide against the points' spacing: raise gamma "
                "(a narrower kernel), or use affinity='auto'",
                device=backend.name.upper(), nnz=found.edges_per_row * data.n,
                need_bytes=0.0, available_bytes=0)
        graph_params = {**params, "affinity": "epsilon", "sigma": found.rule.sigma,
                        "threshold_sqdist": found.rule.threshold_sqdist, "metric": "gaussian",
                        "threshold_sim": None, "mode": "exact", "gamma": None}
        plan = _plan_graph(points, graph_params)
        plan.data, plan.params = data, params
        plan.timings["suggest"] = time.perf_counter() - t0
        plan.affinity = "rbf"
        plan.affinity_why = (
            f"{given}scikit-learn's rbf kernel exp(−{gamma:g}‖xi−xj‖²), n={data.n:,} > "
            f"{RBF_DENSE_MAX_N:,}: thresholded into a sparse ε-graph "
            f"({found.describe()}) instead of the dense n × n kernel")
        return plan
    A = data.X if translation_invariant else real_matrix(X)
    K = kernel_affinity(A, kernel, gamma=gamma, degree=params["degree"], coef0=params["coef0"],
                        kernel_params=params["kernel_params"])
    graph = precomputed_graph(K, backend)
    return FitPlan(
        params=params, data=data, engine="in-process", engine_why="NumPy/CuPy input",
        backend=backend.name, backend_why=backend.reason, mode="exact",
        mode_why=f"affinity={name}: the kernel of every pair", affinity=str(name).strip("'"),
        affinity_why=(f"{given}scikit-learn's {name} kernel on every pair (the dense "
                      f"{data.n:,} × {data.n:,} matrix, exact)"),
        eigen_solver=params["eigen_solver"], eigen_solver_why=_eigen_why(params["eigen_solver"]),
        graph=graph, rng=check_random_state(params["random_state"]),
    )


def _plan_landmarks(X, params) -> FitPlan:
    if params["affinity"] not in ("auto", "epsilon"):
        raise ValueError(f"affinity={params['affinity']!r} is not allowed with "
                         "mode='landmarks' (it needs points, not a graph); use "
                         "affinity='epsilon' or mode='exact'")
    if params["metric"] == "uniform":
        raise ValueError("metric='uniform' is not allowed with mode='landmarks'; use one of "
                         "'auto', 'gaussian', 'cosine'")
    unused = [name for name in ("threshold_sqdist", "threshold_sim", "hypo_max_nnz_row",
                                "sp_max_nz_pct", "mem_use_rate") if params[name] is not None]
    if unused:
        raise ValueError(f"{', '.join(unused)} given with mode='landmarks', which builds no "
                         "ε-graph of the points (each point is joined to its nearest "
                         "landmarks); leave them out, or use mode='exact'")
    metric = "gaussian" if params["metric"] == "auto" else params["metric"]
    data = prepare_input(X, center=metric != "cosine")
    if is_number(params["sigma"]):  # the range every gaussian weight is computed in
        sigma = float(params["sigma"]) * data.unit
        if not SIGMA_MIN <= sigma <= SIGMA_MAX:
            raise ValueError(
                f"sigma={params['sigma']!r} is out of range: 2σ² = {2 * sigma * sigma:.3g} "
                "leaves float32, the precision the landmark weights exp(-‖x−c‖²/(2σ²)) are "
                f"computed in; allowed: [{SIGMA_MIN / data.unit:.3g}, "
                f"{SIGMA_MAX / data.unit:.3g}]; rescale the data (and sigma with it)")
    if params["sigma"] == "local":
        raise ValueError("sigma='local' is not available with mode='landmarks' (the weights "
                         "are to landmarks, not between points); use 'auto' or a number")
    backend = resolve_backend(params["backend"])
    scaler, points, scale_why = _scaled(data.X, params["scale"])
    p = min(1000, data.n) if params["n_landmarks"] is None else params["n_landmarks"]
    return FitPlan(
        params=params, data=data, engine="in-process", engine_why="NumPy/CuPy input",
        backend=backend.name, backend_why=backend.reason, mode="landmarks",
        mode_why="mode='landmarks' given", affinity="landmarks",
        affinity_why=(f"no graph of the points: each point is joined to its "
                      f"{params['n_nearest_landmarks']} nearest of {p} landmarks "
                      f"({metric} weights), the graph W = Ẑ Ẑᵀ"),
        eigen_solver="svd", eigen_solver_why="landmark mode: the truncated SVD of the "
        "n × p affinity", points=points, scaler=scaler, scale_why=scale_why,
        rng=check_random_state(params["random_state"]),
    )


@dataclass
class Points:
    """The points a graph will join, and how they were come to (the first half of a
    plan in exact and representatives mode).

    Attributes
    ----------
    data : explorer.inputs.InputData
    backend : explorer._backend.Backend
    mode, mode_why : str
    points : float32 array
        The data (scaled if asked), or the representatives.
    scaler, representatives : object or None
    scale_why : str
        How the scaling was decided.
    rng : numpy.random.RandomState
        The fit's random stream, after the representatives drew from it.
    timings : dict
    """

    data: InputData
    backend: object
    mode: str
    mode_why: str
    points: object
    scaler: object = None
    scale_why: str = ""
    representatives: object = None
    rng: object = None
    timings: dict = field(default_factory=dict)


def plan_points(X, params: dict) -> Points:
    """The input stage, the backend, the mode and (representatives mode) the
    representatives: the points whose graph a fit of `params` builds. The app's live
    statistics describe the graph of these points."""
    if params["mode"] == "landmarks":
        raise ValueError("mode='landmarks' builds no graph of points")
    data = prepare_input(X, center=params["metric"] != "cosine")
    backend = resolve_backend(params["backend"])
    rng = check_random_state(params["random_state"])
    scaler, points, scale_why = _scaled(data.X, params["scale"])
    n, d = points.shape
    given_m = params["n_representatives"]
    reps = _distinct_rows(points, params, backend, d)
    if reps is not None:
        m = int(reps.centers.shape[0])
        mode, mode_why = "representatives", (
            f"{n - m:,} of the n={n:,} rows are copies (only {m:,} distinct): the graph "
            "joins the distinct rows, each weighted by its number of copies, and every "
            "copy takes its row's label (a graph of every row would join copies, at "
            "distance 0, before any neighbour); mode='exact' for the graph of every row")
    else:
        exact_nnz = nnz_budget = None
        if _exact_cost_decides(params, backend, n, d, data.unit):
            exact_nnz, nnz_budget = _exact_graph_estimate(points, params, data.unit)
        mode, mode_why = choose_mode(
            params["mode"], n, d, backend=backend.name, metric=params["metric"],
            n_representatives=None if isinstance(given_m, str) else given_m,
            exact_nnz=exact_nnz, nnz_budget=nnz_budget)
        if mode == "representatives":
            m = check_n_representatives(given_m, n, params["n_clusters"], backend.name)
            move = backend.is_gpu != (array_module(points) is not np)
            check_memory(n, d, m, gpu=backend.is_gpu, move=move)
            if move:
                points = backend.xp.asarray(points) if backend.is_gpu else to_numpy(points)
            reps = extract_representatives(points, m, random_state=rng)
    timings = {}
    if reps is not None:
        timings["representatives"] = sum(reps.timings.values())
        timings.update({f"representatives.{k}": v for k, v in reps.timings.items()})
        points = reps.centers
    return Points(data=data, backend=backend, mode=mode, mode_why=mode_why, points=points,
                  scaler=scaler, scale_why=scale_why, representatives=reps, rng=rng,
                  timings=timings)


def _distinct_rows(points, params, backend, d: int):
    """``mode="auto"`` on duplicate-heavy data: the distinct rows as representatives
    (:func:`explorer.representatives.distinct_representatives`) when there are more of
    them than k and their own graph would be exact; None otherwise."""
    if params["mode"] != "auto":
        return None
    distinct = distinct_representatives(points)
    if distinct is None:
        return None
    m = int(distinct.centers.shape[0])
    k_asked = params["n_clusters"]
    fewest = max(2, 0 if isinstance(k_asked, str) else int(k_asked)) + 1  # k to cut
    if m < fewest or choose_mode("auto", m, d, backend=backend.name,
                                 metric=params["metric"])[0] != "exact":
        return None
    return distinct


def _exact_cost_decides(params, backend, n: int, d: int, unit: float) -> bool:
    """Whether ``mode="auto"`` weighs the exact graph's cost (see :func:`choose_mode`):
    on the GPU, past ``EXACT_MAX_N_LOW_D`` low-d points, for an ε-graph whose threshold
    is given (the rule needs no search, so counting a sample of its rows is cheap)."""
    rule_params = _working_rule_params(params, unit)
    return (params["mode"] == "auto" and backend.is_gpu and params["affinity"] == "auto"
            and rule_params["metric"] != "cosine" and d <= EXACT_MAX_LOW_D
            and n > EXACT_MAX_N_LOW_D
            and (rule_params["threshold_sqdist"] is not None
                 or rule_params["threshold_sim"] is not None))


def _exact_graph_estimate(points, params, unit: float) -> tuple[float, float]:
    """The exact ε-graph's nonzeros estimated from :data:`EXACT_ESTIMATE_ROWS` rows
    counted on the GPU, and the budget (``EXACT_MAX_MEAN_DEGREE_GPU`` per point and the
    GPU's memory, :func:`explorer.graph.suggest.graph_nnz_budget`)."""
    rule_params = _working_rule_params(params, unit)
    rule = EdgeRule.suggest(Prepared(points), rule_params["metric"], rule_params["sigma"],
                            rule_params["threshold_sqdist"], rule_params["threshold_sim"],
                            n_clusters=params["n_clusters"])
    stats = graph_stats(Prepared(points), rule, backend="gpu", sample_rows=EXACT_ESTIMATE_ROWS,
                        components=False)
    n = points.shape[0]
    budget = min(EXACT_MAX_MEAN_DEGREE_GPU * float(n), graph_nnz_budget("gpu")[0])
    return float(stats.nnz), budget


def _plan_graph(X, params) -> FitPlan:
    """Exact and representatives mode: the points, the mode, the graph kind, the rule."""
    return plan_graph_of(plan_points(X, params), X, params)


def plan_graph_of(where: Points, X, params) -> FitPlan:
    """The in-process plan of the graph of the points `where` (:func:`plan_points`, or
    an engine's representatives): the graph kind and the edge rule chosen from those
    points. `X` is the input as given (read again only when ``metric="auto"`` chose
    cosine on data that the input stage centred, outside representatives mode)."""
    data, backend, points, scaler = where.data, where.backend, where.points, where.scaler
    reps, rng, timings = where.representatives, where.rng, where.timings
    mode, mode_why = where.mode, where.mode_why
    t0 = time.perf_counter()
    rule_params = _working_rule_params(params, data.unit)
    affinity, affinity_why, built = _choose_affinity(points, params, rule_params, backend)
    rule = EdgeRule.suggest(Prepared(points), rule_params["metric"], rule_params["sigma"],
                            rule_params["threshold_sqdist"], rule_params["threshold_sim"],
                            n_clusters=params["n_clusters"], n_neighbors=params["n_neighbors"],
                            graph=AFFINITY_GRAPH[affinity],
                            local_neighbor=params["local_neighbor"])
    if (rule.compares == "cosine" and params["metric"] != "cosine" and scaler is None
            and reps is None and data.shift is not None):
        # "auto" chose cosine, which is not translation invariant: the data as given
        # (scaled data are the same whether centred first or not).
        data = prepare_input(X, center=False)
        points = data.X
    if rule.suggested:
        timings["suggest"] = time.perf_counter() - t0
    graph = None
    if (built is not None and built.rule == rule and params["method"] == "auto"
            and built.backend == backend.name):
        # The affinity rule built this graph on every row with this rule (its build
        # counts in "suggest"): the same canonical CSR.
        graph = replace(built, rule=rule)
    return FitPlan(
        params=params, data=data, engine="in-process", engine_why="NumPy/CuPy input",
        backend=backend.name, backend_why=backend.reason, mode=mode, mode_why=mode_why,
        affinity=affinity, affinity_why=affinity_why, rule=rule,
        options=BuildOptions.from_args(params["hypo_max_nnz_row"], params["sp_max_nz_pct"],
                                       params["mem_use_rate"]),
        eigen_solver=params["eigen_solver"], eigen_solver_why=_eigen_why(params["eigen_solver"]),
        points=points, representatives=reps, scaler=scaler, scale_why=where.scale_why,
        graph=graph, timings=timings, rng=rng,
    )


def _working_rule_params(params, unit: float) -> dict:
    """The edge rule's keywords in the units the graph is built in: a given σ scales
    with the input stage's unit, a squared-distance threshold with its square."""
    out = {k: params[k] for k in ("metric", "sigma", "threshold_sqdist", "threshold_sim")}
    if unit != 1.0:
        if is_number(out["sigma"]):
            out["sigma"] = float(out["sigma"]) * unit
        if out["threshold_sqdist"] is not None:
            out["threshold_sqdist"] = float(out["threshold_sqdist"]) * unit * unit
    return out


def _choose_affinity(points, params, rule_params, backend):
    """The graph kind, why, and the graph the choice built on every row (or None)."""
    if params["affinity"] != "auto":
        return AFFINITY_GRAPH[params["affinity"]], "given", None
    given = [name for name in ("threshold_sqdist", "threshold_sim")
             if rule_params[name] is not None]
    if is_number(rule_params["sigma"]):
        given.append("sigma")
    if given:
        return "epsilon", f"{' and '.join(given)} given: the ε-graph they define", None
    choice = choose_affinity(points, params["n_clusters"], n_neighbors=params["n_neighbors"],
                             local_neighbor=params["local_neighbor"],
                             backend=backend.name)
    return choice.affinity, choice.why, choice.graph


def _scaled(X, scale):
    """``(scaler, X scaled, why)`` under `scale`: ``"auto"`` decides from the features'
    ranges (:func:`explorer.preprocessing.choose_scaling`); None keeps X, after warning
    when its features are in mixed units (:func:`check_feature_scales`)."""
    why = f"scale={scale!r} given"
    if scale == "auto":
        scale, why = choose_scaling(X)
    elif scale is None:
        check_feature_scales(X)
        return None, X, "scale=None given: the features as given"
    if scale is None:
        return None, X, why
    scaler = fit_scaler(X, scale)
    return scaler, scaler.transform(X), why


def _no_scale(params, where: str) -> None:
    """Refuse a scaling asked for where the data are not points to scale (``"auto"``,
    the default, is no scaling there)."""
    if params["scale"] not in (None, "auto"):
        raise ValueError(f"scale={params['scale']!r} {where}")


def precomputed_graph(X, backend) -> Graph:
    """The affinity matrix `X`, validated (:func:`explorer._validation.check_affinity`),
    on the backend's device, as a :class:`~explorer.graph.Graph` with its statistics."""
    t0 = time.perf_counter()
    csr = check_affinity(X)
    timings = {"validate": time.perf_counter() - t0}
    on_device = array_module(csr) is not np
    if on_device != backend.is_gpu:
        t1 = time.perf_counter()
        move = backend.xp.asarray if backend.is_gpu else to_numpy
        # Assembled from the arrays: a constructor would narrow int64 indices.
        csr = csr_from_arrays(move(csr.data), move(csr.indices), move(csr.indptr),
                              csr.shape, canonical=True)
        timings["to_device" if backend.is_gpu else "to_host"] = time.perf_counter() - t1
    t1 = time.perf_counter()
    stats = csr_stats(csr)
    timings["stats"] = time.perf_counter() - t1
    return Graph(
        csr=csr, rule=None, stats=stats, timings=timings, backend=backend.name,
        method="precomputed", method_reason="affinity='precomputed': X is the graph",
    )
