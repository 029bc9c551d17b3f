"""A turn's id derived from content fields named here (docs/design.md §4), for a record that came without one.

As llama-index hashes a node from the content fields it chooses, a turn record without a `turn_id` (one written by
hand for `workbench provenance`, a golden test's) is named by a digest of the fields listed below — not by
`repr`, so a field added to `TurnRecord`, `ToolCall` or any part of them changes no id until a new version of the
digest lists it. Version 1 writes the fields as the records' `repr` wrote them when ids were first derived
(field by field, in this order, each value by `repr`), so every id derived since is unchanged
(tests/test_turn_ids.py pins them). Who asked (`user_id`, `owner`) and what a tool result cut (`cut`) are no
content of the turn: not listed.
"""

from __future__ import annotations

import hashlib
from typing import Any, Callable

from .types import HistoryTurn, TurnRecord

#: The version of the digest new ids are derived with (`DIGESTS`).
TURN_ID_VERSION = 1

#: Version 1's content fields of each part of a turn, in the order they are written.
RECORD_FIELDS = ("question", "answer", "mode", "tool_calls", "excerpts", "turn_id", "status", "error", "model_calls",
                 "config", "started_at", "latency_ms", "history", "conversation_id", "position")
TOOL_CALL_FIELDS = ("name", "exposure", "args", "results", "error", "latency_ms", "call_id")
RESULT_FIELDS = ("doc_id", "title", "url", "kind", "artifact_kind", "rank", "score", "chunk_index", "page", "snippet")
EXCERPT_FIELDS = ("n", "doc_id", "chunk_index", "page", "score", "text", "chunk_type", "artifact_kind", "title", "url",
                  "file_name")
MODEL_CALL_FIELDS = ("provider", "model", "latency_ms", "tokens_in", "tokens_out", "finish_reason", "model_version",
                     "retries", "n_tool_calls")
#: An earlier turn of a conversation: what its history entry says (`HistoryTurn.to_dict`), its record's fields first.
HISTORY_FIELDS = ("question", "answer", "context", "turn_id", "position", "mode", "tool_calls", "excerpts", "steps",
                  "prior_context")


def _tuple(items: tuple, write: Callable[[Any], str]) -> str:
    inner = ", ".join(write(i) for i in items)
    return f"({inner},)" if len(items) == 1 else f"({inner})"


def _named(kind: str, pairs: list[tuple[str, str]]) -> str:
    return f"{kind}(" + ", ".join(f"{name}={text}" for name, text in pairs) + ")"


def _part(kind: str, names: tuple[str, ...], value: Any) -> str:
    return _named(kind, [(n, repr(getattr(value, n))) for n in names])


def _tool_call(c: Any) -> str:
    pairs = [(n, repr(getattr(c, n))) for n in TOOL_CALL_FIELDS]
    pairs[3] = ("results", _tuple(c.results, lambda r: _part("ResultItem", RESULT_FIELDS, r)))
    return _named("ToolCall", pairs)


def _history(h: HistoryTurn) -> str:
    r = h.record
    values = {"context": repr(h.context), "position": repr(h.position), "steps": repr(h.steps),
              "prior_context": repr(h.prior_context), "tool_calls": _tuple(r.tool_calls, _tool_call),
              "excerpts": _tuple(r.excerpts, lambda e: _part("Excerpt", EXCERPT_FIELDS, e))}
    return _named("HistoryTurn", [(n, values[n] if n in values else repr(getattr(r, n))) for n in HISTORY_FIELDS])


def content_v1(record: TurnRecord) -> str:
    """Version 1's text of `record`: each of `RECORD_FIELDS`, its parts by their own named fields."""
    parts = {"tool_calls": _tuple(record.tool_calls, _tool_call),
             "excerpts": _tuple(record.excerpts, lambda e: _part("Excerpt", EXCERPT_FIELDS, e)),
             "model_calls": _tuple(record.model_calls, lambda m: _part("ModelCall", MODEL_CALL_FIELDS, m)),
             "history": _tuple(record.history, _history), "config": repr(record.config.to_json())}
    return _named("TurnRecord", [(n, parts[n] if n in parts else repr(getattr(record, n))) for n in RECORD_FIELDS])


#: Each version's content text; a new version is added here, never an old one changed (stored ids name turns).
DIGESTS: dict[int, Callable[[TurnRecord], str]] = {1: content_v1}


def content_id(record: TurnRecord, version: int = TURN_ID_VERSION) -> str:
    """`t-` and the first 16 hex digits of the SHA-256 of the record's content text of `version`."""
    return "t-" + hashlib.sha256(DIGESTS[version](record).encode()).hexdigest()[:16]
