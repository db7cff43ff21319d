"""Connected components of a row-block graph, labelled on the workers: each block's
forest over the vertices its rows touch, merged on the client through the few links
that cross blocks; the labels stay on the workers."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from .._backend import array_module, to_numpy
from .._csr import csr_from_arrays
from ..components import component_labels as component_labels_of
from ._halo import compact_columns

__all__ = ["BlockComponents", "ComponentChoice", "block_components", "component_labels",
           "largest_components"]


@dataclass
class BlockComponents:
    """The component of every vertex of a row-block graph, held per row block.

    Attributes
    ----------
    labels : list of distributed.Future
        Block b's int64 labels (one per row of the block, on its worker): the smallest
        vertex id of the component, as :func:`component_labels` gives them.
    forests : list of distributed.Future
        Each block's forest (:func:`block_forest`): its vertices outside its rows, by
        owner block, which the halo products reuse (:mod:`._halo`).
    reach : numpy.ndarray of int64, shape (n_blocks, n_blocks)
        ``reach[b, c]``: vertices of block c that block b's edges reach.
    found, counts, first : numpy.ndarray of int64
        The components that hold vertices of positive degree, ascending; how many such
        vertices each holds; its first such vertex (the smallest id).
    links : int
        Distinct cross-block links the client merged (what travelled instead of n
        labels per block).
    timings : dict of str to float
        Seconds: ``"forests"`` (the blocks' forests and their cross-block links),
        ``"merge"`` (the client's union of the links), ``"labels"`` (relabelling on
        the workers and the per-component counts).
    """

    blocks: object
    labels: list
    forests: list
    reach: np.ndarray
    found: np.ndarray
    counts: np.ndarray
    first: np.ndarray
    links: int
    timings: dict = field(default_factory=dict)

    def gather(self) -> np.ndarray:
        """All n labels gathered to the client (tests, small graphs, and the iterative
        solvers' start, which run on the client anyway)."""
        parts = self.blocks.client.gather(self.labels)
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def block_components(graph) -> BlockComponents:
    """Label the connected components of a :class:`~explorer.distributed.RowBlockGraph`
    on its workers.

    Notes
    -----
    **Per block** (on its worker, O(nnz of the block)): the components of the graph
    of the block's edges alone, over the block's rows and the vertices outside them
    that its edges reach (numbered compactly: the rows first). Every such component
    holds one of the block's rows (an outside vertex is reached through one), so it is
    named by its smallest row: a global vertex id, unique across blocks.

    **Across blocks**: an edge from row i of block b to vertex j of a later block c
    puts j's name in b (b's name of i) and j's name in c in one component; as the
    pattern is symmetric, the pairs of names of the vertices of later blocks that each
    block reaches are all the cross-block connections. The client first gathers how
    many vertices of each block every block reaches (n_blocks² counts), then for each
    pair that meets, block b sends its outside vertices in c to c's worker (worker to
    worker; about n_blocks²/2 small tasks at most), which returns the distinct pairs
    of names: a few per component pair on clustered data, at most one per vertex
    outside the block. The client joins the names of these pairs (SciPy on the
    distinct names only), names each joined set by its smallest name, which is the
    component's smallest vertex, and sends that map to the workers, which relabel
    their rows. Only the pairs, the map and per-component counts travel through the
    client, never n labels per block.
    """
    t0 = time.perf_counter()
    blocks = graph.blocks
    client = blocks.client
    offsets = blocks.offsets
    nb = blocks.n_blocks
    forests = [client.submit(block_forest, f, int(r0), offsets, pure=False)
               for f, r0 in zip(blocks.futures, offsets[:-1], strict=True)]
    # Which blocks each block reaches (nb × nb counts): no task for a pair without an
    # edge between them (most pairs, when the row order follows space).
    reach = np.asarray(client.gather([client.submit(reach_counts, f, pure=False)
                                      for f in forests]), dtype=np.int64).reshape(nb, nb)
    link_futures = []
    for b in range(nb):
        for c in range(b + 1, nb):
            if not reach[b, c]:
                continue
            reached = client.submit(outside_in, forests[b], c, pure=False)
            link_futures.append(client.submit(block_links, forests[c], reached, int(offsets[c]),
                                              int(offsets[-1]), pure=False))
    pairs = [p for p in client.gather(link_futures) if p.shape[1]]
    t1 = time.perf_counter()
    nodes, roots = join_names(pairs)
    t2 = time.perf_counter()
    nodes_f, roots_f = client.scatter([nodes, roots], broadcast=True, hash=False)
    labels = [client.submit(relabel, f, nodes_f, roots_f, pure=False) for f in forests]
    summaries = client.gather([
        client.submit(label_counts, lab, deg, int(r0), pure=False)
        for lab, deg, r0 in zip(labels, graph.degree_blocks, offsets[:-1], strict=True)
    ])
    found, counts, first = merge_counts(summaries)
    t3 = time.perf_counter()
    return BlockComponents(
        blocks=blocks, labels=labels, forests=forests, reach=reach, found=found,
        counts=counts, first=first, links=int(sum(p.shape[1] for p in pairs)),
        timings={"forests": t1 - t0, "merge": t2 - t1, "labels": t3 - t2},
    )


def component_labels(graph) -> np.ndarray:
    """The component of every vertex of a :class:`~explorer.distributed.RowBlockGraph`,
    labelled by its smallest vertex id (so ascending labels are components in the
    order of their first vertex), gathered to the client (:func:`block_components`
    leaves them on the workers)."""
    return block_components(graph).gather()


class ComponentChoice(NamedTuple):
    """What :func:`largest_components` keeps (the fields of
    :class:`explorer.GraphPartition` that the warning reports)."""

    n_components: int
    n_left: int
    kept: np.ndarray
    n_dropped: int
    n_stray: int = 0
    stray_pieces: int = 0
    stray_size: int | None = None


def largest_components(found, counts, first, k, stray_share) -> ComponentChoice:
    """The components rule of :func:`explorer.partition_graph` on per-component counts:
    stray pieces left out first, then the k largest of the rest.

    Parameters
    ----------
    found, counts, first : int64 ndarrays
        As :class:`BlockComponents` holds them.
    k : int
    stray_share : float
        :data:`explorer.spectral.STRAY_SHARE`: a component of fewer than
        ``max(2, ceil(stray_share · vertices / k))`` vertices of positive degree is a
        stray piece, left out when at least k vertices and one component remain.

    Returns
    -------
    ComponentChoice
        `n_components` counts the components with a vertex of positive degree,
        `n_left` those after the stray pieces; `kept` the labels of the k largest of
        these (by such vertices; ties to the component met first in vertex order),
        ascending, all of them when at most k; `n_dropped` the vertices of positive
        degree outside `kept`, the stray pieces' (`n_stray`) included.
    """
    n_components = int(found.shape[0])
    strays = {}
    if n_components > 1:
        total = int(counts.sum())
        size = max(2, math.ceil(stray_share * total / k))
        small = counts < size
        pieces = int(np.count_nonzero(small))
        vertices = int(counts[small].sum()) if pieces else 0
        if 0 < pieces < n_components and total - vertices >= k:
            strays = {"n_stray": vertices, "stray_pieces": pieces, "stray_size": size}
            found, counts, first = found[~small], counts[~small], first[~small]
    n_left = int(found.shape[0])
    n_stray = strays.get("n_stray", 0)
    if n_left <= k:
        return ComponentChoice(n_components, n_left, found, n_stray, **strays)
    order = np.lexsort((first, -counts))[:k]
    dropped = np.ones(n_left, dtype=bool)
    dropped[order] = False
    return ComponentChoice(n_components, n_left, np.sort(found[order]),
                           int(counts[dropped].sum()) + n_stray, **strays)


# ---------------------------------------------------------------- client side


def join_names(pairs):
    """The map of joined component names: `nodes` (the names in `pairs`, ascending) and
    the smallest name joined with each (`roots`)."""
    if not pairs:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    both = np.concatenate(pairs, axis=1)
    nodes, ends = np.unique(both, return_inverse=True)
    ends = ends.reshape(2, -1)
    m = nodes.shape[0]
    links = sp.csr_matrix((np.ones(ends.shape[1], dtype=np.int8), (ends[0], ends[1])),
                          shape=(m, m))
    joined = connected_components(links, directed=False)[1]
    # nodes ascend, so each joined set's first node is its smallest name.
    _, first, inverse = np.unique(joined, return_index=True, return_inverse=True)
    return nodes, nodes[first[inverse.ravel()]]


def merge_counts(summaries):
    """Per-component counts and first vertices of all blocks, added in block order."""
    if not summaries:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty
    labels = np.concatenate([s[0] for s in summaries])
    counts = np.concatenate([s[1] for s in summaries])
    first = np.concatenate([s[2] for s in summaries])
    found, inverse = np.unique(labels, return_inverse=True)
    inverse = inverse.ravel()
    total = np.bincount(inverse, weights=counts, minlength=found.shape[0]).astype(np.int64)
    earliest = np.full(found.shape[0], np.iinfo(np.int64).max)
    np.minimum.at(earliest, inverse, first)
    return found, total, earliest


# ---------------------------------------------------------------- worker functions


def block_forest(S, r0, offsets):
    """The components of one row block's edges (see :func:`block_components`), on the
    block's device: SciPy's on the host, the union-find of
    :func:`explorer.components.component_labels` on a GPU.

    Returns
    -------
    names : int64 ndarray of shape (rows,)
        Each row's component, named by its smallest row (a global vertex id).
    outside : list of (ids, names) per block
        The vertices outside the block that its edges reach, in each block (global
        ids, ascending; empty for the block itself), and their components' names.
    """
    xp = array_module(S.data)
    rows, n = int(S.shape[0]), int(offsets[-1])
    ids, compact = compact_columns(S, r0, n)
    size = rows + int(ids.shape[0])
    # int32 offsets below 2³¹ entries: the device union-find reads int32 arrays.
    ptr = compact.dtype if S.nnz < 2**31 else xp.int64
    compact = compact.astype(ptr, copy=False)
    indptr = xp.concatenate([S.indptr.astype(ptr), xp.full(size - rows, S.nnz, dtype=ptr)])
    # cupyx matrices hold floating-point values only; the pattern's values are unused.
    ones = xp.ones(S.nnz, dtype=xp.int8 if xp is np else xp.float32)
    pattern = csr_from_arrays(ones, compact, indptr, (size, size), canonical=False)
    if xp is np:
        comp = connected_components(pattern, directed=False)[1]
        # The first row of each component names it (rows come first in the compact
        # numbering, and every component holds a row).
        present, first_row = np.unique(comp[:rows], return_index=True)
        name = np.empty(int(comp.max()) + 1 if size else 0, dtype=np.int64)
        name[present] = first_row + r0
        names = name[comp]
    else:
        # The device union-find hooks both ends of every stored edge, so the outside
        # vertices' empty rows need no transpose; its root of a component is its
        # smallest compact vertex: a row.
        names = to_numpy(component_labels_of(pattern)).astype(np.int64) + r0
    ids = to_numpy(ids).astype(np.int64)
    cut = np.searchsorted(ids, offsets)
    outside = [(ids[cut[c]:cut[c + 1]], names[rows + cut[c]:rows + cut[c + 1]])
               for c in range(len(offsets) - 1)]
    return names[:rows], outside


def reach_counts(forest):
    """How many vertices of each block this block's edges reach (0 for itself)."""
    return [int(ids.shape[0]) for ids, _ in forest[1]]


def outside_in(forest, c):
    """The vertices of block `c` a block's forest reaches, with their names there."""
    return forest[1][c]


def block_links(forest, reached, r0, n):
    """Distinct (name in the other block, name here) pairs of the vertices of this
    block that another block reaches: a (2, p) int64 array (names are below `n`)."""
    ids, theirs = reached
    ours = forest[0][ids - r0]
    differ = theirs != ours
    key = np.unique(theirs[differ] * np.int64(n) + ours[differ])
    return np.stack([key // n, key % n])


def relabel(forest, nodes, roots):
    """Each row's component label: its block name, mapped through the joined names."""
    names = forest[0]
    if nodes.shape[0] == 0:
        return names.copy()
    at = np.minimum(np.searchsorted(nodes, names), nodes.shape[0] - 1)
    hit = nodes[at] == names
    return np.where(hit, roots[at], names)


def label_counts(labels, degrees, r0):
    """Per component of this block's rows of positive degree: (label, count, first
    global row), for :func:`merge_counts`."""
    live = np.flatnonzero(np.asarray(degrees) > 0)
    found, first, counts = np.unique(labels[live], return_index=True, return_counts=True)
    return found, counts.astype(np.int64), live[first].astype(np.int64) + r0
