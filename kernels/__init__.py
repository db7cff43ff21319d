"""CUDA kernels (``*.cu``) and their thin CuPy launchers.

This package knows CUDA and CuPy only: it never imports ``explorer``. Launchers take
plain numbers, a :class:`Rule` (the edge rule as numbers) and arrays, and return
arrays; the graph layer (:mod:`explorer.graph`) validates user input and holds the
defaults before it calls them. It is importable without CuPy: the launcher modules
import CuPy when a launcher is first called.

Public launchers: :mod:`.csr` (the paper's CSR-1/2/3), :mod:`.count` (the counting
pass), :mod:`.grid` and :mod:`.gemm` (the builders beyond the paper), :mod:`.kmeans`,
:mod:`.components` and :mod:`.columns` (per-column statistics of the input stage).
One device header, ``edge_rule.cuh``, defines the edge test and the weight for all of
them.
"""

from ._launch import Rule, StageTimer, free_device_bytes, launch, scan
from ._loader import KERNEL_DIR, get_module, read_source

__all__ = [
    "KERNEL_DIR",
    "Rule",
    "StageTimer",
    "free_device_bytes",
    "get_module",
    "launch",
    "read_source",
    "scan",
]
