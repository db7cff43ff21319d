"""Loading ``kernels/*.cu`` into CuPy ``RawModule`` objects, once per device.

Sources are read from this package's folder and prefixed with ``#line 1 "<path>"`` so
NVRTC's errors name the real file and line. Modules are cached per (file, defines,
device): compiling costs ~100 ms, a slider move must not pay it. This module imports
CuPy lazily so ``explorer.kernels`` can be imported (and its sources listed) on a
machine without a GPU.
"""

from __future__ import annotations

import functools
import threading
from pathlib import Path

KERNEL_DIR = Path(__file__).resolve().parent

#: Options every module is compiled with. ``-std=c++17`` for ``if constexpr`` and
#: templates; no ``--use_fast_math``: the builders must match the float64 reference
#: to 1e-5, so fast paths are chosen per expression (e.g. ``__expf``) in the source.
BASE_OPTIONS = ("-std=c++17",)

_lock = threading.Lock()


def source_path(name: str) -> Path:
    """Path of ``kernels/<name>.cu``."""
    path = KERNEL_DIR / f"{name}.cu"
    if not path.is_file():
        raise FileNotFoundError(f"no CUDA source {path.name} in {KERNEL_DIR}")
    return path


def read_source(name: str) -> str:
    """The source of ``<name>.cu`` with its local ``#include "x.cuh"`` lines inlined.

    NVRTC compiles from a string and cannot see this folder, so local headers are
    spliced in, each behind its own ``#line`` so errors still point at the header.
    """
    path = source_path(name)
    return _splice(path)


def _splice(path: Path) -> str:
    out = [f'#line 1 "{path}"']
    for lineno, line in enumerate(path.read_text().splitlines(), start=1):
        stripped = line.strip()
        if stripped.startswith('#include "') and stripped.endswith('.cuh"'):
            header = KERNEL_DIR / stripped[len('#include "') : -1]
            out.append(_splice(header))
            out.append(f'#line {lineno + 1} "{path}"')
        else:
            out.append(line)
    return "\n".join(out) + "\n"


def get_module(name: str, defines: tuple = (), name_expressions: tuple = ()):
    """Compile (once per device) and return the ``cupy.RawModule`` for ``<name>.cu``.

    Parameters
    ----------
    name : str
        File stem in ``kernels/``.
    defines : tuple of str
        Extra ``-D`` options (e.g. ``("-DMETRIC=1",)``), part of the cache key.
    name_expressions : tuple of str
        Template instantiations to compile, for ``RawModule.get_function``.
    """
    import cupy

    device = cupy.cuda.Device().id
    return _cached_module(name, tuple(defines), tuple(name_expressions), device)


@functools.cache
def _cached_module(name, defines, name_expressions, device):
    import cupy

    with _lock:
        module = cupy.RawModule(
            code=read_source(name),
            options=BASE_OPTIONS + defines,
            name_expressions=name_expressions or None,
        )
        module.compile()
    return module
