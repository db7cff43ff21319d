"""Screenshots of the linked views and of two runs compared, taken in a real browser.

    python docs/screenshots_linked.py     # writes docs/linked.png and docs/compare.png

Starts ``panel serve app.py`` on a free localhost port (``tests/_server.py``), opens
it in headless Chromium (``/usr/bin/chromium`` or ``EXPLORER_CHROMIUM``) through
Playwright, presses Run on the default data (moons), then:

- ``linked.png``: the Linked views tab after a box drawn over part of the data view
  (the same points picked out in the embedding, the eigenvector and k-means);
- ``compare.png``: the run pinned (A), the graph switched to the ε-graph, Run again
  (B), the Compare A/B tab.

Each PNG is the main area only, reduced to a 256-colour palette (well under 200 KB).
Fails, naming the step, if the page does not get there or the server logs a traceback.
"""

from __future__ import annotations

import io
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from screenshots import (  # noqa: E402
    STEP_TIMEOUT_MS,
    out_folder,
    run_and_wait,
    served_browser,
    wait_drawn,
)

VIEWPORT = {"width": 1500, "height": 1700}  # the Compare A/B tab's height
LINKED_HEIGHT = 1250
SELECTED = re.compile(r"[\d,]+ of [\d,]+ points selected")
COMPARED = re.compile(r"ARI A vs B")
MAX_BYTES = 200_000


def tab(page, name: str) -> None:
    page.locator(".bk-tab", has_text=name).first.click()


def box_select(page, plot: int = 0, box=(0.15, 0.2, 0.45, 0.6)) -> None:
    """Drag a box over the `plot`-th canvas of the Linked views tab (fractions of its
    width and height: left, top, right, bottom), as a mouse does with the box select
    tool that ``link_selections`` makes active."""
    canvas = page.locator(".linked-plot .bk-Canvas").nth(plot)
    canvas.wait_for()
    b = canvas.bounding_box()
    x0, y0 = b["x"] + box[0] * b["width"], b["y"] + box[1] * b["height"]
    x1, y1 = b["x"] + box[2] * b["width"], b["y"] + box[3] * b["height"]
    page.mouse.move(x0, y0)
    page.mouse.down()
    page.mouse.move(x1, y1, steps=10)
    page.mouse.up()


def small_png(png: bytes) -> bytes:
    """`png` as a 256-colour palette PNG (screenshots of plots keep their look)."""
    from PIL import Image

    image = Image.open(io.BytesIO(png)).convert("RGB")
    out = io.BytesIO()
    image.quantize(colors=256, method=Image.Quantize.MEDIANCUT).save(out, "PNG", optimize=True)
    return out.getvalue()


def shoot(page, path: Path) -> None:
    page.mouse.move(0, 1)  # no hover tooltip
    wait_drawn(page, settle_ms=4000)  # every view redrawn
    png = small_png(page.locator("#main").screenshot())
    if len(png) > MAX_BYTES:
        raise RuntimeError(f"{path.name}: {len(png):,} bytes, over {MAX_BYTES:,}")
    path.write_bytes(png)
    print(f"{path}: {len(png) // 1000} KB")


def main(argv=None) -> int:
    out = out_folder(__doc__, argv)
    with served_browser(out) as (server, browser):
        page = browser.new_page(viewport={**VIEWPORT, "height": LINKED_HEIGHT})
        page.set_default_timeout(STEP_TIMEOUT_MS)
        page.goto(server.url)
        page.locator(".stats-table table").wait_for()
        run_and_wait(page)
        tab(page, "Linked views")
        page.wait_for_timeout(2000)
        box_select(page)
        page.get_by_text(SELECTED).wait_for()
        shoot(page, out / "linked.png")
        page.set_viewport_size(VIEWPORT)

        page.locator(".pin-run button").click()
        page.get_by_text("Run A pinned").wait_for()
        page.get_by_role("button", name="ε-graph", exact=True).click()
        page.locator(".threshold-slider .noUi-handle").wait_for()
        page.wait_for_timeout(3000)  # the statistics of the ε-graph
        page.get_by_role("button", name="Run", exact=True).click()  # B
        page.get_by_text(COMPARED).first.wait_for()
        page.get_by_role("button", name="Run", exact=True).wait_for()
        shoot(page, out / "compare.png")
        page.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
