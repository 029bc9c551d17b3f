"""Conversations in the trace store (docs/design.md §11): list them, and rebuild one's turns.

A follow-up asked from the CLI (`ask --conversation ID`), a resumed `eval` or the app's "reopen" needs the
records of the conversation's earlier turns. `read_conversation` is the one reader: it reads each turn whole
with `spans.read_stored_turns` (the reader export uses too) and gives `answer.Answer`s, as `Session.ask` does: the record
as it was asked (question, answer, mode, each tool call with its arguments and the documents it returned,
each excerpt, the model calls, the run's configuration, the latency, its history in the context states it
was asked with; what it was asked with is its typed `config`, `types.TurnConfig`), the claims judged and the latest verification.
Titles, URLs and kinds are the ones the turn recorded (its `sources` rows), so the record does not depend on
the corpus loaded now. Only the turns that are history (`context_policy.is_history`) are returned: a failed turn's question
without an answer is not part of what the model is given, but its position still counts
(`conversation_so_far`). Read-only, like every reader.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any, Mapping, Sequence

import duckdb

from ..config import DEFAULT_MODE
from ..context_policy import history_turn, is_history
from ..corpus import Corpus
from ..errors import TraceStoreError
from ..faithfulness import TurnFaithfulness
from ..answer import Answer
from ..payload import Payload
from ..provenance import sources_payload
from ..types import Cut, Excerpt, ModelCall, ResultItem, ToolCall, TurnRecord
from ..verify import Verification
from .audits import AUDIT_KIND
from .history import OWNERS, Schema
from .reader import TraceReader, as_reader
from .spans import TurnRows, read_stored_turns
from .lake import store_exists


def _with_conversations(db: str | Path | TraceReader) -> TraceReader | None:
    """A reader of `db`, or None when there is no store yet. Whether it holds conversations (`_conversations`) is
    asked on the connection that reads them: checking first would open the file twice."""
    reader = as_reader(db)
    return reader if store_exists(reader.path) else None


def _conversations(schema: Schema) -> bool:
    """Whether a database of `schema` holds conversations: not one from before m012 (whose `turn_context` came with
    `turns.conversation_id`)."""
    return schema.has("turn_context")


def list_conversations(db: str | Path | TraceReader, *, owner: str | None = None, ownerless: bool = True,
                       skip_kinds: Sequence[str] = ()) -> list[dict[str, Any]]:
    """Conversations in the store, latest first: id, turns, first question, first and last turn times, whose
    it is (`owner`: its first turn's `turns.owner`), what its last turn was asked with (`provider`, `model`,
    `corpus_id`: that turn's run) and the `kind` of its first turn's run (`runs.kind`). With `owner`, only that
    owner's conversations, and the ownerless ones (asked outside the app: the operator's) unless `ownerless` is
    False; a conversation whose first run's kind is one of `skip_kinds` is left out (the app's chat leaves out
    the Compare page's columns, `COMPARE_RUN`)."""
    reader = _with_conversations(db)
    got = reader.rows_with(lambda schema: _LISTED.format(
        owner="arg_min(t.owner, t.position)" if OWNERS in schema.applied else "NULL::VARCHAR")
        if _conversations(schema) else None, [list(skip_kinds)]) if reader is not None else None
    if got is None:
        return []
    columns, rows = got
    out = [dict(zip(columns, r)) for r in rows]
    if owner is None:
        return out
    return [r for r in out if r["owner"] == owner or (ownerless and r["owner"] is None)]


#: `list_conversations`' query; {owner}: its first turn's owner, or NULL on a database from before m018 (`OWNERS`).
_LISTED = """
    SELECT t.conversation_id, count(*) AS turns, max(t.position) AS last_position,
           arg_min(t.question, t.position) AS first_question, min(t.started_at) AS started_at,
           max(t.started_at) AS last_at, {owner} AS owner,
           arg_max(r.provider, t.position) AS provider, arg_max(r.model, t.position) AS model,
           arg_max(r.corpus_id, t.position) AS corpus_id, arg_min(r.kind, t.position) AS kind
    FROM turns t LEFT JOIN runs r USING (run_id) WHERE t.conversation_id IS NOT NULL
    GROUP BY t.conversation_id HAVING NOT list_contains(?::VARCHAR[], coalesce(arg_min(r.kind, t.position), ''))
    ORDER BY last_at DESC NULLS LAST, t.conversation_id"""


def conversation_owner(db: str | Path | TraceReader, conversation_id: str) -> tuple[bool, str | None]:
    """Whether `conversation_id` has turns in the store, and whose it is (its first turn's `turns.owner`; None:
    asked outside the app, or before turns had owners)."""
    reader = _with_conversations(db)
    got = reader.rows_with(lambda schema: "SELECT count(*), {} FROM turns WHERE conversation_id = ?".format(
        "arg_min(owner, coalesce(position, 0))" if OWNERS in schema.applied else "NULL::VARCHAR")
        if _conversations(schema) else None, [conversation_id]) if reader is not None else None
    if got is None:
        return False, None
    count, owner = got[1][0]
    return bool(count), owner


def read_conversation(db: str | Path | TraceReader, conversation_id: str,
                      corpus: Corpus | None = None) -> list[Answer]:
    """The turns of `conversation_id` that are history, oldest first, whole (empty: a new conversation). `corpus`,
    when it is the one a turn was asked with (its content hash), only fills in its excerpts' file names (the store
    keeps none)."""
    return _read(db, conversation_id, corpus)[0]


def conversation_so_far(db: str | Path | TraceReader, conversation_id: str,
                        corpus: Corpus | None = None) -> tuple[list[TurnRecord], int]:
    """The records of `read_conversation` (the history of the conversation's next turn), and the position of its
    last turn, failed or not, read in one snapshot: a turn landing between two reads would otherwise be in the
    position but not in the history."""
    turns, last = _read(db, conversation_id, corpus)
    return [t.record for t in turns], last


def _read(db: str | Path | TraceReader, conversation_id: str,
          corpus: Corpus | None) -> tuple[list[Answer], int]:
    reader = _with_conversations(db)
    if reader is None:
        return [], 0
    with reader.connect() as con:
        if not _conversations(reader.schema):
            return [], 0
        try:
            con.execute("BEGIN TRANSACTION")  # one snapshot: the last position and the turns agree
            (last,) = con.execute("SELECT coalesce(max(position), 0) FROM turns WHERE conversation_id = ?",
                                  [conversation_id]).fetchone()
            stored = list(read_stored_turns(con, schema=reader.schema, conversation_id=conversation_id, whole=True))
            audited = dict(con.execute(_AUDITED_PAYLOADS, [conversation_id, AUDIT_KIND]).fetchall()) if reader.schema.has(
                "turn_payloads") else {}
            con.execute("COMMIT")
        except duckdb.Error as exc:
            raise TraceStoreError(f"could not read conversation {conversation_id} from {reader.path}: {exc}") from None
    payloads = {turn_id: Payload.from_json(json.loads(text)) for turn_id, text in audited.items()}
    return _conversation_turns(stored, corpus, payloads), int(last)


#: The stored payloads of a conversation's audited turns (the runs of `collect` and `ingest`).
_AUDITED_PAYLOADS = """SELECT p.turn_id, p.payload_json FROM turn_payloads p JOIN turns t USING (turn_id)
JOIN runs r USING (run_id) WHERE t.conversation_id = ? AND r.kind = ?"""


def _conversation_turns(stored: list[TurnRows], corpus: Corpus | None, audited: Mapping[str, Payload]) -> list[Answer]:
    out: list[Answer] = []
    by_id: dict[str, TurnRecord] = {}
    for t in stored:  # oldest first: an earlier turn has its own history before a later one is asked with it
        record = _record(t, corpus)
        if not is_history(record):
            continue
        # its own history, in the context states it was asked with (`turn_context`): what its links were accepted
        # against (provenance of a later follow-up reads it, docs/design.md §11)
        history = tuple(history_turn(by_id[c["earlier_turn_id"]], c["context"], c["earlier_position"])
                        for c in t.turn_context if c["earlier_turn_id"] in by_id)
        record = by_id[record.turn_id] = replace(record, history=history) if history else record
        out.append(_whole(t, record, audited.get(record.turn_id)))
    return out


def _whole(t: TurnRows, record: TurnRecord, audited: Payload | None = None) -> Answer:
    """The stored turn `t` as an `Answer`: its record, its payload (an audited turn's as stored, with its `audit`
    object, which its record alone does not give again; else computed anew from the record: provenance is pure),
    its claims (its own judge's, then the others') and its latest verification."""
    used = {s["doc_id"]: (bool(s["cited"]), bool(s["consulted"])) for s in t.sources}
    verification = Verification.from_rows(t.ablations, used) if t.ablations else None
    payload = audited
    if payload is None:
        payload = sources_payload(record)
        if verification is not None:
            payload = replace(payload, verification=verification.to_payload())
    judged = TurnFaithfulness.stored(record.turn_id, t.claims)
    return Answer(record, payload, faithfulness=judged[0] if judged else None, verification=verification,
                  other_judges=tuple(judged[1:]))


def load_conversation(db: str | Path | TraceReader, conversation_id: str,
                      corpus: Corpus | None = None) -> list[TurnRecord]:
    """The records of `read_conversation`: the history of the conversation's next turn."""
    return [t.record for t in read_conversation(db, conversation_id, corpus)]


def _config(run: Mapping[str, Any] | None) -> dict[str, Any]:
    """A run's configuration: its `config_json` and its own columns (which win)."""
    if run is None:
        return {}
    cfg = json.loads(run["config_json"]) if run.get("config_json") else {}
    return {**cfg, **{k: run[k] for k in ("provider", "model", "retriever", "mode", "k") if run.get(k) is not None}}


def _record(t: TurnRows, corpus: Corpus | None) -> TurnRecord:
    """One stored turn's record, without its history."""
    turn = t.turn
    shown = {s["doc_id"]: s for s in t.sources}  # what the turn recorded of each document it retrieved
    config = _config(t.run)
    if corpus is not None and corpus.content_hash != config.get("corpus_hash"):
        corpus = None  # another corpus's file names are not this turn's
    results: dict[int, list[ResultItem]] = {}
    excerpts: list[Excerpt] = []
    for i in t.retrieved_items:
        s = shown.get(i["doc_id"]) or {}
        title, url, kind, artifact = s.get("title") or "", s.get("url"), s.get("kind") or "source", s.get("artifact_kind")
        if i["tool_call_seq"] is None:
            doc = corpus.get(i["doc_id"]) if corpus is not None else None
            excerpts.append(Excerpt(n=i["excerpt_n"], doc_id=i["doc_id"], chunk_index=i["chunk_index"], page=i["page"],
                                    score=i["score"], text=i.get("text") or "", chunk_type=kind, artifact_kind=artifact,
                                    title=title, url=url, file_name=doc.file_name if doc else None))
        else:
            results.setdefault(i["tool_call_seq"], []).append(ResultItem(
                doc_id=i["doc_id"], title=title, url=url, kind=kind, artifact_kind=artifact, rank=i["rank"],
                score=i["score"], chunk_index=i["chunk_index"], page=i["page"], snippet=i.get("text")))
    calls = tuple(ToolCall(name=c["name"], exposure=c["exposure"], args=json.loads(c["args_json"]) if c["args_json"] else {},
                           results=tuple(results.get(c["seq"], ())), error=c["error"], latency_ms=c["latency_ms"],
                           call_id=c["call_id"], cut=Cut(**json.loads(c["cut_json"])) if c.get("cut_json") else None)
                  for c in t.tool_calls)  # `cut_json`: m019; older databases recorded no cut
    model_calls = tuple(ModelCall(provider=m["provider"], model=m["model"], latency_ms=m["latency_ms"],
                                  tokens_in=m["tokens_in"], tokens_out=m["tokens_out"], finish_reason=m["finish_reason"],
                                  model_version=m["model_version"], retries=m["retries"] or 0,
                                  n_tool_calls=m["n_tool_calls"] or 0) for m in t.model_calls)
    started = turn.get("started_at")
    return TurnRecord(question=turn["question"], answer=turn.get("answer") or "", mode=config.get("mode") or DEFAULT_MODE,
                      tool_calls=calls, excerpts=tuple(excerpts), turn_id=turn["turn_id"], status=turn["status"],
                      error=turn.get("error"), model_calls=model_calls, config=config,
                      started_at=started.isoformat() if started is not None else None, latency_ms=turn.get("latency_ms"),
                      conversation_id=turn.get("conversation_id"), position=turn.get("position"))


def read_turn(db: str | Path | TraceReader, turn_id: str) -> Answer | None:
    """One stored turn whole, whatever its status (an audited turn opened on its own, `trace.audits`), without its
    history (the earlier turns are not read); None when the store has no such turn."""
    reader = as_reader(db)
    if not store_exists(reader.path):
        return None
    with reader.connect() as con:
        try:
            stored = list(read_stored_turns(con, schema=reader.schema, turn_id=turn_id, whole=True))
        except duckdb.Error as exc:
            raise TraceStoreError(f"could not read turn {turn_id} from {reader.path}: {exc}") from None
    return _whole(stored[0], _record(stored[0], None)) if stored else None
