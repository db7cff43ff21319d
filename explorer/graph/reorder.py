"""Row orders of a similarity graph: denser row tiles for the eigensolver's products, and
a matrix whose blocks can be seen.

The eigensolver is a chain of sparse × dense block products (SpMM) with the graph, and
their cost depends on the order of the rows: rows processed together that share
columns share the fetched rows of the dense block. Users' rows come in any order
(shuffled files, concatenated sources), so :func:`row_order` computes a better one:

``"jaccard"``
    Paper 003's clustering of the rows by the Jaccard distance of their patterns,
    iteratively on the GPU (CuPy RawKernels, ``kernels/jaccard.cu``) or in NumPy, many
    leaders per round and several levels (see ``explorer/graph/_jaccard.py``); the
    rows of a group, then of a group of groups, ... become consecutive.
``"rcm"``
    Reverse Cuthill–McKee (``scipy.sparse.csgraph.reverse_cuthill_mckee``, on the host
    also for a GPU graph: cupyx has none), a bandwidth-reducing breadth-first order.
``"spatial"``
    Morton (Z-order) order of the points X the graph was built from: quantised
    coordinates with their bits interleaved, then sorted. For more than
    :data:`SPATIAL_MAX_DIMS` features, the coordinates on the leading principal axes
    of a sample.

:func:`permute` applies an order symmetrically (P A Pᵀ), :func:`label_order` groups rows
by cluster (within any order), :func:`spmm_traffic` measures
what it changed (bytes per product against the floor), and :func:`choose_order` with
``method="auto"`` decides whether reordering pays before the eigensolver runs and says
why.

>>> order = row_order(graph, "jaccard")          # doctest: +SKIP
>>> B = permute(graph.csr, order.perm)           # doctest: +SKIP
>>> order.before.ratio, order.after.ratio        # doctest: +SKIP
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from .._backend import array_module, to_numpy
from .._csr import csr_from_arrays, entry_rows
from .._validation import check_choice, check_float, check_int
from ..memory import (
    GPU_MEMORY_FRACTION,
    MemoryEstimateError,
    check_allocation,
    format_bytes,
    free_device_bytes,
)
from . import _jaccard
from ._traffic import DEFAULT_TILE, SpmmTraffic, spmm_traffic

__all__ = [
    "AFTER_RATIO",
    "CHOICES",
    "EXPECTED_PRODUCTS",
    "METHODS",
    "RowOrder",
    "SpmmTraffic",
    "check_permutation",
    "choose_order",
    "label_order",
    "permute",
    "row_order",
    "spmm_traffic",
]

#: The orders :func:`row_order` computes.
METHODS = ("jaccard", "rcm", "spatial")

#: What :func:`choose_order` accepts.
CHOICES = ("auto", *METHODS)

#: Block products the Chebyshev eigensolver takes on clustered graphs (193 on Syn1M, 217
#: on Syn5M at tol 1e-4; explorer/embedding/chebyshev.py).
EXPECTED_PRODUCTS = 200

#: Above this many features, the spatial order uses the leading principal axes.
SPATIAL_MAX_DIMS = 4

#: ``"auto"`` considers the spatial order for points of at most this many features (a
#: space-filling curve of a few principal axes is a poor proxy for a graph of
#: higher-dimensional data).
SPATIAL_AUTO_MAX_DIMS = 8

#: Rows sampled for those axes.
SPATIAL_SAMPLE = 10_000

#: Bytes of the traffic model per second of product, by device: the rule turns the
#: model's bytes into seconds with it. CPU: measured, syn4d 2·10⁵ rows (32 nonzeros per
#: row), b = 8, SciPy, 2 shared cores: 0.167 s for 2.6·10⁸ model bytes (given order),
#: 0.10-0.11 s for 0.9-1.1·10⁸ (reordered). GPU: an estimate from one large Chebyshev
#: embedding's model bytes per second (benchmarks/README.md, "Row reordering");
#: benchmarks/reorder.py measures it.
BANDWIDTH = {"gpu": 4.0e12, "cpu": 1.5e9}

#: Traffic over the floor an order is expected to reach (:class:`SpmmTraffic` ratio after
#: reordering), measured on syn4d 2·10⁵ (tile 256): Morton 1.35, Jaccard 1.43, RCM 1.73
#: (2·10⁴: 1.22, 1.33, 1.40).
AFTER_RATIO = {"jaccard": 1.45, "rcm": 1.7, "spatial": 1.35}

#: Cost of each order in seconds, ``a * n + b * nnz`` by device, the symmetric permutation
#: (CPU: 2.5e-7 s per entry) included. CPU: measured on 2 shared cores (Jaccard τ = 0.8,
#: 5·10⁴ rows and 2.1·10⁶ entries: 1.8 s; RCM 2·10⁵ rows, 6.5·10⁶ entries: 0.24 s;
#: Morton 5·10⁴ rows: 0.06 s). GPU: estimates (RCM is SciPy's on the host, the matrix
#: copied there); benchmarks/reorder.py measures them.
REORDER_COST = {
    "gpu": {"jaccard": (2e-8, 2e-9), "rcm": (1e-7, 4e-8), "spatial": (2e-9, 3e-10)},
    "cpu": {"jaccard": (0.0, 1.1e-6), "rcm": (0.0, 2.9e-7), "spatial": (1.2e-6, 2.5e-7)},
}


@dataclass(frozen=True)
class RowOrder:
    """A row order and what it does to the product traffic.

    Attributes
    ----------
    perm : ndarray of int64, shape (n,) or None
        Row ``i`` of the reordered matrix is row ``perm[i]`` of the given one (the
        convention of :func:`scipy.sparse.csgraph.reverse_cuthill_mckee`); on the
        graph's device. None when :func:`choose_order` kept the order.
    method : {"jaccard", "rcm", "spatial", "none"}
    reason : str
        Why this order (``choose_order``'s rule, or "asked for").
    seconds : float
        Time to compute `perm` (the statistics and the permutation of the matrix not
        included; see `permute_seconds`).
    before : SpmmTraffic or None
        The product traffic in the given order (None when the rule kept the order
        without measuring it: no products to save).
    after : SpmmTraffic or None
        In the new order (None without one).
    info : dict
        Method details: the Jaccard levels' sizes and rounds, τ, the seed.
    """

    perm: object
    method: str
    reason: str
    seconds: float
    before: SpmmTraffic | None
    after: SpmmTraffic | None
    info: dict = field(default_factory=dict)

    @property
    def reordered(self) -> bool:
        """Whether there is a new order."""
        return self.perm is not None

    def inverse(self):
        """``inv`` with ``inv[perm[i]] = i``: the new position of every given row."""
        return inverse_permutation(self.perm)

    def to_original(self, rows):
        """`rows` (one per row of the reordered matrix, first axis) in the given order."""
        return rows if self.perm is None else rows[self.inverse()]

    def describe(self) -> str:
        """One line: the method, the traffic before and after, the time."""
        if self.perm is None:
            return "rows kept in their order"
        return (f"{self.method} order: traffic {self.before.ratio:.2f}x -> "
                f"{self.after.ratio:.2f}x the floor, {self.seconds:.3f} s")

    def as_dict(self) -> dict:
        """Plain numbers for JSON (no permutation)."""
        return {"method": self.method, "reason": self.reason, "seconds": self.seconds,
                "before": None if self.before is None else self.before.as_dict(),
                "after": None if self.after is None else self.after.as_dict(),
                "info": self.info}


def inverse_permutation(perm):
    """``inv`` with ``inv[perm] = arange(n)`` on `perm`'s device."""
    xp = array_module(perm)
    inv = xp.empty(perm.shape[0], dtype=xp.int64)
    inv[perm] = xp.arange(perm.shape[0], dtype=xp.int64)
    return inv


def _csr_of(graph_or_csr):
    csr = getattr(graph_or_csr, "csr", graph_or_csr)
    if not hasattr(csr, "indptr") or getattr(csr, "format", None) != "csr":
        raise TypeError(
            "graph_or_csr must be an explorer.Graph or a scipy/cupyx CSR matrix; got "
            f"{type(graph_or_csr).__module__}.{type(graph_or_csr).__name__}")
    if csr.ndim != 2 or csr.shape[0] != csr.shape[1]:
        raise ValueError(f"graph_or_csr must be square (n × n); got shape {tuple(csr.shape)}")
    return csr


#: Peak bytes per stored entry of the work arrays: :func:`permute` (entry rows, sources
#: and columns in int64, the new values and columns, the sort's buffer) and a Jaccard
#: level (its coarse pattern, at most one int64 key per entry, and the first level's
#: copy of it; the coarsening's blocks are bounded).
BYTES_PER_ENTRY = {"permute": 40, "jaccard": 24}


def check_reorder_memory(csr, what: str) -> None:
    """Refuse, before allocating, the work arrays of `what` (``"permute"`` or
    ``"jaccard"``) on `csr` when they will not fit on its device.

    Raises
    ------
    MemoryEstimateError
        With the estimate and the memory available.
    """
    xp = array_module(csr)
    need = BYTES_PER_ENTRY[what] * float(csr.nnz) + 16.0 * csr.shape[0]
    label = f"the {what} of a graph with {int(csr.nnz)} stored entries"
    advice = "leave reorder=None (or use 'spatial', which sorts the rows alone)"
    if xp is np:
        check_allocation(need, label, advice)
        return
    free = free_device_bytes()
    if need > GPU_MEMORY_FRACTION * free:
        raise MemoryEstimateError(
            f"{label} needs about {format_bytes(need)} of GPU memory, but only "
            f"{format_bytes(free)} is free; {advice}",
            device="GPU", nnz=float(csr.nnz), need_bytes=need, available_bytes=int(free))


def _sync(xp) -> None:
    if xp is not np:
        xp.cuda.Device().synchronize()


def check_permutation(perm, n: int, xp, name: str = "perm"):
    """`perm` as an int64 array on the device of `xp`, or a ValueError naming it (as
    `name`: the caller's argument)."""
    p = xp.asarray(perm)
    if p.shape != (n,) or p.dtype.kind not in "iu":
        raise ValueError(f"{name} must be an integer array of shape ({n},); got dtype "
                         f"{p.dtype}, shape {tuple(p.shape)}")
    p = p.astype(xp.int64, copy=False)
    seen = xp.zeros(n, dtype=xp.int32)
    if n and (int(p.min()) < 0 or int(p.max()) >= n):
        raise ValueError(f"{name} must hold the numbers 0..{n - 1}; got values in "
                         f"[{int(p.min())}, {int(p.max())}]")
    seen[p] = 1
    if int(seen.sum()) != n:
        raise ValueError(f"{name} must be a permutation of 0..{n - 1}; "
                         f"{n - int(seen.sum())} value(s) repeat")
    return p


def permute(csr, perm):
    """The symmetric permutation ``P A Pᵀ``: ``B[i, j] = A[perm[i], perm[j]]``.

    Parameters
    ----------
    csr : scipy.sparse or cupyx.scipy.sparse CSR matrix of shape (n, n)
    perm : int array of shape (n,)
        A permutation of ``0..n-1`` (e.g. :attr:`RowOrder.perm`).

    Returns
    -------
    CSR matrix
        On `csr`'s device, same dtypes, canonical (sorted columns in each row).

    Raises
    ------
    ValueError
        If `perm` is not a permutation of ``0..n-1``.
    """
    csr = _csr_of(csr)
    xp = array_module(csr)
    n, nnz = csr.shape[0], int(csr.nnz)
    perm = check_permutation(perm, n, xp)
    check_reorder_memory(csr, "permute")
    inv = inverse_permutation(perm)
    ptr = csr.indptr
    deg = (ptr[1:] - ptr[:-1])[perm]
    new_ptr = xp.zeros(n + 1, dtype=ptr.dtype)
    new_ptr[1:] = xp.cumsum(deg)
    rows = entry_rows(new_ptr, xp)
    src = xp.arange(nnz, dtype=xp.int64) - new_ptr[rows].astype(xp.int64) \
        + ptr[perm[rows]].astype(xp.int64)
    cols = inv[csr.indices[src]].astype(csr.indices.dtype)
    out = csr_from_arrays(csr.data[src], cols, new_ptr, csr.shape, canonical=False)
    del rows, src, cols
    if xp is np or csr.indices.dtype == np.int32:
        out.has_sorted_indices = False  # sort_indices() skips a matrix flagged sorted
        out.sort_indices()  # SciPy's per-row sort; cuSPARSE's csrsort (int32 only)
    else:
        # int64 on the GPU: one sort of row * n + column keys.
        keys = entry_rows(new_ptr, xp) * n + out.indices.astype(xp.int64)
        order = xp.argsort(keys)
        out = csr_from_arrays(out.data[order], out.indices[order], new_ptr, csr.shape,
                              canonical=False)
    out.has_canonical_format = True
    return out


def label_order(labels, within=None):
    """The permutation that groups rows by cluster (the spy plot's "permuted by
    cluster" view): clusters in label order, unlabelled rows (-1) last, and within a
    cluster the order of `within` (a permutation such as :attr:`RowOrder.perm`; default
    the given order).

    Parameters
    ----------
    labels : int array of shape (n,)
        NumPy or CuPy; the permutation is on the same device.
    within : int array of shape (n,), optional

    Returns
    -------
    perm : int64 array of shape (n,)
    """
    xp = array_module(labels)
    labels = xp.asarray(labels).astype(xp.int64)
    n = labels.shape[0]
    base = (xp.arange(n, dtype=xp.int64) if within is None
            else check_permutation(within, n, xp, "within"))
    key = labels[base]
    key = xp.where(key < 0, int(key.max()) + 1 if n else 0, key)
    position = xp.arange(n, dtype=xp.int64)
    return base[xp.argsort(key * n + position)]


def _morton(Q, bits: int, xp):
    """Morton codes (uint64) of the non-negative integer coordinates `Q` (n × d)."""
    d = Q.shape[1]
    code = xp.zeros(Q.shape[0], dtype=xp.uint64)
    for b in range(bits):
        for k in range(d):
            bit = (Q[:, k] >> xp.uint64(b)) & xp.uint64(1)
            code |= bit << xp.uint64(b * d + k)
    return code


def spatial_order(X, xp):
    """The Morton order of the rows of `X` (n × d, on `xp`'s device).

    Up to :data:`SPATIAL_MAX_DIMS` features the coordinates themselves; beyond, the
    coordinates on the leading principal axes of a seeded sample of
    :data:`SPATIAL_SAMPLE` rows. They are quantised to ``63 // d`` bits (at most 21)
    over the largest coordinate range, one scale for all.
    """
    X = xp.asarray(X)
    n, d = X.shape
    if d > SPATIAL_MAX_DIMS:
        rng = np.random.default_rng(0)
        take = xp.asarray(np.sort(rng.choice(n, min(n, SPATIAL_SAMPLE), replace=False)))
        S = X[take].astype(xp.float64)
        mean = S.mean(axis=0)
        S -= mean
        # The leading eigenvectors of the d × d covariance by a few steps of subspace
        # iteration (LAPACK's full eigh of 784 × 784 took 12 s, an SVD of the sample
        # 44 s, on two busy cores; this, a fraction of a second).
        C = S.T @ S
        Q = xp.asarray(rng.standard_normal((d, SPATIAL_MAX_DIMS + 4)))
        for _ in range(6):
            Q, _ = xp.linalg.qr(C @ Q)
        _, v = xp.linalg.eigh(Q.T @ C @ Q)
        axes = Q @ v[:, ::-1][:, :SPATIAL_MAX_DIMS]
        X = (X.astype(xp.float64) - mean) @ axes
        d = X.shape[1]
    X = X.astype(xp.float64)
    bits = min(21, 63 // d)
    # One scale for every axis (the largest range), so that the cells are cubes and a
    # short axis (noise) does not weigh like a long one.
    lo = X.min(axis=0)
    span = float((X.max(axis=0) - lo).max()) if n else 0.0
    span = span if span > 0 else 1.0
    Q = xp.floor((X - lo) * (((1 << bits) - 1) / span)).astype(xp.uint64)
    codes = _morton(Q, bits, xp)
    # Stable, so that equal codes keep the rows' order (CuPy's sort is stable).
    order = np.argsort(codes, kind="stable") if xp is np else xp.argsort(codes)
    return order.astype(xp.int64)


def rcm_order(csr, xp):
    """Reverse Cuthill–McKee of the pattern (SciPy, on the host)."""
    from scipy.sparse.csgraph import reverse_cuthill_mckee

    from .._backend import sparse_module

    host = sparse_module(np).csr_matrix(
        (np.ones(int(csr.nnz), dtype=np.int8), to_numpy(csr.indices), to_numpy(csr.indptr)),
        shape=csr.shape)
    return xp.asarray(reverse_cuthill_mckee(host, symmetric_mode=True).astype(np.int64))


def _check_points(X, n: int, xp):
    if X is None:
        raise ValueError("method='spatial' needs the points: pass X, the n × d data the graph "
                         "was built from")
    X = xp.asarray(X)
    if X.ndim != 2 or X.shape[0] != n:
        raise ValueError(f"X must be the n × d points of the graph's n={n} rows; got shape "
                         f"{tuple(X.shape)}")
    return X


def row_order(graph_or_csr, method="jaccard", X=None, *, tau=_jaccard.DEFAULT_TAU, seed=0,
              block=8, tile=DEFAULT_TILE) -> RowOrder:
    """A row order of a symmetric graph and the product traffic before and after.

    Parameters
    ----------
    graph_or_csr : explorer.Graph or scipy/cupyx CSR matrix of shape (n, n)
        A symmetric pattern without a diagonal, as the builders return it (the
        Jaccard formula relies on both; on another matrix the result is still a
        permutation). A CuPy matrix is reordered on its GPU (RCM on the host).
    method : {"jaccard", "rcm", "spatial"}, default "jaccard"
        See the module's description.
    X : array of shape (n, d), optional
        The points (``"spatial"`` only).
    tau : float, default 0.6
        Jaccard distance threshold in [0, 1): a row joins a leader's group when
        ``1 - |N[i] ∩ N[j]| / |N[i] ∪ N[j]| <= tau``.
    seed : int, default 0
        Seeds the Jaccard leaders' priorities (the order is a function of the graph
        and the seed).
    block, tile : int
        The product's block width and the reuse model's tile
        (:func:`spmm_traffic`).

    Returns
    -------
    RowOrder

    Raises
    ------
    ValueError, TypeError
        An unknown method, `tau` outside [0, 1), ``"spatial"`` without X (or with X of
        another row count), a matrix that is not square.
    """
    check_choice(method, "method", METHODS)
    tau = check_float(tau, "tau", low=0.0, high=1.0, high_inclusive=False)
    seed = check_int(seed, "seed", low=0, high=2**32 - 1)
    block = check_int(block, "block", low=1)
    tile = check_int(tile, "tile", low=1)
    csr = _csr_of(graph_or_csr)
    before = spmm_traffic(csr, block=block, tile=tile)
    return _compute(csr, method, X, tau, seed, block, tile, before, "asked for")


def _compute(csr, method, X, tau, seed, block, tile, before, reason) -> RowOrder:
    xp = array_module(csr)
    n = csr.shape[0]
    info: dict = {}
    if method == "spatial":
        X = _check_points(X, n, xp)
    _sync(xp)
    t0 = time.perf_counter()
    if method == "jaccard":
        check_reorder_memory(csr, "jaccard")
        if not csr.has_sorted_indices:  # the intersections binary-search the columns
            csr = csr.sorted_indices()
        parents, rounds = _jaccard.jaccard_levels(csr.indptr, csr.indices, tau=tau, seed=seed)
        perm = _jaccard.dendrogram_order(parents, n, xp)
        info = {"tau": tau, "seed": seed, "rounds": rounds,
                "level_rows": [n] + [int(p.max()) + 1 if p.size else 0 for p in parents]}
    elif method == "rcm":
        perm = rcm_order(csr, xp)
    else:
        perm = spatial_order(X, xp)
    _sync(xp)
    seconds = time.perf_counter() - t0
    after = spmm_traffic(csr, block=block, tile=tile, perm=perm)
    return RowOrder(perm=perm, method=method, reason=reason, seconds=seconds, before=before,
                    after=after, info=info)


def _predicted_cost(method: str, device: str, n: int, nnz: int) -> float:
    a, b = REORDER_COST[device][method]
    return a * n + b * nnz


def choose_order(graph_or_csr, method="auto", X=None, *, n_products=EXPECTED_PRODUCTS,
                 block=8, tau=_jaccard.DEFAULT_TAU, seed=0, tile=DEFAULT_TILE) -> RowOrder:
    """Reorder when it pays: the rule behind ``reorder="auto"``.

    Parameters
    ----------
    graph_or_csr : explorer.Graph or CSR matrix of shape (n, n)
    method : {"auto", "jaccard", "rcm", "spatial"}, default "auto"
        A named method is computed whatever the rule says (with the rule's numbers in
        the reason). ``"auto"``: see Notes.
    X : array of shape (n, d), optional
        The points; makes ``"spatial"`` a candidate when d <= 8
        (:data:`SPATIAL_AUTO_MAX_DIMS`).
    n_products : int, default :data:`EXPECTED_PRODUCTS`
        Block products the eigensolver is expected to take (0: a dense or exact
        solver, nothing to save).
    block : int
        The eigensolver's block width.
    tau, seed, tile
        As :func:`row_order`.

    Returns
    -------
    RowOrder
        With ``perm=None`` and ``method="none"`` when the rule keeps the order.

    Notes
    -----
    The rule, from numbers that cost a sample of row tiles to get:

    1. The traffic of one product in the given order, T₀, and its floor F
       (:func:`spmm_traffic`: distinct columns per tile of :data:`DEFAULT_TILE` rows,
       sampled).
    2. For each candidate order m (``"spatial"`` when X is given with at most 8
       features, ``"jaccard"``, ``"rcm"``), the expected saving
       ``n_products · max(0, T₀ − r_m F) / BW`` with r_m = :data:`AFTER_RATIO` [m]
       and BW = :data:`BANDWIDTH` [device], against its cost ``a n + b nnz`` (:data:`REORDER_COST`).
    3. The candidate with the largest saving net of its cost is computed when that
       net is positive; otherwise the rows keep their order. An order that already
       sits near the floor (T₀ ≤ r_m F) saves nothing, so a graph built from sorted or
       gridded points is left alone.
    """
    check_choice(method, "method", CHOICES)
    n_products = check_int(n_products, "n_products", low=0)
    block = check_int(block, "block", low=1)
    tile = check_int(tile, "tile", low=1)
    tau = check_float(tau, "tau", low=0.0, high=1.0, high_inclusive=False)
    seed = check_int(seed, "seed", low=0, high=2**32 - 1)
    csr = _csr_of(graph_or_csr)
    xp = array_module(csr)
    n, nnz = csr.shape[0], int(csr.nnz)
    device = "cpu" if xp is np else "gpu"
    if method == "auto" and n_products == 0:
        return RowOrder(perm=None, method="none", reason="kept: the eigensolver takes no sparse "
                        "products", seconds=0.0, before=None, after=None)
    before = spmm_traffic(csr, block=block, tile=tile)
    low_d = X is not None and np.ndim(X) == 2 and np.shape(X)[1] <= SPATIAL_AUTO_MAX_DIMS
    candidates = [m for m in ("spatial", "jaccard", "rcm") if m != "spatial" or low_d]
    net = {}
    for m in candidates:
        saved = n_products * max(0.0, before.bytes - AFTER_RATIO[m] * before.floor_bytes) \
            / BANDWIDTH[device]
        net[m] = (saved, _predicted_cost(m, device, n, nnz))
    best = max(candidates, key=lambda m: net[m][0] - net[m][1])
    saved, cost = net[best]
    traffic = (f"product traffic {before.ratio:.2f}x its floor "
               f"({before.bytes / 1e6:.3g} MB vs {before.floor_bytes / 1e6:.3g} MB per product)")
    if method != "auto":
        saved, cost = net.get(method, (0.0, _predicted_cost(method, device, n, nnz)))
        reason = (f"method={method!r} asked for; {traffic}; expected saving {saved:.3g} s over "
                  f"{n_products} products against a cost of about {cost:.3g} s")
        return _compute(csr, method, X, tau, seed, block, tile, before, reason)
    if saved <= cost:
        why = (f"{traffic}; the best candidate, {best}, would save about {saved:.3g} s over "
               f"{n_products} products but cost about {cost:.3g} s")
        return RowOrder(perm=None, method="none", reason=f"kept: {why}", seconds=0.0,
                        before=before, after=None, info={"candidates": net})
    reason = (f"{traffic}; {best} is expected to save {saved:.3g} s over {n_products} products "
              f"for about {cost:.3g} s of reordering")
    order = _compute(csr, best, X, tau, seed, block, tile, before, reason)
    order.info["candidates"] = net
    return order
