"""CPU of one Streamlit script run of the app: what every click, every page switch and every AppTest `run()` pays.

    .venv/bin/python benchmarks/app_rerun.py [--runs 30] [--turns 3] [--no-pages]

AppTest runs the real script in this process (sidebar, cached session, the trace database, rendering), so the
CPU time of this process across one `run()` is the server-side cost of one script run. The chat page is measured
with `--turns` answered turns of one conversation in it (offline provider, demo corpus, bm25, a trace database
in a temporary `WORKBENCH_HOME`), then each other page is loaded the same way (`switch_page` + `run()`); every
run is a rerun with nothing new asked. The anchor, timed in the same run alternating with the app: **a bare
Streamlit app** (a title, a line of text and a button) rerun the same way under AppTest. Medians of `--runs`.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ANCHOR_APP = """import streamlit as st
st.title("Anchor")
st.write("A bare Streamlit app: the anchor the workbench's reruns are compared with.")
st.button("Rerun", key="anchor")
"""
PAGES = ("pages/1_Compare.py", "pages/2_Trace_explorer.py", "pages/3_Doc_gaps.py", "pages/4_Document_usage.py",
         "pages/5_Experiments.py")
QUESTIONS = ("How do I configure SSO?", "And with SAML?", "How do I rotate an API key?", "Which articles do you have?")


def cpu_of(run) -> float:
    start = time.process_time()
    run()
    return time.process_time() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--turns", type=int, default=3)
    ap.add_argument("--no-pages", action="store_true", help="the chat page only (e.g. under a profiler)")
    args = ap.parse_args()
    home = Path(tempfile.mkdtemp(prefix="wb-app-rerun-"))
    os.environ["WORKBENCH_HOME"] = str(home)
    os.environ["WORKBENCH_DB"] = str(home / "traces.duckdb")
    from streamlit.testing.v1 import AppTest

    anchor_script = home / "anchor_app.py"
    anchor_script.write_text(ANCHOR_APP)
    anchor = AppTest.from_file(str(anchor_script), default_timeout=60).run()
    app = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120).run()
    for q in QUESTIONS[:args.turns]:
        app.chat_input[0].set_value(q).run()
        assert not app.exception, app.exception
    times: dict[str, list[float]] = {"anchor: bare app rerun": [], f"chat page rerun ({args.turns} turns)": []}
    for _ in range(args.runs):
        times["anchor: bare app rerun"].append(cpu_of(anchor.run))
        times[f"chat page rerun ({args.turns} turns)"].append(cpu_of(app.run))
    assert not app.exception, app.exception
    for page in () if args.no_pages else PAGES:
        app.switch_page(page).run()  # the first load of a page is not measured
        name = f"{Path(page).stem} page rerun"
        times[name] = []
        for _ in range(args.runs):
            times["anchor: bare app rerun"].append(cpu_of(anchor.run))
            times[name].append(cpu_of(app.run))
        assert not app.exception, (page, app.exception)
    load = os.getloadavg()[0]
    print(f"CPU per script run, medians over {args.runs} runs (load {load:.1f}):")
    for name, xs in times.items():
        print(f"  {name:32s} {statistics.median(xs) * 1000:7.1f} ms  (min {min(xs) * 1000:.1f}, "
              f"max {max(xs) * 1000:.1f})")


if __name__ == "__main__":
    main()
