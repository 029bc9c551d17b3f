"""A loopback OpenAI-compatible server with a small context that refuses what does not fit, as llama.cpp's does.

`ContextServer(n_ctx, agent)` answers `POST /v1/chat/completions` with `agent(messages)` (a `Reply` from
`loopback.openai_reply`), unless the request is over `n_ctx` tokens: then it answers 400 with the body llama.cpp's
server sends (`exceed_context_size_error`, `n_prompt_tokens`, `n_ctx`). Tokens are counted the way a BPE tokenizer
falls on chat requests full of JSON, pessimistically: every run of letters or digits is one token per
`CHARS_PER_WORD_TOKEN` characters, every other non-space character a token of its own, plus `TEMPLATE_TOKENS` a
message (the chat template's markers) — over the messages' text and the tool declarations. `GET /props` reports
`n_ctx` as llama.cpp's server does (`props=False`: 404, as servers that do not). Every request is kept in
`requests` with its token count; `refused` counts the refusals.
"""

from __future__ import annotations

import json
import math
import re
import threading
from typing import Any, Callable

from http_server import LoopbackServer, QuietHandler, send
from loopback import Reply

CHARS_PER_WORD_TOKEN = 4
TEMPLATE_TOKENS = 6
_PIECE = re.compile(r"[^\W_]+|\S", re.UNICODE)


def count_tokens(body: dict[str, Any]) -> int:
    """Tokens of a chat-completions request as this server counts them (see the module docstring)."""
    texts = [str(m.get("content") or "") + json.dumps(m.get("tool_calls") or "") for m in body.get("messages") or []]
    texts.append(json.dumps(body.get("tools") or []))
    n = TEMPLATE_TOKENS * len(body.get("messages") or [])
    for text in texts:
        for piece in _PIECE.findall(text):
            n += math.ceil(len(piece) / CHARS_PER_WORD_TOKEN) if piece[0].isalnum() else 1
    return n


def overflow_body(n_prompt: int, n_ctx: int) -> dict[str, Any]:
    """llama.cpp server's 400 body for a prompt over its context."""
    return {"error": {"code": 400, "message": "the request exceeds the available context size, try increasing it",
                      "type": "exceed_context_size_error", "n_prompt_tokens": n_prompt, "n_ctx": n_ctx}}


class ContextServer(LoopbackServer):
    def __init__(self, n_ctx: int, agent: Callable[[list[dict[str, Any]]], Reply], props: bool = True):
        self.n_ctx, self.agent, self.props = n_ctx, agent, props
        self.requests: list[tuple[int, dict[str, Any]]] = []  # (tokens, body) of each chat request
        self.refused = 0
        self._lock = threading.Lock()
        server = self

        class Handler(QuietHandler):
            def _send(self, reply: Reply):
                send(self, reply.status, json.dumps(reply.body).encode())

            def do_GET(self):
                if self.path == "/props" and server.props:
                    self._send(Reply(body={"default_generation_settings": {"n_ctx": server.n_ctx},
                                           "total_slots": 1, "model_path": "loopback.gguf"}))
                else:
                    self._send(Reply(404, {"error": {"code": 404, "message": "File Not Found",
                                                     "type": "not_found_error"}}))

            def do_POST(self):
                body = self.json_body()
                tokens = count_tokens(body)
                with server._lock:
                    server.requests.append((tokens, body))
                if tokens > server.n_ctx:
                    with server._lock:
                        server.refused += 1
                    self._send(Reply(400, overflow_body(tokens, server.n_ctx)))
                else:
                    self._send(server.agent(body.get("messages") or []))

        self._serve(Handler)
