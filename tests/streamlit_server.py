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
#: Debian's chromium, as every browser test and docs/screenshots.py launch it through playwright.
CHROMIUM = "/usr/bin/chromium"
LAUNCH_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
               "--no-first-run", "--disable-sync"]


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

#: How long after the reader's last input (a click, a key) a script run it asks for may still not be requested: a
#: widget asks for its rerun as it handles the event, so this bounds only an input that asks for none (an expander).
INPUT_GRACE_MS = 400

#: Installed in a page (`watch_runs`, or by `settle` in a page without it), records in `window.__wbRuns` when the
#: reader's last input was, when the page last asked the server for a script run (a BackMsg whose first field is
#: `rerun_script`, field 11: the byte 0x5a opens it) and when a run last ended (the app root's run state turned
#: `notRunning`), in `performance.now()` milliseconds.
WATCH = """(installedLate) => {
  if (window.__wbRuns) return;
  const runs = window.__wbRuns = {input: installedLate ? performance.now() : -1, send: -1, end: -1};
  for (const type of ['pointerdown', 'pointerup', 'click', 'keydown', 'keyup', 'input', 'change'])
    window.addEventListener(type, () => { runs.input = performance.now(); }, true);
  const send = WebSocket.prototype.send;
  WebSocket.prototype.send = function (data) {
    const bytes = data instanceof ArrayBuffer ? new Uint8Array(data, 0, Math.min(1, data.byteLength))
      : ArrayBuffer.isView(data) ? new Uint8Array(data.buffer, data.byteOffset, Math.min(1, data.byteLength)) : [];
    if (bytes[0] === 0x5a) runs.send = performance.now();
    return send.call(this, data);
  };
  new MutationObserver((records) => {
    for (const r of records) {
      const state = r.target.dataset.testScriptState;
      if (state === 'notRunning' && r.oldValue !== 'notRunning') runs.end = performance.now();
    }
  }).observe(document, {subtree: true, attributes: true, attributeOldValue: true,
                        attributeFilter: ['data-test-script-state']});
}"""

#: How long a run asked for may take to show itself running: a run that starts and ends between two of the page's
#: renders never changes the run state the watcher sees (a loaded machine delivers both messages at once), so a
#: request with no end after it counts only this long; a run that does show itself keeps `RUN_OVER` false.
SEND_GRACE_MS = 2000

#: Settled: the run is over (`RUN_OVER`), no run asked for is still to come (none requested since the last one
#: ended, or requested `SEND_GRACE_MS` ago), the reader's last input either came before that end or is
#: `INPUT_GRACE_MS` old with no run asked for, and
#: the chat's scroll position and height have not changed for `STILL_FRAMES` polls (one a frame) in a row: Streamlit's
#: stick-to-bottom scroll, which follows the chat as it grows, is over.
STILL_FRAMES = 5
SETTLED = f"""() => {{
  const r = window.__wbRuns;
  const now = performance.now();
  if (!({RUN_OVER}) || (r.send > r.end && now - r.send < {SEND_GRACE_MS})
      || (r.input > r.end && now - r.input < {INPUT_GRACE_MS})) {{
    r.still = 0;
    return false;
  }}
  const s = document.querySelector('[data-testid=stAppScrollToBottomContainer]') || document.scrollingElement;
  const at = s ? s.scrollTop + ':' + s.scrollHeight : '';
  r.still = at === r.at ? r.still + 1 : 0;
  r.at = at;
  return r.still >= {STILL_FRAMES};
}}"""


def watch_runs(page) -> None:
    """Install `WATCH` in `page` (a playwright Page or BrowserContext) for every document it loads from now on, so
    that `settle` knows which script runs were asked for; call it before the first `goto`."""
    page.add_init_script(f"({WATCH})(false)")


def settle(page, timeout: float = 60_000) -> None:
    """Wait until the page is settled (`SETTLED`): no fixed wait where the page is watched (`watch_runs`); in a page
    that is not, `WATCH` is installed now, with its last input taken as now (the run a click just asked for may
    have been requested before it was watching)."""
    page.evaluate(f"(late) => {{ ({WATCH})(late); window.__wbRuns.still = 0; }}", True)
    page.wait_for_function(SETTLED, timeout=timeout, polling="raf")


def ask(page, question: str, settle: Callable) -> object:
    """Type `question` into the chat page open in `page`; once its answer is drawn and `settle(page)` returned,
    the answer's chat message."""
    before = page.get_by_test_id("stChatMessage").count()
    box = page.get_by_test_id("stChatInputTextArea")
    box.fill(question)
    box.press("Enter")
    page.get_by_test_id("stChatMessage").nth(before + 1).wait_for()  # polled at a locator's pace, not every frame
    settle(page)
    return page.get_by_test_id("stChatMessage").last
