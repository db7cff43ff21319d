"""Launchers of the device connected components (``components.cu``): union-find by
hooking each edge's endpoints into one parent array, then flattening every vertex
onto its root."""

from __future__ import annotations

import numpy as np

from ._launch import launch

#: One warp per row, 8 rows per block (hook); 256 threads per block (flatten).
HOOK_BLOCK = (32, 8)
FLAT_BLOCK = 256


def hook(n: int, indptr, indices, parent) -> None:
    """Hook the endpoints of every edge of CSR `indptr`, `indices` (int32) into `parent`
    (int32, one entry per vertex), in place. Rows may be empty: a row block of a larger
    graph is hooked with offsets rebased to the block."""
    bx, by = HOOK_BLOCK
    launch("components", "cc_hook", (), (-(-n // by),), (bx, by),
           (np.int32(n), indptr, indices, parent))


def flatten(n: int, parent) -> None:
    """``parent[i]`` <- the root of i, in place: afterwards the roots are exactly the i
    with ``parent[i] == i``."""
    launch("components", "cc_flatten", (), (-(-n // FLAT_BLOCK),), (FLAT_BLOCK,),
           (np.int32(n), parent))


def component_labels(n: int, indptr, indices):
    """Root label of every vertex of the graph given by CSR `indptr`, `indices` (int32).

    Edges are undirected (weak components). Returns a CuPy int32 array: vertices in one
    component share the label, the smallest vertex id of the component.
    """
    import cupy

    parent = cupy.arange(n, dtype=cupy.int32)
    if n == 0:
        return parent
    hook(n, indptr, indices, parent)
    flatten(n, parent)
    return parent
