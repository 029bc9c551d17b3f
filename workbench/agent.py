"""The agent loop (tool calling) and excerpt mode (single shot). Both return a `TurnRecord`.

The loop owns recording: every tool call's explicit return value goes into the record, and any
provider failure ends the turn with a status and a message instead of an exception.

Progress: `run_turn(observe=…)` is called with a `StepEvent` as each model call and each tool call
starts, and as each model call ends (with the turn's tokens so far). It reports what the loop really
does (a batch over a slow local model shows it, `batch.run_eval`); it never changes the turn, and an
observer that fails is ignored (a progress display must not cost the answer).
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import Any, Callable

from .config import DEFAULT_K, DEFAULT_MODE
from .errors import ProviderError, UnknownNameError
from .prompts import AGENT_PROMPT_VERSION, EXCERPTS_PROMPT_VERSION, PROMPTS, excerpt_header
from .providers import steps
from .providers.base import Provider
from .retries import turn_clock
from .redact import scrub_secrets
from .text import estimate_tokens
from .tools import Room, Toolbox
from .context_policy import MESSAGE_TOKENS, fit_history, messages_tokens, token_budget
from .types import MODES, TRUNCATED, ContextPolicy, Excerpt, HistoryTurn, ModelCall, ToolCall, TurnRecord

MAX_STEPS = 8
#: Tokens kept for the model's answer when its provider states no output limit (`max_tokens`), and the largest share
#: of the context kept for it whatever the limit (a limit near the whole context would leave no room for a result).
DEFAULT_OUTPUT_TOKENS, MAX_OUTPUT_SHARE = 512, 0.25
#: The share of the room left when a turn starts that one page of a listing, or one part of a document, may fill:
#: a listing page and a document part fit together, with the answer after them.
PAGE_SHARE = 0.4
#: The smallest page (tokens), however little room is left.
MIN_PAGE_TOKENS = 200
#: The share of the context a request's estimate keeps free besides: the chat template's own tokens (role markers,
#: tool declarations as the model's template writes them).
MARGIN_SHARE = 1 / 16


@dataclass(frozen=True)
class StepEvent:
    """What a turn is doing now: `kind` is `model_call` (model call number `step` starts), `model_done`
    (it ended) or `tool_call` (tool `tool`, asked for by model call `step`, starts). `tokens_in` and
    `tokens_out` are the turn's tokens so far (the model calls that ended, as their providers counted)."""

    kind: str
    step: int
    tool: str | None = None
    tokens_in: int = 0
    tokens_out: int = 0


Observer = Callable[[StepEvent], None]


def run_turn(question: str, provider: Provider, toolbox: Toolbox, *, mode: str = DEFAULT_MODE, k: int = DEFAULT_K,
             max_steps: int = MAX_STEPS, config: dict[str, Any] | None = None,
             tool_protocol: str | None = None, observe: Observer | None = None,
             history: tuple[HistoryTurn, ...] = (), conversation_id: str | None = None,
             position: int | None = None, context: ContextPolicy | None = None) -> TurnRecord:
    """Answer `question` in `mode` ("agent" or "excerpts") and return everything the turn did.

    `tool_protocol` ("native" or "json-steps", default: the provider's `default_tool_protocol`) is how
    an agent turn's model calls tools (`providers/steps.py`); it is recorded in the configuration and
    nowhere else. Excerpt mode offers no tools, so its `tool_protocol` is None. A protocol the provider
    does not support is refused (`CapabilityError`) before the turn starts. `observe` gets a `StepEvent`
    at each step (see the module docstring).

    `history` (docs/design.md §11) is the earlier turns of a conversation in their context states
    (`context_policy.history_for`); the model receives them as chat messages before the question
    (`history_messages`), and the record keeps them with `conversation_id` and `position`. With the
    conversation's `context` policy, the history is first fitted to its token budget (`fit_history`: the
    oldest turns are dropped first), the record keeps each turn's state after that, and the configuration
    records the policy with the budget and context it worked with; a history that cannot fit ends the turn
    with status `context_overflow` before any model call.
    """
    if mode not in MODES:
        raise UnknownNameError("mode", mode, list(MODES))
    if mode == "agent":
        protocol = steps.resolve(provider, tool_protocol)
    else:
        steps.check_name(tool_protocol)
        protocol = None
    started = datetime.now(timezone.utc).isoformat(timespec="milliseconds")
    t0 = time.perf_counter()
    prompt_version = AGENT_PROMPT_VERSION if mode == "agent" else EXCERPTS_PROMPT_VERSION
    cfg = {"provider": provider.name, "model": provider.model, "retriever": getattr(toolbox.retriever, "name", None),
           "mode": mode, "tool_protocol": protocol, "k": k, "prompt_version": prompt_version,
           "corpus_id": toolbox.corpus.corpus_id, "corpus_hash": toolbox.corpus.content_hash, **(config or {})}
    state = _Turn(observe)
    # the run's k is what `search` returns unless the model asks for another number; an earlier turn's call that
    # named no number runs again with this turn's (the same k, unless the conversation changed it)
    toolbox = toolbox.searching(k) if mode == "agent" else toolbox
    try:
        with turn_clock():  # a network provider's time budget counts the whole turn (docs/security.md)
            render = _Rendered(toolbox)  # each earlier turn's messages, built once (its tool calls run again)
            budget = _Budget(provider, toolbox.specs() if mode == "agent" else [], cfg)
            if context is not None:
                history = _fit(question, history, context, budget.window, render, cfg)
            carried = [m for h in history for m in render.messages(h)]
            if mode == "agent":
                driver = steps.JsonSteps(provider, max_steps) if protocol == steps.JSON_STEPS else provider
                _agent_loop(question, driver, toolbox, max_steps, state, carried, budget)
            else:
                _excerpt_turn(question, provider, toolbox, k, state, history, carried, budget)
            _check_cut_off(provider, state)
    except ProviderError as exc:
        state.status, state.error = exc.status, str(exc)
        if isinstance(exc, _Overflow):
            history = exc.history
        if exc.call is not None:  # the failed call's latency and retries
            state.model_calls.append(exc.call)
    except Exception as exc:  # a provider bug must not crash the CLI or the app (nor leak a URL's password)
        state.status, state.error = "provider_error", scrub_secrets(f"{type(exc).__name__}: {exc}")
    return TurnRecord(
        question=question, answer=state.answer, mode=mode, tool_calls=tuple(state.tool_calls),
        excerpts=tuple(state.excerpts), turn_id=uuid.uuid4().hex, status=state.status, error=state.error,
        model_calls=tuple(state.model_calls), config=cfg, started_at=started,
        latency_ms=round((time.perf_counter() - t0) * 1000, 3), history=tuple(history),
        conversation_id=conversation_id, position=position,
    )


class _Turn:
    def __init__(self, observe: Observer | None = None):
        self.observe = observe
        self.answer = ""
        self.status = "ok"
        self.error: str | None = None
        self.tool_calls: list[ToolCall] = []
        self.excerpts: list[Excerpt] = []
        self.model_calls: list[ModelCall] = []

    def emit(self, kind: str, tool: str | None = None) -> None:
        if self.observe is None:
            return
        calls = self.model_calls
        step = len(calls) + (kind == "model_call")
        try:
            self.observe(StepEvent(kind, step, tool, sum(c.tokens_in or 0 for c in calls),
                                   sum(c.tokens_out or 0 for c in calls)))
        except Exception:  # noqa: BLE001 - a failing progress display (e.g. a closed stderr) must not end the turn
            pass

    def add_call(self, call: ModelCall) -> None:
        self.model_calls.append(call)
        self.emit("model_done")


class _Rendered:
    """`turn_messages` of each earlier turn in each state, built once per turn: fitting the history to its budget
    and sending it use the same messages, and a carried tool call runs again only once."""

    def __init__(self, toolbox: Toolbox):
        self.toolbox = toolbox
        self._done: dict[tuple[Any, ...], tuple[list[dict[str, Any]], int]] = {}

    def _get(self, h: HistoryTurn) -> tuple[list[dict[str, Any]], int]:
        key = (h.record.turn_id, h.position, h.record.question, h.context)
        if key not in self._done:
            messages = turn_messages(h, self.toolbox)
            self._done[key] = (messages, messages_tokens(messages))
        return self._done[key]

    def messages(self, h: HistoryTurn) -> list[dict[str, Any]]:
        return self._get(h)[0]

    def tokens(self, h: HistoryTurn) -> int:
        return self._get(h)[1]


class _Budget:
    """The model's context as one turn spends it (docs/design.md, "Results that fit").

    Known from `Provider.context_info` (recorded in `cfg["context_window"]` with where the figure came from), it
    gives each tool result its `Room` (`room`: the context minus the messages so far, the tool declarations, a
    margin and the answer's tokens) and refuses to send a request that cannot fit (`check`). An unknown context
    (the offline agent) refuses nothing and leaves results whole."""

    def __init__(self, provider: Provider, specs: list[dict[str, Any]], cfg: dict[str, Any]):
        info = provider.context_info()
        self.window = info.tokens
        self.provider = provider
        self.tools = estimate_tokens(json.dumps(specs, ensure_ascii=False)) if specs else 0
        limit = getattr(provider, "max_tokens", None)
        self.output = self.margin = 0
        self.page_tokens: int | None = None
        self.cfg = cfg["context_window"] = {"tokens": info.tokens, "source": info.source}
        if self.window:
            self.output = min(int(limit) if limit else DEFAULT_OUTPUT_TOKENS, int(self.window * MAX_OUTPUT_SHARE))
            self.margin = int(self.window * MARGIN_SHARE)
            self.cfg["output_tokens"] = self.output

    def prompt_tokens(self, messages: list[dict[str, Any]]) -> int:
        """The request's tokens as the budget counts them: messages, tool declarations and the margin."""
        return messages_tokens(messages) + self.tools + self.margin

    def room(self, messages: list[dict[str, Any]]) -> Room | None:
        """The room of the next tool result after `messages`; the turn's page size is set by its first result."""
        if not self.window:
            return None
        left = self.window - self.prompt_tokens(messages) - self.output - MESSAGE_TOKENS
        if self.page_tokens is None:
            # not in the configuration (it keys the run, and the page size differs by question): in each `Cut`
            self.page_tokens = max(MIN_PAGE_TOKENS, int(left * PAGE_SHARE))
        return Room(left, self.page_tokens)

    def check(self, messages: list[dict[str, Any]]) -> None:
        """Raise the `context_overflow` that ends the turn when the request for `messages` cannot fit: it is not sent."""
        if not self.window:
            return
        need = self.prompt_tokens(messages)
        if need > self.window:
            hint = getattr(self.provider, "context_hint", "use a model with a longer context")
            raise ProviderError(f"the request (about {need:,} tokens) does not fit the model's context of "
                                f"{self.window:,} tokens ({self.cfg['source']}), so it was not sent; lower k, start a "
                                f"new conversation, or {hint}", status="context_overflow")


def _check_cut_off(provider: Provider, state: "_Turn") -> None:
    """An answer cut off at the output token limit ends `truncated` (docs/providers.md, "Faults"); it is kept."""
    last = state.model_calls[-1] if state.model_calls else None
    if state.status != "ok" or last is None or last.finish_reason not in steps.TOKEN_LIMIT_REASONS:
        return
    hint = getattr(provider, "token_limit_hint", "raise the provider's output token limit")
    state.status = TRUNCATED
    state.error = (f"the answer was cut off at the model's output token limit "
                   f"({last.tokens_out if last.tokens_out is not None else '?'} tokens): {hint}")


def _fit(question: str, history: tuple[HistoryTurn, ...], policy: ContextPolicy, window: int | None,
         render: _Rendered, cfg: dict[str, Any]) -> tuple[HistoryTurn, ...]:
    """`history` fitted to the policy's token budget (`context_policy.fit_history`), the policy, budget and context
    recorded in `cfg["context"]`; raises the `context_overflow` that ends the turn, after `run_turn` has the
    fitted history to record (it is returned through the exception's `history`)."""
    budget = token_budget(policy, window)
    cfg["context"] = {**policy.to_dict(), "budget_tokens": budget, "context_tokens": window}
    fit = fit_history(history, question, budget, window, render.tokens)
    if fit.overflow:
        raise _Overflow(fit.overflow, fit.history)
    return fit.history


class _Overflow(ProviderError):
    def __init__(self, message: str, history: tuple[HistoryTurn, ...]):
        super().__init__(message, status="context_overflow")
        self.history = history


def history_messages(history: tuple[HistoryTurn, ...], toolbox: Toolbox) -> list[dict[str, Any]]:
    """The earlier turns of a conversation as provider-neutral chat messages (docs/design.md §11): each
    turn not `dropped` gives its question and answer; a `full` turn also gives its tool calls, model step by
    model step as the turn made them (`HistoryTurn.steps`): the step's assistant message with its calls, then
    one `tool` message per call, whose result is the tool's output again (so a toolbox that withholds a
    document carries "not found" for it); in excerpt mode, the excerpts it was given. A turn renders exactly
    as its own last model call saw it, so a model that caches prompts (llama.cpp) finds the prefix it has."""
    return [m for h in history for m in turn_messages(h, toolbox)]


def turn_messages(h: HistoryTurn, toolbox: Toolbox) -> list[dict[str, Any]]:
    """One earlier turn's messages in its context state (`history_messages`); none when `dropped`."""
    if h.context == "dropped":
        return []
    full, record = h.context == "full", h.record
    out: list[dict[str, Any]] = []
    if full and record.mode == "excerpts":
        out.append({"role": "user", "content": excerpt_message(record.question, list(record.excerpts))})
    else:
        out.append({"role": "user", "content": record.question})
    if full:
        calls = [(c.call_id or f"h{h.position}-{i}", c) for i, c in enumerate(record.tool_calls)]
        for step in _steps(h):
            made, calls = calls[:step], calls[step:]
            out.append({"role": "assistant", "content": "",
                        "tool_calls": [{"id": i, "name": c.name, "args": dict(c.args)} for i, c in made]})
            for i, c in made:
                content = ({"error": c.error} if c.error else
                           toolbox.call(c.name, dict(c.args), i, Room.again(c.cut)).content)
                out.append({"role": "tool", "tool_call_id": i, "name": c.name,
                            "content": json.dumps(content, ensure_ascii=False)})
    out.append({"role": "assistant", "content": record.answer})
    return out


def _steps(h: HistoryTurn) -> list[int]:
    """How many tool calls each model step of `h` made: `h.steps` when it accounts for every call, else one each."""
    if h.steps and all(n > 0 for n in h.steps) and sum(h.steps) == len(h.record.tool_calls):
        return list(h.steps)
    return [1] * len(h.record.tool_calls)


def _agent_loop(question: str, provider: Provider, toolbox: Toolbox, max_steps: int, state: _Turn,
                carried: list[dict[str, Any]], budget: _Budget) -> None:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": PROMPTS[AGENT_PROMPT_VERSION]},
        *carried,
        {"role": "user", "content": question},
    ]
    specs = toolbox.specs()
    for _ in range(max_steps):
        budget.check(messages)
        state.emit("model_call")
        step = provider.complete(messages, specs)
        # how many tool calls this step asked for: what places each call among the tool calls (trace spans)
        state.add_call(replace(step.call, n_tool_calls=len(step.tool_calls)))
        if not step.tool_calls:
            state.answer = step.text or ""
            return
        messages.append({"role": "assistant", "content": step.text or "",
                         "tool_calls": [{"id": r.id, "name": r.name, "args": r.args or {}} for r in step.tool_calls]})
        for req in step.tool_calls:
            state.emit("tool_call", req.name)
            room = budget.room(messages)
            if req.args is None:
                output = toolbox.call(req.name, req.raw_args if req.raw_args is not None else "", req.id, room)
            else:
                output = toolbox.call(req.name, req.args, req.id, room)
            state.tool_calls.append(output.call)
            messages.append({"role": "tool", "tool_call_id": req.id, "name": req.name,
                             "content": json.dumps(output.content, ensure_ascii=False)})
    state.status = "step_limit"
    state.error = f"the model was still calling tools after {max_steps} steps; the turn was stopped"


def build_excerpts(toolbox: Toolbox, question: str, k: int, first: int = 1) -> list[Excerpt]:
    """The top-`k` chunks as excerpts numbered from `first`; every one is retrieved with exposure `snippet`."""
    retrieval = toolbox.retriever.retrieve(question, k)
    out = []
    for n, hit in enumerate(retrieval.hits, start=first):
        doc = toolbox.corpus.get(hit.chunk.doc_id)
        out.append(Excerpt(n=n, doc_id=doc.doc_id, chunk_index=hit.chunk.chunk_index, page=hit.chunk.page,
                           score=round(hit.score, 4), text=hit.chunk.text, chunk_type=hit.chunk.chunk_type,
                           artifact_kind=hit.chunk.artifact_kind, title=doc.title, url=doc.url,
                           file_name=doc.file_name))
    return out


def excerpt_message(question: str, excerpts: list[Excerpt]) -> str:
    blocks = [f"{excerpt_header(e.n, e.file_name, e.page, e.chunk_index)}\n{e.text}" for e in excerpts]
    body = "\n\n".join(blocks) if blocks else "(no excerpts were found)"
    return f"Question: {question}\n\nExcerpts:\n\n{body}"


def _excerpt_turn(question: str, provider: Provider, toolbox: Toolbox, k: int, state: _Turn,
                  history: tuple[HistoryTurn, ...], carried: list[dict[str, Any]], budget: _Budget) -> None:
    # excerpt numbers are unique within a conversation: this turn continues after the last one issued
    first = 1 + max((e.n for h in history for e in h.record.excerpts), default=0)
    state.excerpts = build_excerpts(toolbox, question, k, first)
    messages = [
        {"role": "system", "content": PROMPTS[EXCERPTS_PROMPT_VERSION]},
        *carried,
        {"role": "user", "content": excerpt_message(question, state.excerpts)},
    ]
    budget.check(messages)
    state.emit("model_call")
    step = provider.complete(messages, [])
    state.add_call(step.call)
    state.answer = step.text or ""
