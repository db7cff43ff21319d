"""Spectral Explorer in the browser: ``panel serve app.py`` (add ``--show`` to open it)."""

import panel as pn

from explorer.ui import ExplorerApp

pn.extension(notifications=True)

ExplorerApp().template().servable(title="Spectral Explorer")
