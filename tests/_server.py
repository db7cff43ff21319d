"""Start and stop ``panel serve app.py`` on a free localhost port, and read its log.

Shared by the browser tests and ``docs/screenshots.py``: one helper that starts the
served app the way a user does, waits until it answers, and on stop returns the log so
that callers can refuse any server-side traceback.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
START_TIMEOUT_S = 90

#: The browser the tests and the screenshot script drive: the system's Chromium.
CHROMIUM = os.environ.get("EXPLORER_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]

#: Tracebacks of a page closing mid-update: Tornado's, not the app's.
CLOSED_SOCKET = ("WebSocketClosedError", "StreamClosedError")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_tracebacks(log: str) -> list[str]:
    """The tracebacks in a server log, without closed-websocket noise."""
    blocks = re.split(r"(?=Traceback \(most recent call last\):)", log)[1:]
    return [b for b in blocks if not any(name in b for name in CLOSED_SOCKET)]


class Server:
    """``panel serve app.py`` on 127.0.0.1, its output in `log_path`.

    Parameters
    ----------
    log_path : pathlib.Path
        Where the server's output goes.
    env : dict, optional
        Extra environment variables for the server process.
    args : sequence of str, optional
        Extra options for ``panel serve`` (e.g. ``["--num-threads", "4"]``).
    start_timeout_s : float
        How long the server may take to answer its first page.

    Use as a context manager; :attr:`url` is the app's address once entered, and
    :meth:`log` the output so far.
    """

    def __init__(self, log_path: Path, env: dict | None = None, args=(),
                 start_timeout_s: float = START_TIMEOUT_S):
        self.log_path = Path(log_path)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/app"
        # No background kernel warm-up: the timed browser tests measure the app alone.
        self._env = {**os.environ, "PYTHONPATH": str(REPO), "EXPLORER_WARMUP": "0",
                     **(env or {})}
        self._args = list(args)
        self._start_timeout_s = start_timeout_s
        self._proc = None
        self._log = None

    def __enter__(self) -> Server:
        self._log = open(self.log_path, "w")
        cmd = [sys.executable, "-m", "panel", "serve", "app.py", "--port", str(self.port),
               "--address", "127.0.0.1", f"--allow-websocket-origin=127.0.0.1:{self.port}",
               *self._args]
        self._proc = subprocess.Popen(cmd, cwd=REPO, stdout=self._log, stderr=subprocess.STDOUT,
                                      env=self._env)
        deadline = time.monotonic() + self._start_timeout_s
        try:
            while True:
                if self._proc.poll() is not None:
                    raise RuntimeError(f"panel serve exited with {self._proc.returncode}:\n"
                                       f"{self.log()}")
                try:
                    # Each request builds a session: on a busy machine that can take
                    # more than a few seconds, and giving up early only piles up more.
                    wait = max(5.0, min(60.0, deadline - time.monotonic()))
                    with urllib.request.urlopen(self.url, timeout=wait) as resp:
                        if resp.status == 200:
                            return self
                except OSError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError("panel serve did not answer within "
                                       f"{self._start_timeout_s} s:"
                                       f"\n{self.log()}")
                time.sleep(0.3)
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc) -> None:
        self.stop()

    def stop(self) -> None:
        """Terminate the server (kill it after 10 s) and close its log."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(10)
        if self._log is not None and not self._log.closed:
            self._log.close()

    @property
    def pid(self) -> int | None:
        """The server process's id while it runs."""
        return None if self._proc is None else self._proc.pid

    def log(self) -> str:
        return self.log_path.read_text()

    def check_log(self) -> None:
        """Fail on any traceback of the app in the server's log (closed-websocket noise
        from Tornado when a page closes mid-update is not the app's)."""
        text = self.log()
        assert str(REPO / "explorer") not in text, text
        assert "unexpected error" not in text, text
        assert not server_tracebacks(text), text
