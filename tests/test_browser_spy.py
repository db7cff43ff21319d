"""The spy plot's orders in the served app (headless Chromium, Playwright): the sparsity
tab's order buttons and row-order menu, and the tour's step of S in three orders.

Uses the session's served app (``panel_server`` in tests/conftest.py, whose log must
hold no traceback when the session ends) and tests/test_browser.py's page helper.
"""

from __future__ import annotations

import pytest

from tests.test_browser import Page

pytestmark = pytest.mark.browser


@pytest.fixture
def page(panel_server, browser):
    """A fresh page (session) on the served app."""
    p = Page(browser, panel_server)
    yield p
    p.page.close()


def _note(page: Page, text: str) -> None:
    """Wait until the sparsity tab's note about the order says `text`."""
    page.page.locator(".spy-note", has_text=text).wait_for()


def test_spy_orders_switch_and_the_tour_shows_the_three(page):
    page.run()
    page.tab("Sparsity")
    _note(page, "grouped by the run's clusters")  # the default: by cluster, auto
    buttons = page.page.locator(".spy-order")
    for mode, text in [("as loaded", "in the data's order"),
                       ("reordered", "before any clustering"),
                       ("by cluster", "grouped by the run's clusters")]:
        buttons.get_by_role("button", name=mode, exact=True).click()
        _note(page, text)
    page.page.locator(".spy-method select").select_option("rcm")
    _note(page, "rcm order (chosen in the menu)")  # "**rcm** order", rendered
    page.shot("sparsity-orders")  # kept with EXPLORER_SCREENSHOTS=<dir>

    page.tab("Guided tour")
    next_button = page.page.get_by_role("button", name="Next ▶")
    next_button.click()
    page.page.get_by_text("2 · The similarity graph").wait_for()
    next_button.click()
    page.page.get_by_text("3 · The matrix S, reordered").wait_for()
    page.page.get_by_text("Product traffic over its floor").wait_for()
    assert page.page.get_by_text("k independent eigenvectors of eigenvalue 0").count() == 1
    page.shot("teaching-blocks")
    next_button.click()
    page.page.get_by_text("4 · The Laplacian").wait_for()
    assert page.errors == []
