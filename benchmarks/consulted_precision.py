"""Consulted-set accuracy on a real corpus: the honest sources row vs the naive "everything retrieved" row.

For each question (with its expected article) the offline agent answers over the Arduino Help Center;
we compare its *consulted* set and the naive row (every document any tool returned) with the expected
article. Precision per question = |row ∩ expected| / |row|, averaged over the questions whose row is
non-empty (an empty sources row claims nothing; the abstention rate is reported beside it, and so is
the stricter figure that counts an empty row as precision 0); recall = |row ∩ expected| / |expected|.
Run:

    .venv/bin/python benchmarks/consulted_precision.py [--corpus PATH] [--questions FILE] [--retriever bm25]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from workbench.config import benchmark_data_dir  # noqa: E402
from workbench.session import Session  # noqa: E402

# $WORKBENCH_BENCHMARK_DATA, else ../shared/data (the development layout)
DEFAULT_CORPUS = benchmark_data_dir() / "arduino-help-center" / "corpus.jsonl"
DEFAULT_QUESTIONS = ROOT / "benchmarks" / "arduino_questions.jsonl"


def prf(row: list[str], expected: set[str]) -> tuple[float | None, float]:
    hit = len(set(row) & expected)
    return (hit / len(row) if row else None), (hit / len(expected) if expected else 0.0)


def report(name: str, precisions: list, recalls: list, sizes: list) -> float:
    answered = [p for p in precisions if p is not None]
    prec = statistics.mean(answered) if answered else 0.0
    strict = sum(answered) / len(precisions)
    print(f"{name:<14}: precision {prec:.3f} (over {len(answered)}/{len(precisions)} non-empty rows; "
          f"{strict:.3f} counting empty rows as 0)  recall {statistics.mean(recalls):.3f}  "
          f"mean size {statistics.mean(sizes):.2f}")
    return prec


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", default=str(DEFAULT_CORPUS))
    ap.add_argument("--questions", default=str(DEFAULT_QUESTIONS))
    ap.add_argument("--retriever", default="bm25")
    ap.add_argument("--mode", default="agent")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()
    if not Path(args.corpus).exists():
        print(f"SKIP: {args.corpus} is absent (real benchmark data lives in $WORKBENCH_BENCHMARK_DATA, by default "
              "../shared/data)")
        return 0
    session = Session.open(args.corpus, args.retriever, trace=False)
    rows = [json.loads(line) for line in open(args.questions, encoding="utf-8") if line.strip()]
    rows = [r for r in rows if r.get("kind", "substantive") == "substantive"]
    cp, cr, npr, nr, sizes_c, sizes_n = [], [], [], [], [], []
    for q in rows:
        expected = set(q["expected"])
        payload = session.ask(q["question"], mode=args.mode).payload
        consulted, naive = list(payload.sets.consulted), list(payload.sets.retrieved)
        p, r = prf(consulted, expected)
        cp.append(p), cr.append(r)
        p2, r2 = prf(naive, expected)
        npr.append(p2), nr.append(r2)
        sizes_c.append(len(consulted)), sizes_n.append(len(naive))
        if args.verbose:
            print(f"{q.get('id', '')}: consulted={consulted} expected={sorted(expected)} P={p} R={r:.2f}")
    print(f"questions: {len(rows)}  corpus: {args.corpus}  retriever: {args.retriever}  mode: {args.mode}")
    c_prec = report("consulted row", cp, cr, sizes_c)
    n_prec = report("naive row", npr, nr, sizes_n)
    print(f"precision ratio consulted/naive: {c_prec / n_prec if n_prec else float('inf'):.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
