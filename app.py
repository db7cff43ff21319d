"""Spectral Explorer in the browser: ``panel serve app.py`` (add ``--show`` to open it)."""

import panel as pn

from explorer.ui import ExplorerApp
from explorer.ui.offline import serve_assets_locally
from explorer.warmup import start_background

start_background()  # once per server: the GPU kernels compiled before the first Run

serve_assets_locally()  # every stylesheet from this server, none from Panel's CDN

pn.extension("filedropper", notifications=True)  # the upload widget's FilePond

ExplorerApp().template().servable(title="Spectral Explorer")
