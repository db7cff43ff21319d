"""The graph stage: the ε-neighbourhood similarity matrix in CSR and its statistics.

>>> from explorer.graph import EdgeRule, build_graph, graph_stats
>>> g = build_graph(X, metric="gaussian", sigma=0.1, threshold_sqdist=0.02)  # doctest: +SKIP
>>> g = build_graph(X, EdgeRule.suggest(X))  # doctest: +SKIP
>>> g.csr, g.stats, g.timings  # doctest: +SKIP

The edge rule and the builders' knobs live in :mod:`.rule` (public), the CPU builders
in ``_cpu``, the float64 reference in :mod:`.reference`, the GPU builders behind
:mod:`.gpu` (imported only on a GPU run), statistics in ``_stats``.
"""

from ._cpu import CPU_METHODS
from ._dispatch import build_graph, csr_stats, graph_stats
from ._stats import suggest_hypo
from ._types import Graph, GraphStats
from .rule import (
    BUILD_FIELDS,
    EDGE_FIELDS,
    METRICS,
    THRESHOLD_KINDS,
    BuildOptions,
    EdgeRule,
    default_hypo_max_nnz_row,
)

__all__ = [
    "BUILD_FIELDS",
    "CPU_METHODS",
    "EDGE_FIELDS",
    "METRICS",
    "THRESHOLD_KINDS",
    "BuildOptions",
    "EdgeRule",
    "Graph",
    "GraphStats",
    "build_graph",
    "csr_stats",
    "default_hypo_max_nnz_row",
    "graph_stats",
    "suggest_hypo",
]
