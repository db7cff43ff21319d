"""Spectral Explorer: spectral clustering on one GPU, and the tools to understand it.

>>> from explorer import SpectralClustering, build_graph, datasets
>>> ds = datasets.load("moons", n_samples=2000)
>>> g = build_graph(ds.X, metric="gaussian", sigma=0.1, threshold_sqdist=0.02)
>>> labels = SpectralClustering(n_clusters=2, metric="gaussian", sigma=0.1,
...                             threshold_sqdist=0.02).fit_predict(ds.X)

Names are imported on first use (PEP 562), so ``import explorer`` stays cheap and
never imports CuPy or Panel.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

_EXPORTS = {
    "build_graph": "explorer.graph",
    "graph_stats": "explorer.graph",
    "Graph": "explorer.graph",
    "GraphStats": "explorer.graph",
    "GraphParams": "explorer.graph",
    "spectral_embedding": "explorer.embedding",
    "Embedding": "explorer.embedding",
    "KMeans": "explorer.kmeans",
    "SpectralClustering": "explorer.spectral",
    "resolve_backend": "explorer._backend",
}
_MODULES = {"datasets": "explorer.data", "data": "explorer.data", "metrics": "explorer.metrics"}

__all__ = sorted([*_EXPORTS, *_MODULES])


def __getattr__(name):
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
    elif name in _MODULES:
        value = importlib.import_module(_MODULES[name])
    else:
        raise AttributeError(f"module 'explorer' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__():
    return __all__
