"""The public graph entry points: validate, pick a backend and a builder, report.

:func:`build_graph` returns the matrix with its statistics and timings;
:func:`graph_stats` returns the statistics alone, as fast as the backend allows (the
live sliders call it). Both validate every argument here; the builders behind them
(``_cpu`` here, :mod:`explorer.graph.gpu` on a CUDA device, imported only there) assume valid input.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

import numpy as np

from .. import memory
from .._backend import Backend, array_module, resolve_backend, to_numpy
from .._csr import row_sums
from .._validation import check_data, check_float, check_int
from ..components import count_components
from . import _cpu
from ._params import GraphParams
from ._stats import stats_from_counts
from ._types import Graph, GraphStats

#: GPU builder names, for messages on a CPU run (the GPU bridge's ``GPU_METHODS``
#: is the authority on a GPU run).
KNOWN_GPU_METHODS = ("csr1", "csr2", "csr3", "grid", "gemm")

#: Seed of the row sample of :func:`graph_stats`: fixed, so that a slider moved back
#: and forth shows the same estimate for the same setting.
SAMPLE_SEED = 0


def build_graph(
    X,
    *,
    metric="gaussian",
    sigma=None,
    threshold_sqdist=None,
    threshold_sim=None,
    method="auto",
    hypo_max_nnz_row=None,
    sp_max_nz_pct=None,
    mem_use_rate=None,
    block_shapes=None,
    backend="auto",
) -> Graph:
    """Build the ε-neighbourhood similarity graph of `X` in canonical CSR.

    Parameters
    ----------
    X : array_like of shape (n_samples, n_features)
        NumPy or CuPy; float32 (float64 is converted). The backend decides where
        the work happens: NumPy data is copied to the GPU on a GPU run, CuPy data to
        the host on a CPU run.
    metric : {"gaussian", "cosine", "uniform"}
    sigma : float, optional
        Gaussian width; required for ``metric="gaussian"``.
    threshold_sqdist, threshold_sim : float
        Exactly one: edge iff ``|xi - xj|² < threshold_sqdist`` or similarity
        ``> threshold_sim`` (see :class:`~explorer.graph.GraphParams`).
    method : str
        ``"auto"``; on the CPU ``"bruteforce"`` (any metric; memory: a block of rows
        × n) or ``"kdtree"`` (distance rules); on the GPU the bridge's methods
        (``"csr1"``, ``"csr2"``, ``"csr3"``, ...).
    hypo_max_nnz_row : int >= 1, optional
        CSR-2's ELLPACK width; also the width the statistics' ELLPACK bytes and
        rows-over figures use (default: the one CSR-2 ran with, else the suggested one).
    sp_max_nz_pct : float in (0, 100], optional
        CSR-3's bound on the percentage of nonzeros (GPU only).
    mem_use_rate : float in (0, 1], optional
        CSR-3's share of free GPU memory for a dense chunk (GPU only).
    block_shapes : mapping, optional
        Kernel name to CUDA block shape, passed to the GPU builders (GPU only).
    backend : {"auto", "gpu", "cpu"}

    Returns
    -------
    Graph
        ``csr`` (SciPy on the CPU, CuPy on the GPU), ``stats``, ``timings``
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
    Every builder obeys DESIGN.md "Semantics": strict thresholds, no diagonal,
    symmetric, canonical CSR. The CPU builders equal the float64 reference
    (:func:`explorer.graph._reference.reference_csr`) bit for bit; GPU builders
    equal it outside the float32 rounding band. Edges whose float32 weight
    underflows to 0 (gaussian, far pairs under a generous threshold) and cosine
    edges of weight 0 (orthogonal pairs with a negative threshold) are stored as
    explicit zeros: the rule, not the value, makes an edge.
    """
    t_start = time.perf_counter()
    params = GraphParams.from_args(metric, sigma, threshold_sqdist, threshold_sim)
    hypo, spp, mur = _check_gpu_options(hypo_max_nnz_row, sp_max_nz_pct, mem_use_rate, block_shapes)
    be = resolve_backend(backend)
    _check_method_name(method, be)
    X = check_data(X)
    timings: dict = {}
    X = _to_backend(X, be, timings)
    n, d = X.shape
    method, reason = _resolve_method(method, be, n, d, params)

    t0 = time.perf_counter()
    if be.is_gpu:
        gpu = _gpu_bridge()
        csr, stage_times, info = gpu.build_gpu(
            X, params, method, hypo_max_nnz_row=hypo, sp_max_nz_pct=spp,
            mem_use_rate=mur, block_shapes=block_shapes,
        )
        be.xp.cuda.get_current_stream().synchronize()
    else:
        memory.check_cpu_memory(n, _cpu.row_counter(X, params, method), params)
        csr, stage_times, info = _cpu.build_cpu(X, params, method)
    timings["build"] = time.perf_counter() - t0
    timings.update({f"build.{k}": float(v) for k, v in stage_times.items()})

    t0 = time.perf_counter()
    stats_hypo = hypo if hypo is not None else _int_or_none(info.get("hypo"))
    stats = csr_stats(csr, stats_hypo)
    timings["stats"] = time.perf_counter() - t0
    timings["total"] = time.perf_counter() - t_start
    return Graph(
        csr=csr, params=params, stats=stats, timings=timings, backend=be.name,
        method=method, method_reason=reason, info=dict(info),
    )


def graph_stats(
    X,
    *,
    metric,
    sigma=None,
    threshold_sqdist=None,
    threshold_sim=None,
    hypo_max_nnz_row=None,
    backend="auto",
    sample_rows=None,
    components=True,
) -> GraphStats:
    """Sparsity statistics of the graph :func:`build_graph` would build, without keeping it.

    Parameters
    ----------
    X, metric, sigma, threshold_sqdist, threshold_sim, backend
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
    counted, the graph is built (``method="auto"``) and dropped, costing a full
    :func:`build_graph`, and the result equals ``build_graph(...).stats`` exactly.
    For live sliders on large data pass ``components=False`` or `sample_rows`.
    Without components the degree summary is None on the CPU (the counting pass
    computes no weights) and whatever the GPU counting pass reports on the GPU.
    """
    params = GraphParams.from_args(metric, sigma, threshold_sqdist, threshold_sim)
    hypo = check_int(hypo_max_nnz_row, "hypo_max_nnz_row", low=1, allow_none=True)
    sample_rows = check_int(sample_rows, "sample_rows", low=1, allow_none=True)
    if not isinstance(components, (bool, np.bool_)):
        raise TypeError(f"components must be True or False; got {components!r}")
    be = resolve_backend(backend)
    X = check_data(X)
    X = _to_backend(X, be, {})
    n, d = X.shape
    sampled = sample_rows is not None and sample_rows < n
    if components and not sampled:
        return build_graph(
            X, metric=metric, sigma=sigma, threshold_sqdist=threshold_sqdist,
            threshold_sim=threshold_sim, hypo_max_nnz_row=hypo, backend=be.name,
        ).stats
    rows = None
    if sampled:
        rows = np.sort(np.random.default_rng(SAMPLE_SEED).choice(n, sample_rows, replace=False))
    degrees = None
    if be.is_gpu:
        counts, degrees = _gpu_bridge().count_rows_gpu(
            X, params, None if rows is None else be.xp.asarray(rows)
        )
    else:
        method, _ = _cpu.choose_method(n, d, params)
        low_memory = rows is None and memory.cpu_shortfall(
            n, _cpu.row_counter(X, params, method)) is not None
        counts = _cpu.count_rows_cpu(X, params, method, rows, low_memory=low_memory)
    return stats_from_counts(
        counts, n=n, hypo_max_nnz_row=hypo, degrees=degrees, estimated=sampled,
        sample_rows=sample_rows if sampled else None,
    )


def _check_gpu_options(hypo_max_nnz_row, sp_max_nz_pct, mem_use_rate, block_shapes):
    hypo = check_int(hypo_max_nnz_row, "hypo_max_nnz_row", low=1, allow_none=True)
    spp = check_float(
        sp_max_nz_pct, "sp_max_nz_pct", low=0.0, high=100.0, low_inclusive=False, allow_none=True
    )
    mur = check_float(
        mem_use_rate, "mem_use_rate", low=0.0, high=1.0, low_inclusive=False, allow_none=True
    )
    if block_shapes is not None and not isinstance(block_shapes, Mapping):
        raise TypeError(
            "block_shapes must be None or a mapping of kernel name to block shape, e.g. "
            f"{{'fullPass': (32, 4)}}; got {block_shapes!r} ({type(block_shapes).__name__})"
        )
    return hypo, spp, mur


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


def _resolve_method(method: str, be: Backend, n: int, d: int, params: GraphParams):
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
