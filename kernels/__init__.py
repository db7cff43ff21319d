"""CUDA kernels (``*.cu``) and their thin CuPy launchers.

This package knows CUDA and CuPy only. It is importable without CuPy: the launcher
modules import CuPy when a launcher is first called.
"""

from ._loader import KERNEL_DIR, get_module, read_source

__all__ = ["KERNEL_DIR", "get_module", "read_source"]
