"""What every conformance app shares (it runs in .venv-audit-apps, without the workbench's dependencies).

The help center is the demo corpus (data/demo): `search` ranks its articles by the question's words and returns
each hit's title, url and the start of its text (a snippet); `open_article` returns an article's whole text. Every
tool result and every document a retriever returned or a reranker dropped is written to the app's record
(`$CONFORMANCE_RECORD`, JSON lines), under the turn being asked: the test derives its expected sets from this record
and from what the loopback model received. `main` runs an app's three cases: a turn, a follow-up in the same session
(the history re-sent), and a turn with its inputs hidden.
"""

from __future__ import annotations

import json
import os
import re
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "data" / "demo"
QUESTIONS = {"first": "How do I set up SSO with Okta?", "followup": "And how do I make SSO required for everyone?",
             "hidden": "Which SAML settings does Okta single sign-on need?"}
SNIPPET_CHARS = 240
MODEL_URL = os.environ.get("CONFORMANCE_MODEL", "http://127.0.0.1:9")
RUN = os.environ.get("CONFORMANCE_RUN", "conf")
SYSTEM = "You answer from the Orbitly help center. Search it, open what you need, and link the articles you use."
_turn: dict[str, Any] = {}


def _front(path: Path) -> dict:
    head, body = path.read_text(encoding="utf-8").split("\n---\n", 1)
    meta = dict(line.split(": ", 1) for line in head.splitlines()[1:] if ": " in line)
    return {"id": meta["id"], "title": meta["title"], "url": meta["url"], "text": body.strip()}


ARTICLES = {d["id"]: d for d in (_front(p) for p in sorted(CORPUS.rglob("*.md")))}
_WORD = re.compile(r"[a-z0-9]+")


def _score(words: set[str], doc: dict) -> int:
    return 3 * len(words & set(_WORD.findall(doc["title"].lower()))) + len(words & set(_WORD.findall(doc["text"].lower())))


def rank(query: str, k: int) -> list[dict]:
    words = {w for w in _WORD.findall(query.lower()) if len(w) > 2}
    return sorted(ARTICLES.values(), key=lambda d: (-_score(words, d), d["id"]))[:k]


def snippet(doc: dict) -> str:
    """The start of the article's text after its heading: a part of the document."""
    text = doc["text"].split("\n", 1)[1].strip() if doc["text"].startswith("# ") else doc["text"]
    return text[:SNIPPET_CHARS].rsplit(" ", 1)[0]


def record(event: str, **data: Any) -> None:
    with open(os.environ["CONFORMANCE_RECORD"], "a", encoding="utf-8") as fh:
        fh.write(json.dumps({**_turn, "event": event, **data}) + "\n")


def search(query: str, k: int = 3) -> list[dict]:
    """The help center's search: the top `k` articles, each a hit with its snippet (recorded)."""
    hits = [{"doc_id": d["id"], "title": d["title"], "url": d["url"], "snippet": snippet(d)} for d in rank(query, k)]
    record("search", returned=[h["doc_id"] for h in hits])
    return hits


def as_text(hits: list[dict]) -> str:
    """Hits as most hand-written search tools return them: blocks of title, URL and text."""
    return "\n\n".join(f"Title: {h['title']}\nURL: {h['url']}\nText: {h['snippet']}" for h in hits)


def open_article(doc_id: str) -> str:
    """An article's whole text (recorded), or a not-found line."""
    doc = ARTICLES.get(doc_id)
    record("open", doc_id=doc_id if doc else None)
    return f"# {doc['title']}\nURL: {doc['url']}\n\n{doc['text']}" if doc else f"No article {doc_id!r}."


#: What `tracer_provider` imports (and every docs/audit.md setup snippet, before it instruments): the runner
#: (runner.py) imports them once, before its forks, as a run would before instrumenting.
PROVIDER_MODULES = ("opentelemetry.exporter.otlp.proto.http.trace_exporter", "opentelemetry.sdk.resources",
                    "opentelemetry.sdk.trace", "opentelemetry.sdk.trace.export",
                    "opentelemetry.exporter.http.transport._requests", "requests")  # (the exporter's transport)


def tracer_provider(service: str, *first):
    """The OTel SDK's provider, `service.name` on its resource, exporting OTLP/HTTP protobuf to `collect` (after the
    span processors `first`, e.g. one that maps a framework's own attributes to OpenInference)."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    for processor in first:
        provider.add_span_processor(processor)
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(os.environ["CONFORMANCE_COLLECT"], timeout=30)))
    return provider


@contextmanager
def session(session_id: str):
    """OpenInference's `using_session`: the session is the conversation."""
    from openinference.instrumentation import using_session

    with using_session(session_id):
        yield


def session_id() -> str:
    """The session of the turn being asked (a framework with its own conversation id, LangGraph's `thread_id`, gets
    this one, so OpenInference's `session.id` is the same either way)."""
    return _turn["session"]


def ask(case: str, n: int, ask_fn: Callable[[str], str]) -> str:
    question = QUESTIONS[case]
    _turn.update(session=f"{RUN}-{case if case == 'hidden' else 'chat'}", position=n, question=question)
    answer = ask_fn(question)
    record("answer", text=answer)
    return answer


@contextmanager
def genai_conversation(session_id: str):
    """For instrumentors of the OTel GenAI conventions (no `using_session`): the app's own span around the turn,
    naming the conversation with `gen_ai.conversation.id`."""
    from opentelemetry import trace

    with trace.get_tracer("conformance").start_as_current_span("chat turn", attributes={
            "gen_ai.conversation.id": session_id}):
        yield


def main(service: str, instrument: Callable, new_chat: Callable, *, hide_env: str = "OPENINFERENCE_HIDE_INPUTS",
         session_cm: Callable = session, processors: tuple = (), hidden_value: str | None = None) -> None:
    """Run the app's three cases: `instrument(provider)` returns its instrumentor; `new_chat()` a function asking
    one question of one conversation (keeping its history). The hidden run sets `hide_env` to `hidden_value`
    (default: "true", or "false" for `TRACELOOP_TRACE_CONTENT`)."""
    provider = tracer_provider(service, *processors)
    if session_cm is genai_conversation:
        from opentelemetry import trace
        trace.set_tracer_provider(provider)
    instrumentor = instrument(provider)
    chat = new_chat()
    with session_cm(f"{RUN}-chat"):
        ask("first", 1, chat)
    with session_cm(f"{RUN}-chat"):
        ask("followup", 2, chat)
    instrumentor.uninstrument()
    os.environ[hide_env] = hidden_value or ("false" if hide_env == "TRACELOOP_TRACE_CONTENT" else "true")
    instrumentor = instrument(provider)
    with session_cm(f"{RUN}-hidden"):
        ask("hidden", 1, new_chat())
    instrumentor.uninstrument()
    provider.shutdown()
