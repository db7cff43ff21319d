"""Spectral Explorer in the browser: ``panel serve app.py`` (add ``--show`` to open it)."""

import panel as pn

from explorer.ui import ExplorerApp

pn.extension("filedropper", notifications=True)  # the upload widget's FilePond

ExplorerApp().template().servable(title="Spectral Explorer")
