"""Screenshots of the served app for the docs, taken in a real browser.

    python docs/screenshots.py            # writes docs/app-2k.png and docs/app-100k.png

Starts ``panel serve app.py`` on a free localhost port (``tests/_server.py``), opens
it in headless Chromium (``/usr/bin/chromium`` or ``EXPLORER_CHROMIUM``) through
Playwright, and for each size: picks the data set, moves the n slider to the size,
presses Run, waits for the scores, and photographs the page (sidebar, live statistics
and the Clusters tab). Fails, naming the step, if the page does not get there or the
server logs a traceback.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests._server import CHROMIUM, CHROMIUM_ARGS, Server  # noqa: E402

#: (file name, data set, n) of each screenshot.
SHOTS = [("app-2k.png", "moons", 2_000), ("app-100k.png", "moons", 100_000)]
VIEWPORT = {"width": 1500, "height": 1100}
STEP_TIMEOUT_MS = 120_000
RUN_TIMEOUT_MS = 900_000  # a run on 100,000 points takes minutes on a 2-core machine
SCORES = re.compile(r"Spectral: ARI \d")
BUSY = re.compile(r"^(Drawing|Loading|Running)\b")


def _summary(page, dataset: str) -> str:
    """The data summary line ("moons: n = 2,000, d = 2, ...")."""
    return page.get_by_text(re.compile(rf"{dataset}: n = [\d,]+")).first.inner_text()


def _shown_n(page, dataset: str) -> int:
    return int(re.search(r"n = ([\d,]+)", _summary(page, dataset)).group(1).replace(",", ""))


def set_size(page, dataset: str, n: int) -> None:
    """Choose `dataset` and move the n slider (keyboard, as a user can) until the data
    summary says n points."""
    page.locator("select", has=page.locator("option", has_text=dataset)).select_option(dataset)
    page.get_by_text(re.compile(rf"{dataset}: n = [\d,]+")).first.wait_for()
    handle = page.locator(".n-slider .noUi-handle")
    for _ in range(30):
        shown = _shown_n(page, dataset)
        if shown == n:
            return
        handle.focus()
        page.keyboard.press("ArrowRight" if shown < n else "ArrowLeft")
        deadline = time.monotonic() + STEP_TIMEOUT_MS / 1000
        while _shown_n(page, dataset) == shown:  # the new data set arrived
            if time.monotonic() > deadline:
                raise RuntimeError(f"the data summary stayed at n = {shown:,}")
            page.wait_for_timeout(200)
    raise RuntimeError(f"the n slider never reached {n:,} (at {_shown_n(page, dataset):,})")


def run_and_wait(page) -> None:
    page.get_by_role("button", name="Run", exact=True).click()
    page.get_by_text(SCORES).first.wait_for(timeout=RUN_TIMEOUT_MS)
    page.get_by_role("button", name="Run", exact=True).wait_for()
    wait_drawn(page)


def wait_drawn(page, settle_ms: int = 3000) -> None:
    """The views of a run are drawn after its scores appear: wait for the status line
    to stop saying so, then `settle_ms` for the canvases."""
    deadline = time.monotonic() + STEP_TIMEOUT_MS / 1000
    while page.get_by_text(BUSY).count():
        if time.monotonic() > deadline:
            raise RuntimeError("the page kept saying it was drawing the run")
        page.wait_for_timeout(250)
    page.wait_for_timeout(settle_ms)


def out_folder(doc: str, argv=None) -> Path:
    """The ``--out`` folder of a screenshot script (default docs/), created."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "docs",
                        help="folder for the PNG files (default: docs/)")
    out = parser.parse_args(argv).out
    out.mkdir(parents=True, exist_ok=True)
    return out


@contextmanager
def served_browser(out: Path):
    """``(server, browser)``: the app served on a free port and headless Chromium; on
    leaving, the browser closed and the server's log checked for tracebacks, then
    removed. SystemExit(2) when Chromium is missing."""
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        print(f"error: Chromium not found at {CHROMIUM} (set EXPLORER_CHROMIUM)", file=sys.stderr)
        raise SystemExit(2)
    log = out / ".screenshots-server.log"
    with Server(log) as server, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            yield server, browser
        finally:
            browser.close()
    server.check_log()
    log.unlink()


def main(argv=None) -> int:
    out = out_folder(__doc__, argv)
    with served_browser(out) as (server, browser):
        for name, dataset, n in SHOTS:
            page = browser.new_page(viewport=VIEWPORT)
            page.set_default_timeout(STEP_TIMEOUT_MS)
            page.goto(server.url)
            page.locator(".stats-table table").wait_for()
            set_size(page, dataset, n)
            run_and_wait(page)
            # The sidebar from its top (clicking Run scrolled it), no hover tooltip.
            page.evaluate("for (const e of document.querySelectorAll('*'))"
                          " if (e.scrollTop) e.scrollTop = 0; window.scrollTo(0, 0)")
            page.mouse.move(0, VIEWPORT["height"] - 1)
            page.wait_for_timeout(500)
            page.screenshot(path=str(out / name))
            print(f"{out / name}: {dataset}, n = {n:,}")
            page.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
