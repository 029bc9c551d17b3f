"""Pure conversion of one turn (record + payload + claims) into rows for the trace store.

A row is a dict keyed by column name (`SCHEMAS` gives every table's columns; a column a row leaves
out is NULL). No database here: `writer.py` inserts these rows in one transaction per turn, one bulk
insert per table.
Excerpt-mode turns: every excerpt `[n]` is a `retrieved_items` row with `tool_call_seq` NULL (no
tool call returned it), `rank` = `excerpt_n` = n, exposure `snippet`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from datetime import datetime, timezone
from typing import Any, Iterable

from ..payload import Payload
from ..questions import question_kind
from ..redact import redact_config
from ..types import TurnConfig, TurnRecord
from .tables import SCHEMAS  # every table's columns, in order, as the migrations declare them

def to_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def parse_time(value: str | None) -> datetime | None:
    if not value:
        return None
    t = datetime.fromisoformat(value)
    return t if t.tzinfo else t.replace(tzinfo=timezone.utc)


def _sum_or_none(values: list[Any]) -> Any:
    """Sum when every value is known, else None (a partial sum would understate)."""
    return sum(values) if values and all(v is not None for v in values) else None


#: Insert order inside a turn's transaction: `turns` first, so a duplicate turn_id fails fast.
TURN_TABLES = ("turns", "tool_calls", "retrieved_items", "citations", "sources", "claims", "model_calls", "passages",
               "ablations", "turn_context", "turn_lines", "turn_payloads", "audit_spans")
#: Tables whose rows many turns share: inserted with INSERT OR IGNORE (a row already there is the same row).
SHARED_TABLES = ("runs", "passages", "audit_spans")


def payload_json(payload: Payload) -> str:
    """The payload as stored in `turn_payloads`: its JSON in the clients' key order, secrets in its config redacted."""
    data = payload.to_json()
    return json.dumps({**data, "config": redact_config(data["config"])}, ensure_ascii=False, default=str)


def passage_id(text: str) -> str:
    """The id of a passage: sha256 of its text, 32 hex digits (128 bits: no collision in any real store)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


Row = dict[str, Any]


def turn_rows(record: TurnRecord, payload: Payload, run_id: str,
              claims: Iterable[Any] | None = None, topic: Any = None) -> dict[str, list[Row]]:
    """Rows (dicts keyed by column name) for every trace table touched by one turn; empty tables are omitted.
    `topic` (`corpus.Topic`, when known) fills the doc-gap columns (m017)."""
    tid = payload.turn_id
    sets = payload.sets
    calls = record.model_calls
    turns = [{"turn_id": tid, "run_id": run_id, "question": record.question, "answer": record.answer,
              "status": record.status, "error": record.error, "started_at": parse_time(record.started_at),
              "latency_ms": record.latency_ms,
              "tokens_in": _sum_or_none([c.tokens_in for c in calls]),
              "tokens_out": _sum_or_none([c.tokens_out for c in calls]),
              "question_kind": question_kind(record.question), "n_retrieved": len(sets.retrieved),
              "n_cited": len(sets.cited), "n_consulted": len(sets.consulted),
              "n_rejected": len(payload.rejected_citations), "n_tool_calls": len(record.tool_calls),
              "n_model_calls": len(calls), "model_latency_ms": _sum_or_none([c.latency_ms for c in calls]),
              "conversation_id": record.conversation_id, "position": record.position,
              # asked as `position`, it read the history through the turn before; the writer may place it later
              "history_through": record.position - 1 if record.conversation_id and record.position else None,
              "question_terms": topic.terms if topic else None, "corpus_terms": topic.in_corpus if topic else None,
              "relevant_retrieved": topic.relevant if topic else None, "gap_kind": topic.kind if topic else None,
              "user_id": record.user_id, "owner": record.owner}]

    tool_calls, items, passages = [], [], {}

    def passage(text: str | None) -> str | None:  # the id of a passage the model was shown, kept once
        if not text:
            return None
        pid = passage_id(text)
        passages[pid] = text
        return pid

    for seq, call in enumerate(record.tool_calls):
        tool_calls.append({"turn_id": tid, "seq": seq, "name": call.name, "exposure": call.exposure,
                           "args_json": to_json(call.args), "latency_ms": call.latency_ms,
                           "n_results": len(call.results), "error": call.error, "call_id": call.call_id,
                           "cut_json": to_json(call.cut.to_dict()) if call.cut is not None else None})
        for pos, it in enumerate(call.results, start=1):
            items.append({"turn_id": tid, "tool_call_seq": seq, "rank": it.rank, "doc_id": it.doc_id,
                          "chunk_index": it.chunk_index, "score": it.score, "exposure": it.exposure or call.exposure,
                          "position": pos, "excerpt_n": None, "page": it.page, "passage_id": passage(it.snippet)})
    # an excerpt that shows no document (a block of an audited prompt that matched no unit) exposed nothing
    for pos, e in enumerate((e for e in record.excerpts if e.doc_id is not None), start=1):
        items.append({"turn_id": tid, "tool_call_seq": None, "rank": e.n, "doc_id": e.doc_id,
                      "chunk_index": e.chunk_index, "score": e.score, "exposure": "snippet", "position": pos,
                      "excerpt_n": e.n, "page": e.page, "passage_id": passage(e.text)})

    citations = [{"turn_id": tid, "idx": i, "target": c.target, "doc_id": c.doc_id, "valid": c.valid,
                  "reason": c.reason, "nearest_doc_id": c.nearest_doc_id, "edit_distance": c.edit_distance,
                  "n": c.n, "start_offset": c.start, "end_offset": c.end}
                 for i, c in enumerate(payload.citations)]

    shown = {s.doc_id: i for i, s in enumerate(payload.sources, start=1)}
    sources = [{"turn_id": tid, "doc_id": d.doc_id, "title": d.title, "url": d.url, "retrieved": True,
                "cited": d.cited, "consulted": d.consulted, "exposure": d.exposure, "reason": d.reason,
                "kind": d.kind, "artifact_kind": d.artifact_kind, "tool_call_seq": d.tool_call,
                "position": pos, "shown_position": shown.get(d.doc_id), "carried_from": d.carried_from}
               for pos, d in enumerate(payload.documents, start=1)]

    model_calls = [{"turn_id": tid, "seq": seq, "provider": c.provider, "model": c.model,
                    "model_version": c.model_version, "latency_ms": c.latency_ms, "tokens_in": c.tokens_in,
                    "tokens_out": c.tokens_out, "finish_reason": c.finish_reason, "retries": c.retries,
                    "n_tool_calls": c.n_tool_calls} for seq, c in enumerate(calls)]

    out = {"turns": turns, "tool_calls": tool_calls, "retrieved_items": items, "citations": citations,
           "sources": sources, "claims": claim_rows(tid, claims or ()), "model_calls": model_calls,
           "passages": [{"passage_id": pid, "text": text} for pid, text in passages.items()],
           "turn_context": [{"turn_id": tid, "earlier_turn_id": h.record.turn_id, "earlier_position": h.position,
                             "context": h.context} for h in record.history],
           "turn_payloads": [{"turn_id": tid, "payload_json": payload_json(payload)}]}
    return {name: rows for name, rows in out.items() if rows}


_CLAIM_FIELDS = ("claim_idx", "text", "cited_doc_ids", "judge", "score", "verdict", "best_span", "wrong_excerpt",
                 "generated_only", "judge_version")


def _as_dict(claim: Any) -> dict[str, Any]:
    if isinstance(claim, dict):
        return dict(claim)
    if dataclasses.is_dataclass(claim):
        return dataclasses.asdict(claim)
    if hasattr(claim, "model_dump"):
        return claim.model_dump()
    raise TypeError(f"a claim must be a dict, dataclass or pydantic model, not {type(claim).__name__}")


def _opt_bool(v: Any) -> bool | None:
    return None if v is None else bool(v)


def claim_rows(turn_id: str, claims: Iterable[Any]) -> list[Row]:
    """Rows for `claims`; a missing `claim_idx` is the claim's position; unknown fields go to extra_json."""
    now = datetime.now(timezone.utc)
    rows = []
    for i, claim in enumerate(claims):
        c = _as_dict(claim)
        extra = {k: v for k, v in c.items() if k not in _CLAIM_FIELDS and k != "turn_id"}
        span = c.get("best_span")
        cited = c.get("cited_doc_ids")
        rows.append({"turn_id": turn_id, "claim_idx": int(c["claim_idx"]) if c.get("claim_idx") is not None else i,
                     "text": str(c.get("text", "")), "cited_doc_ids": list(cited) if cited is not None else None,
                     "judge": c.get("judge"), "score": None if c.get("score") is None else float(c["score"]),
                     "verdict": c.get("verdict"),
                     "best_span": span if span is None or isinstance(span, str) else to_json(span),
                     "wrong_excerpt": _opt_bool(c.get("wrong_excerpt")),
                     "generated_only": _opt_bool(c.get("generated_only")),
                     "extra_json": to_json(extra) if extra else None, "added_at": now,
                     "judge_version": c.get("judge_version")})
    return rows


def ablation_rows(turn_id: str, ablations: Iterable[dict[str, Any]]) -> list[Row]:
    """Rows for the `ablations` table from dicts keyed by its column names (`Verification.rows()`; other keys
    are left out); the turn id is `turn_id`'s whatever the dicts say."""
    names = SCHEMAS["ablations"].names
    return [{name: turn_id if name == "turn_id" else a.get(name) for name in names} for a in ablations]


def run_row(run_id: str, config: dict[str, Any], kind: str, run_key: str | None = None,
            created_at: datetime | None = None, settings: dict[str, Any] | None = None) -> Row:
    """The `runs` row; secrets in `config` (and an eval's `settings`) are redacted."""
    cfg = redact_config(dict(config.to_json() if isinstance(config, TurnConfig) else config))
    context = cfg.get("context") or {}
    return {"run_id": run_id, "created_at": created_at or datetime.now(timezone.utc), "kind": kind,
            **{k: cfg.get(k) for k in ("provider", "model", "retriever", "mode", "k", "prompt_version", "corpus_id",
                                       "corpus_hash", "tool_protocol")},
            "config_json": to_json(cfg), "run_key": run_key,
            "context_turns": context.get("turns"), "context_token_budget": context.get("token_budget"),
            "eval_settings_json": None if settings is None else to_json(redact_config(settings))}
