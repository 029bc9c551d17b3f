"""The audit's measuring rules (docs/design.md §12), table-driven over hand-built spans in EACH shape the
instrumentors write: OpenInference message lists (`message.content` and `message.contents.M`), request bodies
in `input.value` (chat completions, the Responses API, Anthropic, Gemini) and the OTel GenAI conventions
(`gen_ai.input.messages` JSON and the older `gen_ai.prompt.N.*`). Each case states a conversation once, in a
neutral form, and every shape writes it as its instrumentor would; the sets must be the same in all of them.

Rules covered: exposure (full / snippet / title / never shown, a name inside another document's text, the
shortest name, the question removed before names are searched), unit to document (JSON hits, a whole record,
LangChain's wrapper, plain text of several documents, a text naming nothing beside a nested retriever), numbered
blocks (`Source n:`, `[n]` at a line start, `<document index="n">`), tool calls (one per call, the model's
arguments, a nested retriever as the call's results, each document credited to the call that returned it),
conversations (carried, `carried_from`, an answer-only earlier turn, §11 rule 3b) and unauditable turns.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from itertools import count

import pytest

from workbench.audit.audited import AuditedTurn, audit_trace
from workbench.audit.spans import Span
from workbench.audit.units import Resolver
from workbench.corpus import Corpus
from workbench.render.sources import headline
from workbench.types import Document

A, B, C = "https://kb.example/a-sso", "https://kb.example/b-okta", "https://kb.example/c-scim"
TEXT_A = "Open Settings, then Security, and paste the IdP metadata XML into the SAML box."
TEXT_B = "Okta needs the ACS URL and the entity id copied from the workbench into its app."
TEXT_C = "SCIM provisioning creates and removes users as the identity provider says."
Q = "How do I configure SSO?"
_ids = count(1)


# --- the neutral conversation and its shapes ---------------------------------------------------------------


@dataclass(frozen=True)
class Msg:
    role: str  # system | user | assistant | tool
    text: str | None = None
    calls: tuple[tuple[str, str, dict], ...] = ()  # (call id, tool name, arguments) an assistant asks for
    call_id: str | None = None  # the call a tool result answers


def ask(name: str, args: dict, call_id: str) -> Msg:
    return Msg("assistant", calls=((call_id, name, args),))


def result(call_id: str, text: str) -> Msg:
    return Msg("tool", text, call_id=call_id)


def _oi(msgs: list[Msg], answer: str, parts: bool) -> dict:
    a = {"openinference.span.kind": "LLM", "llm.model_name": "m"}
    for i, m in enumerate(msgs):
        p = f"llm.input_messages.{i}.message."
        a[p + "role"] = m.role
        if m.text is not None:
            if parts:
                a[p + "contents.0.message_content.type"] = "text"
                a[p + "contents.0.message_content.text"] = m.text
            else:
                a[p + "content"] = m.text
        for k, (cid, name, args) in enumerate(m.calls):
            a[p + f"tool_calls.{k}.tool_call.id"] = cid
            a[p + f"tool_calls.{k}.tool_call.function.name"] = name
            a[p + f"tool_calls.{k}.tool_call.function.arguments"] = json.dumps(args)
        if m.call_id:
            a[p + "tool_call_id"] = m.call_id
    a["llm.output_messages.0.message.role"] = "assistant"
    a["llm.output_messages.0.message.content"] = answer
    return a


def _chat(msgs: list[Msg], answer: str) -> dict:
    out = []
    for m in msgs:
        d = {"role": m.role, "content": m.text}
        if m.calls:
            d["tool_calls"] = [{"id": c, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
                               for c, n, a in m.calls]
        if m.call_id:
            d["tool_call_id"] = m.call_id
        out.append(d)
    return {"openinference.span.kind": "LLM", "input.mime_type": "application/json",
            "input.value": json.dumps({"model": "m", "messages": out}), "output.mime_type": "application/json",
            "output.value": json.dumps({"choices": [{"message": {"role": "assistant", "content": answer}}]})}


def _responses(msgs: list[Msg], answer: str) -> dict:
    items = []
    for m in msgs:
        if m.role == "tool":
            items.append({"type": "function_call_output", "call_id": m.call_id, "output": m.text})
        elif m.calls:
            items += [{"type": "function_call", "call_id": c, "name": n, "arguments": json.dumps(a)} for c, n, a in m.calls]
        elif m.role == "system":
            items.append({"role": "developer", "content": m.text})
        else:
            kind = "output_text" if m.role == "assistant" else "input_text"
            items.append({"type": "message", "role": m.role, "content": [{"type": kind, "text": m.text}]})
    out = {"output": [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": answer}]}]}
    return {"openinference.span.kind": "LLM", "input.value": json.dumps({"model": "m", "input": items}),
            "output.value": json.dumps(out)}


def _anthropic(msgs: list[Msg], answer: str) -> dict:
    system = " ".join(m.text for m in msgs if m.role == "system")
    out: list[dict] = []
    for m in msgs:
        if m.role == "system":
            continue
        if m.role == "tool":
            block = {"type": "tool_result", "tool_use_id": m.call_id, "content": m.text}
            if out and out[-1]["role"] == "user" and isinstance(out[-1]["content"], list):
                out[-1]["content"].append(block)
            else:
                out.append({"role": "user", "content": [block]})
        elif m.calls:
            out.append({"role": "assistant", "content": [{"type": "tool_use", "id": c, "name": n, "input": a}
                                                         for c, n, a in m.calls]})
        else:
            out.append({"role": m.role, "content": m.text})
    body = {"model": "m", "system": system, "messages": out}
    return {"openinference.span.kind": "LLM", "input.value": json.dumps(body),
            "output.value": json.dumps({"type": "message", "role": "assistant",
                                        "content": [{"type": "text", "text": answer}]})}


def _gemini(msgs: list[Msg], answer: str) -> dict:
    contents = []
    for m in msgs:
        if m.role == "system":
            continue
        if m.role == "tool":
            contents.append({"role": "user", "parts": [{"functionResponse": {"id": m.call_id, "name": "t",
                                                                             "response": {"result": m.text}}}]})
        elif m.calls:
            contents.append({"role": "model", "parts": [{"functionCall": {"id": c, "name": n, "args": a}}
                                                        for c, n, a in m.calls]})
        else:
            contents.append({"role": "model" if m.role == "assistant" else "user", "parts": [{"text": m.text}]})
    system = " ".join(m.text for m in msgs if m.role == "system")
    body = {"model": "m", "contents": contents, "config": {"system_instruction": system} if system else {}}
    return {"openinference.span.kind": "LLM", "input.value": json.dumps(body),
            "output.value": json.dumps({"candidates": [{"content": {"role": "model", "parts": [{"text": answer}]}}]})}


def _genai(msgs: list[Msg], answer: str) -> dict:
    out = []
    for m in msgs:
        if m.role == "tool":
            out.append({"role": "tool", "parts": [{"type": "tool_call_response", "id": m.call_id, "response": m.text}]})
        elif m.calls:
            out.append({"role": "assistant", "parts": [{"type": "tool_call", "id": c, "name": n, "arguments": a}
                                                       for c, n, a in m.calls]})
        else:
            out.append({"role": m.role, "parts": [{"type": "text", "content": m.text}]})
    return {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m", "gen_ai.input.messages": json.dumps(out),
            "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": answer}],
                                                   "finish_reason": "stop"}])}


def _genai_chat_messages(msgs: list[Msg], answer: str) -> dict:
    """`gen_ai.input.messages` written as chat-completions messages (some GenAI instrumentations do)."""
    body = json.loads(_chat(msgs, answer)["input.value"])["messages"]
    return {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m", "gen_ai.input.messages": json.dumps(body),
            "gen_ai.output.messages": json.dumps([{"role": "assistant", "content": answer}])}


def _genai_indexed(msgs: list[Msg], answer: str) -> dict:
    a = {"llm.request.type": "chat", "gen_ai.system": "openai", "gen_ai.request.model": "m"}
    for i, m in enumerate(msgs):
        a[f"gen_ai.prompt.{i}.role"] = m.role
        if m.text is not None:
            a[f"gen_ai.prompt.{i}.content"] = m.text
        for k, (cid, name, args) in enumerate(m.calls):
            a[f"gen_ai.prompt.{i}.tool_calls.{k}.id"] = cid
            a[f"gen_ai.prompt.{i}.tool_calls.{k}.name"] = name
            a[f"gen_ai.prompt.{i}.tool_calls.{k}.arguments"] = json.dumps(args)
        if m.call_id:
            a[f"gen_ai.prompt.{i}.tool_call_id"] = m.call_id
    a["gen_ai.completion.0.role"] = "assistant"
    a["gen_ai.completion.0.content"] = answer
    return a


def _oi_without_tool_results(msgs: list[Msg], answer: str) -> dict:
    """OpenInference messages that leave out the tool results (an instrumentor that cannot flatten an Anthropic
    `tool_result` block), beside the request body it records in `input.value`."""
    a = {k: v for k, v in _oi(msgs, answer, parts=False).items()
         if not any(k.startswith(f"llm.input_messages.{i}.message.content") for i, m in enumerate(msgs) if m.role == "tool")}
    return {**a, "input.value": _anthropic(msgs, answer)["input.value"], "input.mime_type": "application/json"}


SHAPES = {
    "openinference": lambda m, a: _oi(m, a, parts=False),
    "openinference-contents": lambda m, a: _oi(m, a, parts=True),
    "chat-completions-body": _chat,
    "responses-body": _responses,
    "anthropic-body": _anthropic,
    "gemini-body": _gemini,
    "genai-messages": _genai,
    "genai-chat-messages": _genai_chat_messages,
    "genai-indexed": _genai_indexed,
    "openinference-and-a-fuller-body": _oi_without_tool_results,
}


def span(trace: str, name: str, attrs: dict, parent: str | None = "root", start: int = 0) -> Span:
    sid = "root" if name == "root" else f"{next(_ids):016x}"
    return Span(trace_id=trace, span_id=sid, parent_id=None if name == "root" else parent, name=name,
                start_ns=1_700_000_000_000_000_000 + start, end_ns=1_700_000_000_000_000_000 + start + 10,
                attributes=attrs, service="app")


def retriever(trace: str, docs: list[tuple[str, str, str]], parent: str | None = "root", start: int = 0,
              name: str = "retrieve") -> Span:
    """A RETRIEVER span listing (url, title, text) units."""
    a = {"openinference.span.kind": "RETRIEVER"}
    for i, (url, title, text) in enumerate(docs):
        a[f"retrieval.documents.{i}.document.content"] = text
        a[f"retrieval.documents.{i}.document.metadata"] = json.dumps({"url": url, "title": title})
    return span(trace, name, a, parent, start)


def turn(shape: str, msgs: list[Msg], answer: str, *extra: Span, trace: str = "t1", corpus: Corpus | None = None,
         earlier=(), session: str | None = None) -> AuditedTurn:
    """One trace: a CHAIN root holding the model call (in `shape`) and `extra` spans; audited."""
    root_attrs = {"openinference.span.kind": "CHAIN"}
    if session:
        root_attrs["session.id" if not shape.startswith("genai") else "gen_ai.conversation.id"] = session
    llm = span(trace, "llm", SHAPES[shape](msgs, answer), start=100)
    out = audit_trace([span(trace, "root", root_attrs), *extra, llm], Resolver(corpus), run="r",
                      earlier=list(earlier))
    assert out is not None, "the trace is a turn"
    return out


def hits(*docs: tuple[str, str, str]) -> str:
    return json.dumps({"results": [{"url": u, "title": t, "text": x} for u, t, x in docs]})


def exposures(t: AuditedTurn) -> dict[str, str]:
    return {d.doc_id: d.exposure for d in t.payload.documents}


ALL = pytest.mark.parametrize("shape", list(SHAPES))


# --- exposure ----------------------------------------------------------------------------------------------


@ALL
def test_exposure_is_what_reached_the_model_and_consulted_follows_section_1(shape):
    msgs = [Msg("user", Q), ask("search_kb", {"query": "sso"}, "c1"),
            result("c1", hits((A, "SSO setup", TEXT_A), (B, "Okta", TEXT_B))), ask("open", {"id": "c"}, "c2"),
            result("c2", json.dumps({"doc_id": "c-scim", "title": "SCIM", "text": TEXT_C}))]
    t = turn(shape, msgs, f"Paste the metadata ([SSO]({A})).")
    assert exposures(t) == {A: "snippet", B: "snippet", "c-scim": "full"}
    assert t.payload.sets.cited == (A,)
    assert t.payload.sets.consulted == (A, "c-scim")  # a whole record is read, cited or not
    assert t.payload.rejected_citations == ()


@ALL
def test_a_url_inside_another_documents_text_exposes_nothing(shape):
    text_a = f"{TEXT_A} See also {B} for Okta."
    dropped = retriever("t1", [(B, "Okta", TEXT_B)], start=1)  # B's own text never reached the model
    msgs = [Msg("user", Q), ask("search_kb", {}, "c1"), result("c1", hits((A, "SSO setup", text_a)))]
    t = turn(shape, msgs, f"See [Okta]({B}).", dropped)
    assert B not in t.payload.sets.retrieved and B in t.payload.audit.not_shown
    assert [r.target for r in t.payload.rejected_citations] == [B]


@ALL
def test_a_name_shorter_than_three_characters_is_too_common_to_count_as_shown(shape):
    a = {"openinference.span.kind": "RETRIEVER", "retrieval.documents.0.document.content": TEXT_B,
         "retrieval.documents.0.document.metadata": json.dumps({"doc_id": "k9"})}
    msgs = [Msg("system", "Answer briefly; tool k9 is off."), Msg("user", Q), ask("search_kb", {}, "c1"),
            result("c1", hits((A, "SSO setup", TEXT_A)))]
    t = turn(shape, msgs, "Done.", span("t1", "retrieve", a, start=1))
    assert "k9" in t.payload.audit.not_shown and "k9" not in t.payload.sets.retrieved


@ALL
def test_the_question_is_removed_before_names_are_searched(shape):
    dropped = retriever("t1", [("https://kb.example/q", "configure SSO", "A text that was never sent.")], start=1)
    msgs = [Msg("user", Q), ask("search_kb", {}, "c1"), result("c1", hits((A, "SSO setup", TEXT_A)))]
    t = turn(shape, msgs, "Done.", dropped)
    assert "https://kb.example/q" in t.payload.audit.not_shown


@pytest.mark.parametrize("root_input, mime, want", [
    (json.dumps({"question": Q, "history": []}), "application/json", Q),  # LangChain LCEL's chain variables
    (json.dumps({"input": Q, "chat_history": []}), "application/json", Q),  # AgentExecutor
    (Q, None, Q),  # an app's own query, as text
    (json.dumps({"context": "x", "history": []}), "application/json", f"Articles: {TEXT_A}\nQuestion: {Q}"),
], ids=["lcel-question", "agent-input", "plain-text", "no-question-key"])
def test_the_question_is_the_chains_question_variable_not_its_prompt_template(root_input, mime, want):
    root = {"openinference.span.kind": "CHAIN", "input.value": root_input, **({"input.mime_type": mime} if mime else {})}
    msgs = [Msg("system", "Answer from the articles."), Msg("user", f"Articles: {TEXT_A}\nQuestion: {Q}")]
    llm = span("t1", "llm", SHAPES["openinference"](msgs, f"See [SSO]({A})."), start=100)
    t = audit_trace([span("t1", "root", root), llm], Resolver(None), run="r")
    assert t.record.question == want


@ALL
def test_a_title_only_listing_is_title_and_never_consulted(shape):
    listing = json.dumps([{"url": A, "title": "SSO setup"}, {"url": B, "title": "Okta"}])
    msgs = [Msg("user", "What articles do you have?"), ask("list_articles", {}, "c1"), result("c1", listing)]
    t = turn(shape, msgs, f"[SSO setup]({A}) and [Okta]({B}).")
    assert exposures(t) == {A: "title", B: "title"}
    assert t.payload.sets.cited == (A, B) and t.payload.sets.consulted == ()


@ALL
def test_each_document_is_credited_to_the_call_that_returned_it_one_entry_per_call(shape):
    msgs = [Msg("user", Q), ask("search_kb", {"query": "sso"}, "c1"),
            result("c1", hits((A, "SSO setup", TEXT_A[:30]), (B, "Okta", TEXT_B[:30]))),
            ask("open_article", {"url": A}, "c2"), result("c2", json.dumps({"url": A, "title": "SSO setup", "text": TEXT_A}))]
    t = turn(shape, msgs, "Paste the metadata.")
    assert [(c.name, c.args, c.doc_ids, c.exposure) for c in t.payload.tool_calls] == [
        ("search_kb", {"query": "sso"}, (A, B), "snippet"), ("open_article", {"url": A}, (A,), "full")]
    assert {r.doc_id: r.exposure for r in t.record.tool_calls[0].results} == {A: "snippet", B: "snippet"}
    doc = {d.doc_id: d for d in t.payload.documents}[A]
    assert doc.exposure == "full" and doc.tool_call == 1 and t.payload.sets.consulted == (A,)


def test_with_a_corpus_full_is_the_whole_text_and_is_credited_to_the_call_that_opened_it():
    corpus = Corpus("kb", "-", [Document(doc_id="a-sso", title="SSO setup", text=TEXT_A, url=A),
                                Document(doc_id="b-okta", title="Okta", text=TEXT_B, url=B)])
    msgs = [Msg("user", Q), ask("search_kb", {"query": "sso"}, "c1"),
            result("c1", hits((A, "SSO setup", TEXT_A[:30]), (B, "Okta", TEXT_B[:30]))),
            ask("open_article", {"id": "a-sso"}, "c2"), result("c2", f"# SSO setup\nURL: {A}\n\n{TEXT_A}")]
    t = turn("openinference", msgs, "Paste the metadata.", corpus=corpus)
    calls = {c.name: c for c in t.payload.tool_calls}
    assert set(calls) == {"search_kb", "open_article"} and len(t.payload.tool_calls) == 2
    assert calls["search_kb"].args == {"query": "sso"} and calls["search_kb"].doc_ids == ("a-sso", "b-okta")
    assert calls["open_article"].doc_ids == ("a-sso",) and calls["open_article"].exposure == "full"
    doc = {d.doc_id: d for d in t.payload.documents}["a-sso"]
    assert doc.exposure == "full" and t.payload.tool_calls[doc.tool_call].name == "open_article"
    search = next(c for c in t.record.tool_calls if c.name == "search_kb")
    assert {r.doc_id: r.exposure for r in search.results} == {"a-sso": "snippet", "b-okta": "snippet"}
    assert t.payload.sets.consulted == ("a-sso",)


def test_with_a_corpus_a_text_result_naming_no_document_is_the_corpus_document_whose_whole_text_it_holds():
    corpus = Corpus("kb", "-", [Document(doc_id="a-sso", title="SSO setup", text=TEXT_A, url=A)])
    msgs = [Msg("user", Q), ask("search_kb", {"query": "sso"}, "c1"), result("c1", hits((A, "SSO setup", TEXT_A[:30]))),
            ask("open_article", {"title": "SSO setup"}, "c2"), result("c2", f"SSO setup\n\n{TEXT_A}")]
    t = turn("openinference", msgs, "Paste the metadata.", corpus=corpus)
    assert [(c.name, c.doc_ids, c.exposure) for c in t.payload.tool_calls] == [
        ("search_kb", ("a-sso",), "snippet"), ("open_article", ("a-sso",), "full")]
    doc = {d.doc_id: d for d in t.payload.documents}["a-sso"]
    assert t.payload.tool_calls[doc.tool_call].name == "open_article" and t.payload.sets.consulted == ("a-sso",)


# --- unit to document ----------------------------------------------------------------------------------------

TEXT_BLOCKS = (f"Found 2 results.\n\nTitle: SSO setup\nURL: {A}\n{TEXT_A}\n\n"
               f"Title: Okta\nURL: {B}\n{TEXT_B}")
WRAPPED = json.dumps({"type": "tool", "data": {"content": hits((A, "SSO setup", TEXT_A)), "tool_call_id": "c1"}})
LC_WRAPPED = json.dumps({"lc": 1, "type": "constructor", "id": ["langchain", "schema", "messages", "ToolMessage"],
                         "kwargs": {"content": hits((A, "SSO setup", TEXT_A)), "tool_call_id": "c1"}})
NUMBERED_TEXT = f"1. SSO setup ({A})\n{TEXT_A}\n2. Okta ({B})\n{TEXT_B}"
RULED_TEXT = f"id: a-sso\n{TEXT_A}\n---\nid: b-okta\n{TEXT_B}"
LINKING_TEXT = (f"**SSO setup** <{A}>\n{TEXT_A} For Okta see {B}.\n\n"
                f"**Okta** <{B}>\n{TEXT_B}")
ARTICLE_TEXT = (f"# SSO setup\nURL: {A}\n\n# SSO setup\n\n{TEXT_A} It assumes you have read [Okta setup]({B}) first."
                f"\n\n## Next\n\nSee [SCIM]({C}).\n\n- [SCIM]({C})\n- [Okta]({B})")  # an opened article's links


@ALL
@pytest.mark.parametrize("output, want", [
    (TEXT_BLOCKS, {A: "snippet", B: "snippet"}),
    (NUMBERED_TEXT, {A: "snippet", B: "snippet"}),
    (RULED_TEXT, {"a-sso": "snippet", "b-okta": "snippet"}),
    (LINKING_TEXT, {A: "snippet", B: "snippet"}),
    (ARTICLE_TEXT, {A: "snippet"}),
    (WRAPPED, {A: "snippet"}),
    (LC_WRAPPED, {A: "snippet"}),
    (json.dumps({"blocks": [{"block_type": "text", "text": hits((A, "SSO setup", TEXT_A))}], "tool_name": "search_kb",
                 "raw_input": {"kwargs": {"query": "sso"}}, "is_error": False}), {A: "snippet"}),
    (json.dumps({"output": json.loads(LC_WRAPPED), "kwargs": {"tags": ["seq:step:1"], "name": "search_kb"}}),
     {A: "snippet"}),
], ids=["text-blocks", "numbered-text", "ruled-ids", "a-block-linking-another", "an-article-linking-others", "langchain-toolmessage", "langchain-constructor",
        "llama-index-tooloutput", "openllmetry-tool-call-result"])
def test_a_tool_result_is_split_into_the_documents_it_names(shape, output, want):
    msgs = [Msg("user", Q), ask("search_help_center", {"query": "sso"}, "c1"), result("c1", output)]
    t = turn(shape, msgs, f"Paste the metadata ([SSO]({A})).")
    assert exposures(t) == want
    cited = next(iter(want))
    assert t.payload.sets.cited == (cited,) if cited == A else t.payload.sets.cited == ()
    assert t.payload.rejected_citations == () or cited != A
    assert len(t.payload.tool_calls) == 1


@ALL
def test_a_text_result_naming_nothing_is_one_unit_and_hides_no_nested_retriever_document(shape):
    tool = span("t1", "search_help_center", {"openinference.span.kind": "TOOL", "tool.name": "search_help_center",
                                             "input.value": "sso", "output.value": f"{TEXT_A}\n\n{TEXT_B}"}, start=1)
    nested = retriever("t1", [(A, "SSO setup", TEXT_A), (B, "Okta", TEXT_B), (C, "SCIM", TEXT_C)],
                       parent=tool.span_id, start=2)
    msgs = [Msg("user", Q), ask("search_help_center", {"query": "sso"}, "c1"),
            result("c1", f"{TEXT_A}\n\n{TEXT_B}")]
    t = turn(shape, msgs, f"Paste the metadata ([SSO]({A})).", tool, nested)
    assert exposures(t) == {A: "snippet", B: "snippet"} and t.payload.audit.not_shown == (C,)
    assert t.payload.sets.consulted == (A,) and t.payload.rejected_citations == ()
    [call] = t.payload.tool_calls  # the TOOL span, the model's request and the nested retriever: one call
    assert call.name == "search_help_center" and call.args == {"query": "sso"} and set(call.doc_ids) == {A, B}


@ALL
def test_text_blocks_shown_by_title_only_are_the_nested_retrievers_documents_of_those_titles(shape):
    text = f"## SSO setup\n{TEXT_A[:40]}\n\n## Okta\n{TEXT_B[:40]}"
    tool = span("t1", "search_help_center", {"openinference.span.kind": "TOOL", "tool.name": "search_help_center",
                                             "input.value": "sso", "output.value": text}, start=1)
    nested = retriever("t1", [(A, "SSO setup", TEXT_A), (B, "Okta", TEXT_B), (C, "SCIM", TEXT_C)],
                       parent=tool.span_id, start=2)
    msgs = [Msg("user", Q), ask("search_help_center", {"query": "sso"}, "c1"), result("c1", text)]
    t = turn(shape, msgs, f"Paste the metadata ([SSO]({A})).", tool, nested)
    assert exposures(t) == {A: "snippet", B: "snippet"} and t.payload.audit.not_shown == (C,)
    assert t.payload.sets.consulted == (A,) and t.payload.rejected_citations == ()


@ALL
def test_a_text_result_naming_no_document_and_no_retriever_is_one_unit_of_its_own(shape):
    msgs = [Msg("user", Q), ask("calc", {"x": 1}, "c1"), result("c1", "The answer is forty-two, as computed.")]
    t = turn(shape, msgs, "It is 42.")
    [doc] = t.payload.documents
    assert doc.exposure == "snippet" and doc.doc_id == "calc:c1"


@ALL
def test_a_tool_span_and_the_models_request_are_one_call_with_the_models_arguments(shape):
    tool = span("t1", "search_kb", {"openinference.span.kind": "TOOL", "tool.name": "search_kb",
                                    "tool.parameters": json.dumps({"type": "object", "properties": {"q": {}}}),
                                    "input.value": "sso", "output.value": hits((A, "SSO setup", TEXT_A))}, start=1)
    tool2 = span("t1", "execute_tool open", {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "open",
                                             "gen_ai.tool.call.id": "c2", "gen_ai.tool.call.arguments": '{"id": "c"}',
                                             "gen_ai.tool.call.result": json.dumps({"doc_id": "c-scim", "text": TEXT_C})},
                 start=2)
    msgs = [Msg("user", Q), ask("search_kb", {"q": "sso"}, "c1"), result("c1", hits((A, "SSO setup", TEXT_A))),
            ask("open", {"id": "c"}, "c2"), result("c2", json.dumps({"doc_id": "c-scim", "text": TEXT_C}))]
    t = turn(shape, msgs, "Done.", tool, tool2)
    assert [(c.name, c.args, c.doc_ids) for c in t.payload.tool_calls] == [
        ("search_kb", {"q": "sso"}, (A,)), ("open", {"id": "c"}, ("c-scim",))]


def _without_ids(attrs: dict, keep_request_ids: bool, names: bool) -> dict:
    """OpenInference attributes as google-genai's (no call ids; a result names its tool) or litellm's (the requests'
    ids kept, the results' dropped) instrumentors write them."""
    out = {k: v for k, v in attrs.items() if not k.endswith(".tool_call_id")
           and (keep_request_ids or not k.endswith("tool_call.id"))}
    if names:
        for k, v in attrs.items():
            if k.endswith(".tool_call_id"):
                out[k.replace("tool_call_id", "name")] = {"c1": "search_kb", "c2": "open"}[v]
    return out


@pytest.mark.parametrize("keep_request_ids, names, article", [
    (False, True, json.dumps({"article": f"# SCIM\nURL: {C}\n\n{TEXT_C}"})),
    (True, False, f"# SCIM\nURL: {C}\n\n{TEXT_C}"),
    (False, False, f"# SCIM\nURL: {C}\n\n{TEXT_C}"),
], ids=["google-genai", "litellm", "no-ids-no-names"])
def test_tool_results_without_call_ids_answer_the_requests_in_order(keep_request_ids, names, article):
    first = [Msg("user", Q), ask("search_kb", {"q": "sso"}, "c1"), result("c1", hits((A, "SSO setup", TEXT_A)))]
    msgs = [*first, ask("open", {"id": "c-scim"}, "c2"), result("c2", article)]
    calls = [span("t1", "llm", _without_ids(_oi(ms, "", parts=False), keep_request_ids, names), start=10 * i)
             for i, ms in enumerate((first, msgs), start=1)]
    calls[0].attributes.update({"llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "open",
                                "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments":
                                    json.dumps({"id": "c-scim"})})
    calls[1].attributes["llm.output_messages.0.message.content"] = f"See [SCIM]({C})."
    t = audit_trace([span("t1", "root", {"openinference.span.kind": "CHAIN"}), *calls], Resolver(None), run="r")
    assert [(c.name, c.args, c.doc_ids) for c in t.payload.tool_calls] == [
        ("search_kb", {"q": "sso"}, (A,)), ("open", {"id": "c-scim"}, (C,))]
    assert exposures(t) == {A: "snippet", C: "snippet"} and t.payload.sets.cited == (C,)


@pytest.mark.parametrize("helper_first", [True, False], ids=["helper-then-call", "call-then-helper"])
def test_an_llm_span_recording_no_request_is_no_model_call(helper_first):
    """llama-index's `_prepare_chat_with_tools` beside the real model calls does not make the turn unauditable."""
    helper = span("t1", "OpenAI._prepare_chat_with_tools", {
        "openinference.span.kind": "LLM", "input.value": json.dumps({"tools": ["<FunctionTool object>"]}),
        "input.mime_type": "application/json", "output.value": json.dumps({"messages": ["ChatMessage(...)"]}),
        "output.mime_type": "application/json"}, start=50 if helper_first else 200)
    msgs = [Msg("user", Q), ask("search_kb", {}, "c1"), result("c1", hits((A, "SSO setup", TEXT_A)))]
    llm = span("t1", "llm", SHAPES["openinference"](msgs, f"See [SSO]({A})."), start=100)
    t = audit_trace([span("t1", "root", {"openinference.span.kind": "CHAIN"}), helper, llm], Resolver(None), run="r")
    assert t.record.status != "unauditable" and t.record.error is None
    assert t.payload.sets.cited == (A,) and exposures(t) == {A: "snippet"}


@ALL
def test_an_openllmetry_tool_span_result_is_its_toolmessages_content(shape):
    """OpenLLMetry's LangChain `execute_tool` span: no call id, the result `{"output": <ToolMessage constructor>}`."""
    wrapped = json.dumps({"output": json.loads(LC_WRAPPED), "kwargs": {"tags": ["seq:step:1"], "name": "search_kb"}})
    tool = span("t1", "execute_tool search_kb", {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search_kb",
                                                 "gen_ai.tool.call.arguments": json.dumps({"input_str": "{'q': 'sso'}"}),
                                                 "gen_ai.tool.call.result": wrapped}, start=1)
    msgs = [Msg("user", Q), ask("search_kb", {"q": "sso"}, "c1"), result("c1", hits((A, "SSO setup", TEXT_A)))]
    t = turn(shape, msgs, f"Paste the metadata ([SSO]({A})).", tool)
    assert exposures(t) == {A: "snippet"} and t.payload.audit.not_shown == ()
    assert t.payload.sets.cited == (A,) and t.payload.rejected_citations == ()
    assert [(c.name, c.args) for c in t.payload.tool_calls] == [("search_kb", {"q": "sso"})]


# --- numbered blocks ----------------------------------------------------------------------------------------


@ALL
@pytest.mark.parametrize("form", ["Source {n}:\n{text}\n", "[{n}] {text}\n", '<document index="{n}">{text}</document>\n'])
def test_a_marker_is_resolved_against_the_numbered_blocks_of_the_final_prompt(shape, form):
    nodes = retriever("t1", [(A, "SSO setup", TEXT_A), (B, "Okta", TEXT_B)], start=1)
    context = "".join(form.format(n=n, text=x) for n, x in ((1, TEXT_A), (2, TEXT_B), (3, "Unrelated filler text.")))
    msgs = [Msg("system", "Cite the sources by number."), Msg("user", f"Context:\n{context}\nQuestion: {Q}")]
    t = turn(shape, msgs, "Paste the metadata [2]. Also [3] and [9].", nodes)
    assert t.payload.sets.cited == (B,) and t.payload.sets.consulted == (B,)
    assert [(r.target, r.reason) for r in t.payload.rejected_citations] == [("[3]", "not_retrieved"),
                                                                              ("[9]", "not_retrieved")]


# --- conversations --------------------------------------------------------------------------------------------

Q2 = "And with Okta?"
ARTICLE_A = f'{TEXT_A}\nThen click "Save".'  # a newline and quotes: JSON escapes them in a re-sent tool result


def _turn1(shape: str) -> AuditedTurn:
    msgs = [Msg("user", Q), ask("open", {"id": "a"}, "c1"),
            result("c1", json.dumps({"url": A, "title": "SSO setup", "text": ARTICLE_A}))]
    return turn(shape, msgs, f"Paste the metadata ([SSO]({A})).", trace="t1", session="s1")


@ALL
def test_a_re_sent_earlier_tool_result_is_carried_and_a_cited_full_document_is_consulted(shape):
    first = _turn1(shape)
    history = [Msg("user", Q), ask("open", {"id": "a"}, "c1"),
               result("c1", json.dumps({"url": A, "title": "SSO setup", "text": ARTICLE_A})),
               Msg("assistant", f"Paste the metadata ([SSO]({A})).")]
    t = turn(shape, [*history, Msg("user", Q2)], f"Same as [SSO]({A}), then the ACS URL.", trace="t2",
             earlier=[first.earlier], session="s1")
    doc = {d.doc_id: d for d in t.payload.documents}[A]
    assert doc.carried_from == first.record.turn_id and doc.exposure == "full"
    assert t.payload.sets.consulted == (A,)  # rule 3b: read in full in turn 1, cited here
    assert t.payload.conversation_id == "otel/app/s1" and t.payload.position == 2  # keyed by service and session


@ALL
def test_an_answer_only_earlier_turn_carries_its_links_as_titles(shape):
    first = _turn1(shape)
    history = [Msg("user", Q), Msg("assistant", f"Paste the metadata ([SSO]({A})).")]
    t = turn(shape, [*history, Msg("user", Q2)], f"As [before]({A}).", trace="t2", earlier=[first.earlier],
             session="s1")
    assert t.record.history[0].context == "answer"
    assert t.payload.sets.cited == (A,) and t.payload.sets.consulted == () and t.payload.rejected_citations == ()


@ALL
def test_an_earlier_turn_not_re_sent_is_dropped(shape):
    first = _turn1(shape)
    t = turn(shape, [Msg("user", Q2)], f"As [before]({A}).", trace="t2", earlier=[first.earlier], session="s1")
    assert t.record.history[0].context == "dropped"
    assert [(r.target, r.reason) for r in t.payload.rejected_citations] == [(A, "not_in_context")]


@ALL
def test_a_follow_up_holds_each_earlier_turn_as_it_was_recorded_and_no_chain_of_histories(shape):
    """Issue 42 item 2: an earlier turn is its record wrapped (`Earlier`), not its fields copied into a new record."""
    first = _turn1(shape)
    second = turn(shape, [Msg("user", Q2)], "Copy the ACS URL.", trace="t2", earlier=[first.earlier], session="s1")
    third = turn(shape, [Msg("user", "And SCIM?")], "Turn it on.", trace="t3", earlier=[first.earlier, second.earlier],
                 session="s1")
    h1, h2 = third.record.history
    for h, t in ((h1, first), (h2, second)):
        assert (h.record.turn_id, h.record.question, h.record.answer, h.record.tool_calls, h.record.model_calls,
                h.record.config, h.position) == (t.record.turn_id, t.record.question, t.record.answer,
                                                  t.record.tool_calls, t.record.model_calls, t.record.config,
                                                  t.record.position)
    assert second.record.history and h2.record.history == ()  # the collector keeps no chain back to the first turn


@ALL
def test_an_earlier_turns_numbered_blocks_do_not_take_a_follow_ups_numbers(shape):
    """Each prompt numbers its blocks anew: the follow-up's `[1]` is its own block 1, not the earlier turn's."""
    first = turn(shape, [Msg("user", f"Context:\n[1] {TEXT_A}\nQuestion: {Q}")], "Paste the metadata [1].",
                 retriever("t1", [(A, "SSO setup", TEXT_A)], start=1), trace="t1", session="s1")
    assert first.payload.sets.cited == (A,) and first.record.excerpts
    t = turn(shape, [Msg("user", f"Context:\n[1] {TEXT_B}\nQuestion: {Q2}")], "Copy the ACS URL [1].",
             retriever("t2", [(B, "Okta", TEXT_B)], start=1), trace="t2", earlier=[first.earlier], session="s1")
    assert t.payload.sets.cited == (B,) and t.payload.rejected_citations == ()


# --- unauditable ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", ["openinference", "chat-completions-body"])
def test_an_unauditable_turn_claims_nothing_and_lists_its_links_unjudged(shape):
    attrs = SHAPES[shape]([Msg("user", "__REDACTED__")], f"See [SSO]({A}) and [x](https://kb.example/zz) [2].")
    if shape == "chat-completions-body":
        attrs["input.value"] = "__REDACTED__"
    t = audit_trace([span("t9", "root", {"openinference.span.kind": "CHAIN"}), span("t9", "llm", attrs)],
                    Resolver(), run="r")
    p = t.payload
    assert p.status == "unauditable" and "hidden" in p.audit.reason
    assert p.sets.retrieved == p.sets.cited == p.sets.consulted == () and p.rejected_citations == ()
    assert p.audit.unjudged_citations == (A, "https://kb.example/zz", "[2]")
    assert headline(p).text() == "unauditable: inputs hidden"


_GEN_AI_CHAT = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m", "gen_ai.usage.input_tokens": 150}


@pytest.mark.parametrize("calls", [
    [dict(_GEN_AI_CHAT), dict(_GEN_AI_CHAT)],  # OpenLLMetry with TRACELOOP_TRACE_CONTENT=false: no messages at all
    [{**_GEN_AI_CHAT, "gen_ai.input.messages": '[{"role":"user","parts":[{"type":"text"}]}]',  # pydantic-ai
      "gen_ai.output.messages": '[{"role":"assistant","parts":[{"type":"tool_call","id":"c5","name":"search"}]}]'},
     {**_GEN_AI_CHAT, "gen_ai.input.messages": '[{"role":"user","parts":[{"type":"text"}]},{"role":"assistant",'
      '"parts":[{"type":"tool_call","id":"c5","name":"search"}]},{"role":"user","parts":[{"type":'
      '"tool_call_response","id":"c5"}]}]', "gen_ai.output.messages": '[{"role":"assistant","parts":[{"type":"text"}]}]'}],
], ids=["openllmetry-no-content", "pydantic-ai-include-content-false"])
def test_a_run_whose_content_is_not_captured_is_an_unauditable_turn(calls):
    root = span("t8", "root", {"gen_ai.conversation.id": "hidden-1"})
    t = audit_trace([root, *(span("t8", "chat m", a, start=10 * i) for i, a in enumerate(calls, start=1))],
                    Resolver(), run="r")
    assert t is not None, "a stored turn, claiming nothing (§12)"
    p = t.payload
    assert p.status == "unauditable" and p.audit.reason and p.conversation_id == "otel/app/hidden-1"
    assert p.sets.retrieved == p.sets.cited == p.sets.consulted == () and p.rejected_citations == ()


def test_a_trace_ending_in_a_tool_request_is_no_turn():
    calls = [{**_GEN_AI_CHAT, "gen_ai.output.messages": '[{"role":"assistant","parts":[{"type":"tool_call","id":"c5",'
              '"name":"search"}]}]'}]
    assert audit_trace([span("t7", "chat m", calls[0], parent=None)], Resolver(), run="r") is None


def test_an_openllmetry_trace_without_openinference_kinds_is_a_turn():
    msgs = [Msg("user", Q), ask("search_kb", {}, "c1"), result("c1", hits((A, "SSO setup", TEXT_A)))]
    llm = span("t5", "openai.chat", _genai_indexed(msgs, f"See [SSO]({A})."), parent=None)
    llm.attributes["traceloop.association.properties.session_id"] = "chat-7"
    t = audit_trace([llm], Resolver(), run="r")
    assert t is not None and t.payload.sets.consulted == (A,) and t.record.config["model"] == "m"
    assert t.payload.conversation_id == "otel/app/chat-7"


# --- provenance's side of the seam (issue 42): an excerpt of no document, one rejection per distinct target ----


def test_provenance_takes_an_excerpt_that_names_no_document_and_rejects_a_marker_of_it():
    from workbench.provenance import sources_payload
    from workbench.types import Excerpt, TurnRecord

    record = TurnRecord(question=Q, answer="Paste it [1]. Not [2], nor [2] again, nor [1, 2].", mode="excerpts",
                        excerpts=(Excerpt(n=1, doc_id="a-sso", text=TEXT_A, title="SSO setup", url=A),
                                  Excerpt(n=2, doc_id=None, text="filler")))
    p = sources_payload(record)
    assert p.sets.retrieved == ("a-sso",) and p.sets.cited == ("a-sso",)
    assert [(r.target, r.reason) for r in p.rejected_citations] == [("[2]", "not_retrieved")]
    assert all(c.excerpt is None for c in p.citations if c.n == 2)
    assert all(d.doc_id is not None for d in p.documents)


def test_one_rejection_per_distinct_target_in_answer_order_is_one_rule():
    from workbench.provenance import distinct_rejections
    from workbench.trace.spans import rejected_citations

    rows = [{"idx": i, "target": t, "valid": v, "reason": None if v else "not_retrieved", "nearest_doc_id": None,
             "edit_distance": None} for i, (t, v) in enumerate([("x", False), ("a", True), ("y", False), ("x", False)])]
    assert [c["target"] for c in distinct_rejections(rows, target=lambda c: c["target"], valid=lambda c: c["valid"])] \
        == ["x", "y"]
    assert [r["target"] for r in rejected_citations(list(reversed(rows)))] == ["x", "y"]  # sorted by idx first


def test_a_results_own_exposure_survives_the_turn_record_json_and_is_absent_where_it_has_none():
    from workbench.provenance import sources_payload
    from workbench.types import ResultItem, ToolCall, TurnRecord, turn_record_from_dict

    msgs = [Msg("user", Q), ask("search_kb", {"query": "sso"}, "c1"),
            result("c1", hits((A, "SSO setup", TEXT_A[:30]), (B, "Okta", TEXT_B[:30]))),
            ask("open_article", {"url": A}, "c2"), result("c2", json.dumps({"url": A, "text": TEXT_A}))]
    t = turn("openinference", msgs, "Paste the metadata.")
    again = turn_record_from_dict(t.record.to_dict())  # what `workbench provenance FILE` reads
    assert sources_payload(again).sets == t.payload.sets
    assert [r.exposure for c in again.tool_calls for r in c.results] == ["snippet", "snippet", "full"]
    own = TurnRecord(question="q", answer="a", tool_calls=(ToolCall("search", "snippet", results=(ResultItem("d"),)),))
    assert "exposure" not in own.to_dict()["tool_calls"][0]["results"][0]  # the workbench's own JSON is unchanged


@pytest.mark.parametrize("named", ["manual.pdf", "C:\\kb\\manual.pdf", "/srv/kb/manual.pdf", "kb\\sub/manual.pdf"])
def test_a_units_file_name_finds_its_document_by_the_corpus_file_name_rule(named):
    """The file-name rule is written once (`types.file_name_of`, issue 42 item 3): a unit names a corpus document
    by its file name whichever separator either path was written with."""
    from workbench.audit.units import Origin, Unit

    corpus = Corpus("kb", "-", [Document(doc_id="manual", title="Manual", text=TEXT_A, path="docs\\kb\\manual.pdf")])
    assert corpus.documents[0].file_name == "manual.pdf"
    unit = Unit(Origin("retrieve", "RETRIEVER"), "Open Settings.", file_name=named)
    assert Resolver(corpus).document(unit).doc_id == "manual"
    assert Resolver(None).document(unit).doc_id != "manual"
