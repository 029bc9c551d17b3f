"""App speed: first render and an offline turn rendered, measured with Streamlit's AppTest.

    .venv/bin/python benchmarks/app_speed.py [--runs 5]

AppTest runs the real script (sidebar, session, render) in-process without a browser, so the
figures are server-side render times. "first render" clears Streamlit's resource cache each run,
so it loads the corpus and its retriever index from the on-disk cache (as a freshly started app does
after the first ever start); "first render, no index" uses an empty WORKBENCH_HOME once.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
QUESTIONS = ["How do I configure SSO?", "Which articles do you have?", "How do I rotate an API key?",
             "Why was my payment declined?", "How do I bake a sourdough loaf?"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
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
    print(f"first render, no index on disk: {cold * 1000:.0f} ms (1 run)")
    print(f"first render (index on disk):   median {statistics.median(firsts) * 1000:.0f} ms "
          f"over {len(firsts)} runs (max {max(firsts) * 1000:.0f} ms)")
    print(f"offline turn rendered:          median {statistics.median(turns) * 1000:.0f} ms "
          f"over {len(turns)} turns (max {max(turns) * 1000:.0f} ms)")


if __name__ == "__main__":
    main()
