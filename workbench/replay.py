"""Replay verification of an audited turn (docs/design.md §9 and §12; docs/audit.md).

An audited turn is what another app did: the workbench cannot run that app again, but its spans recorded the input
messages of the turn's final model call. A replay re-sends that call as recorded (messages and tool declarations)
to an endpoint serving the same model — an OpenAI-compatible server or Ollama, through the `openai` and `ollama`
providers — first unchanged (the control), then once per consulted document with that document's text, wherever
it appears in those messages, replaced by `verify.WITHHELD_NOTICE`. The control, the budget, the comparisons, the
verdicts and the `ablations` rows are verification by ablation's own (`verify.ablate`); the method is recorded as
`REPLAY_METHOD`.

The stated limit (`LIMIT`): only the final model call is replayed. The app's tool calls and earlier model calls are
kept as they were, so a withheld document is gone from what the final call reads, not from the choices that led
there; a document whose text is not in the final call's input cannot be withheld and gets no verdict.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Sequence

from .config import DEFAULT_JUDGE
from .audit.spans import Span
from .audit.shapes import Message
from .audit.turns import SpanCall, model_calls
from .errors import ProviderError, VerificationError
from .payload import Payload
from .providers.base import Provider, declared, get_provider
from .redact import redact_value
from .trace.audit_inputs import shown_passages, stored_spans, turn_kind
from .trace.reader import as_reader
from .trace.writer import TraceWriter
from .types import TRUNCATED, UNAUDITABLE
from .verify import (DEFAULT_BUDGET, METHOD, WITHHELD_NOTICE, Candidate, RerunOutcome, Verification, ablate, candidates,
                     check_answered, check_budget, pinned_options, within_budget)

REPLAY_METHOD = f"replay-{METHOD}"
#: The providers a replay can send to, and the option of each that names the endpoint.
ENDPOINT_OPTION = {"openai": "base_url", "ollama": "host"}
#: Failures of a replayed call that stop the verification, nothing written: an endpoint that cannot be reached, and
#: one that answers with a redirect (never followed: the message names the code and where it pointed).
STOPS = ("connection_error", "redirect_refused")
LIMIT = ("only the audited turn's final model call is replayed: the app's tool calls and earlier model calls are "
         "not re-run, so a withheld document is gone from what the final call reads, not from the choices that "
         "led to it")


class NativeTurn(VerificationError):
    """The turn is the workbench's own, not an audited one: it is verified by re-running it (`Session.verify`)."""


@dataclass(frozen=True)
class RecordedCall:
    """The final model call of an audited turn as its span recorded it, in the providers' message shape."""

    messages: tuple[dict[str, Any], ...]
    tools: tuple[dict[str, Any], ...]
    model: str | None


def recorded_call(call: SpanCall) -> RecordedCall:
    """`call`'s input messages and tool declarations as provider-neutral messages (`providers.base`)."""
    names = {r.call_id: r.name for m in call.inputs for r in m.tool_calls if r.call_id}
    messages = [_message(m, names) for m in call.inputs]
    model = call.span.attributes.get("llm.model_name")
    return RecordedCall(tuple(messages), tuple(_tools(call.span)), model if isinstance(model, str) else None)


def _message(m: Message, names: dict[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {"role": m.role, "content": m.content or ""}
    if m.tool_calls:
        out["tool_calls"] = [{"id": r.call_id or f"call_{i}", "name": r.name, "args": r.args}
                             for i, r in enumerate(m.tool_calls)]
    if m.role == "tool":
        out["tool_call_id"] = m.tool_call_id or ""
        out["name"] = names.get(m.tool_call_id or "", "")
    return out


def _tools(span: Span) -> list[dict[str, Any]]:
    """The tools the call offered (`llm.tools.<i>.tool.json_schema`), as `{name, description, parameters}`."""
    out = []
    for key in sorted((k for k in span.attributes if re.fullmatch(r"llm\.tools\.\d+\.tool\.json_schema", k)),
                      key=lambda k: int(k.split(".")[2])):
        try:
            schema = json.loads(span.attributes[key])
        except (TypeError, ValueError, RecursionError):
            continue
        fn = schema.get("function", schema) if isinstance(schema, dict) else None
        if isinstance(fn, dict) and fn.get("name"):
            out.append({"name": fn["name"], "description": fn.get("description") or "",
                        "parameters": fn.get("parameters") or {"type": "object", "properties": {}}})
    return out


def withhold(messages: Sequence[dict[str, Any]], texts: Sequence[str]) -> tuple[list[dict[str, Any]], int]:
    """(`messages` with every occurrence of each of `texts` replaced by `WITHHELD_NOTICE`, how many were replaced).
    A text is found as written, as a JSON string writes it (a tool result), or with its whitespace changed."""
    out, total = [], 0
    for m in messages:
        content = m.get("content") or ""
        for text in sorted({t for t in texts if t.strip()}, key=len, reverse=True):  # a longer text first
            content, n = _replace(content, text)
            total += n
        out.append({**m, "content": content})
    return out, total


def _replace(content: str, text: str) -> tuple[str, int]:
    n = 0
    for needle in dict.fromkeys((text, json.dumps(text)[1:-1], json.dumps(text, ensure_ascii=False)[1:-1])):
        n += content.count(needle)
        content = content.replace(needle, WITHHELD_NOTICE)
    if n:
        return content, n
    pattern = r"(?:\s|\\[nrt])+".join(re.escape(w) for w in text.split())
    return re.subn(pattern, WITHHELD_NOTICE, content)


@dataclass(frozen=True)
class AuditedInputs:
    """What a replay of one audited turn needs from the store."""

    payload: Payload
    call: RecordedCall
    #: doc id -> the passages it showed the model: what retrievers and tools returned (its units), and the numbered
    #: blocks of a prompt that show it (a block may hold more than the unit: the next block's header), used only
    #: when none of its units is found
    texts: dict[str, tuple[str, ...]]
    blocks: dict[str, tuple[str, ...]]

    def withheld(self, doc_id: str) -> tuple[list[dict[str, Any]], int]:
        """The final call's messages with `doc_id`'s text withheld (`withhold`), and how many texts were replaced."""
        sent = withhold(self.call.messages, self.texts.get(doc_id, ()))
        return sent if sent[1] else withhold(self.call.messages, self.blocks.get(doc_id, ()))

    def shown(self) -> dict[str, str]:
        """Doc id -> what the model was shown of it (a claim it supports is at stake)."""
        return {d: "\n".join(self.texts.get(d) or self.blocks[d]) for d in {*self.texts, *self.blocks}}


def load(db: str | Path, turn_id: str) -> AuditedInputs:
    """The stored audited turn `turn_id`; `VerificationError` (`NativeTurn`) for one that cannot be replayed."""
    reader = as_reader(db)  # one reader for the three reads
    known, payload_json = turn_kind(reader, turn_id)
    if not known:
        raise VerificationError(f"no turn {turn_id!r} in {db}")
    payload = Payload.from_json(json.loads(payload_json)) if payload_json else None
    if payload is None or payload.audit is None:
        raise NativeTurn(f"turn {turn_id!r} is the workbench's own, not audited from another app's spans: verify it "
                         f"by re-running it with the session that asked it")
    if payload.status == UNAUDITABLE:
        raise VerificationError(f"turn {turn_id!r} is unauditable ({payload.audit.reason}): its recorded model input "
                                f"cannot be replayed")
    check_answered(payload.status, payload.answer)
    own = payload.audit.trace_ids[-1] if payload.audit.trace_ids else None
    spans = [s for s in (Span.from_json(json.loads(t)) for t in stored_spans(reader, payload.audit.trace_ids))
             if s.trace_id == own]
    calls = model_calls(spans)
    if not calls:
        raise VerificationError(f"the spans of turn {turn_id!r} are not in {db}: its final model call cannot be "
                                f"replayed")
    if not calls[-1].inputs:
        raise VerificationError(f"the stored spans of turn {turn_id!r} hold no model input (its messages came as GenAI "
                                f"log events, which are read, not stored): its final model call cannot be replayed")
    carried = [d.carried_from for d in payload.documents if d.carried_from]
    texts: dict[str, tuple[str, ...]] = {}
    blocks: dict[str, tuple[str, ...]] = {}
    for doc_id, from_tool, text in shown_passages(reader, list(dict.fromkeys([turn_id, *carried]))):
        into = texts if from_tool else blocks
        into[doc_id] = (*into.get(doc_id, ()), text)
    return AuditedInputs(payload, recorded_call(calls[-1]), texts, blocks)


@dataclass(frozen=True)
class Replayed:
    """A replay verification: the turn's payload with it as its `verification`, the verification, the model."""

    payload: Payload
    verification: Verification
    model: str


def replay_verify(db: str | Path, turn_id: str, endpoint: str, *, provider: str = "openai", model: str | None = None,
                  budget: int = DEFAULT_BUDGET, judge: str = DEFAULT_JUDGE, write: bool = True) -> Replayed:
    """Verify the audited turn `turn_id` of the trace store `db` by replaying its final model call at `endpoint`
    (the module docstring), and (with `write`) add the verification's `ablations` rows to the store. Nothing is
    written when it cannot run: an unknown, native, unauditable or unanswered turn, none consulted, an
    unreachable endpoint or one that redirects (`VerificationError`)."""
    started = time.perf_counter()
    check_budget(budget)
    if provider not in ENDPOINT_OPTION:
        raise VerificationError(f"a replay sends to {' or '.join(ENDPOINT_OPTION)}, not {provider!r}")
    inputs = load(db, turn_id)
    found = [c for c in candidates(inputs.payload) if c.consulted]
    if not found:
        raise VerificationError(f"nothing to ablate: turn {turn_id!r} consulted no document")
    sent = {c.doc_id: inputs.withheld(c.doc_id) for c in found}
    absent = [(c, "its text is not in the final model call's input, and only that call is replayed")
              for c in found if sent[c.doc_id][1] == 0]
    to_run, skipped = within_budget([c for c in found if sent[c.doc_id][1]], budget)
    name = model or inputs.call.model or inputs.payload.config.model
    if not name:
        raise VerificationError(f"turn {turn_id!r} records no model name: name the model the endpoint serves")
    options, pinned = pinned_options(declared(provider, "options_schema"), {})
    p = get_provider(provider, model=name, **{ENDPOINT_OPTION[provider]: endpoint}, **options)

    def rerun(c: Candidate | None) -> RerunOutcome:
        return _send(p, sent[c.doc_id][0] if c else list(inputs.call.messages), list(inputs.call.tools))

    v = ablate(turn_id, inputs.payload.answer, inputs.payload, to_run, skipped, rerun, inputs.shown, judge=judge,
               budget=budget, sampling=pinned, started=started, method=REPLAY_METHOD, not_withheld=absent)
    if write:
        TraceWriter(db).add_ablations(turn_id, v.rows())
    return Replayed(replace(inputs.payload, verification=v.to_payload()), v, name)


def _send(p: Provider, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> RerunOutcome:
    """One replayed call, its messages and tools redacted again (`redact.redact_value`: a store written before
    spans were redacted as they arrived still sends no secret); an endpoint that cannot be reached or that redirects
    stops the verification (nothing is written)."""
    start = time.perf_counter()
    try:
        step = p.complete(redact_value(messages), redact_value(tools))
    except ProviderError as exc:
        if exc.status in STOPS:
            raise VerificationError(f"cannot replay: {exc}") from None
        return RerunOutcome(exc.status, error=str(exc), calls=1, latency_ms=_ms(start))
    c = step.call
    if step.tool_calls:
        asked = ", ".join(t.name for t in step.tool_calls)
        return RerunOutcome("tool_call", step.text, f"the replayed call asked for tools ({asked}) instead of answering, and "
                     f"tool calls are not re-run", 1, c.tokens_in, c.tokens_out, _ms(start))
    status = TRUNCATED if c.finish_reason == "length" else "ok"
    return RerunOutcome(status, step.text, None, 1, c.tokens_in, c.tokens_out, _ms(start))


def _ms(start: float) -> float:
    return round((time.perf_counter() - start) * 1000, 3)


