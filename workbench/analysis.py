"""What the notebooks call: tables (pandas) and charts (plotly) over payloads and the trace store.

The notebooks hold parameters, prose and calls to these functions, nothing else, so every number
they show is computed by tested code. This module sits at the notebook layer: right of the trace
store, the session and the `eval` command, whose batch loop it reuses rather than copies. It never
opens DuckDB itself; every query goes through the trace store's read-only reader.
"""

from __future__ import annotations

import json
import os
import random
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

import pandas as pd

from .config import DEMO_CORPUS, PROJECT_ROOT, SHARED_DATA, workbench_home
from .render import source_chips

SETS = ("retrieved", "cited", "consulted")
#: One colour per set, shared by tables and charts (the app uses its own palette).
SET_COLORS = {"retrieved": "#9aa5b1", "cited": "#4c78a8", "consulted": "#2ca02c"}
ROW_LABELS = {"naive": "naive row (everything retrieved)", "honest": "honest row (consulted)"}


# --- locating inputs ---------------------------------------------------------------------------


def notebook_db(name: str) -> Path:
    """The trace database a notebook writes to: `$WORKBENCH_DB`, else `<WORKBENCH_HOME>/notebooks/<name>.duckdb`."""
    db = os.environ.get("WORKBENCH_DB")
    return Path(db).expanduser() if db else workbench_home() / "notebooks" / f"{name}.duckdb"


@dataclass(frozen=True)
class QuestionSet:
    """A corpus and questions with gold (expected) document ids."""

    name: str
    corpus: Path
    questions: Path


def question_set(shared: Path = SHARED_DATA) -> QuestionSet:
    """The Arduino Help Center set when `../shared/data` has it, else the small demo gold set in `data/`."""
    corpus = shared / "arduino-help-center" / "corpus.jsonl"
    questions = PROJECT_ROOT / "benchmarks" / "arduino_questions.jsonl"
    if corpus.exists() and questions.exists():
        return QuestionSet("arduino", corpus, questions)
    return QuestionSet("demo", DEMO_CORPUS, PROJECT_ROOT / "data" / "demo_gold.jsonl")


def load_questions(path: str | Path, limit: int | None = None) -> list[dict[str, Any]]:
    """Question lines `{"question", "expected": [doc ids], "kind"?}`; kind defaults to substantive."""
    rows = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            rows.append({"question": row["question"], "expected": list(row.get("expected") or []),
                         "kind": row.get("kind", "substantive"), "id": row.get("id")})
    return rows[:limit] if limit else rows


def configured_providers(env: dict[str, str] | None = None) -> list[str]:
    """`offline`, plus `ollama` when OLLAMA_HOST is set and `gemini` when its API key is set."""
    from .providers.gemini import KEY_ENVS

    env = os.environ if env is None else env
    names = ["offline"]
    if env.get("OLLAMA_HOST"):
        names.append("ollama")
    if any(env.get(k) for k in KEY_ENVS):
        names.append("gemini")
    return names


def setup_notebook() -> str:
    """Notebook display settings; returns the plotly renderer.

    Figures render as Plotly's own MIME type, which JupyterLab, Notebook 7 and VS Code draw with the
    plotly.js they bundle: nothing is fetched from a CDN, when executed or when opened offline.
    tqdm's "IProgress not found" warning is silenced: notebooks show no progress bars, so they need
    no ipywidgets.
    """
    import warnings

    import plotly.io as pio

    warnings.filterwarnings("ignore", message="IProgress not found")
    pio.renderers.default = "plotly_mimetype"
    return pio.renderers.default


# --- one turn: the three sets side by side ----------------------------------------------------


def three_sets(payload: dict[str, Any]) -> pd.DataFrame:
    """One row per retrieved document: its membership in each set, exposure, and why (DESIGN.md §1)."""
    in_payload = {s["doc_id"] for s in payload.get("sources", [])}
    chips = {s["doc_id"] for s in source_chips(payload)}
    rows = [{"doc_id": d["doc_id"], "title": d.get("title"), "exposure": d["exposure"],
             "retrieved": True, "cited": bool(d.get("cited")), "consulted": bool(d.get("consulted")),
             "reason": d.get("reason"), "label": d.get("label"),
             "in sources array": d["doc_id"] in in_payload, "chip shown": d["doc_id"] in chips}
            for d in payload.get("documents", [])]
    return pd.DataFrame(rows, columns=["doc_id", "title", "exposure", *SETS, "reason", "label",
                                       "in sources array", "chip shown"])


def style_three_sets(table: pd.DataFrame):
    """A pandas Styler for `three_sets`: ✓ marks, each set's column tinted where the document is in it."""
    flags = [c for c in (*SETS, "in sources array", "chip shown") if c in table.columns]
    colors = {**SET_COLORS, "in sources array": "#f2c14e", "chip shown": "#2ca02c"}

    def tint(col: pd.Series) -> list[str]:
        return [f"background-color: {colors[col.name]}33; font-weight: bold" if v else "color: #bbb" for v in col]

    return (table.style.apply(tint, subset=flags)
            .format({c: lambda v: "✓" if v else "·" for c in flags})
            .hide(axis="index"))


def tool_calls_table(payload: dict[str, Any]) -> pd.DataFrame:
    """The turn's tool calls in order: name, exposure, arguments, the documents each returned."""
    rows = [{"seq": t["seq"], "tool": t["name"], "exposure": t["exposure"],
             "args": json.dumps(t.get("args") or {}, ensure_ascii=False), "doc_ids": ", ".join(t["doc_ids"]),
             "n_results": len(t["doc_ids"]), "latency_ms": t.get("latency_ms"), "error": t.get("error")}
            for t in payload.get("tool_calls", [])]
    return pd.DataFrame(rows, columns=["seq", "tool", "exposure", "args", "doc_ids", "n_results", "latency_ms",
                                       "error"])


def sources_table(payload: dict[str, Any]) -> pd.DataFrame:
    """The payload's `sources` array as sent, with whether a client shows each entry as a chip."""
    chips = {s["doc_id"] for s in source_chips(payload)}
    rows = [{"doc_id": s["doc_id"], "title": s.get("title"), "cited": s.get("cited"),
             "consulted": s.get("consulted"), "exposure": s.get("exposure"), "reason": s.get("reason"),
             "chip shown": s["doc_id"] in chips}
            for s in payload.get("sources", [])]
    return pd.DataFrame(rows, columns=["doc_id", "title", "cited", "consulted", "exposure", "reason", "chip shown"])


def rejected_table(payload: dict[str, Any]) -> pd.DataFrame:
    """Rejected citations: the raw target, why, and the nearest retrieved id (explains, never corrects)."""
    return pd.DataFrame(payload.get("rejected_citations", []),
                        columns=["target", "reason", "nearest_doc_id", "edit_distance"])


# --- batches across configurations -------------------------------------------------------------


def run_question_set(questions: Sequence[dict[str, Any] | str], *, corpus: Any, db: str | Path,
                     retrievers: Iterable[str] = ("bm25",), providers: Iterable[str] = ("offline",),
                     mode: str = "agent", k: int = 5, faults: tuple[str, ...] = (),
                     new_run: bool = False) -> pd.DataFrame:
    """Ask every question under each retriever × provider, one `eval` run each, into the trace store at `db`.

    Re-running with the same inputs resumes (and so skips) the runs already complete, as `workbench
    eval` does. Returns one row per run.
    """
    from .batch import run_eval
    from .corpus import Corpus, load_corpus
    from .session import Session

    texts = [q if isinstance(q, str) else q["question"] for q in questions]
    corpus = corpus if isinstance(corpus, Corpus) else load_corpus(corpus)
    rows = []
    for retriever in retrievers:
        session = Session.open(corpus, retriever, trace_db=db)
        for provider in providers:
            r = run_eval(session, texts, provider=provider, mode=mode, k=k, faults=tuple(faults),
                         new_run=new_run, progress=False)
            rows.append({"run_id": r.run_id, "provider": provider, "retriever": retriever, "mode": mode, "k": k,
                         "faults": ",".join(faults), "asked": r.asked, "skipped": r.skipped, "failed": r.failed,
                         "seconds": round(r.seconds, 2)})
    return pd.DataFrame(rows)


def seed_demo_traces(db: str | Path, *, corpus: Any = None, retriever: str = "bm25", provider: str = "offline",
                     mode: str = "agent") -> pd.DataFrame:
    """Something to analyse: the demo gold set asked cleanly, then again with the offline `corrupt_id`
    fault so there are rejected citations (both resumed, not repeated, on a second call)."""
    questions = load_questions(PROJECT_ROOT / "data" / "demo_gold.jsonl")
    corpus = corpus or DEMO_CORPUS
    return pd.concat([
        run_question_set(questions, corpus=corpus, db=db, retrievers=[retriever], providers=[provider], mode=mode),
        run_question_set(questions, corpus=corpus, db=db, retrievers=[retriever], providers=["offline"], mode=mode,
                         faults=("corrupt_id",)),
    ], ignore_index=True)


def _reader(db: str | Path):
    from .trace import TraceReader

    return TraceReader(db)


def _in_list(run_ids: Sequence[str]) -> tuple[str, list[str]]:
    ids = list(run_ids)
    return ", ".join("?" for _ in ids) or "NULL", ids


def set_sizes(db: str | Path, run_ids: Sequence[str]) -> pd.DataFrame:
    """Per turn of the given runs: configuration and the sizes of the three sets (the `turn_sets` view)."""
    marks, ids = _in_list(run_ids)
    return _reader(db).df(
        "SELECT run_id, provider, retriever, mode, question, question_kind, status, "
        "n_retrieved AS retrieved, n_cited AS cited, n_consulted AS consulted, n_rejected AS rejected "
        f"FROM turn_sets WHERE run_id IN ({marks}) ORDER BY started_at", ids)


def _config_label(df: pd.DataFrame) -> pd.Series:
    return df["retriever"] + " · " + df["provider"] + " · " + df["mode"]


def set_sizes_figure(sizes: pd.DataFrame, title: str = "Mean set size per configuration"):
    """Grouped bars: mean size of each set per configuration; the gap between grey and green is the lie."""
    import plotly.graph_objects as go

    df = sizes.assign(config=_config_label(sizes))
    means = df.groupby("config", sort=False)[list(SETS)].mean()
    fig = go.Figure()
    for name in SETS:
        fig.add_bar(name=name, x=list(means.index), y=list(means[name].round(2)), marker_color=SET_COLORS[name])
    fig.update_layout(barmode="group", title=title, yaxis_title="documents per turn (mean)",
                      xaxis_title="retriever · provider · mode", height=420)
    return fig


def gold_rows(db: str | Path, run_ids: Sequence[str], questions: Sequence[dict[str, Any]]) -> pd.DataFrame:
    """Per turn and row type: the naive row (retrieved set) and the honest row (consulted set) against gold.

    Only substantive questions with expected documents are scored. precision = |row ∩ gold| / |row|
    (None for an empty row: it claims nothing), recall = |row ∩ gold| / |gold|.
    """
    gold = {q["question"]: set(q["expected"]) for q in questions
            if q.get("kind", "substantive") == "substantive" and q.get("expected")}
    marks, ids = _in_list(run_ids)
    sets = _reader(db).df(
        "SELECT t.run_id, r.provider, r.retriever, r.mode, t.turn_id, t.question, "
        "coalesce(list(s.doc_id ORDER BY s.position) FILTER (WHERE s.doc_id IS NOT NULL), []) AS retrieved, "
        "coalesce(list(s.doc_id ORDER BY s.position) FILTER (WHERE s.consulted), []) AS consulted "
        "FROM turns t JOIN runs r USING (run_id) LEFT JOIN sources s USING (turn_id) "
        f"WHERE t.run_id IN ({marks}) GROUP BY ALL ORDER BY t.run_id, t.turn_id", ids)
    rows = []
    for t in sets.itertuples(index=False):
        expected = gold.get(t.question)
        if not expected:
            continue
        for row, docs in (("naive", t.retrieved), ("honest", t.consulted)):
            docs = list(docs)
            hits = len(set(docs) & expected)
            rows.append({"run_id": t.run_id, "provider": t.provider, "retriever": t.retriever, "mode": t.mode,
                         "question": t.question, "row": row, "size": len(docs), "hits": hits,
                         "precision": hits / len(docs) if docs else None, "recall": hits / len(expected)})
    return pd.DataFrame(rows, columns=["run_id", "provider", "retriever", "mode", "question", "row", "size", "hits",
                                       "precision", "recall"])


def consulted_precision(rows: pd.DataFrame) -> pd.DataFrame:
    """Per configuration and row: precision over non-empty rows, strict precision (empty = 0), recall, size."""
    out = []
    for (run_id, provider, retriever, mode, row), g in rows.groupby(
            ["run_id", "provider", "retriever", "mode", "row"], sort=False):
        answered = g["precision"].dropna()
        out.append({"run_id": run_id, "provider": provider, "retriever": retriever, "mode": mode, "row": row,
                    "questions": len(g), "empty rows": int(g["precision"].isna().sum()),
                    "precision": round(answered.mean(), 3) if len(answered) else None,
                    "strict precision": round(answered.sum() / len(g), 3),
                    "recall": round(g["recall"].mean(), 3), "mean size": round(g["size"].mean(), 2)})
    return pd.DataFrame(out)


def precision_figure(summary: pd.DataFrame, title: str = "Precision against gold: naive row vs honest row"):
    """Grouped bars per configuration: precision of the naive row beside the honest (consulted) row."""
    import plotly.graph_objects as go

    df = summary.assign(config=_config_label(summary))
    fig = go.Figure()
    for row, color in (("naive", SET_COLORS["retrieved"]), ("honest", SET_COLORS["consulted"])):
        part = df[df["row"] == row]
        fig.add_bar(name=ROW_LABELS[row], x=list(part["config"]), y=list(part["precision"]), marker_color=color,
                    text=[f"{p:.2f}" if p is not None and p == p else "—" for p in part["precision"]],
                    textposition="outside",
                    customdata=list(zip(part["recall"], part["mean size"])),
                    hovertemplate="precision %{y:.3f}<br>recall %{customdata[0]:.3f}"
                                  "<br>mean size %{customdata[1]:.2f}<extra></extra>")
    fig.update_layout(barmode="group", title=title, yaxis_title="precision (non-empty rows)",
                      yaxis_range=[0, 1.1], xaxis_title="retriever · provider · mode", height=420)
    return fig


# --- faithfulness -------------------------------------------------------------------------------


def ask_and_judge(questions: Sequence[dict[str, Any] | str], *, corpus: Any = None, db: str | Path,
                  judge: str = "lexical", retriever: str = "bm25", provider: str = "offline",
                  mode: str = "agent", k: int = 5) -> tuple[str, pd.DataFrame, pd.DataFrame]:
    """Ask each question (traced), judge every claim against what it cites, store the claims with the turn.

    Returns (run_id, one row per claim, one row per turn with ALCE citation recall and precision).
    """
    from .session import Session

    session = Session.open(corpus, retriever, trace_db=db)
    run_id = session.tracer.new_run(kind="eval")
    claims, turns = [], []
    for q in questions:
        answer = session.ask(q if isinstance(q, str) else q["question"], provider=provider, mode=mode, k=k,
                             run_id=run_id, judge=judge)  # the claims are stored with the turn
        result = answer.faithfulness
        if result is None:  # the turn failed: nothing to judge
            continue
        claims.extend({"question": answer.record.question, **c} for c in result.rows())
        turns.append({"turn_id": result.turn_id, "question": answer.record.question, "claims": len(result.claims),
                      "citation_recall": result.citation_recall, "citation_precision": result.citation_precision,
                      "uncited_claims": len(result.uncited_claims), "wrong_excerpts": len(result.wrong_excerpts),
                      "generated_only": len(result.generated_only)})
    claim_df = pd.DataFrame(claims)
    if not claim_df.empty:
        claim_df["cited_doc_ids"] = claim_df["cited_doc_ids"].map(", ".join)
    return run_id, claim_df, pd.DataFrame(turns)


_MARKER = re.compile(r"\s*\[\d+\]")


_EXPERTQA_COLUMNS = ["claim_id", "claim", "evidence", "support", "complete", "system"]


def expertqa_status(path: str | Path, n: int | None = 200) -> str:
    """One line saying which ExpertQA sample is used, or that the comparison is skipped and why."""
    path = Path(path)
    if not path.exists():
        return (f"SKIP: ExpertQA claims not found at {path} — the judge comparison is skipped (empty tables). "
                "Put the shared benchmark data in ../shared/data next to the repository to run it.")
    return f"ExpertQA: a seeded sample of {n or 'all'} cited claims from {path}"


def load_expertqa(path: str | Path, n: int | None = 200, seed: int = 0) -> pd.DataFrame:
    """A seeded random sample of `n` ExpertQA claims that cite passage text (all of them when n is None).

    Columns: claim_id, claim (markers removed), evidence (the cited passages), support (expert label),
    complete (support == "Complete"), system. An absent file gives an empty table (see `expertqa_status`).
    """
    path = Path(path)
    if not path.exists():
        return pd.DataFrame(columns=_EXPERTQA_COLUMNS)
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        r = json.loads(line)
        cited = set(r.get("cited_markers") or [])
        evidence = [e["text"] for e in r.get("evidence") or [] if e.get("text") and e.get("marker") in cited]
        if cited and evidence:
            rows.append({"claim_id": r["claim_id"], "claim": _MARKER.sub("", r["claim"]).strip(),
                         "evidence": evidence, "support": r.get("support"),
                         "complete": r.get("support") == "Complete", "system": r.get("system")})
    if n is not None and n < len(rows):
        rows = random.Random(seed).sample(rows, n)
    return pd.DataFrame(rows, columns=_EXPERTQA_COLUMNS)


def judge_scores(claims: pd.DataFrame, judges: Iterable[str] = ("lexical",), **judge_options: Any) -> pd.DataFrame:
    """Every judge on every claim (long format): claim_id, support, complete, judge, score, verdict, seconds."""
    from .faithfulness import get_judge

    items = list(zip(claims["claim"], claims["evidence"]))
    frames = []
    for name in judges:
        judge = get_judge(name, **judge_options.get(name, {}))
        t0 = time.perf_counter()
        results = judge.judge_many(items)
        seconds = time.perf_counter() - t0
        frames.append(pd.DataFrame({
            "claim_id": claims["claim_id"].to_numpy(), "support": claims["support"].to_numpy(),
            "complete": claims["complete"].to_numpy(), "judge": name,
            "score": [j.score for j in results], "verdict": [j.verdict for j in results], "seconds": seconds}))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(
        columns=["claim_id", "support", "complete", "judge", "score", "verdict", "seconds"])


def auroc(scores: Sequence[float], labels: Sequence[bool]) -> float | None:
    """Area under the ROC curve (Mann–Whitney, average ranks for ties); None when a class is missing."""
    s = pd.Series(list(scores), dtype=float).fillna(0.0)
    y = pd.Series(list(labels), dtype=bool)
    n1, n0 = int(y.sum()), int((~y).sum())
    if n1 == 0 or n0 == 0:
        return None
    ranks = s.rank(method="average")
    return float((ranks[y.to_numpy()].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))


def balanced_accuracy(predicted: Sequence[bool], labels: Sequence[bool]) -> float | None:
    """Mean of the true-positive and true-negative rates; None when a class is missing."""
    p = pd.Series(list(predicted), dtype=bool).to_numpy()
    y = pd.Series(list(labels), dtype=bool).to_numpy()
    if y.all() or not y.any():
        return None
    return float(((p & y).sum() / y.sum() + (~p & ~y).sum() / (~y).sum()) / 2)


def judge_summary(scores: pd.DataFrame) -> pd.DataFrame:
    """Per judge: AUROC and balanced accuracy (verdict `supported` vs label Complete), claims per second."""
    out = []
    for name, g in scores.groupby("judge", sort=False):
        a = auroc(g["score"], g["complete"])
        ba = balanced_accuracy(g["verdict"] == "supported", g["complete"])
        seconds = float(g["seconds"].iloc[0])
        out.append({"judge": name, "claims": len(g), "complete share": round(float(g["complete"].mean()), 3),
                    "AUROC (Complete vs rest)": None if a is None else round(a, 3),
                    "balanced accuracy": None if ba is None else round(ba, 3),
                    "unknown verdicts": int((g["verdict"] == "unknown").sum()),
                    "claims/s": round(len(g) / seconds) if seconds > 0 else None})
    return pd.DataFrame(out)


def calibration(scores: pd.DataFrame, bins: int = 10) -> pd.DataFrame:
    """Per judge and score bin: mean score and the share of claims the experts labelled Complete."""
    df = scores.assign(score=scores["score"].fillna(0.0).clip(0, 1))
    df["bin"] = (df["score"] * bins).astype(int).clip(upper=bins - 1)
    return (df.groupby(["judge", "bin"], sort=False)
            .agg(n=("score", "size"), mean_score=("score", "mean"), frac_complete=("complete", "mean"))
            .reset_index())


def calibration_figure(table: pd.DataFrame, title: str = "Judge score vs share labelled Complete"):
    """Reliability diagram: one line per judge over score bins, marker size by claim count."""
    import plotly.graph_objects as go

    fig = go.Figure()
    fig.add_scatter(x=[0, 1], y=[0, 1], mode="lines", name="perfect calibration",
                    line={"dash": "dot", "color": "gray"})
    for name, g in table.groupby("judge", sort=False):
        fig.add_scatter(x=list(g["mean_score"]), y=list(g["frac_complete"]), mode="lines+markers", name=name,
                        text=[f"n={n}" for n in g["n"]], marker={"size": [4 + n ** 0.5 for n in g["n"]]})
    fig.update_layout(title=title, xaxis_title="judge score (bin mean)", yaxis_title="fraction Complete",
                      xaxis_range=[0, 1], yaxis_range=[0, 1], height=450)
    return fig


# --- document usage (issue 14) ------------------------------------------------------------------


def _frame(result: tuple[list[str], list[tuple]]) -> pd.DataFrame:
    columns, rows = result
    return pd.DataFrame(rows, columns=columns)


def document_usage(db: str | Path, run_ids: Sequence[str] | None = None) -> pd.DataFrame:
    """One row per document: turns in which it was retrieved, cited and consulted (view `doc_usage`)."""
    from .trace import usage

    return _frame(usage.doc_usage(db, run_ids))


def usage_totals(db: str | Path, corpus: Any = None, run_ids: Sequence[str] | None = None) -> pd.DataFrame:
    """Totals per corpus category (when `corpus` is given: a path or a loaded corpus), else per kind."""
    from .trace import usage

    return _frame(usage.usage_totals(db, run_ids, corpus_of(corpus) if corpus is not None else None))


def retrieved_not_consulted(db: str | Path, run_ids: Sequence[str] | None = None, min_turns: int = 2) -> pd.DataFrame:
    """Documents retrieved in at least `min_turns` turns and never consulted."""
    from .trace import usage

    return _frame(usage.retrieved_not_consulted(db, run_ids, min_turns))


def never_retrieved(db: str | Path, corpus: Any = None, run_ids: Sequence[str] | None = None) -> pd.DataFrame:
    """Documents of `corpus` (default: the demo corpus) that no turn retrieved."""
    from .trace import usage

    return _frame(usage.never_retrieved(db, corpus_of(corpus), run_ids))


def corpus_of(corpus: Any):
    """`corpus` loaded (a path), as is (a loaded corpus), or the demo corpus (None)."""
    from .corpus import Corpus, load_corpus

    return corpus if isinstance(corpus, Corpus) else load_corpus(corpus or DEMO_CORPUS)


def usage_figure(usage: pd.DataFrame, top: int = 15, title: str = "Most-used documents: turns per set"):
    """Horizontal grouped bars for the `top` most consulted documents: retrieved, cited and consulted turns.

    Titles are corpus text: entity-escaped so plotly draws them literally (it renders `<a href>` in labels)."""
    import plotly.graph_objects as go

    from .render import plotly_text

    df = usage.head(top).iloc[::-1]  # plotly draws the first row at the bottom
    labels = [plotly_text(f"{t or d} ({d})") for t, d in zip(df["title"], df["doc_id"])]
    fig = go.Figure()
    for name in SETS:
        fig.add_bar(name=name, y=labels, x=list(df[f"{name}_turns"]), orientation="h",
                    marker_color=SET_COLORS[name])
    fig.update_layout(barmode="group", title=title, xaxis_title="turns", height=max(320, 28 * len(df) + 120),
                      legend_title_text="", margin=dict(l=10, r=10, t=50, b=40))
    return fig
