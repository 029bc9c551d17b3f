"""App speed: first render and an offline turn rendered, measured with Streamlit's AppTest.

    .venv/bin/python benchmarks/app_speed.py [--runs 5] [--old /tmp/wb-old]

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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--old", type=Path, help="an older source tree to measure beside this one (fresh-process renders)")
    args = ap.parse_args()
    print(f"load average before: {os.getloadavg()}", flush=True)
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
    print(f"first render, no index on disk: {cold * 1000:.0f} ms (1 run)")
    print(f"first render (index on disk):   median {statistics.median(firsts) * 1000:.0f} ms "
          f"over {len(firsts)} runs (max {max(firsts) * 1000:.0f} ms)")
    print(f"offline turn rendered:          median {statistics.median(turns) * 1000:.0f} ms "
          f"over {len(turns)} turns (max {max(turns) * 1000:.0f} ms)")
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
