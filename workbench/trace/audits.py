"""Audited runs in the trace store (docs/design.md §12, docs/audit.md): the runs `collect` and `ingest` wrote, their
turns, one turn whole (its record and its stored payload, with the `audit` object), and the timeline of the spans
it was assembled from. What the app's views of audited assistants read; read-only, like every reader.

An audited turn is rendered from what the store holds (no corpus is needed: its titles, urls and snippets are the
ones it recorded); its span names and attributes are the audited app's text, untrusted like any other.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..payload import Payload
from .reader import TraceReader, as_reader
from .lake import store_exists

#: The kind of run (`runs.kind`) `collect` and `ingest` write.
AUDIT_KIND = "audit"
#: The span kinds the timeline draws, as its kinds of call (`ui.charts.CALL_COLORS`).
TIMELINE_KINDS = {"LLM": "model", "TOOL": "tool", "RETRIEVER": "retrieval", "RERANKER": "retrieval"}
#: The most spans a turn's timeline draws (the earliest first).
MAX_TIMELINE_SPANS = 200


def _audited(db: str | Path | TraceReader) -> TraceReader | None:
    """A reader of `db`, or None when it can hold no audited run: no file yet, or one from before m020."""
    reader = as_reader(db)
    if not store_exists(reader.path):
        return None
    reader.check()
    return reader if reader.schema.has("audit_spans") else None


def audited_runs(db: str | Path | TraceReader) -> list[dict[str, Any]]:
    """Every audit run, newest first: its run id and name, the audited app (`service.name`) and model, its corpus
    (None: the conservative rule), how many turns (unauditable ones, conversations) it has, the experiment name
    it was scored as (None: not scored against a questions file), its mean cited-set size and its rejected citations
    (an app whose every citation was rejected cites all the same: `avg_cited` 0 alone would say it never does)."""
    reader = _audited(db)
    if reader is None:
        return []
    columns, rows = reader.rows("""
        SELECT r.run_id, json_extract_string(r.config_json, '$.run') AS name,
               json_extract_string(r.config_json, '$.app') AS app, r.model, r.corpus_id AS corpus, r.created_at,
               count(t.turn_id) AS turns, count(t.turn_id) FILTER (WHERE t.status = 'unauditable') AS unauditable,
               count(DISTINCT t.conversation_id) AS conversations, any_value(e.name) AS experiment,
               avg(t.n_cited) AS avg_cited, coalesce(sum(t.n_rejected), 0) AS rejected_citations
        FROM runs r LEFT JOIN turns t USING (run_id) LEFT JOIN experiments e USING (run_id)
        WHERE r.kind = ?
        GROUP BY ALL ORDER BY r.created_at DESC, r.run_id""", [AUDIT_KIND])
    return [dict(zip(columns, r)) for r in rows]


def audited_turns(db: str | Path | TraceReader, run_id: str) -> list[dict[str, Any]]:
    """The turns of audit run `run_id` in start order: id, question, status, session and position, set sizes."""
    reader = _audited(db)
    if reader is None:
        return []
    columns, rows = reader.rows("""
        SELECT t.turn_id, t.question, t.status, t.conversation_id, t.position, t.started_at, t.n_retrieved,
               t.n_cited, t.n_consulted, t.n_rejected
        FROM turns t JOIN runs r USING (run_id) WHERE r.kind = ? AND t.run_id = ?
        ORDER BY t.started_at, t.position, t.turn_id""", [AUDIT_KIND, run_id])
    return [dict(zip(columns, r)) for r in rows]


def audited_payload(db: str | Path | TraceReader, turn_id: str) -> Payload | None:
    """The stored payload of audited turn `turn_id` (with its `audit` object); None when it is no audited turn."""
    reader = _audited(db)
    if reader is None:
        return None
    _, rows = reader.rows("SELECT p.payload_json FROM turn_payloads p JOIN turns t USING (turn_id) "
                          "JOIN runs r USING (run_id) WHERE r.kind = ? AND p.turn_id = ?", [AUDIT_KIND, turn_id])
    return Payload.from_json(json.loads(rows[0][0])) if rows else None


def span_timeline(db: str | Path | TraceReader, trace_ids: list[str] | tuple[str, ...]) -> list[dict[str, Any]]:
    """The model, tool, retriever and reranker spans of `trace_ids` as timeline rows (`render.timeline`'s shape:
    `kind`, `label`, `detail`, `start_ms` from the start of the turn's first span of any kind, `ms`), in start
    order, from the spans as received (`audit_spans`); at most `MAX_TIMELINE_SPANS`."""
    reader = _audited(db)
    if reader is None or not trace_ids:
        return []
    _, rows = reader.rows("""
        SELECT kind, name, start_ns, end_ns, detail, origin FROM (
            SELECT span_key, kind, name, json_extract(span_json, '$.start_ns')::HUGEINT AS start_ns,
                   json_extract(span_json, '$.end_ns')::HUGEINT AS end_ns,
                   coalesce(json_extract_string(span_json, '$.attributes."llm.model_name"'),
                            json_extract_string(span_json, '$.attributes."tool.name"')) AS detail,
                   min(json_extract(span_json, '$.start_ns')::HUGEINT) OVER () AS origin  -- the turn's first span
            FROM audit_spans WHERE list_contains(?, trace_id))
        WHERE list_contains(?, kind)
        ORDER BY start_ns, end_ns, span_key LIMIT ?""", [list(trace_ids), list(TIMELINE_KINDS), MAX_TIMELINE_SPANS])
    return [{"kind": TIMELINE_KINDS[kind], "label": f"{i}. {kind.lower()} {name}", "detail": detail or "",
             "start_ms": float(start - origin) / 1e6, "ms": max(0.0, float(end - start) / 1e6)}
            for i, (kind, name, start, end, detail, origin) in enumerate(rows, start=1)]
