"""Launcher of the device connected components (``components.cu``)."""

from __future__ import annotations

import numpy as np

from ._launch import launch

#: One warp per row, 8 rows per block (hook); 256 threads per block (flatten).
_HOOK_BLOCK = (32, 8)
_FLAT_BLOCK = 256


def component_labels(n: int, indptr, indices):
    """Root label of every vertex of the graph given by CSR `indptr`, `indices` (int32).

    Edges are undirected (weak components). Returns a CuPy int32 array: vertices in one
    component share the label, the smallest vertex id of the component.
    """
    import cupy

    parent = cupy.arange(n, dtype=cupy.int32)
    if n == 0:
        return parent
    bx, by = _HOOK_BLOCK
    launch("components", "cc_hook", (), (-(-n // by),), (bx, by),
           (np.int32(n), indptr, indices, parent))
    launch("components", "cc_flatten", (), (-(-n // _FLAT_BLOCK),), (_FLAT_BLOCK,),
           (np.int32(n), parent))
    return parent


def count_components(n: int, indptr, indices) -> int:
    """Number of connected components (isolated vertices count as components)."""
    import cupy

    labels = component_labels(n, indptr, indices)
    return int(cupy.count_nonzero(labels == cupy.arange(n, dtype=cupy.int32)))
