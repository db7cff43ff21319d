"""Shared test set-up: GPU tests skipped without a device, seeded fresh randomness, and
one served app for every browser test of the session (its log checked at the end).

Every run draws new random data (a per-run entropy mixed with the test's id), so the
suite explores new inputs each time yet any failure can be replayed: the entropy is
printed in the header and in the report of a failing test that used ``rng``;
``EXPLORER_TEST_SEED=<entropy> pytest ...`` replays it.
"""

from __future__ import annotations

import os
import secrets
import zlib
from pathlib import Path

import numpy as np
import pytest
from hypothesis import settings

from explorer._backend import gpu_status
from tests._server import CHROMIUM, CHROMIUM_ARGS, Server

RUN_ENTROPY = int(os.environ.get("EXPLORER_TEST_SEED") or secrets.randbits(32))

# Builders are numpy-heavy: a deadline would only flag a slow first call.
settings.register_profile("explorer", deadline=None, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "explorer"))


def pytest_report_header(config):
    ok, why = gpu_status()
    return [
        f"explorer: EXPLORER_TEST_SEED={RUN_ENTROPY} replays this run's random data",
        f"explorer: GPU {'available' if ok else 'not available'}: {why}",
    ]


def pytest_collection_modifyitems(config, items):
    ok, why = gpu_status()
    if ok:
        return
    skip = pytest.mark.skip(reason=f"no CUDA device: {why}")
    for item in items:
        if item.get_closest_marker("gpu") is not None:  # the marker, not any "gpu" in a name
            item.add_marker(skip)


@pytest.fixture
def rng(request):
    """A fresh ``numpy.random.Generator`` for this test (see the module docstring)."""
    seq = np.random.SeedSequence([RUN_ENTROPY, zlib.crc32(request.node.nodeid.encode())])
    return np.random.default_rng(seq)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.failed and "rng" in getattr(item, "fixturenames", ()):
        report.sections.append(
            ("random data", f"replay with EXPLORER_TEST_SEED={RUN_ENTROPY} pytest '{item.nodeid}'")
        )


@pytest.fixture
def poisoned():
    """Every new CuPy allocation is filled with 0xFF bytes while the test runs.

    An output element a kernel forgets to write then reads as NaN (float32) or -1
    (int32) instead of a lucky zero. Every malloc is poisoned, so the default pool's
    reused blocks are too; a pool per test would hold earlier tests' memory until
    collected (the 2**31-nonzero test then runs out).
    """
    import cupy

    pool = cupy.get_default_memory_pool()

    def malloc(size):
        mem = pool.malloc(size)
        if size:
            mem.memset_async(0xFF, size)
        return mem

    cupy.cuda.set_allocator(malloc)
    try:
        yield
    finally:
        cupy.cuda.set_allocator(cupy.get_default_memory_pool().malloc)


# --------------------------------------------------------------- the served app



@pytest.fixture(scope="session")
def panel_server(tmp_path_factory):
    """``panel serve app.py`` on a free localhost port for the whole session
    (:class:`tests._server.Server`); yields its URL. When the session ends the server's
    log must hold no traceback and no message of the app's error handler: a failure of
    any browser test's server side fails the suite, whichever test caused it."""
    server = Server(tmp_path_factory.mktemp("server") / "panel.log")
    try:
        server.__enter__()
    except RuntimeError as exc:
        pytest.fail(str(exc))
    try:
        yield server.url
    finally:
        server.stop()
    server.check_log()


@pytest.fixture(scope="module")
def browser():
    """Headless Chromium (the system's, or ``EXPLORER_CHROMIUM``) for the browser tests."""
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        pytest.fail(f"Chromium not found at {CHROMIUM} (CI installs Debian's chromium)")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield b
        b.close()


@pytest.fixture(scope="module")
def one_worker():
    """A client of a one-worker, one-thread LocalCluster in this process (the Dask tests
    that need a single worker: the worker-resident loops run there with LocalComm)."""
    distributed = pytest.importorskip("distributed")
    cluster = distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                                       dashboard_address=":0")
    with distributed.Client(cluster) as c:
        yield c
    cluster.close()


def pytest_configure(config):
    # A mark of scikit-learn's test_spectral.py (tests/test_sklearn_suite.py runs it).
    config.addinivalue_line("markers", "no_check_spmatrix: scikit-learn's mark, unused here")


def pytest_terminal_summary(terminalreporter):
    """How many of scikit-learn's own SpectralClustering tests pass on ours, when
    tests/test_sklearn_suite.py ran: passed and xpassed pass; xfailed and failed do not."""
    outcomes = {}
    for outcome in ("passed", "xpassed", "failed", "xfailed", "error", "skipped"):
        for report in terminalreporter.stats.get(outcome, ()):
            nodeid = getattr(report, "nodeid", "")
            if "test_sklearn_suite.py::" in nodeid and "::test_the_suite_is" not in nodeid:
                outcomes.setdefault(nodeid, outcome)
    if outcomes:
        counts = {o: list(outcomes.values()).count(o) for o in set(outcomes.values())}
        passing = counts.get("passed", 0) + counts.get("xpassed", 0)
        detail = ", ".join(f"{v} {k}" for k, v in sorted(counts.items()))
        import sklearn

        terminalreporter.write_line(
            f"scikit-learn {sklearn.__version__}'s test_spectral.py on explorer: {passing} of "
            f"{len(outcomes)} "
            f"pass ({detail})"
        )
