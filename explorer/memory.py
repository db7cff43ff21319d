"""Memory preflight: will a graph fit, estimated before it is built?

A graph too large for memory must be refused before the work starts, with the estimate
in the message (docs/architecture.md "Memory"). This module holds every such
estimate and check:

- :func:`available_host_bytes` and :func:`free_device_bytes`: what there is;
- :func:`estimate_cpu_bytes` and :func:`estimate_gpu_bytes`: what a build needs for a
  given number of nonzeros; :func:`estimate_knn_bytes`: what a kNN build needs (its
  size is known from n and k, no sample needed);
- :func:`cpu_shortfall`, :func:`check_cpu_memory` and :func:`check_gpu_memory`: the
  checks, which estimate nnz by counting a seeded sample of rows (a small fraction of a
  build) only when the complete graph would not fit anyway;
- :func:`check_allocation`: the same rule for any other allocation proportional to
  its input (a file's decompressed contents, a generated data set, an upload; on the
  device :func:`check_gpu_allocation`), with
  :func:`file_content_limit`, the cap on what one file may decompress to;
- :class:`MemoryEstimateError`, the one error they raise.

The checks take the row counter as a function (``count_rows(rows) -> counts``), so this
module depends on no builder: the graph layer passes its CPU or GPU counting pass.

>>> from explorer import memory
>>> memory.estimate_gpu_bytes(n=1_000_000, nnz=23e6, method="csr2",
...                           hypo_max_nnz_row=32)  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import contextvars

import numpy as np

__all__ = [
    "CPU_BYTES_PER_NNZ",
    "CPU_MEMORY_FRACTION",
    "GPU_MEMORY_FRACTION",
    "SAMPLE_ROWS",
    "MemoryEstimateError",
    "available_host_bytes",
    "check_allocation",
    "check_cpu_memory",
    "check_gpu_allocation",
    "check_gpu_memory",
    "cpu_shortfall",
    "estimate_cpu_bytes",
    "estimate_gpu_bytes",
    "estimate_knn_bytes",
    "file_content_limit",
    "file_limit",
    "file_limit_name",
    "format_bytes",
    "free_device_bytes",
    "sample_rows",
]

#: Rows counted to estimate nnz before a large build.
SAMPLE_ROWS = 512

#: Seed of that sample: the same rows for the same n, so a check is reproducible.
SAMPLE_SEED = 0

#: Peak host bytes per stored nonzero while a CPU builder assembles its CSR
#: (candidate pairs, exact values, COO triplets and the CSR they become).
CPU_BYTES_PER_NNZ = 64

#: Fraction of the available host memory a CPU build may plan to use.
CPU_MEMORY_FRACTION = 0.8

#: Share of the free device memory a GPU build may plan to use: the builders also need
#: operands, counters and CuPy's own scratch, which the estimate leaves out.
GPU_MEMORY_FRACTION = 0.9


#: Default cap on the bytes one data file may hold once decompressed / parsed (an NPZ
#: member, a parsed CSV), whatever memory is free: a small upload must not be able to
#: take the server down (a zip bomb). ``EXPLORER_MAX_FILE_BYTES`` overrides it.
FILE_CONTENT_LIMIT = 2 * 2**30


class MemoryEstimateError(ValueError):
    """A graph estimated, before it is built, not to fit in memory.

    A :class:`ValueError`, so code that catches invalid arguments catches it too. The
    message gives the estimate, what is available and what to change.

    Attributes
    ----------
    device : {"CPU", "GPU"}
    nnz : float
        Estimated nonzeros of the graph.
    need_bytes : float
        Estimated bytes the build needs.
    available_bytes : int
        Bytes available (host) or free (device) when the check ran.
    """

    def __init__(self, message: str, *, device: str, nnz: float, need_bytes: float,
                 available_bytes: int):
        super().__init__(message)
        self.device = device
        self.nnz = nnz
        self.need_bytes = need_bytes
        self.available_bytes = available_bytes


# ------------------------------------------------------------------ what there is


def available_host_bytes() -> int | None:
    """Memory the OS says a new allocation can get (Linux ``MemAvailable``), else None."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def free_device_bytes() -> int:
    """Device memory a new allocation can get on the current CUDA device: the driver's
    free bytes plus the free blocks CuPy's pool holds (imports CuPy)."""
    from .kernels import free_device_bytes as device_free

    return device_free()


def sample_rows(n: int, m: int = SAMPLE_ROWS, seed: int = SAMPLE_SEED) -> np.ndarray:
    """``min(n, m)`` distinct rows of ``range(n)``, seeded and sorted (int64)."""
    m = min(int(n), int(m))
    return np.sort(np.random.default_rng(seed).choice(int(n), m, replace=False))


# ------------------------------------------------------------------ what a build needs


def estimate_cpu_bytes(nnz: float) -> float:
    """Peak host bytes a CPU build of `nnz` nonzeros needs (:data:`CPU_BYTES_PER_NNZ`)."""
    return float(nnz) * CPU_BYTES_PER_NNZ


def estimate_gpu_bytes(n: int, nnz: float, method: str, hypo_max_nnz_row: int,
                       sp_max_nz_pct: float | None = None) -> float:
    """Bytes the largest arrays of a GPU build with `method` take.

    The CSR result (column and value, 8 B per nonzero, and an int64 row pointer), plus
    CSR-2's ELLPACK arrays (``n · hypo_max_nnz_row · 8`` and three int32 per row) or
    CSR-3's arrays sized by spMaxNzPct (when it is None the builder rounds 1.5 times
    the density up: at least ``1.5 nnz``). From 2**31 nonzeros the int32 columns are
    widened to int64 next to themselves: 8 B more per nonzero at that moment.

    Parameters
    ----------
    n : int
        Vertices.
    nnz : float
        Nonzeros (estimated).
    method : str
        ``"csr2"`` and ``"csr3"`` add their own arrays; any other method counts the
        CSR result only.
    hypo_max_nnz_row : int
        CSR-2's ELLPACK width (used for ``"csr2"`` only).
    sp_max_nz_pct : float, optional
        CSR-3's bound on the percentage of nonzeros.

    Returns
    -------
    float
    """
    per_nonzero = 8.0 if nnz < 2**31 else 16.0
    need = per_nonzero * nnz + 8.0 * (n + 1)
    if method == "csr2":
        need += 8.0 * n * hypo_max_nnz_row + 12.0 * n
    elif method == "csr3":
        capacity = 1.5 * nnz if sp_max_nz_pct is None else n * n * sp_max_nz_pct / 100.0
        need = 8.0 * max(capacity, nnz) + (per_nonzero - 8.0) * nnz + 8.0 * (n + 1)
    return need


def estimate_knn_bytes(n: int, k: int, *, gpu: bool) -> float:
    """Peak bytes of a kNN graph build with k neighbours per point.

    The directed lists (int64 index and float64 value: 16 B per entry, n·k entries),
    the union's keys, values and sort order (twice the lists: 2·n·k entries of 24 B)
    and the CSR result (at most 2·n·k nonzeros of 8 B, 12 B from 2**31). The GPU's
    distance tiles are sized from what is left (``kernels.knn``) and not counted.
    """
    entries = float(n) * k
    nnz = 2.0 * entries
    per_nonzero = 8.0 if nnz < 2**31 else 12.0
    need = 16.0 * entries + 24.0 * nnz + per_nonzero * nnz + 8.0 * (n + 1)
    return need if gpu else max(need, estimate_cpu_bytes(nnz) / 2)


def check_gpu_allocation(nbytes: float, what: str, advice: str, *,
                         free: int | None = None) -> None:
    """Refuse, before allocating, `nbytes` of device memory that will not fit
    (:data:`GPU_MEMORY_FRACTION` of the free bytes), as :func:`check_allocation` does
    on the host.

    Raises
    ------
    MemoryEstimateError
        With the estimate, the free memory and `advice`.
    """
    nbytes = float(nbytes)
    free = free_device_bytes() if free is None else int(free)
    if nbytes <= GPU_MEMORY_FRACTION * free:
        return
    raise MemoryEstimateError(
        f"{what} needs about {format_bytes(nbytes)}, but only {format_bytes(free)} of GPU "
        f"memory is free; {advice}",
        device="GPU", nnz=0.0, need_bytes=nbytes, available_bytes=free,
    )


def _sampled_nnz(n: int, count_rows) -> tuple[float, int]:
    """Estimated nnz of the graph from :func:`sample_rows`, and the rows counted."""
    rows = sample_rows(n)
    counts = count_rows(rows)
    return float(counts.mean()) * n, int(rows.size)


# ------------------------------------------------------------------ the checks


def cpu_shortfall(n: int, count_rows, *, available: int | None = None):
    """``(nnz, need_bytes, available_bytes)`` when a CPU build is estimated not to fit,
    else None.

    Parameters
    ----------
    n : int
        Rows of the data.
    count_rows : callable
        ``count_rows(rows) -> counts``: the nonzeros of the given rows (an int64 NumPy
        array of row indices), without building the graph.
    available : int, optional
        Host bytes available; default :func:`available_host_bytes`.

    Returns
    -------
    tuple or None
        None when even the complete graph would fit in :data:`CPU_MEMORY_FRACTION` of
        the available memory, or when the available memory is unknown; otherwise nnz
        is estimated from :data:`SAMPLE_ROWS` seeded rows and the tuple is returned
        only if the estimate does not fit.
    """
    available = available_host_bytes() if available is None else int(available)
    if available is None:
        return None
    budget = CPU_MEMORY_FRACTION * available
    if estimate_cpu_bytes(float(n) * (n - 1)) <= budget:
        return None
    nnz, _ = _sampled_nnz(n, count_rows)
    need = estimate_cpu_bytes(nnz)
    return (nnz, need, available) if need > budget else None


def check_cpu_memory(n: int, count_rows, rule, *, available: int | None = None) -> None:
    """Refuse, before building, a CPU graph estimated not to fit in host memory.

    Parameters
    ----------
    n, count_rows, available
        As in :func:`cpu_shortfall`.
    rule
        The edge rule (anything with a ``describe()`` method), for the message.

    Raises
    ------
    MemoryEstimateError
        With the estimated nnz, the bytes, the available memory and what to change.
    """
    over = cpu_shortfall(n, count_rows, available=available)
    if over is None:
        return
    nnz, need, available = over
    raise MemoryEstimateError(
        f"graph too large for this machine: {rule.describe()} on n={n} gives an "
        f"estimated nnz ≈ {nnz:.3g} ({nnz / n:.1f} per row), about {need / 2**30:.1f} GiB "
        f"to build on the CPU, but only {available / 2**30:.1f} GiB is available; "
        f"lower the threshold, subsample the data, or use graph_stats(sample_rows=...) "
        f"to explore",
        device="CPU", nnz=nnz, need_bytes=need, available_bytes=available,
    )


def check_gpu_memory(n: int, count_rows, rule, method: str, hypo_max_nnz_row: int,
                     sp_max_nz_pct: float | None = None, *, free: int | None = None) -> None:
    """Refuse, before building, a GPU graph estimated not to fit in free device memory.

    Skipped when even the complete graph would fit. Otherwise nnz is estimated by
    counting :data:`SAMPLE_ROWS` seeded rows with `count_rows` and
    :func:`estimate_gpu_bytes` is compared with `free` times
    :data:`GPU_MEMORY_FRACTION`.

    Parameters
    ----------
    n : int
        Rows of the data.
    count_rows : callable
        ``count_rows(rows) -> counts`` (NumPy or CuPy), as in :func:`cpu_shortfall`.
    rule
        The edge rule (anything with a ``describe()`` method), for the message.
    method, hypo_max_nnz_row, sp_max_nz_pct
        As in :func:`estimate_gpu_bytes`: the build that is about to run.
    free : int, optional
        Free device bytes; default :func:`free_device_bytes`.

    Raises
    ------
    MemoryEstimateError
        With the estimated nnz, the bytes, the free memory and what to change.
    """
    hypo = int(hypo_max_nnz_row)
    free = free_device_bytes() if free is None else int(free)
    budget = GPU_MEMORY_FRACTION * free
    if estimate_gpu_bytes(n, float(n) * (n - 1), method, hypo, sp_max_nz_pct) <= budget:
        return
    nnz, m = _sampled_nnz(n, count_rows)
    check_gpu_nnz(n, nnz, rule, method, hypo, sp_max_nz_pct, sampled_rows=m, free=free)


def check_gpu_nnz(n: int, nnz: float, rule, method: str, hypo_max_nnz_row: int,
                  sp_max_nz_pct: float | None = None, *, sampled_rows: int | None = None,
                  free: int | None = None) -> None:
    """Refuse a GPU graph of `nnz` nonzeros that would not fit in free device memory:
    :func:`estimate_gpu_bytes` against `free` times :data:`GPU_MEMORY_FRACTION`.

    :func:`check_gpu_memory` comes here with its estimate; a builder whose counting
    pass gives the exact nnz before it allocates the nnz-sized arrays (the grid) comes
    here with that, instead of a sampled estimate beforehand.

    Parameters
    ----------
    n, rule, method, hypo_max_nnz_row, sp_max_nz_pct, free
        As in :func:`check_gpu_memory`.
    nnz : float
        The nonzeros, counted or estimated.
    sampled_rows : int, optional
        The rows the estimate came from (None: counted, exact).

    Raises
    ------
    MemoryEstimateError
        With the nnz, the bytes, the free memory and what to change.
    """
    hypo = int(hypo_max_nnz_row)
    free = free_device_bytes() if free is None else int(free)
    need = estimate_gpu_bytes(n, nnz, method, hypo, sp_max_nz_pct)
    if need <= GPU_MEMORY_FRACTION * free:
        return
    extra = {"csr2": f", hypo_max_nnz_row={hypo} (ELLPACK {8 * n * hypo / 2**30:.2f} GiB)",
             "csr3": "" if sp_max_nz_pct is None else f", sp_max_nz_pct={sp_max_nz_pct:g}"}
    source = ("counted" if sampled_rows is None else f"from {sampled_rows} sampled rows")
    kind = "" if sampled_rows is None else "an estimated "
    raise MemoryEstimateError(
        f"graph too large for the GPU: {rule.describe()} on n={n} gives {kind}"
        f"nnz ≈ {nnz:.3g} ({nnz / n:.1f} per row, {source}); method={method!r}"
        f"{extra.get(method, '')} needs about {need / 2**30:.2f} GiB but {free / 2**30:.2f} "
        "GiB of GPU memory is free; lower the threshold, subsample the data"
        + (", lower hypo_max_nnz_row" if method == "csr2" else "")
        + (", lower sp_max_nz_pct" if method == "csr3" else "")
        + ", or use graph_stats(sample_rows=...) to explore",
        device="GPU", nnz=nnz, need_bytes=need, available_bytes=free,
    )


# ------------------------------------------------------------------ any other allocation


def format_bytes(nbytes: float) -> str:
    """``nbytes`` for a message: ``'512 B'``, ``'3.1 MiB'``, ``'14.6 GiB'``."""
    nbytes = float(nbytes)
    for unit, scale in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= scale:
            return f"{nbytes / scale:.3g} {unit}"
    return f"{nbytes:.0f} B"


_FILE_LIMIT = contextvars.ContextVar("explorer_file_limit", default=None)


@contextlib.contextmanager
def file_limit(nbytes: int, name: str = "the limit on what a compressed file may expand to"):
    """Within the block (this thread or task only), :func:`file_content_limit` is
    `nbytes` and :func:`file_limit_name` is `name`: the app reads uploads under a
    tighter limit than the library's default."""
    token = _FILE_LIMIT.set((int(nbytes), name))
    try:
        yield
    finally:
        _FILE_LIMIT.reset(token)


def file_content_limit() -> int:
    """Bytes one data file may hold once decompressed: the :func:`file_limit` in force,
    else ``EXPLORER_MAX_FILE_BYTES`` when set (an integer), else
    :data:`FILE_CONTENT_LIMIT`."""
    import os

    if _FILE_LIMIT.get() is not None:
        return _FILE_LIMIT.get()[0]
    text = os.environ.get("EXPLORER_MAX_FILE_BYTES", "").strip()
    try:
        return int(float(text)) if text else FILE_CONTENT_LIMIT
    except ValueError:
        return FILE_CONTENT_LIMIT


def file_limit_name() -> str:
    """How messages name :func:`file_content_limit`."""
    if _FILE_LIMIT.get() is not None:
        return _FILE_LIMIT.get()[1]
    return "the limit on what a compressed file may expand to (EXPLORER_MAX_FILE_BYTES)"


def check_allocation(nbytes: float, what: str, advice: str, *, limit: float | None = None,
                     limit_name: str = "", available: int | None = None) -> None:
    """Refuse, before allocating, `nbytes` of host memory that will not fit.

    The one rule for allocations proportional to an input that are not graphs (the
    graph builds have :func:`check_cpu_memory` / :func:`check_gpu_memory`): a file's
    contents, a generated data set, a row count. Refused when `nbytes` exceeds
    :data:`CPU_MEMORY_FRACTION` of the memory available, or a fixed `limit`.

    Parameters
    ----------
    nbytes : float
        The estimated peak bytes.
    what : str
        What would be allocated, for the message (``"data.npz: member 'X' of shape
        (1000000000, 2) float64"``).
    advice : str
        What to change (``"subsample the file"``).
    limit : float, optional
        A fixed cap, checked whatever memory is free (e.g. :func:`file_content_limit`).
    limit_name : str
        How the message names that cap (``"the limit on a file's contents
        (EXPLORER_MAX_FILE_BYTES)"``).
    available : int, optional
        Host bytes available; default :func:`available_host_bytes`.

    Raises
    ------
    MemoryEstimateError
        With the estimate, what is available (or the cap) and `advice`.
    """
    nbytes = float(nbytes)
    if limit is not None and nbytes > float(limit):
        raise MemoryEstimateError(
            f"{what} needs about {format_bytes(nbytes)}, more than {limit_name or 'the limit'} "
            f"of {format_bytes(limit)}; {advice}",
            device="CPU", nnz=0.0, need_bytes=nbytes, available_bytes=int(limit),
        )
    available = available_host_bytes() if available is None else int(available)
    if available is None or nbytes <= CPU_MEMORY_FRACTION * available:
        return
    raise MemoryEstimateError(
        f"{what} needs about {format_bytes(nbytes)}, but only {format_bytes(available)} "
        f"of memory is available on this machine; {advice}",
        device="CPU", nnz=0.0, need_bytes=nbytes, available_bytes=available,
    )
