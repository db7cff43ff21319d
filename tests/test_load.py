"""Ten sessions at once on one server: every one gets its results, none waits on another.

One ``panel serve app.py`` (the fixture of tests/test_browser.py) and one Chromium with
ten pages, each its own browser context and so its own session. Each session picks
1,000 points (a run of about 2 s on 2 cores), moves the threshold slider and sees its
statistics change; then nine sessions click Run together and, while they run, the
tenth moves its slider: its statistics must update within :data:`ANSWER_S` and before
the nine have finished. Finally the tenth runs too, and every session must show its
scores, no error alert and no console error.
"""

from __future__ import annotations

import re
import time

import pytest
from test_browser import SCORES, STEP_TIMEOUT_MS, browser, server  # noqa: F401  (fixtures)

pytestmark = [pytest.mark.browser, pytest.mark.slow]

SESSIONS = 10

#: Seconds within which a session's statistics must follow its slider while the other
#: nine run (alone it takes well under one second).
ANSWER_S = 6.0

NNZ = re.compile(r"nnz\s+([\d.,]+\s*[KMG]?)\n")


class Session:
    """A page in its own browser context, recording console errors and failed requests.

    The page starts loading at once; :meth:`ready` waits for it, so that ten sessions
    open in parallel.
    """

    def __init__(self, browser, url):  # noqa: F811
        self.context = browser.new_context(viewport={"width": 1400, "height": 1000})
        self.page = self.context.new_page()
        self.page.set_default_timeout(STEP_TIMEOUT_MS)
        self.errors: list[str] = []
        self.page.on("console", lambda m: m.type == "error" and self.errors.append(m.text))
        self.page.on("pageerror", lambda e: self.errors.append(f"page error: {e}"))
        self.page.on("requestfailed", lambda r: self.errors.append(f"request failed: {r.url}"))
        self.page.goto(url, wait_until="commit")

    def ready(self) -> None:
        self.page.locator(".stats-table table").wait_for()

    def stats_text(self) -> str:
        return self.page.locator(".stats-table table").inner_text()

    def wait_stats(self, pattern: str, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while not re.search(pattern, text := self.stats_text()):
            assert time.monotonic() < deadline, f"statistics never matched {pattern!r}: {text}"
            self.page.wait_for_timeout(100)


def _nnz(page: Session) -> str:
    return NNZ.search(page.stats_text()).group(1)


def _nudge_threshold(page: Session, key: str = "PageUp") -> None:
    page.page.locator(".threshold-slider .noUi-handle").focus()
    page.page.keyboard.press(key)


def _wait_nnz_change(page: Session, before: str, timeout_s: float) -> float:
    """Seconds until the statistics show an nnz other than `before`."""
    pattern = r"nnz\s+(?!" + re.escape(before) + r"\n)[\d.,]+"
    t0 = time.monotonic()
    page.wait_stats(pattern, timeout_s=timeout_s)
    return time.monotonic() - t0


def _small_data(page: Session) -> None:
    """1,000 points: the n slider's options are sorted, 1,000 is left of the default 2,000."""
    page.page.locator(".n-slider .noUi-handle").focus()
    page.page.keyboard.press("ArrowLeft")
    page.page.get_by_text(re.compile(r"moons: n = 1,000, d = 2")).wait_for()


def _running(page: Session) -> bool:
    return page.page.get_by_role("button", name="Running…").count() == 1


@pytest.mark.xfail(strict=False, reason=(
    "measured on 2 cores with runs on their own worker pool (explorer/ui/_jobs.py "
    "RUN_EXECUTOR): the tenth session's statistics still did not update within 60 s "
    "while nine sessions ran; the cause (GIL-bound solver loops or view updates holding "
    "the event loop) is not established -- see docs/robustness.md, 'Load'"))
def test_ten_sessions_run_at_once_and_stay_responsive(server, browser):  # noqa: F811
    t_start = time.monotonic()
    pages = [Session(browser, server) for _ in range(SESSIONS)]
    try:
        for page in pages:
            page.ready()
        for page in pages:
            _small_data(page)
        for page in pages:  # every session answers its own slider
            before = _nnz(page)
            _nudge_threshold(page)
            _wait_nnz_change(page, before, timeout_s=30)

        a, others = pages[0], pages[1:]
        for page in others:
            page.page.get_by_role("button", name="Run", exact=True).click()
        # The buttons turn to "Running…" when each session's click reaches the server.
        deadline = time.monotonic() + 15
        while not any(_running(p) for p in others) and time.monotonic() < deadline:
            others[0].page.wait_for_timeout(100)
        assert any(_running(p) for p in others), "no session showed a run in progress"
        before = _nnz(a)
        _nudge_threshold(a, "PageDown")
        seconds = _wait_nnz_change(a, before, timeout_s=60)
        still_running = sum(_running(p) for p in others)
        assert seconds < ANSWER_S, f"statistics took {seconds:.1f} s while 9 sessions ran"
        assert still_running > 0, (
            f"the statistics came after every other run had finished ({seconds:.1f} s): "
            "they waited on the other sessions' runs"
        )

        a.page.get_by_role("button", name="Run", exact=True).click()
        for page in pages:
            text = page.page.get_by_text(SCORES).inner_text()
            assert float(SCORES.search(text).group(1)) > 0.5, text
            page.page.get_by_role("button", name="Run", exact=True).wait_for()
        for i, page in enumerate(pages):
            alerts = page.page.locator(".alert-danger:visible")
            assert alerts.count() == 0, f"session {i}: {alerts.all_inner_texts()}"
            assert page.errors == [], f"session {i}: {page.errors}"
    finally:
        for page in pages:
            page.context.close()
    assert time.monotonic() - t_start < 150
