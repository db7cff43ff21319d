"""Linked views and two runs compared in the served app (headless Chromium, Playwright).

Uses the session's served app (``panel_server`` in tests/conftest.py, whose log must
hold no traceback when the session ends) and tests/test_browser.py's page helper.
"""

from __future__ import annotations

import re

import pytest

from tests.test_browser import Page

pytestmark = pytest.mark.browser

SELECTED = re.compile(r"([\d,]+) of ([\d,]+) points selected")


@pytest.fixture
def page(panel_server, browser):
    """A fresh page (session) on the served app."""
    p = Page(browser, panel_server)
    yield p
    p.page.close()


def test_a_box_in_one_view_selects_in_the_others_then_two_runs_compare(page):
    page.run()
    page.tab("Linked views")
    canvases = page.page.locator(".linked-plot .bk-Canvas")
    canvases.nth(3).wait_for()
    page.page.wait_for_timeout(500)  # drawn
    # The eigenvector's view and k-means' (the embedding of the default kNN graph's two
    # components is two dots, each all of a cluster's points: dimmed or not, one dot).
    others = [canvases.nth(i).screenshot() for i in (2, 3)]
    box = canvases.nth(0).bounding_box()  # the data, by spectral cluster
    page.page.mouse.move(box["x"] + 0.15 * box["width"], box["y"] + 0.2 * box["height"])
    page.page.mouse.down()
    page.page.mouse.move(box["x"] + 0.45 * box["width"], box["y"] + 0.6 * box["height"],
                         steps=8)
    page.page.mouse.up()
    count = page.page.get_by_text(SELECTED)
    count.wait_for()
    chosen, n = (int(g.replace(",", "")) for g in SELECTED.search(count.inner_text()).groups())
    assert 0 < chosen < n
    for _ in range(40):  # both dim what is not selected, once redrawn
        after = [canvases.nth(i).screenshot() for i in (2, 3)]
        if all(a != b for a, b in zip(others, after, strict=True)):
            break
        page.page.wait_for_timeout(250)
    else:
        raise AssertionError("a box in the data view left the eigenvector or k-means "
                             "view unchanged")

    page.page.locator(".pin-run button").click()
    page.page.get_by_text("Run A pinned").wait_for()
    page.epsilon_graph()
    page.page.get_by_role("button", name="Run", exact=True).click()
    table = page.page.locator(".compare-text table")
    page.page.get_by_text("ARI A vs B").wait_for()
    text = table.inner_text()
    assert re.search(r"ARI A vs B\s+[01]\.\d{4}", text)
    assert re.search(r"affinity\s+A 'knn' → B 'epsilon'", text)
    assert not page.errors, page.errors
