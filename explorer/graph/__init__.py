"""The graph stage: the ε-neighbourhood similarity matrix in CSR and its statistics.

>>> from explorer.graph import EdgeRule, build_graph, graph_stats
>>> g = build_graph(X, metric="gaussian", sigma=0.1, threshold_sqdist=0.02)  # doctest: +SKIP
>>> g = build_graph(X, EdgeRule.suggest(X))  # doctest: +SKIP
>>> g.csr, g.stats, g.timings  # doctest: +SKIP

The edge rule and the builders' knobs live in :mod:`.rule` (public), the CPU builders
in ``_cpu``, the float64 reference in :mod:`.reference`, the GPU builders behind
:mod:`.gpu` (imported only on a GPU run), statistics in ``_stats``.

Public pieces for builders of parts of the graph (the distributed row-block build):
:func:`build_rows` (rows ``r0:r1`` against all points, CPU), :func:`count_rows_cpu`
(nonzeros per row without the matrix), :func:`choose_cpu_method` (the CPU's
``method="auto"``) and :func:`stats_from_counts` (``GraphStats`` from row counts).
"""

from ._cpu import CPU_METHODS, build_rows, count_rows_cpu
from ._cpu import choose_method as choose_cpu_method
from ._dispatch import build_graph, csr_stats, graph_stats
from ._stats import stats_from_counts, suggest_hypo
from ._types import Graph, GraphStats
from .rule import (
    BUILD_FIELDS,
    EDGE_FIELDS,
    METRICS,
    THRESHOLD_KINDS,
    BuildOptions,
    EdgeRule,
    dataset_params,
    default_hypo_max_nnz_row,
    suggest_params,
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
    "build_rows",
    "choose_cpu_method",
    "count_rows_cpu",
    "csr_stats",
    "default_hypo_max_nnz_row",
    "graph_stats",
    "stats_from_counts",
    "suggest_hypo",
    "suggest_params",
    "dataset_params",
]
