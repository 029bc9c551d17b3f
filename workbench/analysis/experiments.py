"""Experiment runs as tables and a chart (docs/experiments.md): the leaderboard with its 95 % intervals,
the per-question diff, and error bars. Scoring itself is `workbench.trace.scoring`; this only lays it out
for notebook 02 and the app's Experiments page."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import pandas as pd

from ..render.escaping import plotly_text
from ..render.sources import SET_COLORS
from ..trace.results import BOARD, BY_NAME, Comparison, interval_text, setting_text
from .charts import LOAD_BEARING_COLOR
from .sets import ROW_LABELS

#: What the error-bar chart draws (all in [0, 1]), with its colour.
CHARTED = {"pass_rate": "#555555", "consulted_precision": SET_COLORS["consulted"],
           "consulted_recall": "#7fbf7f"}


def compare_runs(db: str | Path, runs: Sequence[str]) -> Comparison:
    """The leaderboard, per-question diff and paired comparison of the named runs (`workbench runs compare`)."""
    from ..trace.scoring import compare

    return compare(db, runs)


def _figure_cells(value: float | None, ci, label: str, digits: int = 3) -> dict[str, Any]:
    return {label: None if value is None else round(value, digits), f"{label} 95% CI": interval_text(ci) or None}


def leaderboard_table(result: Comparison) -> pd.DataFrame:
    """One row per run: every setting that differs between the runs (those they share: `shared_text`), then its
    counts and each figure with its interval."""
    rows = []
    for r in result.runs:
        row: dict[str, Any] = {"run": r.name if r.name != r.run_id else r.label}
        row.update((field, setting_text(r.settings.get(field), field)) for field in result.differing)
        row.update(questions=r.scores.questions, passed=r.scores.passed)
        for figure in BOARD:
            row.update(_figure_cells(r.value(figure.name), r.interval(figure.name), figure.label, figure.digits))
        row["latency p50 (ms)"] = r.scores.latency_p50_ms
        row["latency p90 (ms)"] = r.scores.latency_p90_ms
        rows.append(row)
    return pd.DataFrame(rows)


def shared_text(result: Comparison) -> str:
    """The settings every compared run shares, as one line: `provider offline · retriever bm25 · …`."""
    return " · ".join(f"{field} {setting_text(value, field)}" for field, value in result.shared.items())


def paired_table(result: Comparison) -> pd.DataFrame:
    """Per later run against the first: the lines that passed in both, failed in both, flipped each way, and the
    exact McNemar p-value over the flips."""
    return pd.DataFrame([{"runs": f"{p.a} → {p.b}", "both passed": p.both_passed, "both failed": p.both_failed,
                          "pass → fail": len(p.pass_to_fail), "fail → pass": len(p.fail_to_pass),
                          "McNemar p (exact)": p.p_text()} for p in result.paired])


def flips_table(result: Comparison) -> pd.DataFrame:
    """Each line that flipped between the first run and a later one: which way, and the line."""
    return pd.DataFrame([{"runs": f"{p.a} → {p.b}", "flip": way, "question": line.text()}
                         for p in result.paired
                         for way, lines in (("pass → fail", p.pass_to_fail), ("fail → pass", p.fail_to_pass))
                         for line in lines], columns=["runs", "flip", "question"])


def diff_table(result: Comparison, link: str | None = None) -> pd.DataFrame:
    """One row per changed line: its question (and conversation, when a line has one); with `link` (a URL prefix such
    as `?turn=`), a link to each run's turn, first, where a wide table cannot push it out of sight; then passed and
    why it failed (the failed assertions, as `runs compare` prints them) per run, expected, and consulted per run."""
    names = [r.name for r in result.runs]
    conversations = any(d.line.conversation is not None for d in result.diff)
    rows = []
    for d in result.diff:
        row: dict[str, Any] = {"question": d.line.question}
        if conversations:  # two conversations may ask the same follow-up: the line is its conversation's
            row["conversation"] = d.line.conversation
        if link is not None:
            for n in names:
                tid = d.turn_id[n]
                row[f"{n}: turn"] = f"{link}{tid}" if tid else None
        for n in names:
            row[f"{n}: passed"] = d.passed[n]
            row[f"{n}: failed because"] = "; ".join(d.failed.get(n, ()))
        row["expected"] = ", ".join(d.expected)
        for n in names:
            c = d.consulted[n]
            row[f"{n}: consulted"] = "(not asked)" if c is None else ", ".join(c) or "(none)"
        rows.append(row)
    return pd.DataFrame(rows)


def _bars(result: Comparison, figures: dict[str, tuple[str, str]], title: str, axis: str):
    """Grouped bars per run, one trace per figure (label, colour), with each figure's interval as error bars and its
    value written on it (a value of 0 draws no bar: its label at the baseline shows it is there); a figure no run
    has is left out."""
    import plotly.graph_objects as go

    fig = go.Figure()
    names = [plotly_text(r.label) for r in result.runs]
    for figure, (label, color) in figures.items():
        values = [r.value(figure) for r in result.runs]
        if all(v is None for v in values):
            continue
        cis = [r.interval(figure) or (v, v) for r, v in zip(result.runs, values)]
        fig.add_bar(name=label, x=names, y=values, marker_color=color, textposition="outside", cliponaxis=False,
                    text=["" if v is None else f"{v:.2f}" for v in values], textfont=dict(size=11),
                    error_y=dict(type="data", symmetric=False,
                                 array=[(c[1] - v) if v is not None else 0 for c, v in zip(cis, values)],
                                 arrayminus=[(v - c[0]) if v is not None else 0 for c, v in zip(cis, values)]))
    fig.update_layout(barmode="group", title=title, yaxis=dict(range=[0, 1.05], title=axis), height=420,
                      legend_title_text="")
    return fig


def leaderboard_figure(result: Comparison, title: str = "Runs against their expectations (95% bootstrap intervals)"):
    """Grouped bars per run — pass rate, consulted precision and recall — with the intervals as error bars."""
    return _bars(result, {f: (BY_NAME[f].label, color) for f, color in CHARTED.items()}, title, "share")


def question_table(db: str | Path, run_ids: Sequence[str]) -> pd.DataFrame:
    """Per run and question: passed, each assertion, the retrieved / consulted / load-bearing sets against
    `expected` and the per-turn figures (the `expectation_results` view, docs/experiments.md)."""
    from ..trace.experiments import list_runs, run_label
    from ..trace.scoring import question_rows

    labels = {r["run_id"]: run_label(r) for r in list_runs(db)}
    df = pd.DataFrame(question_rows(db, list(run_ids)))
    return df.assign(run=df["run_id"].map(labels)) if len(df) else df


#: The three rows a run can show, as figure prefixes, labels and colours: the naive row (retrieved), the honest
#: row (consulted) and the load-bearing row (verified turns).
ROWS = {"retrieved": (ROW_LABELS["naive"], SET_COLORS["retrieved"]),
        "consulted": (ROW_LABELS["honest"], SET_COLORS["consulted"]),
        "load_bearing": (ROW_LABELS["load_bearing"], LOAD_BEARING_COLOR)}


def rows_figure(result: Comparison, measure: str = "precision",
                title: str = "Precision against expected documents: naive, honest and load-bearing rows"):
    """Grouped bars per run: `measure` (precision or recall) of each row against `expected`, with 95 % intervals."""
    return _bars(result, {f"{row}_{measure}": spec for row, spec in ROWS.items()}, title, measure)


def rows_table(result: Comparison) -> pd.DataFrame:
    """Per run and row (naive, honest, load-bearing where verified): precision and recall against `expected`, each
    with its 95 % interval — the table behind `rows_figure`."""
    out = []
    for r in result.runs:
        for row, (label, _) in ROWS.items():
            if r.value(f"{row}_precision") is None and r.value(f"{row}_recall") is None:
                continue
            entry: dict[str, Any] = {"run": r.label, "row": label}
            for measure in ("precision", "recall"):
                entry.update(_figure_cells(r.value(f"{row}_{measure}"), r.interval(f"{row}_{measure}"), measure))
            out.append(entry)
    return pd.DataFrame(out)
