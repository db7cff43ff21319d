"""Where a fit runs: the registry of engines.

The pipeline is written once; an engine is what runs it on a kind of data that needs
more than one process. The in-process engine is the pipeline itself
(:mod:`explorer.pipeline`). The Dask engine (:mod:`explorer.distributed`) registers
itself here when its module is imported, and its module is imported by name the
first time a Dask array arrives (:func:`engine_for`), as datashader's Dask pipeline
plugs into its dispatcher: nothing in the library imports ``explorer.distributed``,
and ``import explorer`` never imports Dask.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["ENGINE_MODULES", "Engine", "engine_for", "register_engine"]


@dataclass(frozen=True)
class Engine:
    """A way to run the pipeline on one kind of array.

    Attributes
    ----------
    name : str
        ``"dask"``; also the root module name of the arrays it takes.
    plan : callable
        ``plan(data, params) -> explorer.pipeline.FitPlan`` for a spectral fit.
    run : callable
        ``run(plan) -> explorer.pipeline.FitResult``.
    kmeans : callable
        ``kmeans(data, params) -> explorer.kmeans.KMeansResult`` for :class:`explorer.KMeans`.
    """

    name: str
    plan: Callable
    run: Callable
    kmeans: Callable


#: Engines that register on import, by the root module of the arrays they take.
ENGINE_MODULES = {"dask": "explorer.distributed"}

_ENGINES: dict[str, Engine] = {}


def register_engine(engine: Engine) -> None:
    """Make `engine` the one that runs arrays of its :attr:`Engine.name` module."""
    _ENGINES[engine.name] = engine


def engine_for(X) -> Engine | None:
    """The engine that runs `X`, importing its module on first use; None for arrays the
    pipeline runs in this process (NumPy, CuPy, pandas, lists)."""
    root = type(X).__module__.split(".")[0]
    module = ENGINE_MODULES.get(root)
    if module is None:
        return None
    if root not in _ENGINES:
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise ImportError(f"a {root} array needs {module}, which could not be imported "
                              f"({exc}); pip install 'spectral-explorer[{root}]'") from exc
    return _ENGINES[root]
