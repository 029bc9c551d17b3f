"""`workbench eval` throughput with the offline provider on the demo corpus.

    .venv/bin/python benchmarks/trace_eval.py [--repeat 10]

Runs the demo gold questions (data/demo_gold.jsonl) `--repeat` times as one batch through the same
code path as `workbench eval` (run_eval: buffered trace writes, one run), after the index is loaded,
and prints turns/s; the same asks without tracing show the store's share.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from workbench.questions import read_questions  # noqa: E402
from workbench.batch import run_eval  # noqa: E402
from workbench.config import PROJECT_ROOT  # noqa: E402
from workbench.session import Session  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    questions = [q.text for q in read_questions(PROJECT_ROOT / "data" / "demo_gold.jsonl")] * args.repeat
    db = Path(tempfile.mkdtemp()) / "eval.duckdb"
    session = Session.open(trace_db=db)
    session.toolbox
    run_eval(session, questions[:5], progress=False)  # create and migrate the database
    traced, plain = [], []
    for _ in range(args.rounds):
        r = run_eval(session, questions, progress=False, new_run=True)
        assert r.asked == len(questions) and r.failed == 0
        traced.append(r.asked / r.seconds)
        off = Session(session.corpus, trace=False)
        off._toolbox = session.toolbox
        t0 = time.perf_counter()
        for q in questions:
            off.ask(q)
        plain.append(len(questions) / (time.perf_counter() - t0))
    print(f"{len(questions)} turns per batch, {args.rounds} batches; load average {os.getloadavg()[0]:.1f} "
          f"on {os.cpu_count()} CPUs")
    print(f"  eval (offline, bm25, agent, traced): median {statistics.median(traced):.0f} turns/s")
    print(f"  same asks without tracing:           median {statistics.median(plain):.0f} turns/s")


if __name__ == "__main__":
    main()
