"""Connected components of a similarity graph, and keeping the k largest for clustering.

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

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from .._backend import array_module, to_numpy
from .._csr import block_rows, row_blocks, row_sums, with_values


def component_labels(csr):
    """Component label of every vertex (an int array on the matrix's device).

    Labels are arbitrary integers, equal within a component; an explicit zero
    weight still counts as an edge (the pattern is what connects).
    """
    xp = array_module(csr)
    n = csr.shape[0]
    if xp is not np:
        from . import _gpu

        return _gpu.component_roots(n, csr.indptr, csr.indices)
    # The pattern is symmetric, so its strongly connected components are its
    # connected components, found without the transpose directed=False builds.
    pattern = sp.csr_matrix((np.ones(csr.nnz, dtype=np.int8), csr.indices, csr.indptr),
                            shape=(n, n))
    return connected_components(pattern, directed=True, connection="strong")[1]


def keep_largest_components(csr, k: int, *, isolated=None, n_components=None):
    """The graph restricted to its `k` largest components, when it has more than `k`.

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

    Returns
    -------
    restricted : CSR matrix
        `csr` itself when it has at most `k` components outside the isolated vertices;
        else the same pattern (shared index arrays) with the weights of every edge
        outside the `k` largest components (by vertex count; ties to the component
        met first in vertex order) set to 0, so those vertices have degree 0 and the
        embedding leaves them out.
    n_components : int
        Components outside the isolated vertices.
    n_dropped : int
        Vertices of the components left out.
    """
    if n_components is not None and n_components <= k:
        return csr, n_components, 0
    xp = array_module(csr)
    in_graph = ~isolated if isolated is not None else row_sums(csr, xp) > 0
    labels = component_labels(csr)
    # On the labels' device: np.unique of 5·10⁶ labels takes 0.25 s on a 2-core CPU.
    # CuPy's sort is stable, so `first` is each component's first vertex there too.
    found, first, counts = xp.unique(labels[in_graph], return_index=True, return_counts=True)
    n_components = int(found.shape[0])
    if n_components <= k:
        return csr, n_components, 0
    found, first, counts = to_numpy(found), to_numpy(first), to_numpy(counts)
    # Largest first; among equal sizes the component met first in vertex order.
    order = np.lexsort((first, -counts))[:k]
    kept = xp.isin(labels, xp.asarray(found[order])) & in_graph
    data = xp.empty(csr.data.shape, dtype=csr.dtype)
    for r0, r1, e0, e1 in row_blocks(csr.indptr):
        both = kept[block_rows(csr, r0, r1, e0, e1, xp)] & kept[csr.indices[e0:e1]]
        data[e0:e1] = xp.where(both, csr.data[e0:e1], 0)
    n_dropped = int(in_graph.sum()) - int(kept.sum())
    return with_values(csr, data), n_components, n_dropped


def components_besides_isolated(stats):
    """Connected components outside the isolated vertices, from a graph's statistics
    (None when they were not counted)."""
    if stats.n_components is None:
        return None
    return int(stats.n_components) - int(stats.n_isolated)
