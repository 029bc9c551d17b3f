"""Apps we did not write, instrumented with the real OpenInference instrumentors, a running `collect`, and what
each app's audited turns must say.

Each app exports its spans with the OpenTelemetry SDK's own OTLP/HTTP exporter (`OTLPSpanExporter`) to a
`python -m workbench collect` process (tests/test_audit_instrumented.py) or to a real Phoenix, read back with
`ingest --phoenix` (tests/test_phoenix.py); its model is an OpenAI-compatible loopback server (tests/loopback.py).
The checks compare the audited sets with what each app really did: its retriever's hits, what its postprocessor
kept, and the prompt its model really received (recorded by the loopback server).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from conftest import ROOT
from loopback import openai_reply

PY = sys.executable

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
SEARCH = [{"doc_id": d["id"], "title": d["title"], "url": d["url"], "snippet": d["text"][:60]} for d in DOCS[:3]]
TOOLS = [{"type": "function", "function": {"name": "search", "description": "search the help center",
                                           "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}}]
LLAMA_QUESTION = "How do I configure SSO single sign-on?"
LLAMA_ANSWER = "Enable SAML in Admin settings [1]. Nothing on [7]."
SESSION_QUESTIONS = ["How do I set up SSO with Okta?", "And without Okta?"]


def _norm(text: str) -> str:
    return " ".join(text.split())


def write_corpus(path: Path) -> Path:
    """The apps' knowledge base as a corpus file (`--corpus`)."""
    path.write_text("".join(json.dumps(d) + "\n" for d in DOCS), encoding="utf-8")
    return path


@contextmanager
def collect(db: Path, name: str, *extra: str, rc: int = 0, outcome: dict | None = None) -> Iterator[str]:
    """A running `workbench collect` on a free loopback port; yields its /v1/traces URL. On exit it gets SIGTERM
    and must write everything and exit `rc`; `outcome` (when given) gets its `stdout` and `stderr`."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_WAIT_POLICY": "PASSIVE"}
    proc = subprocess.Popen([PY, "-m", "workbench", "collect", "--port", "0", "--db", str(db), "--name", name, *extra],
                            cwd=ROOT, env=env, stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stderr.readline()  # blocks until the receiver is listening (or the process ended)
        m = re.search(r"(http://\S+/v1/traces)", line)
        assert m, f"collect did not start: {line}{proc.stderr.read() if proc.poll() is not None else ''}"
        yield m.group(1)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        out, rest = proc.communicate(timeout=60)
    if outcome is not None:
        outcome.update(stdout=out, stderr=line + rest)
    assert proc.returncode == rc, f"collect exited {proc.returncode}: {rest}"
    assert "turns written" in rest, rest


def tracer_provider(url: str, service: str, project: str | None = None):
    """The OTel SDK's provider exporting to `url` (OTLP/HTTP); `project` names the Phoenix project its spans go to."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    from workbench.trace.spans import PROJECT_NAME

    tp = TracerProvider(resource=Resource.create({"service.name": service, **({PROJECT_NAME: project} if project else {})}))
    tp.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=url, timeout=10)))
    return tp


def llama_engine(llm_url: str):
    """A llama-index CitationQueryEngine over BM25 with a SimilarityPostprocessor; returns (its retriever, a
    function of the postprocessor's cutoff giving the engine)."""
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


@dataclass(frozen=True)
class LlamaRun:
    """What the llama-index app really did: its retriever's hits, what its postprocessor kept, and which document
    the prompt's `Source 1:` block showed."""

    hits: list[str]
    kept: list[str]
    numbered_1: str


def llama_replies() -> list:
    return [openai_reply(LLAMA_ANSWER, model="loop-llama")]


@contextmanager
def llama_instrumented(tp) -> Iterator[None]:
    """llama-index instrumented by OpenInference's `LlamaIndexInstrumentor`, its spans going to `tp`."""
    from openinference.instrumentation.llama_index import LlamaIndexInstrumentor

    instrumentor = LlamaIndexInstrumentor()
    instrumentor.instrument(tracer_provider=tp)
    try:
        yield
    finally:
        instrumentor.uninstrument()
        tp.shutdown()


def run_llama_app(tp, llm) -> LlamaRun:
    """The llama-index app, instrumented on `tp`, asks `LLAMA_QUESTION` once, with a postprocessor cutoff between
    its second and third hits (so it keeps two of three)."""
    with llama_instrumented(tp):
        retriever, engine = llama_engine(llm.url)
        hits = retriever.retrieve(LLAMA_QUESTION)  # what the retriever returns (its own trace: no model call, no turn)
        scores = sorted((h.score for h in hits), reverse=True)
        response = engine((scores[1] + scores[2]) / 2).query(LLAMA_QUESTION)
    hit_docs = [DOCS[[d["text"] for d in DOCS].index(h.node.get_content())]["id"] for h in hits]
    kept = [d["id"] for d in DOCS if any(_norm(d["text"]) in _norm(n.node.get_content()) for n in response.source_nodes)]
    assert len(kept) == 2 and set(kept) < set(hit_docs)
    prompt = "\n".join(m["content"] for m in llm.posts()[0].body["messages"])
    source_1 = prompt.rsplit("Source 1:", 1)[1].split("Source 2:")[0]  # the template's worked example comes first
    return LlamaRun(hits=hit_docs, kept=kept, numbered_1=next(d["id"] for d in DOCS if _norm(d["text"]) in _norm(source_1)))


def check_llama_turn(turn: dict, run: LlamaRun, service: str) -> None:
    """The §12 sets of the llama-index app's turn, from what it did (`run`), measured against the corpus."""
    assert turn["question"] == LLAMA_QUESTION
    assert set(turn["sets"]["retrieved"]) == set(run.kept)  # exposure measured: what reached the model
    assert turn["audit"]["not_shown"] == [d for d in run.hits if d not in run.kept]  # the postprocessor dropped it
    assert turn["sets"]["cited"] == [run.numbered_1]  # [1] resolved against the prompt's numbering
    assert set(turn["sets"]["consulted"]) == set(run.kept)  # the whole text of each kept document reached the model
    assert [r["target"] for r in turn["rejected_citations"]] == ["[7]"]
    assert turn["rejected_citations"][0]["reason"] == "not_retrieved"
    assert turn["audit"]["service"] == service and turn["audit"]["rule"] == "corpus"
    assert turn["config"]["model"] == "loop-llama"
    assert {turn["audit"]["evidence"][d]["exposure"] for d in run.kept} == {"full"}


def _tool_loop(client, messages: list, model: str) -> str:
    """The app: call the model; run the tool calls it asks for; until it answers (no parent span anywhere)."""
    while True:
        reply = client.chat.completions.create(model=model, messages=messages, tools=TOOLS).choices[0].message
        messages.append(reply.model_dump(exclude_none=True))
        if not reply.tool_calls:
            return reply.content
        for call in reply.tool_calls:
            messages.append({"role": "tool", "tool_call_id": call.id, "content": json.dumps(SEARCH)})


def run_openai_app(tp, llm_url: str, questions: list[str], messages: list | None = None, alone: list = ()) -> list:
    """The bare openai client, instrumented by `OpenAIInstrumentor` on `tp`, asks `questions` in one session
    (`chat-42`), each in a tool loop, after `messages` (a conversation to go on with), then each of `alone` on its
    own (no session); returns the session's messages."""
    import openai
    from openinference.instrumentation import TraceConfig, using_session
    from openinference.instrumentation.openai import OpenAIInstrumentor

    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=tp, config=TraceConfig())
    client = openai.OpenAI(base_url=llm_url + "/v1", api_key="sk-test", max_retries=0)
    messages = messages or [{"role": "system", "content": "Answer from the help center; link what you use."}]
    try:
        with using_session("chat-42"):
            for q in questions:
                messages.append({"role": "user", "content": q})
                _tool_loop(client, messages, "loop-gpt")
        for q in alone:
            _tool_loop(client, [messages[0], {"role": "user", "content": q}], "loop-gpt")
    finally:
        instrumentor.uninstrument()
        tp.shutdown()
    return messages


def session_replies() -> list:
    """The model's replies over `SESSION_QUESTIONS`: a search, an answer linking SEARCH[1], one linking SEARCH[0]."""
    hit2, hit1 = SEARCH[1], SEARCH[0]
    return [openai_reply(None, [("search", {"q": "sso"})], model="loop-gpt"),
            openai_reply(f"Use the Okta app: see [{hit2['title']}]({hit2['url']}).", model="loop-gpt"),
            openai_reply(f"Without Okta, follow [{hit1['title']}]({hit1['url']}).", model="loop-gpt")]


def check_session_turns(first: dict, second: dict, messages: list, llm) -> None:
    """The two turns of the openai app's session, from what its tool returned and what its model answered."""
    from workbench.audit.sessions import session_in

    hit2, hit1 = SEARCH[1], SEARCH[0]
    assert len(llm.posts()) == 3 and sum(m["role"] == "tool" for m in messages) == 1
    returned = [h["doc_id"] for h in SEARCH]  # what the app's tool returned (and sent to the model)
    assert first["conversation_id"] == second["conversation_id"] and session_in(first["conversation_id"]) == "chat-42"
    assert (first["position"], second["position"]) == (1, 2)
    assert first["question"] == SESSION_QUESTIONS[0]
    assert first["sets"] == {"retrieved": returned, "cited": [hit2["doc_id"]], "consulted": [hit2["doc_id"]]}
    assert first["audit"]["not_shown"] == [] and first["audit"]["rule"] == "conservative"
    assert [t["name"] for t in first["tool_calls"]] == ["search"]  # the tool step, folded into the turn
    assert len(first["audit"]["trace_ids"]) == 2  # the tool-calling call's trace and the answering one
    assert first["config"]["model"] == "loop-gpt"
    # turn 2 made no tool call: its documents are the ones turn 1's search left in the prompt
    assert second["sets"]["cited"] == [hit1["doc_id"]] and second["sets"]["consulted"] == [hit1["doc_id"]]
    assert set(second["sets"]["retrieved"]) == set(returned)
    carried = {s["doc_id"]: s.get("carried_from") for s in second["sources"]}
    assert carried == {hit1["doc_id"]: first["turn_id"]}


def turns(db: Path, *args: str) -> list[dict]:
    """The audited turns (`workbench turns --json`, run in this process: tests/clirun.py)."""
    from clirun import cli

    out = cli("turns", "--json", "--db", str(db), *args)
    assert out.returncode == 0, out.stderr
    return [json.loads(line) for line in out.stdout.splitlines()]
