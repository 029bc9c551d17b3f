"""An audited run's turns matched to the lines of a questions file, so the run is scored like an `eval` run
(docs/audit.md, *Scoring against expectations*; docs/experiments.md).

A line asked on its own matches every turn asking its question (compared in Unicode NFC, surrounding whitespace
ignored) that is no follow-up: a turn outside any conversation, or the first of its conversation; n lines asking
one question take its turns in order, the last line the rest. The lines of one `"conversation"` match, in file
order, the turns of the session of that id (`session.id`, of any service) in the order of their positions. Several turns
matching one line are all kept (the latest is the one scored, as for a resumed `eval`); a turn answers one line
at most. A line no turn matches, and a turn no line matches, are returned, to be reported.
"""

from __future__ import annotations

import dataclasses
import unicodedata
from dataclasses import dataclass
from typing import Sequence

from ..questions import Question
from .sessions import audited_session


@dataclass(frozen=True, slots=True)
class RunTurn:
    """What matching needs of one turn of the run, in the run's order (position, then start time): not a turn type,
    three columns of its `turns` row (`trace.reader.run_turns`), its conversation named by the session alone
    (`sessions.session_in`), as a questions file names it."""

    turn_id: str
    question: str
    session: str | None = None


@dataclass(frozen=True, slots=True)
class Matching:
    lines: tuple[tuple[int, str], ...]  # (line of the file, turn_id), in line order
    unmatched_questions: tuple[Question, ...]
    unmatched_turns: tuple[RunTurn, ...]


def same_question(text: str) -> str:
    """The form two questions are compared in: NFC, surrounding whitespace stripped."""
    return unicodedata.normalize("NFC", text).strip()


def by_session(questions: Sequence[Question]) -> list[Question]:
    """`questions` with each conversation id as an audited conversation id holds its session (`audited_session`: a
    long one cut with a hash), to be matched to the session part of the run's conversation ids (`session_in`)."""
    return [dataclasses.replace(q, conversation=audited_session(q.conversation)) if q.conversation else q
            for q in questions]


def match_turns(questions: Sequence[Question], turns: Sequence[RunTurn]) -> Matching:
    """Which turns answered which lines (module docstring); `turns` in the run's order."""
    by_session: dict[str, list[RunTurn]] = {}
    for t in turns:
        if t.session is not None:
            by_session.setdefault(t.session, []).append(t)
    opening = {id(t) for t in turns if t.session is None or by_session[t.session][0] is t}
    by_text: dict[str, list[RunTurn]] = {}
    for t in turns:
        if id(t) in opening:
            by_text.setdefault(same_question(t.question), []).append(t)
    asking: dict[str, int] = {}  # question text -> how many lines on their own ask it
    for q in questions:
        if q.conversation is None:
            asking[same_question(q.text)] = asking.get(same_question(q.text), 0) + 1
    pairs: list[tuple[int, str]] = []
    missing: list[Question] = []
    used: set[str] = set()
    seen: dict[str, int] = {}  # conversation id or question text -> lines of it met so far
    for q in questions:
        key = q.conversation if q.conversation is not None else "\0" + same_question(q.text)
        k = seen[key] = seen.get(key, -1) + 1
        if q.conversation is not None:
            session = by_session.get(q.conversation, [])
            found = [session[k]] if k < len(session) else []
        else:  # the k-th of n lines asking it takes the k-th turn; the last line, the turns left too
            text = same_question(q.text)
            same = by_text.get(text, [])
            found = same[k:] if k == asking[text] - 1 else same[k:k + 1]
        if not found:
            missing.append(q)
        for t in found:
            pairs.append((q.line, t.turn_id))
            used.add(t.turn_id)
    return Matching(tuple(pairs), tuple(missing), tuple(t for t in turns if t.turn_id not in used))
