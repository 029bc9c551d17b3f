"""Experiment results as frozen records (docs/experiments.md): a run's scores, a leaderboard entry, the per-question
diff, the paired comparison of two runs and the regression gate — and the list of figures, stated once here with
each figure's label and how it is written. `scoring.py` builds these records; the CLI, the app and notebook 02 show
them; `to_json` gives the `--json` output.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from math import comb
from typing import Any, Mapping

#: A 95 % interval, (lower, upper); None where a figure has no values.
Interval = tuple[float, float]


@dataclass(frozen=True)
class Figure:
    """One figure of a run: its key (in records and JSON), its label for people, the per-question value it
    averages, and where it is shown (`board`: leaderboards and `runs show`; `summary`: also eval's closing line
    and the regression gate's report)."""

    name: str
    label: str
    column: str
    board: bool = True
    summary: bool = False
    digits: int = 3

    def text(self, value: float | None, ci: Interval | None = None) -> str:
        """The value as people read it, with its interval: `0.929 [0.786, 1.000]`; `-` for none."""
        if value is None:
            return "-"
        return f"{value:.{self.digits}f}" + (f" {interval_text(ci, self.digits)}" if ci else "")


#: Every figure of a run, in the order shown. `column` is an `expectation_results` column, or one of the
#: retrieval figures `scoring.retrieval_figures` adds to each question row.
FIGURES = (
    Figure("pass_rate", "pass rate", "passed", summary=True),
    Figure("consulted_precision", "consulted precision", "consulted_precision", summary=True),
    Figure("consulted_recall", "consulted recall", "consulted_recall", summary=True),
    Figure("recall_at_k", "recall@k", "recall_at_k", summary=True),
    Figure("mrr", "MRR", "reciprocal_rank", summary=True),
    Figure("load_bearing_precision", "load-bearing precision", "load_bearing_precision"),
    Figure("load_bearing_recall", "load-bearing recall", "load_bearing_recall"),
    Figure("rejected", "rejected per turn", "rejected"),
    Figure("retrieved_precision", "retrieved precision", "retrieved_precision", board=False),
    Figure("retrieved_recall", "retrieved recall", "retrieved_recall", board=False),
    Figure("tokens_in", "tokens in", "tokens_in", board=False, digits=1),
    Figure("tokens_out", "tokens out", "tokens_out", board=False, digits=1),
)
BY_NAME = {f.name: f for f in FIGURES}
BOARD = tuple(f for f in FIGURES if f.board)
SUMMARY = tuple(f for f in FIGURES if f.summary)


def interval_text(ci: Interval | None, digits: int = 3) -> str:
    """An interval as people read it, `[0.786, 1.000]`; empty for none. The one place intervals are written."""
    return "" if ci is None else f"[{ci[0]:.{digits}f}, {ci[1]:.{digits}f}]"


#: How many characters of a content hash a table shows (JSON keeps it whole).
SHOWN_HASH_CHARS = 12


def setting_text(value: Any, field: str = "") -> str:
    """A setting's value in a table cell: a list as `a, b`, a mapping as compact JSON, a hash (`…_hash`) by its
    first `SHOWN_HASH_CHARS` characters, none as `-`."""
    if field.endswith("_hash") and isinstance(value, str):
        return value[:SHOWN_HASH_CHARS]
    if value is None:
        return "-"
    if isinstance(value, (list, tuple)):
        return ", ".join(setting_text(v) for v in value) or "(none)"
    if isinstance(value, Mapping):
        return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return str(value)


@dataclass(frozen=True)
class Scores:
    """One run's figures from its question rows: counts, each figure's mean (None: no row has it) and interval,
    and the latency p50 / p90."""

    questions: int
    answered: int
    passed: int
    values: Mapping[str, float | None]
    ci: Mapping[str, Interval | None]
    latency_p50_ms: float | None
    latency_p90_ms: float | None

    def text(self, name: str) -> str:
        """Figure `name` with its interval, as people read it."""
        return BY_NAME[name].text(self.values[name], self.ci[name])

    def to_json(self) -> dict[str, Any]:
        return {"questions": self.questions, "answered": self.answered, "passed": self.passed, **self.values,
                "latency_p50_ms": self.latency_p50_ms, "latency_p90_ms": self.latency_p90_ms,
                "ci": {k: None if v is None else list(v) for k, v in self.ci.items()}}


#: A run's description in a leaderboard entry (and its JSON), as `experiments.find_run` gives it.
DESCRIBED = ("run_id", "created_at", "provider", "model", "retriever", "mode", "k", "corpus", "corpus_hash", "dataset",
             "dataset_hash", "tags", "config")


@dataclass(frozen=True)
class RunScore:
    """A leaderboard entry: the run (`name`: its name, else its run id; `label`: one line for pickers and charts;
    `run`: its description, `DESCRIBED`), its scores and its settings (`experiments.run_settings`)."""

    name: str
    label: str
    run: Mapping[str, Any]
    scores: Scores
    settings: Mapping[str, Any]

    @property
    def run_id(self) -> str:
        return self.run["run_id"]

    def value(self, name: str) -> float | None:
        return self.scores.values[name]

    def interval(self, name: str) -> Interval | None:
        return self.scores.ci[name]

    def to_json(self, differing: tuple[str, ...] = ()) -> dict[str, Any]:
        return {"name": self.name, "label": self.label, **{k: self.run.get(k) for k in DESCRIBED},
                **self.scores.to_json(), "differs": {f: self.settings.get(f) for f in differing}}


@dataclass(frozen=True)
class Line:
    """One line of a questions file as runs are matched on it: its conversation (None: asked on its own) and
    question (`scoring.by_line`)."""

    question: str
    conversation: str | None = None

    def text(self) -> str:
        """As people read it: the question, after its conversation in brackets when it is a turn of one."""
        return f"[{self.conversation}] {self.question}" if self.conversation is not None else self.question

    def to_json(self) -> dict[str, Any]:
        return {"question": self.question, "conversation": self.conversation}


@dataclass(frozen=True)
class DiffLine:
    """A line whose pass/fail or consulted set differs between the runs: per run name, passed and consulted (None:
    the run did not ask it), its turn, and the assertions it failed, in words (`scoring.failed_assertions`; empty
    when it passed)."""

    line: Line
    expected: tuple[str, ...]
    passed: Mapping[str, bool | None]
    consulted: Mapping[str, tuple[str, ...] | None]
    turn_id: Mapping[str, str | None]
    failed: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {**self.line.to_json(), "passed": dict(self.passed),
                "consulted": {n: None if c is None else list(c) for n, c in self.consulted.items()},
                "expected": list(self.expected), "turn_id": dict(self.turn_id),
                "failed": {n: list(f) for n, f in self.failed.items()}}


def mcnemar_exact(b: int, c: int) -> float:
    """Exact McNemar test: the two-sided binomial p-value of `b` against `c` discordant pairs under p = ½,
    min(1, 2 · Σ_{i ≤ min(b, c)} C(b + c, i) / 2^(b + c)); 1 for no discordant pair."""
    n = b + c
    if n == 0:
        return 1.0
    return min(1.0, 2 * sum(comb(n, i) for i in range(min(b, c) + 1)) / 2 ** n)


@dataclass(frozen=True)
class Paired:
    """Two runs question by question, over the lines both have: how many passed in both, failed in both, and which
    flipped, with the exact McNemar p-value over the flips (`mcnemar_exact`)."""

    a: str
    b: str
    both_passed: int
    both_failed: int
    pass_to_fail: tuple[Line, ...]
    fail_to_pass: tuple[Line, ...]

    @property
    def p_value(self) -> float:
        return mcnemar_exact(len(self.pass_to_fail), len(self.fail_to_pass))

    def p_text(self) -> str:
        """The p-value as people read it, to three significant digits (`0.0215`, `2.98e-08`)."""
        return f"{self.p_value:.3g}"

    def to_json(self) -> dict[str, Any]:
        return {"a": self.a, "b": self.b, "both_passed": self.both_passed, "both_failed": self.both_failed,
                "pass_to_fail": [x.to_json() for x in self.pass_to_fail],
                "fail_to_pass": [x.to_json() for x in self.fail_to_pass], "p_value": self.p_value}


@dataclass(frozen=True)
class Comparison:
    """`runs compare`: the leaderboard, the settings that differ between the runs (`differing`, their columns) and
    those every run shares (`shared`), the changed lines, and each later run paired with the first."""

    runs: tuple[RunScore, ...]
    differing: tuple[str, ...]
    shared: Mapping[str, Any]
    diff: tuple[DiffLine, ...]
    paired: tuple[Paired, ...]

    def to_json(self) -> dict[str, Any]:
        return {"runs": [r.to_json(self.differing) for r in self.runs], "shared": dict(self.shared),
                "diff": [d.to_json() for d in self.diff], "paired": [p.to_json() for p in self.paired]}


@dataclass(frozen=True)
class Regressed:
    """A line the gate names: it passed in the baseline and fails now, or its consulted precision fell."""

    line: Line
    turn_id: str | None
    failed: tuple[str, ...]
    consulted: Mapping[str, tuple[str, ...]]


@dataclass(frozen=True)
class Gate:
    """The regression gate's verdict: `regressed`, one reason per figure that fell below the baseline's interval,
    the regressed lines, and both runs' entries."""

    regressed: bool
    reasons: tuple[str, ...]
    questions: tuple[Regressed, ...]
    baseline: RunScore
    run: RunScore
