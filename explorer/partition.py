"""Spectral clustering of a built graph: :func:`partition_graph` (the components rule,
the embedding, then k-means on its unit rows).

Every pipeline that has a graph ends here — the exact and representatives runners,
the affinity rule's sample graphs, the app — so the components rule (stray pieces out,
then the k largest components) and its warning are written once.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

from ._backend import array_module, to_numpy
from ._csr import block_rows, row_blocks, with_values
from ._validation import (
    check_choice,
    check_float,
    check_int,
    check_limit,
    check_random_state,
    is_sparse,
)
from .assign import cluster_qr, discretize
from .components import component_labels, label_counts, largest_components, restrict_to
from .embedding import (
    EIGENGAP_TOL,
    Embedding,
    auto_k_max,
    components_embedding,
    components_reason,
    eigengap_k,
    isolated_vertices,
    multigrid,
    spectral_embedding,
)
from .embedding.chebyshev import default_block
from .embedding.solvers import resolve_solver
from .graph.reorder import EXPECTED_PRODUCTS, RowOrder, choose_order, permute
from .kmeans import KMeans, first_row_numbering, first_rows, number_by_first_point
from .params import ASSIGN_LABELS, MAX_ITER_LIMIT, N_INIT_LIMIT, REORDERS

__all__ = ["STRAY_SHARE", "GraphPartition", "partition_graph", "warn_components",
           "zero_weights_message"]


@dataclass
class GraphPartition:
    """What :func:`partition_graph` produced.

    Attributes
    ----------
    labels : ndarray of int32, shape (n,)
        Cluster of each vertex, −1 for isolated vertices and for those of components
        beyond the k largest; on the graph's device (NumPy or CuPy). Clusters are
        numbered in the order of their first vertex
        (:func:`explorer.kmeans.number_by_first_point`), so the same partition has
        the same numbers whatever the row order or backend it came from.
    n_clusters : int
        The k used (the eigengap's choice under ``n_clusters="auto"``).
    n_clusters_suggested : int
        The eigengap's k among the computed eigenvalues
        (:func:`~explorer.embedding.eigengap_k`), whatever k was used.
    embedding : explorer.Embedding
        Every computed eigenpair (at least k; see `n_eigenpairs`).
    clustered : explorer.Embedding
        Its first k (``embedding.truncate(n_clusters)``), whose unit rows k-means
        clustered.
    kmeans : explorer.KMeans or None
        The fitted k-means (None when another assignment gave the labels).
    n_components : int or None
        Connected components outside the isolated vertices, when they were counted
        (given, or counted because of a fixed k).
    n_dropped : int
        Vertices left out by the components rule (label −1): those of stray pieces
        and of the components beyond the k largest.
    timings : dict of str to float
        Seconds: ``"embedding"`` (with the components rule; the reordering included)
        and ``"kmeans"``; ``"reorder"`` (choosing and computing the order, and
        permuting the matrix) when `reorder` was asked for.
    reorder : explorer.graph.reorder.RowOrder or None
        The row order the embedding ran in (``perm`` None: the rule kept the given
        order; the reason says why); None when no reordering was asked for.
    n_stray : int
        Vertices of the stray pieces left out (part of `n_dropped`).
    stray_pieces : int
        How many stray pieces.
    stray_size : int or None
        The size under which a component was a stray piece, when strays were left out.
    """

    labels: object
    n_clusters: int
    n_clusters_suggested: int
    embedding: Embedding
    clustered: Embedding
    kmeans: KMeans | None
    n_components: int | None
    n_dropped: int
    timings: dict = field(default_factory=dict)
    reorder: RowOrder | None = None
    n_stray: int = 0
    stray_pieces: int = 0
    stray_size: int | None = None


def partition_graph(
    csr,
    n_clusters,
    *,
    n_eigenpairs=None,
    n_components=None,
    eigen_solver="auto",
    eigen_tol=None,
    eigen_max_iter=None,
    n_init=10,
    kmeans_tol=1e-4,
    kmeans_max_iter=300,
    random_state=None,
    isolated=None,
    on_kmeans: Callable[[int], None] | None = None,
    reorder=None,
    reorder_points=None,
    n_vectors=None,
    assign_labels="kmeans",
    row_counts=None,
) -> GraphPartition:
    """Spectral clustering of a built similarity graph: the eigenvectors of its
    normalised Laplacian, then k-means on their unit rows (the last two stages of
    :class:`SpectralClustering`, which the app runs too).

    Parameters
    ----------
    csr : scipy.sparse or cupyx.scipy.sparse matrix of shape (n, n)
        The similarity matrix (:attr:`explorer.Graph.csr`); a CuPy matrix keeps both
        stages on its GPU.
    n_clusters : int or "auto"
        k, between 1 and the number of non-isolated vertices. ``"auto"`` computes
        :func:`~explorer.embedding.auto_k_max` eigenpairs and takes the eigengap's k.
        With a fixed k and more connected components than k (outside the isolated
        vertices), the k largest components are the clusters and the vertices of the
        others get label −1, after stray pieces (components of fewer than
        :data:`STRAY_SHARE` of the mean cluster size) are left out the same way (see
        :class:`SpectralClustering`, Notes).
    n_eigenpairs : int, optional
        With a fixed k, compute at least this many eigenpairs (to show the spectrum
        beyond k); k-means still uses the first k. Ignored by
        ``eigen_solver="components"``, which gives exactly k.
    n_components : int, optional
        The graph's components outside the isolated vertices, when known (from
        :attr:`explorer.Graph.stats`): at most k skips labelling them.
    eigen_solver, eigen_tol, eigen_max_iter
        As :func:`explorer.spectral_embedding` (`solver`, `tol`, `max_iter`); the
        default tolerance under ``n_clusters="auto"`` is
        :data:`~explorer.embedding.EIGENGAP_TOL`. A fixed k and ``"auto"`` take
        ``"components"`` when the graph left after the components rule has exactly k
        components and no more than k eigenpairs are wanted.
    n_init, kmeans_tol, kmeans_max_iter
        :class:`explorer.KMeans`'s `n_init`, `tol` and `max_iter`.
    random_state : int, numpy.random.RandomState or None
        One random stream for the eigensolver's start and then k-means.
    isolated : bool array of shape (n,), optional
        The vertices without an edge, when already known.
    on_kmeans : callable, optional
        Called with k between the two stages (a progress hook).
    reorder : {None, "auto", "jaccard", "rcm", "spatial"} or RowOrder, default None
        Run the eigensolver on the graph with its rows reordered
        (:mod:`explorer.graph.reorder`): ``"auto"`` when
        :func:`~explorer.graph.reorder.choose_order`'s rule says the products saved
        pay for it, a method name always, a :class:`~explorer.graph.reorder.RowOrder`
        as given. The eigensolver draws its random vectors in the given order
        (:func:`explorer.spectral_embedding`, `row_ids`), the eigenvectors come back
        in the given order and k-means runs there, so the labels, cluster numbers
        included, are those without reordering for the same `random_state` (up to
        the rounding of the products' summation order, which can move a point that
        lies on a boundary).
    n_vectors : int, optional
        The eigenvectors the labels are read from (scikit-learn's ``n_components``;
        default k).
    assign_labels : {"kmeans", "discretize", "cluster_qr"}
        k-means on the unit rows of those eigenvectors, or :mod:`explorer.assign`'s
        discretisation or QR assignment of the eigenvectors themselves (GraphPartition's
        ``kmeans`` is then None).
    reorder_points : array of shape (n, d), optional
        The points the graph was built from: ``"spatial"`` needs them, and they make
        it a candidate of ``"auto"``; their dimension is the `points_dim` of the
        eigensolver's ``"auto"`` rule (:func:`explorer.spectral_embedding`).
    row_counts : int array of shape (n,), optional
        The points each vertex stands for, when they are its copies (the distinct rows
        of duplicate-heavy data): k-means then runs on every point's embedding row (its
        vertex's, repeated), as on the graph of every point, since k-means of the
        vertices alone would weigh a row of 200 copies as one of a single point.

    Returns
    -------
    GraphPartition

    Raises
    ------
    ValueError
        `n_clusters` out of range, a graph without any edge (from
        :func:`explorer.spectral_embedding`), or ``eigen_solver="components"`` with
        ``n_clusters="auto"`` or on a graph without exactly k components.
    """
    csr = _check_graph(csr)
    rng = check_random_state(random_state)
    xp = array_module(csr)
    n = csr.shape[0]
    n_components = check_int(n_components, "n_components", low=0, high=n, allow_none=True)
    check_limit(check_int(n_init, "n_init", low=1), "n_init", N_INIT_LIMIT,
                "each restart runs k-means again")
    check_float(kmeans_tol, "kmeans_tol", low=0.0, high=1.0)
    check_limit(check_int(kmeans_max_iter, "kmeans_max_iter", low=1), "kmeans_max_iter",
                MAX_ITER_LIMIT, "Lloyd's iterations stop long before")
    if on_kmeans is not None and not callable(on_kmeans):
        raise TypeError(f"on_kmeans must be a callable or None; got {on_kmeans!r} "
                        f"({type(on_kmeans).__name__})")
    if isolated is not None:
        isolated = _check_isolated(isolated, n, xp)
    auto = isinstance(n_clusters, str) and n_clusters == "auto"
    if not auto:
        n_clusters = check_int(n_clusters, "n_clusters", low=1)
    elif eigen_solver == "components":
        raise ValueError(
            "eigen_solver='components' needs a fixed n_clusters (it gives exactly k "
            "eigenpairs, no spectrum for the eigengap to read); with n_clusters='auto' use "
            "another solver"
        )
    n_eigenpairs = check_int(n_eigenpairs, "n_eigenpairs", low=1, allow_none=True)
    n_vectors = check_int(n_vectors, "n_vectors", low=1, allow_none=True)
    check_choice(assign_labels, "assign_labels", ASSIGN_LABELS)
    _check_reorder(reorder, reorder_points)
    isolated = isolated_vertices(csr) if isolated is None else isolated
    n_kept = n - int(xp.count_nonzero(isolated))
    if not auto and n_clusters > n_kept:
        raise ValueError(
            f"n_clusters={n_clusters} is out of range: only {n_kept} of the n={n} points "
            f"have an edge ({n - n_kept} are isolated); allowed: 1 <= n_clusters <= {n_kept}"
        )

    t0 = time.perf_counter()
    split, n_dropped, strays = None, 0, _Strays()
    n_left = n_components
    component_ids = None  # the components' labels, once labelled
    if not auto:
        rule = components_rule(csr, n_clusters, isolated, n_components)
        csr, split, strays = rule.csr, rule.split, rule.strays
        n_left, n_dropped, n_components = rule.n_left, rule.n_dropped, rule.n_components
        component_ids = rule.labels
    n_kept -= n_dropped
    if auto:
        m = auto_k_max(n_kept)
    elif eigen_solver == "components":  # k eigenpairs, whatever n_eigenpairs asks
        m = n_clusters
    else:
        m = min(n_kept, max(n_clusters, n_vectors or 1, n_eigenpairs or 1))
    tol = EIGENGAP_TOL if auto and eigen_tol is None else eigen_tol
    exactly_k = not auto and n_left >= n_clusters
    if exactly_k and eigen_solver in ("auto", "components") and m == n_clusters:
        # The embedded graph has exactly k components: their indicators are the
        # answer, exact where an iterative solver may not resolve the zeros from the
        # next eigenvalues (explorer.spectral_embedding, Notes).
        emb = components_embedding(csr, n_clusters, labels=component_ids, kept=split.kept)
        emb.solver_why = components_reason(eigen_solver, n_clusters)
        # No products to speed up: a method is not run (the order kept, and why); a
        # given RowOrder is recorded as given (the indicators do not depend on it).
        order = reorder if reorder is None or isinstance(reorder, RowOrder) else RowOrder(
            perm=None, method="none", seconds=0.0, before=None, after=None,
            reason="kept: the components embedding takes no sparse products")
        t_order = 0.0
    else:
        embedded = csr if split is None or split.kept is None else restrict_to(csr, split.kept)
        labels = None
        if exactly_k and eigen_solver != "dense":  # the solver starts from the indicators
            labels = component_labels(csr) if component_ids is None else component_ids
        points_dim = None if reorder_points is None else int(reorder_points.shape[1])
        t_order = time.perf_counter()
        order = _order_rows(embedded, reorder, reorder_points, eigen_solver, m, n_kept, xp)
        t_order = time.perf_counter() - t_order
        if order is not None and order.reordered:
            t_permute = time.perf_counter()
            embedded = permute(embedded, order.perm)
            labels = None if labels is None else labels[order.perm]
            t_order += time.perf_counter() - t_permute
        emb = spectral_embedding(embedded, m, solver=eigen_solver, tol=tol,
                                 max_iter=eigen_max_iter, random_state=rng, components=labels,
                                 row_ids=order.perm if order is not None else None,
                                 points_dim=points_dim)
        if order is not None and order.reordered:
            emb = replace(emb, embedding=order.to_original(emb.embedding),
                          vectors=order.to_original(emb.vectors),
                          isolated=order.to_original(emb.isolated))
    suggested = eigengap_k(emb.eigenvalues)
    k = suggested if auto else n_clusters
    used = emb.truncate(min(emb.n_components, n_vectors or k))
    t1 = time.perf_counter()

    if on_kmeans is not None:
        on_kmeans(k)
    keep = xp.flatnonzero(~used.isolated)
    km = None
    if assign_labels == "kmeans":
        rows = keep
        if row_counts is not None:  # every copy's row: k-means weighs rows by copies
            copies = xp.asarray(row_counts, dtype=xp.int64)[keep]
            rows = xp.repeat(keep, copies)
        X_used = used.embedding[rows]
        init = _component_rows(X_used, k, xp) if emb.solver == "components" else None
        km = number_by_first_point(KMeans(
            k, init="auto" if init is None else init, n_init=n_init if init is None else 1,
            tol=kmeans_tol, max_iter=kmeans_max_iter, random_state=rng).fit(X_used))
        kept = km.labels_
        if row_counts is not None:  # the copies of a vertex share its row and label
            kept = kept[xp.cumsum(copies) - copies]
    else:  # scikit-learn's assignments of the eigenvectors (U = D^-1/2 V) themselves
        V = used.vectors[keep]
        found = discretize(V, random_state=rng) if assign_labels == "discretize" else (
            cluster_qr(V))
        found = xp.asarray(found)
        _, new_id = first_row_numbering(first_rows(found, int(found.max()) + 1))
        kept = xp.asarray(new_id)[found]
    labels = xp.full(n, -1, dtype=xp.int32)
    labels[keep] = kept
    timings = {"embedding": t1 - t0, "kmeans": time.perf_counter() - t1}
    if order is not None:
        timings["reorder"] = t_order
    return GraphPartition(
        labels=labels, n_clusters=int(k), n_clusters_suggested=int(suggested), embedding=emb,
        clustered=used, kmeans=km, n_components=n_components, n_dropped=int(n_dropped),
        timings=timings, reorder=order,
        n_stray=strays.vertices, stray_pieces=strays.pieces, stray_size=strays.size,
    )


def _component_rows(E, k, xp):
    """The k distinct rows of a components embedding's unit rows, in the order of their
    first row, as k-means' starts; None when `E` is not such an embedding.

    The unit rows of the indicators D^1/2 1_c (U = D^-1/2 V) are ±e_c, one per
    component, so k-means of them has one optimum, those k points at inertia 0, and
    every restart of greedy k-means++ reaches it (each draw lands in a component not yet
    drawn: the others are at distance 0). Started there, one step confirms it: the
    labels and centres of ``n_init`` restarts at the cost of one assignment. Checked,
    not assumed: every row must hold exactly one nonzero and the k columns must all
    occur.
    """
    if E.ndim != 2 or E.shape[1] != k or E.shape[0] < k:
        return None
    nonzero = E != 0
    if not bool((xp.count_nonzero(nonzero, axis=1) == 1).all()):
        return None
    first = first_rows(xp.argmax(nonzero, axis=1), k)
    if (first >= E.shape[0]).any():
        return None
    return E[xp.asarray(np.sort(first))]


def _check_reorder(reorder, points):
    """Validate `partition_graph`'s `reorder` (and its points) before any work."""
    if reorder is None or isinstance(reorder, RowOrder):
        return
    check_choice(reorder, "reorder", REORDERS)
    if reorder == "spatial" and points is None:
        raise ValueError("reorder='spatial' needs the points the graph was built from "
                         "(reorder_points); use 'auto', 'jaccard' or 'rcm' for a graph alone")


def _order_rows(csr, reorder, points, solver, m, n_kept, xp):
    """The row order `partition_graph` embeds in (None: none asked for).

    The rule's inputs: the block products the solver takes (none for the dense,
    components and "lu" solvers, :data:`explorer.embedding.multigrid.EXPECTED_PRODUCTS`
    for "amg", :data:`~explorer.graph.reorder.EXPECTED_PRODUCTS` for the other
    iterative ones) and its block width."""
    if reorder is None:
        return None
    if isinstance(reorder, RowOrder):
        return reorder
    used = ("components" if solver == "components"
            else resolve_solver(solver, n_kept, min(m, n_kept), xp, nnz=int(csr.nnz),
                                points_dim=None if points is None else points.shape[1]))
    # "lu": a few products; its factors (ordered by SuperLU itself) are the cost.
    products = (0 if used in ("dense", "components", "lu")
                else multigrid.EXPECTED_PRODUCTS if used == "amg" else EXPECTED_PRODUCTS)
    return choose_order(csr, reorder, points, n_products=products,
                        block=default_block(m, csr.shape[0]))


#: A component holding fewer points than this share of the mean cluster size
#: (non-isolated points / k) is a stray piece (:func:`partition_graph`).
STRAY_SHARE = 0.01


@dataclass
class _Strays:
    """What :func:`_drop_stray_components` left out."""

    n_components: int | None = None
    pieces: int = 0
    vertices: int = 0
    size: int | None = None
    #: The graph's component labels when the search labelled them (None otherwise).
    labels: object = None


@dataclass
class ComponentsRule:
    """What the components rule of :func:`partition_graph` leaves of a graph.

    Attributes
    ----------
    csr : sparse matrix
        The graph with its stray pieces' weights set to 0.
    split : explorer.components.ComponentSplit
        The k largest components left (``kept``: their vertices; None: all).
    strays : _Strays
    n_left : int
        Components left besides the stray pieces (at least k, or fewer when the graph
        has fewer).
    n_dropped : int
        Vertices left out: of stray pieces and of components past the k largest.
    n_components : int
        Components outside the isolated vertices, stray pieces included.
    labels : int array or None
        Every vertex's component, when the rule labelled them.
    """

    csr: object
    split: object
    strays: object
    n_left: int
    n_dropped: int
    n_components: int
    labels: object


def components_rule(csr, k, isolated, n_components=None, labels=None) -> ComponentsRule:
    """The components rule of :func:`partition_graph` for a fixed k: stray pieces (a few
    points cut off in a sparse tail) out first, then, with more components than k, the
    k largest are the clusters (:func:`explorer.components.largest_components`); the
    others' vertices get label −1. One implementation for the fit and for
    :mod:`explorer.affinity`'s test of a graph that splits into exactly k components
    (which needs no eigensolver). `labels`: the graph's component labels
    (:func:`explorer.components.component_labels`), when the caller has them."""
    csr, isolated_left, strays = _drop_stray_components(csr, k, isolated, n_components,
                                                        labels)
    n_left = None if strays.n_components is None else strays.n_components - strays.pieces
    # Zeroed weights keep the pattern, which is what connects (component_labels), so
    # the labels of the stray search are the left graph's: labelled once.
    split = largest_components(csr, k, isolated=isolated_left, n_components=n_left,
                               labels=strays.labels)
    return ComponentsRule(
        csr=csr, split=split, strays=strays, n_left=split.n_components,
        n_dropped=split.n_dropped + strays.vertices,
        n_components=split.n_components + strays.pieces,
        labels=strays.labels if split.labels is None else split.labels)


def _drop_stray_components(csr, k, isolated, n_components, labels=None):
    """``(graph, isolated, _Strays)``: the graph with the edges of its stray pieces
    (components of fewer than ``max(2, ceil(STRAY_SHARE · n_kept / k))`` vertices)
    set to 0, when it has more than one component and at least one is not a stray."""
    if n_components is not None and n_components <= 1:
        return csr, isolated, _Strays(n_components)
    xp = array_module(csr)
    labels = component_labels(csr) if labels is None else labels
    in_graph = ~isolated
    found, counts = label_counts(labels[in_graph])
    counts = to_numpy(counts)  # one copy: the sizes decide on the host
    n_components = int(counts.size)
    n_kept = int(counts.sum())
    size = max(2, math.ceil(STRAY_SHARE * n_kept / k))
    small = counts < size
    pieces = int(np.count_nonzero(small))
    vertices = int(counts[small].sum()) if pieces else 0
    if pieces == 0 or pieces == n_components or n_kept - vertices < k:
        return csr, isolated, _Strays(n_components, labels=labels)
    drop = xp.isin(labels, found[xp.asarray(small)]) & in_graph
    data = xp.empty(csr.data.shape, dtype=csr.dtype)
    for r0, r1, e0, e1 in row_blocks(csr.indptr):
        out = drop[block_rows(csr, r0, r1, e0, e1, xp)] | drop[csr.indices[e0:e1]]
        data[e0:e1] = xp.where(out, 0, csr.data[e0:e1])
    return (with_values(csr, data), isolated | drop,
            _Strays(n_components, pieces, vertices, size, labels))


def zero_weights_message(rule, nnz: int) -> str:
    """Why a graph with `nnz` edges has no positive weight (every gaussian weight
    underflowed float32): the message :class:`SpectralClustering` and the app give."""
    z = rule.zero_weight_sqdist
    if z is None:
        return f"every one of the graph's {nnz} edges has weight 0 ({rule.describe()})"
    return (
        f"every one of the graph's {nnz} edges has weight 0: with {rule.describe()}, "
        f"exp(-‖xi−xj‖²/(2σ²)) underflows float32 to 0 from ‖xi−xj‖² ≥ {z:.3g} "
        f"(2σ² · {z / (2 * rule.sigma ** 2):.0f}) on, and no edge is shorter; raise sigma "
        "(sigma ≈ sqrt(threshold_sqdist / 8) weighs every edge)"
    )


def _check_graph(csr):
    """`csr` as a canonical-format CSR matrix (any SciPy / cupyx sparse format is
    converted), or a TypeError / ValueError naming the argument."""
    if not is_sparse(csr):
        raise TypeError(
            "csr must be a scipy.sparse or cupyx.scipy.sparse matrix (the similarity graph, "
            f"e.g. build_graph(X).csr); got {type(csr).__module__}.{type(csr).__name__}"
        )
    if np.issubdtype(csr.dtype, np.complexfloating):
        raise ValueError(
            f"Complex data not supported: csr must hold real weights; got dtype {csr.dtype}"
        )
    if not (np.issubdtype(csr.dtype, np.number) or csr.dtype == np.bool_):
        raise TypeError(f"csr must hold numbers; got dtype {csr.dtype}")
    if csr.ndim != 2 or csr.shape[0] != csr.shape[1] or csr.shape[0] < 2:
        raise ValueError(
            f"csr must be a square n×n matrix with n >= 2; got shape {tuple(csr.shape)}"
        )
    if csr.format != "csr":
        csr = csr.tocsr()
    return csr


def _check_isolated(isolated, n: int, xp):
    """`isolated` as a bool array of shape (n,) on the graph's device."""
    try:
        mask = xp.asarray(isolated)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"isolated must be a bool array of shape ({n},); got {exc}") from None
    if mask.dtype != bool or mask.shape != (n,):
        raise ValueError(
            f"isolated must be a bool array of shape ({n},) (one flag per vertex); got "
            f"dtype {mask.dtype}, shape {tuple(mask.shape)}"
        )
    return mask


def warn_components(n_components: int, n_isolated: int, k: int, n_dropped: int, *,
                    n_stray: int = 0, stray_pieces: int = 0,
                    stray_size: int | None = None) -> None:
    """Warn that some components were left out and which vertices lost a label.

    Public for the distributed fit, which warns the same way.

    Parameters
    ----------
    n_components : int
        Connected components besides the isolated vertices.
    n_isolated : int
        Isolated vertices (degree 0).
    k : int
        Number of clusters.
    n_dropped : int
        Vertices left out (labelled -1), the stray pieces' included.
    n_stray, stray_pieces, stray_size : int
        Vertices and number of the stray pieces left out, and the size under which a
        component was one (see :func:`partition_graph`).
    """
    if not stray_pieces:
        warnings.warn(
            f"the graph has {n_components} connected components besides its {n_isolated} "
            f"isolated vertices, more than k={k}: the {k} largest are the clusters and the "
            f"{n_dropped} vertices of the other {n_components - k} are left unclustered "
            "(label -1); raise the threshold (or sigma; n_neighbors for a kNN graph) to "
            "join them",
            UserWarning,
            stacklevel=3,
        )
        return
    left = n_components - stray_pieces
    beyond = (f"; the {k} largest of the other {left} are the clusters and the "
              f"{n_dropped - n_stray} vertices of the remaining {left - k} are left "
              "unclustered" if n_dropped > n_stray else "")
    warnings.warn(
        f"the graph has {n_components} connected components besides its {n_isolated} "
        f"isolated vertices (k={k}): {stray_pieces} stray piece(s) of fewer than "
        f"{stray_size} points ({n_stray} vertices) are left unclustered (label -1){beyond}; "
        "raise the threshold (or sigma; n_neighbors for a kNN graph) to join them",
        UserWarning,
        stacklevel=3,
    )

