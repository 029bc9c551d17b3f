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
from ._table import _jsonable, print_table

FIGURES = ("pass_rate", "consulted_precision", "consulted_recall", "load_bearing_precision", "load_bearing_recall",
           "rejected")


def register(sub) -> None:
    p = sub.add_parser("runs", help="Experiment runs (eval --name): list, show one, compare several.")
    runs = p.add_subparsers(dest="runs_command", metavar="SUBCOMMAND", required=True)
    ls = runs.add_parser("list", help="every eval run of a questions file, newest first")
    show = runs.add_parser("show", help="one run: configuration, scores with 95%% intervals, every question")
    show.add_argument("run", metavar="NAME", help="a run name (or run id)")
    cmp = runs.add_parser("compare", help="a leaderboard of the runs and the questions whose result changed")
    cmp.add_argument("runs", metavar="NAME", nargs="+", help="two or more run names (or run ids)")
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


def _fmt(value: Any, ci: list[float] | None = None) -> str:
    if value is None:
        return "-"
    text = f"{value:.3f}" if isinstance(value, float) else str(value)
    return text + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "")


def run_list(args: argparse.Namespace) -> int:
    from ..trace.experiments import list_runs, tags_text

    runs = list_runs(db_path(args))
    if args.json:
        for r in runs:
            _dump(r)
        return 0
    print_table(["name", "run_id", "created_at", "provider", "model", "retriever", "mode", "k", "corpus", "dataset",
                 "questions", "tags"],
                [(r["name"], r["run_id"][:12], r["created_at"], r["provider"], r["model"], r["retriever"], r["mode"],
                  r["k"], r["corpus"], r["dataset"], r["questions"],
                  tags_text(r["tags"])) for r in runs])
    return 0


def run_show(args: argparse.Namespace) -> int:
    from ..trace.experiments import find_run, tags_text
    from ..trace.scoring import failed_assertions, question_rows, score

    run = find_run(db_path(args), args.run)
    rows = question_rows(db_path(args), [run["run_id"]])
    scores = score(rows)
    if args.json:
        _dump({**run, **scores, "question_rows": rows})
        return 0
    described = [("name", run["name"]), ("run_id", run["run_id"]), ("created_at", run["created_at"]),
                 ("corpus", f"{run['corpus']} ({str(run['corpus_hash'])[:12]})"),
                 ("dataset", f"{run['dataset']} ({run['dataset_hash'][:12]}, {run['questions']} questions)"),
                 ("tags", tags_text(run["tags"]))]
    described += [(f"config.{k}", json.dumps(v, ensure_ascii=False) if isinstance(v, (dict, list)) else v)
                  for k, v in sorted(run["config"].items())]
    described += [("questions / answered / passed", f"{scores['questions']} / {scores['answered']} / "
                                                     f"{scores['passed']}")]
    described += [(f, _fmt(scores[f], scores["ci"][f])) for f in FIGURES + ("tokens_in", "tokens_out")]
    described += [("latency p50 / p90 (ms)", f"{_fmt(scores['latency_p50_ms'])} / {_fmt(scores['latency_p90_ms'])}")]
    print_table(["field", "value"], described)
    print()
    print_table(["line", "passed", "question", "expected", "consulted", "failed"],
                [(q["line"], "yes" if q["passed"] else "NO", q["question"], ", ".join(q["expected"]),
                  ", ".join(q["consulted"]), "; ".join(failed_assertions(q))) for q in rows])
    return 0


def run_compare(args: argparse.Namespace) -> int:
    from ..trace.scoring import compare, line_label

    if len(args.runs) < 2:
        raise WorkbenchError("compare needs at least two runs: workbench runs compare A B [C…]")
    result = compare(db_path(args), args.runs)
    if args.json:
        _dump(result)
        return 0
    print_table(["run", "provider", "retriever", "mode", "k", "corpus", "dataset", "questions", *FIGURES],
                [(r["name"], r["provider"], r["retriever"], r["mode"], r["k"], r["corpus"], r["dataset"],
                  r["questions"], *(_fmt(r[f], r["ci"][f]) for f in FIGURES)) for r in result["runs"]])
    print()
    names = [r["name"] for r in result["runs"]]
    if not result["diff"]:
        print("no question changed: every question passed or failed alike and consulted the same documents")
        return 0
    print(f"questions that changed ({len(result['diff'])}):")
    print_table(["question", "expected", *(f"{n}: passed" for n in names), *(f"{n}: consulted" for n in names)],
                [(line_label(d), ", ".join(d["expected"]),
                  *(_yes(d["passed"][n]) for n in names),
                  *("(not asked)" if d["consulted"][n] is None else ", ".join(d["consulted"][n]) or "(none)"
                    for n in names)) for d in result["diff"]])
    return 0


def _yes(v: bool | None) -> str:
    return "-" if v is None else "yes" if v else neutralize("NO")
