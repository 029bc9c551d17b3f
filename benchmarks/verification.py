"""Verification by ablation (docs/design.md §9): what it says about the sources row, and what it costs.

1. **Precision against gold.** For each question set — the Arduino questions
   (`benchmarks/arduino_questions.jsonl` over `arduino-help-center/corpus.jsonl` in
   `$WORKBENCH_BENCHMARK_DATA`, default ../shared/data; skipped when absent) and the demo gold set
   (`data/demo_gold.jsonl` over `data/demo`) — every substantive question with a gold article is asked
   with `Session.ask(verify=True)` and scored: the consulted row (the sources row) and the load-bearing
   row (consulted documents whose verdict is `load_bearing`) against gold, precision over non-empty rows
   (an empty row claims nothing; counted as 0 beside it) and recall; then the verdicts given (decorative
   split into consulted documents and links to titles) and those the gold documents got, controls that
   were unstable, re-runs and model calls per turn, and the spread of answer similarity per verdict (how
   far the threshold is from both).
2. **Speed.** One offline turn with 5 candidates ("How do I configure SSO?" on the demo corpus) verified
   again and again, warm: median and p90 of `verify()` (the target is ≤ 100 ms), beside the median of
   the turn itself as the same-run anchor.
3. **A verified batch loads its index once.** `eval --verify` (`batch.run_eval`) over the demo gold set,
   counting calls of the session's retriever factory and of the BM25 index loader while it runs.

    .venv/bin/python benchmarks/verification.py                       # offline agent, both sets, speed, batch
    .venv/bin/python benchmarks/verification.py --provider llamacpp --mode excerpts -k 3 --limit 4 \\
        --sets arduino,demo --max-tokens 128 --no-speed                # the CI model on a small sample

Timings depend on the machine's load (other processes share its cores): compare within one run.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from workbench import session as session_module  # noqa: E402
from workbench.batch import run_eval  # noqa: E402
from workbench.providers import get_provider  # noqa: E402
from workbench.retrieval import bm25  # noqa: E402
from workbench.session import Session  # noqa: E402
from workbench.verify import SIMILARITY_THRESHOLD, verify  # noqa: E402

from real_model import SETS, gold_scores  # noqa: E402  (benchmarks/: the question sets and their scoring)



def scores(rows: list[tuple[list[str], set[str]]]) -> str:
    precision, strict, recall = gold_scores(rows)  # the same scoring as real_model.py
    non_empty = sum(bool(row) for row, _ in rows)
    shown = "—" if precision is None else f"{precision:.3f}"
    return f"{shown} ({strict:.3f}) · {recall:.3f} · {non_empty}/{len(rows)} non-empty"


def spread(values: list[float]) -> str:
    return f"{min(values):.2f}–{max(values):.2f} (n={len(values)})" if values else "—"


def precision(name: str, args, options: dict) -> None:
    corpus, questions_file = SETS[name]
    if not corpus.exists():
        print(f"SKIP {name}: {corpus} is absent (real benchmark data lives in $WORKBENCH_BENCHMARK_DATA, by default "
              "../shared/data)")
        return
    rows = [json.loads(line) for line in questions_file.read_text(encoding="utf-8").splitlines() if line.strip()]
    rows = [r for r in rows if r.get("kind", "substantive") == "substantive" and r.get("expected")][:args.limit]
    session = Session.open(corpus, args.retriever, trace=False)
    session.toolbox
    consulted_rows, bearing_rows = [], []
    verdicts, decorative_title, unstable_controls, statuses, gold_verdicts = Counter(), 0, 0, Counter(), Counter()
    reruns, calls, seconds, sims = [], [], [], {}
    for i, q in enumerate(rows, start=1):
        start = time.perf_counter()
        answer = session.ask(q["question"], provider=args.provider, mode=args.mode, k=args.k,
                             verify=True, verify_budget=args.budget, **options)
        payload = answer.payload
        statuses[payload.status] += 1
        gold = set(q["expected"])
        consulted = list(payload.sets.consulted)
        v = answer.verification
        judged = v.verdicts if v else {}
        consulted_rows.append((consulted, gold))
        bearing_rows.append(([d for d in consulted if judged.get(d) == "load_bearing"], gold))
        if v is None:
            continue
        seconds.append(time.perf_counter() - start)
        unstable_controls += not v.control_stable
        reruns.append(v.extra_turns)
        calls.append(v.extra_calls)
        for a in v.ablations[1:]:
            if a.verdict:
                verdicts[a.verdict] += 1
                decorative_title += a.verdict == "decorative" and not a.consulted
                gold_verdicts[a.verdict] += a.doc_id in gold
                sims.setdefault(a.verdict, []).append(a.similarity) if a.similarity is not None else None
        if args.verbose:
            print(f"  {q.get('id', i)}: consulted={consulted} gold={sorted(gold)} verdicts={judged} "
                  f"control={'stable' if v.control_stable else 'UNSTABLE'}")
    verified = len(reruns)
    print(f"\n## {name} · {args.provider} · {args.retriever} · {args.mode} · k {args.k} · budget {args.budget} "
          f"· {len(rows)} questions · statuses {dict(statuses)}")
    print("| row | precision (empty = 0) · recall · non-empty |\n|---|---|")
    print(f"| consulted (sources row) | {scores(consulted_rows)} |")
    print(f"| load-bearing (verified) | {scores(bearing_rows)} |")
    print(f"verified turns {verified}; unstable controls {unstable_controls}; verdicts {dict(verdicts)}; "
          f"decorative: {verdicts['decorative'] - decorative_title} consulted + {decorative_title} title links; "
          f"verdicts of the gold documents {dict(gold_verdicts)}")
    if verified:
        print(f"re-runs per turn {statistics.mean(reruns):.1f}; "
              f"extra model calls per turn {statistics.mean(calls):.1f}; "
              f"verify+ask time per turn median {statistics.median(seconds) * 1000:.1f} ms")
    print("similarity by verdict (threshold %.2f): " % SIMILARITY_THRESHOLD
          + "; ".join(f"{k} {spread(v)}" for k, v in sorted(sims.items())))


def speed(runs: int) -> None:
    session = Session.open(trace=False)
    provider = get_provider("offline")
    question = "How do I configure SSO?"
    answer = session.ask(question)
    turn_ms, verify_ms = [], []
    candidates = None
    for _ in range(runs + 2):  # the first two warm the caches and are dropped
        t0 = time.perf_counter()
        answer = session.ask(question)
        t1 = time.perf_counter()
        v = verify(answer.record, session.toolbox, provider, payload=answer.payload)
        t2 = time.perf_counter()
        turn_ms.append((t1 - t0) * 1000)
        verify_ms.append((t2 - t1) * 1000)
        candidates = len(v.ablations) - 1
    turn_ms, verify_ms = turn_ms[2:], sorted(verify_ms[2:])
    print(f"\n## speed · offline · demo · {question!r} · {candidates} candidates · {runs} runs")
    p90 = verify_ms[int(0.9 * (len(verify_ms) - 1))]
    print(f"verify(): median {statistics.median(verify_ms):.1f} ms, p90 {p90:.1f} "
          f"ms (target ≤ 100 ms); the turn itself (ask, judged): median {statistics.median(turn_ms):.1f} ms")


def batch() -> None:
    calls = Counter()
    factory, loader = session_module.get_retriever, bm25.load_bm25

    def counted_factory(*a, **kw):
        calls["get_retriever"] += 1
        return factory(*a, **kw)

    def counted_loader(*a, **kw):
        calls["load_bm25"] += 1
        return loader(*a, **kw)

    session_module.get_retriever, bm25.load_bm25 = counted_factory, counted_loader
    try:
        with tempfile.TemporaryDirectory() as tmp:
            session = Session.open(trace_db=Path(tmp) / "t.duckdb")
            questions = [json.loads(line)["question"] for line in SETS["demo"][1].read_text().splitlines() if line]
            start = time.perf_counter()
            result = run_eval(session, questions, verify=True, progress=False)
            seconds = time.perf_counter() - start
            checked = sum(bool(p.verification) for p in result.payloads)
            reruns = sum(p.verification.extra_turns or 0 for p in result.payloads if p.verification)
    finally:
        session_module.get_retriever, bm25.load_bm25 = factory, loader
    print(f"\n## batch · eval --verify · demo gold · {result.asked} turns ({checked} verified, {reruns} re-runs) "
          f"in {seconds:.2f} s")
    print(f"retriever factory calls {calls['get_retriever']}, BM25 index loads {calls['load_bm25']} (one session, one "
          f"index for the whole batch)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--provider", default="offline")
    ap.add_argument("--retriever", default="bm25")
    ap.add_argument("--mode", default="agent")
    ap.add_argument("-k", type=int, default=5)
    ap.add_argument("--budget", type=int, default=8)
    ap.add_argument("--limit", type=int, default=None, help="only the first N scored questions of each set")
    ap.add_argument("--sets", default="arduino,demo", help="question sets of real_model.py: arduino, demo")
    ap.add_argument("--max-tokens", type=int, default=None, help="the provider's max_tokens option (llamacpp, openai)")
    ap.add_argument("--speed-runs", type=int, default=50)
    ap.add_argument("--no-speed", action="store_true", help="skip the speed and batch sections")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()
    options = {"max_tokens": args.max_tokens} if args.max_tokens else {}
    for name in args.sets.split(","):
        precision(name.strip(), args, options)
    if not args.no_speed:
        speed(args.speed_runs)
        batch()
    return 0


if __name__ == "__main__":
    sys.exit(main())
