"""One audited turn: its turn record and sources payload, from the spans of one trace (docs/design.md §12).

The measured exposures become the record's tool calls (one per retriever, reranker or tool result and exposure)
and the prompt's numbered blocks its excerpts, so the three sets, citations and rejections come from
`provenance.sources_payload`, the same rules as for the workbench's own turns (§1, §11). In a conversation the
earlier turns are in the prompt, so each earlier turn's context state is measured: `full` when its shown units
are still in the input, `answer` when only its answer is, else `dropped`.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from ..payload import AUDITED, Audit, Evidence, Payload, Rejection, Sets
from ..provenance import sources_payload
from ..redact import scrub_secrets
from ..types import EXPOSURE_RANK, Excerpt, HistoryTurn, ModelCall, ResultItem, ToolCall, TurnRecord
from .measure import Seen, block_unit, exposure_of, normalize, numbered_blocks, texts
from .spans import CUT_MARK, Span
from .turns import REDACTED, Message, SpanCall, current_from, model_calls, question_of, session_of
from .units import DocRef, Origin, Resolver, Unit, reranker_inputs, span_units, tool_units

SOURCE = "openinference"
_UNMATCHED = "\0unmatched-block"  # a numbered block that shows no unit: a `[n]` naming it is rejected


@dataclass(frozen=True, slots=True)
class Earlier:
    """What a later turn of the same conversation needs of an earlier one."""

    turn_id: str
    position: int
    question: str
    answer: str
    tool_calls: tuple[ToolCall, ...]
    shown: tuple[str, ...]  # normalised contents of its units that reached its model


@dataclass(frozen=True)
class AuditedTurn:
    record: TurnRecord
    payload: Payload
    session: str | None
    earlier: Earlier


@dataclass
class _Docs:
    """The turn's documents in first-seen order, with their units."""

    refs: dict[str, DocRef] = field(default_factory=dict)
    units: dict[str, list[Unit]] = field(default_factory=dict)

    def add(self, ref: DocRef, unit: Unit) -> None:
        self.refs.setdefault(ref.doc_id, ref)
        self.units.setdefault(ref.doc_id, []).append(unit)


def audit_trace(spans: list[Span], resolver: Resolver, *, run: str, earlier: list[Earlier] = (),
                extra_trace_ids: tuple[str, ...] = ()) -> AuditedTurn | None:
    """The turn one trace is (None: the trace is no turn), with `earlier` the conversation's earlier turns."""
    calls = model_calls(spans)
    if not calls or not calls[-1].answers:
        return None
    final = calls[-1]
    spans = sorted(spans, key=lambda s: (s.start_ns, s.end_ns))
    session = session_of(spans)
    question = question_of(spans, final)
    trace_id = spans[0].trace_id
    base = _base(spans, calls, final, question, run, session, earlier[-1].position + 1 if earlier else 1, trace_id)
    if resolver.corpus is not None:  # the corpus the turn was audited against: Document usage counts it there
        base = dataclasses.replace(base, config={**base.config, "corpus_id": resolver.corpus.corpus_id,
                                                 "corpus_hash": resolver.corpus.content_hash})
    audit = Audit(source=SOURCE, service=next((s.service for s in spans if s.service), None),
                  trace_ids=tuple(dict.fromkeys((*extra_trace_ids, trace_id))),
                  rule="corpus" if resolver.corpus is not None else "conservative")
    reason = _unauditable(spans, calls)
    if reason is not None:
        record = dataclasses.replace(base, status="unauditable", error=reason)
        payload = dataclasses.replace(sources_payload(record), audit=dataclasses.replace(audit, reason=reason))
        return AuditedTurn(record, payload, session, Earlier(base.turn_id, base.position or 1, question, final.answer, (), ()))
    parts = [(k, c, _own_part(c.inputs)) for k, c in enumerate(calls, start=1)]
    docs = _documents(spans, parts, resolver)
    shown_contents = [normalize(u.content) for us in docs.units.values() for u in us]
    found = texts(parts, shown_contents, question)
    seen = {d: exposure_of(docs.refs[d], docs.units[d], found) for d in docs.refs}
    tool_calls = _tool_calls(docs, seen)
    excerpts = _excerpts(parts, docs, seen)
    history = tuple(_history(e, final) for e in earlier)
    record = dataclasses.replace(base, tool_calls=tool_calls, excerpts=excerpts, history=history,
                                 mode="excerpts" if excerpts else "agent")
    payload = _without_unmatched(sources_payload(record))
    evidence = {d: Evidence(s.exposure, s.where) for d, s in seen.items() if s is not None}
    audit = dataclasses.replace(audit, not_shown=tuple(d for d, s in seen.items() if s is None), evidence=evidence)
    shown = tuple(dict.fromkeys(normalize(u.content) for d, s in seen.items() if s is not None
                                and s.exposure != "title" for u in docs.units[d] if u.content.strip()))
    return AuditedTurn(record, dataclasses.replace(payload, audit=audit), session,
                       Earlier(base.turn_id, base.position or 1, question, final.answer or "", tool_calls, shown))


def turn_id_for(trace_id: str) -> str:
    """An audited turn's id: fixed by its trace, so a trace assembled twice is the same turn (written once)."""
    return f"otel-{trace_id}"


def _base(spans: list[Span], calls: list[SpanCall], final: SpanCall, question: str, run: str,
          session: str | None, position: int, trace_id: str) -> TurnRecord:
    start = spans[0].start_ns
    end = max(s.end_ns for s in spans)
    model = next((c.span.attributes.get("llm.model_name") for c in reversed(calls)
                  if isinstance(c.span.attributes.get("llm.model_name"), str)), None)
    service = next((s.service for s in spans if s.service), None)
    recorded = tuple(ModelCall(provider=str(c.span.attributes.get("llm.provider") or AUDITED),
                                  model=c.span.attributes.get("llm.model_name"),
                                  latency_ms=(c.span.end_ns - c.span.start_ns) / 1e6,
                                  tokens_in=_int(c.span.attributes.get("llm.token_count.prompt")),
                                  tokens_out=_int(c.span.attributes.get("llm.token_count.completion")),
                                  finish_reason=c.span.attributes.get("llm.finish_reason"),
                                  n_tool_calls=len(c.requests)) for c in calls)
    config = {"provider": AUDITED, "model": model, "app": service, "source": SOURCE, "run": run}
    return TurnRecord(question=scrub_secrets(question), answer=scrub_secrets(final.answer or ""), turn_id=turn_id_for(trace_id),
                      model_calls=recorded, config=config,
                      started_at=datetime.fromtimestamp(start / 1e9, timezone.utc).isoformat(),
                      latency_ms=(end - start) / 1e6, conversation_id=session,
                      position=position if session else None)


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) else None


def _unauditable(spans: list[Span], calls: list[SpanCall]) -> str | None:
    """Why what the rules need is hidden, missing or cut, or None (docs/design.md §12 *Unauditable*)."""
    for c in calls:
        if c.hidden:
            return c.hidden
    if calls[-1].answer == REDACTED:
        return "the answer is hidden (__REDACTED__: the app sets OPENINFERENCE_HIDE_OUTPUTS)"
    for s in spans:
        if s.kind in ("RETRIEVER", "RERANKER", "TOOL"):
            if s.dropped_attributes:
                return f"a span attribute limit dropped {s.dropped_attributes} attributes of {s.name!r} (documents may be missing)"
            if s.cut:
                return f"attribute {s.cut[0]} of {s.name!r} is over the workbench's size bound ({CUT_MARK})"
            if any(v == REDACTED for k, v in s.attributes.items() if k.endswith((".document.content", "output.value"))):
                return f"the documents of {s.name!r} are hidden (__REDACTED__)"
    return None


def _own_part(inputs: tuple[Message, ...]) -> list[Message]:
    """This turn's part of a model input: system prompts and everything from the last user message on."""
    start = current_from(inputs)
    return [m for i, m in enumerate(inputs) if i >= start or m.role == "system"]


def _documents(spans: list[Span], parts: list[tuple[int, SpanCall, list[Message]]], resolver: Resolver) -> _Docs:
    docs = _Docs()
    for s in spans:
        for u in (*span_units(s), *reranker_inputs(s)):
            docs.add(resolver.document(u), u)
    seen_results: set[tuple[str | None, str]] = set()
    for _, call, msgs in parts:
        requests = {r.call_id: r for m in call.inputs for r in m.tool_calls if r.call_id}
        for m in msgs:
            if m.role != "tool" or not m.content or (m.tool_call_id, m.content) in seen_results:
                continue
            seen_results.add((m.tool_call_id, m.content))
            r = requests.get(m.tool_call_id)
            origin = Origin(name=r.name if r else "tool", kind="TOOL", args=_args(r.arguments) if r else {},
                            call_id=m.tool_call_id)
            for u in tool_units(m.content, origin):
                docs.add(resolver.document(u), u)
    return docs


def _args(arguments: str) -> dict[str, Any]:
    try:
        data = json.loads(arguments)
    except (ValueError, RecursionError):
        return {"arguments": arguments}
    return data if isinstance(data, dict) else {"arguments": data}


def _tool_calls(docs: _Docs, seen: dict[str, Seen | None]) -> tuple[ToolCall, ...]:
    """One tool call per origin and measured exposure (strongest first); an origin none of whose documents
    reached the model is one call with no results."""
    by_origin: dict[int, dict[str, list[ResultItem]]] = {}
    origins: dict[int, Origin] = {}
    for doc_id, units in docs.units.items():
        ref, s = docs.refs[doc_id], seen[doc_id]
        for u in units:
            origins.setdefault(id(u.origin), u.origin)
            group = by_origin.setdefault(id(u.origin), {})
            if s is None:
                continue
            items = group.setdefault(s.exposure, [])
            if all(i.doc_id != doc_id for i in items):
                items.append(ResultItem(doc_id=doc_id, title=ref.title or "", url=ref.url, rank=u.rank, score=u.score,
                                        snippet=u.content or None))
    out = []
    for key, groups in by_origin.items():
        origin = origins[key]
        if not groups:
            out.append(ToolCall(name=origin.name, exposure="title", args=dict(origin.args), call_id=origin.call_id))
        for exposure in sorted(groups, key=lambda e: -EXPOSURE_RANK[e]):
            out.append(ToolCall(name=origin.name, exposure=exposure, args=dict(origin.args),
                                results=tuple(groups[exposure]), call_id=origin.call_id))
    return tuple(out)


def _excerpts(parts, docs: _Docs, seen: dict[str, Seen | None]) -> tuple[Excerpt, ...]:
    """The final prompt's numbered blocks as excerpts 1..max (a number no block shows, or a block that shows no
    unit, names the `_UNMATCHED` placeholder, so a `[n]` citing it is rejected)."""
    blocks = {b.n: b for b in numbered_blocks(parts)}
    if not blocks:
        return ()
    unit_doc = {id(u): d for d, us in docs.units.items() for u in us if seen[d] is not None}
    shown = [u for us in docs.units.values() for u in us if id(u) in unit_doc]
    out = []
    for n in range(1, min(max(blocks), 1000) + 1):
        b = blocks.get(n)
        u = block_unit(b, shown) if b is not None else None
        doc_id = unit_doc[id(u)] if u is not None else _UNMATCHED
        ref = docs.refs.get(doc_id)
        out.append(Excerpt(n=n, doc_id=doc_id, text=b.text if b else "", title=ref.title or "" if ref else "",
                           url=ref.url if ref else None, score=u.score if u else None))
    return tuple(out)


def _without_unmatched(p: Payload) -> Payload:
    """The payload with the unmatched-block placeholder gone: a `[n]` that named it is `not_retrieved`."""
    if p.mode != "excerpts":
        return p
    citations = tuple(dataclasses.replace(c, doc_id=None, valid=False, reason="not_retrieved", excerpt=None)
                      if c.doc_id == _UNMATCHED or c.reason == "out_of_range" else c for c in p.citations)
    rejected, targets = [], set()
    for c in citations:
        if not c.valid and c.target not in targets:
            targets.add(c.target)
            rejected.append(Rejection(target=c.target, reason=c.reason, nearest_doc_id=c.nearest_doc_id,
                                      edit_distance=c.edit_distance, turn_id=c.turn_id, position=c.position))
    keep = lambda ids: tuple(i for i in ids if i != _UNMATCHED)  # noqa: E731
    return dataclasses.replace(
        p, citations=citations, rejected_citations=tuple(rejected),
        sets=Sets(keep(p.sets.retrieved), keep(p.sets.cited), keep(p.sets.consulted)),
        documents=tuple(d for d in p.documents if d.doc_id != _UNMATCHED),
        sources=tuple(s for s in p.sources if s.doc_id != _UNMATCHED))


def _history(e: Earlier, final: SpanCall) -> HistoryTurn:
    """An earlier turn as this turn's prompt held it: its context state measured in the prompt's earlier part."""
    start = current_from(final.inputs)
    before = " ".join(normalize(m.content) for m in final.inputs[:start] if m.content and m.role != "system")
    if e.shown and any(c in before for c in e.shown):
        context = "full"
    elif e.answer and normalize(e.answer) in before:
        context = "answer"
    else:
        context = "dropped"
    return HistoryTurn(record=TurnRecord(question=e.question, answer=e.answer, turn_id=e.turn_id, tool_calls=e.tool_calls),
                       context=context, position=e.position)
