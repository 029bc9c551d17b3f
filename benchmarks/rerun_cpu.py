"""The app server's CPU per rerun, with and without Streamlit's forced garbage collection after each script run.

    .venv/bin/python benchmarks/rerun_cpu.py [--runs 15]

Streamlit runs `gc.collect(2)` after every script run unless `runner.postScriptGC` is false (`.streamlit/config.toml`
sets it false). Two `streamlit run app.py` servers, `--runner.postScriptGC true` and `false`, each with a chat of
three answered turns in a real browser (Debian's chromium), then a citation pill clicked (the side panel opens: one
rerun) and the panel closed (another) `--runs` times, the two servers alternating; and **the anchor, a bare
Streamlit app** (a title, a line, a button) whose button is clicked twice, in the same loop. Each figure is the
server process's CPU (user + system, from /proc) over one open-and-close, median of `--runs`, in milliseconds; and
its resident memory before the first and after the last.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

from app_speed import ANCHOR_APP, BUSY, CHROMIUM, QUESTIONS, ROOT, _serve, _timed

TICK = os.sysconf("SC_CLK_TCK")


def cpu_ms(pid: int) -> float:
    """The process's user + system CPU so far, in milliseconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / TICK


def rss_mb(pid: int) -> float:
    """The process's resident memory now, in MB."""
    with open(f"/proc/{pid}/status") as f:
        return int(next(line for line in f if line.startswith("VmRSS:")).split()[1]) / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=15)
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    home = Path(tempfile.mkdtemp(prefix="wb-rerun-cpu-"))
    env = {**os.environ, "WORKBENCH_HOME": str(home), "WORKBENCH_DB": str(home / "traces.duckdb")}
    (home / "anchor_app.py").write_text(ANCHOR_APP)
    servers = {"anchor: bare app, two button reruns": _serve(home / "anchor_app.py", env),
               "app, postScriptGC true": _serve(ROOT / "app.py", env, "--runner.postScriptGC", "true"),
               "app, postScriptGC false": _serve(ROOT / "app.py", env, "--runner.postScriptGC", "false")}
    times: dict[str, list[float]] = {name: [] for name in servers}
    memory: dict[str, tuple[float, float]] = {}
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
            pages = {}
            for name, (_, url) in servers.items():
                page = pages[name] = browser.new_page(viewport={"width": 1400, "height": 1000})
                if name.startswith("anchor"):
                    _timed(page, lambda: page.goto(url), "h1:has-text('Anchor')")
                    continue
                _timed(page, lambda: page.goto(url), "[data-testid=stChatInputTextArea]")
                for q in QUESTIONS[:3]:  # three answered turns, as in a demo
                    box = page.get_by_test_id("stChatInputTextArea")
                    box.fill(q)
                    n = page.get_by_test_id("stChatMessage").count()
                    _timed(page, lambda: box.press("Enter"), f"[data-testid=stChatMessage] >> nth={n + 1}")
            start = {name: rss_mb(proc.pid) for name, (proc, _) in servers.items()}
            for _ in range(args.runs):
                for name, (proc, _) in servers.items():
                    page = pages[name]
                    before = cpu_ms(proc.pid)
                    if name.startswith("anchor"):
                        for _ in range(2):
                            _timed(page, lambda: page.get_by_role("button", name="Rerun").click(),
                                   "h1:has-text('Anchor')")
                    else:
                        _timed(page, page.locator("[class*='st-key-citations-'] button").first.click,
                               ".st-key-doc-panel")
                        page.locator(".st-key-close-doc button").first.click()
                        page.locator(".st-key-doc-panel").wait_for(state="detached", timeout=120_000)
                        page.wait_for_function(BUSY, timeout=120_000, polling=20)
                    times[name].append(cpu_ms(proc.pid) - before)
            memory = {name: (start[name], rss_mb(proc.pid)) for name, (proc, _) in servers.items()}
            browser.close()
    finally:
        for proc, _ in servers.values():
            proc.terminate()
    for name, xs in times.items():
        print(f"{name:<36} median {statistics.median(xs):6.0f} ms of server CPU over {len(xs)} runs "
              f"(min {min(xs):.0f}, max {max(xs):.0f}); resident memory {memory[name][0]:.0f} -> "
              f"{memory[name][1]:.0f} MB")


if __name__ == "__main__":
    sys.exit(main())
