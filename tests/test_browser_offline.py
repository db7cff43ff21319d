"""The served app works offline: no request of the page ever leaves 127.0.0.1.

A classroom or a GPU server without internet must get the whole page from the Panel
server. Chromium (Playwright) intercepts every request of the page (documents,
scripts, stylesheets, fonts, images, the websocket): one to any host but 127.0.0.1 /
localhost is recorded and aborted. The test drives what once asked a CDN for Panel's
``loading.css`` and ``markdown.css`` (changing the data set, n, the eigengap box),
then a run, every tab, the tour's steps and an upload, and asserts that nothing was
asked of another host and that no request failed.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

import numpy as np
import pytest

from tests._server import Server

pytestmark = pytest.mark.browser

STEP_TIMEOUT_MS = 90_000
LOCAL_HOSTS = {"127.0.0.1", "localhost", "[::1]", "::1"}
TABS = ["Eigenvectors", "Spectrum", "Sparsity", "Timings", "Guided tour", "Export", "Clusters"]


def is_local(url: str) -> bool:
    """True for a URL the page may ask for offline: this machine, or inline data."""
    parts = urlsplit(url)
    if parts.scheme in ("data", "blob", "about"):
        return True
    return parts.hostname in LOCAL_HOSTS


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with Server(tmp_path_factory.mktemp("offline") / "panel.log") as s:
        yield s
    s.check_log()


class OfflinePage:
    """A page whose requests to other hosts are recorded and aborted."""

    def __init__(self, browser, url: str):
        self.context = browser.new_context(viewport={"width": 1500, "height": 1100})
        self.foreign: list[str] = []
        self.failed: list[str] = []
        self.requests = 0
        self.context.route("**/*", self._route)
        self.page = self.context.new_page()
        self.page.set_default_timeout(STEP_TIMEOUT_MS)
        self.page.on("websocket", lambda ws: None if is_local(ws.url)
                     else self.foreign.append(ws.url))
        self.page.on("requestfailed", lambda r: self.failed.append(f"{r.url}: {r.failure}"))
        self.page.goto(url)
        self.page.locator(".stats-table table").wait_for()

    def _route(self, route) -> None:
        url = route.request.url
        self.requests += 1
        if is_local(url):
            route.continue_()
        else:
            self.foreign.append(url)
            route.abort("internetdisconnected")

    def summary(self, pattern: str):
        """Wait for the data summary to match `pattern` (a regex)."""
        self.page.get_by_text(re.compile(pattern)).first.wait_for()

    def settle(self, ms: int = 1500) -> None:
        """Give late requests (stylesheets of re-rendered views) time to be made."""
        self.page.wait_for_timeout(ms)

    def close(self) -> None:
        self.context.close()


def test_is_local():
    assert is_local("http://127.0.0.1:5006/static/extensions/panel/css/loading.css")
    assert is_local("ws://localhost:5006/app/ws") and is_local("data:image/png;base64,AA")
    assert not is_local("https://cdn.holoviz.org/panel/1.9.4/dist/css/markdown.css")
    assert not is_local("https://fonts.googleapis.com/css?family=Roboto")
    assert not is_local("http://127.0.0.1.example.com/x.css")


def test_no_request_leaves_this_machine(server, browser, tmp_path, rng):
    page = OfflinePage(browser, server.url)
    p = page.page
    try:
        page.settle()
        assert page.requests > 10  # the interception sees the page's requests
        # The data set, n and the eigengap box: what asked a CDN for loading.css and
        # markdown.css (issue 14).
        p.locator("select", has=p.locator("option", has_text="circles")).select_option("circles")
        page.summary(r"circles: n = [\d,]+")
        page.settle()
        before = p.get_by_text(re.compile(r"circles: n = [\d,]+")).first.inner_text()
        n_before = re.search(r"n = ([\d,]+)", before).group(1)
        p.locator(".n-slider .noUi-handle").focus()
        p.keyboard.press("ArrowLeft")
        page.summary(r"circles: n = (?!" + re.escape(n_before) + r"\b)[\d,]+")
        page.settle()
        box = p.get_by_role("checkbox", name="choose k by eigengap")
        box.check()
        page.settle()
        box.uncheck()
        page.settle()
        # A run, then every tab and the tour's steps (new plots, placeholders, badges).
        p.get_by_role("button", name="Run", exact=True).click()
        p.get_by_text(re.compile(r"Spectral: ARI \d")).first.wait_for()
        p.get_by_role("button", name="Run", exact=True).wait_for()
        page.settle()
        for tab in TABS:
            p.locator(".bk-tab", has_text=tab).first.click()
            page.settle(1000)
            if tab == "Guided tour":
                for _ in range(4):
                    p.get_by_role("button", name=re.compile("Next")).click()
                    page.settle(1000)
        # A parameter change after the run (stale results), and an upload with class names.
        p.get_by_role("button", name="ε-graph", exact=True).click()
        page.settle()
        p.locator(".threshold-slider .noUi-handle").focus()
        p.keyboard.press("PageUp")
        page.settle()
        path = tmp_path / "blobs.csv"
        y = np.repeat(np.array(["north", "south", "west"]), 100)
        X = np.repeat([[0.0, 3.0], [0.0, -3.0], [-3.0, 0.0]], 100, axis=0)
        X = X + rng.normal(scale=0.3, size=X.shape)
        path.write_text("x,y,region\n" + "".join(f"{a:.4f},{b:.4f},{c}\n"
                                                 for (a, b), c in zip(X, y, strict=True)))
        p.get_by_role("button", name="file", exact=True).click()
        p.locator(".upload input.filepond--browser").set_input_files(str(path))
        page.summary(r"blobs\.csv: n = 300")
        page.settle()
        p.get_by_role("button", name="built-in", exact=True).click()
        page.summary(r"circles: n = [\d,]+")
        page.settle()
        assert page.foreign == [], page.foreign
        assert page.failed == [], page.failed
    finally:
        page.close()
