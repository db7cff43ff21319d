"""Every asset from the Panel server: no stylesheet is ever asked of Panel's CDN.

``panel serve`` serves Panel's CSS from its own ``static/extensions/panel/`` folder.
Panel's components name their stylesheets by CDN URL (``loading.css``,
``markdown.css``, ``alerts.css``, the Bootstrap design's ``bootstrap.css`` and
``button.css``) and rewrite them to the *document's* stylesheet address, its template
variable ``dist_url``, whenever a model is built or updated; where that address is
missing the CDN URL stays. Two gaps leave CDN URLs in a served page:

* **A session's document gets its address late.** Panel sets ``dist_url`` when it
  renders the session's HTML page, after the app's script has built the whole page
  into the document; it then rewrites the stylesheets it finds under the document's
  roots. Until then every rewrite in that document falls back to the CDN: when many
  sessions open at once on a threaded server (``--num-threads``), pages asked the CDN
  for their sheets from the first render and on every update (docs/ui.md,
  "Offline", has the measurements). :func:`use_local_resources` gives
  the document its address as the app starts building it, from the value Panel uses
  later (``panel.io.resources.get_dist_path``), so no rewrite in it can pick the CDN
  whatever runs meanwhile on the server's threads.

* **Detached models.** A component updated while its Bokeh model is in no document
  gets the CDN URLs (Panel 1.9: ``Markdown._update`` →
  ``Reactive._get_properties(model.document)`` with ``model.document`` None). That is
  what happens to the views of a hidden tab of ``pn.Tabs(dynamic=True)``: Panel keeps
  their models, detached, and shows them again when the tab is selected.
  ``Tabs(dynamic=False)`` avoids it but renders every tab on every result (a run's
  views took several times longer to appear). :func:`serve_assets_locally`
  makes Panel's stylesheet rewriting use the current session's address where it would
  use the CDN for want of a document.

Both change nothing outside a served session (notebooks, static exports) or when CDN
resources were asked for (``BOKEH_RESOURCES=cdn``). ``tests/test_browser_offline.py``
is their check, with one session and with a class of 16 opened at once.
"""

from __future__ import annotations

import functools

import panel.io.resources as _resources
import panel.reactive as _reactive
from panel.io.state import state

_PATCHED = "_explorer_local_dist"
#: The local address last given to a served session's document: the fallback for an
#: update made where no document is current (a worker thread), since every session of
#: one served app has the same.
_served_dist_url: str | None = None


def local_dist_url(doc=None) -> str | None:
    """The address of Panel's static folder for the session of `doc` (default: the
    current document), as Panel gives it when it renders the session's page; None
    outside a served session or when CDN resources were asked for."""
    doc = state.curdoc if doc is None else doc
    if doc is None or doc.session_context is None or _resources.use_cdn():
        return None
    return _resources.get_dist_path(cdn=False)


def use_local_resources(doc=None) -> None:
    """Give a served session's document its local stylesheet address now, before any
    of the page is built into it (see the module's docstring: Panel sets it only when
    it renders the page). Call it first in the served script; it does nothing outside a
    served session, and keeps an address already set."""
    global _served_dist_url
    doc = state.curdoc if doc is None else doc
    url = local_dist_url(doc)
    if url is not None:
        doc.template_variables.setdefault("dist_url", url)
        _served_dist_url = doc.template_variables["dist_url"]


def _session_dist_url(dist_url: str) -> str:
    """`dist_url`, or the current session's local one where Panel fell back to the CDN
    for want of a document (where no document is current either: the address served
    sessions of this process were given)."""
    if dist_url != _resources.CDN_DIST or _resources.use_cdn():
        return dist_url
    doc = state.curdoc
    if doc is None:
        return _served_dist_url or dist_url
    return (doc.template_variables.get("dist_url") or local_dist_url(doc)
            or _served_dist_url or dist_url)


def serve_assets_locally() -> None:
    """Serve every stylesheet of this session from the server: give its document its
    local address now (:func:`use_local_resources`), and make Panel rewrite stylesheet
    URLs to it even for components updated outside a document (idempotent; see the
    module's docstring for why)."""
    use_local_resources()
    for module in (_reactive, _resources):
        original = module.patch_stylesheet
        if getattr(original, _PATCHED, False):
            continue

        @functools.wraps(original)
        def patch_stylesheet(stylesheet, dist_url, _original=original):
            return _original(stylesheet, _session_dist_url(dist_url))

        setattr(patch_stylesheet, _PATCHED, True)
        module.patch_stylesheet = patch_stylesheet
