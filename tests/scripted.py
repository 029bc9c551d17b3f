"""Scripted providers whose dependence on the documents is known, for verification by ablation.

Each is an ordinary `Provider` over the demo corpus (no model): it searches the question, opens one
document, and answers from it in a known way. `register()` registers them through `register_provider`,
the hook any plug-in uses (the CLI test loads this module with WORKBENCH_PLUGINS), and `unregister()`
takes them away again; nothing in the workbench knows their names.

- `OnlyFrom` answers only from `sso-okta` (it opens it and quotes it) and adds a "Related:" line linking
  the first two other search hits: `sso-okta` is load-bearing, the two linked ones decorative.
- `Copier` answers from `sso-saml-setup`, which it cites, and copies the first sentence of the snippet
  of `sso-okta`, which it never cites: `sso-okta` is a hidden influence.
- `Random` answers with words drawn at random on every call: its control never reproduces the answer.
- `Sampler` is `OnlyFrom` with `temperature` and `seed` options marked `x-reproducible` (and a `style`
  option that is not), and records every set of options it is built with, so a test can see what the
  turn and its re-runs were pinned to.
- `FailsWithout` is `OnlyFrom` that fails (a provider error) whenever `sso-okta` is not among its hits.
- `Slow` is `OnlyFrom` taking `delay` seconds (option, default 0.2) per model call, or waiting for a `gate` file: a
  slow local model, for the progress and the Cancel button of the compare page (a test that needs it slower than
  the run takes waits on the gate, a condition, not on a longer delay).
"""

from __future__ import annotations

import json
import random
import re
import time
from pathlib import Path
from typing import Any

from workbench.errors import ProviderError
from workbench.providers.base import ModelStep, Provider, ToolRequest, _PROVIDERS, register_provider
from workbench.types import ModelCall

QUESTION = "How do I configure SSO?"
VOCABULARY = ("workspace member invoice export token webhook project billing owner guest calendar folder "
              "report timezone sprint comment archive label filter dashboard").split()


def _sentences(text: str, n: int) -> str:
    lines = [line for line in text.splitlines() if line.strip() and not line.lstrip().startswith(("#", "|", ">"))]
    body = " ".join(lines)
    return " ".join(re.split(r"(?<=[.!?])\s+", body)[:n])


class _Scripted(Provider):
    source = "sso-okta"  # the document it opens and answers from

    def call(self) -> ModelCall:
        return ModelCall(self.name, self.model or "v1", 1.0, 10, 5, "stop")

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> ModelStep:
        question = next(m["content"] for m in messages if m["role"] == "user")
        results = [json.loads(m["content"]) for m in messages if m["role"] == "tool"]
        if not results:
            return ModelStep("", (ToolRequest("s1", "search", {"query": question, "k": 5}),), self.call())
        hits = results[0].get("results", [])
        if len(results) == 1:
            return ModelStep("", (ToolRequest("s2", "fetch_document", {"doc_id": self.source}),), self.call())
        return ModelStep(self.answer(hits, results[1]), (), self.call())

    def answer(self, hits: list[dict[str, Any]], opened: dict[str, Any]) -> str:
        if "error" in opened:
            return "I could not find anything about this in the knowledge base."
        return f"From [{opened['title']}]({opened['url']}):\n\n{_sentences(opened['text'], 3)}"


class OnlyFrom(_Scripted):
    name = "scripted-only-from"
    label = "scripted only-from (test)"

    def answer(self, hits, opened):
        others = [h for h in hits if h["doc_id"] != self.source][:2]
        related = " · ".join(f"[{h['title']}]({h['url']})" for h in others)
        return super().answer(hits, opened) + (f"\n\nRelated: {related}" if "error" not in opened else "")


class Copier(_Scripted):
    name = "scripted-copier"
    label = "scripted copier (test)"
    source = "sso-saml-setup"
    copied = "sso-okta"

    def answer(self, hits, opened):
        snippet = next((h["snippet"] for h in hits if h["doc_id"] == self.copied), "")
        return super().answer(hits, opened) + (f"\n\n{_sentences(snippet, 1)}" if snippet else "")


class Random(_Scripted):
    name = "scripted-random"
    label = "scripted random (test)"

    def answer(self, hits, opened):
        rng = random.Random()  # seeded from the OS: a different answer on every call
        return " ".join(rng.choice(VOCABULARY) for _ in range(30)) + "."


class Sampler(OnlyFrom):
    name = "scripted-sampler"
    label = "scripted sampler (test)"
    options_schema = {"type": "object", "additionalProperties": False, "properties": {
        "temperature": {"type": "number", "minimum": 0, "x-reproducible": 0.0},
        "seed": {"type": "integer", "x-reproducible": 0}, "style": {"type": "string"}}}
    built: list[dict[str, Any]] = []

    def __init__(self, model=None, **options):
        super().__init__(model, **options)
        Sampler.built.append(dict(options))


class FailsWithout(OnlyFrom):
    name = "scripted-fails"
    label = "scripted fails (test)"

    def answer(self, hits, opened):
        if "error" in opened:
            raise ProviderError("the scripted server went away", status="provider_error")
        return super().answer(hits, opened)


class Slow(OnlyFrom):
    name = "scripted-slow"
    label = "scripted slow (test)"
    options_schema = {"type": "object", "additionalProperties": False, "properties": {
        "delay": {"type": "number", "minimum": 0.0, "default": 0.2, "title": "Delay per model call (s)"},
        "gate": {"type": "string", "title": "Wait for this file before each call"}}}

    def complete(self, messages, tools):
        if self.options.get("gate"):  # a test's condition, not a guess at how slow is slow enough
            _wait_for(Path(self.options["gate"]))
        else:
            time.sleep(float(self.options.get("delay", 0.2)))
        return super().complete(messages, tools)


def _wait_for(gate: Path, bound: float = 300.0) -> None:
    """Wait until the test creates `gate` (checked every 20 ms); a test that never opens it fails within `bound`.
    `<gate>.held` says a call is waiting (a test waits for it before acting "while the answer is written")."""
    Path(f"{gate}.held").touch()
    deadline = time.monotonic() + bound
    while not gate.exists():
        if time.monotonic() > deadline:
            raise ProviderError(f"the test never opened the gate {gate}", status="provider_error")
        time.sleep(0.02)


PROVIDERS = (OnlyFrom, Copier, Random, Sampler, FailsWithout, Slow)


def register() -> None:
    for cls in PROVIDERS:
        register_provider(cls.name, cls)


def unregister() -> None:
    for cls in PROVIDERS:
        _PROVIDERS.unregister(cls.name)


register()  # imported as a WORKBENCH_PLUGINS module, it registers like any plug-in
