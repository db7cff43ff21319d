"""Helpers every benchmark script shares: environment, timing, result files.

Import it from a script in this folder (``from _common import ...``; Python puts the
script's folder on the path). Results go to ``benchmarks/results/<topic>/<name>.json``,
the topic given by the name (:data:`TOPICS`, :func:`result_dir`; benchmarks/README.md
lists the folders and their files).

Timing protocol (benchmarks/README.md "Performance protocol"): warm-up runs first and is not
counted, then at least three timed runs, of which the median is reported;
:func:`summary` gives median/min/max with the raw runs.
"""

from __future__ import annotations

import json
import math
import re
import statistics
import time
from contextlib import contextmanager
from pathlib import Path

from explorer.environment import environment_info

__all__ = ["RESULTS", "TOPICS", "device_name", "environment_info", "plain", "result_dir",
           "summary", "time_cpu", "time_gpu", "timer", "write_result"]

RESULTS = Path(__file__).resolve().parent / "results"

#: Result folders by topic: the first prefix a result's name starts with names its folder
#: under :data:`RESULTS` (``archive/`` holds superseded runs, moved there by hand).
TOPICS = (
    ("paper-tables", "paper"),
    ("cpu", "cpu"),
    ("eigen", "eigen"), ("solver-cost", "eigen"),
    ("quality", "quality"), ("representatives-weights", "quality"),
    ("large", "large"),
    ("dask", "dask"), ("multigpu", "dask"),
    ("reorder", "reorder"),
    ("fast", "gpu"), ("architecture-ab", "gpu"), ("int64", "gpu"), ("live-stats", "gpu"),
    ("knn", "gpu"), ("csrc", "gpu"), ("gpu-e2e", "gpu"), ("predict", "gpu"),
    ("sklearn", "sklearn"),
)


def result_dir(name: str) -> Path:
    """The folder of result `name` (no ``.json``): ``RESULTS / <topic>`` by :data:`TOPICS`.

    A name no topic claims is a ValueError, so that no result lands loose in RESULTS.
    """
    for prefix, topic in TOPICS:
        if name.startswith(prefix):
            return RESULTS / topic
    raise ValueError(f"result name={name!r} matches no topic; allowed prefixes: "
                     f"{', '.join(p for p, _ in TOPICS)} (benchmarks/_common.py TOPICS)")


def device_name(environment: dict) -> str:
    """The GPU's name in a result's ``environment`` (also the older flat records)."""
    return environment.get("gpu", {}).get("name") or environment.get("device", "unknown")


class _Elapsed:
    seconds: float = math.nan


@contextmanager
def timer():
    """Wall-clock time of a ``with`` block (``time.perf_counter``).

    >>> with timer() as t:
    ...     work()
    >>> t.seconds
    """
    out = _Elapsed()
    start = time.perf_counter()
    try:
        yield out
    finally:
        out.seconds = time.perf_counter() - start


def time_cpu(fn, repeats=3, warmup=1) -> list[float]:
    """Seconds of each of `repeats` calls of ``fn()`` after `warmup` uncounted calls."""
    _check_counts(repeats, warmup)
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times


def time_gpu(fn, repeats=3, warmup=1) -> list[float]:
    """Seconds of each of `repeats` calls of ``fn()``, timed with CUDA events.

    Events are recorded on the current stream before and after each call and the
    end event is synchronised, so the time covers the device work `fn` queued (and
    any host work it waited for). `warmup` calls run first, uncounted: they pay
    kernel compilation and memory-pool growth.
    """
    import cupy

    _check_counts(repeats, warmup)
    for _ in range(warmup):
        fn()
    cupy.cuda.Device().synchronize()
    times = []
    for _ in range(repeats):
        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(cupy.cuda.get_elapsed_time(start, end) / 1000.0)
    return times


def summary(times) -> dict:
    """``{"median", "min", "max", "runs"}`` of a list of seconds (JSON-ready)."""
    times = [float(t) for t in times]
    return {"median": statistics.median(times), "min": min(times), "max": max(times),
            "runs": times}


def write_result(name, payload) -> Path:
    """Write `payload` as ``benchmarks/results/<topic>/<name>.json`` and return the path.

    NumPy scalars and arrays are converted to plain numbers and lists; NaN and
    infinities become null (JSON has no spelling for them).
    """
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name):
        raise ValueError(f"name={name!r} is not allowed; use letters, digits, '.', '_', '-'")
    folder = result_dir(name)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.json"
    text = json.dumps(plain(payload), indent=1, allow_nan=False)
    path.write_text(text + "\n")
    return path


def plain(obj):
    """`obj` as JSON-ready plain Python: dict keys as str, tuples as lists, NumPy and
    CuPy scalars and arrays as numbers and lists, NaN and inf as None, anything else
    as its str."""
    if isinstance(obj, dict):
        return {str(k): plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [plain(v) for v in obj]
    if hasattr(obj, "tolist"):  # NumPy / CuPy scalars and arrays
        return plain(obj.tolist())
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, (str, int, float, bool)) or obj is None:
        return obj
    return str(obj)


#: The former name, still imported by benchmarks/eigen.py (its owner switches to plain).
_plain = plain


def _check_counts(repeats, warmup):
    if not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"repeats={repeats!r} is not allowed; use an int >= 1 (>= 3 for a median)")
    if not isinstance(warmup, int) or warmup < 0:
        raise ValueError(f"warmup={warmup!r} is not allowed; use an int >= 0")
