"""Spectral Explorer in the browser: ``panel serve app.py`` (add ``--show`` to open it)."""

import panel as pn

from explorer.ui import ExplorerApp
from explorer.ui.offline import serve_assets_locally

serve_assets_locally()  # every stylesheet from this server, none from Panel's CDN

pn.extension("filedropper", notifications=True)  # the upload widget's FilePond

ExplorerApp().template().servable(title="Spectral Explorer")
