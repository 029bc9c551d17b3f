"""`eval`: a batch run of a questions file into the trace store — one `runs` row, resumable.

A thin shell over `workbench.batch.run_eval` (see there for how resuming works).
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

from ..batch import EvalResult, Stop, run_eval
from ..render import VERDICT_LABELS
from ..questions import read_questions
from ..terminal import neutralize
from ._options import (add_db_option, add_run_options, add_verify_options, db_path, positive_int,
                       provider_options, warn_skipped)
from ._signals import exit_code, exit_now, stop_on_signals
from ._table import print_table


def register(sub) -> None:
    p = sub.add_parser("eval", help="Batch-run a questions file into the trace store (one run, resumable).")
    p.add_argument("questions", metavar="QUESTIONS.jsonl", help='a file of {"question": …} lines')
    add_run_options(p)
    add_db_option(p)
    add_verify_options(p)
    p.add_argument("--run-id", help="resume this run (default: resume the run of the same file and configuration)")
    p.add_argument("--new-run", action="store_true", help="start a new run even if a matching one exists")
    p.add_argument("--no-progress", action="store_true", help="no progress lines on stderr")
    p.add_argument("--concurrency", type=positive_int, default=1, metavar="N",
                   help="questions answered at once (default 1); for real providers, which wait on the network. "
                        "Turns are still written in question order and a run resumes the same way")
    p.set_defaults(func=run)


def summary_rows(result: EvalResult) -> tuple[list[str], list[tuple]]:
    ps = result.payloads
    n = len(ps) or 1
    avg = lambda key: round(sum(len(p["sets"][key]) for p in ps) / n, 2)  # noqa: E731
    rows = [
        ("run_id", result.run_id),
        ("resumed", "yes" if result.resumed else "no"),
        ("asked", result.asked),
        ("skipped (already answered)", result.skipped),
        ("failed", result.failed),
        ("not written to the trace store", result.unwritten),
        ("avg retrieved / cited / consulted", f"{avg('retrieved')} / {avg('cited')} / {avg('consulted')}"),
        ("turns with rejected citations", sum(bool(p["rejected_citations"]) for p in ps)),
        ("turns that consulted nothing", sum(not p["sets"]["consulted"] for p in ps)),
        ("turns/s", round(result.asked / result.seconds, 1) if result.seconds else "-"),
        ("concurrency", result.concurrency),
        ("rate-limit pauses (turns asked again)", result.rate_limited),
    ]
    checked = [p["verification"] for p in ps if p.get("verification")]
    if checked:
        counts = Counter(v for c in checked for v in c["verdicts"].values())
        rows += [("verified turns (control stable)", f"{len(checked)} ({sum(c['control_stable'] for c in checked)})")]
        rows += [(f"verdict: {label}", counts[v]) for v, label in VERDICT_LABELS.items()]
        rows += [("extra model calls for verification", sum(c["extra_calls"] for c in checked))]
    return ["metric", "value"], rows


def run(args: argparse.Namespace) -> int:
    from ..session import Session

    questions = [q.text for q in read_questions(args.questions)]
    options = provider_options(args)
    session = Session.open(args.corpus, args.retriever, trace_db=db_path(args))
    warn_skipped(session.corpus)
    stop = Stop()
    with stop_on_signals(stop):  # SIGTERM or Ctrl-C: the finished turns are written, then the batch returns
        result = run_eval(session, questions, provider=args.provider, model=args.model, mode=args.mode, k=args.k,
                          options=options, run_id=args.run_id, new_run=args.new_run, progress=not args.no_progress,
                          tool_protocol=args.tool_protocol, concurrency=args.concurrency, verify=args.verify,
                          verify_budget=args.verify_budget, stop=stop)
    if result.concurrency < args.concurrency:
        print(f"note: provider {args.provider!r} answers at most {result.concurrency} turn(s) at a time, so "
              f"--concurrency {args.concurrency} ran as {result.concurrency}", file=sys.stderr)
    print_table(*summary_rows(result))
    print(f"query it: workbench sql \"SELECT * FROM turn_sets WHERE run_id = '{result.run_id}'\""
          + (f" --db {Path(args.db)}" if args.db else ""))
    if result.stopped:
        print(neutralize(f"warning: {result.stopped}"), file=sys.stderr)
    if result.unwritten:
        print(neutralize(f"warning: {result.unwritten} turns could not be written to {session.tracer.path} "
                         f"({result.trace_error}); they count as failed — run the same command again to ask them "
                         "again (the run resumes)"), file=sys.stderr)
    if result.interrupted:
        print(neutralize(interrupted_message(result, len(questions))), file=sys.stderr)
        exit_now(exit_code(result.interrupted))
    return 1 if result.failed or result.stopped else 0


def interrupted_message(result: EvalResult, total: int) -> str:
    kept = result.kept
    before = f" ({result.skipped} more from before)" if result.skipped else ""
    lost = f"; {result.unwritten} could not be written" if result.unwritten else ""
    return (f"interrupted by {result.interrupted}: kept {kept} finished turn{'s' if kept != 1 else ''}{before} of "
            f"{total} in run {result.run_id}{lost}; the turns in progress were dropped — run the same command "
            f"again to resume")
