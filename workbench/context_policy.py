"""The context policy applied: which of the earlier turns a follow-up's model still has (docs/design.md §11).

Pure functions over `TurnRecord`s. The context policy (`types.ContextPolicy`) puts each earlier turn in
one of three states — `full` (question, answer and tool results), `answer` (question and answer), `dropped`
(nothing) — and the resulting `HistoryTurn`s go into the follow-up's own record, so provenance knows
exactly what was carried and what the policy took away. First the policy's `turns` (`history_for`), then its
token budget (`token_budget`, `fit_history`: the oldest turns lose their place first; docs/providers.md,
"Conversations").
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Callable, Iterable, Sequence, TypeVar

from .text import CHARS_PER_TOKEN, estimate_tokens
from .types import ContextPolicy, HistoryTurn, TurnRecord

R = TypeVar("R")


# --- a conversation's places: one rule, used by the trace store, the session, the app and eval ----------------

def is_history(record: TurnRecord) -> bool:
    """Whether a later turn is asked with `record` in its history: only a turn that answered (`ok`). A failed
    turn is not history (the model never had an answer from it) but keeps its place (`next_position`)."""
    return record.status == "ok"


def history_of(records: Iterable[R], record: Callable[[R], TurnRecord | None] = lambda r: r) -> list[R]:
    """The items of `records` (oldest first) that a follow-up is asked with (`is_history`); `record` gives an
    item's turn record (None: a turn that never ran)."""
    return [r for r in records if (rec := record(r)) is not None and is_history(rec)]


def next_position(taken: Iterable[int | None]) -> int:
    """The place of the next turn of a conversation whose turns so far took the positions `taken`: after every
    one of them, failed turns too (1 for a new conversation)."""
    return 1 + max((p for p in taken if p is not None), default=0)


#: Times a turn is asked again because its conversation moved while it ran (`reask_when_moved`); after that it is
#: written after the turns that landed (docs/security.md: two turns at once need one re-ask, not a loop).
MAX_REASKS = 3


def reask_when_moved(mode: str) -> bool:
    """Whether a turn whose conversation moved while it ran (another turn landed first, docs/design.md,
    "Concurrent turns of one conversation") is asked again with the new history rather than written after it:
    in excerpt mode, whose numbers continue the history's and would repeat the other turn's."""
    return mode == "excerpts"


__all__ = ["CHARS_PER_TOKEN", "estimate_tokens", "messages_tokens", "token_budget", "fit_history", "history_for",
           "history_turn", "Fit", "MESSAGE_TOKENS", "HISTORY_SHARE", "is_history", "history_of",
           "next_position", "MAX_REASKS", "reask_when_moved"]


def history_turn(record: TurnRecord, context: str, position: int) -> HistoryTurn:
    """`record` as an earlier turn of a conversation, in context state `context`, at its own position (else
    `position`)."""
    return HistoryTurn(record=record, context=context, position=record.position or position)  # type: ignore[arg-type]


def history_for(earlier: Sequence[TurnRecord], policy: ContextPolicy) -> tuple[HistoryTurn, ...]:
    """The history of the turn that follows `earlier` (oldest first): the latest `policy.turns` keep their
    tool results, older ones keep question and answer."""
    n = len(earlier)
    return tuple(history_turn(r, "full" if n - i <= policy.turns else "answer", i + 1)
                 for i, r in enumerate(earlier))


# --- the token budget (docs/providers.md, "Conversations") ----------------------------------------------------

#: `CHARS_PER_TOKEN` and `estimate_tokens` (text.py) count the budget: three characters a token over-estimates.
#: Tokens counted per message besides its text: the chat template's role markers.
MESSAGE_TOKENS = 4
#: The share of the model's context a history may fill when the policy states no `token_budget`: the rest is for
#: the system prompt, the tools, the question, this turn's own tool results and its answer.
HISTORY_SHARE = 0.5


def messages_tokens(messages: Sequence[dict]) -> int:
    """Tokens chat `messages` count as: each one's text and tool calls, plus `MESSAGE_TOKENS`."""
    return sum(MESSAGE_TOKENS + estimate_tokens(str(m.get("content") or "")) +
               (estimate_tokens(json.dumps(m["tool_calls"], ensure_ascii=False)) if m.get("tool_calls") else 0)
               for m in messages)


def token_budget(policy: ContextPolicy, context_tokens: int | None) -> int | None:
    """The tokens the history may fill: the policy's `token_budget` when it states one, else `HISTORY_SHARE` of
    the model's context (`Provider.context_window`); None (no budget) when neither is known."""
    if policy.token_budget is not None:
        return policy.token_budget
    return None if context_tokens is None else int(context_tokens * HISTORY_SHARE)


@dataclass(frozen=True)
class Fit:
    """A history fitted to a budget: the turns in their new states, the tokens they count, and why the turn
    cannot run (`overflow`, a message naming the sizes) or None."""

    history: tuple[HistoryTurn, ...]
    tokens: int
    overflow: str | None = None


def fit_history(history: Sequence[HistoryTurn], question: str, budget: int | None, context_tokens: int | None,
                size: Callable[[HistoryTurn], int]) -> Fit:
    """`history` within `budget` tokens, `size(turn)` counting a turn in its state (0 when `dropped`).

    While it does not fit, the oldest turn still in the context loses one level: `full` → `answer` → `dropped`.
    The turn just before the question is never dropped (a follow-up is read against it): when it does not fit
    even as question and answer, the history cannot fit (`overflow`). Nor can a question that, with the
    history, does not fit the model's whole context. Pure; `size` is the caller's (it renders the messages)."""
    turns = list(history)

    def total() -> int:
        return sum(size(t) for t in turns)

    if budget is not None:
        while (used := total()) > budget:
            i = next((i for i, t in enumerate(turns[:-1]) if t.context != "dropped"), len(turns) - 1)
            t = turns[i]
            if i == len(turns) - 1 and t.context != "full":
                return Fit(tuple(turns), used, (
                    f"the conversation does not fit: the history needs at least {used:,} tokens (turn "
                    f"{t.position}'s question and answer), more than its budget of {budget:,} tokens"
                    f"{_of_context(context_tokens)}; start a new conversation, or raise the budget"))
            turns[i] = replace(t, context="answer" if t.context == "full" else "dropped")  # type: ignore[arg-type]
    used = total()
    asked = estimate_tokens(question) + MESSAGE_TOKENS
    if context_tokens is not None and asked + used > context_tokens:
        return Fit(tuple(turns), used, (
            f"the question (about {asked:,} tokens) and the history ({used:,} tokens) do not fit the model's "
            f"context of {context_tokens:,} tokens; ask a shorter question or start a new conversation"))
    return Fit(tuple(turns), used)


def _of_context(context_tokens: int | None) -> str:
    return "" if context_tokens is None else f" (of the model's context of {context_tokens:,} tokens)"
