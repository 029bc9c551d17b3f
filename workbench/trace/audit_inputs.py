"""What replaying an audited turn (docs/design.md §12, `workbench/replay.py`) reads back from the trace store: the
turn's stored payload (`turn_payloads`), the spans it was assembled from (`audit_spans`) and the passages its
documents showed the model (`retrieved_items` joined to `passages`). Read-only, like every reader."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from .reader import TraceReader, as_reader


def turn_kind(db: str | Path | TraceReader, turn_id: str) -> tuple[bool, str | None]:
    """(whether the turn is stored, its stored payload JSON or None when it has none)."""
    _, rows = as_reader(db).rows("SELECT t.turn_id, p.payload_json FROM turns t LEFT JOIN turn_payloads p "
                                 "USING (turn_id) WHERE t.turn_id = ?", [turn_id])
    return (True, rows[0][1]) if rows else (False, None)


def stored_spans(db: str | Path | TraceReader, trace_ids: Sequence[str]) -> list[str]:
    """The `span_json` of every stored span of these traces, in start order."""
    if not trace_ids:
        return []
    _, rows = as_reader(db).rows("SELECT span_json FROM audit_spans WHERE list_contains(?, trace_id) "
                                 "ORDER BY started_at, span_key", [list(trace_ids)])
    return [text for (text,) in rows]


def shown_passages(db: str | Path | TraceReader, turn_ids: Sequence[str]) -> list[tuple[str, bool, str]]:
    """(doc id, whether a tool call (not a numbered block) showed it, the passage) of every passage these turns'
    documents showed the model."""
    if not turn_ids:
        return []
    _, rows = as_reader(db).rows(
        "SELECT DISTINCT r.doc_id, r.tool_call_seq IS NOT NULL, p.text FROM retrieved_items r "
        "JOIN passages p USING (passage_id) WHERE list_contains(?, r.turn_id)", [list(turn_ids)])
    return [(doc_id, bool(tool), text) for doc_id, tool, text in rows]
