"""Stored turns as OpenInference spans (docs/interop.md): pure conversion, no OpenTelemetry import.

The DuckDB trace store stays the source of truth; this module reads a turn's rows (from the database,
or the very rows the writer just committed, for live export) and lays them out as spans:

- a root `CHAIN` span per turn: `input.value` = question, `output.value` = answer, `session.id` = the
  conversation id for a turn of a conversation (so a viewer's sessions view shows the conversation, turn
  after turn), else the run id (a single turn's session stays its run, as before conversations);
  `user.id` = who asked, when the app has sign-in (`turns.user_id`);
  `metadata` = the three sets, the rejected citations, status, the conversation and position (when in
  one) and the run's configuration;
- an `LLM` span per model call (`llm.model_name`, `llm.token_count.*`);
- a `TOOL` span per tool call (`tool.name`, `tool.parameters` = the arguments the model passed, as
  Phoenix's own GenAI conversion fills it; `input.value` the same JSON, `output.value` the returned
  documents);
- a `RETRIEVER` span under every `search` call, and under any other tool call that returned documents
  (`fetch_document`, listings), so every retrieved document appears with its metadata; in excerpt mode
  one `RETRIEVER` span for the numbered excerpts. Documents: `retrieval.documents.{i}.document.{id,
  score, content, metadata}`. Neither OpenInference nor the OTel GenAI conventions has a field for cited
  or consulted, so they travel in the document's `metadata` JSON (`exposure`, `cited`, `consulted`, and
  `verdict` when an `ablations` table holds one), and `content` is the passage the model was shown
  (the title for a title-only listing; absent for a whole-document fetch, whose text the trace does
  not copy).

Times are the stored ones: the root spans `turns.started_at` + `latency_ms`; model calls and tool calls
are laid end to end from the turn's start in the order the agent loop ran them (call 0, the tool calls
it asked for, call 1, …; `model_calls.n_tool_calls`), each as long as its stored latency. The loop's
own overhead between calls (well under a millisecond) is not stored, so it is not shown.

Ids are deterministic, derived from the project and the turn id (sha256; the span ids also from the
span's role), so exporting the same turns to the same project again adds nothing in a viewer that keys
spans by id (Phoenix does). The project is part of the ids because Phoenix keys spans and traces by id
across projects: with ids from the turn alone, a turn exported to a second project would silently stay in
the first. Find a turn by its id through the root span's `metadata.turn_id` (Phoenix:
`metadata['turn_id'] == '…'`).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Iterable, Iterator

from ..errors import TraceStoreError
from ..provenance import distinct_rejections
from .history import Schema

# OpenInference semantic conventions (openinference-semantic-conventions, `SpanAttributes`): the exact names.
SPAN_KIND = "openinference.span.kind"
INPUT_VALUE, INPUT_MIME = "input.value", "input.mime_type"
OUTPUT_VALUE, OUTPUT_MIME = "output.value", "output.mime_type"
SESSION_ID = "session.id"
USER_ID = "user.id"
METADATA = "metadata"
LLM_MODEL_NAME = "llm.model_name"
TOKENS_PROMPT, TOKENS_COMPLETION, TOKENS_TOTAL = ("llm.token_count.prompt", "llm.token_count.completion",
                                                  "llm.token_count.total")
TOOL_NAME, TOOL_PARAMETERS, TOOL_ID = "tool.name", "tool.parameters", "tool.id"
RETRIEVAL_DOCUMENTS = "retrieval.documents"
DOCUMENT_ID, DOCUMENT_SCORE = "document.id", "document.score"
DOCUMENT_CONTENT, DOCUMENT_METADATA = "document.content", "document.metadata"
#: Resource attribute naming the project (Phoenix files spans under it).
PROJECT_NAME = "openinference.project.name"
DEFAULT_PROJECT = "workbench"
JSON_MIME, TEXT_MIME = "application/json", "text/plain"

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


@dataclass(frozen=True)
class SpanSpec:
    """One span, ready for any OTLP exporter: ids, parent, times (ns since the epoch) and attributes."""

    name: str
    kind: str  # the OpenInference span kind: CHAIN, LLM, TOOL, RETRIEVER
    trace_id: int
    span_id: int
    parent_id: int | None
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    error: str | None = None  # the span's status is ERROR with this description


@dataclass
class TurnRows:
    """One stored turn's rows, each a dict keyed by column name (as in the trace tables): what span export lays out
    and what the conversation reader makes an `answer.Answer` of. Not a turn type (that is `answer.Answer` around a
    `types.TurnRecord`): the rows as stored, no turn class's fields copied."""

    turn: dict[str, Any]
    run: dict[str, Any] | None = None
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    retrieved_items: list[dict[str, Any]] = field(default_factory=list)
    citations: list[dict[str, Any]] = field(default_factory=list)
    sources: list[dict[str, Any]] = field(default_factory=list)
    model_calls: list[dict[str, Any]] = field(default_factory=list)
    #: doc_id → verification verdict (`ablations.verdict`), empty before verification exists.
    verdicts: dict[str, str] = field(default_factory=dict)
    #: Read only for a whole turn (`read_stored_turns(whole=True)`, reopening a conversation): its `claims` rows,
    #: the rows of its latest verification (`ablations`) and the earlier turns it was asked with (`turn_context`).
    claims: list[dict[str, Any]] = field(default_factory=list)
    ablations: list[dict[str, Any]] = field(default_factory=list)
    turn_context: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def from_rows(cls, rows: dict[str, list[dict[str, Any]]], run: dict[str, Any] | None = None) -> "TurnRows":
        """From `rows.turn_rows` output (dicts keyed by column name): what live export sees."""
        named = {name: [dict(r) for r in rs] for name, rs in rows.items()}
        texts = {p["passage_id"]: p["text"] for p in rows.get("passages", ())}
        for it in named.get("retrieved_items", []):  # as the database read joins them
            it["text"] = texts.get(it["passage_id"])
        (turn,) = named["turns"]
        # a turn verified before it was written carries its one verification's rows
        verdicts = {a["doc_id"]: a["verdict"] for a in named.get("ablations", []) if a["verdict"]}
        return cls(turn, run, **{k: named.get(k, []) for k in
                                 ("tool_calls", "retrieved_items", "citations", "sources", "model_calls")},
                   verdicts=verdicts)


# --- ids and times -----------------------------------------------------------------------------


def _digest(*parts: str) -> bytes:
    return hashlib.sha256("\x1f".join(parts).encode()).digest()


def trace_id_of(turn_id: str, project: str = DEFAULT_PROJECT) -> int:
    """The OTel trace id of a turn in a project: 16 bytes of sha256(project, turn id), never 0."""
    return int.from_bytes(_digest("trace", project, turn_id)[:16], "big") or 1


def span_id_of(turn_id: str, role: str, project: str = DEFAULT_PROJECT) -> int:
    """A span id stable across exports: 8 bytes of sha256(project, turn id, the span's role), never 0."""
    return int.from_bytes(_digest("span", project, turn_id, role)[:8], "big") or 1


def to_ns(t: datetime) -> int:
    if t.tzinfo is None:
        t = t.replace(tzinfo=timezone.utc)
    return (t - _EPOCH) // timedelta(microseconds=1) * 1000


def _ms_ns(ms: float | None) -> int:
    return max(0, int(round((ms or 0.0) * 1_000_000)))


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


# --- one turn ----------------------------------------------------------------------------------


def rejected_citations(citations: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rejected citations of stored citation rows, by the payload's rule (`provenance.distinct_rejections`)."""
    rows = sorted(citations, key=lambda c: c["idx"])
    return [{"target": c["target"], "reason": c["reason"], "nearest_doc_id": c["nearest_doc_id"],
             "edit_distance": c["edit_distance"]}
            for c in distinct_rejections(rows, target=lambda c: c["target"], valid=lambda c: c["valid"])]


def session_id(turn: dict[str, Any]) -> str:
    """The root span's `session.id`: the turn's conversation, else its run (a single turn)."""
    conversation = turn.get("conversation_id")
    return conversation if conversation is not None else turn["run_id"]


def _run_config(run: dict[str, Any] | None) -> dict[str, Any]:
    if not run:
        return {}
    return {k: run.get(k) for k in ("kind", "provider", "model", "retriever", "mode", "tool_protocol", "k",
                                    "prompt_version", "corpus_id") if run.get(k) is not None}


def _documents(items: list[dict[str, Any]], sources: dict[str, dict[str, Any]],
               verdicts: dict[str, str]) -> dict[str, Any]:
    """`retrieval.documents.{i}.document.*` attributes of the items of one retrieval, in their order."""
    attrs: dict[str, Any] = {}
    for i, it in enumerate(items):
        doc = sources.get(it["doc_id"], {})
        prefix = f"{RETRIEVAL_DOCUMENTS}.{i}."
        attrs[prefix + DOCUMENT_ID] = it["doc_id"]
        if it.get("score") is not None:
            attrs[prefix + DOCUMENT_SCORE] = float(it["score"])
        content = it.get("text") or (doc.get("title") if it["exposure"] == "title" else None)
        if content:
            attrs[prefix + DOCUMENT_CONTENT] = content
        meta = {"exposure": it["exposure"], "cited": bool(doc.get("cited")), "consulted": bool(doc.get("consulted")),
                "turn_exposure": doc.get("exposure"), "reason": doc.get("reason"), "title": doc.get("title"),
                "url": doc.get("url"), "kind": doc.get("kind"), "artifact_kind": doc.get("artifact_kind"),
                "rank": it.get("rank"), "chunk_index": it.get("chunk_index"), "page": it.get("page")}
        if it["doc_id"] in verdicts:
            meta["verdict"] = verdicts[it["doc_id"]]
        attrs[prefix + DOCUMENT_METADATA] = _json({k: v for k, v in meta.items() if v is not None})
    return attrs


def _items_by_call(items: Iterable[dict[str, Any]]) -> dict[int | None, list[dict[str, Any]]]:
    """Retrieved items grouped by the tool call that returned them (`None`: the excerpts), each in its order."""
    by_call: dict[int | None, list[dict[str, Any]]] = {}
    for it in sorted(items, key=lambda it: (it["tool_call_seq"] is None, it["tool_call_seq"] or 0, it["position"])):
        by_call.setdefault(it["tool_call_seq"], []).append(it)
    return by_call


def _tool_attributes(call: dict[str, Any], items: list[dict[str, Any]],
                     sources: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """A `TOOL` span's attributes: the arguments the model passed, the documents returned (or the error)."""
    args = call.get("args_json") or "{}"
    returned = [{"doc_id": it["doc_id"], "title": sources.get(it["doc_id"], {}).get("title"),
                 "rank": it.get("rank"), "score": it.get("score")} for it in items]
    attrs = {TOOL_NAME: call["name"], TOOL_PARAMETERS: args, INPUT_VALUE: args, INPUT_MIME: JSON_MIME,
             OUTPUT_VALUE: call.get("error") or _json(returned),
             OUTPUT_MIME: TEXT_MIME if call.get("error") else JSON_MIME,
             METADATA: _json({"seq": call["seq"], "exposure": call["exposure"], "n_results": call["n_results"]})}
    if call.get("call_id"):
        attrs[TOOL_ID] = call["call_id"]
    return attrs


def _retriever_input(args: str) -> str:
    """A tool call's `RETRIEVER` input: its `query` argument, else the arguments' JSON as they are."""
    try:
        query = json.loads(args)
    except ValueError:
        query = {}
    query = query.get("query") if isinstance(query, dict) else None
    return query if isinstance(query, str) else args


def _llm_attributes(call: dict[str, Any]) -> dict[str, Any]:
    """An `LLM` span's attributes: the model, the token counts, what else the call recorded."""
    attrs: dict[str, Any] = {METADATA: _json({k: call.get(k) for k in
                                              ("seq", "provider", "model_version", "finish_reason", "retries")
                                              if call.get(k) is not None})}
    if call.get("model"):
        attrs[LLM_MODEL_NAME] = call["model"]
    tin, tout = call.get("tokens_in"), call.get("tokens_out")
    if tin is not None:
        attrs[TOKENS_PROMPT] = int(tin)
    if tout is not None:
        attrs[TOKENS_COMPLETION] = int(tout)
    if tin is not None and tout is not None:
        attrs[TOKENS_TOTAL] = int(tin) + int(tout)
    return attrs


def _root_attributes(t: TurnRows) -> dict[str, Any]:
    """The root `CHAIN` span's attributes: question, answer, session, who asked, and the sets in `metadata`."""
    turn = t.turn
    ordered = sorted(t.sources, key=lambda s: s["position"])
    meta = {"turn_id": turn["turn_id"], "status": turn["status"], "question_kind": turn.get("question_kind"),
            "sets": {"retrieved": [s["doc_id"] for s in ordered], "cited": [s["doc_id"] for s in ordered if s["cited"]],
                     "consulted": [s["doc_id"] for s in ordered if s["consulted"]]},
            "rejected_citations": rejected_citations(t.citations), "run": _run_config(t.run)}
    if turn.get("error"):
        meta["error"] = turn["error"]
    if turn.get("conversation_id") is not None:
        meta["conversation_id"], meta["position"] = turn["conversation_id"], turn.get("position")
    attrs = {INPUT_VALUE: turn["question"], INPUT_MIME: TEXT_MIME, OUTPUT_VALUE: turn.get("answer") or "",
             OUTPUT_MIME: TEXT_MIME, SESSION_ID: session_id(turn), METADATA: _json(meta)}
    if turn.get("user_id") is not None:  # who asked, when the app has sign-in (m018)
        attrs[USER_ID] = turn["user_id"]
    return attrs


class _Timeline:
    """One turn's child spans laid end to end from its start, in the order the agent loop ran them."""

    def __init__(self, t: TurnRows, project: str, start: int):
        self.t, self.project, self.clock = t, project, start
        self.tid = t.turn["turn_id"]
        self.trace, self.root_id = trace_id_of(self.tid, project), span_id_of(self.tid, "turn", project)
        self.sources = {s["doc_id"]: s for s in t.sources}
        self.by_call = _items_by_call(t.retrieved_items)
        self.spans: list[SpanSpec] = []

    def add(self, name: str, kind: str, role: str, ns: int, attrs: dict[str, Any], parent: int | None = None,
            error: str | None = None, advance: bool = True) -> int:
        """A span of `ns` nanoseconds from the clock (moved on past it unless `advance` is false); its id."""
        sid = span_id_of(self.tid, role, self.project)
        end = self.clock + max(0, ns)
        self.spans.append(SpanSpec(name, kind, self.trace, sid, self.root_id if parent is None else parent, self.clock,
                                   end, {SPAN_KIND: kind, **attrs}, error))
        if advance:
            self.clock = end
        return sid

    def excerpts(self, model_calls: list[dict[str, Any]]) -> None:
        """Excerpt mode: the retrieval of the excerpts, as long as what the model call left of the turn."""
        excerpts = self.by_call.get(None, [])
        if excerpts:
            took = _ms_ns(self.t.turn.get("latency_ms")) - sum(_ms_ns(c.get("latency_ms")) for c in model_calls)
            self.add("excerpts", "RETRIEVER", "retriever:excerpts", took,
                     {INPUT_VALUE: self.t.turn["question"], **_documents(excerpts, self.sources, self.t.verdicts)})

    def tool(self, call: dict[str, Any]) -> None:
        """A `TOOL` span, with a `RETRIEVER` span under it for a search or a call that returned documents."""
        seq, items, ns = call["seq"], self.by_call.get(call["seq"], []), _ms_ns(call.get("latency_ms"))
        retrieves = call["name"] == "search" or bool(items)
        sid = self.add(call["name"], "TOOL", f"tool:{seq}", ns, _tool_attributes(call, items, self.sources),
                       error=call.get("error"), advance=not retrieves)
        if retrieves:
            self.add("retrieve", "RETRIEVER", f"retriever:{seq}", ns,
                     {INPUT_VALUE: _retriever_input(call.get("args_json") or "{}"),
                      **_documents(items, self.sources, self.t.verdicts)}, parent=sid)

    def model(self, call: dict[str, Any]) -> None:
        """An `LLM` span: an error when the call failed (the turn's error, when it has one)."""
        failed = call.get("finish_reason") == "error"
        error = (self.t.turn.get("error") or "the model call failed") if failed else None
        self.add(f"{call.get('provider') or 'model'} call", "LLM", f"llm:{call['seq']}", _ms_ns(call.get("latency_ms")),
                 _llm_attributes(call), error=error)


def turn_spans(t: TurnRows, project: str = DEFAULT_PROJECT) -> list[SpanSpec]:
    """Every span of one stored turn for `project`, root first (see the module docstring for the layout)."""
    turn = t.turn
    start = to_ns(turn.get("started_at") or (t.run or {}).get("created_at") or _EPOCH)
    line = _Timeline(t, project, start)
    model_calls = sorted(t.model_calls, key=lambda c: c["seq"])
    line.excerpts(model_calls)
    pending = iter(sorted(t.tool_calls, key=lambda c: c["seq"]))
    for call in model_calls:
        line.model(call)
        for _ in range(call.get("n_tool_calls") or 0):
            nxt = next(pending, None)
            if nxt is not None:
                line.tool(nxt)
    for call in pending:  # turns written before `model_calls` existed: the tool calls end to end
        line.tool(call)
    end = max([start + _ms_ns(turn.get("latency_ms"))] + [s.end_ns for s in line.spans])
    root = SpanSpec("turn", "CHAIN", line.trace, line.root_id, None, start, end,
                    {SPAN_KIND: "CHAIN", **_root_attributes(t)},
                    None if turn["status"] == "ok" else (turn.get("error") or turn["status"]))
    return [root, *line.spans]


# --- reading stored turns ----------------------------------------------------------------------

_CHILDREN = {"tool_calls": "x.seq", "retrieved_items": "x.tool_call_seq, x.position", "citations": "x.idx",
             "sources": "x.position", "model_calls": "x.seq"}
#: The child tables a whole turn also nests (`read_stored_turns(whole=True)`), in their order.
_WHOLE = {"claims": "x.added_at, x.judge, x.claim_idx", "turn_context": "x.earlier_position"}
# The rows of each turn's latest verification (the one the views read, `source_verdicts`), control first.
_LATEST_ABLATIONS = ("(SELECT a.* FROM ablations a WHERE a.verification_id = (SELECT arg_max(v.verification_id, "
                     "v.verified_at) FROM ablations v WHERE v.turn_id = a.turn_id))")


def _nested_columns(schema: Schema, whole: bool) -> tuple[list[str], str]:
    """The child tables `schema` has (of `_CHILDREN`, and of `_WHOLE` for a whole turn) and the SELECT list that
    nests each into a list per turn."""
    order = {**_CHILDREN, **(_WHOLE if whole else {})}
    if whole and schema.has("ablations"):
        order["ablations"] = "x.seq"
    children = [name for name in order if schema.has(name)]
    # the passages' text beside each item (an older database has none: no `content` then)
    source = {"ablations": _LATEST_ABLATIONS}
    if schema.has("passages"):
        source["retrieved_items"] = "(SELECT i.*, p.text FROM retrieved_items i LEFT JOIN passages p USING (passage_id))"
    cols = ", ".join(f"(SELECT list(x ORDER BY {order[n]}) FROM {source.get(n, n)} x WHERE x.turn_id = t.turn_id) "
                     f"AS {n}" for n in children)
    if schema.has("source_verdicts"):
        cols += (", (SELECT list(struct_pack(doc_id := x.doc_id, verdict := x.verdict)) FROM source_verdicts x "
                 "WHERE x.turn_id = t.turn_id AND x.verdict IS NOT NULL) AS verdicts")
    return children, cols


def read_stored_turns(con, run_id: str | None = None, *, schema: Schema | None = None,
                      conversation_id: str | None = None, whole: bool = False,
                      turn_id: str | None = None) -> Iterator[TurnRows]:
    """Every turn (of `run_id`, or of `conversation_id` in its order, or only `turn_id`, else all) with its rows,
    oldest first, from an open (read-only) connection; the one reader of stored turns (export, reopening a
    conversation, an audited turn opened in the app).

    One query nests each child table into a list per turn; the verdicts are those of the turn's latest
    verification (view `source_verdicts`) when the database has them, and are simply absent before. `whole`
    also nests the turn's claims, its latest verification's rows and its `turn_context`. What the database has
    is `schema` (default: read from `con`), never a probe of its tables.
    """
    schema = schema or Schema.read(con)
    children, cols = _nested_columns(schema, whole)
    if turn_id is not None:
        where, params, order = "WHERE t.turn_id = ?", [turn_id], "t.turn_id"
    elif conversation_id is not None:
        where, params, order = "WHERE t.conversation_id = ?", [conversation_id], "t.position, t.started_at, t.turn_id"
    else:
        where, params = ("WHERE t.run_id = ?", [run_id]) if run_id else ("", [])
        order = "t.started_at, t.turn_id"
    sql = f"SELECT t AS turn, r AS run, {cols} FROM turns t LEFT JOIN runs r ON r.run_id = t.run_id {where} ORDER BY {order}"
    rel = con.execute(sql, params)
    names = [d[0] for d in rel.description]
    while True:
        batch = rel.fetchmany(256)
        if not batch:
            return
        for row in batch:
            r = dict(zip(names, row))
            verdicts = {a["doc_id"]: a["verdict"] for a in (r.pop("verdicts", None) or []) if a["verdict"]}
            yield TurnRows(r["turn"], r["run"], **{n: r.get(n) or [] for n in children}, verdicts=verdicts)


def stored_turns(db: str | Path, run_id: str | None = None, *, timeout: float | None = None) -> list[TurnRows]:
    """The turns of the trace database at `db` (all, or one run's), read on one short read-only connection.

    A reader: the database is never migrated (`TraceReader.check`); an older one is read as it is."""
    import duckdb

    from .reader import TraceReader

    reader = TraceReader(db, timeout=timeout)
    with reader.connect() as con:
        try:
            return list(read_stored_turns(con, run_id, schema=reader.schema))
        except duckdb.Error as exc:
            raise TraceStoreError(f"could not read the turns of {db}: {exc}") from None
