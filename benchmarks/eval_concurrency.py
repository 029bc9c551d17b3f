"""`eval --concurrency N` throughput against a loopback model with 0.5 s per call (issue 14). Prints medians.

    .venv/bin/python benchmarks/eval_concurrency.py [--questions 12] [--repeats 3] [--workers 1 2 4 8] [--delay 0.5]

A loopback server speaking Ollama's `/api/chat` (tests/agent_server.py) plays a search → fetch → answer
agent and waits `--delay` seconds before every reply, like a remote model; the workbench side is the
real thing: the official `ollama` client, the agent loop, the bm25 tools, provenance, lexical judging
and buffered trace writes into a fresh DuckDB file per run (`batch.run_eval`). For each worker count:
the median wall time of the batch, turns per second, the speed-up over one worker, and whether every
question's consulted set is identical to one worker's.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from agent_server import AgentServer  # noqa: E402
from workbench.batch import run_eval  # noqa: E402
from workbench.session import Session  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--questions", type=int, default=12)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4, 8])
    ap.add_argument("--delay", type=float, default=0.5, help="seconds the server waits before each reply")
    args = ap.parse_args()
    questions = [json.loads(line)["question"] for line in (ROOT / "data" / "demo_gold.jsonl").read_text().splitlines()
                 if line.strip()][: args.questions]
    os.environ["WORKBENCH_HOME"] = tempfile.mkdtemp(prefix="bench-concurrency-")
    Session.open().toolbox  # build the demo index once (cached for every run below)
    with AgentServer(delay=args.delay) as srv, tempfile.TemporaryDirectory() as tmp:
        os.environ["OLLAMA_HOST"] = srv.url
        reference = None
        base = None
        print(f"{len(questions)} questions, {args.delay} s per model call, {args.repeats} runs each "
              f"(median); loopback Ollama wire, real client, trace writes on")
        print("workers  wall s   turns/s  speed-up  model calls/turn  consulted sets = 1 worker")
        for n in args.workers:
            times, calls, same = [], [], True
            for r in range(args.repeats):
                session = Session.open(trace_db=Path(tmp) / f"w{n}-{r}.duckdb")
                before = srv.posts
                t0 = time.perf_counter()
                result = run_eval(session, questions, provider="ollama", progress=False, concurrency=n)
                times.append(time.perf_counter() - t0)
                calls.append((srv.posts - before) / len(questions))
                assert result.asked == len(questions) and result.failed == 0, result
                consulted = [list(p.sets.consulted) for p in result.payloads]
                reference = reference or consulted
                same = same and consulted == reference
            wall = statistics.median(times)
            base = base or wall
            print(f"{n:7d}  {wall:6.2f}  {len(questions) / wall:8.2f}  {base / wall:7.2f}x  "
                  f"{statistics.median(calls):16.2f}  {'yes' if same else 'NO'}")


if __name__ == "__main__":
    main()
