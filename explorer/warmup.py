"""Compiling the GPU kernels before the first fit needs them.

CuPy compiles every CUDA kernel a process launches (this package's ``kernels/*.cu``
modules, specialised on the data's shape and the number of clusters, and CuPy's own
element-wise and reduction kernels) with NVRTC at its first launch, and keeps the
result in its on-disk kernel cache (``CUPY_CACHE_DIR``, by default
``~/.cupy/kernel_cache``), where every later process of the machine finds it. On a new
machine the first GPU fit therefore pays every compilation on its path
(benchmarks/README.md has the measured times).

:func:`precompile` fills the cache by running the default fit on small synthetic data
along each path the defaults take (:data:`PATHS`) for each number of clusters in
:data:`CLUSTERS`: the same kernels in the same configurations as a fit of real data of
that kind. ``spectral-explorer warmup`` runs it (at install time, or before a first
use); the app's server starts it in the background (:func:`start_background`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time

import numpy as np

__all__ = ["CLUSTERS", "PATHS", "cache_dir", "precompile", "start_background"]

#: The paths of the default fit, as (name, n, d): past ``LOW_D`` features a kNN graph
#: of every point (the GEMM search, self-tuning σ); a grid ε-graph up to 10⁵ low-d
#: points; the representatives chain beyond (explorer.representatives.choose_mode).
PATHS = (("knn", 20_000, 784), ("epsilon", 20_000, 2), ("representatives", 150_000, 2))

#: Numbers of clusters compiled for (the embedding's and k-means' kernels are
#: specialised on them).
CLUSTERS = (2, 3, 4, 5, 8, 10)

#: ``EXPLORER_WARMUP=0`` keeps the app's server from starting :func:`precompile`.
ENV_SWITCH = "EXPLORER_WARMUP"

_started = False
_start_lock = threading.Lock()


def cache_dir() -> str:
    """The directory of CuPy's on-disk kernel cache for this process."""
    return os.environ.get("CUPY_CACHE_DIR") or os.path.expanduser("~/.cupy/kernel_cache")


def _blobs(n: int, d: int, k: int, seed: int):
    """n float32 points of k separated Gaussian blobs in d dimensions."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((k, d)) * 8.0 / np.sqrt(min(d, 8))
    X = centres[rng.integers(k, size=n)] + rng.standard_normal((n, d))
    return X.astype(np.float32)


def precompile(clusters=CLUSTERS, paths=PATHS, *, progress=None) -> dict:
    """Run the default GPU fit along every path in `paths` for every k in `clusters`,
    so that CuPy's kernel cache holds everything a default fit compiles.

    Parameters
    ----------
    clusters : iterable of int
        Numbers of clusters.
    paths : iterable of (str, int, int)
        ``(name, n, d)`` of the synthetic data of each path.
    progress : callable, optional
        ``progress(name, k, seconds)`` after each fit.

    Returns
    -------
    dict
        ``cache_dir``, ``seconds`` (``"name/k"`` to seconds of that fit) and ``total``.

    Raises
    ------
    RuntimeError
        Where no CUDA device can be used.
    """
    from ._backend import gpu_status

    ok, why = gpu_status()
    if not ok:
        raise RuntimeError(f"no GPU to compile for: {why}")
    import cupy

    from .spectral import SpectralClustering

    seconds = {}
    t0 = time.perf_counter()
    for name, n, d in paths:
        for k in clusters:
            X = cupy.asarray(_blobs(int(n), int(d), int(k), seed=int(k)))
            t = time.perf_counter()
            SpectralClustering(int(k), backend="gpu", random_state=0).fit(X)
            cupy.cuda.get_current_stream().synchronize()
            seconds[f"{name}/{k}"] = time.perf_counter() - t
            if progress is not None:
                progress(name, int(k), seconds[f"{name}/{k}"])
            del X
            cupy.get_default_memory_pool().free_all_blocks()
    return {"cache_dir": cache_dir(), "seconds": seconds, "total": time.perf_counter() - t0}


def start_background() -> threading.Thread | None:
    """Start ``spectral-explorer warmup`` once per process, in a background thread.

    The thread returns at once where no GPU answers or ``EXPLORER_WARMUP=0``; else it
    runs the warm-up as a child process at the lowest priority and waits for it. A
    child, not this process: the app's server never holds a CUDA context (its run
    workers start from a fork server that never touches the GPU); the cache it fills
    is on disk, where the workers' first fit finds it. Returns the thread, or None
    when it was started before.
    """
    global _started
    with _start_lock:
        if _started:
            return None
        _started = True
    thread = threading.Thread(target=_warm_up_in_child, name="explorer-warmup", daemon=True)
    thread.start()
    return thread


def _warm_up_in_child() -> None:
    from ._backend import gpu_status

    if os.environ.get(ENV_SWITCH, "1") == "0" or not gpu_status()[0]:
        return
    command = [sys.executable, "-m", "explorer.cli", "warmup", "--quiet"]
    if shutil.which("nice"):
        command = ["nice", "-n", "19", *command]
    try:
        subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       check=False)
    except OSError:  # no `nice` or no interpreter to start: the first fit compiles
        pass
