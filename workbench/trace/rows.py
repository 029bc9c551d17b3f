"""Pure conversion of one turn (record + payload + claims) into rows for the trace store.

No database here: `writer.py` inserts these rows in one transaction per turn (single rows as
parameterised VALUES, the rest as bulk Arrow tables built by `rows_to_table`).
Excerpt-mode turns: every excerpt `[n]` is a `retrieved_items` row with `tool_call_seq` NULL (no
tool call returned it), `rank` = `excerpt_n` = n, exposure `snippet`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from datetime import datetime, timezone
from typing import Any, Iterable

import pyarrow as pa

from ..questions import question_kind
from ..types import TurnRecord
from .tables import SCHEMAS  # every table's columns, in order, as the migrations declare them

# "token" names a secret (`token`, `access_token`, `x-auth-token`) but not a count or a size (`max_tokens`,
# `tokens_in`, the context policy's `token_budget`), which are configuration worth keeping.
_SECRET_KEY = re.compile(r"key|token(?![s_a-z])|secret|password|credential|authorization", re.IGNORECASE)


def redact_config(config: Any) -> Any:
    """Drop values whose key names a secret, at any depth: secrets never reach traces."""
    if isinstance(config, dict):
        return {k: ("<redacted>" if _SECRET_KEY.search(str(k)) else redact_config(v)) for k, v in config.items()}
    if isinstance(config, (list, tuple)):
        return [redact_config(v) for v in config]
    return config


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
               "ablations", "turn_context")
#: Tables whose rows many turns share: inserted with INSERT OR IGNORE (a row already there is the same row).
SHARED_TABLES = ("runs", "passages")


def passage_id(text: str) -> str:
    """The id of a passage: sha256 of its text, 32 hex digits (128 bits: no collision in any real store)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def rows_to_table(name: str, rows: list[tuple]) -> pa.Table:
    schema = SCHEMAS[name]
    cols = list(zip(*rows)) if rows else [()] * len(schema)
    return pa.table({f.name: list(c) for f, c in zip(schema, cols)}, schema=schema)


def turn_rows(record: TurnRecord, payload: dict[str, Any], run_id: str,
              claims: Iterable[Any] | None = None) -> dict[str, list[tuple]]:
    """Rows (tuples in `SCHEMAS` column order, i.e. the order the migrations give the columns) for every
    trace table touched by one turn; empty tables are omitted."""
    tid = payload["turn_id"]
    sets = payload["sets"]
    calls = record.model_calls
    turns = [(tid, run_id, record.question, record.answer, record.status, record.error,
              parse_time(record.started_at), record.latency_ms,
              _sum_or_none([c.tokens_in for c in calls]), _sum_or_none([c.tokens_out for c in calls]),
              question_kind(record.question), len(sets["retrieved"]), len(sets["cited"]), len(sets["consulted"]),
              len(payload["rejected_citations"]), len(record.tool_calls), len(calls),
              _sum_or_none([c.latency_ms for c in calls]), record.conversation_id, record.position)]

    tool_calls, items, passages = [], [], {}

    def passage(text: str | None) -> str | None:  # the id of a passage the model was shown, kept once
        if not text:
            return None
        pid = passage_id(text)
        passages[pid] = text
        return pid

    for seq, call in enumerate(record.tool_calls):
        tool_calls.append((tid, seq, call.name, call.exposure, to_json(call.args), call.latency_ms,
                           len(call.results), call.error, call.call_id))
        for pos, it in enumerate(call.results, start=1):
            items.append((tid, seq, it.rank, it.doc_id, it.chunk_index, it.score, call.exposure, pos, None, it.page,
                          passage(it.snippet)))
    for pos, e in enumerate(record.excerpts, start=1):
        items.append((tid, None, e.n, e.doc_id, e.chunk_index, e.score, "snippet", pos, e.n, e.page, passage(e.text)))

    citations = [(tid, i, c["target"], c["doc_id"], c["valid"], c["reason"], c["nearest_doc_id"],
                  c["edit_distance"], c.get("n"), c.get("start"), c.get("end"))
                 for i, c in enumerate(payload["citations"])]

    shown = {s["doc_id"]: i for i, s in enumerate(payload["sources"], start=1)}
    sources = [(tid, d["doc_id"], d["title"], d["url"], True, d["cited"], d["consulted"], d["exposure"],
                d["reason"], d.get("kind"), d.get("artifact_kind"), d.get("tool_call"), pos, shown.get(d["doc_id"]),
                d.get("carried_from"))
               for pos, d in enumerate(payload["documents"], start=1)]
    context = [(tid, h.turn_id, h.position, h.context) for h in record.history]

    model_calls = [(tid, seq, c.provider, c.model, c.model_version, c.latency_ms, c.tokens_in, c.tokens_out,
                    c.finish_reason, c.retries, c.n_tool_calls) for seq, c in enumerate(calls)]

    out = {"turns": turns, "tool_calls": tool_calls, "retrieved_items": items, "citations": citations,
           "sources": sources, "claims": claim_rows(tid, claims or ()), "model_calls": model_calls,
           "passages": list(passages.items()), "turn_context": context}
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


def claim_rows(turn_id: str, claims: Iterable[Any]) -> list[tuple]:
    """Rows for `claims`; a missing `claim_idx` is the claim's position; unknown fields go to extra_json."""
    now = datetime.now(timezone.utc)
    rows = []
    for i, claim in enumerate(claims):
        c = _as_dict(claim)
        extra = {k: v for k, v in c.items() if k not in _CLAIM_FIELDS and k != "turn_id"}
        span = c.get("best_span")
        cited = c.get("cited_doc_ids")
        rows.append((turn_id, int(c["claim_idx"]) if c.get("claim_idx") is not None else i, str(c.get("text", "")),
                     list(cited) if cited is not None else None, c.get("judge"),
                     None if c.get("score") is None else float(c["score"]), c.get("verdict"),
                     span if span is None or isinstance(span, str) else to_json(span),
                     _opt_bool(c.get("wrong_excerpt")), _opt_bool(c.get("generated_only")),
                     to_json(extra) if extra else None, now, c.get("judge_version")))
    return rows


def ablation_rows(turn_id: str, ablations: Iterable[dict[str, Any]]) -> list[tuple]:
    """Rows for the `ablations` table from dicts keyed by its column names (`Verification.rows()`); the
    turn id is `turn_id`'s whatever the dicts say."""
    names = SCHEMAS["ablations"].names
    return [tuple(turn_id if name == "turn_id" else a.get(name) for name in names) for a in ablations]


def run_row(run_id: str, config: dict[str, Any], kind: str, run_key: str | None = None,
            created_at: datetime | None = None) -> tuple:
    """The `runs` row (in `SCHEMAS["runs"]` column order); secrets in `config` are redacted."""
    cfg = redact_config(config)
    context = cfg.get("context") or {}
    return (run_id, created_at or datetime.now(timezone.utc), kind, cfg.get("provider"), cfg.get("model"),
            cfg.get("retriever"), cfg.get("mode"), cfg.get("k"), cfg.get("prompt_version"), cfg.get("corpus_id"),
            cfg.get("corpus_hash"), to_json(cfg), run_key, cfg.get("tool_protocol"), context.get("turns"),
            context.get("token_budget"))
