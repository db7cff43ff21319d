"""Connected components of a similarity graph, on the CPU and the GPU.

Everything the package does with connected components lives here: the label of every
vertex (:func:`component_labels`), their number (:func:`count_components`, which the
graph statistics report), keeping the k largest for clustering
(:func:`keep_largest_components`) and the count outside the isolated vertices
(:func:`components_besides_isolated`). The embedding's ``solver="components"``
(:mod:`explorer.embedding.components`) takes its eigenvectors from these labels.

Each function takes a SciPy or a cupyx CSR matrix and works on its device: SciPy's
``csgraph`` on the CPU, the union-find kernels of ``explorer.kernels.components`` on
the GPU. CuPy is imported only when a cupyx matrix comes in.

Why keep the k largest
----------------------
With more connected components (outside the isolated vertices) than k clusters, the
Laplacian has more zero eigenvalues than the k eigenvectors asked for, and any k
vectors of that null space are a valid answer: which components the embedding
separates is then up to the eigensolver's start. Measured on moons 10⁵ (125
components besides 349 isolated points, k = 2; benchmarks/README.md): LOBPCG's
answer separated the two moons (ARI 0.99), the Chebyshev solver's lived on small
components (ARI 0.00). :func:`keep_largest_components` makes the answer deterministic
and the one a user means in that situation: the k largest components are the
clusters, the vertices of the others are left unclustered (label -1, as isolated
points), and the estimator says so.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from ._backend import array_module, to_numpy
from ._csr import block_rows, row_blocks, row_sums, with_values

__all__ = [
    "COMPONENTS_BLOCK",
    "ComponentSplit",
    "component_labels",
    "components_besides_isolated",
    "count_components",
    "keep_largest_components",
    "label_counts",
    "largest_components",
    "restrict_to",
]

#: Edges converted to int32 at once for the device union-find, whose kernel reads int32
#: row offsets and columns (kernels/components.cu), when a graph's arrays are int64: a
#: larger graph is labelled in row blocks of at most this many edges, so the int32 copy
#: of a block's columns is 4 GiB at most.
COMPONENTS_BLOCK = 2**30


def component_labels(csr):
    """Component label of every vertex of a graph.

    Parameters
    ----------
    csr : scipy.sparse or cupyx.scipy.sparse CSR matrix of shape (n, n)
        The graph; its pattern must be symmetric (as every similarity matrix's is).

    Returns
    -------
    ndarray of int, shape (n,)
        NumPy or CuPy, like `csr`. Labels are equal within a component and differ
        between components; otherwise arbitrary (the GPU's are the smallest vertex id
        of the component, int32; SciPy's are 0, 1, ... in no promised order).

    Notes
    -----
    The pattern is what connects: an explicit zero weight (an underflowed gaussian
    weight) still counts as an edge. On the CPU the pattern's strongly connected
    components are its connected components (the pattern is symmetric), which SciPy
    finds without the transpose ``directed=False`` builds (half the time at n = 10⁶).
    """
    xp = array_module(csr)
    if xp is not np:
        return _device_roots(csr.shape[0], csr.indptr, csr.indices)
    return connected_components(_pattern(csr), directed=True, connection="strong")[1]


def label_counts(labels):
    """The distinct values of component `labels` and how many vertices carry each:
    ``xp.unique(labels, return_counts=True)`` by one count per label (labels are below
    n: vertex ids on the GPU, 0, 1, ... on the CPU), without unique's sort.

    Parameters
    ----------
    labels : int ndarray of shape (m,)
        NumPy or CuPy, non-negative (e.g. ``component_labels(csr)[mask]``).

    Returns
    -------
    found : ndarray of the labels' dtype
        Ascending.
    counts : int64 ndarray, like `found`
    """
    xp = array_module(labels)
    per = xp.bincount(labels) if labels.size else xp.zeros(0, dtype=xp.int64)
    found = xp.flatnonzero(per)
    return found.astype(labels.dtype, copy=False), per[found].astype(xp.int64, copy=False)


def count_components(csr, *, block: int | None = None) -> int:
    """Number of connected components of a graph; isolated vertices count as components.

    Parameters
    ----------
    csr : scipy.sparse or cupyx.scipy.sparse CSR matrix of shape (n, n)
        The graph; its pattern must be symmetric.
    block : int, optional
        GPU only: int64 index arrays of more than `block` edges are labelled in row
        blocks of at most that many (default :data:`COMPONENTS_BLOCK`; see Notes).

    Returns
    -------
    int

    Raises
    ------
    ValueError
        On the GPU, if the graph has 2**31 vertices or more (vertex ids are int32 in
        the kernels).

    Notes
    -----
    As :func:`component_labels`, an explicit zero weight is an edge. On the GPU a
    component is counted by its root, the one vertex whose label is its own id. The
    union-find kernels read int32 offsets and columns: int32 arrays go to them as they
    are, int64 arrays of at most `block` edges are converted first, and a larger int64
    graph is fed to the same kernels in row blocks of at most `block` edges (a longer
    row is a block of its own), all hooking into one parent array; each block gets
    int32 offsets rebased to it and its columns as int32, so the kernels' int32
    arithmetic holds however large nnz is.
    """
    n = csr.shape[0]
    xp = array_module(csr)
    if xp is np:
        return int(connected_components(
            _pattern(csr), directed=True, connection="strong", return_labels=False
        ))
    if n >= 2**31:
        raise ValueError(f"connected_components supports n < 2**31 vertices; got n={n}")
    roots = _device_roots(n, csr.indptr, csr.indices, block=block)
    return int(xp.count_nonzero(roots == xp.arange(n, dtype=xp.int32)))


class ComponentSplit(NamedTuple):
    """The k largest components of a graph: :func:`largest_components`'s answer."""

    #: Component label of every vertex (as :func:`component_labels`); None when the
    #: graph was known to have at most k components and was not labelled.
    labels: object
    #: Vertices of the k largest components (bool, on the graph's device); None when
    #: nothing is dropped (at most k components outside the isolated vertices).
    kept: object
    #: Components outside the isolated vertices.
    n_components: int
    #: Vertices of the components left out.
    n_dropped: int


def largest_components(csr, k: int, *, isolated=None, n_components=None,
                       labels=None) -> ComponentSplit:
    """Label a graph's components once and pick its `k` largest.

    Parameters
    ----------
    csr : scipy.sparse or cupyx.scipy.sparse CSR matrix
        Symmetric similarity matrix.
    k : int
        Number of clusters.
    isolated : bool array of shape (n,), optional
        Vertices without an edge (same device as `csr`); they are not components
        here. Computed from the row sums when not given.
    n_components : int, optional
        Components outside the isolated vertices, when already known (the graph's
        statistics count them): at most `k` returns at once, without labelling.
    labels : int array of shape (n,), optional
        The graph's component labels (:func:`component_labels`), when the caller has
        them: not labelled again.

    Returns
    -------
    ComponentSplit
        ``kept`` is None when the graph has at most `k` components outside the
        isolated vertices; else it marks the `k` largest (by vertex count; ties to the
        component met first in vertex order). ``labels`` lets the caller reuse the one
        labelling (:func:`explorer.embedding.components_embedding`).

    Notes
    -----
    Why the k largest: see the module docstring. The components are sized on the
    labels' device (``np.unique`` of 5·10⁶ labels takes 0.25 s on a 2-core CPU); CuPy's
    sort is stable, so each component's first vertex is found the same way there.
    """
    if n_components is not None and n_components <= k:
        return ComponentSplit(None, None, int(n_components), 0)
    xp = array_module(csr)
    in_graph = ~isolated if isolated is not None else row_sums(csr, xp) > 0
    labels = component_labels(csr) if labels is None else labels
    found, first, counts = xp.unique(labels[in_graph], return_index=True, return_counts=True)
    n_components = int(found.shape[0])
    if n_components <= k:
        return ComponentSplit(labels, None, n_components, 0)
    found, first, counts = to_numpy(found), to_numpy(first), to_numpy(counts)
    # Largest first; among equal sizes the component met first in vertex order.
    order = np.lexsort((first, -counts))[:k]
    kept = xp.isin(labels, xp.asarray(found[order])) & in_graph
    n_dropped = int(in_graph.sum()) - int(kept.sum())
    return ComponentSplit(labels, kept, n_components, n_dropped)


def restrict_to(csr, kept):
    """`csr`'s pattern (shared index arrays) with every edge outside the vertices
    `kept` given weight 0, so those vertices have degree 0.

    Parameters
    ----------
    csr : scipy.sparse or cupyx.scipy.sparse CSR matrix
    kept : bool array of shape (n,)
        A union of whole components (:attr:`ComponentSplit.kept`): an edge joins two
        kept vertices or none, so each entry is decided by its row alone.
    """
    xp = array_module(csr)
    data = xp.empty(csr.data.shape, dtype=csr.dtype)
    for r0, r1, e0, e1 in row_blocks(csr.indptr):
        both = kept[block_rows(csr, r0, r1, e0, e1, xp)]
        data[e0:e1] = xp.where(both, csr.data[e0:e1], 0)
    return with_values(csr, data)


def keep_largest_components(csr, k: int, *, isolated=None, n_components=None):
    """The graph restricted to its `k` largest components, when it has more than `k`.

    Parameters
    ----------
    csr, k, isolated, n_components
        As :func:`largest_components`.

    Returns
    -------
    restricted : CSR matrix
        `csr` itself when it has at most `k` components outside the isolated vertices;
        else the same pattern (shared index arrays) with the weights of every edge
        outside the `k` largest components set to 0 (:func:`restrict_to`), so those
        vertices have degree 0 and the embedding leaves them out.
    n_components : int
        Components outside the isolated vertices.
    n_dropped : int
        Vertices of the components left out.
    """
    split = largest_components(csr, k, isolated=isolated, n_components=n_components)
    if split.kept is None:
        return csr, split.n_components, 0
    return restrict_to(csr, split.kept), split.n_components, split.n_dropped


def components_besides_isolated(stats):
    """Connected components outside the isolated vertices, from a graph's statistics.

    Parameters
    ----------
    stats : explorer.graph.GraphStats

    Returns
    -------
    int or None
        ``stats.n_components - stats.n_isolated``; None when the components were not
        counted (estimated statistics).
    """
    if stats.n_components is None:
        return None
    return int(stats.n_components) - int(stats.n_isolated)


# --------------------------------------------------------------------------- helpers


def _pattern(csr):
    """The int8 pattern of a SciPy CSR matrix (explicit zeros included), on its arrays."""
    n = csr.shape[0]
    return sp.csr_matrix((np.ones(csr.nnz, dtype=np.int8), csr.indices, csr.indptr),
                         shape=(n, n))


def _device_roots(n: int, indptr, indices, *, block: int | None = None):
    """Root of every vertex (int32 CuPy array, the smallest vertex id of its component)
    of the graph of cupyx CSR arrays `indptr`, `indices`; see :func:`count_components`
    for the row blocks."""
    import cupy

    from .kernels import components as kernels

    block = COMPONENTS_BLOCK if block is None else int(block)
    if indptr.dtype == cupy.int32 and indices.dtype == cupy.int32:
        return kernels.component_labels(n, indptr, indices)
    if int(indices.shape[0]) <= block:
        return kernels.component_labels(n, indptr.astype(cupy.int32),
                                        indices.astype(cupy.int32))
    parent = cupy.arange(n, dtype=cupy.int32)
    for _, _, e0, e1 in row_blocks(indptr, block):
        if e1 > e0:
            local = cupy.clip(indptr - e0, 0, e1 - e0).astype(cupy.int32)
            kernels.hook(n, local, indices[e0:e1].astype(cupy.int32), parent)
    kernels.flatten(n, parent)
    return parent
