"""A scripted provider for conversations (docs/design.md §11) whose carried documents are known in advance.

`FollowUp` reads the conversation from the chat messages it is sent, as a real model would:
- the first turn searches its question, opens `sso-okta` and answers from it, citing it;
- the second turn opens `sso-saml-setup` (no search) and answers citing it and, again, `sso-okta`, which only
  turn 1's tool results put in its context: `sso-okta` is carried from turn 1;
- every later turn makes no tool call and cites both documents from the carried tool results: `sso-okta`
  carried from turn 1, `sso-saml-setup` from turn 2.
A citation of a document whose tool result is not in its context (the context policy dropped it) is still
made, by its URL from an earlier answer, so a test can see it rejected as `not_in_context`.
Imported as a WORKBENCH_PLUGINS module (the browser test's app server) or by a test, it registers like any
plug-in; `unregister()` takes it away again.
"""

from __future__ import annotations

import json
import re
from typing import Any

from workbench.providers.base import ModelStep, Provider, ToolRequest, _PROVIDERS, register_provider
from workbench.types import ModelCall

FIRST, SECOND = "sso-okta", "sso-saml-setup"
URLS = {FIRST: "https://help.orbitly.example/articles/sso-okta",
        SECOND: "https://help.orbitly.example/articles/sso-saml-setup"}


def _opened(messages: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """doc_id → the fetched document of every `fetch_document` result in `messages`."""
    out = {}
    for m in messages:
        if m["role"] == "tool":
            try:
                content = json.loads(m["content"])
            except (TypeError, ValueError):
                continue
            if isinstance(content, dict) and content.get("doc_id") and "text" in content:
                out[content["doc_id"]] = content
    return out


def _first_sentence(text: str) -> str:
    body = " ".join(line for line in text.splitlines() if line.strip() and not line.lstrip().startswith(("#", "|", ">")))
    return re.split(r"(?<=[.!?])\s+", body)[0]


class FollowUp(Provider):
    name = "scripted-followup"
    label = "scripted follow-up (test)"

    def call(self) -> ModelCall:
        return ModelCall(self.name, self.model or "v1", 1.0, 10, 5, "stop")

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> ModelStep:
        users = [i for i, m in enumerate(messages) if m["role"] == "user"]
        position, last = len(users), users[-1]
        question = messages[last]["content"]
        this_turn = messages[last + 1:]
        opened = _opened(messages)
        if position == 1 and not this_turn:
            return ModelStep("", (ToolRequest("s1", "search", {"query": question, "k": 5}),), self.call())
        if position == 1 and len(this_turn) == 2:
            return ModelStep("", (ToolRequest("s2", "fetch_document", {"doc_id": FIRST}),), self.call())
        if position == 2 and not this_turn:
            return ModelStep("", (ToolRequest("f1", "fetch_document", {"doc_id": SECOND}),), self.call())
        cited = [FIRST] if position == 1 else [SECOND, FIRST]
        parts = []
        for doc_id in cited:
            doc = opened.get(doc_id)
            if doc is None:  # its tool result is not in the context: cite it by the link an earlier answer gave
                parts.append(f"As said before, see [{doc_id}]({URLS[doc_id]}).")
            else:
                parts.append(f"From [{doc['title']}]({doc['url']}): {_first_sentence(doc['text'])}")
        return ModelStep("\n\n".join(parts), (), self.call())


def register() -> None:
    register_provider(FollowUp.name, FollowUp)


def unregister() -> None:
    _PROVIDERS.unregister(FollowUp.name)


register()  # imported as a WORKBENCH_PLUGINS module, it registers like any plug-in
