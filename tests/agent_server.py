"""A loopback Ollama server whose replies depend on each request, so concurrent turns cannot mix scripts.

`ScriptedServer` (loopback.py) serves replies in arrival order, which only works for one turn at a
time. This server plays a deterministic agent over the real Ollama wire format (`POST /api/chat`):
the question → `search` for it; a search result → `fetch_document` of the first hit (or "nothing
found"); a fetched document → an answer linking its URL. Every request can wait `delay` seconds
(a model's latency); the first `rate_limit_first` requests, and every `rate_limit_every`-th one, answer
429 (a provider's rate limit). `hold` (a question) makes every request of that question's turn wait
until `release()` (a turn that takes as long as a test needs: a slow model, without a fixed sleep);
`held` is set when the first such request arrives. `fail` (a question) answers every request whose latest
question it is with a server error (a turn that fails). `requests` keeps each request's messages, in
arrival order (what the model was sent: a follow-up's history).
Used by the concurrency tests and `benchmarks/eval_concurrency.py`.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

from http_server import LoopbackServer, QuietHandler, send
from loopback import Reply, ollama_error, ollama_model, ollama_reply, ollama_show


def agent_reply(messages: list[dict[str, Any]]) -> Reply:
    """The next step of a search → fetch → answer agent, from the conversation so far."""
    last = messages[-1]
    if last.get("role") != "tool":
        return ollama_reply("", [("search", {"query": last.get("content") or ""})])
    try:
        content = json.loads(last.get("content") or "{}")
    except ValueError:
        content = {}
    if last.get("tool_name") == "search":
        results = content.get("results") or []
        if not results:
            return ollama_reply("The knowledge base has nothing on this.")
        return ollama_reply("", [("fetch_document", {"doc_id": results[0]["doc_id"]})])
    if content.get("url"):
        return ollama_reply(f"See [{content.get('title') or content.get('doc_id')}]({content['url']}).")
    return ollama_reply(f"See `{content.get('doc_id')}`.")


def latest_question(messages: list[dict[str, Any]]) -> str | None:
    """The question a request is about: its last user message."""
    return next((m.get("content") for m in reversed(messages) if m.get("role") == "user"), None)


class AgentServer(LoopbackServer):
    def __init__(self, delay: float = 0.0, rate_limit_every: int = 0, rate_limit_first: int = 0,
                 hold: str | None = None, fail: str | None = None):
        self.delay = delay
        self.fail = fail
        self.requests: list[list[dict[str, Any]]] = []
        self.hold = hold
        self.held = threading.Event()
        self._released = threading.Event()
        self.rate_limit_every = rate_limit_every
        self.rate_limit_first = rate_limit_first
        self.posts = 0
        self.rate_limited = 0
        self.max_in_flight = 0
        self._in_flight = 0
        self._lock = threading.Lock()
        server = self

        class Handler(QuietHandler):
            def _send(self, reply: Reply):
                send(self, reply.status, json.dumps(reply.body).encode())

            def do_GET(self):
                self._send(Reply(body={"models": [ollama_model("llama3.1:latest")]}))

            def do_POST(self):
                body = self.json_body()
                if self.path == "/api/show":  # the model's context: no model step, not counted
                    self._send(Reply(body=ollama_show()))
                    return
                with server._lock:
                    server.posts += 1
                    n = server.posts
                    server.requests.append(body.get("messages") or [])
                    server._in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server._in_flight)
                try:
                    messages = body.get("messages") or []
                    if server.hold is not None and any(m.get("role") == "user" and m.get("content") == server.hold
                                                       for m in messages):
                        server.held.set()
                        server._released.wait(120)  # bounded: a test that never releases still ends
                    if server.delay:
                        time.sleep(server.delay)
                    if n <= server.rate_limit_first or (server.rate_limit_every and n % server.rate_limit_every == 0):
                        with server._lock:
                            server.rate_limited += 1
                        self._send(ollama_error(429, "rate limit exceeded, slow down"))
                    elif server.fail is not None and latest_question(messages) == server.fail:
                        self._send(ollama_error(500, "the model crashed"))
                    else:
                        self._send(agent_reply(body.get("messages") or []))
                finally:
                    with server._lock:
                        server._in_flight -= 1

        self._serve(Handler)

    def release(self) -> None:
        """Let the held turn's requests through."""
        self._released.set()
