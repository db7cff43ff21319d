"""What every similarity-kernel launcher shares: the edge rule in kernel terms, the tile
geometry, the operand layout, CUDA-event timing and the launch itself.

The pair kernels (``common.cuh``; the edge rule is ``edge_rule.cuh``, shared with the
grid and GEMM builders) evaluate pairs in tiles: a block of ``(bsx, bsy)`` threads covers
``rows = bsy * tr`` rows and ``cols = bsx * 4`` columns, each thread a ``tr × 4``
register tile. Operands are the data transposed (``D × ld`` float32, the paper's
``GPU_dataT``), padded to ``ld`` columns with NaN so that no kernel needs a bounds test:
every comparison with NaN is false, so padding never makes an edge.

CuPy is imported lazily: this package can be imported, and its sources listed, on a
machine without a GPU.
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from ._loader import get_module

#: Kernel code of each metric (``METRIC`` in edge_rule.cuh).
METRIC_CODE = {"gaussian": 0, "uniform": 1, "cosine": 2}

#: Up to this many dimensions the vectors live in registers (``DREG``); beyond, they
#: stream through shared memory ``KC`` at a time.
DREG_MAX = 8
KC = 16

#: Columns per thread (fixed: one float4 per dimension).
TC = 4

#: CUDA's limit on gridDim.y (gridDim.x goes to 2**31 - 1).
MAX_GRID_Y = 65535

#: Gaussian weights use ``__expf`` while the exponent stays within ``[-8, 0]``.
#: CUDA documents ``__expf``'s error as ``2 + floor(|1.173 x|)`` ulp, so at most 11 ulp
#: (1.3e-6 relative) there, well inside the 1e-5 the builders promise; past it the error
#: grows with ``|x|`` (≈ 1e-5 near ``|x| = 70``), so wider ranges use ``expf`` (2 ulp).
FAST_EXP_MAX_ARG = 8.0

#: Column tiles a counting / chkPass block walks (the x extent of its strip).
TILES_PER_STRIP = 64

#: Dynamic shared memory a block gets without opting in.
_DEFAULT_SMEM = 48 * 1024


@dataclass(frozen=True)
class Rule:
    """The edge rule as every kernel sees it: plain numbers (edge_rule.cuh on the device).

    The graph layer validates the user's parameters and translates them into a Rule;
    the kernels only compare and weigh (docs/architecture.md "Semantics").

    Attributes
    ----------
    metric : {"gaussian", "uniform", "cosine"}
    threshold : float
        Compared in float32: the squared-distance cutoff (gaussian, uniform: edge iff
        below) or the cosine threshold (cosine: edge iff above).
    sigma : float or None
        The gaussian width (required for gaussian, ignored otherwise).

    Raises
    ------
    ValueError
        An unknown metric, or a gaussian rule without a positive sigma.
    """

    metric: str
    threshold: float
    sigma: float | None = None

    def __post_init__(self):
        if self.metric not in METRIC_CODE:
            raise ValueError(f"Rule metric={self.metric!r}; use one of {tuple(METRIC_CODE)}")
        if self.metric == "gaussian" and not (self.sigma is not None and self.sigma > 0):
            raise ValueError(f"a gaussian Rule needs sigma > 0; got sigma={self.sigma!r}")

    @property
    def code(self) -> int:
        """``METRIC`` in edge_rule.cuh."""
        return METRIC_CODE[self.metric]

    @property
    def is_cosine(self) -> bool:
        """Whether the compared value is a cosine (else a squared distance)."""
        return self.metric == "cosine"

    @property
    def scale(self) -> float:
        """``-1 / (2 sigma**2)`` for gaussian weights, else 0."""
        if self.metric != "gaussian":
            return 0.0
        return -1.0 / (2.0 * float(self.sigma) ** 2)

    @property
    def fast_exp(self) -> bool:
        """Whether gaussian weights use ``__expf`` (see :data:`FAST_EXP_MAX_ARG`)."""
        if self.metric != "gaussian":
            return False
        return float(self.threshold) / (2.0 * float(self.sigma) ** 2) <= FAST_EXP_MAX_ARG

    @property
    def exp_name(self) -> str | None:
        """The device exponential of the weights: ``"__expf"``, ``"expf"`` or None."""
        if self.metric != "gaussian":
            return None
        return "__expf" if self.fast_exp else "expf"

    @property
    def defines(self) -> tuple[str, ...]:
        """``-D`` options of edge_rule.cuh."""
        return (f"-DMETRIC={self.code}", f"-DFAST_EXP={int(self.fast_exp)}")

    @property
    def args(self) -> tuple:
        """``(threshold, scale)`` as the kernels' float32 arguments."""
        return np.float32(self.threshold), np.float32(self.scale)

    def describe(self) -> str:
        """One line for messages, e.g. ``gaussian σ=0.01, squared distance < 0.0008``."""
        if self.is_cosine:
            return f"cosine > {self.threshold:g}"
        head = f"gaussian σ={self.sigma:g}" if self.metric == "gaussian" else "uniform"
        return f"{head}, squared distance < {self.threshold:g}"


@dataclass(frozen=True)
class Geometry:
    """A block shape and register tile: ``rows × cols`` pairs per block and step."""

    bsx: int
    bsy: int
    tr: int

    @property
    def rows(self) -> int:
        return self.bsy * self.tr

    @property
    def cols(self) -> int:
        return self.bsx * TC

    @property
    def block(self) -> tuple[int, int]:
        return (self.bsx, self.bsy)

    @property
    def defines(self) -> tuple[str, ...]:
        return (f"-DBSX={self.bsx}", f"-DBSY={self.bsy}", f"-DTR={self.tr}", f"-DTC={TC}")


def check_block_shape(kernel: str, shape) -> tuple[int, int]:
    """Validate a ``(bsx, bsy)`` block shape for `kernel` and return it as ints.

    Raises
    ------
    ValueError
        Unless ``bsx`` is a positive multiple of 32 (a warp never spans two rows: the
        kernels reduce and compact rows warp by warp), ``bsy >= 1`` and
        ``bsx * bsy <= 1024``.
    """
    ok = (
        isinstance(shape, (tuple, list))
        and len(shape) == 2
        and all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in shape)
    )
    if ok:
        bsx, bsy = int(shape[0]), int(shape[1])
        ok = bsx >= 32 and bsx % 32 == 0 and bsy >= 1 and bsx * bsy <= 1024
    if not ok:
        raise ValueError(
            f"block_shapes[{kernel!r}]={shape!r} is not allowed; use (bsx, bsy) with bsx a "
            f"positive multiple of 32, bsy >= 1 and bsx*bsy <= 1024, e.g. (32, 8)"
        )
    return bsx, bsy


def staged(d: int) -> bool:
    """Whether `d` dimensions go through shared memory (else they live in registers)."""
    return d > DREG_MAX


def geometry(kind: str, shape: tuple[int, int], d: int) -> Geometry:
    """The register tile for a kernel family.

    ``kind`` is ``"count"`` (counting and chkPass: results stay in registers or go to
    global memory) or ``"segment"`` (2ndPass, fullPass, supPass: a dense segment of
    ``rows × cols`` pairs, 8 bytes each, sits in shared memory). With staged dimensions
    (d > 8) a thread takes 8 rows, so that each shared-memory load feeds 8 FMAs and the
    loop is bound by arithmetic, not by shared memory; segment kernels drop to 4 rows
    when 8 would make the segment larger than 64 KiB. Registers hold d <= 8 vectors
    whole, and 4 rows keep ~60 registers per thread.
    """
    bsx, bsy = shape
    if not staged(d):
        return Geometry(bsx, bsy, 4)
    if kind == "segment" and bsy * 8 * bsx * TC * 8 > 64 * 1024:
        return Geometry(bsx, bsy, 4)
    return Geometry(bsx, bsy, 8)


def header_bytes(nints: int, rows: int) -> int:
    """Shared-memory header of a kernel (``HDR_BYTES`` in common.cuh)."""
    return ((nints * rows + 2) * 4 + 15) // 16 * 16


def staging_bytes(geom: Geometry, d: int) -> int:
    """Shared memory for staged dimensions (0 when they live in registers)."""
    return KC * (geom.rows + geom.cols) * 4 if staged(d) else 0


def round_up(x: int, m: int) -> int:
    return -(-x // m) * m


@dataclass
class Operands:
    """The data as the kernels read it.

    Attributes
    ----------
    XT : cupy.ndarray of shape (D, ld), float32
        ``XT[k, j]`` = feature k of point j (row-normalised for cosine, NaN for a zero
        vector); NaN for ``j >= n``; 0 for ``k >= d`` (only when dimensions are staged,
        D = d rounded up to KC).
    row_ids : cupy.ndarray of shape (ld,), int32
        ``row_ids[j] = j`` for ``j < n``, -1 beyond: the global row of each row slot.
    n, d : int
    """

    XT: object
    row_ids: object
    n: int
    d: int

    @property
    def D(self) -> int:
        return self.XT.shape[0]

    @property
    def ld(self) -> int:
        return self.XT.shape[1]

    @property
    def defines(self) -> tuple[str, ...]:
        return (f"-DKC={KC}",) if staged(self.d) else (f"-DDREG={self.d}",)


def prepare_operands(X, metric: str, multiple: int) -> Operands:
    """Lay out `X` (n × d, C-contiguous float32 CuPy) for the kernels.

    `multiple` is the least common multiple of the tile rows and columns of every kernel
    that will read the operands (each walks whole tiles).

    For the cosine metric the rows are normalised in float64 and rounded once to
    float32; a zero vector becomes NaN, so it has no edge (docs/architecture.md "Semantics").
    """
    import cupy

    n, d = X.shape
    D = round_up(d, KC) if staged(d) else d
    ld = round_up(n, multiple)
    src = X
    if metric == "cosine":
        x64 = X.astype(cupy.float64)
        norms = cupy.sqrt((x64 * x64).sum(axis=1))
        zero = norms == 0
        norms[zero] = 1.0
        src = (x64 / norms[:, None]).astype(cupy.float32)
        src[zero] = cupy.nan
        del x64
    XT = cupy.empty((D, ld), dtype=cupy.float32)
    XT[:d, :n] = src.T
    XT[d:, :n] = 0.0
    XT[:, n:] = cupy.nan
    row_ids = cupy.arange(ld, dtype=cupy.int32)
    row_ids[n:] = -1
    return Operands(XT, row_ids, n, d)


def gather_rows(ops: Operands, rows, multiple: int):
    """The operand columns of `rows` (int32 CuPy, each in [0, n)) as a row operand.

    Returns ``(XR, row_ids)``: ``XR`` of shape (D, m_pad) with the rows' data and NaN
    past ``m = len(rows)``; ``row_ids`` of length m_pad with `rows` then -1.
    """
    import cupy

    m = int(rows.size)
    m_pad = round_up(max(m, 1), multiple)
    XR = cupy.full((ops.D, m_pad), cupy.nan, dtype=cupy.float32)
    XR[:, :m] = ops.XT[:, rows]
    row_ids = cupy.full(m_pad, -1, dtype=cupy.int32)
    row_ids[:m] = rows
    return XR, row_ids


def scan(counts):
    """Exclusive scan of per-row counts into int64 row offsets of length n + 1.

    ``cupy.cumsum`` (CUB's device scan) replaces the paper's ``thrust::exclusive_scan``;
    int64 so that offsets past 2**31 stay exact.
    """
    import cupy

    rowptr = cupy.empty(counts.size + 1, dtype=cupy.int64)
    rowptr[0] = 0
    rowptr[1:] = cupy.cumsum(counts, dtype=cupy.int64)
    return rowptr


class StageTimer:
    """Per-stage device time from CUDA events recorded around each stage.

    Stages may repeat (CSR-3's chunks); their times add up. Reading :meth:`seconds`
    synchronises on the last event.
    """

    def __init__(self):
        self._events = []

    @contextmanager
    def __call__(self, stage: str):
        import cupy

        start = cupy.cuda.Event()
        start.record()
        try:
            yield
        finally:
            end = cupy.cuda.Event()
            end.record()
            self._events.append((stage, start, end))

    def seconds(self) -> dict[str, float]:
        import cupy

        out: dict[str, float] = {}
        if self._events:
            self._events[-1][2].synchronize()
        for stage, start, end in self._events:
            out[stage] = out.get(stage, 0.0) + cupy.cuda.get_elapsed_time(start, end) / 1e3
        return out


def free_device_bytes() -> int:
    """Device memory a new allocation can get: the driver's free bytes plus the free
    blocks CuPy's pool holds."""
    import cupy

    return int(cupy.cuda.runtime.memGetInfo()[0]) + int(
        cupy.get_default_memory_pool().free_bytes())


def launch(module: str, kernel: str, defines: tuple, grid, block, args, shared_mem: int = 0):
    """Compile (cached) and launch ``kernel`` of ``kernels/<module>.cu``.

    Raises
    ------
    ValueError
        When the block needs more shared memory than the device allows per block.
    """
    import cupy

    fn = get_module(module, tuple(defines)).get_function(kernel)
    if shared_mem > _DEFAULT_SMEM:
        limit = _smem_optin_limit(cupy.cuda.Device().id)
        if shared_mem > limit:
            raise ValueError(
                f"{kernel} with block {tuple(block)} needs {shared_mem} bytes of shared memory "
                f"per block, more than this device's {limit}; use a smaller block shape"
            )
        if fn.max_dynamic_shared_size_bytes < shared_mem:
            fn.max_dynamic_shared_size_bytes = shared_mem
    fn(tuple(grid), tuple(block), tuple(args), shared_mem=shared_mem)


_SMEM_LIMITS: dict[int, int] = {}
_SM_COUNTS: dict[int, int] = {}


def multiprocessors() -> int:
    """Multiprocessors of the current device (cached: ``Device().attributes`` queries
    every attribute, a cost per launch that steps of k-means at small n would feel)."""
    import cupy

    device = cupy.cuda.Device().id
    if device not in _SM_COUNTS:
        from cupy.cuda import runtime

        attr = runtime.cudaDevAttrMultiProcessorCount
        _SM_COUNTS[device] = int(runtime.deviceGetAttribute(attr, device))
    return _SM_COUNTS[device]


def _smem_optin_limit(device: int) -> int:
    if device not in _SMEM_LIMITS:
        from cupy.cuda import runtime

        attr = runtime.cudaDevAttrMaxSharedMemoryPerBlockOptin
        _SMEM_LIMITS[device] = int(runtime.deviceGetAttribute(attr, device))
    return _SMEM_LIMITS[device]


def lcm(*values: int) -> int:
    return math.lcm(*values)
