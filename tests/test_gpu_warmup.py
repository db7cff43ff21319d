"""``spectral-explorer warmup`` fills CuPy's kernel cache with what a default fit compiles.

Each step runs in a fresh process on an empty cache directory of its own, as on a new
machine: after the warm-up, a default fit of data along a warmed path adds nothing to
the cache (it compiled nothing).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[1]

FIT = """
import cupy
from explorer import SpectralClustering
from explorer.warmup import _blobs
X = cupy.asarray(_blobs({n}, {d}, {k}, seed=123))
SpectralClustering({k}, backend="gpu", random_state=1).fit(X)
"""


def _files(folder: Path) -> set:
    return {p.relative_to(folder) for p in folder.rglob("*") if p.is_file()}


def _run(code_or_argv, cache: Path):
    env = {**os.environ, "CUPY_CACHE_DIR": str(cache),
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    argv = code_or_argv if isinstance(code_or_argv, list) else [sys.executable, "-c",
                                                                code_or_argv]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def test_a_fit_after_the_warmup_compiles_nothing(tmp_path):
    cache = tmp_path / "kernels"
    done = _run([sys.executable, "-m", "explorer.cli", "warmup", "--clusters", "3"], cache)
    assert "compiled into" in done.stdout
    warmed = _files(cache)
    assert warmed, "the warm-up left the cache empty"
    for n, d in ((30_000, 784), (40_000, 2)):  # other data, other n, the same paths
        _run(FIT.format(n=n, d=d, k=3), cache)
    assert _files(cache) == warmed
