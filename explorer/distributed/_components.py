"""Connected components of a row-block graph: a spanning forest per block on its
worker, merged on the client."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from .._backend import array_module, to_numpy
from .._csr import block_rows

__all__ = ["component_labels", "largest_components"]


def block_forest(S, r0, n):
    """Component label (0, 1, ...) of every one of the n vertices in the graph of this
    row block's edges alone (the pattern: explicit zeros connect, as in
    :func:`explorer.components.component_labels`)."""
    xp = array_module(S.data)
    rows = to_numpy(block_rows(S, 0, S.shape[0], 0, S.nnz, xp)).astype(np.int64) + r0
    cols = to_numpy(S.indices).astype(np.int64)
    pattern = sp.csr_matrix((np.ones(rows.shape[0], dtype=np.int8), (rows, cols)), shape=(n, n))
    return connected_components(pattern, directed=False)[1].astype(np.int64)


def component_labels(graph) -> np.ndarray:
    """The component of every vertex of a :class:`~explorer.distributed.RowBlockGraph`,
    labelled by its smallest vertex id (so ascending labels are components in the
    order of their first vertex).

    Notes
    -----
    Each worker labels the components of its block's edges alone (an n-vertex forest,
    O(n + nnz of the block)); the client joins vertex i to its label in every block in
    a graph of n + (labels of all blocks) vertices and n × blocks edges, whose
    components restricted to the n vertices are the graph's. O(n) per block travels.
    """
    client = graph.blocks.client
    n = graph.n
    forests = client.gather([client.submit(block_forest, f, int(r0), n, pure=False)
                             for f, r0 in zip(graph.blocks.futures, graph.blocks.offsets[:-1],
                                              strict=True)])
    heads, tails, at = [], [], n
    vertices = np.arange(n, dtype=np.int64)
    for labels in forests:
        heads.append(vertices)
        tails.append(labels + at)
        at += int(labels.max()) + 1 if labels.size else 0
    links = sp.csr_matrix((np.ones(n * len(forests), dtype=np.int8),
                           (np.concatenate(heads), np.concatenate(tails))), shape=(at, at))
    joined = connected_components(links, directed=False)[1][:n]
    _, first, inverse = np.unique(joined, return_index=True, return_inverse=True)
    return first[inverse.ravel()].astype(np.int64)


def largest_components(labels, in_graph, k):
    """The rule of :func:`explorer.components.keep_largest_components` on labels.

    Returns
    -------
    n_components : int
        Components among the vertices `in_graph`.
    dropped : bool ndarray of shape (n,)
        Vertices of `in_graph` outside the k largest components (by vertex count; ties
        to the component met first in vertex order); all False when there are at most k.
    """
    found, first, counts = np.unique(labels[in_graph], return_index=True, return_counts=True)
    n_components = int(found.shape[0])
    dropped = np.zeros(labels.shape[0], dtype=bool)
    if n_components > k:
        order = np.lexsort((first, -counts))[:k]
        dropped = in_graph & ~np.isin(labels, found[order])
    return n_components, dropped
