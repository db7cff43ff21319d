"""Spectral Explorer: spectral clustering on one GPU, and the tools to understand it.

>>> from explorer import EdgeRule, SpectralClustering, build_graph, datasets
>>> ds = datasets.load("moons", n_samples=2000)
>>> g = build_graph(ds.X, metric="gaussian", sigma=0.1, threshold_sqdist=0.02)
>>> labels = SpectralClustering(n_clusters=2, random_state=0).fit_predict(ds.X)
>>> rule = EdgeRule.suggest(ds.X)   # what the estimator chose: metric, σ, threshold

Names are imported on first use (PEP 562), so ``import explorer`` stays cheap and
never imports CuPy or Panel.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
from pathlib import Path

__version__ = "0.1.0"


class _SourceTreeFinder(importlib.abc.MetaPathFinder):
    """Finds ``explorer.kernels`` and ``explorer.data`` in a source checkout.

    pip installs the top-level folders ``kernels/`` and ``data/`` as
    ``explorer.kernels`` and ``explorer.data`` (``package-dir`` in pyproject.toml).
    Run from a checkout without installing (``PYTHONPATH=. pytest -m gpu`` on a GPU
    server, where nothing can be installed), they sit beside ``explorer/`` instead;
    this finder maps exactly those two names there and nothing else.
    """

    def __init__(self, locations):
        self.locations = locations

    def find_spec(self, fullname, path=None, target=None):
        folder = self.locations.get(fullname)
        if folder is None:
            return None
        return importlib.util.spec_from_file_location(
            fullname, folder / "__init__.py", submodule_search_locations=[str(folder)]
        )


def _install_source_tree_finder():
    here = Path(__file__).resolve().parent
    found = {
        f"explorer.{name}": here.parent / name
        for name in ("kernels", "data")
        if not (here / name).is_dir() and (here.parent / name / "__init__.py").is_file()
    }
    # Installed (wheel or editable): the names resolve already and `found` is empty or
    # shadowed by the editable finder, which sits earlier on sys.meta_path.
    if found and not any(isinstance(f, _SourceTreeFinder) for f in sys.meta_path):
        sys.meta_path.append(_SourceTreeFinder(found))


_install_source_tree_finder()

_EXPORTS = {
    "build_graph": "explorer.graph",
    "graph_stats": "explorer.graph",
    "Graph": "explorer.graph",
    "GraphStats": "explorer.graph",
    "EdgeRule": "explorer.graph",
    "BuildOptions": "explorer.graph",
    "spectral_embedding": "explorer.embedding",
    "Embedding": "explorer.embedding",
    "KMeans": "explorer.kmeans",
    "SpectralClustering": "explorer.spectral",
    "partition_graph": "explorer.partition",
    "GraphPartition": "explorer.partition",
    "resolve_backend": "explorer._backend",
}
_MODULES = {"datasets": "explorer.data", "data": "explorer.data", "metrics": "explorer.metrics",
            "distributed": "explorer.distributed"}

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
