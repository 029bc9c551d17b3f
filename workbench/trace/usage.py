"""Document usage accounting: which documents turns retrieved, consulted, cited and linked (issue 14, 25).

The counting lives in the schema (`doc_usage_for(run_ids, corpus_ids)` / `doc_usage`,
`doc_usage_totals_for` / `doc_usage_totals`, migrations m008–m010), so SQL users, the CLI, the app and
the notebooks get the same numbers. Usage is counted per corpus (the run's `corpus_id`). This module
adds what SQL over the trace alone cannot know — the corpus: totals per corpus category (a corpus
folder; a document's category is not stored with the turn) and the documents no turn ever retrieved.
Counts are turns: a document retrieved twice in one turn counts once. Consulted is the honest basis
for usage, billing and content decisions; retrieved only says a tool returned it, and a listed link
(`listed_link_turns`) only that a listing answer linked a title the model never read.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any, Sequence

from ..errors import WorkbenchError
from .reader import TraceReader

Rows = tuple[list[str], list[tuple]]
NO_LONGER_IN_CORPUS = "(no longer in the corpus)"


def _list(ids: Sequence[str] | None) -> list[str] | None:
    return list(ids) if ids else None


def check_runs(reader: TraceReader, run_ids: Sequence[str] | None) -> None:
    """Refuse run ids the database does not have (a typo would silently count nothing)."""
    if not run_ids:
        return
    _, rows = reader.rows("SELECT run_id FROM runs WHERE list_contains(?, run_id)", [list(run_ids)])
    missing = sorted(set(run_ids) - {r for (r,) in rows})
    if missing:
        raise WorkbenchError(f"no run {', '.join(map(repr, missing))} in {reader.path} "
                             "(list them with: workbench sql \"SELECT run_id, kind, provider, created_at FROM runs\")")


def doc_usage(db: str | Path, run_ids: Sequence[str] | None = None, corpus_ids: Sequence[str] | None = None) -> Rows:
    """One row per document (per corpus) any turn (of `run_ids`, else all; on `corpus_ids`, else any corpus)
    retrieved: the `doc_usage` columns."""
    reader = TraceReader(db)
    check_runs(reader, run_ids)
    return reader.rows("FROM doc_usage_for(run_ids := ?, corpus_ids := ?)", [_list(run_ids), _list(corpus_ids)])


def retrieved_not_consulted(db: str | Path, run_ids: Sequence[str] | None = None, min_turns: int = 2) -> Rows:
    """Documents retrieved in at least `min_turns` turns and consulted in none, most retrieved first: candidates
    for better titles and snippets, or for retrieval noise."""
    return unconsulted(doc_usage(db, run_ids), min_turns)


def never_retrieved(db: str | Path, corpus: Any, run_ids: Sequence[str] | None = None) -> Rows:
    """Documents of `corpus` that no turn on it (of `run_ids`, else all) retrieved, in corpus order."""
    return not_retrieved(doc_usage(db, run_ids, [corpus.corpus_id]), corpus)


def usage_totals(db: str | Path, run_ids: Sequence[str] | None = None, corpus: Any = None) -> Rows:
    """Totals per category (corpus folder) of `corpus` when it is given, over the turns on it (with how many of
    its documents each category has, retrieved or not); else per corpus and kind of document (view
    `doc_usage_totals`)."""
    if corpus is not None:
        return category_totals(doc_usage(db, run_ids, [corpus.corpus_id]), corpus)
    reader = TraceReader(db)
    check_runs(reader, run_ids)
    return reader.rows("FROM doc_usage_totals_for(run_ids := ?)", [_list(run_ids)])


# The same answers from `doc_usage` rows already read (the app's usage page reads them once per rerun).

def _column(usage: Rows, *names: str) -> list[int]:
    return [usage[0].index(n) for n in names]


def unconsulted(usage: Rows, min_turns: int = 2) -> Rows:
    """`retrieved_not_consulted` over `doc_usage` rows."""
    names = ["corpus_id", "doc_id", "title", "kind", "retrieved_turns", "listed_link_turns", "runs", "first_used",
             "last_used"]
    picks, (consulted, retrieved) = _column(usage, *names), _column(usage, "consulted_turns", "retrieved_turns")
    rows = [r for r in usage[1] if r[consulted] == 0 and r[retrieved] >= min_turns]
    rows.sort(key=lambda r: (-r[retrieved], r[picks[0]] or "", r[picks[1]]))
    return names, [tuple(r[i] for i in picks) for r in rows]


def not_retrieved(usage: Rows, corpus: Any) -> Rows:
    """`never_retrieved` over `doc_usage` rows (only those on `corpus` count)."""
    doc, corpus_id = _column(usage, "doc_id", "corpus_id")
    seen = {r[doc] for r in usage[1] if r[corpus_id] == corpus.corpus_id}
    return (["doc_id", "title", "category", "kind"],
            [(d.doc_id, d.title, d.category, d.kind) for d in corpus.documents if d.doc_id not in seen])


def category_totals(usage: Rows, corpus: Any) -> Rows:
    """`usage_totals` per category (corpus folder) of `corpus`, over the `doc_usage` rows on it: documents of
    other corpora are not counted; documents of this corpus id it no longer holds are `(no longer in the corpus)`."""
    corpus_id, *picks = _column(usage, "corpus_id", "doc_id", "retrieved_turns", "consulted_turns",
                                "cited_read_turns", "listed_link_turns")
    category = {d.doc_id: d.category or "(none)" for d in corpus.documents}
    totals: dict[str, list[int]] = defaultdict(lambda: [0] * 7)
    for d in corpus.documents:
        totals[category[d.doc_id]][0] += 1
    for doc_id, retrieved, consulted, cited_read, listed in ([r[i] for i in picks] for r in usage[1]
                                                              if r[corpus_id] == corpus.corpus_id):
        t = totals[category.get(doc_id, NO_LONGER_IN_CORPUS)]
        t[1] += 1
        t[2] += retrieved
        t[3] += consulted
        t[4] += cited_read
        t[5] += listed
        t[6] += consulted > 0
    columns = ["category", "documents", "documents_retrieved", "retrieved", "consulted", "cited_read", "listed_links",
               "documents_consulted"]
    ordered = sorted(totals.items(), key=lambda kv: (-kv[1][3], -kv[1][2], kv[0]))
    return columns, [(name, *t) for name, t in ordered]
