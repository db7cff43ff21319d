"""The app's options for kNN graphs, feature scaling and the pipelines, in headless
Chromium (Playwright), on the session's ``panel serve app.py`` (tests/conftest.py's
``panel_server``, whose log must hold no traceback when the session ends).

One page, as a user goes: pick a kNN graph and see its statistics follow k, pick a
feature scaling, pick the representatives mode, run, and see the mode's reason and the
representatives drawn over the clusters.
"""

from __future__ import annotations

import io
import re

import numpy as np
import pytest

from tests.test_browser import SCORES, Page

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def page(panel_server, browser):
    p = Page(browser, panel_server)
    yield p
    p.page.close()


def _nnz(text: str) -> str:
    return re.search(r"nnz\s+([\d.,]+\s*[KMG]?)\n", text).group(1)


def _pixels(png: bytes) -> np.ndarray:
    from PIL import Image

    return np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).astype(np.int16)


def test_knn_graph_statistics_follow_k(page):
    page.page.get_by_role("button", name="kNN (union)", exact=True).click()
    text = page.wait_stats(r"graph\s+knn, k = 10\b")
    # the ε widgets give way to k
    assert page.page.locator(".threshold-slider").is_hidden()
    page.page.locator(".knn-slider").wait_for()
    page.wait_stats(r"connected components\s+\d")  # a kNN graph's come with it
    nnz = _nnz(text)
    page.page.locator(".knn-slider .noUi-handle").focus()
    for _ in range(5):
        page.page.keyboard.press("ArrowRight")
    text = page.wait_stats(r"graph\s+knn, k = 15\b")
    text = page.wait_stats(r"nnz\s+(?!" + re.escape(nnz) + r"\n)[\d.,]+")
    assert re.search(r"knn, k = 15\b.*\nnnz\s+[\d.,]+\s*[KMG]?\n", text)
    how = page.page.locator(".stats-table .stats-how").inner_text()
    assert "kNN graph's statistics come from building it" in how
    assert page.errors == []


def test_scaling_then_representatives_run_shows_them_and_why(page):
    page.page.locator(".scale-select select").select_option("standard")
    page.page.get_by_text("Drawn, measured and clustered standard-scaled.").wait_for()
    page.page.locator(".mode-select select").select_option("representatives")
    page.page.get_by_text(re.compile(r"k-means picks m representatives")).wait_for()
    # The live card describes the graph the run builds: the representatives', and the
    # sidebar's sliders act on it.
    page.page.get_by_text(re.compile(r"k-means representatives a run clusters")).wait_for()
    page.page.get_by_role("button", name="ε-graph", exact=True).click()
    page.page.locator(".threshold-slider .noUi-handle").wait_for()
    before = _nnz(page.settled_stats())
    page.page.locator(".threshold-slider .noUi-handle").focus()
    page.page.keyboard.press("PageUp")
    page.wait_stats(r"nnz\s+(?!" + re.escape(before) + r"\n)[\d.,]+")
    assert "representatives" in page.page.locator(".stats-table .stats-how").inner_text()
    page.page.get_by_role("button", name="Run", exact=True).click()
    page.page.get_by_text(SCORES).wait_for()
    page.page.get_by_role("button", name="Run", exact=True).wait_for()  # re-armed
    page.page.get_by_text("mode='representatives' given").wait_for()
    page.page.get_by_text(re.compile(r"[\d,]+ representatives \(circles")).wait_for()
    page.page.get_by_text("Fitted on the standard-scaled features").wait_for()
    toggle = page.page.get_by_text("show the representatives / landmarks")
    toggle.wait_for()
    page.page.wait_for_timeout(2000)  # the plots draw on their canvas
    with_markers = _pixels(page.shot("representatives"))
    toggle.click()  # hide the overlay: the picture must change where the markers were
    page.page.wait_for_timeout(2000)
    without = _pixels(page.page.screenshot(full_page=False))
    changed = np.abs(with_markers - without).max(axis=2) > 60
    assert changed.sum() > 500, "hiding the representatives changed nothing on the page"
    assert page.errors == []
