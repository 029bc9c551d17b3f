"""App speed: first render, each page's load and the pill-to-panel time in a real browser, and first
render and an offline turn rendered with Streamlit's AppTest.

    .venv/bin/python benchmarks/app_speed.py [--runs 5] [--old /tmp/wb-old] [--browser] [--no-apptest] [--no-fresh]

`--browser` drives Debian's chromium (playwright) against `streamlit run app.py` on loopback, as a user
does: the first render of a new session (the corpus and index already loaded by the server), the
pill-to-panel time (a click on a citation pill until the side panel is drawn and the run is over), and
each page's load from the navigation (until its title is drawn and the run is over), all with three
answered turns in the chat. Each is printed as a median beside a named anchor timed in the same run,
alternating with it: **a bare Streamlit app** (a title, a line of text and a button) served the same
way, its first render for the first render and the page loads, its button's rerun for the click.

AppTest runs the real script (sidebar, session, render) in-process without a browser, so the
figures are server-side render times. "first render" clears Streamlit's resource cache each run,
so it loads the corpus and its retriever index from the on-disk cache (as a freshly started app does
after the first ever start); "first render, no index" uses an empty WORKBENCH_HOME once.
"first render in a fresh process" is what a just-started server pays: a new Python process with
streamlit imported (the server has it) runs the app once with the index on disk, so every import
the app's modules make (workbench, the retriever's libraries) is inside the timing. With `--old`
an older source tree (e.g. `git archive main | tar -x -C /tmp/wb-old`) is measured the same way,
the two trees alternating run by run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
QUESTIONS = ["How do I configure SSO?", "Which articles do you have?", "How do I rotate an API key?",
             "Why was my payment declined?", "How do I bake a sourdough loaf?"]


_FRESH = """
import sys, time
from streamlit.testing.v1 import AppTest
t = time.perf_counter()
at = AppTest.from_file(sys.argv[1], default_timeout=120).run()
assert not at.exception, at.exception
print(time.perf_counter() - t)
"""


def fresh_process_renders(trees: dict[str, Path], runs: int) -> None:
    """First render in a new process per run, index on disk (built by an unmeasured first run)."""
    times: dict[str, list[float]] = {name: [] for name in trees}
    homes = {name: tempfile.mkdtemp(prefix=f"wb-app-fresh-{name}-") for name in trees}

    def once(name: str) -> float:
        env = {**os.environ, "WORKBENCH_HOME": homes[name], "WORKBENCH_DB": str(Path(homes[name]) / "t.duckdb")}
        out = subprocess.run([sys.executable, "-c", _FRESH, str(trees[name] / "app.py")], cwd=trees[name], env=env,
                             capture_output=True, text=True, check=True)
        return float(out.stdout.strip().splitlines()[-1])

    for name in trees:
        once(name)  # builds the index
    for _ in range(runs):
        for name in trees:
            times[name].append(once(name))
    for name, xs in times.items():
        print(f"first render in a fresh process [{name}]: median {statistics.median(xs) * 1000:.0f} ms "
              f"over {len(xs)} runs (min {min(xs) * 1000:.0f}, max {max(xs) * 1000:.0f} ms)")


# --- in a real browser ------------------------------------------------------------------------

CHROMIUM = "/usr/bin/chromium"
ANCHOR_APP = """import streamlit as st
st.title("Anchor")
st.write("A bare Streamlit app: the anchor the workbench's pages are compared with.")
st.button("Rerun", key="anchor")
"""
PAGES = {"Compare": "Compare configurations", "Trace_explorer": "Trace explorer", "Doc_gaps": "Doc-gap queue",
         "Document_usage": "Document usage"}
BUSY = "!document.querySelector('[data-testid=stStatusWidget]')"


def _serve(script: Path, env: dict[str, str], *flags: str):
    import socket
    import urllib.request

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "streamlit", "run", str(script), "--server.headless", "true",
                             "--server.port", str(port), "--server.address", "127.0.0.1",
                             "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none", *flags],
                            cwd=script.parent, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if urllib.request.urlopen(f"{url}/_stcore/health", timeout=1).read() == b"ok":
                return proc, url
        except OSError:
            time.sleep(0.2)
    proc.terminate()
    raise SystemExit(f"streamlit did not start for {script}")


def _timed(page, action, ready: str) -> float:
    """Seconds from `action()` until the selector `ready` is visible and the script run is over."""
    t = time.perf_counter()
    action()
    page.locator(ready).first.wait_for(timeout=120_000)
    page.wait_for_function(BUSY, timeout=120_000, polling=20)
    return time.perf_counter() - t


def browser_speed(runs: int) -> None:
    from playwright.sync_api import sync_playwright

    home = Path(tempfile.mkdtemp(prefix="wb-app-browser-"))
    env = {**os.environ, "WORKBENCH_HOME": str(home), "WORKBENCH_DB": str(home / "traces.duckdb")}
    anchor_script = home / "anchor_app.py"
    anchor_script.write_text(ANCHOR_APP)
    app, app_url = _serve(ROOT / "app.py", env)
    anchor, anchor_url = _serve(anchor_script, env)
    times: dict[str, list[float]] = {}
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            cold = _timed(page, lambda: page.goto(app_url), "[data-testid=stChatInputTextArea]")
            for q in QUESTIONS[:3]:  # three answered turns, as in a demo
                box = page.get_by_test_id("stChatInputTextArea")
                box.fill(q)
                n = page.get_by_test_id("stChatMessage").count()
                _timed(page, lambda: box.press("Enter"), f"[data-testid=stChatMessage] >> nth={n + 1}")
            chat_url = page.url
            other = browser.new_page(viewport={"width": 1400, "height": 1000})
            for _ in range(runs):
                times.setdefault("anchor: first render", []).append(
                    _timed(other, lambda: other.goto(anchor_url), "h1:has-text('Anchor')"))
                times.setdefault("anchor: button rerun", []).append(
                    _timed(other, lambda: other.get_by_role("button", name="Rerun").click(), "h1:has-text('Anchor')"))
                times.setdefault("first render (new session)", []).append(
                    _timed(other, lambda: other.goto(app_url), "[data-testid=stChatInputTextArea]"))
                pill = page.locator("[class*='st-key-citations-'] button").first
                times.setdefault("pill to panel", []).append(_timed(page, pill.click, ".st-key-doc-panel"))
                page.locator(".st-key-close-doc button").first.click()
                page.locator(".st-key-doc-panel").wait_for(state="detached", timeout=120_000)
                page.wait_for_function(BUSY, timeout=120_000)
                for path, title in PAGES.items():
                    link = page.get_by_test_id("stSidebarNav").locator(f"a[href$='/{path}']")
                    times.setdefault(f"page load: {path}", []).append(
                        _timed(page, link.click, f"[data-testid=stMain] h1:has-text('{title}')"))
                link = page.get_by_test_id("stSidebarNav").get_by_role("link").first
                times.setdefault("page load: Chat (3 turns)", []).append(
                    _timed(page, link.click, "[class*='st-key-citations-'] button"))
            assert page.url.rstrip("/") == chat_url.rstrip("/")
            browser.close()
    finally:
        app.terminate()
        anchor.terminate()
    print(f"first render, corpus not yet loaded by the server (once): {cold * 1000:.0f} ms")
    anchors = {"first render": "anchor: first render", "page load": "anchor: first render",
               "pill": "anchor: button rerun"}
    for name, xs in times.items():
        med = statistics.median(xs)
        base = next((v for k, v in anchors.items() if name.startswith(k)), None)
        ratio = f" = {med / statistics.median(times[base]):.1f}x {base}" if base else ""
        print(f"{name:<32} median {med * 1000:6.0f} ms over {len(xs)} (min {min(xs) * 1000:.0f}, "
              f"max {max(xs) * 1000:.0f}){ratio}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--old", type=Path, help="an older source tree to measure beside this one (fresh-process renders)")
    ap.add_argument("--browser", action="store_true", help="also measure in chromium: first render, page loads, "
                                                           "pill to panel, beside a bare Streamlit app")
    ap.add_argument("--no-apptest", action="store_true", help="only the browser measurements")
    ap.add_argument("--no-fresh", action="store_true", help="skip the fresh-process first renders")
    args = ap.parse_args()
    print(f"load average before: {os.getloadavg()}", flush=True)
    if args.browser:
        browser_speed(args.runs)
        print(f"load average after the browser runs: {os.getloadavg()}", flush=True)
    if args.no_apptest:
        return
    if not args.no_fresh:
        fresh_process_renders({"new": ROOT} | ({"old": args.old.resolve()} if args.old else {}), args.runs)
    home = tempfile.mkdtemp(prefix="wb-app-speed-")
    os.environ["WORKBENCH_HOME"] = home
    os.environ["WORKBENCH_DB"] = str(Path(home) / "traces.duckdb")
    sys.path.insert(0, str(ROOT))
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    app = str(ROOT / "app.py")

    def first_render() -> tuple[float, AppTest]:
        st.cache_resource.clear()
        st.cache_data.clear()
        t = time.perf_counter()
        at = AppTest.from_file(app, default_timeout=120).run()
        elapsed = time.perf_counter() - t
        assert not at.exception, at.exception
        return elapsed, at

    cold, _ = first_render()
    firsts = [first_render()[0] for _ in range(args.runs)]
    at = AppTest.from_file(app, default_timeout=120).run()
    turns = []
    for i in range(args.runs):
        for q in QUESTIONS:
            t = time.perf_counter()
            at.chat_input[0].set_value(q).run()
            turns.append(time.perf_counter() - t)
            assert not at.exception, at.exception
        at.session_state["turns"] = []  # time one turn on an empty chat, not a growing history
    for q in QUESTIONS[:3]:  # a click's server side: the whole chat redrawn, three turns in it
        at.chat_input[0].set_value(q).run()
    at.run()
    reruns = []
    for _ in range(args.runs * 3):
        t = time.perf_counter()
        at.run()
        reruns.append(time.perf_counter() - t)
    print(f"first render, no index on disk: {cold * 1000:.0f} ms (1 run)")
    print(f"first render (index on disk):   median {statistics.median(firsts) * 1000:.0f} ms "
          f"over {len(firsts)} runs (max {max(firsts) * 1000:.0f} ms)")
    print(f"offline turn rendered:          median {statistics.median(turns) * 1000:.0f} ms "
          f"over {len(turns)} turns (max {max(turns) * 1000:.0f} ms)")
    print(f"chat rerun, three turns (a click): median {statistics.median(reruns) * 1000:.0f} ms "
          f"over {len(reruns)} (max {max(reruns) * 1000:.0f} ms)")
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
