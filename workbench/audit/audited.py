"""One audited turn: its turn record and sources payload, from the spans of one trace (docs/design.md §12).

The measured exposures become the record's tool calls (one per requested call, `calls`; each result with the
exposure measured for it) and the prompt's numbered blocks its excerpts (a block that shows no unit is an excerpt
of no document), so the three sets, citations and rejections come from `provenance.sources_payload`, the same
rules as for the workbench's own turns (§1, §11). An unauditable turn claims nothing: provenance judges no
citation of it, and its links are listed in `audit.unjudged_citations`. In a conversation the
earlier turns are in the prompt, so each earlier turn's context state is measured: `full` when its shown units
are still in the input, `answer` when only its answer is, else `dropped`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import datetime, timezone

from ..payload import AUDITED, Audit, Evidence, Payload
from ..provenance import extract_citations, sources_payload
from ..redact import scrub_secrets
from ..types import EXPOSURE_RANK, UNAUDITABLE, Excerpt, HistoryTurn, ModelCall, ResultItem, ToolCall, TurnRecord
from .calls import Call, turn_calls
from .measure import Seen, block_unit, exposure_of, holds_whole, normalize, numbered_blocks, searchable, texts
from .shapes import Message
from .spans import CUT_MARK, Span
from .turns import REDACTED, SpanCall, current_from, hidden_turn, model_calls, question_of, session_of
from .units import DocRef, Resolver, Unit

SOURCE = "openinference"
_MAX_EXCERPTS = 1000  # numbered blocks read from a prompt, and excerpts a turn's `[n]` may name (docs/security.md)


@dataclass(frozen=True)
class AuditedTurn:
    """One audited turn: its record and sources payload (as `answer.Answer` holds a native turn's), plus the one
    thing only the audit measures of it, `shown`: the normalised contents of its units that reached its model, by
    which a later turn's prompt is searched for it (its context state, module docstring)."""

    record: TurnRecord
    payload: Payload
    shown: tuple[str, ...] = ()

    @property
    def earlier(self) -> Earlier:
        """This turn as the later turns of its conversation need it (what the collector keeps per session)."""
        return Earlier(dataclasses.replace(self.record, excerpts=(), history=()), self.shown)


@dataclass(frozen=True, slots=True)
class Earlier:
    """An earlier turn of an audited conversation: its record, wrapped (it becomes a later turn's
    `HistoryTurn.record` as it is), with `shown` (`AuditedTurn.shown`). The record leaves out two things. Its
    excerpts: each prompt numbers its blocks anew, so an earlier turn's `[n]` names a block of its own prompt, not
    one of a conversation's continued numbers (docs/design.md §11 rule 4); its documents stay in its tool calls.
    Its own history: the collector keeps a session's last `MAX_EARLIER_TURNS` turns, and through their histories
    it would keep every turn before them (so `HistoryTurn.prior_context` is empty: the states of the later turn
    are used, docs/design.md §11)."""

    record: TurnRecord
    shown: tuple[str, ...] = ()


@dataclass
class _Docs:
    """The turn's documents in first-seen order, with their units, and per call the units of each document."""

    refs: dict[str, DocRef] = field(default_factory=dict)
    units: dict[str, list[Unit]] = field(default_factory=dict)
    calls: list[tuple[Call, dict[str, list[Unit]]]] = field(default_factory=list)

    def add(self, ref: DocRef, unit: Unit) -> None:
        self.refs.setdefault(ref.doc_id, ref)
        self.units.setdefault(ref.doc_id, []).append(unit)
        self.calls[-1][1].setdefault(ref.doc_id, []).append(unit)


def audit_trace(spans: list[Span], resolver: Resolver, *, run: str, earlier: list[Earlier] = (),
                extra_trace_ids: tuple[str, ...] = ()) -> AuditedTurn | None:
    """The turn one trace is (None: the trace is no turn), with `earlier` the conversation's earlier turns."""
    calls = model_calls(spans)
    if not calls or not calls[-1].answers and not hidden_turn(calls):
        return None
    final = calls[-1]
    spans = sorted(spans, key=lambda s: (s.start_ns, s.end_ns))
    session = session_of(spans)
    question = question_of(spans, final)
    trace_id = spans[0].trace_id
    position = (earlier[-1].record.position or len(earlier)) + 1 if earlier else 1
    base = _base(spans, calls, final, question, run, session, position, trace_id)
    if resolver.corpus is not None:  # the corpus the turn was audited against: Document usage counts it there
        base = dataclasses.replace(base, config={**base.config, "corpus_id": resolver.corpus.corpus_id,
                                                 "corpus_hash": resolver.corpus.content_hash})
    audit = Audit(source=SOURCE, service=next((s.service for s in spans if s.service), None),
                  trace_ids=tuple(dict.fromkeys((*extra_trace_ids, trace_id))),
                  rule="corpus" if resolver.corpus is not None else "conservative")
    reason = _unauditable(spans, calls)
    if reason is not None:
        record = dataclasses.replace(base, status=UNAUDITABLE, error=reason)
        # links and `[n]` markers alike: which of them names a numbered block cannot be told either
        unjudged = tuple(dict.fromkeys(c.target for c in extract_citations(record.answer, "excerpts")))
        payload = dataclasses.replace(sources_payload(record),
                                      audit=dataclasses.replace(audit, reason=reason, unjudged_citations=unjudged))
        return AuditedTurn(record, payload)
    parts = [(k, c, _own_part(c.inputs)) for k, c in enumerate(calls, start=1)]
    docs = _documents(turn_calls(spans, parts), resolver)
    shown_contents = [normalize(u.content) for us in docs.units.values() for u in us]
    found = texts(parts, shown_contents, question)
    seen = {d: exposure_of(docs.refs[d], docs.units[d], found) for d in docs.refs}
    tool_calls = _tool_calls(docs, seen, found)
    excerpts = _excerpts(parts, docs, seen, final.answer or "")
    history = tuple(_history(e, final) for e in earlier)
    record = dataclasses.replace(base, tool_calls=tool_calls, excerpts=excerpts, history=history,
                                 mode="excerpts" if excerpts else "agent")
    payload = sources_payload(record)
    evidence = {d: Evidence(s.exposure, s.where) for d, s in seen.items() if s is not None}
    audit = dataclasses.replace(audit, not_shown=tuple(d for d, s in seen.items() if s is None), evidence=evidence)
    shown = tuple(dict.fromkeys(normalize(u.content) for d, s in seen.items() if s is not None
                                and s.exposure != "title" for u in docs.units[d] if u.content.strip()))
    return AuditedTurn(record, dataclasses.replace(payload, audit=audit), shown)


def turn_id_for(trace_id: str) -> str:
    """An audited turn's id: fixed by its trace, so a trace assembled twice is the same turn (written once)."""
    return f"otel-{trace_id}"


def _base(spans: list[Span], calls: list[SpanCall], final: SpanCall, question: str, run: str,
          session: str | None, position: int, trace_id: str) -> TurnRecord:
    start = spans[0].start_ns
    end = max(s.end_ns for s in spans)
    model = next((m for c in reversed(calls) if (m := _model(c.span)) is not None), None)
    service = next((s.service for s in spans if s.service), None)
    recorded = tuple(ModelCall(provider=str(c.span.attributes.get("llm.provider") or AUDITED),
                                  model=_model(c.span),
                                  latency_ms=(c.span.end_ns - c.span.start_ns) / 1e6,
                                  tokens_in=_first_int(c.span, "llm.token_count.prompt", "gen_ai.usage.input_tokens"),
                                  tokens_out=_first_int(c.span, "llm.token_count.completion",
                                                        "gen_ai.usage.output_tokens"),
                                  finish_reason=c.span.attributes.get("llm.finish_reason"),
                                  n_tool_calls=len(c.requests)) for c in calls)
    config = {"provider": AUDITED, "model": model, "app": service, "source": SOURCE, "run": run}
    return TurnRecord(question=scrub_secrets(question), answer=scrub_secrets(final.answer or ""), turn_id=turn_id_for(trace_id),
                      model_calls=recorded, config=config,
                      started_at=datetime.fromtimestamp(start / 1e9, timezone.utc).isoformat(),
                      latency_ms=(end - start) / 1e6, conversation_id=session,
                      position=position if session else None)


def _first_int(span: Span, *keys: str) -> int | None:
    return next((v for k in keys if isinstance(v := span.attributes.get(k), int)), None)


def _model(span: Span) -> str | None:
    """The model a call names: OpenInference's `llm.model_name`, else the GenAI response's or request's model."""
    return next((v for k in ("llm.model_name", "gen_ai.response.model", "gen_ai.request.model")
                 if isinstance(v := span.attributes.get(k), str)), None)


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


def _documents(calls: list[Call], resolver: Resolver) -> _Docs:
    docs = _Docs()
    for call in calls:
        docs.calls.append((call, {}))
        for u in call.units:
            docs.add(resolver.document(u), u)
    return docs


def _tool_calls(docs: _Docs, seen: dict[str, Seen | None], found) -> tuple[ToolCall, ...]:
    """One tool call per call, each result with the exposure measured through that call's own units (the call
    that opened a document gets its `full`, a search that listed it its `snippet`); a document whose strongest
    exposure no single call's units explain is credited with it at the first call that returned it."""
    measured: list[dict[str, str]] = []
    for _, by_doc in docs.calls:
        got = {}
        for doc_id, units in by_doc.items():
            if seen[doc_id] is not None:
                ref = docs.refs[doc_id]
                own = exposure_of(ref, units, found, corpus_full=holds_whole(ref, units))
                got[doc_id] = own.exposure if own is not None else "title"
        measured.append(got)
    for doc_id, s in seen.items():
        holders = [got for got in measured if doc_id in got]
        if s is not None and holders and max(EXPOSURE_RANK[g[doc_id]] for g in holders) < EXPOSURE_RANK[s.exposure]:
            holders[0][doc_id] = s.exposure
    out = []
    for (call, by_doc), got in zip(docs.calls, measured, strict=True):
        results = tuple(ResultItem(doc_id=d, title=docs.refs[d].title or "", url=docs.refs[d].url, rank=by_doc[d][0].rank,
                                   score=by_doc[d][0].score, snippet=by_doc[d][0].content or None, exposure=e)
                        for d, e in got.items())
        strongest = max(got.values(), key=lambda e: EXPOSURE_RANK[e], default="title")
        out.append(ToolCall(name=call.origin.name, exposure=strongest, args=dict(call.origin.args), results=results,
                            call_id=call.origin.call_id))
    return tuple(out)


def _excerpts(parts, docs: _Docs, seen: dict[str, Seen | None], answer: str) -> tuple[Excerpt, ...]:
    """The final prompt's numbered blocks as excerpts 1..n, n the highest number a block shows or the answer cites
    (at most `_MAX_EXCERPTS`); a number no block shows, or a block that shows no unit, is an excerpt of no document
    (`doc_id` None), so provenance rejects a `[n]` citing it as `not_retrieved`."""
    blocks = {b.n: b for b in numbered_blocks(parts)}
    if not blocks:
        return ()
    cited = [c.upto or c.n for c in extract_citations(answer, "excerpts") if c.n is not None]
    unit_doc = {id(u): d for d, us in docs.units.items() for u in us if seen[d] is not None}
    shown = [u for us in docs.units.values() for u in us if id(u) in unit_doc]
    out = []
    for n in range(1, min(max(blocks.keys() | set(cited)), _MAX_EXCERPTS) + 1):
        b = blocks.get(n)
        u = block_unit(b, shown) if b is not None else None
        doc_id = unit_doc[id(u)] if u is not None else None
        ref = docs.refs.get(doc_id) if doc_id is not None else None
        out.append(Excerpt(n=n, doc_id=doc_id, text=b.text if b else "", title=ref.title or "" if ref else "",
                           url=ref.url if ref else None, score=u.score if u else None))
    return tuple(out)


def _history(e: Earlier, final: SpanCall) -> HistoryTurn:
    """An earlier turn as this turn's prompt held it: its context state measured in the prompt's earlier part."""
    start = current_from(final.inputs)
    before = " ".join(searchable(m.content) for m in final.inputs[:start] if m.content and m.role != "system")
    if e.shown and any(c in before for c in e.shown):
        context = "full"
    elif e.record.answer and normalize(e.record.answer) in before:
        context = "answer"
    else:
        context = "dropped"
    return HistoryTurn(record=e.record, context=context, position=e.record.position)
