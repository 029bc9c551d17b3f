"""A loopback model that speaks four providers' wire formats and acts as a small research agent.

One server answers, on the paths each official client posts to:
- OpenAI chat completions (`/v1/chat/completions`, `tool_calls` with JSON-string arguments),
- the OpenAI Responses API (`/v1/responses`, `function_call` output items, `function_call_output` inputs),
- Anthropic messages (`/v1/messages`, `tool_use` / `tool_result` blocks),
- Gemini generateContent (`/v1beta/models/M:generateContent`, `functionCall` / `functionResponse` parts).

Its replies are not a fixed script but a policy over what it was sent (so one server serves every framework, and
every framework's turn has the same shape): with tools declared and nothing found yet for the last question, it
calls `search_help_center`; with search results and nothing opened, it opens the first hit (`open_article`); then
it answers, linking the opened article, the second hit (read as a snippet) and a link one character off the third
hit (which it leaves uncited). A follow-up question (one starting "And") is answered from the conversation without
a tool call, linking the second hit an earlier turn found. Without tools (a RAG prompt) it links the first and
second articles of the prompt and one character off the third. Every request body is recorded (`requests`): the
conformance tests derive the expected sets from it.
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field
from typing import Any

from http_server import LoopbackServer, QuietHandler, send

#: Article URLs of the demo corpus (data/demo) as the apps show a hit's or an article's own url (a `URL:` line, a
#: `url` field); a link inside an article's text is not a hit.
URL = re.compile(r"""(?i)\burl\\?["']?\s*[:=]\s*\\?["']?(https://help\.orbitly\.example/[a-z0-9/-]+)""")
SEARCH, OPEN = "search_help_center", "open_article"


def off_by_one(url: str) -> str:
    """`url` with its last letter changed: a link one character off a real one."""
    last = url[-1]
    return url[:-1] + ("b" if last != "b" else "c")


@dataclass
class Said:
    """One request, normalised: every message as (role, text), the tool names declared."""

    wire: str
    messages: list[tuple[str, str]]
    tools: list[str]
    body: Any


def _text(content: Any) -> str:
    """The text of a content value in any of the four shapes (string, parts, blocks, a JSON object)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(_text(p) for p in content)
    if isinstance(content, dict):
        for key in ("text", "content", "output"):
            if key in content and isinstance(content[key], (str, list)):
                return _text(content[key])
        return json.dumps(content)
    return str(content)


def _chat(body: dict) -> Said:
    msgs = []
    for m in body.get("messages", []):
        role = m.get("role")
        if role == "assistant" and m.get("tool_calls"):
            msgs.append(("call", json.dumps(m["tool_calls"])))
        msgs.append(("tool" if role == "tool" else role, _text(m.get("content"))))
    return Said("chat", msgs, [t.get("function", t).get("name") for t in body.get("tools") or []], body)


def _responses(body: dict) -> Said:
    items = body.get("input")
    items = [{"role": "user", "content": items}] if isinstance(items, str) else items or []
    msgs = [("system", body["instructions"])] if body.get("instructions") else []
    for it in items:
        kind = it.get("type", "message")
        if kind == "function_call_output":
            msgs.append(("tool", _text(it.get("output"))))
        elif kind == "function_call":
            msgs.append(("call", json.dumps(it)))
        elif kind == "message" or "role" in it:
            msgs.append((it.get("role"), _text(it.get("content"))))
    return Said("responses", msgs, [t.get("name") for t in body.get("tools") or []], body)


def _anthropic(body: dict) -> Said:
    msgs = [("system", _text(body["system"]))] if body.get("system") else []
    for m in body.get("messages", []):
        content = m.get("content")
        blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
        for b in blocks:
            if b.get("type") == "tool_result":
                msgs.append(("tool", _text(b.get("content"))))
            elif b.get("type") == "tool_use":
                msgs.append(("call", json.dumps(b)))
            else:
                msgs.append((m.get("role"), _text(b.get("text"))))
    return Said("anthropic", msgs, [t.get("name") for t in body.get("tools") or []], body)


def _gemini(body: dict) -> Said:
    sys_parts = (body.get("systemInstruction") or body.get("system_instruction") or {}).get("parts") or []
    msgs = [("system", _text(sys_parts))] if sys_parts else []
    for c in body.get("contents", []):
        for p in c.get("parts") or []:
            if "functionResponse" in p:
                msgs.append(("tool", json.dumps(p["functionResponse"].get("response"))))
            elif "functionCall" in p:
                msgs.append(("call", json.dumps(p["functionCall"])))
            elif "text" in p:
                msgs.append(("user" if c.get("role") == "user" else "assistant", p["text"]))
    tools = [f.get("name") for t in body.get("tools") or [] for f in t.get("functionDeclarations") or []]
    return Said("gemini", msgs, tools, body)


def parse(path: str, body: dict) -> Said:
    if path.endswith("/chat/completions"):
        return _chat(body)
    if path.endswith("/responses"):
        return _responses(body)
    if path.endswith("/messages"):
        return _anthropic(body)
    if ":generateContent" in path:
        return _gemini(body)
    raise ValueError(f"no wire format for {path}")


@dataclass(frozen=True)
class Move:
    """What the model does: call a tool (`call`: name and arguments) or answer (`text`)."""

    call: tuple[str, dict] | None = None
    text: str = ""


def decide(said: Said) -> Move:
    """The policy of the module's docstring."""
    last_user = max((i for i, (role, _) in enumerate(said.messages) if role == "user"), default=-1)
    question = said.messages[last_user][1] if last_user >= 0 else ""
    results = [t for role, t in said.messages[last_user + 1:] if role == "tool"]
    earlier = [t for role, t in said.messages[:last_user] if role == "tool"]
    if said.tools and question.strip().startswith("And"):
        hits = list(dict.fromkeys(URL.findall("\n".join(earlier[:1]))))
        return Move(text=f"As before, see [the article]({hits[1]}).") if len(hits) > 1 else Move(text="I do not know.")
    if SEARCH in said.tools and not results:
        return Move(call=(SEARCH, {"query": question.strip()[:200]}))
    if said.tools:
        hits = list(dict.fromkeys(URL.findall(results[0])))
        if OPEN in said.tools and len(results) == 1 and hits:
            return Move(call=(OPEN, {"doc_id": hits[0].rsplit("/", 1)[1]}))
        return _answer(hits)
    prompt = "\n".join(t for role, t in said.messages if role != "assistant")
    return _answer(list(dict.fromkeys(URL.findall(prompt))))


def _answer(hits: list[str]) -> Move:
    if len(hits) < 3:
        return Move(text="I could not find enough articles." + "".join(f" [a]({h})" for h in hits))
    return Move(text=f"Start with [the guide]({hits[0]}); the details are in [this article]({hits[1]}). "
                     f"See also [a related page]({off_by_one(hits[2])}).")


# --- the replies, one builder per wire format -----------------------------------------------------------------------

def chat_reply(move: Move, n: int, model: str) -> dict:
    message: dict[str, Any] = {"role": "assistant", "content": move.text or None, "refusal": None}
    if move.call:
        message["tool_calls"] = [{"id": f"call_{n}", "type": "function",
                                  "function": {"name": move.call[0], "arguments": json.dumps(move.call[1])}}]
    return {"id": f"chatcmpl-{n}", "object": "chat.completion", "created": 1767225600, "model": model,
            "choices": [{"index": 0, "message": message, "logprobs": None,
                         "finish_reason": "tool_calls" if move.call else "stop"}],
            "usage": {"prompt_tokens": 150, "completion_tokens": 35, "total_tokens": 185}}


def responses_reply(move: Move, n: int, model: str) -> dict:
    if move.call:
        item = {"type": "function_call", "id": f"fc_{n}", "call_id": f"call_{n}", "name": move.call[0],
                "arguments": json.dumps(move.call[1]), "status": "completed"}
    else:
        item = {"type": "message", "id": f"msg_{n}", "role": "assistant", "status": "completed",
                "content": [{"type": "output_text", "text": move.text, "annotations": []}]}
    return {"id": f"resp_{n}", "object": "response", "created_at": 1767225600, "model": model, "status": "completed",
            "output": [item], "parallel_tool_calls": True, "tool_choice": "auto", "tools": [], "error": None,
            "incomplete_details": None, "instructions": None, "metadata": {}, "temperature": 1.0, "top_p": 1.0,
            "usage": {"input_tokens": 150, "output_tokens": 35, "total_tokens": 185,
                      "input_tokens_details": {"cached_tokens": 0}, "output_tokens_details": {"reasoning_tokens": 0}}}


def anthropic_reply(move: Move, n: int, model: str) -> dict:
    block = ({"type": "tool_use", "id": f"toolu_{n}", "name": move.call[0], "input": move.call[1]} if move.call
             else {"type": "text", "text": move.text})
    return {"id": f"msg_{n}", "type": "message", "role": "assistant", "model": model, "content": [block],
            "stop_reason": "tool_use" if move.call else "end_turn", "stop_sequence": None,
            "usage": {"input_tokens": 150, "output_tokens": 35}}


def gemini_reply(move: Move, n: int, model: str) -> dict:
    part = {"functionCall": {"name": move.call[0], "args": move.call[1]}} if move.call else {"text": move.text}
    return {"candidates": [{"content": {"role": "model", "parts": [part]}, "finishReason": "STOP", "index": 0}],
            "usageMetadata": {"promptTokenCount": 150, "candidatesTokenCount": 35, "totalTokenCount": 185},
            "modelVersion": model, "responseId": f"resp-{n}"}


REPLIES = {"chat": chat_reply, "responses": responses_reply, "anthropic": anthropic_reply, "gemini": gemini_reply}


@dataclass
class Exchange:
    """One request the model received and what it did."""

    path: str
    said: Said
    move: Move


@dataclass
class WireModel(LoopbackServer):
    """The policy model on a loopback port (`url`); `exchanges` records every request and reply, in order."""

    model: str = "loop-model"
    exchanges: list[Exchange] = field(default_factory=list)

    def __post_init__(self):
        self._lock = threading.Lock()
        server = self

        class Handler(QuietHandler):
            def do_POST(self):
                body = self.json_body()
                try:
                    said = parse(self.path.split("?")[0], body)
                except ValueError as exc:
                    return send(self, 404, json.dumps({"error": {"message": str(exc)}}).encode())
                move = decide(said)
                with server._lock:
                    server.exchanges.append(Exchange(self.path, said, move))
                    n = len(server.exchanges)
                send(self, 200, json.dumps(REPLIES[said.wire](move, n, server.model)).encode())

        self._serve(Handler)

    def since(self, start: int) -> list[Exchange]:
        with self._lock:
            return list(self.exchanges[start:])
