"""A run's result as files: labels (CSV), the graph (NPZ), the whole result (JSON); the
views as figures for slides (PNG, SVG; a numbered set in a ZIP)."""

from __future__ import annotations

import io
import json
import math
import os
import struct
import zipfile

import numpy as np
import pandas as pd
import scipy.sparse as sp

import explorer
from explorer._backend import array_module


def labels_csv(result) -> bytes:
    """One row per point: ``index,spectral[,kmeans][,truth]``; −1 marks isolated points."""
    columns = {"index": np.arange(result.n), "spectral": result.labels}
    if result.kmeans_labels is not None:
        columns["kmeans"] = result.kmeans_labels
    if result.y_true is not None:
        columns["truth"] = np.asarray(result.y_true)
    # pandas writes integers several times faster than numpy.savetxt (5M rows: seconds).
    frame = pd.DataFrame({k: np.asarray(v, dtype=np.int64) for k, v in columns.items()})
    return frame.to_csv(index=False, lineterminator="\n").encode()


def graph_npz(result) -> bytes:
    """The similarity matrix S in SciPy's ``.npz`` format (``scipy.sparse.load_npz``)."""
    out = io.BytesIO()
    save_graph_npz(result.csr, out)
    return out.getvalue()


def save_graph_npz(csr, file, *, compressed=True) -> None:
    """Write a CSR matrix in SciPy's ``.npz`` format (``scipy.sparse.load_npz`` reads it).

    Parameters
    ----------
    csr : scipy.sparse or cupyx.scipy.sparse CSR matrix
        A CuPy matrix is copied to the host once (12 B per nonzero with int64 indices).
    file : str, os.PathLike or binary file object
        Where to write; a path gets the ``.npz`` suffix if it lacks it, as in SciPy.
    compressed : bool, default True
        zlib-compress the arrays. Compression runs on one core at about 50 MB/s:
        seconds for the app's graphs, 9 minutes for a 2.2·10⁹-nonzero graph (26.6 GB),
        which ``compressed=False`` writes about 5x faster (the zip's CRC-32 is then
        the bound, not the disk).

    Notes
    -----
    The index arrays are written with their own dtype, so int64 indices stay int64 in
    the file, and arrays are streamed into the archive in 16 MiB pieces (NumPy's
    ``savez``), so writing costs no second copy of the matrix. Reading back, SciPy
    narrows indices to int32 when they fit (only a graph of 2**31 nonzeros or more
    comes back int64).
    """
    if array_module(csr) is not np:  # cupyx: each array to the host as it is
        host = sp.csr_matrix(csr.shape, dtype=csr.dtype)
        # Assigned, not passed to the constructor, which would narrow int64 indices.
        host.data, host.indices, host.indptr = csr.data.get(), csr.indices.get(), csr.indptr.get()
    else:
        host = sp.csr_matrix(csr)
    sp.save_npz(file, host, compressed=compressed)


def map_graph_npz(path):
    """Map a CSR ``.npz`` written uncompressed (``save_graph_npz(..., compressed=False)``).

    ``scipy.sparse.load_npz`` reads every byte into memory and checks the archive's
    CRC-32 on the way, at a few hundred MB/s on one core: minutes for a 26.6 GB graph.
    Here the three arrays are read-only memory maps of the file itself, with the dtypes
    stored in it (int64 indices stay int64): nothing is read until it is used.

    Parameters
    ----------
    path : str or os.PathLike

    Returns
    -------
    scipy.sparse.csr_matrix
        Its ``data``, ``indices`` and ``indptr`` are ``numpy.memmap`` views of the file
        (no CRC check: compare the values, or use ``scipy.sparse.load_npz``, to verify).

    Raises
    ------
    ValueError
        If the file does not hold a CSR matrix, or its arrays were compressed.
    """
    path = os.fspath(path)
    with np.load(path) as stored:
        fmt = stored["format"].item()
        shape = tuple(int(v) for v in stored["shape"])
    if fmt not in (b"csr", "csr"):
        raise ValueError(f"{path}: holds a {fmt!r} matrix; map_graph_npz maps CSR files")
    data, indices, indptr = (_map_member(path, name) for name in ("data", "indices", "indptr"))
    out = sp.csr_matrix(shape, dtype=data.dtype)
    # Assigned, not passed to the constructor, which would read (and narrow) the indices.
    out.data, out.indices, out.indptr = data, indices, indptr
    return out


def _map_member(path: str, name: str):
    """Memory map of the array ``<name>.npy`` stored uncompressed in the zip at `path`."""
    with zipfile.ZipFile(path) as archive:
        info = archive.getinfo(f"{name}.npy")
    if info.compress_type != zipfile.ZIP_STORED:
        raise ValueError(f"{path}: {name} is compressed; only a file written with "
                         "compressed=False can be mapped (scipy.sparse.load_npz reads any)")
    with open(path, "rb") as fh:
        fh.seek(info.header_offset)
        local = fh.read(30)  # the zip's local file header; the member's bytes follow it
        if local[:4] != b"PK\x03\x04":
            raise ValueError(f"{path}: no local zip header for {name}")
        name_len, extra_len = struct.unpack("<HH", local[26:30])
        fh.seek(info.header_offset + 30 + name_len + extra_len)
        version = np.lib.format.read_magic(fh)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(fh)
        elif version == (2, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(fh)
        else:
            raise ValueError(f"{path}: {name} has .npy format version {version}")
        offset = fh.tell()
    if len(shape) != 1 or dtype.hasobject:
        raise ValueError(f"{path}: {name} is not a 1-D numeric array")
    if shape[0] == 0:
        return np.empty(0, dtype=dtype)
    return np.memmap(path, dtype=dtype, mode="r", offset=offset, shape=shape)


def _plain(value):
    """JSON-ready: NumPy scalars and arrays to Python, non-finite floats to None."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, np.ndarray):
        return _plain(value.tolist())
    if isinstance(value, np.generic):
        return _plain(value.item())
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def result_dict(result) -> dict:
    """The run as a JSON-ready dictionary (everything but the per-point arrays)."""
    return _plain({
        "explorer_version": explorer.__version__,
        "dataset": result.dataset,
        "n": result.n,
        "parameters": result.params,
        "n_clusters": result.n_clusters,
        "k_suggested_by_eigengap": result.k_suggested,
        "backend": result.backend,
        "backend_reason": result.backend_reason,
        "method": result.method,
        "method_reason": result.method_reason,
        "eigen_solver": result.solver,
        "eigen_iterations": result.eigen_iterations,
        "eigen_residuals": result.eigen_residuals,
        "eigenvalues": result.eigenvalues,
        "timings_s": result.timings,
        "scores": result.scores,
        "graph_stats": None if result.graph_stats is None else result.graph_stats.to_dict(),
        "mode": result.mode,
        "mode_why": result.mode_why,
        "affinity": result.affinity,
        "affinity_why": result.affinity_why,
        "n_isolated": int(result.isolated.sum()),
    })


def result_json(result) -> bytes:
    """:func:`result_dict` as indented UTF-8 JSON."""
    return json.dumps(result_dict(result), indent=2, ensure_ascii=False).encode()


# -- figures for slides ---------------------------------------------------------------

#: The Chromium that draws exported figures (the browser tests' too).
CHROMIUM = os.environ.get("EXPLORER_CHROMIUM", "/usr/bin/chromium")
_CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update"]
#: The formats :func:`figure_files` writes.
FIGURE_FORMATS = ("png", "svg")
#: Bounds on an exported figure's size in CSS pixels (a slide at 1080p is 1920 × 1080).
FIGURE_MIN_PX, FIGURE_MAX_PX = 200, 4000

# Every plot view of the rendered page, its place on the page and, on the SVG backend,
# its drawing as SVG text (BokehJS's own export, as bokeh.io.export_svg uses).
_PLOTS_JS = """(svg) => {
  const {PlotView} = Bokeh.require("models/plots/plot")
  const root = Bokeh.index.roots[0].el.getBoundingClientRect()
  const out = []
  function* walk(views) {
    for (const view of views) {
      yield view
      if (view.child_views != null) { yield* walk(view.child_views.values()) }
    }
  }
  for (const view of walk(Bokeh.index.roots)) {
    if (!(view instanceof PlotView)) { continue }
    const r = view.el.getBoundingClientRect()
    const text = svg ? view.export("svg").ctx.get_serialized_svg(true) : ""
    out.push([r.left - root.left, r.top - root.top, r.width, r.height, text])
  }
  return {width: root.width, height: root.height, plots: out}
}"""

_IDLE_JS = """() => typeof Bokeh !== "undefined" && Bokeh.documents.length > 0
  && Bokeh.documents[0].is_idle && Bokeh.index.roots.length > 0"""


def figure_model(obj, width: int, height: int):
    """A fresh Bokeh model of `obj` at a fixed `width` × `height` (CSS pixels).

    Parameters
    ----------
    obj : holoviews object or bokeh.models.LayoutDOM
        What a view draws (a HoloViews element, overlay or layout; datashaded
        elements are rendered as their current image). A Bokeh model is used as it is
        (and resized in place).
    width, height : int
        The whole figure's size; a layout's plots share it (a grid of c columns and
        r rows gives each plot width / c × height / r). Toolbars are left out: a slide
        has no use for them.
    """
    from bokeh.models import GridPlot, LayoutDOM, Plot, Row

    if not isinstance(obj, LayoutDOM):
        import holoviews as hv

        obj = hv.render(obj, backend="bokeh")
    plots = list(obj.select({"type": Plot}))
    if not plots:
        raise ValueError(f"nothing to export: {type(obj).__name__} holds no plot")
    if isinstance(obj, GridPlot):
        ncols = 1 + max(c for _, _, c in obj.children)
        obj.toolbar_location = None
    elif isinstance(obj, Row):
        ncols = len(obj.children)
    else:
        ncols = 1
    nrows = -(-len(plots) // ncols)
    for model in obj.select({"type": LayoutDOM}):  # layouts fit their plots
        model.sizing_mode = "fixed" if isinstance(model, Plot) else None
    for plot in plots:
        plot.update(width=width // ncols, height=height // nrows, toolbar_location=None,
                    min_width=None, min_height=None, max_width=None, max_height=None)
    return obj


def _check_size(width, height) -> tuple[int, int]:
    size = []
    for name, value in (("width", width), ("height", height)):
        if not isinstance(value, (int, np.integer)) or not (
                FIGURE_MIN_PX <= value <= FIGURE_MAX_PX):
            raise ValueError(f"{name} must be a whole number of pixels in "
                             f"[{FIGURE_MIN_PX}, {FIGURE_MAX_PX}]; got {value!r}")
        size.append(int(value))
    return size[0], size[1]


def figure_files(obj, *, width: int = 1280, height: int = 720, scale: float = 2.0,
                 formats=FIGURE_FORMATS, timeout_s: float = 60.0) -> dict[str, bytes]:
    """Draw `obj` as PNG and / or SVG at a chosen size, in headless Chromium.

    The figure is rendered as a standalone Bokeh page with inline resources (nothing is
    fetched: exports work offline) and drawn by BokehJS, as in the app: the PNG is a
    screenshot of it, the SVG BokehJS's SVG backend (each plot of a layout placed as on
    the page, in one SVG). Chromium runs through Playwright, in a thread of its own
    (Playwright's synchronous API refuses a thread with a running event loop, as a
    Panel callback's is).

    Parameters
    ----------
    obj : holoviews object or bokeh.models.LayoutDOM
        See :func:`figure_model` (a Bokeh model is resized in place).
    width, height : int
        The figure's size in CSS pixels, each in [200, 4000].
    scale : float
        Device pixels per CSS pixel of the PNG (2: sharp on a projector at full
        screen); the SVG is in CSS pixels.
    formats : sequence of {"png", "svg"}
    timeout_s : float
        How long Chromium may take to draw the figure.

    Returns
    -------
    dict
        Format -> file content.

    Raises
    ------
    ValueError
        A size out of bounds, an unknown format or nothing to draw.
    RuntimeError
        No Chromium at :data:`CHROMIUM` (``EXPLORER_CHROMIUM`` names another), or
        Playwright is not installed.
    """
    width, height = _check_size(width, height)
    pages = _pages(obj, width, height, formats, scale)
    return _in_thread(_draw, [pages], width, height, scale, timeout_s)[0]


def _pages(obj, width: int, height: int, formats, scale: float) -> dict:
    """Format -> the standalone page that draws `obj` for it (checks the arguments)."""
    formats = tuple(formats)
    unknown = [f for f in formats if f not in FIGURE_FORMATS]
    if unknown or not formats:
        raise ValueError(f"formats must be among {FIGURE_FORMATS}; got {formats!r}")
    if not (0.5 <= scale <= 4):
        raise ValueError(f"scale must be in [0.5, 4]; got {scale!r}")
    from bokeh.embed import file_html
    from bokeh.models import Plot
    from bokeh.resources import INLINE

    pages = {}
    for fmt in formats:  # one page per format: SVG needs the plots on the SVG backend
        model = figure_model(obj, width, height)
        for plot in model.select({"type": Plot}):
            plot.output_backend = "svg" if fmt == "svg" else "canvas"
        pages[fmt] = file_html(model, resources=INLINE, title="figure",
                               template=_FIGURE_TEMPLATE, suppress_callback_warning=True,
                               _always_new=True)
    return pages


def _in_thread(fn, *args):
    """`fn(*args)` in a new thread (no event loop there), its result here."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(fn, *args).result()


_FIGURE_TEMPLATE = """\
{% block preamble %}
<style>html, body { margin: 0; padding: 0; background: white; }</style>
{% endblock %}
"""


def _draw(figures: list, width: int, height: int, scale: float, timeout_s: float) -> list:
    """Chromium's side of :func:`figure_files`: for each figure, format -> page HTML
    in, format -> bytes out (one browser for all)."""
    if not os.path.exists(CHROMIUM):
        raise RuntimeError(f"exporting figures needs Chromium: none at {CHROMIUM} "
                           "(install it, or set EXPLORER_CHROMIUM to its path)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        raise RuntimeError("exporting figures needs Playwright: pip install playwright") \
            from None
    out = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=_CHROMIUM_ARGS,
                                    headless=True)
        try:
            for pages in figures:
                out.append(_draw_one(browser, pages, width, height, scale, timeout_s))
        finally:
            browser.close()
    return out


def _draw_one(browser, pages: dict, width: int, height: int, scale: float,
              timeout_s: float) -> dict:
    """One figure's pages drawn by `browser`: format -> file content."""
    out = {}
    for fmt, html in pages.items():
        context = browser.new_context(viewport={"width": width + 40, "height": height + 40},
                                      device_scale_factor=scale if fmt == "png" else 1)
        try:
            # Offline: the page is whole; nothing it asks for leaves this process.
            context.route("**/*", lambda route: route.abort()
                          if route.request.url.startswith(("http:", "https:"))
                          else route.continue_())
            page = context.new_page()
            page.set_content(html)
            page.wait_for_function(_IDLE_JS, timeout=timeout_s * 1000)
            layout = page.evaluate(_PLOTS_JS, fmt == "svg")
            if fmt == "png":
                clip = {"x": 0, "y": 0, "width": layout["width"], "height": layout["height"]}
                out[fmt] = page.screenshot(clip=clip, type="png")
            else:
                out[fmt] = _combine_svgs(layout).encode()
        finally:
            context.close()
    return out


def _combine_svgs(layout: dict) -> str:
    """One SVG of a page's plots: each plot's own SVG, nested at its place."""
    plots = layout["plots"]
    if len(plots) == 1:
        return plots[0][4]
    w, h = math.ceil(layout["width"]), math.ceil(layout["height"])
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
             f'viewBox="0 0 {w} {h}">']
    for x, y, _, _, text in plots:
        start = text.index("<svg") + len("<svg")
        parts.append(f'{text[:start]} x="{x:g}" y="{y:g}"{text[start:]}')
    parts.append("</svg>")
    return "".join(parts)


def figure_zip(figures, *, width: int = 1280, height: int = 720, scale: float = 2.0,
               formats=FIGURE_FORMATS) -> bytes:
    """A numbered set of figures in one ZIP (``01-the-data.png``, ``01-the-data.svg``,
    ``02-…``), e.g. the guided tour's steps in order.

    Parameters
    ----------
    figures : sequence of (str, object)
        Title and figure (see :func:`figure_files`), in order; a None figure (a step
        with nothing to draw) is left out, its number kept.
    """
    width, height = _check_size(width, height)
    stems, pages = [], []
    for i, (title, obj) in enumerate(figures, start=1):
        if obj is not None:
            stems.append(f"{i:02d}-{_slug(title)}")
            pages.append(_pages(obj, width, height, formats, scale))
    if not pages:
        raise ValueError("nothing to export: no figure has anything to draw")
    drawn = _in_thread(_draw, pages, width, height, scale, 60.0)
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for stem, files in zip(stems, drawn, strict=True):
            for fmt, content in files.items():
                archive.writestr(f"{stem}.{fmt}", content)
    return out.getvalue()


def _slug(text: str) -> str:
    """A file-name stem of `text`: lower-case letters, digits and single hyphens."""
    kept = "".join(c.lower() if c.isalnum() and c.isascii() else "-" for c in str(text))
    return "-".join(filter(None, kept.split("-"))) or "figure"
