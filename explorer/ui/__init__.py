"""The explorer app: a Panel dashboard over the library (the only part importing Panel).

>>> import panel as pn
>>> pn.extension()                          # doctest: +SKIP
>>> from explorer.ui import ExplorerApp
>>> ExplorerApp()                           # doctest: +SKIP  (displays inline)

:mod:`explorer.ui.state` holds the state and logic (param only, no Panel);
:mod:`explorer.ui.plots` the HoloViews renderers; :mod:`explorer.ui.views` the Panel
views; :mod:`explorer.ui.app` the template. Names load on first use, so
``import explorer.ui.state`` never imports Panel.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "ExplorerApp": "explorer.ui.app",
    "ExplorerState": "explorer.ui.state",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'explorer.ui' has no attribute {name!r}")
    value = getattr(importlib.import_module(_EXPORTS[name]), name)
    globals()[name] = value
    return value


def __dir__():
    return __all__
