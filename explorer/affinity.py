"""The rule of ``SpectralClustering(affinity="auto")``: an ε-graph or a kNN graph?

Measured on the quality benchmark (benchmarks/quality.py, benchmarks/results/quality.json),
neither graph wins everywhere:

- the ε-graph with the suggested threshold (:func:`explorer.graph.suggest.sqdist_search`)
  leaves the sparse tails and bridges of noisy shapes out and keeps clusters apart:
  ARI 0.97-0.99 on moons, circles and spirals with more noise and on sheared blobs,
  where kNN graphs (ours and scikit-learn's) score 0.0-0.75, because a kNN graph joins
  every point to its neighbours whatever the gap;
- the kNN graph with self-tuning σ adapts to densities that differ and has no
  threshold to get wrong: it wins where no ε is clean (a ring around a blob with
  uniform outliers: 1.0 against 0.0; features of different units; blobs of spreads
  5 times apart), on high-dimensional sets (digits, wine) and on iris.

The rule, one pass over samples of the data (about 1 s on 2 CPU cores):

1. ``n_features > 8`` → kNN (the ε rule there is a cosine threshold with no test of
   a clean graph; kNN is what scikit-learn's ``affinity="nearest_neighbors"`` does).
2. The ε threshold search on up to 20,000 sampled rows finds no clean level (every
   affordable threshold leaves stray pieces, too many isolated points or more pieces
   than clusters) → kNN.
3. ``n_clusters="auto"`` → ε (clean).
4. Otherwise both graphs are built on up to :data:`GAP_SAMPLE` sampled rows and the
   one whose normalised Laplacian has the larger relative eigengap
   ``(λ_{k+1} − λ_k) / λ_{k+1}`` at the k asked for wins (within :data:`GAP_TIE`, a
   tie, the kNN graph: it leaves no isolated point unlabelled): the graph whose
   k smallest eigenvalues stand apart from the rest is the one whose k clusters are
   well separated (Ng, Jordan & Weiss's stability argument; von Luxburg 2007, sect. 8.3).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np

from ._backend import array_module, to_numpy

__all__ = ["GAP_SAMPLE", "GAP_TIE", "STRAY_LEFT_OUT", "AffinityChoice", "choose_affinity"]

#: Rows the eigengap comparison of rule 4 samples.
GAP_SAMPLE = 5000
#: A sample graph "splits into exactly k components" only when the components rule
#: leaves out at most this share of its rows (stray pieces, isolated rows): survey
#: answers' kNN graph of every row split into components of copies, 53 % of the rows
#: left out, and was taken for k clean clusters (issue 32).
STRAY_LEFT_OUT = 0.05
#: Relative eigengaps this close are a tie, which the kNN graph takes: both graphs
#: separate the clusters, and a kNN graph has no isolated points to leave unlabelled.
GAP_TIE = 0.01


@dataclass(frozen=True)
class AffinityChoice:
    """What ``affinity="auto"`` chose and why.

    Attributes
    ----------
    affinity : {"epsilon", "knn"}
    why : str
        One sentence, for ``SpectralClustering.affinity_why_``, logs and the app.
    eigengaps : dict or None
        ``{"epsilon": g, "knn": g}``, the relative eigengaps compared (rule 4 only).
    graph : explorer.graph.Graph or None
        The graph of the chosen kind when the sample was every row (at most
        :data:`GAP_SAMPLE`, in order), on the backend asked for: the graph the fit would
        build, if its edge rule (:attr:`explorer.graph.Graph.rule`) is the fit's, so
        the fit can take it.
    """

    affinity: str
    why: str
    eigengaps: dict | None = None
    graph: object = field(default=None, compare=False, repr=False)


def choose_affinity(X, n_clusters, *, n_neighbors=10, local_neighbor=7, random_state=0,
                    backend="auto") -> AffinityChoice:
    """Choose between the ε-graph and the kNN graph for `X` (see the module docstring).

    Parameters
    ----------
    X : ndarray of shape (n, d)
        The data as the graph will be built from it (float32, validated, scaled if
        asked; NumPy or CuPy).
    n_clusters : int or "auto"
    n_neighbors : int
        k of the kNN graph, and the neighbour count the ε threshold is measured in.
    local_neighbor : int
        m of the kNN graph's self-tuning σ.
    random_state : int
        Seeds the row samples (fixed by the estimator: the same data gets the same
        choice).
    backend : {"auto", "gpu", "cpu"}
        The backend that will build the graph (its memory bounds the ε search). The
        sample graphs are built there ("auto": where X is), so that the graph of a
        sample that is every row is the fit's own graph, ready for it
        (:attr:`AffinityChoice.graph`).

    Returns
    -------
    AffinityChoice
    """
    from .graph import suggest as data_suggest

    n, d = X.shape
    if d > data_suggest.LOW_D:
        return AffinityChoice("knn", f"n_features={d} > {data_suggest.LOW_D}: a kNN graph with "
                              "self-tuning σ (the ε rule of high-dimensional data, a cosine "
                              "threshold, has no test of a clean graph)")
    xp = array_module(X)
    build_on = backend if backend in ("cpu", "gpu") else "cpu" if xp is np else "gpu"
    fixed_k = not isinstance(n_clusters, str)
    n_classes = int(n_clusters) if fixed_k else None
    rows = np.random.default_rng(random_state).permutation(n)[:GAP_SAMPLE] if n > GAP_SAMPLE \
        else np.arange(n)
    sample = xp.ascontiguousarray(X[xp.asarray(np.sort(rows))], dtype=xp.float32)
    if build_on == "cpu":
        sample = to_numpy(sample)

    def ready(graph):  # the graph the fit would build, when the sample is every row
        return graph if n <= GAP_SAMPLE else None

    knn_graph = None
    if fixed_k and sample.shape[0] > int(n_clusters) + 1:
        knn_graph = _sample_graph(sample, int(n_clusters), "knn", n_neighbors, local_neighbor,
                                  build_on)
    if knn_graph is not None and _has_exactly_k_components(knn_graph.csr, int(n_clusters)):
        # The largest relative eigengap there is (1: λ_k = 0 < λ_{k+1}): rules 2-4 would
        # all end in kNN (no clean ε: kNN; clean: the ε-graph's gap cannot exceed 1 +
        # GAP_TIE), so neither the ε search nor an eigensolver needs to run.
        return AffinityChoice(
            "knn", f"the kNN graph of {sample.shape[0]} sampled rows splits into exactly "
            f"k={n_clusters} components (stray pieces aside): relative eigengap 1, the "
            "largest there is, so no ε-graph can separate the clusters better (the rule "
            "would pick kNN whatever the ε search found)", {"knn": 1.0}, ready(knn_graph))
    host = np.ascontiguousarray(to_numpy(X), dtype=np.float32)
    search = data_suggest.sqdist_search(host, n_classes=n_classes, n_neighbors=n_neighbors,
                                        random_state=random_state, backend=backend)
    if not search.clean:
        return AffinityChoice("knn", "no ε threshold gives a clean graph on a sample of the "
                              "data (stray pieces, isolated points or more pieces than "
                              "clusters at every affordable threshold): a kNN graph with "
                              "self-tuning σ, which joins every point to its neighbours",
                              graph=ready(knn_graph))
    if not fixed_k:
        return AffinityChoice("epsilon", "an ε threshold gives a clean graph on a sample of "
                              "the data (n_clusters='auto': no eigengap comparison)")
    k = int(n_clusters)
    if sample.shape[0] <= k + 1:
        return AffinityChoice("epsilon", "an ε threshold gives a clean graph (too few rows "
                              "for an eigengap comparison)")
    eps_graph = _sample_graph(sample, k, "epsilon", n_neighbors, local_neighbor, build_on)
    gaps = {
        "epsilon": _relative_eigengap(eps_graph.csr, k, random_state),
        "knn": _relative_eigengap(knn_graph.csr, k, random_state),
    }
    head = (f"relative eigengap (λ{k + 1} − λ{k}) / λ{k + 1} at k={k} on {sample.shape[0]} "
            f"sampled rows: ε-graph {gaps['epsilon']:.3f}, kNN graph {gaps['knn']:.3f} (an ε "
            "threshold is clean there too): ")
    if gaps["epsilon"] > gaps["knn"] + GAP_TIE:
        return AffinityChoice("epsilon", head + "the ε-graph separates the k clusters better",
                              gaps, ready(eps_graph))
    if gaps["knn"] > gaps["epsilon"] + GAP_TIE:
        return AffinityChoice("knn", head + "the kNN graph separates the k clusters better",
                              gaps, ready(knn_graph))
    return AffinityChoice("knn", head + "both separate the k clusters; the kNN graph labels "
                          "every point (an ε-graph leaves its isolated points out)", gaps,
                          ready(knn_graph))


def _sample_graph(X, k, graph, n_neighbors, local_neighbor, backend):
    """The :class:`~explorer.graph.Graph` of kind `graph` that the suggested edge rule
    builds on `X`, on `backend`."""
    from .graph import EdgeRule, build_graph
    from .inputs import Prepared

    points = Prepared(X)  # validated (see choose_affinity): not read again
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # components left out: the fit will say so
        rule = EdgeRule.suggest(points, n_clusters=k, n_neighbors=n_neighbors, graph=graph,
                                local_neighbor=local_neighbor)
        return build_graph(points, rule, backend=backend)


def _has_exactly_k_components(csr, k) -> bool:
    """Whether :func:`explorer.partition_graph`'s components rule (stray pieces out,
    then the k largest components) leaves exactly k components of `csr`: its
    normalised Laplacian then has λ_1..λ_k = 0 < λ_{k+1}, a relative eigengap of 1.

    The count comes first (fewer than k components cannot become k); the rule itself is
    partition_graph's (:func:`explorer.partition.components_rule`), without the
    embedding and k-means that a partition would add."""
    from .components import component_labels, label_counts
    from .embedding import isolated_vertices
    from .partition import components_rule

    xp = array_module(csr)
    labels = component_labels(csr)
    pieces = int(label_counts(labels[xp.diff(csr.indptr) > 0])[0].size)  # besides the isolated
    if pieces < k:
        return False
    rule = components_rule(csr, k, isolated_vertices(csr), labels=labels)
    if rule.n_left < k:  # the stray rule left fewer than k components
        return False
    # Stray pieces are few points; when they hold more (a kNN graph of many identical
    # rows: components of copies), the k left are not the data's clusters.
    return rule.n_dropped <= STRAY_LEFT_OUT * csr.shape[0]


def _relative_eigengap(csr, k, random_state) -> float:
    """``(λ_{k+1} − λ_k) / λ_{k+1}`` of the normalised Laplacian of the sample graph
    `csr`, after the components rule of :func:`explorer.partition_graph`; 0 when the
    graph has no k + 1 eigenvalues to compare."""
    from .partition import partition_graph

    if _has_exactly_k_components(csr, k):
        return 1.0  # λ_1..λ_k = 0 < λ_{k+1}: no eigensolver needed
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # components left out: the fit will say so
        try:
            part = partition_graph(csr, k, n_eigenpairs=k + 1, n_init=1,
                                   random_state=random_state)
        except ValueError:  # fewer than k points with an edge: no comparison
            return 0.0
    # Rounding leaves a zero eigenvalue slightly negative: (λ_{k+1} − λ_k) / λ_{k+1}
    # would pass 1 (3.0 was seen on survey answers, beating every ε-graph).
    values = np.maximum(np.asarray(to_numpy(part.embedding.eigenvalues), dtype=np.float64),
                        0.0)
    if values.size < k + 1 or not values[k] > 0:
        return 0.0
    return float((values[k] - values[k - 1]) / values[k])
