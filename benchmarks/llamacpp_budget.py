"""The `llamacpp` output budget and repetition guard: an excerpt turn of the default model, before and after.

The anchor, in the same run on the same loaded model: the settings before issue 23 (`max_tokens=1024`,
`repeat_guard=False`); beside it the defaults now (512 tokens, the guard on). Both arms answer the same
excerpt-mode question, alternating, `--runs` times each after one untimed warm-up call, with llama.cpp's
prompt cache on (the default): every call sends the same prompt, so after the warm-up it is served from
the cache and the timed part is generation — what the budget and the guard change. Printed per arm: median
turn latency, output tokens, finish reasons and answer length.

    .venv/bin/python benchmarks/llamacpp_budget.py [--question "How do I reset my password?"] [-k 2] [--runs 3]

Timings depend on the machine's load (other processes share its cores): compare the arms within one run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from workbench.session import Session  # noqa: E402

ARMS = {"before (1024 tokens, no guard)": {"max_tokens": 1024, "repeat_guard": False},
        "after (defaults: 512 tokens, guard on)": {}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--question", default="How do I reset my password?")
    ap.add_argument("-k", type=int, default=2)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    session = Session.open(trace=False)
    session.ask(args.question, provider="llamacpp", mode="excerpts", k=args.k, max_tokens=1)  # load, fill the cache
    seen: dict[str, list] = {arm: [] for arm in ARMS}
    for _ in range(args.runs):
        for arm, options in ARMS.items():
            t0 = time.perf_counter()
            record = session.ask(args.question, provider="llamacpp", mode="excerpts", k=args.k, **options).record
            call = record.model_calls[-1]
            seen[arm].append((time.perf_counter() - t0, call.tokens_out, call.finish_reason, len(record.answer)))
            print(f"  {arm}: {seen[arm][-1][0]:.1f} s, {call.tokens_out} tokens out, {call.finish_reason}", flush=True)
    print(f"\nexcerpt turn, default model, k={args.k}, {args.question!r}, {args.runs} runs per arm (median)")
    print(f"{'arm':42} {'turn s':>8} {'tokens out':>11} {'answer chars':>13}  finish reasons")
    for arm, rows in seen.items():
        print(f"{arm:42} {statistics.median(r[0] for r in rows):8.1f} {statistics.median(r[1] for r in rows):11.0f} "
              f"{statistics.median(r[3] for r in rows):13.0f}  {', '.join(sorted({r[2] for r in rows}))}")


if __name__ == "__main__":
    main()
