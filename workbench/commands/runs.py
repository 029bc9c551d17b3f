"""`runs list | show NAME | compare A B [C…]`: experiment runs, their scores and per-question diffs.

A thin shell over `workbench.trace.experiments` and `workbench.trace.scoring` (docs/experiments.md).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from ..errors import WorkbenchError
from ..terminal import neutralize
from ._options import add_db_option, db_path
from ._table import _jsonable, print_fitted, print_table


def register(sub) -> None:
    p = sub.add_parser("runs", help="Experiment runs (eval --name): list, show one, compare several.")
    runs = p.add_subparsers(dest="runs_command", metavar="SUBCOMMAND", required=True)
    ls = runs.add_parser("list", help="every eval run of a questions file, newest first")
    show = runs.add_parser("show", help="one run: configuration, scores with 95%% intervals, every question")
    show.add_argument("run", metavar="NAME", help="a run name (or run id)")
    cmp = runs.add_parser("compare", help="a leaderboard of the runs and the questions whose result changed")
    cmp.add_argument("runs", metavar="NAME", nargs="*", help="two or more run names (or run ids)")
    for q in (ls, cmp):
        q.add_argument("--tag", action="append", default=[], metavar="KEY=VALUE",
                       help="only the runs with this tag (repeatable: every tag given); compare: the runs named, "
                            "then every run with the tags, oldest first")
    for q in (ls, show, cmp):
        add_db_option(q)
        q.add_argument("--json", action="store_true", help="print JSON")
    ls.set_defaults(func=run_list)
    show.set_defaults(func=run_show)
    cmp.set_defaults(func=run_compare)


def _dump(value: Any) -> None:
    print(json.dumps(_deep(value), ensure_ascii=False))


def _deep(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _deep(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_deep(v) for v in value]
    return _jsonable(value)


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def run_list(args: argparse.Namespace) -> int:
    from ..trace.experiments import list_runs, parse_tags, tagged, tags_text

    wanted = parse_tags(args.tag)
    runs = [r for r in list_runs(db_path(args)) if tagged(r, wanted)]
    if args.json:
        for r in runs:
            _dump(r)
        return 0
    print_table(["name", "run_id", "created_at", "provider", "model", "retriever", "mode", "k", "corpus", "dataset",
                 "questions", "tags"],
                [(r["name"], r["run_id"][:12], r["created_at"], r["provider"], r["model"], r["retriever"], r["mode"],
                  r["k"], r["corpus"], r["dataset"], r["questions"],
                  tags_text(r["tags"])) for r in runs], fit=True)
    return 0


def run_show(args: argparse.Namespace) -> int:
    from ..trace.experiments import find_run, tags_text
    from ..trace.results import FIGURES, SHOWN_HASH_CHARS as H
    from ..trace.scoring import failed_assertions, question_rows, score

    run = find_run(db_path(args), args.run)
    rows = question_rows(db_path(args), [run["run_id"]])
    scores = score(rows)
    if args.json:
        _dump({**run, **scores.to_json(), "question_rows": rows})
        return 0
    described = [("name", run["name"]), ("run_id", run["run_id"]), ("created_at", run["created_at"]),
                 ("corpus", f"{run['corpus']} ({str(run['corpus_hash'])[:H]})"),
                 ("dataset", f"{run['dataset']} ({run['dataset_hash'][:H]}, {run['questions']} questions)"),
                 ("tags", tags_text(run["tags"]))]
    described += [(f"config.{k}", json.dumps(v, ensure_ascii=False) if isinstance(v, (dict, list)) else v)
                  for k, v in sorted(run["config"].items())]
    described += [("questions / answered / passed", f"{scores.questions} / {scores.answered} / {scores.passed}")]
    described += [(f.name, scores.text(f.name)) for f in FIGURES]
    described += [("latency p50 / p90 (ms)", f"{_ms(scores.latency_p50_ms)} / {_ms(scores.latency_p90_ms)}")]
    print_table(["field", "value"], described, fit=True)
    print()
    print_table(["line", "passed", "question", "expected", "consulted", "failed"],
                [(q["line"], "yes" if q["passed"] else "NO", q["question"], ", ".join(q["expected"]),
                  ", ".join(q["consulted"]), "; ".join(failed_assertions(q))) for q in rows], fit=True)
    return 0


def compared_refs(args: argparse.Namespace) -> list[str]:
    """The runs `runs compare` compares: those named, then every run with all the `--tag`s given, oldest first."""
    from ..trace.experiments import list_runs, parse_tags, tagged

    refs = list(args.runs)
    if args.tag:
        wanted = parse_tags(args.tag)
        matched = [r["name"] or r["run_id"] for r in reversed(list_runs(db_path(args))) if tagged(r, wanted)]
        if not matched:
            raise WorkbenchError(f"no run has the tags {', '.join(args.tag)} (`workbench runs list` shows each "
                                 "run's tags)")
        refs += [ref for ref in matched if ref not in refs]
    if len(refs) < 2:
        raise WorkbenchError("compare needs at least two runs: workbench runs compare A B [C…] (or --tag KEY=VALUE "
                             "matching two or more)")
    return refs


def run_compare(args: argparse.Namespace) -> int:
    from ..trace.results import BOARD, setting_text
    from ..trace.scoring import compare

    result = compare(db_path(args), compared_refs(args))
    if args.json:
        _dump(result.to_json())
        return 0
    print_table(["run", *result.differing, "questions", *(f.name for f in BOARD)],
                [(r.name, *(setting_text(r.settings.get(f), f) for f in result.differing), r.scores.questions,
                  *(r.scores.text(f.name) for f in BOARD)) for r in result.runs], fit=True)
    if result.shared:
        print_fitted(neutralize("same in every run: " + "; ".join(f"{k} {setting_text(v, k)}"
                                                                  for k, v in result.shared.items())))
    for p in result.paired:
        print()
        print_fitted(neutralize(f"paired, {p.a} → {p.b}: both passed {p.both_passed}, both failed {p.both_failed}, "
                                f"pass → fail {len(p.pass_to_fail)}, fail → pass {len(p.fail_to_pass)}; "
                                f"exact McNemar p = {p.p_text()}"))
        for way, lines in (("pass → fail", p.pass_to_fail), ("fail → pass", p.fail_to_pass)):
            for line in lines:
                print_fitted(neutralize(f"{way}: {line.text()}"), indent="  ")
    print()
    names = [r.name for r in result.runs]
    if not result.diff:
        print("no question changed: every question passed or failed alike and consulted the same documents")
        return 0
    print(f"questions that changed ({len(result.diff)}):")
    print_table(["question", *(f"{n}: passed" for n in names), *(f"{n}: failed because" for n in names), "expected",
                 *(f"{n}: consulted" for n in names)],
                [(d.line.text(), *(_yes(d.passed[n]) for n in names),
                  *("; ".join(d.failed.get(n, ())) for n in names), ", ".join(d.expected),
                  *("(not asked)" if d.consulted[n] is None else ", ".join(d.consulted[n]) or "(none)"
                    for n in names)) for d in result.diff], fit=True)
    return 0


def _yes(v: bool | None) -> str:
    return "-" if v is None else "yes" if v else neutralize("NO")
