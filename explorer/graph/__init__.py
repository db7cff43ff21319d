"""The graph stage: the ε-neighbourhood similarity matrix in CSR and its statistics.

>>> from explorer.graph import build_graph, graph_stats
>>> g = build_graph(X, metric="gaussian", sigma=0.1, threshold_sqdist=0.02)  # doctest: +SKIP
>>> g.csr, g.stats, g.timings  # doctest: +SKIP

The CPU builders live in ``_cpu``, the float64 reference in :mod:`.reference`, the GPU
builders behind :mod:`.gpu` (imported only on a GPU run), statistics in ``_stats``.
"""

from ._cpu import CPU_METHODS
from ._dispatch import build_graph, csr_stats, graph_stats
from ._params import GraphParams
from ._stats import suggest_hypo
from ._types import Graph, GraphStats

__all__ = [
    "CPU_METHODS",
    "Graph",
    "GraphParams",
    "GraphStats",
    "build_graph",
    "csr_stats",
    "graph_stats",
    "suggest_hypo",
]
