"""What of a document the model saw or quoted in a turn, found in the document's text as spans, and the text
with those spans highlighted."""

from __future__ import annotations

import re

from ..text import plain, sentences
from ..types import TurnRecord
from .escaping import literal_markdown


def evidence_passages(record: TurnRecord, doc_id: str) -> list[tuple[str, str]]:
    """What of `doc_id` the model saw or quoted in one turn, as (kind, text) pairs:
    `excerpt` (a numbered excerpt), `snippet` (a search result's passage), `quoted` (an answer
    sentence; only those found in the document get highlighted)."""

    out: list[tuple[str, str]] = [("excerpt", e.text) for e in record.excerpts if e.doc_id == doc_id and e.text]
    for call in record.tool_calls:
        out += [("snippet", r.snippet) for r in call.results if r.doc_id == doc_id and r.snippet]
    out += [("quoted", s) for s in sentences(plain(record.answer or "")) if len(s.split()) >= 4]
    return out


def _loose_pattern(passage: str) -> re.Pattern | None:
    words = passage.split()
    if not words:
        return None
    return re.compile(r"\s+".join(re.escape(w) for w in words))


def _in_word(text: str, i: int) -> bool:
    """Whether `text[i]` belongs to a word: a letter or digit, or an apostrophe between two ("company's")."""
    if not 0 <= i < len(text):
        return False
    if text[i] in "'’":
        return _in_word(text, i - 1) and i + 1 < len(text) and text[i + 1].isalnum()
    return text[i].isalnum() or text[i] == "_"


def _whole_words(text: str, start: int, end: int) -> tuple[int, int]:
    """`start`..`end` widened to whole words: a snippet cut mid-word ("Verify your compan") is boxed to the word's
    end, never drawn as "compan" in the box and "y's" outside it."""
    while start > 0 and _in_word(text, start) and _in_word(text, start - 1):
        start -= 1
    while end < len(text) and _in_word(text, end - 1) and _in_word(text, end):
        end += 1
    return start, end


def highlight_spans(text: str, passages: list[tuple[str, str]]) -> list[tuple[int, int, str]]:
    """Non-overlapping (start, end, kind) spans of `text` matching the passages, whitespace-insensitively, each
    widened to whole words.

    A passage that does not occur whole (chunkers and answers reflow text) is matched sentence by
    sentence. Earlier kinds in `passages` win overlaps only where they came first; `quoted` wins
    over `snippet` so the part the answer used stands out inside the larger passage.
    """

    priority = {"quoted": 0, "excerpt": 1, "snippet": 2}
    found: list[tuple[int, int, str]] = []
    for kind, passage in passages:
        pieces = [passage] + [s for s in sentences(passage) if len(s.split()) >= 4]
        for piece in pieces:
            pat = _loose_pattern(piece)
            m = pat.search(text) if pat else None
            if m:
                found.append((*_whole_words(text, m.start(), m.end()), kind))
                if piece is passage:
                    break
    found.sort(key=lambda s: (priority.get(s[2], 9), s[0]))
    taken: list[tuple[int, int, str]] = []
    for s, e, kind in found:
        # cut the new span around the ones already taken (higher priority)
        cuts = [(s, e)]
        for ts, te, _ in taken:
            cuts = [p for a, b in cuts for p in ((a, min(b, ts)), (max(a, te), b)) if p[0] < p[1]]
        for a, b in cuts:
            piece = text[a:b]
            if piece.strip():  # no highlight on bare whitespace at a cut
                a += len(piece) - len(piece.lstrip())
                b -= len(piece) - len(piece.rstrip())
                taken.append((a, b, kind))
    return sorted(taken)


#: The background of each kind of evidence passage (the panel's legend names them).
HIGHLIGHT_COLORS = {"quoted": "orange", "excerpt": "blue", "snippet": "blue"}


def highlighted_markdown(text: str, spans: list[tuple[int, int, str]],
                         colors: dict[str, str] | None = None) -> str:
    """`text` as literal markdown (see `escape_markdown`) with each span on a coloured background."""
    return literal_markdown(text, spans, colors or HIGHLIGHT_COLORS)
