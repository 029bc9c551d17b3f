"""Exposure measured from what reached a model input (docs/design.md §12 *Exposure is measured*).

For each document, the input messages of the turn's model calls are searched (text normalised for whitespace;
a JSON message is searched as written and by its string values): `full` when the whole document text is there
(known with a corpus; without one only for a tool result that is one document's full record), `snippet` when
some unit's content is there, `title` when only its title, url or id is there outside every shown unit's text
(a url inside another document's text exposes nothing), else it never reached the model (`not_shown`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Iterator

from ..types import EXPOSURE_RANK
from .turns import Message, SpanCall
from .units import DocRef, Unit

_SPACE = re.compile(r"\s+")
_MIN_NAME = 3  # a title, url or id shorter than this is too common a string to count as shown
_BLOCKS = (re.compile(r"(?m)^[ \t]*Source (\d{1,4}):"), re.compile(r"(?m)^\[(\d{1,4})\]"),
           re.compile(r'<document index="(\d{1,4})">'))


def normalize(text: str) -> str:
    return _SPACE.sub(" ", text).strip()


@dataclass(frozen=True, slots=True)
class Text:
    """One input message, searchable: where it is, its normalised text, and that text minus the shown units."""

    where: str
    text: str
    residue: str


@dataclass(frozen=True, slots=True)
class Seen:
    exposure: str
    where: str


def _strings(data: Any) -> Iterator[str]:
    if isinstance(data, str):
        yield data
    elif isinstance(data, list):
        for v in data:
            yield from _strings(v)
    elif isinstance(data, dict):
        for v in data.values():
            yield from _strings(v)


def holds_whole(doc: DocRef, units: list[Unit]) -> bool:
    """Whether one of `units` holds the document's whole corpus text (a tool call that opened it)."""
    whole = normalize(doc.text) if doc.text else None
    return bool(whole) and any(whole in normalize(u.content) for u in units)


def searchable(content: str) -> str:
    """A message's text as written, plus its JSON string values when it is JSON (a tool result)."""
    try:
        data = json.loads(content)
    except (ValueError, RecursionError):
        return normalize(content)
    if isinstance(data, (dict, list)):
        return normalize(content + "\n" + "\n".join(_strings(data)))
    return normalize(content)


def texts(calls: list[tuple[int, SpanCall, list[Message]]], contents: list[str], question: str) -> list[Text]:
    """The searchable messages of the calls (k, call, the messages of this turn's part of its input)."""
    out = []
    shown = sorted({c for c in contents if c}, key=len, reverse=True)
    q = normalize(question)
    for k, call, msgs in calls:
        for m in msgs:
            if not m.content:
                continue
            text = searchable(m.content)
            residue = text
            for c in shown:
                if c in residue:
                    residue = residue.replace(c, "\0")
            if len(q) >= _MIN_NAME:
                residue = residue.replace(q, "\0")
            out.append(Text(where=f"model call {k} ({call.span.name}), message {m.index} ({m.role})", text=text,
                            residue=residue))
    return out


def exposure_of(doc: DocRef, units: list[Unit], found: list[Text], corpus_full: bool = True) -> Seen | None:
    """The strongest exposure the document had in the model inputs through `units`, and the first message that
    gave it (`corpus_full`: its whole corpus text found in a model input counts as `full`; a tool call whose own
    result did not hold the whole text is not credited with it)."""
    best: Seen | None = None

    def offer(exposure: str, where: str) -> None:
        nonlocal best
        if best is None or EXPOSURE_RANK[exposure] > EXPOSURE_RANK[best.exposure]:
            best = Seen(exposure, where)

    whole = normalize(doc.text) if doc.text and corpus_full else None
    contents = [(normalize(u.content), u.whole and doc.text is None) for u in units if u.content.strip()]
    names = {n for u in units for n in (u.title, u.url, u.key, u.unit_id) if n and len(n) >= _MIN_NAME}
    names.update(n for n in (doc.title, doc.url, doc.doc_id) if n and len(n) >= _MIN_NAME)
    for t in found:
        if whole and whole in t.text:
            offer("full", t.where)
        for content, is_whole in contents:
            if content in t.text:
                offer("full" if is_whole else "snippet", t.where)
        if best is None and any(n in t.residue for n in names):
            offer("title", t.where)
        if best is not None and best.exposure == "full":
            break
    return best


@dataclass(frozen=True, slots=True)
class Block:
    n: int
    text: str
    where: str


def numbered_blocks(calls: list[tuple[int, SpanCall, list[Message]]]) -> list[Block]:
    """The numbered blocks of the final model input: `Source n:` (llama-index's CitationQueryEngine), `[n]` at a
    line start (excerpt mode), `<document index="n">`; the first of these forms found is the prompt's."""
    if not calls:
        return []
    k, call, msgs = calls[-1]
    for pattern in _BLOCKS:
        blocks = []
        for m in msgs:
            if not m.content:
                continue
            hits = list(pattern.finditer(m.content))
            for j, h in enumerate(hits):
                end = hits[j + 1].start() if j + 1 < len(hits) else len(m.content)
                body = m.content[h.end():end].split("</document>")[0]
                blocks.append(Block(int(h.group(1)), normalize(body),
                                    f"model call {k} ({call.span.name}), message {m.index} ({m.role})"))
        if blocks:
            return blocks
    return []


def block_unit(block: Block, units: list[Unit]) -> Unit | None:
    """The unit a numbered block shows: its content inside the block, or the block inside its content (a prompt
    may split a node into several numbered chunks); the longest such unit."""
    best, size = None, 0
    for u in units:
        c = normalize(u.content)
        if c and (c in block.text or (len(block.text) >= 20 and block.text in c)) and len(c) > size:
            best, size = u, len(c)
    return best
