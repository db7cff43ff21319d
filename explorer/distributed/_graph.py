"""The ε-graph built as row blocks of its CSR on the workers, each block against all
points (issue 19, item 2).

Block b holds the rows ``offsets[b]:offsets[b + 1]`` of the similarity matrix S as a
canonical CSR matrix of all n columns, on the worker of the data's row block b; the
whole matrix is never assembled unless asked (:meth:`RowBlockGraph.to_csr`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from .. import memory
from .._backend import array_module, to_numpy
from .._csr import block_rows, csr_from_arrays, row_sums
from .._validation import check_data
from ..graph import build_rows, choose_cpu_method, count_rows_cpu, stats_from_counts
from ..graph.reference import index_dtype
from ..graph.rule import EdgeRule
from ..metrics import cut_sums
from ._blocks import RowBlocks, get_client, per_block

__all__ = ["METHODS", "RowBlockGraph", "build_row_blocks"]

#: Row-block builders: the CPU builders of :mod:`explorer.graph` restricted to a
#: block of rows (``"auto"`` picks as :func:`explorer.graph.choose_cpu_method`), and
#: for CuPy chunks the GPU builders that take a range of rows
#: (:func:`explorer.graph.gpu.build_rows_gpu`; ``"auto"`` picks as
#: :func:`explorer.graph.gpu.choose_rows_method`).
METHODS = ("auto", "kdtree", "bruteforce", "grid", "gemm")

#: The methods that build a block on its worker's GPU (CuPy chunks only).
GPU_METHODS = ("grid", "gemm")


@dataclass
class RowBlockGraph:
    """A similarity matrix held as row blocks on the workers.

    Attributes
    ----------
    blocks : RowBlocks
        Futures of the CSR row blocks (``scipy.sparse.csr_matrix`` of shape
        (rows of the block, n), canonical, float32), in order.
    n : int
    nnz : int
    rule : EdgeRule
    method, method_reason : str
        The builder each block ran, and why.
    counts : numpy.ndarray of int64, shape (n,)
        Nonzeros per row.
    degrees : numpy.ndarray of float64, shape (n,)
        Weighted degrees (row sums in float64, as :func:`explorer._csr.row_sums`).
    stats : explorer.GraphStats
        From `counts` and `degrees` (connected components are not counted).
    degree_blocks : list of distributed.Future
        Each block's float64 degrees, left on its worker (the same values as
        `degrees`), for the stages that need them there.
    timings : dict of str to float
        Seconds: ``"build"`` (the blocks, preflight included), ``"stats"``.
    """

    blocks: RowBlocks
    n: int
    nnz: int
    rule: EdgeRule
    method: str
    method_reason: str
    counts: np.ndarray
    degrees: np.ndarray
    stats: object
    degree_blocks: list | None = None
    timings: dict = field(default_factory=dict)

    @property
    def shape(self) -> tuple[int, int]:
        return (self.n, self.n)

    def __getstate__(self):
        """Pickled without its blocks, which live on the cluster: an unpickled graph
        keeps its rule, statistics, counts and degrees (so a fitted estimator pickles),
        and :meth:`to_csr` says the matrix stayed behind."""
        state = dict(self.__dict__)
        state["blocks"] = None
        state["degree_blocks"] = None
        return state

    def _check_attached(self):
        if self.blocks is None:
            raise ValueError("this row-block graph was unpickled: its blocks stayed on the "
                             "cluster that built it; call to_csr() before pickling to keep "
                             "the matrix")

    @property
    def options(self):
        """The CSR-2/CSR-3 knobs the build used: none (``BuildOptions()``), for the
        reports that print them."""
        from ..graph.rule import BuildOptions

        return BuildOptions()

    def cut_terms(self, labels):
        """Per cluster (labels >= 0, ascending): cut weight, volume and size, as
        :func:`explorer.metrics.clustering_scores` takes them; each row block sums its
        rows' share on its worker, the client adds the shares in block order."""
        self._check_attached()
        lab = np.asarray(to_numpy(np.asarray(labels)))
        if lab.ndim != 1 or lab.shape[0] != self.n:
            raise ValueError(f"labels must be 1-D with one label per vertex (n={self.n}); "
                             f"got shape {lab.shape}")
        if lab.dtype.kind not in "iu":
            raise TypeError(f"labels must be integers; got dtype {lab.dtype}")
        lab = lab.astype(np.int64)
        if (lab < -1).any():
            raise ValueError("labels must be >= 0, or -1 for a vertex in no cluster")
        clustered = lab >= 0
        ids, inverse = np.unique(lab[clustered], return_inverse=True)
        k = int(ids.shape[0])
        cluster = np.full(self.n, -1, dtype=np.int64)
        cluster[clustered] = inverse.ravel()
        client = self.blocks.client
        shared = client.scatter(cluster, broadcast=True, hash=False)
        cut, vol = np.zeros(k), np.zeros(k)
        for c, v in client.gather([
            client.submit(block_cut_terms, f, int(r0), shared, k, pure=False)
            for f, r0 in zip(self.blocks.futures, self.blocks.offsets[:-1], strict=True)
        ]):
            cut, vol = cut + c, vol + v
        return cut, vol, np.bincount(cluster[clustered], minlength=k).astype(np.float64)

    def to_csr(self):
        """The whole matrix gathered to the client as one canonical SciPy CSR matrix
        (the index dtype of the semantics for its nnz): for tests and small graphs."""
        self._check_attached()
        parts = [_host_csr(p) for p in self.blocks.client.gather(self.blocks.futures)]
        idx = index_dtype(self.nnz, self.n)
        indptr = np.zeros(self.n + 1, dtype=idx)
        at = 0
        for r0, part in zip(self.blocks.offsets[:-1], parts, strict=True):
            indptr[r0 + 1 : r0 + 1 + part.shape[0]] = part.indptr[1:].astype(np.int64) + at
            at += part.nnz
        data = np.concatenate([p.data for p in parts]).astype(np.float32, copy=False)
        indices = np.concatenate([p.indices for p in parts]).astype(idx, copy=False)
        return csr_from_arrays(data, indices, indptr, self.shape, canonical=True)


def _host_csr(m):
    if isinstance(m, sp.spmatrix | sp.sparray):
        return m
    return m.get()


def build_row_blocks(X, rule: EdgeRule, *, method="auto", client=None, check_memory=True,
                     blocks: RowBlocks | None = None, points=None) -> RowBlockGraph:
    """Build the ε-neighbourhood graph of a Dask array as CSR row blocks on the workers.

    Parameters
    ----------
    X : dask.array.Array of shape (n, d)
        NumPy or CuPy chunks, chunked by rows; the graph's row blocks are its chunks.
    rule : EdgeRule
        A complete edge rule (``EdgeRule.suggest`` fills one in).
    method : {"auto", "kdtree", "bruteforce", "grid", "gemm"}
        The block builder (see Notes); ``"grid"`` and ``"gemm"`` need CuPy chunks.
    client : distributed.Client, optional
        Default: the Client in scope.
    check_memory : bool, default True
        Estimate each block's memory on its worker before building it, and refuse a
        block that would not fit (:class:`explorer.memory.MemoryEstimateError`).
    blocks, points : optional
        X's row blocks and the future of all its points, when the caller has them.

    Returns
    -------
    RowBlockGraph

    Notes
    -----
    **Each block against all points.** Every worker gets all n points (one future,
    fetched by each worker once) and builds its rows with the single-process CPU
    machinery: low-d distance rules by a kd-tree over all points queried with the
    block's rows (the CPU's counterpart of the grid builder), high-d data and cosine
    rules by the blockwise brute force whose candidates come from a float64 matrix
    product (the CPU's GEMM builder). Both decide every candidate with the float64
    reference arithmetic (:class:`explorer.graph.reference.PairValues`), whose value
    for (i, j) is bit for bit the one for (j, i), so the blocks put together are the
    single-process graph exactly: same pattern, same float32 weights, canonical.

    **CuPy chunks** are built on the worker's GPU against all points
    (:func:`explorer.graph.gpu.build_rows_gpu`): ``method="auto"`` takes the grid for
    distance rules with d <= 8 (all points binned, the block's rows counted and
    filled) and the GEMM for d >= 32 (the block's row tiles against all columns); the
    blocks put together are the single-GPU graph of that builder exactly (the GPU
    exactness contract against the float64 reference). Between the two (and cosine
    rules below d = 32) no GPU builder takes a range of rows: the block is built on
    the worker's host by the CPU builders and moved to its GPU, and
    ``method_reason`` says so. ``"kdtree"``/``"bruteforce"`` ask for the host build.

    **Memory preflight.** Before a host build, each worker estimates its block's nonzeros
    from a seeded sample of its rows (the exact per-row count of
    :func:`explorer.graph.count_rows_cpu`) and compares
    :func:`explorer.memory.estimate_cpu_bytes` with
    :data:`explorer.memory.CPU_MEMORY_FRACTION` of its available memory. A GEMM
    block estimates its entries from sample rows on the device and refuses a block
    that would not fit in free GPU memory (ValueError); a GPU block that runs out of
    memory all the same raises MemoryError.
    """

    t0 = time.perf_counter()
    client = get_client(client)
    if method not in METHODS:
        raise ValueError(f"method={method!r} is not a row-block builder; allowed: {METHODS}")
    blocks = RowBlocks.from_dask(client, X) if blocks is None else blocks
    points = client.submit(gather_points, blocks.futures) if points is None else points
    n, d = blocks.n, int(X.shape[1])
    on_gpu = cupy_chunks(X)
    if method in GPU_METHODS and not on_gpu:
        raise ValueError(f"method={method!r} builds the row blocks on the workers' GPUs: "
                         "it needs CuPy chunks (X.map_blocks(cupy.asarray)); NumPy chunks "
                         f"take one of {('auto', 'kdtree', 'bruteforce')}")
    if method == "grid" and rule.compares != "sqdist":
        raise ValueError(f"method='grid' serves distance rules only; {rule.describe()} "
                         "compares cosines (use 'gemm' or 'auto')")
    if method == "auto" and on_gpu:
        from ..graph.gpu import choose_rows_method

        method, reason = choose_rows_method(n, d, rule)
        reason = f"row blocks on the workers: {reason}"
    elif method == "auto":
        method, reason = choose_cpu_method(n, d, rule)
        reason = f"row blocks on the workers, each a {reason}"
    else:
        reason = f"method={method!r} as asked, per row block on the workers"
    # Each block on the worker of its data block (RowBlocks.map): left to the
    # scheduler, every block went where the gathered points are (its larger input),
    # and a 10⁷-point graph of two workers' data was built and held by one.
    futures = blocks.map(build_block, points, per_block(blocks.offsets[:-1].tolist()), rule,
                         method, check_memory)
    graph_blocks = RowBlocks(client, futures, blocks.offsets)
    t1 = time.perf_counter()
    summary_futures = [client.submit(block_summary, f) for f in futures]
    summaries = client.gather(summary_futures)
    counts = np.concatenate([s[0] for s in summaries])
    degrees = np.concatenate([s[1] for s in summaries])
    t2 = time.perf_counter()
    stats = stats_from_counts(counts, n=n, degrees=degrees)
    t3 = time.perf_counter()
    return RowBlockGraph(
        blocks=graph_blocks, n=n, nnz=int(counts.sum()), rule=rule, method=method,
        method_reason=reason, counts=counts, degrees=degrees, stats=stats,
        degree_blocks=graph_blocks.parts(summary_futures, 1),
        timings={"build": t2 - t0, "build.submit": t1 - t0, "stats": t3 - t2},
    )


# ---------------------------------------------------------------- worker functions


def gather_points(parts):
    """All the points, validated float32, as one array of the chunks' module."""
    xp = array_module(parts[0])
    return check_data(xp.concatenate(parts, axis=0))


def cupy_chunks(X) -> bool:
    """Whether the Dask array `X` has CuPy chunks (from its meta, without computing)."""
    meta = getattr(X, "_meta", None)
    return meta is not None and type(meta).__module__.split(".")[0] == "cupy"


def build_block(block, points, r0, rule, method, check_memory):
    """Rows ``r0 : r0 + len(block)`` of S as canonical CSR (rows × n), on the block's
    device."""
    return build_range(points, r0, r0 + int(block.shape[0]), rule, method, check_memory)


def build_range(points, r0, r1, rule, method, check_memory):
    """Rows ``r0:r1`` of the graph of all `points` as canonical CSR ((r1 - r0) × n),
    on the points' device, by the builder `method` (one of :data:`METHODS` but
    ``"auto"``)."""
    rows = int(r1 - r0)
    if method in GPU_METHODS:
        from ..graph.gpu import build_rows_gpu

        return build_rows_gpu(points, rule, r0, r0 + rows, method)[0]
    xp = array_module(points)
    X = to_numpy(points)
    if check_memory:
        preflight(X, r0, rows, rule, method)
    csr = build_rows(X, rule, r0, r0 + rows, method)
    if xp is np:
        return csr
    return csr_from_arrays(xp.asarray(csr.data), xp.asarray(csr.indices),
                           xp.asarray(csr.indptr), csr.shape, canonical=True)


def preflight(X, r0, rows, rule, method, *, available=None):
    """Refuse, before building, a row block estimated not to fit in host memory.

    Raises
    ------
    explorer.memory.MemoryEstimateError
    """
    n = X.shape[0]
    available = memory.available_host_bytes() if available is None else int(available)
    if available is None:
        return
    budget = memory.CPU_MEMORY_FRACTION * available
    if memory.estimate_cpu_bytes(float(rows) * (n - 1)) <= budget:
        return
    sample = memory.sample_rows(rows) + r0
    nnz = float(count_rows_cpu(X, rule, method, sample).mean()) * rows
    need = memory.estimate_cpu_bytes(nnz)
    if need > budget:
        raise memory.MemoryEstimateError(
            f"row block {r0}:{r0 + rows} too large for its worker: {rule.describe()} on "
            f"n={n} gives an estimated nnz ≈ {nnz:.3g} for its {rows} rows, about "
            f"{need / 2**30:.1f} GiB to build, but only {available / 2**30:.1f} GiB is "
            "available there; use smaller row chunks, more workers, or a lower threshold",
            device="CPU", nnz=nnz, need_bytes=need, available_bytes=available,
        )


def block_cut_terms(csr, r0, cluster, k):
    """This row block's share of the cut weights and volumes per cluster (float64)."""
    xp = array_module(csr.data)
    cluster = xp.asarray(cluster)
    if csr.nnz == 0:
        return np.zeros(k), np.zeros(k)
    w = csr.data.astype(xp.float64)
    cu = cluster[block_rows(csr, 0, csr.shape[0], 0, csr.nnz, xp) + r0]
    cv = cluster[csr.indices]
    own = cu >= 0
    crossing = own & (cu != cv)
    return cut_sums(cu[crossing], w[crossing], k, xp), cut_sums(cu[own], w[own], k, xp)


def block_summary(csr):
    """``(nonzeros per row, float64 degrees)`` of a row block, on the host."""
    xp = array_module(csr.data)
    counts = to_numpy(xp.diff(csr.indptr)).astype(np.int64)
    return counts, to_numpy(row_sums(csr, xp))
