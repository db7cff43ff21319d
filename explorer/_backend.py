"""Choosing the array backend once per run: CuPy on a GPU, NumPy on the CPU.

Every stage below the UI is written against an array namespace ``xp``; this module
is the one place that decides which namespace a run uses and why.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from types import ModuleType

import numpy as np

BACKENDS = ("auto", "gpu", "cpu")


@dataclass(frozen=True)
class Backend:
    """The backend a run uses.

    Attributes
    ----------
    name : {"gpu", "cpu"}
        What was taken.
    xp : module
        ``cupy`` or ``numpy``.
    reason : str
        Why it was taken (shown to users by the CLI and the app).
    """

    name: str
    xp: ModuleType
    reason: str

    @property
    def is_gpu(self) -> bool:
        return self.name == "gpu"


@functools.lru_cache(maxsize=1)
def gpu_status() -> tuple[bool, str]:
    """Whether a CUDA device can be used, and a sentence saying why or why not.

    Cached: importing CuPy and querying the driver costs tens of milliseconds, and
    the answer does not change while the process runs.
    """
    try:
        import cupy
    except Exception as exc:  # ImportError, or a broken CUDA install raising on import
        return False, f"CuPy is not importable ({type(exc).__name__}: {exc})"
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:
        return False, f"no CUDA device answers ({type(exc).__name__}: {exc})"
    if count < 1:
        return False, "CuPy imports but no CUDA device is visible"
    props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
    name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
    return True, f"CUDA device {cupy.cuda.Device().id}: {name}"


def resolve_backend(backend: str = "auto") -> Backend:
    """Resolve ``"auto" | "gpu" | "cpu"`` to a :class:`Backend`.

    Parameters
    ----------
    backend : {"auto", "gpu", "cpu"}
        ``"auto"`` takes the GPU when CuPy imports and a device answers, otherwise the
        CPU. ``"gpu"`` raises when no GPU can be used.

    Raises
    ------
    ValueError
        If `backend` is not one of the allowed names, or ``"gpu"`` is asked for where
        no GPU can be used.
    """
    if not isinstance(backend, str) or backend not in BACKENDS:
        raise ValueError(f"backend={backend!r} is not allowed; use one of {', '.join(BACKENDS)}")
    if backend == "cpu":
        return Backend("cpu", np, "asked for the CPU")
    ok, why = gpu_status()
    if ok:
        import cupy

        return Backend("gpu", cupy, ("asked for the GPU: " if backend == "gpu" else "auto: ") + why)
    if backend == "gpu":
        raise ValueError(f"backend='gpu' was asked for but no GPU can be used: {why}")
    return Backend("cpu", np, f"auto: no GPU ({why})")


def array_module(a) -> ModuleType:
    """``cupy`` for a CuPy array (dense or sparse), ``numpy`` for anything else."""
    mod = type(a).__module__
    if mod.startswith("cupy") or mod.startswith("cupyx"):
        import cupy

        return cupy
    return np


def to_numpy(a):
    """Copy a CuPy array to the host; return NumPy arrays (and anything else) unchanged."""
    if array_module(a) is np:
        return a
    return a.get()


def sparse_module(xp) -> ModuleType:
    """``scipy.sparse`` for NumPy, ``cupyx.scipy.sparse`` for CuPy: the sparse
    namespace that goes with an array namespace ``xp``."""
    if xp is np:
        import scipy.sparse

        return scipy.sparse
    import cupyx.scipy.sparse

    return cupyx.scipy.sparse


#: Values per block of row-blocked array work (:func:`column_sums`, k-means): 16 MiB of
#: float32 on the CPU, where a block stays in cache, 64 MiB on the GPU, where fewer and
#: larger launches pay off.
_BLOCK_VALUES = {"cpu": 1 << 22, "gpu": 1 << 24}


def chunk_rows(xp, width: int) -> int:
    """Rows per block of an n × `width` array (see :data:`_BLOCK_VALUES`), at least 1024."""
    return max(1024, _BLOCK_VALUES["cpu" if xp is np else "gpu"] // max(1, width))


def column_sums(M, xp=None):
    """float64 sums of the columns of an n×m array (NumPy or CuPy), m small.

    A product with a vector of ones, over blocks of rows: CuPy's ``sum(axis=0)`` over
    few columns runs in a handful of thread blocks, far below bandwidth (it made
    k-means++ seeding of millions of rows take seconds), while the product is a pass
    at bandwidth. Values are widened one block at a time.
    """
    xp = array_module(M) if xp is None else xp
    n = M.shape[0]
    total = xp.zeros(M.shape[1], dtype=xp.float64)
    step = chunk_rows(xp, M.shape[1])
    ones = xp.ones(min(n, step), dtype=xp.float64)
    for start in range(0, n, step):
        block = M[start : start + step].astype(xp.float64, copy=False)
        total += ones[: block.shape[0]] @ block
    return total


def column_extremes(X):
    """float64 minimum and maximum of every column of a 2-D array, on its device.

    NaN in a column makes both of its values NaN (as ``numpy.min`` and ``max`` do), so
    X is finite iff every value returned is. On the GPU one read of X
    (:func:`explorer.kernels.columns.column_stats`): CuPy's ``min(axis=0)`` over a
    row-major array reads each column with a stride of d values, in a few thread blocks
    when d is small.

    Parameters
    ----------
    X : ndarray of shape (n, d), n >= 1
        NumPy or CuPy, any real dtype.

    Returns
    -------
    lo, hi : float64 ndarray of shape (d,), same module as X
    """
    xp = array_module(X)
    if xp is not np:
        from .kernels import columns

        if columns.supports(X):
            lo, hi, _, _ = columns.column_stats(X)
            return lo, hi
    with np.errstate(invalid="ignore"):
        return X.min(axis=0).astype(xp.float64), X.max(axis=0).astype(xp.float64)


def column_centred_sums(X, centre=None, *, squares=True):
    """float64 sums of ``x − c`` and of ``(x − c)²`` over every column of a 2-D array,
    on its device (c: `centre`, float64 of shape (d,), or 0).

    On the GPU one read of X (:func:`explorer.kernels.columns.column_stats`); on the CPU
    blocks of rows widened to float64 one at a time (:func:`chunk_rows`), the squares
    only when asked for (`squares`; on the GPU they come with the read).

    Returns
    -------
    s1, s2 : float64 ndarray of shape (d,), same module as X (s2 None on the CPU
        without `squares`)
    """
    xp = array_module(X)
    n, d = X.shape
    c = None if centre is None else xp.asarray(centre, xp.float64)
    if xp is not np:
        from .kernels import columns

        if columns.supports(X):
            _, _, s1, s2 = columns.column_stats(X, c)
            return s1, s2
    s1 = xp.zeros(d, dtype=xp.float64)
    s2 = xp.zeros(d, dtype=xp.float64) if squares else None
    step = chunk_rows(xp, d)
    for start in range(0, n, step):
        block = X[start : start + step].astype(xp.float64)
        if c is not None:
            block -= c
        s1 += block.sum(axis=0)
        if squares:
            s2 += xp.einsum("ij,ij->j", block, block)
    return s1, s2


def column_norms(M, xp=None):
    """Euclidean norms of the columns of an n×m array, as float64 (see :func:`column_sums`)."""
    xp = array_module(M) if xp is None else xp
    return xp.sqrt(column_sums(M * M, xp))
