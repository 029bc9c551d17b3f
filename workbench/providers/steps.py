"""Tool protocols: how an agent turn's model asks for tools (docs/design.md §7).

- `native`: the provider's own tool calling (`Provider.complete(messages, tools)`).
- `json-steps`: every model output is forced by a JSON Schema to be exactly one action,
  `{"action": "<tool>", …its arguments}` or `{"action": "answer", "answer": "…"}`. Small local models
  rarely call tools natively but choose well when their output is schema-forced. The action becomes
  the same `ToolRequest` a native call would, so the agent loop runs, records and feeds back the tool
  exactly as before: provenance and the trace cannot tell the protocols apart; only the run
  configuration's `tool_protocol` says which one ran.

json-steps is written once, here, for every provider that declares `supports_json_schema`; a
provider supplies only `complete_json(messages, schema)` (its constrained-completion call).

How a turn goes, and why:
- The system prompt gains the step instructions: the actions, built from the tool specs.
- A step the model took goes back as the assistant's JSON; its tool result as a user message
  `Result of <tool>:` + the tool's JSON output. Every chat model understands these two roles,
  whether or not its template knows tool messages.
- A conversation's earlier turns (docs/design.md §11) go first in the same shape: their steps as the
  assistant's JSON and results, their answers as the `answer` action that gave them. The rules below
  count only this turn's steps (those after its question).
- The first step must be a tool action (no `answer`): a help-center answer has to look before it
  speaks, and small models otherwise answer from memory. The last step the loop allows must be the
  answer, so a model that keeps searching still ends with an answer instead of `step_limit`.
- The same call twice returns the same result, and small models repeat a call until the step limit
  (measured with SmolLM2-135M: `list_categories` seven times). So a tool already called without
  arguments is offered again only with its arguments, and a tool that has none is not offered again;
  once the model repeats a call exactly (same tool, same arguments), its next step must be the answer.
- A step cut off at the token limit is invalid JSON: the turn ends with status `truncated`. A step
  that is not one JSON action (a server that did not enforce the schema) ends it with `bad_step`.
  A well-formed action naming an unknown tool or wrong arguments is a tool error the model sees,
  as with native calls.
"""

from __future__ import annotations

import json
from typing import Any

from ..errors import CapabilityError, ProviderError, UnknownNameError
from ..types import MODES
from .base import ModelStep, Provider, ToolRequest, declared, this_turn

NATIVE, JSON_STEPS = "native", "json-steps"
TOOL_PROTOCOLS = (NATIVE, JSON_STEPS)
ANSWER = "answer"
#: A tool argument is a query, an id, a URL or a category: a forced step caps its strings, so a small model
#: that repeats itself inside an argument ends the string instead of the turn's token budget.
ARG_MAX_CHARS = 200
#: A step is forced to fit the provider's output token budget (`max_tokens`), so it always closes: its strings are
#: capped by what the budget leaves after the JSON around them (`bounded`), counting one token per character
#: (no token of plain ASCII text is shorter than one character; an escape or a non-ASCII character can take
#: more tokens than characters); integers by `STEP_INT_MAX`, arrays by `STEP_MAX_ITEMS`. The JSON around the strings
#: is counted with `STEP_GAP_CHARS` of whitespace at each place the grammar allows some (llama.cpp's grammar
#: allows a newline and up to 20 spaces or tabs).
STEP_INT_MAX = 999
STEP_MAX_ITEMS = 8
STEP_GAP_CHARS = 22
#: Optional arguments are left out of a step while its strings would get fewer characters each than this, and no
#: string gets fewer: below a budget of about 280 tokens a step is no longer sure to close (it can end `truncated`).
STEP_MIN_CHARS = 64
#: Finish reasons that mean the output hit the token limit (OpenAI, llama.cpp and Ollama say "length").
TOKEN_LIMIT_REASONS = frozenset({"length", "max_tokens", "MAX_TOKENS"})

STEP_INSTRUCTIONS = """\
Reply with exactly one JSON object per message: your next action.
- To use a tool: {{"action": "<tool name>", <its arguments>}}.
- To answer: {{"action": "answer", "answer": "<your answer in markdown>"}}. Cite every document you used as a \
markdown link [title](url) with the url exactly as a tool result gave it.
After each action you get its result in a message that starts with "Result of <tool name>:".
Look things up before you answer: search for the question's topic, then fetch_document the best result; \
list only when asked what the knowledge base contains. Tools:
{tools}"""


def runs_agent_mode(supports_tools: bool, supports_json_schema: bool) -> bool:
    """The agent-mode rule, stated once: agent mode needs native tool calling or output forced by a JSON
    schema (the json-steps protocol); a provider with neither can answer only in excerpt mode."""
    return bool(supports_tools or supports_json_schema)


def supported_modes(name: str) -> tuple[str, ...]:
    """The modes the registered provider `name` can run, from what it declares (pickers offer these)."""
    if runs_agent_mode(declared(name, "supports_tools"), declared(name, "supports_json_schema")):
        return MODES
    return tuple(m for m in MODES if m != "agent")


def supported_protocols(name: str) -> list[str]:
    """The tool protocols the registered provider `name` declares what it needs for."""
    return [p for p, cap in ((NATIVE, "supports_tools"), (JSON_STEPS, "supports_json_schema")) if declared(name, cap)]


def resolve(provider: Provider, requested: str | None) -> str:
    """The protocol an agent turn with `provider` uses: `requested`, else the provider's default.

    Refused (CapabilityError) when the provider does not declare what the protocol needs.
    """
    if not runs_agent_mode(provider.supports_tools, provider.supports_json_schema):
        raise CapabilityError(f"provider {provider.name!r} can neither call tools nor answer in a JSON schema, so "
                              "it cannot run agent mode: use excerpt mode (mode `excerpts`)")
    protocol = requested or provider.default_tool_protocol
    check_name(protocol)
    if protocol == JSON_STEPS and not provider.supports_json_schema:
        raise CapabilityError(f"provider {provider.name!r} cannot force its output to a JSON schema, so it cannot "
                              f"run the `{JSON_STEPS}` tool protocol; use the `{NATIVE}` one")
    if protocol == NATIVE and not provider.supports_tools:
        other = (f"the `{JSON_STEPS}` tool protocol" if provider.supports_json_schema
                 else "excerpt mode (mode `excerpts`)")
        raise CapabilityError(f"provider {provider.name!r} does not support native tool calling; use {other}")
    return protocol


def check_name(requested: str | None) -> None:
    """Excerpt mode offers no tools, so no protocol applies; a misspelt name is still an error."""
    if requested is not None and requested not in TOOL_PROTOCOLS:
        raise UnknownNameError("tool protocol", requested, TOOL_PROTOCOLS)


def action_schema(specs: list[dict[str, Any]], *, tools: bool = True, answer: bool = True,
                  budget: int | None = None) -> dict[str, Any]:
    """The JSON Schema of one step: any tool of `specs` with its own arguments, and/or the answer; with the
    provider's output token `budget`, every variant bounded so that a step always closes within it (`bounded`)."""
    variants = []
    if tools:
        for spec in specs:
            params = spec.get("parameters") or {}
            props = {name: ({**p, "maxLength": ARG_MAX_CHARS} if p.get("type") == "string" and "maxLength" not in p
                            else p) for name, p in params.get("properties", {}).items()}
            variants.append({"type": "object",
                             "properties": {"action": {"const": spec["name"]}, **props},
                             "required": ["action", *params.get("required", [])],
                             "additionalProperties": False})
    if answer:
        variants.append({"type": "object",
                         "properties": {"action": {"const": ANSWER}, ANSWER: {"type": "string"}},
                         "required": ["action", ANSWER], "additionalProperties": False})
    if budget is not None:
        variants = [bounded(v, budget) for v in variants]
    return variants[0] if len(variants) == 1 else {"anyOf": variants}


def _skeleton_chars(props: dict[str, Any]) -> int:
    """The characters of a step around its strings' contents: keys, constants, punctuation, the longest integers and
    the most whitespace the grammar allows (after "{", each key, colon and comma, and around "}")."""
    chars = 2 + max(0, len(props) - 1) + (3 * len(props) + 2) * STEP_GAP_CHARS  # braces, commas, gaps
    for name, p in props.items():
        chars += len(json.dumps(name)) + 1
        if "const" in p:
            chars += len(json.dumps(p["const"]))
            continue
        array = p.get("type") == "array"
        item, n = (p.get("items") or {}, STEP_MAX_ITEMS) if array else (p, 1)
        one = 2 if item.get("type") == "string" else len(str(-STEP_INT_MAX))
        chars += n * one + (2 + (n - 1) + (n + 1) * STEP_GAP_CHARS if array else 0)
    return chars


def _capped_number(p: dict[str, Any]) -> dict[str, Any]:
    if p.get("type") != "integer":
        return p
    return {**p, "minimum": max(p.get("minimum", 0), -STEP_INT_MAX),
            "maximum": min(p.get("maximum", STEP_INT_MAX), STEP_INT_MAX)}


def _capped_string(p: dict[str, Any], chars: int) -> dict[str, Any]:
    return {**p, "maxLength": min(p.get("maxLength", chars), chars)}


def bounded(variant: dict[str, Any], budget: int) -> dict[str, Any]:
    """`variant` with every string, integer and array capped so that its longest JSON is at most `budget` characters
    (see `STEP_INT_MAX`): the strings (an array of strings counting as one) share what the rest leaves, equally,
    within their own caps; when even the JSON around them does not fit, optional arguments are left out, the last
    first. Anything else (a number, an object) is left as declared."""
    props = {}
    for name, p in variant["properties"].items():
        if p.get("type") == "array":
            p = {**p, "maxItems": min(p.get("maxItems", STEP_MAX_ITEMS), STEP_MAX_ITEMS),
                 "items": _capped_number(p.get("items") or {})}
        props[name] = _capped_number(p)
    optional = [n for n in props if n != "action" and n not in variant.get("required", ())]

    def texts() -> list[str]:
        return [n for n, p in props.items() if "const" not in p and
                (p.get("type") == "string" or (p.get("items") or {}).get("type") == "string")]

    while optional and (budget - _skeleton_chars(props)) < STEP_MIN_CHARS * max(1, len(texts())):
        props.pop(optional.pop())  # too little room for the strings: fewer options, the last first
    texts = texts()
    share = max(STEP_MIN_CHARS, (budget - _skeleton_chars(props)) // max(1, len(texts)))  # a floor, below ~280
    for name in texts:
        p = props[name]
        if p.get("type") == "string":
            props[name] = _capped_string(p, share)
        else:
            props[name] = {**p, "items": _capped_string(p["items"], max(1, share // p["maxItems"]))}
    return {**variant, "properties": props}


#: The arguments that pick a page of a long listing or a part of a long document (tools.py): a bare call repeated
#: with only one of them is a next page, not a repeat, but a call is never forced to name one.
PAGING_ARGS = ("page", "part")


def _not_repeating(specs: list[dict[str, Any]], messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`specs` minus the calls already made without arguments (see the module docstring)."""
    bare = {tc["name"] for m in messages for tc in m.get("tool_calls") or () if not tc.get("args")}
    out = []
    for spec in specs:
        params = spec.get("parameters") or {}
        if spec["name"] not in bare:
            out.append(spec)
        elif params.get("properties"):  # never forced: which page or part of a long result (tools.py)
            forced = [p for p in params["properties"] if p not in PAGING_ARGS]
            if forced:
                out.append({**spec, "parameters": {**params, "required": forced}})
    return out


def instructions(specs: list[dict[str, Any]]) -> str:
    lines = []
    for spec in specs:
        props = (spec.get("parameters") or {}).get("properties", {})
        required = set((spec.get("parameters") or {}).get("required", []))
        args = ", ".join(f"{name}{'' if name in required else '?'}: {p.get('type', 'any')}"
                         for name, p in props.items())
        lines.append(f"- {spec['name']}({args}): {spec.get('description', '')}")
    return STEP_INSTRUCTIONS.format(tools="\n".join(lines))


def step_text(name: str, args: dict[str, Any] | None) -> str:
    """A step the model took, as the JSON it wrote (replayed as the assistant's message)."""
    return json.dumps({"action": name, **(args or {})}, ensure_ascii=False)


def to_step_messages(messages: list[dict[str, Any]], specs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Provider-neutral messages with tool calls → plain chat messages for the step protocol."""
    out: list[dict[str, Any]] = []
    for m in messages:
        role = m["role"]
        if role == "system":
            out.append({"role": "system", "content": f"{m.get('content') or ''}\n\n{instructions(specs)}"})
        elif role == "assistant" and m.get("tool_calls"):
            out.append({"role": "assistant", "content": "\n".join(step_text(tc["name"], tc.get("args"))
                                                                   for tc in m["tool_calls"])})
        elif role == "tool":
            out.append({"role": "user", "content": f"Result of {m.get('name')}:\n{m.get('content') or ''}"})
        elif role == "assistant":  # an earlier turn's answer: the action that gave it
            out.append({"role": "assistant", "content": step_text(ANSWER, {ANSWER: m.get("content") or ""})})
        else:
            out.append({"role": role, "content": m.get("content") or ""})
    return out


class JsonSteps:
    """Drives a JSON-schema-capable provider through `json-steps`, behind the same `complete` the loop calls."""

    def __init__(self, provider: Provider, max_steps: int):
        self.provider = provider
        self.max_steps = max_steps
        self._n = 0

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> ModelStep:
        turn = this_turn(messages)  # the steps of earlier turns (a conversation's history) are theirs
        step_no = 1 + sum(1 for m in turn if m["role"] == "assistant")
        offered = _not_repeating(tools, turn)
        made = [(tc["name"], json.dumps(tc.get("args") or {}, sort_keys=True))
                for m in turn for tc in m.get("tool_calls") or ()]
        may_call = bool(offered) and step_no < self.max_steps and len(made) == len(set(made))
        schema = action_schema(offered, tools=may_call, answer=not may_call or step_no > 1,
                               budget=getattr(self.provider, "max_tokens", None))  # a step closes within it
        out = self.provider.complete_json(to_step_messages(messages, tools), schema)
        return self.parse(out)

    def parse(self, out: ModelStep) -> ModelStep:
        """The forced output as the loop's step: an answer (text) or one tool request."""
        text, call = out.text or "", out.call
        try:
            value = json.loads(text)
        except ValueError:
            value = None
        if not isinstance(value, dict) or not isinstance(value.get("action"), str):
            if call.finish_reason in TOKEN_LIMIT_REASONS:
                hint = getattr(self.provider, "token_limit_hint", "raise the provider's output token limit")
                raise self._fail("truncated", f"the model's step was cut off at the token limit "
                                              f"({call.tokens_out if call.tokens_out is not None else '?'} tokens) "
                                              f"before its JSON was complete: {hint}", call)
            raise self._fail("bad_step", f"the model's output is not one JSON action as the schema demands "
                                         f"(the server may not enforce JSON schemas; try the `{NATIVE}` tool protocol): "
                                         f"{text[:200]!r}", call)
        action = value.pop("action")
        if action == ANSWER and isinstance(value.get(ANSWER), str):
            return ModelStep(value[ANSWER], (), call)
        self._n += 1
        return ModelStep("", (ToolRequest(f"step-{self._n}", action, value),), call)

    @staticmethod
    def _fail(status: str, message: str, call) -> ProviderError:
        return ProviderError(message, status=status, call=call)  # the failed call still counts: latency, tokens
