"""Scoring experiment runs (docs/experiments.md): a leaderboard with bootstrap intervals, per-question diffs
and the regression gate.

The per-turn assertions and figures are defined once, in the `expectation_results` view (migration
m011): this module reads its rows and only aggregates them — a run's figure is the mean of its rows'
values (the rows that have one), with a percentile bootstrap 95 % interval over those rows
(`BOOTSTRAP_SAMPLES` resamples, seed `SEED`, so the same rows always give the same interval). The CLI
(`runs`, `eval --baseline`), the app's Experiments page and notebook 02 display what this returns.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any, Sequence

from .experiments import ExperimentError, find_run, run_label
from .reader import TraceReader

SEED = 20231
BOOTSTRAP_SAMPLES = 2000
CHUNK = 100  # resamples drawn at once (docs/security.md)

#: Figure → the `expectation_results` column it averages (over the rows where that column is not NULL).
MEANS = {
    "pass_rate": "passed",
    "consulted_precision": "consulted_precision",
    "consulted_recall": "consulted_recall",
    "load_bearing_precision": "load_bearing_precision",
    "load_bearing_recall": "load_bearing_recall",
    "retrieved_precision": "retrieved_precision",
    "retrieved_recall": "retrieved_recall",
    "rejected": "rejected",
    "tokens_in": "tokens_in",
    "tokens_out": "tokens_out",
}
#: What the regression gate watches: a new run regresses when one falls below the baseline's interval.
GATED = ("pass_rate", "consulted_precision")
#: Per-question columns a run's rows carry (the view's, in this order).
QUESTION_COLUMNS = ("run_id", "line", "question", "conversation", "turn_id", "status", "answered", "passed", "expected", "consulted",
                    "cited", "load_bearing", "verified", "rejected", "latency_ms", "tokens_in", "tokens_out",
                    "expected_consulted", "no_sources_ok", "must_cite_ok", "must_not_cite_ok", "no_rejected",
                    "status_ok", "consulted_precision", "consulted_recall", "load_bearing_precision",
                    "load_bearing_recall", "retrieved", "retrieved_precision", "retrieved_recall", "tags")


def question_rows(db: str | Path | TraceReader, run_ids: Sequence[str]) -> list[dict[str, Any]]:
    """The `expectation_results` rows of `run_ids`, in dataset line order, as dicts."""
    reader = db if isinstance(db, TraceReader) else TraceReader(db)
    ids = list(run_ids)
    if not ids:
        return []
    columns, rows = reader.rows(f"SELECT {', '.join(QUESTION_COLUMNS)} FROM expectation_results "
                                "WHERE list_contains(?, run_id) ORDER BY run_id, line", [ids])
    return [dict(zip(columns, r)) for r in rows]


def bootstrap_ci(values: Sequence[float], *, samples: int = BOOTSTRAP_SAMPLES, seed: int = SEED) -> list[float] | None:
    """Percentile bootstrap 95 % interval of the mean of `values` ([lo, hi]); None for no values."""
    import numpy as np

    v = np.asarray(values, dtype=float)
    if not len(v):
        return None
    rng = np.random.default_rng(seed)
    # CHUNK resamples at a time: memory stays CHUNK × len(values) numbers whatever the run's size
    means = np.concatenate([v[rng.integers(0, len(v), size=(min(CHUNK, samples - i), len(v)))].mean(axis=1)
                            for i in range(0, samples, CHUNK)])
    lo, hi = np.percentile(means, [2.5, 97.5])
    return [float(lo), float(hi)]


def _percentile(values: list[float], q: float) -> float | None:
    import numpy as np

    return float(np.percentile(values, q)) if values else None


def score(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One run's figures from its question rows: counts, each mean with its interval (`ci`), latency p50/p90."""
    out: dict[str, Any] = {"questions": len(rows), "answered": sum(bool(r["answered"]) for r in rows),
                           "passed": sum(bool(r["passed"]) for r in rows)}
    ci = {}
    for figure, column in MEANS.items():
        values = [float(r[column]) for r in rows if r[column] is not None]
        out[figure] = sum(values) / len(values) if values else None
        ci[figure] = bootstrap_ci(values)
    latencies = [r["latency_ms"] for r in rows if r["latency_ms"] is not None]
    out["latency_p50_ms"], out["latency_p90_ms"] = _percentile(latencies, 50), _percentile(latencies, 90)
    out["ci"] = ci
    return out


def leaderboard(db: str | Path, refs: Sequence[str]) -> tuple[list[dict[str, Any]], dict[str, list[dict[str, Any]]]]:
    """Per run named in `refs` (names or run ids): its description and `score`, and its question rows by name."""
    reader = TraceReader(db)
    runs = [find_run(reader, ref) for ref in refs]
    seen = [r["run_id"] for r in runs]
    if len(set(seen)) < len(seen):
        raise ExperimentError("the same run is named twice; compare different runs")
    rows = question_rows(reader, seen)
    by_run = {r["run_id"]: [q for q in rows if q["run_id"] == r["run_id"]] for r in runs}
    board, questions = [], {}
    for r in runs:
        key = r["name"] or r["run_id"]
        board.append({"name": key, "label": run_label(r), "run_id": r["run_id"], "created_at": r["created_at"], "provider": r["provider"],
                      "model": r["model"], "retriever": r["retriever"], "mode": r["mode"], "k": r["k"],
                      "corpus": r["corpus"], "corpus_hash": r["corpus_hash"], "dataset": r["dataset"],
                      "dataset_hash": r["dataset_hash"], "tags": r["tags"], **score(by_run[r["run_id"]])})
        questions[key] = by_run[r["run_id"]]
    return board, questions


def by_line(rows: Sequence[dict[str, Any]]) -> dict[tuple, dict[str, Any]]:
    """One run's question rows keyed by which line each is: its conversation (None: on its own), its question,
    and how many lines of that conversation before it ask the same — never by the question alone, which two
    conversations may share ("And with Okta?"). The same key names the same line in two runs of one file."""
    seen: Counter = Counter()
    out = {}
    for row in rows:
        key = (row.get("conversation"), row["question"])
        out[(*key, seen[key])] = row
        seen[key] += 1
    return out


def line_label(row: dict[str, Any]) -> str:
    """A line as people read it: its question, after its conversation in brackets when it is a turn of one."""
    conversation = row.get("conversation")
    return f"[{conversation}] {row['question']}" if conversation is not None else row["question"]


def diff(questions: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """The lines whose pass/fail or consulted set differs between the runs, with both per run (None: the run
    did not ask it), in the first run's order."""
    names = list(questions)
    per = {n: by_line(rows) for n, rows in questions.items()}
    order = list(dict.fromkeys(key for keyed in per.values() for key in keyed))
    out = []
    for key in order:
        got = {n: per[n].get(key) for n in names}
        passed = {n: (bool(q["passed"]) if q else None) for n, q in got.items()}
        consulted = {n: (list(q["consulted"]) if q and q["answered"] else None) for n, q in got.items()}
        if len(set(passed.values())) > 1 or len({None if c is None else frozenset(c) for c in consulted.values()}) > 1:
            out.append({"question": key[1], "conversation": key[0], "passed": passed, "consulted": consulted,
                        "expected": next(list(q["expected"]) for q in got.values() if q),
                        "turn_id": {n: (q["turn_id"] if q else None) for n, q in got.items()}})
    return out


def compare(db: str | Path, refs: Sequence[str]) -> dict[str, Any]:
    """`{"runs": [...], "diff": [...]}`: the leaderboard of `refs` and their per-question diff."""
    board, questions = leaderboard(db, refs)
    return {"runs": board, "diff": diff(questions)}


def regressions(db: str | Path, new: str, baseline: str) -> dict[str, Any]:
    """The regression gate: `new` regresses when its pass rate or consulted precision falls below the lower end
    of `baseline`'s interval. Returns `regressed` (bool), `reasons` (one sentence per figure) and `questions`
    (those that passed in the baseline and fail in the new run, or whose consulted precision fell)."""
    board, questions = leaderboard(db, [baseline, new])
    old, cur = board
    reasons = []
    for figure in GATED:
        if old[figure] is None or old["ci"][figure] is None:
            continue
        lo = old["ci"][figure][0]
        if cur[figure] is None or cur[figure] < lo:
            shown = "none" if cur[figure] is None else f"{cur[figure]:.3f}"
            reasons.append(f"{figure.replace('_', ' ')} {shown} is below {old['name']}'s interval "
                           f"[{lo:.3f}, {old['ci'][figure][1]:.3f}] (its value {old[figure]:.3f})")
    before = by_line(questions[old["name"]])
    worse = []
    for key, q in by_line(questions[cur["name"]]).items():
        b = before.get(key)
        if b is None:
            continue
        fell = (b["consulted_precision"] is not None
                and (q["consulted_precision"] or 0.0) < b["consulted_precision"])
        if (b["passed"] and not q["passed"]) or fell:
            worse.append({"question": q["question"], "conversation": q["conversation"], "turn_id": q["turn_id"], "failed": failed_assertions(q),
                          "consulted": {old["name"]: list(b["consulted"]), cur["name"]: list(q["consulted"])}})
    return {"regressed": bool(reasons), "reasons": reasons, "questions": worse, "baseline": old, "run": cur}


#: Assertion column → what it asserts, in words (for failures shown to people).
ASSERTIONS = {
    "status_ok": "the turn ended ok",
    "expected_consulted": "every expected document consulted",
    "no_sources_ok": "nothing consulted (expect_no_sources)",
    "must_cite_ok": "every must_cite document cited",
    "must_not_cite_ok": "no must_not_cite document cited or consulted",
    "no_rejected": "no rejected citation",
}


def failed_assertions(row: dict[str, Any]) -> list[str]:
    """The assertions a question row failed, in words ("not asked" when the run has no turn for it)."""
    if not row["answered"]:
        return ["not asked"]
    return [text for column, text in ASSERTIONS.items() if not row[column]]
