"""What `collect` and `ingest` share: the trace writer, the corpus resolver, the run's assembler, and the scoring of
the run against a questions file's expectations (`--questions`, docs/audit.md)."""

from __future__ import annotations

import argparse
import sys
from datetime import datetime, timezone

from ..corpus import load_corpus
from ..audit.expect import RunTurn, by_session, match_turns
from ..audit.sessions import session_in
from ..errors import WorkbenchError
from ..questions import read_dataset
from ..terminal import neutralize
from ._gate import add_experiment_options, score_and_gate
from ._options import db_path, warn_skipped

#: Unmatched questions and turns listed by name in the report (the rest counted).
SHOWN_UNMATCHED = 20


def add_audit_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--db", metavar="FILE.duckdb",
                   help="trace database (default: $WORKBENCH_DB, else <WORKBENCH_HOME>/traces.duckdb)")
    p.add_argument("--corpus", help="the audited app's knowledge base (folder or .jsonl): urls and ids resolve to its "
                                    "documents and `full` is measured against their text; without it the "
                                    "conservative rule applies (docs/audit.md)")
    p.add_argument("--name", help="name of the run these turns form (default: the command and the time); with "
                                  "--questions it must be free in the trace database (`runs show NAME`)")
    p.add_argument("--questions", metavar="QUESTIONS.jsonl",
                   help="score the run against this questions file's expectations, as `eval` does: a line on its "
                        "own matches the turns asking its question, a conversation's lines the turns of the session "
                        "of that id in order; the run is recorded as an experiment (`runs compare`)")
    p.add_argument("--verbose", action="store_true",
                   help="with --questions, name each turn no line matched by its question and session too (by "
                        "default only by its id: the questions are the audited app's users', and stderr often "
                        "lands in CI logs)")
    add_experiment_options(p, with_name=False)


def assembler(args: argparse.Namespace, command: str):
    """The run's assembler (a function-level import: the audit loads DuckDB and opentelemetry-proto). With
    --questions, the file is read and the run's name, tags and baseline checked first, before anything is
    received (`args.dataset`)."""
    from ..audit.collector import Assembler
    from ..audit.units import Resolver
    from ..trace.writer import TraceWriter

    name = args.name or f"{command}-{datetime.now(timezone.utc).strftime('%Y%m%dT%H%M%SZ')}"
    args.dataset = _scoring_checks(args, name)
    corpus = None
    if args.corpus:
        corpus = load_corpus(args.corpus)
        warn_skipped(corpus)
    return Assembler(TraceWriter(db_path(args)), Resolver(corpus), name=name)


def _scoring_checks(args: argparse.Namespace, name: str):
    """The questions file as a dataset (None without --questions), once its name, tags and baseline are valid."""
    from ..trace.experiments import check_name_free, find_run, parse_tags

    if args.questions is None:
        if args.baseline or args.tag:
            raise WorkbenchError(f"--{'baseline' if args.baseline else 'tag'} needs --questions FILE (the "
                                 "expectations the run is scored against)")
        return None
    if args.fail_on_regression and not args.baseline:
        raise WorkbenchError("--fail-on-regression needs --baseline RUN (the run to compare with)")
    dataset = read_dataset(args.questions)
    for line in dataset.warnings:
        print(neutralize(line), file=sys.stderr)
    args.tags = parse_tags(args.tag)
    check_name_free(db_path(args), name)
    if args.baseline:
        find_run(db_path(args), args.baseline)
    return dataset


def report(a, out=None) -> None:
    """What the run received and wrote, on `out` (default: the standard error of the moment, not of import time)."""
    stored = f", {a.skipped} already stored" if a.skipped else ""
    events = f", {a.logs.received} GenAI log events" if a.logs.received else ""
    print(neutralize(f"run {a.name}: {a.spans} spans{events} received, {a.turns} turns written{stored} (run id "
                     f"{a.run_id})"), file=out or sys.stderr)
    if a.logs.late or a.logs.dropped:
        from ..audit.logs import LOG_WAIT_SECONDS

        print(f"warning: {a.logs.late + a.logs.dropped} GenAI log events were not joined to their spans: "
              f"{a.logs.late} came after their trace was audited (its wait is {LOG_WAIT_SECONDS:g} s at most), "
              f"{a.logs.dropped} waited for a trace that never came, over the bound (docs/security.md)",
              file=out or sys.stderr)


def finish_run(args: argparse.Namespace, a) -> int:
    """Report the run; with --questions, match its turns to the file's lines, record it as an experiment, report
    what matched nothing, print its scores and run the gate. 1: no turn to score, or regressed (and
    --fail-on-regression)."""
    report(a)
    dataset = getattr(args, "dataset", None)
    if dataset is None:
        return 0
    if not a.turns:
        print(neutralize(f"warning: run {a.name} wrote no turns: nothing is scored against {dataset.name}, and the "
                         "run is not recorded as an experiment"), file=sys.stderr)
        return 1
    from ..trace.experiments import audited_config, record_experiment, run_turns

    turns = [RunTurn(t, q, session_in(c)) for t, q, c in run_turns(db_path(args), a.run_id)]
    m = match_turns(by_session(dataset.questions), turns)
    config = audited_config(db_path(args), a.run_id, corpus=args.corpus, questions_file=str(args.questions))
    record_experiment(a.writer, a.run_id, dataset, name=a.name, tags=args.tags, config=config, lines=m.lines)
    _unmatched(args.questions, m, verbose=args.verbose)
    args.name = a.name
    return score_and_gate(args, a.run_id, dataset)


def _unmatched(path: str, m, verbose: bool = False) -> None:
    """The lines no turn answered (the questions file's own text) and the turns no line asked, on stderr (the first
    `SHOWN_UNMATCHED` of each). A turn is named by its id only: its question and session are the audited app's
    users' (docs/security.md), shown with `verbose` (`--verbose`)."""
    for what, items, shown in (
            ("questions no turn answered (they fail)", m.unmatched_questions,
             lambda q: f"{path}:{q.line}: {q.text!r}" + (f" (conversation {q.conversation!r})" if q.conversation else "")),
            ("turns no question matched (not scored)", m.unmatched_turns,
             lambda t: f"turn {t.turn_id}" + (_asked(t) if verbose else ""))):
        if not items:
            continue
        print(neutralize(f"{len(items)} {what}:"), file=sys.stderr)
        for item in items[:SHOWN_UNMATCHED]:
            print(neutralize(f"  - {shown(item)}"), file=sys.stderr)
        if len(items) > SHOWN_UNMATCHED:
            print(f"  … and {len(items) - SHOWN_UNMATCHED} more", file=sys.stderr)
    if m.unmatched_turns and not verbose:
        print("  (turns are named by id only: --verbose shows their questions and sessions)",
              file=sys.stderr)


def _asked(t) -> str:
    return f": {t.question!r}" + (f" (session {t.session!r})" if t.session else "")
