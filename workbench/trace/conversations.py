"""Conversations in the trace store (docs/design.md §11): list them, and rebuild one's turns.

A follow-up asked from the CLI (`ask --conversation ID`), a resumed `eval` or the app's "reopen" needs the
records of the conversation's earlier turns: `load_conversation` rebuilds them from the stored rows (the
question, answer and mode, each tool call with its arguments and the documents it returned, each excerpt
with its number and text), taking titles, URLs and kinds from the corpus being asked (they are what the
model would be shown again). Only turns that ended `ok` are returned: a failed turn's question without an
answer is not part of what the model is given (its position still counts). Read-only, like every reader.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..conversation import history_turn
from ..corpus import Corpus
from ..types import Cut, Excerpt, ResultItem, ToolCall, TurnRecord
from .reader import TraceReader, as_reader


def _with_conversations(db: str | Path | TraceReader) -> TraceReader | None:
    """A reader of `db`, or None when it holds no conversations: no file yet, or one from before m012 (whose
    `turn_context` came with `turns.conversation_id`)."""
    reader = as_reader(db)
    if not Path(reader.path).exists():
        return None
    reader.check()
    return reader if reader.schema.has("turn_context") else None


def _asked_with(reader: TraceReader, turn_ids: list[str]) -> dict[str, list[tuple[str, int, str]]]:
    """Per turn, the (earlier turn id, its position, context state) of each earlier turn it was asked with
    (`turn_context`), oldest first."""
    _, rows = reader.rows("""
        SELECT turn_id, earlier_turn_id, earlier_position, context FROM turn_context
        WHERE turn_id IN (SELECT unnest(?::VARCHAR[])) ORDER BY turn_id, earlier_position""", [turn_ids])
    out: dict[str, list[tuple[str, int, str]]] = {}
    for tid, earlier, position, state in rows:
        out.setdefault(tid, []).append((earlier, position, state))
    return out


def list_conversations(db: str | Path | TraceReader) -> list[dict[str, Any]]:
    """Every conversation in the store, latest first: id, turns, first question, first and last turn times."""
    reader = _with_conversations(db)
    if reader is None:
        return []
    columns, rows = reader.rows("""
        SELECT conversation_id, count(*) AS turns, max(position) AS last_position,
               arg_min(question, position) AS first_question, min(started_at) AS started_at,
               max(started_at) AS last_at
        FROM turns WHERE conversation_id IS NOT NULL
        GROUP BY conversation_id ORDER BY last_at DESC NULLS LAST, conversation_id""")
    return [dict(zip(columns, r)) for r in rows]


def next_position(db: str | Path | TraceReader, conversation_id: str) -> int:
    """The position the next turn of `conversation_id` takes (1 for a new conversation)."""
    reader = _with_conversations(db)
    if reader is None:
        return 1
    _, rows = reader.rows("SELECT coalesce(max(position), 0) FROM turns WHERE conversation_id = ?", [conversation_id])
    return int(rows[0][0]) + 1


def load_conversation(db: str | Path | TraceReader, conversation_id: str, corpus: Corpus) -> list[TurnRecord]:
    """The `ok` turns of `conversation_id`, oldest first, rebuilt as `TurnRecord`s (empty: a new conversation)."""
    reader = _with_conversations(db)
    if reader is None:
        return []
    _, turns = reader.rows("""
        SELECT t.turn_id, t.question, coalesce(t.answer, ''), t.status, t.position, r.mode, t.started_at
        FROM turns t JOIN runs r USING (run_id)
        WHERE t.conversation_id = ? AND t.status = 'ok' ORDER BY t.position, t.started_at""", [conversation_id])
    if not turns:
        return []
    ids = [t[0] for t in turns]
    cuts = "cut_json" if "m019_tool_call_cuts" in reader.schema.applied else "NULL"  # older: no cut recorded
    _, calls = reader.rows(f"""
        SELECT turn_id, seq, name, exposure, args_json, error, call_id, latency_ms, {cuts}
        FROM tool_calls WHERE turn_id IN (SELECT unnest(?::VARCHAR[])) ORDER BY turn_id, seq""", [ids])
    _, items = reader.rows("""
        SELECT i.turn_id, i.tool_call_seq, i.rank, i.doc_id, i.chunk_index, i.score, i.excerpt_n, i.page, p.text
        FROM retrieved_items i LEFT JOIN passages p USING (passage_id)
        WHERE i.turn_id IN (SELECT unnest(?::VARCHAR[])) ORDER BY i.turn_id, i.tool_call_seq, i.position""", [ids])
    results: dict[tuple[str, int], list[ResultItem]] = {}
    excerpts: dict[str, list[Excerpt]] = {}
    for tid, seq, rank, doc_id, chunk, score, n, page, text in items:
        doc = corpus.get(doc_id)
        title, url = (doc.title, doc.url) if doc else ("", None)
        kind, artifact = (doc.kind, doc.artifact_kind) if doc else ("source", None)
        if seq is None:
            excerpts.setdefault(tid, []).append(Excerpt(
                n=n, doc_id=doc_id, chunk_index=chunk, page=page, score=score, text=text or "", chunk_type=kind,
                artifact_kind=artifact, title=title, url=url, file_name=doc.file_name if doc else None))
        else:
            results.setdefault((tid, seq), []).append(ResultItem(
                doc_id=doc_id, title=title, url=url, kind=kind, artifact_kind=artifact, rank=rank, score=score,
                chunk_index=chunk, page=page, snippet=text))
    tool_calls: dict[str, list[ToolCall]] = {}
    for tid, seq, name, exposure, args, error, call_id, latency, cut in calls:
        tool_calls.setdefault(tid, []).append(ToolCall(
            name=name, exposure=exposure, args=json.loads(args) if args else {},
            results=tuple(results.get((tid, seq), ())), error=error, latency_ms=latency, call_id=call_id,
            cut=Cut(**json.loads(cut)) if cut else None))
    records = [TurnRecord(question=q, answer=a, mode=mode or "agent", tool_calls=tuple(tool_calls.get(tid, ())),
                          excerpts=tuple(excerpts.get(tid, ())), turn_id=tid, status=status,
                          conversation_id=conversation_id, position=pos,
                          started_at=started.isoformat() if started is not None else None)
               for tid, q, a, status, pos, mode, started in turns]
    # each turn's own history, in the context states it was asked with (`turn_context`): what its links were
    # accepted against (provenance of a later follow-up reads it, docs/design.md §11)
    asked_with = _asked_with(reader, ids)
    by_id: dict[str, TurnRecord] = {}
    for i, r in enumerate(records):  # oldest first: an earlier turn has its own history before it is used
        history = tuple(history_turn(by_id[e], state, position) for e, position, state in asked_with.get(r.turn_id, ())
                        if e in by_id)
        records[i] = by_id[r.turn_id] = replace(r, history=history) if history else r
    return records


def turn_details(db: str | Path | TraceReader, turn_ids: list[str]) -> dict[str, dict[str, Any]]:
    """What the app needs to show reopened turns as they were asked, per turn id: `config` (its run's recorded
    configuration: provider, model, retriever, k, options, tool protocol, context policy) and `latency_ms` (their
    history comes with them from `load_conversation`)."""
    reader = _with_conversations(db) if turn_ids else None
    if reader is None:
        return {}
    _, rows = reader.rows("""
        SELECT t.turn_id, t.latency_ms, r.provider, r.model, r.retriever, r.mode, r.k, r.config_json
        FROM turns t JOIN runs r USING (run_id) WHERE t.turn_id IN (SELECT unnest(?::VARCHAR[]))""", [turn_ids])
    out: dict[str, dict[str, Any]] = {}
    for tid, latency, provider, model, retriever, mode, k, config in rows:
        cfg = {**(json.loads(config) if config else {}), "provider": provider, "model": model, "retriever": retriever,
               "mode": mode, "k": k}
        out[tid] = {"config": cfg, "latency_ms": latency}
    return out
