"""`streamlit run app.py` on a free loopback port for the browser tests (and docs/screenshots.py: nothing here
needs pytest), waited for by its health check, and asking the chat page a question in the browser."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator, NamedTuple

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Served(NamedTuple):
    url: str
    pid: int


@contextmanager
def streamlit_app(tmp: Path, env: dict[str, str], *args: str, port: int | None = None,
                  script: str = "app.py") -> Iterator[Served]:
    """The app served from `ROOT` (`streamlit run <script>`: `app.py`, or `serve.py`, the app behind the workbench's
    guard) with `env` added to this environment and `args` added to its command line; yields its URL and process id
    once `/_stcore/health` answers (its log: `tmp/streamlit.log`), stops it afterwards."""
    port = port or free_port()
    cmd = [sys.executable, "-m", "streamlit", "run", str(ROOT / script), "--server.headless", "true",
           "--server.port", str(port), "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false",
           "--server.fileWatcherType", "none", *args]
    log = open(tmp / "streamlit.log", "w")
    proc = subprocess.Popen(cmd, cwd=ROOT, env={**os.environ, **env}, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if urllib.request.urlopen(f"{url}/_stcore/health", timeout=1).read() == b"ok":
                break
        except OSError:
            time.sleep(0.2)  # polling a starting server: the condition is its health answer
    else:
        proc.terminate()
        log.close()
        raise RuntimeError(f"streamlit did not start: {(tmp / 'streamlit.log').read_text()[-2000:]}")
    try:
        yield Served(url, proc.pid)
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


#: True once a script run is over: Streamlit's own run state on the app root says `notRunning` (it reads `initial`
#: before a page's first run, so a reload is never taken for a finished run) and the status widget is gone.
RUN_OVER = ("document.querySelector('[data-testid=stApp]')?.dataset.testScriptState === 'notRunning'"
            " && !document.querySelector('[data-testid=stStatusWidget]')")


def settle(page, timeout: float = 60_000) -> None:
    """Wait until the script run is over (`RUN_OVER`); the short wait first lets a click's rerun begin."""
    page.wait_for_timeout(300)
    page.wait_for_function(RUN_OVER, timeout=timeout)


def ask(page, question: str, settle: Callable) -> object:
    """Type `question` into the chat page open in `page`; once its answer is drawn and `settle(page)` returned,
    the answer's chat message."""
    before = page.get_by_test_id("stChatMessage").count()
    box = page.get_by_test_id("stChatInputTextArea")
    box.fill(question)
    box.press("Enter")
    page.wait_for_function(f"document.querySelectorAll('[data-testid=stChatMessage]').length >= {before + 2}")
    settle(page)
    return page.get_by_test_id("stChatMessage").last
