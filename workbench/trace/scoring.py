"""Scoring experiment runs (docs/experiments.md): a leaderboard with bootstrap intervals, per-question diffs
and the regression gate.

The per-turn assertions and figures are defined once, in the `expectation_results` view (as migration m023 last
wrote it, `schema_m023.py`), but for the two retrieval figures (recall@k and reciprocal rank, `retrieval_figures`), which need the
run's k: this module reads its rows and only aggregates them — a run's figure is the mean of its rows'
values (the rows that have one), with a percentile bootstrap 95 % interval over those rows
(`BOOTSTRAP_SAMPLES` resamples, seed `SEED`, so the same rows always give the same interval). The CLI
(`runs`, `eval --baseline`), the app's Experiments page and notebook 02 display what this returns: the
frozen records of `results.py`.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from types import MappingProxyType
from typing import Any, Sequence

from .experiments import ExperimentError, differing, find_run, run_label, run_settings
from .reader import TraceReader
from .results import (BY_NAME, FIGURES, Comparison, DiffLine, Gate, Interval, Line, Paired, Regressed, RunScore,
                      Scores, interval_text)

SEED = 20231
BOOTSTRAP_SAMPLES = 2000
CHUNK = 100  # resamples drawn at once (docs/security.md)

#: What the regression gate watches: a new run regresses when one falls below the baseline's interval.
GATED = ("pass_rate", "consulted_precision")
#: Per-question columns a run's rows carry (the view's, in this order).
QUESTION_COLUMNS = ("run_id", "line", "question", "conversation", "turn_id", "status", "answered", "passed", "expected", "consulted",
                    "cited", "load_bearing", "verified", "rejected", "latency_ms", "tokens_in", "tokens_out",
                    "expected_consulted", "no_sources_ok", "must_cite_ok", "must_not_cite_ok", "no_rejected",
                    "status_ok", "consulted_precision", "consulted_recall", "load_bearing_precision",
                    "load_bearing_recall", "retrieved", "retrieved_precision", "retrieved_recall", "tags")


def question_rows(db: str | Path | TraceReader, run_ids: Sequence[str]) -> list[dict[str, Any]]:
    """The `expectation_results` rows of `run_ids`, in dataset line order, as dicts, each with its run's `k` and
    the retrieval figures (`retrieval_figures`)."""
    reader = db if isinstance(db, TraceReader) else TraceReader(db)
    ids = list(run_ids)
    if not ids:
        return []
    columns, rows = reader.rows(f"SELECT {', '.join('x.' + c for c in QUESTION_COLUMNS)}, r.k "
                                "FROM expectation_results x LEFT JOIN runs r USING (run_id) "
                                "WHERE list_contains(?, x.run_id) ORDER BY x.run_id, x.line", [ids])
    out = []
    for r in rows:
        row = dict(zip(columns, r))
        row["recall_at_k"], row["reciprocal_rank"] = retrieval_figures(row)
        out.append(row)
    return out


def retrieval_figures(row: dict[str, Any]) -> tuple[float | None, float | None]:
    """A question row's recall@k and reciprocal rank of its `expected` documents in its retrieved set, in the order
    the turn first retrieved them (docs/experiments.md): recall@k = |first k retrieved ∩ expected| / |expected| (k:
    the run's); reciprocal rank = 1 / the rank of the first expected document retrieved, 0 when none was. Both None
    for a line without `expected` or never asked."""
    expected = set(row["expected"] or ())
    if not row["answered"] or not expected:
        return None, None
    retrieved = list(row["retrieved"] or ())
    top = retrieved if row.get("k") is None else retrieved[: row["k"]]
    rank = next((i for i, doc in enumerate(retrieved, 1) if doc in expected), None)
    return len(expected & set(top)) / len(expected), (1 / rank if rank else 0.0)


def bootstrap_ci(values: Sequence[float], *, samples: int = BOOTSTRAP_SAMPLES, seed: int = SEED) -> Interval | None:
    """Percentile bootstrap 95 % interval of the mean of `values` ((lo, hi)); None for no values."""
    import numpy as np

    v = np.asarray(values, dtype=float)
    if not len(v):
        return None
    rng = np.random.default_rng(seed)
    # CHUNK resamples at a time: memory stays CHUNK × len(values) numbers whatever the run's size
    means = np.concatenate([v[rng.integers(0, len(v), size=(min(CHUNK, samples - i), len(v)))].mean(axis=1)
                            for i in range(0, samples, CHUNK)])
    lo, hi = np.percentile(means, [2.5, 97.5])
    return float(lo), float(hi)


def _percentile(values: list[float], q: float) -> float | None:
    import numpy as np

    return float(np.percentile(values, q)) if values else None


def score(rows: Sequence[dict[str, Any]]) -> Scores:
    """One run's figures from its question rows: counts, each figure's mean with its interval, latency p50/p90."""
    values, ci = {}, {}
    for figure in FIGURES:
        got = [float(r[figure.column]) for r in rows if r[figure.column] is not None]
        values[figure.name] = sum(got) / len(got) if got else None
        ci[figure.name] = bootstrap_ci(got)
    latencies = [r["latency_ms"] for r in rows if r["latency_ms"] is not None]
    return Scores(questions=len(rows), answered=sum(bool(r["answered"]) for r in rows),
                  passed=sum(bool(r["passed"]) for r in rows), values=MappingProxyType(values), ci=MappingProxyType(ci),
                  latency_p50_ms=_percentile(latencies, 50), latency_p90_ms=_percentile(latencies, 90))


def leaderboard(db: str | Path, refs: Sequence[str]) -> tuple[list[RunScore], dict[str, list[dict[str, Any]]]]:
    """Per run named in `refs` (names or run ids): its entry (description, settings, `score`), and its question
    rows by name."""
    reader = TraceReader(db)
    runs = [find_run(reader, ref) for ref in refs]
    seen = [r["run_id"] for r in runs]
    if len(set(seen)) < len(seen):
        raise ExperimentError("the same run is named twice; compare different runs")
    rows = question_rows(reader, seen)
    board, questions = [], {}
    for r in runs:
        key = r["name"] or r["run_id"]
        mine = [q for q in rows if q["run_id"] == r["run_id"]]
        board.append(RunScore(name=key, label=run_label(r), run=MappingProxyType(r), scores=score(mine),
                              settings=MappingProxyType(run_settings(r))))
        questions[key] = mine
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


def line_of(row: dict[str, Any]) -> Line:
    return Line(row["question"], row.get("conversation"))


def line_label(row: dict[str, Any]) -> str:
    """A line as people read it: its question, after its conversation in brackets when it is a turn of one."""
    return line_of(row).text()


def diff(questions: dict[str, list[dict[str, Any]]]) -> tuple[DiffLine, ...]:
    """The lines whose pass/fail or consulted set differs between the runs, with both per run (None: the run
    did not ask it), in the first run's order."""
    names = list(questions)
    per = {n: by_line(rows) for n, rows in questions.items()}
    order = list(dict.fromkeys(key for keyed in per.values() for key in keyed))
    out = []
    for key in order:
        got = {n: per[n].get(key) for n in names}
        passed = {n: (bool(q["passed"]) if q else None) for n, q in got.items()}
        consulted = {n: (tuple(q["consulted"]) if q and q["answered"] else None) for n, q in got.items()}
        if len(set(passed.values())) > 1 or len({None if c is None else frozenset(c) for c in consulted.values()}) > 1:
            out.append(DiffLine(line=Line(key[1], key[0]), passed=passed, consulted=consulted,
                                expected=next(tuple(q["expected"]) for q in got.values() if q),
                                turn_id={n: (q["turn_id"] if q else None) for n, q in got.items()},
                                failed={n: tuple(failed_assertions(q)) if q else ("not asked",) for n, q in got.items()}))
    return tuple(out)


def paired(a: str, a_rows: Sequence[dict[str, Any]], b: str, b_rows: Sequence[dict[str, Any]]) -> Paired:
    """Run `b` against run `a` line by line (`by_line`, over the lines both have; a line never asked fails): the
    lines that passed in `a` and fail in `b` and the other way round, in `a`'s order."""
    theirs = by_line(b_rows)
    both = [(q, theirs[key]) for key, q in by_line(a_rows).items() if key in theirs]
    return Paired(a=a, b=b, both_passed=sum(bool(x["passed"]) and bool(y["passed"]) for x, y in both),
                  both_failed=sum(not x["passed"] and not y["passed"] for x, y in both),
                  pass_to_fail=tuple(line_of(x) for x, y in both if x["passed"] and not y["passed"]),
                  fail_to_pass=tuple(line_of(x) for x, y in both if not x["passed"] and y["passed"]))


def compare(db: str | Path, refs: Sequence[str]) -> Comparison:
    """The leaderboard of `refs`, the settings that differ between them, their per-question diff and each later
    run paired with the first."""
    board, questions = leaderboard(db, refs)
    fields, shared = differing([r.settings for r in board])
    first = board[0].name
    return Comparison(runs=tuple(board), differing=fields, shared=shared, diff=diff(questions),
                      paired=tuple(paired(first, questions[first], r.name, questions[r.name]) for r in board[1:]))


def regressions(db: str | Path, new: str, baseline: str) -> Gate:
    """The regression gate: `new` regresses when its pass rate or consulted precision falls below the lower end
    of `baseline`'s interval. Its `reasons` say so, one sentence per figure; its `questions` are those that passed
    in the baseline and fail in the new run, or whose consulted precision fell."""
    board, questions = leaderboard(db, [baseline, new])
    old, cur = board
    reasons = []
    for name in GATED:
        was, ci, now = old.value(name), old.interval(name), cur.value(name)
        if was is None or ci is None:
            continue
        if now is None or now < ci[0]:
            figure = BY_NAME[name]
            reasons.append(f"{figure.label} {'none' if now is None else figure.text(now)} is below {old.name}'s "
                           f"interval {interval_text(ci)} (its value {figure.text(was)})")
    before = by_line(questions[old.name])
    worse = []
    for key, q in by_line(questions[cur.name]).items():
        b = before.get(key)
        if b is None:
            continue
        fell = (b["consulted_precision"] is not None
                and (q["consulted_precision"] or 0.0) < b["consulted_precision"])
        if (b["passed"] and not q["passed"]) or fell:
            worse.append(Regressed(line=line_of(q), turn_id=q["turn_id"], failed=tuple(failed_assertions(q)),
                                   consulted={old.name: tuple(b["consulted"]), cur.name: tuple(q["consulted"])}))
    return Gate(regressed=bool(reasons), reasons=tuple(reasons), questions=tuple(worse), baseline=old, run=cur)


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
