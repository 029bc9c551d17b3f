"""What `eval`, `collect` and `ingest` share as experiments (docs/experiments.md): the options of a named, tagged
run and its regression gate, and printing a run's scores against its questions file and the gate's verdict."""

from __future__ import annotations

import argparse
import sys

from ..terminal import neutralize
from ._options import db_path


def add_experiment_options(p, *, with_name: bool = True) -> None:
    """Named runs (unless the command names its runs itself), tags and the regression gate (docs/experiments.md)."""
    g = p.add_argument_group("experiments (docs/experiments.md)")
    if with_name:
        g.add_argument("--name", help="name the run (unique in the trace database): `workbench runs show NAME`, "
                                      "`runs compare`; a named run never resumes another run")
    g.add_argument("--tag", action="append", default=[], metavar="KEY=VALUE", help="tag the run (repeatable)")
    g.add_argument("--baseline", metavar="RUN", help="when the run ends, compare it with this named run")
    g.add_argument("--fail-on-regression", action="store_true",
                   help="with --baseline: exit 1 when the pass rate or consulted precision falls below the "
                        "baseline's 95%% interval, naming the regressed questions")


def score_and_gate(args: argparse.Namespace, run_id: str, dataset) -> int:
    """Print the run's scores against `dataset`; with --baseline, run the regression gate (1: regressed and
    --fail-on-regression)."""
    from ..trace.results import SHOWN_HASH_CHARS as H, SUMMARY
    from ..trace.scoring import question_rows, regressions, score

    s = score(question_rows(db_path(args), [run_id]))
    figures = ", ".join(f"{f.label} {s.text(f.name)}" for f in SUMMARY)
    print(neutralize(f"expectations ({dataset.name}): {s.passed} of {s.questions} questions passed; {figures} "
                     f"(95% intervals; docs/experiments.md)"))
    if args.name:
        print(neutralize(f"run {args.name!r} recorded: workbench runs show {args.name}"))
    if not args.baseline:
        return 0

    gate = regressions(db_path(args), args.name or run_id, args.baseline)
    old = gate.baseline.run
    if old["dataset_hash"] != dataset.content_hash:
        print(neutralize(f"warning: baseline {args.baseline!r} ran another questions file ({old['dataset']}, "
                         f"{old['dataset_hash'][:H]}; this one: {dataset.name}, "
                         f"{dataset.content_hash[:H]}): the comparison covers the questions both asked"),
              file=sys.stderr)
    print_gate(gate)
    return 1 if gate.regressed and args.fail_on_regression else 0


def print_gate(gate) -> None:
    """The gate's report (`scoring.regressions`): each summary figure beside the baseline's, then why it regressed
    and the regressed questions."""
    from ..trace.results import SUMMARY

    cur, old = gate.run, gate.baseline
    for f in SUMMARY:
        print(neutralize(f"{f.label}: {f.text(cur.value(f.name))} (baseline {old.name}: {old.scores.text(f.name)})"))
    if not gate.regressed:
        print(neutralize(f"no regression against {old.name}"))
        return
    for reason in gate.reasons:
        print(neutralize(f"REGRESSION: {reason}"))
    print(f"regressed questions ({len(gate.questions)}):")
    for q in gate.questions:
        print(neutralize(f"  - {q.line.text()}  [{'; '.join(q.failed) or 'consulted precision fell'}]  "
                         f"turn {q.turn_id}"))
