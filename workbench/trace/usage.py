"""Document usage accounting: which documents turns retrieved, cited and consulted (issue 14).

The counting lives in the schema (`doc_usage_for(run_ids)` / `doc_usage`, `doc_usage_totals_for` /
`doc_usage_totals`, migration m008), so SQL users, the CLI, the app and the notebooks get the same
numbers. This module adds what SQL over the trace alone cannot know — the corpus: totals per corpus
category (a document's category is not stored with the turn) and the documents no turn ever
retrieved. Counts are turns: a document retrieved twice in one turn counts once. Consulted is the
honest basis for usage, billing and content decisions; retrieved only says a tool returned it.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any, Sequence

from ..errors import WorkbenchError
from .reader import TraceReader

Rows = tuple[list[str], list[tuple]]
NOT_IN_CORPUS = "(not in this corpus)"


def _runs(run_ids: Sequence[str] | None) -> list[str] | None:
    return list(run_ids) if run_ids else None


def check_runs(reader: TraceReader, run_ids: Sequence[str] | None) -> None:
    """Refuse run ids the database does not have (a typo would silently count nothing)."""
    if not run_ids:
        return
    _, rows = reader.rows("SELECT run_id FROM runs WHERE list_contains(?, run_id)", [list(run_ids)])
    missing = sorted(set(run_ids) - {r for (r,) in rows})
    if missing:
        raise WorkbenchError(f"no run {', '.join(map(repr, missing))} in {reader.path} "
                             "(list them with: workbench sql \"SELECT run_id, kind, provider, created_at FROM runs\")")


def doc_usage(db: str | Path, run_ids: Sequence[str] | None = None) -> Rows:
    """One row per document any turn (of `run_ids`, else all) retrieved: the `doc_usage` columns."""
    reader = TraceReader(db)
    check_runs(reader, run_ids)
    return reader.rows("FROM doc_usage_for(run_ids := ?)", [_runs(run_ids)])


def retrieved_not_consulted(db: str | Path, run_ids: Sequence[str] | None = None, min_turns: int = 2) -> Rows:
    """Documents retrieved in at least `min_turns` turns and consulted in none, most retrieved first: candidates
    for better titles and snippets, or for retrieval noise."""
    reader = TraceReader(db)
    check_runs(reader, run_ids)
    return reader.rows("SELECT doc_id, title, kind, retrieved_turns, cited_turns, runs, first_used, last_used "
                       "FROM doc_usage_for(run_ids := ?) WHERE consulted_turns = 0 AND retrieved_turns >= ? "
                       "ORDER BY retrieved_turns DESC, doc_id", [_runs(run_ids), min_turns])


def never_retrieved(db: str | Path, corpus: Any, run_ids: Sequence[str] | None = None) -> Rows:
    """Documents of `corpus` that no turn (of `run_ids`, else all) retrieved, in corpus order."""
    reader = TraceReader(db)
    check_runs(reader, run_ids)
    _, rows = reader.rows("SELECT doc_id FROM doc_usage_for(run_ids := ?)", [_runs(run_ids)])
    seen = {d for (d,) in rows}
    return (["doc_id", "title", "category", "kind"],
            [(d.doc_id, d.title, d.category, d.kind) for d in corpus.documents if d.doc_id not in seen])


def usage_totals(db: str | Path, run_ids: Sequence[str] | None = None, corpus: Any = None) -> Rows:
    """Totals per category: the corpus's categories when `corpus` is given (with how many of its documents
    each category has, retrieved or not), else per kind of document (view `doc_usage_totals`)."""
    reader = TraceReader(db)
    check_runs(reader, run_ids)
    if corpus is None:
        return reader.rows("FROM doc_usage_totals_for(run_ids := ?)", [_runs(run_ids)])
    _, rows = reader.rows("SELECT doc_id, retrieved_turns, cited_turns, consulted_turns FROM doc_usage_for(run_ids := ?)",
                          [_runs(run_ids)])
    category = {d.doc_id: d.category or "(none)" for d in corpus.documents}
    totals: dict[str, list[int]] = defaultdict(lambda: [0] * 6)
    for d in corpus.documents:
        totals[category[d.doc_id]][0] += 1
    for doc_id, retrieved, cited, consulted in rows:
        t = totals[category.get(doc_id, NOT_IN_CORPUS)]
        t[1] += 1
        t[2] += retrieved
        t[3] += cited
        t[4] += consulted
        t[5] += consulted > 0
    columns = ["category", "documents", "documents_retrieved", "retrieved", "cited", "consulted",
               "documents_consulted"]
    ordered = sorted(totals.items(), key=lambda kv: (-kv[1][4], -kv[1][2], kv[0]))
    return columns, [(name, *t) for name, t in ordered]


def runs_overview(db: str | Path) -> Rows:
    """Every run with its configuration and number of turns, newest first (to choose runs from)."""
    return TraceReader(db).rows(
        "SELECT r.run_id, r.created_at, r.kind, r.provider, r.model, r.retriever, r.mode, count(t.turn_id) AS turns "
        "FROM runs r LEFT JOIN turns t USING (run_id) GROUP BY ALL ORDER BY r.created_at DESC")
