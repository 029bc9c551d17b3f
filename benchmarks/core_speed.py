"""Speed of the provenance core (issue #2). Prints medians; see benchmarks/README.md.

    .venv/bin/python benchmarks/core_speed.py

1. `sources_payload(record).to_json()` (the JSON a client gets) for a turn with 50 retrieved items and 20 citations (target ≤ 1 ms);
2. one offline turn on the demo corpus with the index already built, traces off (target ≤ 50 ms);
3. `python -m workbench ask` cold start with a cached index, as a fresh process (target ≤ 4 s).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from workbench.provenance import sources_payload  # noqa: E402
from workbench.types import ResultItem, ToolCall, TurnRecord  # noqa: E402


def median_ms(fn, n: int) -> float:
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


def synthetic_turn() -> TurnRecord:
    base = "https://help.example.com/articles/"
    items = [ResultItem(f"doc-{i:03d}", f"Title {i}", base + f"doc-{i:03d}") for i in range(50)]
    calls = (
        ToolCall("search", "snippet", {"query": "x"}, tuple(items[:25])),
        ToolCall("list_articles", "title", {}, tuple(items[25:])),
        ToolCall("fetch_document", "full", {"doc_id": "doc-000"}, (items[0],)),
    )
    links = [f"[t]({base}doc-{i:03d}/#s)" for i in range(0, 34, 2)] + [f"[bad]({base}doc-9{i}9)" for i in range(3)]
    answer = "Some prose. " + " and ".join(links) + "."
    return TurnRecord("q", answer, "agent", calls)


def main() -> int:
    env = {**os.environ, "WORKBENCH_HOME": os.environ.get("WORKBENCH_HOME") or tempfile.mkdtemp()}
    os.environ.update(env)
    rec = synthetic_turn()
    p = sources_payload(rec).to_json()
    assert len(p["sets"]["retrieved"]) == 50 and len(p["citations"]) == 20, (len(p["sets"]["retrieved"]), len(p["citations"]))
    prov = median_ms(lambda: sources_payload(rec).to_json(), 2000)
    print(f"provenance, 50 retrieved + 20 citations: median {prov:.3f} ms (target ≤ 1 ms)")

    from workbench.session import Session

    session = Session.open(trace=False)
    session.ask("How do I configure SSO?")  # builds or loads the index
    for q in ("How do I configure SSO?", "What articles do you have?"):
        t = median_ms(lambda: session.ask(q), 100)
        print(f"offline turn on demo corpus ({q!r}): median {t:.2f} ms (target ≤ 50 ms)")

    cmd = [sys.executable, "-m", "workbench", "ask", "How do I configure SSO?", "--no-trace"]
    subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, check=True)  # make sure the cache exists
    cold = []
    for _ in range(5):
        t = time.perf_counter()
        subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, check=True)
        cold.append(time.perf_counter() - t)
    print(f"`python -m workbench ask` cold start, cached index: median {statistics.median(cold):.2f} s (target ≤ 4 s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
