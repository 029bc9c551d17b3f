"""Follow-up questions beside first questions: consulted precision and recall of the offline agent in conversations.

Each conversation of a questions file (lines with the same `"conversation"` id, in file order; issue 22 item 3)
is asked turn by turn with `Session.ask(question, history=earlier records, conversation_id=…)` over the demo
help center, and each turn's consulted set is compared with its `expected` documents, as
`consulted_precision.py` does for single questions: precision = |consulted ∩ expected| / |consulted| over the
turns with a non-empty row (an empty row is counted apart, and as 0 in the strict figure), recall =
|consulted ∩ expected| / |expected|. First questions (position 1) and follow-ups (position > 1) are reported
side by side; the goal is follow-ups no more than 0.05 below first questions.

Anchor, same run: the follow-ups asked on their own (no history), which is what every turn was before
conversations: "And with Okta?" searched as the literal words.

    .venv/bin/python benchmarks/followups.py [--questions data/demo_followups.jsonl] [--context-turns 2] [-v]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from consulted_precision import prf, report  # noqa: E402

from workbench.questions import read_dataset  # noqa: E402
from workbench.session import Session  # noqa: E402
from workbench.types import ContextPolicy  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--questions", default=str(ROOT / "data" / "demo_followups.jsonl"))
    ap.add_argument("--corpus", default=None, help="default: the demo help center")
    ap.add_argument("--retriever", default="bm25")
    ap.add_argument("--context-turns", type=int, default=ContextPolicy().turns)
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()
    session = Session.open(args.corpus, args.retriever, trace=False)
    policy = ContextPolicy(turns=args.context_turns)
    earlier: dict[str, list] = {}
    rows: dict[str, tuple[list, list, list]] = {name: ([], [], []) for name in ("first", "follow-up", "alone")}
    carried_answers = 0
    for q in read_dataset(args.questions).questions:
        history = earlier.setdefault(q.conversation or f"line-{q.line}", [])
        answer = session.ask(q.text, history=history, conversation_id=q.conversation, context=policy)
        history.append(answer.record)
        expected = set(q.expected)
        kinds = [("first", answer.payload)] if len(history) == 1 else \
            [("follow-up", answer.payload), ("alone", session.ask(q.text).payload)]
        if len(history) > 1 and not answer.record.tool_calls:
            carried_answers += 1
        for name, payload in kinds:
            consulted = payload["sets"]["consulted"]
            p, r = prf(consulted, expected)
            precisions, recalls, sizes = rows[name]
            precisions.append(p), recalls.append(r), sizes.append(len(consulted))
            if args.verbose:
                print(f"{name:<9} {q.id}: consulted={consulted} expected={sorted(expected)} P={p} R={r:.2f}")
    n_first, n_follow = len(rows["first"][0]), len(rows["follow-up"][0])
    print(f"questions: {args.questions}  conversations: {n_first}  follow-ups: {n_follow} "
          f"({carried_answers} answered from the carried document, no tool call)  retriever: {args.retriever}  "
          f"context turns: {policy.turns}")
    first = report("first questions", *rows["first"])
    follow = report("follow-ups", *rows["follow-up"])
    report("alone (anchor)", *rows["alone"])
    r_first, r_follow = (sum(rows[n][1]) / len(rows[n][1]) for n in ("first", "follow-up"))
    print(f"follow-ups minus first questions: precision {follow - first:+.3f}  recall {r_follow - r_first:+.3f}  "
          f"(goal: follow-ups no more than 0.05 below first questions)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
