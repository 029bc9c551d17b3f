"""`eval`: a batch run of a questions file into the trace store — one `runs` row, resumable.

A thin shell over `workbench.batch.run_eval` (see there for how resuming works).
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from contextlib import contextmanager
from pathlib import Path

from ..batch import EvalResult, EvalSpec, ResumeError, Stop, run_eval
from ..errors import WorkbenchError
from ..questions import read_dataset
from ..render.sources import VERDICT_LABELS
from ..terminal import neutralize
from ._options import (QUESTIONS_HELP, add_context_option, add_db_option, add_run_options, add_verify_options, context_policy,
                       db_path, positive_int, provider_options, settings_of, warn_skipped)
from ._gate import add_experiment_options, score_and_gate
from ._signals import exit_code, exit_now, stop_on_signals
from ._table import print_table


def register(sub) -> None:
    p = sub.add_parser("eval", help="Batch-run a questions file into the trace store (one run, resumable).")
    p.add_argument("questions", metavar="QUESTIONS.jsonl", help=QUESTIONS_HELP)
    add_context_option(p)
    add_run_options(p)
    add_db_option(p)
    add_verify_options(p)
    p.add_argument("--run-id", help="resume this run, which must have been asked with the same file and "
                                    "configuration (default: resume the run of the same file and configuration)")
    p.add_argument("--new-run", action="store_true",
                   help="start a new run even if a matching one exists (also instead of the --run-id given)")
    p.add_argument("--no-progress", action="store_true", help="no progress lines on stderr")
    p.add_argument("--concurrency", type=positive_int, default=1, metavar="N",
                   help="questions answered at once (default 1); for real providers, which wait on the network. "
                        "Turns are still written in question order and a run resumes the same way")
    add_experiment_options(p)
    p.set_defaults(func=run)


def summary_rows(result: EvalResult) -> tuple[list[str], list[tuple]]:
    ps = result.payloads
    n = len(ps) or 1
    avg = lambda key: round(sum(len(getattr(p.sets, key)) for p in ps) / n, 2)  # noqa: E731
    rows = [
        ("run_id", result.run_id),
        ("resumed", "yes" if result.resumed else "no"),
        ("asked", result.asked),
        ("skipped (already answered)", result.skipped),
        ("failed", result.failed),
        *([("not asked (an earlier turn of its conversation failed)", result.not_asked)] if result.not_asked else []),
        ("not written to the trace store", result.unwritten),
        ("avg retrieved / cited / consulted", f"{avg('retrieved')} / {avg('cited')} / {avg('consulted')}"),
        ("turns with rejected citations", sum(bool(p.rejected_citations) for p in ps)),
        ("turns that consulted nothing", sum(not p.sets.consulted for p in ps)),
        ("turns/s", round(result.asked / result.seconds, 1) if result.seconds else "-"),
        ("concurrency", result.concurrency),
        ("rate-limit pauses (turns asked again)", result.rate_limited),
    ]
    checked = [p.verification for p in ps if p.verification]
    if checked:
        counts = Counter(v for c in checked for v in c.verdicts.values())
        rows += [("verified turns (control stable)", f"{len(checked)} ({sum(c.control_stable for c in checked)})")]
        rows += [(f"verdict: {label}", counts[v]) for v, label in VERDICT_LABELS.items()]
        rows += [("extra model calls for verification", sum(c.extra_calls or 0 for c in checked))]
    return ["metric", "value"], rows


def run(args: argparse.Namespace) -> int:
    from ..session import Session

    dataset = read_dataset(args.questions)
    for line in dataset.warnings:
        print(neutralize(line), file=sys.stderr)
    tags = before_run(args, dataset)
    options = provider_options(args)
    session = Session.open(args.corpus, args.retriever, trace_db=db_path(args), settings=settings_of(args))
    warn_skipped(session.corpus)
    stop = Stop()
    # SIGTERM or Ctrl-C: the finished turns are written, then the batch returns
    with stop_on_signals(stop), _new_run_hint():
        result = run_eval(session, dataset.questions, EvalSpec(
            provider=args.provider, model=args.model, mode=args.mode, k=args.k, options=options, run_id=args.run_id,
            new_run=args.new_run, progress=not args.no_progress, tool_protocol=args.tool_protocol,
            concurrency=args.concurrency, verify=args.verify, verify_budget=args.verify_budget,
            context=context_policy(args)), stop=stop)
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
    if result.interrupted:  # a partial run is neither scored nor recorded as an experiment
        print(neutralize(interrupted_message(result, len(dataset.questions), resumable=args.name is None)),
              file=sys.stderr)
        exit_now(exit_code(result.interrupted))
    code = 1 if result.failed or result.not_asked or result.stopped else 0
    return after_run(args, session, result, dataset, tags) or code


@contextmanager
def _new_run_hint():
    try:
        yield
    except ResumeError as exc:
        raise WorkbenchError(f"{exc} (--new-run)") from None


def before_run(args: argparse.Namespace, dataset) -> dict[str, str]:
    """Refuse, before anything is asked, a taken --name, a malformed --tag, an unknown --baseline; a named run
    is a new run (unless --run-id resumes it, which `batch.open_run` allows only with the run's own
    configuration)."""
    from ..trace.experiments import check_name_free, find_run, parse_tags

    tags = parse_tags(args.tag)
    if args.fail_on_regression and not args.baseline:
        raise WorkbenchError("--fail-on-regression needs --baseline RUN (the run to compare with)")
    if args.name is not None:
        if not args.name.strip():
            raise WorkbenchError("--name must not be empty")
        check_name_free(db_path(args), args.name, resuming=None if args.new_run else args.run_id)
        args.new_run = args.new_run or args.run_id is None
    if args.baseline:
        find_run(db_path(args), args.baseline)
        args.new_run = args.new_run or args.run_id is None  # never resume the baseline's own run
    return tags


def after_run(args: argparse.Namespace, session, result: EvalResult, dataset, tags: dict[str, str]) -> int:
    """Record the run as an experiment of its dataset; with --baseline, run the regression gate (1: regressed
    and --fail-on-regression)."""
    from ..trace.experiments import experiment_config, record_experiment

    if result.asked <= result.unwritten and not result.resumed:
        return 0  # nothing of the run reached the store
    config = experiment_config(
        args.provider, provider_options(args), model=args.model, retriever=args.retriever, mode=args.mode, k=args.k,
        tool_protocol=args.tool_protocol, verify=args.verify, verify_budget=args.verify_budget if args.verify else None,
        concurrency=args.concurrency, corpus=args.corpus or "(demo corpus)", corpus_id=session.corpus.corpus_id,
        corpus_hash=session.corpus.content_hash, questions_file=str(args.questions))
    record_experiment(session.tracer, result.run_id, dataset, name=args.name, tags=tags, config=config)
    return score_and_gate(args, result.run_id, dataset)


def interrupted_message(result: EvalResult, total: int, resumable: bool = True) -> str:
    kept = result.kept
    before = f" ({result.skipped} more from before)" if result.skipped else ""
    lost = f"; {result.unwritten} could not be written" if result.unwritten else ""
    return (f"interrupted by {result.interrupted}: kept {kept} finished turn{'s' if kept != 1 else ''}{before} of "
            f"{total} in run {result.run_id}{lost}; the turns in progress were dropped — "
            + ("run the same command again to resume" if resumable else
               "a named run is not recorded until it ends: run the command again for a new run"))
