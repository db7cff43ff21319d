"""The GPU bridge the graph dispatcher imports on a GPU run (importing it imports CuPy).

The builds, row counts and method choice live in :mod:`explorer.graph.gpu` (public) and
its private modules (``_gpu_build``, ``_gpu_count``, ``_gpu_choice``, ``_gpu_defaults``,
``_gpu_rule``); this module re-exports what the dispatcher and the app call, and holds
connected components on the device.
"""

from __future__ import annotations

import cupy
import numpy as np

from .._csr import row_blocks
from ..kernels import _launch, components
from .gpu import (
    GPU_METHODS,
    PAPER_METHODS,
    build_gpu,
    choose_method,
    count_rows_gpu,
    count_rows_paper,
    paper_choice,
)

__all__ = [
    "GPU_METHODS",
    "PAPER_METHODS",
    "build_gpu",
    "choose_method",
    "component_roots",
    "connected_components",
    "count_components",
    "count_rows_gpu",
    "count_rows_paper",
    "paper_choice",
]


#: Edges converted to int32 at once for the device union-find, whose kernel reads int32
#: row offsets and columns (kernels/components.cu), when a graph's arrays are int64: a
#: larger graph is labelled in row blocks of at most this many edges, so the int32 copy
#: of a block's columns is 4 GiB at most.
COMPONENTS_BLOCK = 2**30


def connected_components(csr) -> int:
    """Connected components of a square cupyx CSR graph, computed on the device.

    Edges count in both directions (weak components); isolated vertices are components.
    Any nnz: int64 index arrays (nnz >= 2**31) are taken in row blocks (see
    :func:`count_components`).

    Raises
    ------
    ValueError
        If the graph has 2**31 vertices or more (vertex ids are int32 in the kernel).
    """
    n = csr.shape[0]
    if n >= 2**31:
        raise ValueError(f"connected_components supports n < 2**31 vertices; got n={n}")
    return count_components(n, csr.indptr, csr.indices)


def count_components(n: int, indptr, indices, *, block: int | None = None) -> int:
    """Connected components of the graph of CSR arrays `indptr`, `indices` (isolated
    vertices count as components); see :func:`component_roots`."""
    roots = component_roots(n, indptr, indices, block=block)
    return int(cupy.count_nonzero(roots == cupy.arange(n, dtype=cupy.int32)))


def component_roots(n: int, indptr, indices, *, block: int | None = None):
    """Component label of every vertex (int32: the smallest vertex id of its component)
    of the graph of CSR arrays `indptr`, `indices`.

    int32 arrays go through :func:`explorer.kernels.components.component_labels` as
    they are; int64 arrays of at most `block` edges (default :data:`COMPONENTS_BLOCK`)
    are converted first. A larger int64 graph is fed to the same union-find kernels in
    row blocks of at most `block` edges (a longer row is a block of its own: at most
    n - 1 edges), all hooking into one parent array: each block gets int32 offsets
    rebased to it (rows outside it are empty) and its columns as int32, so the kernel's
    int32 arithmetic holds however large nnz is.
    """
    block = COMPONENTS_BLOCK if block is None else int(block)
    if indptr.dtype == cupy.int32 and indices.dtype == cupy.int32:
        return components.component_labels(n, indptr, indices)
    if int(indices.shape[0]) <= block:
        return components.component_labels(n, indptr.astype(cupy.int32),
                                           indices.astype(cupy.int32))
    parent = cupy.arange(n, dtype=cupy.int32)
    hook_x, hook_y = components._HOOK_BLOCK
    for _, _, e0, e1 in row_blocks(indptr, block):
        if e1 > e0:
            local = cupy.clip(indptr - e0, 0, e1 - e0).astype(cupy.int32)
            _launch.launch("components", "cc_hook", (), (-(-n // hook_y),), (hook_x, hook_y),
                           (np.int32(n), local, indices[e0:e1].astype(cupy.int32), parent))
    flat = components._FLAT_BLOCK
    _launch.launch("components", "cc_flatten", (), (-(-n // flat),), (flat,),
                   (np.int32(n), parent))
    return parent
