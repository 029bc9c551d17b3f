"""Loopback HTTP servers that speak the real Ollama, Gemini and OpenAI wire formats with scripted replies.

A `ScriptedServer` listens on 127.0.0.1 (ephemeral port), answers each POST with the next scripted
`Reply`, answers `GET /api/tags` with the installed models (other GETs are scripted), and records every request it received
so tests can assert what the official clients actually sent. Reply builders below produce the
documented JSON bodies:

- Ollama `/api/chat` (non-streaming): `message` with `content` and `tool_calls[].function`
  {name, arguments object}, `done_reason`, `prompt_eval_count`, `eval_count`; errors as
  `{"error": "…"}` with the HTTP status.
- Gemini v1beta `models/{model}:generateContent`: `candidates[0].content.parts` with `text` or
  `functionCall` {name, args}, `finishReason`, `usageMetadata`, `modelVersion`; errors as
  `{"error": {"code", "message", "status"}}`.
- OpenAI chat completions (`POST /v1/chat/completions`, non-streaming): `choices[0].message` with
  `content` and `tool_calls[]` {id, type, function {name, arguments JSON string}}, `finish_reason`,
  `usage` {prompt_tokens, completion_tokens}, `model`; `GET /v1/models` lists `models`; errors as
  `{"error": {"message", "type", "param", "code"}}`, with `Retry-After` when scripted.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from http_server import LoopbackServer, QuietHandler, send


@dataclass
class Reply:
    status: int = 200
    body: Any = None  # dict → JSON; str → sent as is
    delay: float = 0.0  # seconds to wait before answering (timeouts)
    headers: dict[str, str] = field(default_factory=dict)  # extra response headers (e.g. Retry-After)


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: Any
    at: float = field(default_factory=time.monotonic)  # when it arrived


@dataclass
class ScriptedServer(LoopbackServer):
    """Serve `replies` in order; with `repeat_last` the last reply is served forever."""

    replies: list[Reply] = field(default_factory=list)
    repeat_last: bool = False
    models: list[str] = field(default_factory=lambda: ["llama3.1:latest", "qwen2.5:7b"])
    requests: list[Request] = field(default_factory=list)
    #: What `GET /props` answers (llama.cpp's server reports its context there); None: 404, as other servers.
    props: dict[str, Any] | None = None
    #: What Ollama's `POST /api/show` answers (the model's Modelfile parameters and model info).
    show: dict[str, Any] = field(default_factory=lambda: ollama_show())

    def __post_init__(self):
        self._lock = threading.Lock()
        server = self

        class Handler(QuietHandler):
            def _answer(self, reply: Reply):
                if reply.delay:
                    time.sleep(reply.delay)
                data = reply.body if isinstance(reply.body, (str, bytes)) else json.dumps(reply.body)
                send(self, reply.status, data.encode() if isinstance(data, str) else data, headers=reply.headers)

            def _record(self) -> Request:
                n = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(n) if n else b""
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = raw.decode("utf-8", "replace")
                req = Request(self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                with server._lock:
                    server.requests.append(req)
                return req

            def do_GET(self):
                self._record()
                if self.path.startswith("/api/tags"):
                    self._answer(Reply(body={"models": [ollama_model(m) for m in server.models]}))
                elif self.path == "/props":
                    self._answer(Reply(body=server.props) if server.props is not None
                                 else Reply(404, {"error": {"code": 404, "message": "File Not Found",
                                                            "type": "not_found_error"}}))
                elif self.path.rstrip("/").endswith("/v1/models"):
                    self._answer(Reply(body={"object": "list", "data": [
                        {"id": m, "object": "model", "created": 0, "owned_by": "loopback"} for m in server.models]}))
                else:  # e.g. Gemini's models.list: scripted like the POSTs
                    self._answer(server._next())

            def do_POST(self):
                self._record()
                if self.path == "/api/show":  # Ollama's model details: not scripted, like /api/tags
                    self._answer(Reply(body=server.show))
                else:
                    self._answer(server._next())

        self._serve(Handler)

    def _next(self) -> Reply:
        with self._lock:
            if not self.replies:
                return Reply(500, {"error": "the scripted server ran out of replies"})
            if self.repeat_last and len(self.replies) == 1:
                return self.replies[0]
            return self.replies.pop(0)

    def posts(self) -> list[Request]:
        """The scripted POSTs (Ollama's `/api/show`, which asks the model's context, is not one)."""
        return [r for r in self.requests if r.method == "POST" and r.path != "/api/show"]


@dataclass
class RedirectServer(LoopbackServer):
    """Answer every request with `status` and `Location: <target><the request's path>`, and record the requests."""

    target: str
    status: int = 307
    requests: list[Request] = field(default_factory=list)

    def __post_init__(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _redirect(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else b""
                server.requests.append(Request(self.command, self.path, dict(self.headers), body))
                send(self, server.status, b"", headers={"Location": server.target + self.path})

            do_GET = do_POST = _redirect

        self._serve(Handler)


def refused_url() -> str:
    """A loopback URL where nothing listens (connection refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


# --- Ollama wire format ------------------------------------------------------------------------

def ollama_model(name: str) -> dict[str, Any]:
    return {"name": name, "model": name, "modified_at": "2026-01-01T00:00:00Z", "size": 4_700_000_000,
            "digest": "a" * 64, "details": {"format": "gguf", "family": "llama", "parameter_size": "8.0B",
                                            "quantization_level": "Q4_K_M"}}


def ollama_show(parameters: str = "stop \"<|eot_id|>\"", context_length: int = 131072) -> dict[str, Any]:
    """Ollama's `/api/show` body: `parameters` is the Modelfile's PARAMETER lines (`num_ctx 8192` sets the context)."""
    return {"modelfile": "FROM llama3.1", "parameters": parameters, "template": "{{ .Prompt }}",
            "details": {"format": "gguf", "family": "llama", "parameter_size": "8.0B", "quantization_level": "Q4_K_M"},
            "model_info": {"general.architecture": "llama", "llama.context_length": context_length},
            "capabilities": ["completion", "tools"], "modified_at": "2026-01-01T00:00:00Z"}


def ollama_reply(text: str = "", calls: list[tuple[str, Any]] = (), *, model: str = "llama3.1:latest",
                 done_reason: str = "stop", tokens_in: int = 120, tokens_out: int = 30) -> Reply:
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if calls:
        message["tool_calls"] = [{"function": {"name": n, "arguments": a}} for n, a in calls]
    return Reply(body={"model": model, "created_at": "2026-01-01T00:00:00.000Z", "message": message,
                       "done": True, "done_reason": done_reason, "total_duration": 1_000_000,
                       "load_duration": 10_000, "prompt_eval_count": tokens_in, "prompt_eval_duration": 1000,
                       "eval_count": tokens_out, "eval_duration": 1000})


def ollama_error(status: int, message: str) -> Reply:
    return Reply(status, {"error": message})


# --- Gemini wire format ------------------------------------------------------------------------

def gemini_reply(text: str | None = None, calls: list[tuple[str, Any]] = (), *, finish: str = "STOP",
                 model_version: str = "gemini-2.5-flash-001", tokens_in: int = 200, tokens_out: int = 40,
                 signature: str | None = None, finish_message: str | None = None) -> Reply:
    parts: list[dict[str, Any]] = []
    if text:
        parts.append({"text": text})
    for i, (name, args) in enumerate(calls):
        part: dict[str, Any] = {"functionCall": {"name": name, "args": args}}
        if signature and i == 0:
            part["thoughtSignature"] = signature
        parts.append(part)
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "finishReason": finish, "index": 0}
    if finish_message:
        candidate["finishMessage"] = finish_message
    if not parts:
        candidate.pop("content")
    return Reply(body={"candidates": [candidate],
                       "usageMetadata": {"promptTokenCount": tokens_in, "candidatesTokenCount": tokens_out,
                                         "totalTokenCount": tokens_in + tokens_out},
                       "modelVersion": model_version, "responseId": "resp-1"})


_GOOGLE_STATUS = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
                  429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE"}


def gemini_error(status: int, message: str) -> Reply:
    return Reply(status, {"error": {"code": status, "message": message,
                                    "status": _GOOGLE_STATUS.get(status, "UNKNOWN")}})


# --- OpenAI chat-completions wire format ------------------------------------------------------------

def openai_reply(text: str | None = "", calls: list[tuple[str, Any]] = (), *, model: str = "gpt-4o-mini-2024-07-18",
                 finish: str | None = None, tokens_in: int = 150, tokens_out: int = 35) -> Reply:
    """A chat completion; a call's arguments are JSON-encoded unless given as a string (raw, maybe malformed)."""
    message: dict[str, Any] = {"role": "assistant", "content": text or None, "refusal": None}
    if calls:
        message["tool_calls"] = [{"id": f"call_{i}", "type": "function",
                                  "function": {"name": n, "arguments": a if isinstance(a, str) else json.dumps(a)}}
                                 for i, (n, a) in enumerate(calls)]
    return Reply(body={"id": "chatcmpl-1", "object": "chat.completion", "created": 1767225600, "model": model,
                       "choices": [{"index": 0, "message": message, "logprobs": None,
                                    "finish_reason": finish or ("tool_calls" if calls else "stop")}],
                       "usage": {"prompt_tokens": tokens_in, "completion_tokens": tokens_out,
                                 "total_tokens": tokens_in + tokens_out},
                       "system_fingerprint": "fp_loopback"})


_OPENAI_TYPE = {400: "invalid_request_error", 401: "invalid_request_error", 403: "permission_denied",
                404: "invalid_request_error", 429: "rate_limit_exceeded", 500: "server_error", 503: "server_error"}


def openai_error(status: int, message: str, *, code: str | None = None, retry_after: str | None = None) -> Reply:
    headers = {"Retry-After": retry_after} if retry_after is not None else {}
    return Reply(status, {"error": {"message": message, "type": _OPENAI_TYPE.get(status, "error"), "param": None,
                                    "code": code}}, headers=headers)


# --- one adapter per wire format, so scenarios and faults run against every provider ---------------

@dataclass(frozen=True)
class Wire:
    provider: str
    model: str
    reply: Any  # (text, calls) -> Reply
    error: Any  # (status, message) -> Reply
    url_option: str  # provider option naming the server
    url_env: str  # environment variable naming the server (for the CLI)
    key_env: str  # the variable whose value must never leak
    test_key: str | None = None  # a key the provider needs to send anything
    url_suffix: str = ""  # appended to the server URL (OpenAI clients take the base URL with /v1)

    def options(self, url: str, **extra) -> dict[str, Any]:
        opts = {"model": self.model, self.url_option: url + self.url_suffix, "timeout": 5, "backoff": 0.001}
        if self.test_key:
            opts["api_key"] = self.test_key
        return {**opts, **extra}

    def env(self, url: str) -> dict[str, str]:
        env = {self.url_env: url + self.url_suffix, "WORKBENCH_PROVIDER_BACKOFF": "0.001",
               "WORKBENCH_PROVIDER_TIMEOUT": "5"}
        if self.test_key:
            env[self.key_env] = self.test_key
        return env


OLLAMA = Wire("ollama", "llama3.1", ollama_reply, ollama_error, "host", "OLLAMA_HOST", "OLLAMA_API_KEY")
GEMINI = Wire("gemini", "gemini-2.5-flash", gemini_reply, gemini_error, "base_url", "GEMINI_BASE_URL", "GEMINI_API_KEY",
              test_key="AIzaTEST-not-a-real-key")
OPENAI = Wire("openai", "gpt-4o-mini", openai_reply, openai_error, "base_url", "OPENAI_BASE_URL", "OPENAI_API_KEY",
              test_key="sk-test-not-a-real-key", url_suffix="/v1")
WIRES = {"ollama": OLLAMA, "gemini": GEMINI, "openai": OPENAI}
