"""Every asset from the Panel server: no stylesheet is ever asked of Panel's CDN.

``panel serve`` serves Panel's CSS from its own ``static/extensions/panel/`` folder:
when a component is rendered into a page's document, Panel rewrites the CDN URLs of
its stylesheets (``loading.css``, ``markdown.css``, ``alerts.css``, the Bootstrap
design's sheets) to that folder, using the document's ``dist_url``. A component
updated while its Bokeh model is outside any document gets the CDN URLs instead
(Panel 1.9, ``Markdown._update`` → ``Reactive._get_properties(model.document)`` with
``model.document`` None, which falls back to ``CDN_DIST``). That is what happens to
the views of a hidden tab of ``pn.Tabs(dynamic=True)``: Panel keeps their models,
detached, and shows them again when the tab is selected, and the browser then asks
``cdn.holoviz.org`` for the sheets (offline: ``net::ERR_NAME_NOT_RESOLVED``, unstyled
alerts and markdown). ``Tabs(dynamic=False)`` avoids it but renders every tab on every
result (a run's views took 18 s instead of 4 s to appear on 2 cores).

:func:`serve_assets_locally` makes the fallback the session's own ``dist_url``: the
stylesheet URL rewriting is given the current session document's local path when Panel
would use the CDN for want of a document. It changes nothing outside a served session
(notebooks, static exports) or when CDN resources were asked for
(``BOKEH_RESOURCES=cdn``). ``tests/test_browser_offline.py`` is its check.
"""

from __future__ import annotations

import functools

import panel.io.resources as _resources
import panel.reactive as _reactive
from panel.io.state import state

_PATCHED = "_explorer_local_dist"


def _session_dist_url(dist_url: str) -> str:
    """`dist_url`, or the current session's local one where Panel fell back to the CDN
    for want of a document."""
    if dist_url != _resources.CDN_DIST or _resources.use_cdn():
        return dist_url
    doc = state.curdoc
    if doc is None:
        return dist_url
    return doc._template_variables.get("dist_url", dist_url)


def serve_assets_locally() -> None:
    """Make Panel rewrite stylesheet URLs to the serving session's own static folder
    even for components updated outside a document (idempotent; see the module's
    docstring for why)."""
    for module in (_reactive, _resources):
        original = module.patch_stylesheet
        if getattr(original, _PATCHED, False):
            continue

        @functools.wraps(original)
        def patch_stylesheet(stylesheet, dist_url, _original=original):
            return _original(stylesheet, _session_dist_url(dist_url))

        setattr(patch_stylesheet, _PATCHED, True)
        module.patch_stylesheet = patch_stylesheet
