"""The public graph entry points: validate, pick a backend and a builder, report.

:func:`build_graph` returns the matrix with its statistics and timings;
:func:`graph_stats` returns the statistics alone, as fast as the backend allows (the
live sliders call it). Both validate every argument here, once, into an
:class:`~explorer.graph.EdgeRule` and :class:`~explorer.graph.BuildOptions` (or take
ready ones) and share one internal path (:func:`_build`); the builders behind them
(``_cpu`` here, :mod:`explorer.graph.gpu` on a CUDA device, imported only there)
assume valid input.
"""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np

from .. import memory
from .._backend import Backend, array_module, resolve_backend, to_numpy
from .._csr import row_sums
from ..components import count_components
from ..inputs import prepare_input
from ..params import GRAPH_STATS_PARAMS
from . import _cpu, knn
from ._stats import stats_from_counts
from ._types import Graph, GraphStats
from .rule import BUILD_FIELDS, DEFAULT_MEM_USE_RATE, BuildOptions, EdgeRule

#: GPU builder names, for messages on a CPU run (the GPU bridge's ``GPU_METHODS``
#: is the authority on a GPU run).
KNOWN_GPU_METHODS = ("csr1", "csr2", "csr3", "grid", "gemm")

#: Seed of the row sample of :func:`graph_stats`: fixed, so that a slider moved back
#: and forth shows the same estimate for the same setting.
SAMPLE_SEED = 0


def build_graph(
    X,
    rule=None,
    *,
    metric="gaussian",
    sigma=None,
    threshold_sqdist=None,
    threshold_sim=None,
    graph="epsilon",
    n_neighbors=10,
    local_neighbor=7,
    method="auto",
    hypo_max_nnz_row=None,
    sp_max_nz_pct=None,
    mem_use_rate=None,
    block_shapes=None,
    options=None,
    backend="auto",
) -> Graph:
    """Build the similarity graph of `X` (ε-neighbourhood or kNN) in canonical CSR.

    Parameters
    ----------
    X : array_like of shape (n_samples, n_features)
        NumPy or CuPy; float32 (float64 is converted). The backend decides where
        the work happens: NumPy data is copied to the GPU on a GPU run, CuPy data to
        the host on a CPU run.
    rule : EdgeRule, optional
        A ready edge rule (:class:`~explorer.graph.EdgeRule`), instead of the seven
        keywords below.
    metric : {"gaussian", "cosine", "uniform"}
    sigma : float or "local", optional
        Gaussian width, required for ``metric="gaussian"``; ``"local"``: self-tuning
        (σi = distance from i to its `local_neighbor`-th nearest other point, weight
        ``exp(-‖xi - xj‖²/(σi σj))``), for every graph kind.
    threshold_sqdist, threshold_sim : float
        Edge iff ``|xi - xj|² < threshold_sqdist`` or similarity ``> threshold_sim``
        (see :class:`~explorer.graph.EdgeRule`; ``EdgeRule.suggest(X)`` chooses them
        from the data): exactly one for ``graph="epsilon"``; at most one for the kNN
        graphs, where it drops the kNN edges that fail it.
    graph : {"epsilon", "knn", "mutual_knn"}
        ``"knn"``: edge iff j is among the `n_neighbors` nearest other points of i or
        i among those of j (the union; scikit-learn's ``nearest_neighbors``);
        ``"mutual_knn"``: both. Nearest by squared distance (cosine: by similarity),
        ties broken by the lower index.
    n_neighbors : int >= 1
        k of the kNN graphs.
    local_neighbor : int >= 1
        m of ``sigma="local"``.
    method : str
        ``"auto"``; on the CPU ``"bruteforce"`` (any metric; memory: a block of rows
        × n) or ``"kdtree"`` (distance rules); on the GPU the bridge's methods
        (``"csr1"``, ``"csr2"``, ``"csr3"``, ``"grid"``, ``"gemm"``; kNN graphs:
        ``"grid"`` or ``"gemm"``).
    hypo_max_nnz_row : int >= 1, optional
        CSR-2's ELLPACK width (default
        :func:`~explorer.graph.default_hypo_max_nnz_row`: 32 for d < 64, else 512);
        also the width the statistics' ELLPACK bytes and rows-over figures use
        (default: the one CSR-2 ran with, else the suggested one).
    sp_max_nz_pct : float in (0, 100], optional
        CSR-3's bound on the percentage of nonzeros (GPU only).
    mem_use_rate : float in (0, 1], optional
        CSR-3's share of free GPU memory for a dense chunk (GPU only).
    block_shapes : mapping, optional
        Kernel name to CUDA block shape, passed to the GPU builders (GPU only).
    options : BuildOptions, optional
        The four builder knobs above as one validated object, instead of the keywords.
    backend : {"auto", "gpu", "cpu"}

    Returns
    -------
    Graph
        ``csr`` (SciPy on the CPU, CuPy on the GPU), ``rule``, ``options`` (as the
        builder ran: CSR-2's width, CSR-3's knobs), ``stats``, ``timings``
        (seconds: ``"to_device"``/``"to_host"`` when the data moved, ``"build"``,
        the builder's own stages as ``"build.<stage>"``, ``"stats"``, ``"total"``),
        ``method`` and ``method_reason``, and the builder's ``info``.

    Raises
    ------
    ValueError, TypeError
        Invalid data or arguments; a builder that does not run on the chosen backend
        or for the metric; on the CPU, a graph estimated not to fit in memory.

    Notes
    -----
    Every builder obeys docs/architecture.md "Semantics": strict thresholds, no diagonal,
    symmetric, canonical CSR. The CPU builders equal the float64 reference
    (:func:`explorer.graph.reference.reference_csr`) bit for bit; GPU builders
    equal it outside the float32 rounding band. Edges whose float32 weight
    underflows to 0 (gaussian, far pairs under a generous threshold) and cosine
    edges of weight 0 (orthogonal pairs with a negative threshold) are stored as
    explicit zeros: the rule, not the value, makes an edge.
    """
    t_start = time.perf_counter()
    rule = edge_rule(rule, metric, sigma, threshold_sqdist, threshold_sim, graph=graph,
                     n_neighbors=n_neighbors, local_neighbor=local_neighbor)
    options = build_options(options, hypo_max_nnz_row, sp_max_nz_pct, mem_use_rate,
                            block_shapes)
    be = resolve_backend(backend)
    _check_method_name(method, be)
    # The one input stage: a large offset taken off in float64 for distance rules (they
    # are translation invariant; a cosine is not), extreme magnitudes brought into
    # float32's range with the rule's lengths, the graph recorded under the rule given.
    data = prepare_input(X, center=rule.compares == "sqdist")
    graph = _build(data.X, rule.rescaled(data.unit), options, method, be, t_start=t_start)
    return graph if data.unit == 1.0 else replace(graph, rule=rule)


def edge_rule(rule, metric="gaussian", sigma=None, threshold_sqdist=None,
              threshold_sim=None, *, graph="epsilon", n_neighbors=10,
              local_neighbor=7) -> EdgeRule:
    """`rule` when given (and no rule keyword), else the rule of the keywords."""
    knn_kw = {"graph": graph, "n_neighbors": n_neighbors, "local_neighbor": local_neighbor}
    if rule is None:
        return EdgeRule.from_args(metric, sigma, threshold_sqdist, threshold_sim, **knn_kw)
    if not isinstance(rule, EdgeRule):
        raise TypeError(f"rule must be an explorer.EdgeRule or None; got {rule!r} "
                        f"({type(rule).__name__})")
    if ((metric, sigma, threshold_sqdist, threshold_sim) != ("gaussian", None, None, None)
            or knn_kw != {"graph": "epsilon", "n_neighbors": 10, "local_neighbor": 7}):
        raise TypeError("give either rule or the keywords metric, sigma, threshold_sqdist, "
                        "threshold_sim, graph, n_neighbors, local_neighbor, not both "
                        f"(rule={rule!r})")
    return rule


def build_options(options, hypo_max_nnz_row=None, sp_max_nz_pct=None, mem_use_rate=None,
                  block_shapes=None) -> BuildOptions:
    """`options` when given (and no option keyword), else the options of the keywords."""
    if options is None:
        return BuildOptions.from_args(hypo_max_nnz_row, sp_max_nz_pct, mem_use_rate,
                                      block_shapes)
    if not isinstance(options, BuildOptions):
        raise TypeError(f"options must be an explorer.graph.BuildOptions or None; got "
                        f"{options!r} ({type(options).__name__})")
    if (hypo_max_nnz_row, sp_max_nz_pct, mem_use_rate, block_shapes) != (None,) * 4:
        raise TypeError("give either options or the keywords hypo_max_nnz_row, sp_max_nz_pct, "
                        "mem_use_rate, block_shapes, not both")
    return options


def _build(X, rule: EdgeRule, options: BuildOptions, method: str, be: Backend, *,
           t_start: float) -> Graph:
    """Build on validated input: :func:`build_graph` and :func:`graph_stats` come here."""
    timings: dict = {}
    X = _to_backend(X, be, timings)
    n, d = X.shape
    method, reason = _resolve_method(method, be, n, d, rule)

    t0 = time.perf_counter()
    if rule.is_knn:
        csr, stage_times, info = knn.build_knn(X, rule, method, be)
    elif be.is_gpu:
        gpu = _gpu_bridge()
        csr, stage_times, info = gpu.build_gpu(
            X, rule.pattern_rule, method, hypo_max_nnz_row=options.hypo_max_nnz_row,
            sp_max_nz_pct=options.sp_max_nz_pct, mem_use_rate=options.mem_use_rate,
            block_shapes=options.block_shapes,
        )
        be.xp.cuda.get_current_stream().synchronize()
    else:
        pattern = rule.pattern_rule
        memory.check_cpu_memory(n, _cpu.row_counter(X, pattern, method), rule)
        csr, stage_times, info = _cpu.build_cpu(X, pattern, method)
    if rule.local_sigma and not rule.is_knn:
        stage_times = dict(stage_times)
        csr = knn.apply_local_sigma(csr, X, rule, method, be, stage_times)
    timings["build"] = time.perf_counter() - t0
    timings.update({f"build.{k}": float(v) for k, v in stage_times.items()})

    used = _options_used(options, method, d, info, be.is_gpu)
    t0 = time.perf_counter()
    stats_hypo = options.hypo_max_nnz_row
    if stats_hypo is None and method == "csr2":
        stats_hypo = used.hypo_max_nnz_row
    stats = csr_stats(csr, stats_hypo)
    timings["stats"] = time.perf_counter() - t0
    timings["total"] = time.perf_counter() - t_start
    return Graph(
        csr=csr, rule=rule, options=used, stats=stats, timings=timings, backend=be.name,
        method=method, method_reason=reason, info=dict(info),
    )


def _options_used(options: BuildOptions, method: str, d: int, info: dict,
                  gpu: bool) -> BuildOptions:
    """The options as `method` ran: the defaults it took filled in (CSR-2's width,
    CSR-3's spMaxNzPct and memUseRate, the paper kernels' block shapes), the others None."""
    hypo = spp = mur = None
    if method == "csr2":
        hypo = _int_or_none(info.get("hypo")) or options.hypo_for(d)
    if method == "csr3":
        spp = options.sp_max_nz_pct
        if spp is None:
            spp = _float_or_none(info.get("sp_max_nz_pct"))
        mur = options.mem_use_rate
        if mur is None:
            mur = _float_or_none(info.get("mem_use_rate")) or DEFAULT_MEM_USE_RATE
    # The paper builders record the block shapes they launched (Table 4's, or given).
    shapes = (info.get("block_shapes") or options.block_shapes) if gpu else None
    return BuildOptions(hypo, spp, mur, shapes)


def graph_stats(
    X,
    rule=None,
    *,
    metric="gaussian",
    sigma=None,
    threshold_sqdist=None,
    threshold_sim=None,
    graph="epsilon",
    n_neighbors=10,
    local_neighbor=7,
    hypo_max_nnz_row=None,
    backend="auto",
    sample_rows=None,
    components=True,
) -> GraphStats:
    """Sparsity statistics of the graph :func:`build_graph` would build, without keeping it.

    Parameters
    ----------
    X, rule, metric, sigma, threshold_sqdist, threshold_sim, graph, n_neighbors, \
local_neighbor, backend
        As in :func:`build_graph`.
    hypo_max_nnz_row : int >= 1, optional
        The ELLPACK width the byte and rows-over figures use (default: suggested).
    sample_rows : int >= 1, optional
        Count only this many rows, a seeded random choice (the same rows for the same
        n), and extrapolate: nnz, sparsity, bytes, isolated rows and rows over the
        width are scaled to n; min/mean/max are the sample's; ``estimated=True``,
        ``n_components=None``. At or above n, every row is counted.
    components : bool
        Count connected components (only when every row is counted).

    Returns
    -------
    GraphStats

    Notes
    -----
    Cost. Counting rows needs no matrix: the CPU counts with a kd-tree (distance
    rules, d <= 8) or blockwise (cosine, high d) in O(n) memory; the GPU runs its
    counting pass. Components need the edges: with ``components=True`` and all rows
    counted, the graph is built (``method="auto"``, the path :func:`build_graph`
    takes) and dropped, costing a full build, and the result equals
    ``build_graph(...).stats`` exactly. For live sliders on large data pass
    ``components=False`` or `sample_rows`. Without components the degree summary is
    None on the CPU (the counting pass computes no weights) and whatever the GPU
    counting pass reports on the GPU.

    A kNN graph's rows cannot be counted apart from the whole (a point's degree
    depends on who lists it): its statistics always come from a build (a kNN build
    costs about a counting pass: 10⁵ 2-D points in well under a second on the CPU),
    exact, `sample_rows` and `components` notwithstanding (components are counted).
    """
    t_start = time.perf_counter()
    rule = edge_rule(rule, metric, sigma, threshold_sqdist, threshold_sim, graph=graph,
                     n_neighbors=n_neighbors, local_neighbor=local_neighbor)
    hypo = BUILD_FIELDS["hypo_max_nnz_row"].check(hypo_max_nnz_row, allow_none=True)
    sample_rows = GRAPH_STATS_PARAMS["sample_rows"].check(sample_rows)
    components = GRAPH_STATS_PARAMS["components"].check(components)
    be = resolve_backend(backend)
    data = prepare_input(X, center=rule.compares == "sqdist")  # the one input stage
    rule = rule.rescaled(data.unit)
    X = _to_backend(data.X, be, {})
    n, d = X.shape
    sampled = sample_rows is not None and sample_rows < n
    if rule.is_knn or (components and not sampled):
        return _build(X, rule, BuildOptions(hypo), "auto", be, t_start=t_start).stats
    rows = None
    if sampled:
        rows = np.sort(np.random.default_rng(SAMPLE_SEED).choice(n, sample_rows, replace=False))
    degrees = None
    if be.is_gpu:
        counts, degrees = _gpu_bridge().count_rows_gpu(
            X, rule.pattern_rule, None if rows is None else be.xp.asarray(rows)
        )
        if rule.local_sigma:  # the counting pass weighs by the uniform pattern rule
            degrees = None
    else:
        pattern = rule.pattern_rule
        method, _ = _cpu.choose_method(n, d, pattern)
        low_memory = rows is None and memory.cpu_shortfall(
            n, _cpu.row_counter(X, pattern, method)) is not None
        counts = _cpu.count_rows_cpu(X, pattern, method, rows, low_memory=low_memory)
    return stats_from_counts(
        counts, n=n, hypo_max_nnz_row=hypo, degrees=degrees, estimated=sampled,
        sample_rows=sample_rows if sampled else None,
    )


def _allowed(be: Backend) -> tuple[str, ...]:
    names = _gpu_bridge().GPU_METHODS if be.is_gpu else _cpu.CPU_METHODS
    return ("auto", *names)


def _check_method_name(method, be: Backend) -> None:
    allowed = _allowed(be)
    if isinstance(method, str) and method in allowed:
        return
    quoted = ", ".join(map(repr, allowed))
    if isinstance(method, str):
        other = _cpu.CPU_METHODS if be.is_gpu else KNOWN_GPU_METHODS
        if method in other:
            where = "CPU" if be.is_gpu else "GPU"
            raise ValueError(
                f"method={method!r} runs on the {where} backend only, but the backend is "
                f"{be.name!r} ({be.reason}); allowed for backend={be.name!r}: {quoted}"
            )
    raise ValueError(
        f"method={method!r} is not allowed for backend={be.name!r}; use one of {quoted}"
    )


def _resolve_method(method: str, be: Backend, n: int, d: int, params: EdgeRule):
    if params.is_knn:
        if method == "auto":
            return knn.choose_method(n, d, params, be)
        knn.check_method(method, params, be)
        return method, "asked for"
    params = params.pattern_rule
    if method == "auto":
        if not be.is_gpu:
            return _cpu.choose_method(n, d, params)
        return _gpu_bridge().choose_method(n, d, params)
    if method == "kdtree" and params.compares != "sqdist":
        raise ValueError(
            f"method='kdtree' serves distance rules (metric 'gaussian' or 'uniform') only; "
            f"got metric={params.metric!r}: use method='bruteforce' or 'auto'"
        )
    return method, "asked for"


def _to_backend(X, be: Backend, timings: dict):
    t0 = time.perf_counter()
    if be.is_gpu and isinstance(X, np.ndarray):
        X = be.xp.ascontiguousarray(be.xp.asarray(X))
        be.xp.cuda.get_current_stream().synchronize()
        timings["to_device"] = time.perf_counter() - t0
    elif not be.is_gpu and not isinstance(X, np.ndarray):
        X = np.ascontiguousarray(to_numpy(X))
        timings["to_host"] = time.perf_counter() - t0
    return X


def _gpu_bridge():
    from . import gpu

    return gpu


def _int_or_none(value):
    ok = isinstance(value, (int, np.integer)) and not isinstance(value, bool)
    return int(value) if ok else None


def _float_or_none(value):
    ok = isinstance(value, (int, float, np.number)) and not isinstance(value, bool)
    return float(value) if ok else None


def csr_stats(csr, hypo_max_nnz_row=None) -> GraphStats:
    """The statistics of a similarity matrix already in CSR, on its own device.

    Parameters
    ----------
    csr : scipy.sparse or cupyx.scipy.sparse CSR matrix
        Square, canonical (as :func:`build_graph` returns it, or validated by
        ``SpectralClustering(affinity="precomputed")``).
    hypo_max_nnz_row : int, optional
        The ELLPACK width the byte and rows-over figures use (default: suggested).

    Returns
    -------
    GraphStats
        Exact: every row counted, connected components included.
    """
    xp = array_module(csr)
    hypo = hypo_max_nnz_row
    n = csr.shape[0]
    counts = xp.diff(csr.indptr)
    degrees = row_sums(csr, xp)
    # On csr's device: SciPy's csgraph on the CPU, the union-find kernels on the GPU.
    n_comp = count_components(csr)
    return stats_from_counts(counts, n=n, hypo_max_nnz_row=hypo, n_components=n_comp,
                             degrees=degrees)
