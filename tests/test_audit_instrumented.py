"""Audited turns of real instrumented apps (docs/design.md §12): llama-index with a postprocessor, the bare openai
client in a tool loop over two turns of one session, and a run with OPENINFERENCE_HIDE_INPUTS=true; spans reach
a running `collect` through the OTel SDK's own OTLP/HTTP exporter. Expected sets come from what each app did."""

from __future__ import annotations

import json

import pytest

from audit_apps import collect, llama_instrumented, tracer_provider, turns
from loopback import ScriptedServer, openai_reply

pytest.importorskip("openinference.instrumentation.llama_index")
pytest.importorskip("openinference.instrumentation.openai")

DOCS = [
    {"id": "sso-setup", "title": "Configure SSO", "url": "https://help.example.com/articles/sso-setup",
     "text": "To configure single sign-on, open Admin settings, choose Security and enable SAML SSO with your identity provider."},
    {"id": "sso-okta", "title": "SSO with Okta", "url": "https://help.example.com/articles/sso-okta",
     "text": "Okta single sign-on: add the Orbitly app in Okta, copy the SAML metadata URL and paste it in Admin settings."},
    {"id": "password-reset", "title": "Reset your password", "url": "https://help.example.com/articles/password-reset",
     "text": "Forgot your password? Use the reset link on the sign-in page; SSO users reset it with their identity provider."},
    {"id": "billing", "title": "Billing", "url": "https://help.example.com/articles/billing",
     "text": "Invoices are sent monthly; change the billing email in Admin settings under Billing."},
]


def _norm(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture
def corpus_file(tmp_path):
    path = tmp_path / "kb.jsonl"
    path.write_text("".join(json.dumps(d) + "\n" for d in DOCS), encoding="utf-8")
    return path


def _llama_app(llm_url: str, cutoff_keep: int):
    """A llama-index CitationQueryEngine over BM25 with a SimilarityPostprocessor that keeps the `cutoff_keep`
    best hits; returns (engine, the retriever's hits for the question)."""
    from llama_index.core import Document
    from llama_index.core.node_parser import SentenceSplitter
    from llama_index.core.postprocessor import SimilarityPostprocessor
    from llama_index.core.query_engine import CitationQueryEngine
    from llama_index.llms.openai_like import OpenAILike
    from llama_index.retrievers.bm25 import BM25Retriever

    nodes = SentenceSplitter(chunk_size=512).get_nodes_from_documents(
        [Document(text=d["text"], metadata={"url": d["url"], "title": d["title"]}, doc_id=d["id"]) for d in DOCS])
    retriever = BM25Retriever.from_defaults(nodes=nodes, similarity_top_k=3)
    return retriever, lambda cutoff: CitationQueryEngine.from_args(
        index=None, retriever=retriever, llm=OpenAILike(model="loop-llama", api_base=llm_url + "/v1", api_key="k",
                                                        is_chat_model=True),
        node_postprocessors=[SimilarityPostprocessor(similarity_cutoff=cutoff)])


def test_llama_index_query_engine_with_a_postprocessor(tmp_path, corpus_file):
    question = "How do I configure SSO single sign-on?"
    db = tmp_path / "t.duckdb"
    with ScriptedServer(replies=[openai_reply("Enable SAML in Admin settings [1]. Nothing on [7].", model="loop-llama")]) as llm, \
            collect(db, "llama", "--corpus", str(corpus_file)) as url, llama_instrumented(url, "kb-assistant"):
        retriever, engine = _llama_app(llm.url, 2)
        hits = retriever.retrieve(question)  # what the retriever returns (its own trace: no model call, no turn)
        scores = sorted((h.score for h in hits), reverse=True)
        response = engine((scores[1] + scores[2]) / 2).query(question)
    hit_docs = [DOCS[[d["text"] for d in DOCS].index(h.node.get_content())]["id"] for h in hits]
    kept = [d["id"] for d in DOCS if any(_norm(d["text"]) in _norm(n.node.get_content()) for n in response.source_nodes)]
    assert len(kept) == 2 and set(kept) < set(hit_docs)
    prompt = "\n".join(m["content"] for m in llm.posts()[0].body["messages"])
    source_1 = prompt.rsplit("Source 1:", 1)[1].split("Source 2:")[0]  # the template's worked example comes first
    numbered_1 = next(d["id"] for d in DOCS if _norm(d["text"]) in _norm(source_1))

    [turn] = turns(db, "--run", "llama")
    assert turn["question"] == question
    assert set(turn["sets"]["retrieved"]) == set(kept)  # exposure measured: what reached the model
    assert turn["audit"]["not_shown"] == [d for d in hit_docs if d not in kept]  # the postprocessor dropped it
    assert turn["sets"]["cited"] == [numbered_1]  # [1] resolved against the prompt's numbering
    assert set(turn["sets"]["consulted"]) == set(kept)  # the whole text of each kept document reached the model
    assert [r["target"] for r in turn["rejected_citations"]] == ["[7]"]
    assert turn["rejected_citations"][0]["reason"] == "not_retrieved"
    assert turn["audit"]["service"] == "kb-assistant" and turn["audit"]["rule"] == "corpus"
    assert turn["config"]["model"] == "loop-llama"
    assert {turn["audit"]["evidence"][d]["exposure"] for d in kept} == {"full"}


SEARCH = [{"doc_id": d["id"], "title": d["title"], "url": d["url"], "snippet": d["text"][:60]} for d in DOCS[:3]]
TOOLS = [{"type": "function", "function": {"name": "search", "description": "search the help center",
                                           "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}}]


def _tool_loop(client, messages: list, model: str) -> str:
    """The app: call the model; run the tool calls it asks for; until it answers (no parent span anywhere)."""
    while True:
        reply = client.chat.completions.create(model=model, messages=messages, tools=TOOLS).choices[0].message
        messages.append(reply.model_dump(exclude_none=True))
        if not reply.tool_calls:
            return reply.content
        for call in reply.tool_calls:
            messages.append({"role": "tool", "tool_call_id": call.id, "content": json.dumps(SEARCH)})


def _openai_app(url: str, llm_url: str, replies_used: list, hide_inputs: bool = False):
    import openai
    from openinference.instrumentation import TraceConfig, using_session
    from openinference.instrumentation.openai import OpenAIInstrumentor

    tp = tracer_provider(url, "support-bot")
    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=tp, config=TraceConfig())
    client = openai.OpenAI(base_url=llm_url + "/v1", api_key="sk-test", max_retries=0)
    messages = [{"role": "system", "content": "Answer from the help center; link what you use."}]
    try:
        with using_session("chat-42"):
            for q in replies_used:
                messages.append({"role": "user", "content": q})
                _tool_loop(client, messages, "loop-gpt")
    finally:
        instrumentor.uninstrument()
        tp.shutdown()
    return messages


def test_openai_client_tool_loop_over_two_turns_of_a_session(tmp_path):
    hit2, hit1 = SEARCH[1], SEARCH[0]
    db = tmp_path / "t.duckdb"
    replies = [openai_reply(None, [("search", {"q": "sso"})], model="loop-gpt"),
               openai_reply(f"Use the Okta app: see [{hit2['title']}]({hit2['url']}).", model="loop-gpt"),
               openai_reply(f"Without Okta, follow [{hit1['title']}]({hit1['url']}).", model="loop-gpt")]
    with ScriptedServer(replies=replies) as llm, collect(db, "bot") as url:
        messages = _openai_app(url, llm.url, ["How do I set up SSO with Okta?", "And without Okta?"])
    assert len(llm.posts()) == 3 and sum(m["role"] == "tool" for m in messages) == 1
    first, second = turns(db, "--conversation", "chat-42")
    returned = [h["doc_id"] for h in SEARCH]  # what the app's tool returned (and sent to the model)
    assert (first["position"], second["position"]) == (1, 2)
    assert first["question"] == "How do I set up SSO with Okta?"
    assert first["sets"] == {"retrieved": returned, "cited": [hit2["doc_id"]], "consulted": [hit2["doc_id"]]}
    assert first["audit"]["not_shown"] == [] and first["audit"]["rule"] == "conservative"
    assert [t["name"] for t in first["tool_calls"]] == ["search"]  # the tool step, folded into the turn
    assert len(first["audit"]["trace_ids"]) == 2  # the tool-calling call's trace and the answering one
    # turn 2 made no tool call: its documents are the ones turn 1's search left in the prompt
    assert second["sets"]["cited"] == [hit1["doc_id"]] and second["sets"]["consulted"] == [hit1["doc_id"]]
    assert set(second["sets"]["retrieved"]) == set(returned)
    carried = {s["doc_id"]: s.get("carried_from") for s in second["sources"]}
    assert carried == {hit1["doc_id"]: first["turn_id"]}


def test_hidden_inputs_make_the_turn_unauditable(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENINFERENCE_HIDE_INPUTS", "true")
    db = tmp_path / "t.duckdb"
    replies = [openai_reply(None, [("search", {"q": "sso"})], model="loop-gpt"),
               openai_reply(f"See [{SEARCH[0]['title']}]({SEARCH[0]['url']}).", model="loop-gpt")]
    with ScriptedServer(replies=replies) as llm, collect(db, "hidden") as url:
        _openai_app(url, llm.url, ["How do I set up SSO?"])
    [turn] = turns(db, "--run", "hidden")
    assert turn["status"] == "unauditable"
    assert "__REDACTED__" in turn["audit"]["reason"]
    assert turn["sets"]["consulted"] == [] and turn["sources"] == []
