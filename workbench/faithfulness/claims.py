"""Split an answer into claims (sentences and list items) and attach each citation to its claim.

Citation offsets come from provenance (`Payload.citations`, one `CitationEntry` per occurrence with
`start`/`end` and the resolved `doc_id`), so a claim owns exactly the citations that sit inside it.
Rules worth knowing:
- a `[n]` marker written after the sentence's full stop ("… it. [1]") belongs to that sentence;
- an attribution lead-in ("From [Title](url):") is not a claim; its citations are inherited by the
  uncited claims of the blocks that follow it, until the next heading or lead-in;
- headings, and pointer sentences that only name a link ("See also [Title](url).") are not claims.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from typing import Sequence

from ..payload import CitationEntry
from ..text import content_terms

# Blocks: blank lines, list items and headings each start a new block (as text.sentences does).
_BLOCK_SPLIT = re.compile(r"\n[ \t]*\n|\n(?=[ \t]*(?:[-*+]|\d{1,3}[.)])[ \t])|\n(?=[ \t]*#)")
_LIST_ITEM = re.compile(r"^[ \t]*(?:[-*+]|\d{1,3}[.)])[ \t]+")
_HEADING = re.compile(r"^[ \t]*#{1,6}[ \t]")
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"”')\]*_]*\s+(?=[\"“(\[*_]*[A-Z0-9\[])")
_MD_LINK_TEXT = re.compile(r"!?\[([^\[\]]*)\]\([^()]*\)")  # linear on text full of `[` (as text.plain)
# (?<!\s): the leading blanks are matched only from the start of a run of blanks, so a long run with no
# marker after it is scanned once, not once per position (that was quadratic).
_MARKERS = re.compile(r"(?<!\s)\s*\[\d{1,4}(?:\s*[,;\-–]\s*\d{1,4})*\](?!\()")
_EMPHASIS = re.compile(r"(\*\*|__|\*|`)")
# Words that only point at a link ("See also …", "For background, start with …").
_POINTER_WORDS = frozenset(content_terms(
    "see also read more start background details detail source sources reference references "
    "article articles guide guides link links related further information info check out from"))


@dataclass(frozen=True)
class ClaimCitation:
    """One citation occurrence inside a claim (valid or rejected by provenance)."""

    doc_id: str | None
    valid: bool
    n: int | None = None  # excerpt number in excerpt mode
    target: str = ""
    inherited: bool = False  # came from an attribution lead-in, not from the claim itself


@dataclass(frozen=True)
class Claim:
    idx: int
    text: str  # plain text: citation markup stripped, link text kept
    start: int
    end: int
    kind: str  # "sentence" | "list_item"
    citations: tuple[ClaimCitation, ...] = ()

    @property
    def cited_doc_ids(self) -> tuple[str, ...]:
        """Distinct valid cited documents, in order."""
        return tuple(dict.fromkeys(c.doc_id for c in self.citations if c.valid and c.doc_id))


def _spans(answer: str) -> list[tuple[int, int, str]]:
    """(start, end, kind) of every block-level piece: heading, list_item or paragraph."""
    out, pos = [], 0
    for m in list(_BLOCK_SPLIT.finditer(answer)) + [None]:
        end = m.start() if m else len(answer)
        block = answer[pos:end]
        if block.strip():
            kind = "heading" if _HEADING.match(block) else "list_item" if _LIST_ITEM.match(block) else "paragraph"
            lead = len(block) - len(block.lstrip())
            out.append((pos + lead, end, kind))
        pos = m.end() if m else end
    return out


def _inside(spans: list[tuple[int, int]], starts: list[int], at: int) -> bool:
    """Whether `at` lies strictly inside one of `spans` (sorted, non-overlapping; `starts` their starts)."""
    k = bisect_left(starts, at) - 1
    return k >= 0 and spans[k][0] < at < spans[k][1]


def _sentences(answer: str, start: int, end: int, protected: list[tuple[int, int]],
               starts: list[int]) -> list[tuple[int, int]]:
    out, pos = [], start
    for m in _SENTENCE_END.finditer(answer, start, end):
        if _inside(protected, starts, m.start()):  # never split inside a link
            continue
        out.append((pos, m.start()))
        pos = m.end()
    out.append((pos, end))
    return [(s, e) for s, e in out if answer[s:e].strip()]


def clean(text: str) -> str:
    """Claim text as prose: markers removed, link text kept, list bullets and emphasis dropped."""
    text = _MARKERS.sub("", text)
    text = _MD_LINK_TEXT.sub(lambda m: m.group(1), text)
    text = _LIST_ITEM.sub("", text)
    text = _EMPHASIS.sub("", text)
    return " ".join(text.split()).strip()


def _without_links(text: str) -> str:
    return _MARKERS.sub("", _MD_LINK_TEXT.sub(" ", text))


def _citation(c: CitationEntry, inherited: bool = False) -> ClaimCitation:
    return ClaimCitation(c.doc_id, bool(c.valid), c.n, c.target or "", inherited)


def split_claims(answer: str, citations: Sequence[CitationEntry] = ()) -> list[Claim]:
    """Claims of `answer` with their citations (`citations`: provenance's per-occurrence records)."""
    cits = sorted((c for c in citations if isinstance(c.start, int)), key=lambda c: c.start)
    protected = [(c.start, c.end) for c in cits]
    starts = [s for s, _ in protected]
    pieces: list[tuple[int, int, str, list[CitationEntry]]] = []  # start, end, kind, citations
    for b_start, b_end, kind in _spans(answer):
        if kind == "heading":
            pieces.append((b_start, b_end, "heading", []))
            continue
        sents = _sentences(answer, b_start, b_end, protected, starts) if kind == "paragraph" else [(b_start, b_end)]
        for s, e in sents:
            pieces.append((s, e, "sentence" if kind == "paragraph" else "list_item", []))
    piece_starts = [p[0] for p in pieces]  # pieces are in order and do not overlap
    for c in cits:
        i = bisect_right(piece_starts, c.start) - 1
        if i < 0 or not pieces[i][0] <= c.start < pieces[i][1]:
            continue
        s = pieces[i][0]
        # "… it. [1]": a marker that opens a sentence belongs to the sentence before it.
        if (c.n is not None and i > 0 and pieces[i - 1][2] == "sentence" and pieces[i][2] == "sentence"
                and not _MARKERS.sub("", answer[s:c.start]).strip()):
            i -= 1
        pieces[i][3].append(c)

    claims: list[Claim] = []
    inherited: list[CitationEntry] = []
    for s, e, kind, cs in pieces:
        raw = answer[s:e]
        if kind == "heading":
            inherited = []
            continue
        text = clean(raw)
        terms = content_terms(_without_links(raw))
        if cs and text.rstrip().endswith(":"):  # attribution lead-in: scopes the blocks that follow
            inherited = cs
            continue
        if not terms or (cs and set(terms) <= _POINTER_WORDS):
            continue  # no content of its own, or only points at a link
        own = [_citation(c) for c in cs]
        if not own and inherited:
            own = [_citation(c, inherited=True) for c in inherited]
        claims.append(Claim(len(claims), text, s, e, kind, tuple(own)))
    return claims
