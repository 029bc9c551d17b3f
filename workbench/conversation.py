"""Conversations: which of the earlier turns a follow-up's model still has (docs/design.md §11).

Pure functions over `TurnRecord`s. The context policy (`types.ContextPolicy`) puts each earlier turn in
one of three states — `full` (question, answer and tool results), `answer` (question and answer), `dropped`
(nothing) — and the resulting `HistoryTurn`s go into the follow-up's own record, so provenance knows
exactly what was carried and what the policy took away.
"""

from __future__ import annotations

from typing import Sequence

from .types import ContextPolicy, HistoryTurn, TurnRecord


def history_turn(record: TurnRecord, context: str, position: int) -> HistoryTurn:
    """`record` as an earlier turn of a conversation, in context state `context`."""
    return HistoryTurn(question=record.question, answer=record.answer, context=context,  # type: ignore[arg-type]
                       turn_id=record.turn_id, position=record.position or position, mode=record.mode,
                       tool_calls=record.tool_calls, excerpts=record.excerpts)


def history_for(earlier: Sequence[TurnRecord], policy: ContextPolicy) -> tuple[HistoryTurn, ...]:
    """The history of the turn that follows `earlier` (oldest first): the latest `policy.turns` keep their
    tool results, older ones keep question and answer."""
    n = len(earlier)
    return tuple(history_turn(r, "full" if n - i <= policy.turns else "answer", i + 1)
                 for i, r in enumerate(earlier))
