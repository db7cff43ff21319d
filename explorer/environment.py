"""Where a result was measured: host, versions, device, time — for JSON results.

Used by the CLI's ``--json`` output and the benchmark scripts, so every recorded figure
says what produced it. Only the standard library, NumPy, SciPy and scikit-learn are
imported; CuPy only when the backend is the GPU.
"""

from __future__ import annotations

import datetime
import os
import platform
import subprocess
from pathlib import Path

from ._backend import Backend, resolve_backend


def environment_info(backend="cpu") -> dict:
    """Describe the machine, the software and the backend of a run.

    Parameters
    ----------
    backend : Backend or {"auto", "gpu", "cpu"}
        The backend the run used (a name is resolved with
        :func:`explorer.resolve_backend`).

    Returns
    -------
    dict
        JSON-ready: ``timestamp`` (UTC, ISO 8601), ``host`` (name, OS, CPU model,
        logical cores and the cores this process may use, memory), ``versions``
        (Python, explorer, NumPy, SciPy, scikit-learn, CuPy when on the GPU),
        ``git`` (commit and whether the tree had changes, when in a checkout),
        ``backend`` (name and reason) and, on the GPU, ``gpu`` (device name,
        compute capability, memory, driver and runtime versions).
    """
    import numpy
    import scipy
    import sklearn

    import explorer

    if not isinstance(backend, Backend):
        backend = resolve_backend(backend)
    info = {
        "timestamp": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "host": _host(),
        "versions": {
            "python": platform.python_version(),
            "explorer": explorer.__version__,
            "numpy": numpy.__version__,
            "scipy": scipy.__version__,
            "scikit-learn": sklearn.__version__,
        },
        "git": _git(),
        "backend": {"name": backend.name, "reason": backend.reason},
    }
    if backend.is_gpu:
        import cupy

        info["versions"]["cupy"] = cupy.__version__
        info["gpu"] = _gpu(cupy)
    return info


def _host() -> dict:
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    return {
        "name": platform.node(),
        "os": platform.platform(),
        "machine": platform.machine(),
        "cpu": _cpu_model(),
        "cores_logical": os.cpu_count(),
        "cores_usable": usable,
        "memory_bytes": _memory_bytes(),
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
    }


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _memory_bytes() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _git() -> dict | None:
    root = Path(__file__).resolve().parent.parent
    if not (root / ".git").exists():
        return None
    try:
        commit = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], check=True,
                                capture_output=True, text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain"], check=True,
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return {"commit": commit, "dirty": bool(dirty)}


def _gpu(cupy) -> dict:
    dev = cupy.cuda.Device()
    props = cupy.cuda.runtime.getDeviceProperties(dev.id)
    name = props["name"]
    free, total = cupy.cuda.runtime.memGetInfo()
    return {
        "id": dev.id,
        "name": name.decode() if isinstance(name, bytes) else name,
        "compute_capability": f"{props['major']}.{props['minor']}",
        "multiprocessors": props["multiProcessorCount"],
        "memory_total_bytes": int(total),
        "memory_free_bytes": int(free),
        "driver_version": cupy.cuda.runtime.driverGetVersion(),
        "runtime_version": cupy.cuda.runtime.runtimeGetVersion(),
    }
