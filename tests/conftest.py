"""Shared test set-up: GPU tests skipped without a device, seeded fresh randomness, and
one served app for every browser test of the session (its log checked at the end).

Every run draws new random data (a per-run entropy mixed with the test's id), so the
suite explores new inputs each time yet any failure can be replayed: the entropy is
printed in the header and in the report of a failing test that used ``rng``;
``EXPLORER_TEST_SEED=<entropy> pytest ...`` replays it.
"""

from __future__ import annotations

import os
import re
import secrets
import socket
import subprocess
import sys
import time
import urllib.request
import zlib
from pathlib import Path

import numpy as np
import pytest
from hypothesis import settings

from explorer._backend import gpu_status

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


REPO = Path(__file__).resolve().parents[1]
SERVER_START_TIMEOUT_S = 90

#: Tracebacks of a page closing mid-update: Tornado's, not the app's.
_CLOSED_SOCKET = ("WebSocketClosedError", "StreamClosedError")


def server_tracebacks(log: str) -> list[str]:
    """The tracebacks in a server log, without closed-websocket noise."""
    blocks = re.split(r"(?=Traceback \(most recent call last\):)", log)[1:]
    return [b for b in blocks if not any(name in b for name in _CLOSED_SOCKET)]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def panel_server(tmp_path_factory):
    """``panel serve app.py`` on a free localhost port for the whole session; yields its
    URL. When the session ends the server's log must hold no traceback and no message
    of the app's error handler: a failure of any browser test's server side fails the
    suite, whichever test caused it."""
    port = _free_port()
    log_path = tmp_path_factory.mktemp("server") / "panel.log"
    log = open(log_path, "w")
    cmd = [sys.executable, "-m", "panel", "serve", "app.py", "--port", str(port),
           "--address", "127.0.0.1", f"--allow-websocket-origin=127.0.0.1:{port}"]
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/app"
    deadline = time.monotonic() + SERVER_START_TIMEOUT_S
    try:
        while True:
            if proc.poll() is not None:
                pytest.fail(f"panel serve exited with {proc.returncode}:\n{log_path.read_text()}")
            try:
                with urllib.request.urlopen(url, timeout=5) as resp:
                    if resp.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"panel serve did not answer within {SERVER_START_TIMEOUT_S} s:\n"
                            f"{log_path.read_text()}")
            time.sleep(0.3)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        log.close()
    server_log = log_path.read_text()
    # Tracebacks from the app's own code, the app's error handler, or any other.
    assert str(REPO / "explorer") not in server_log, server_log
    assert "unexpected error" not in server_log, server_log
    assert not server_tracebacks(server_log), server_log
