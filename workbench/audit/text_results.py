"""Plain-text tool results that hold several documents (docs/design.md §12 *Tool results*).

`create_retriever_tool` and most hand-written search tools return blocks of text, each with a title and a url
or id. Such a text is split into its documents by the names it shows: a url, an `id:` / `doc_id:` / `source:`
line, or the url, id or title of a unit that a retriever nested in the tool returned (`known`). The blocks are
found by the first separator that gives each named block exactly one name: a rule line (`---`), a blank line,
or a numbered or titled block start (`1.`, `[1]`, `Source 1:`, `# Title`, `<document`). Only a url
on a naming line names a block: a labelled line (`URL:`, `Source:`), or a line of its first three (its header)
short enough to be a title; a url in a sentence of its text is a link to another page and names nothing (§12).
A block that shows several naming urls is named by the first in its header. Once the first block is named, a
block named in another form (a heading, a list of links after an opened article's `URL:` line) is text of the
block before it. A block that names no
document belongs to the block before it (a document's text spanning paragraphs); text before the first named
block (a heading such as "Found 3 results") names nothing and is no document. A text that names no document, or
none cleanly, is not split (the caller keeps it as one unit).
"""

from __future__ import annotations

import re
from typing import Any, Sequence

from ..provenance import normalize_url

_URL = re.compile(r"https?://[^\s<>()\[\]\"'`]+")
_LABEL = r"(?im)^[ \t>*_-]*(?:{})[ \t]*\**[ \t]*[:=][ \t]*\**[ \t]*(\S.*?)[ \t*]*$"
_ID_LINE = re.compile(_LABEL.format(r"doc(?:ument)?[ _]?id|id|source|file(?:[ _]?name)?"))
_TITLE_LINE = re.compile(_LABEL.format(r"title|name"))
_HEADING = re.compile(r"(?m)^[ \t]*#{1,6}[ \t]+(\S.*?)[ \t]*$")
_SEPARATORS = (re.compile(r"(?m)^[ \t]*(?:-{3,}|\*{3,}|={3,}|_{3,})[ \t]*$"), re.compile(r"\n[ \t]*\n"),
               re.compile(r"(?m)^(?=[ \t]*(?:\d{1,3}[.)][ \t]|\[\d{1,3}\]|Source \d{1,3}:|#{1,6}[ \t]|<document))"))
_URL_LABEL = re.compile(r"(?i)^[ \t>*_-]*(url|link|href|source|uri)[ \t]*\**[ \t]*[:=]")
_MARKER = re.compile(r"^[ \t>]*(?:(\d{1,3}[.)]|\[\d{1,3}\]|Source \d{1,3}:)|([-*+])|(#{1,6}))?[ \t]*")
_MAX_HEADER_WORDS = 12  # a header line (a title beside its url); a longer line is a sentence of the text
_MIN_NAME = 3
_HEADER_LINES = 3  # the lines of a block that name it (its title, url or id) before its text
_MAX_BLOCKS = 1000


def text_documents(text: str, known: Sequence[Any] = ()) -> list[tuple[str, dict[str, str]]]:
    """The documents a plain text shows, as (block text, metadata: `url`, `doc_id`, `title`), in order; [] when
    it names none (or its names cannot be told apart into blocks)."""
    for separator in _SEPARATORS:
        pieces = [p.strip() for p in separator.split(text) if p.strip()]
        if len(pieces) >= 2:
            found = _named_blocks(pieces, known)
            if found is not None and len(found) >= 2:
                return [(body, _without_form(meta)) for body, meta in found[:_MAX_BLOCKS]]
    meta = _names(text, known)
    return [(text.strip(), _without_form(meta))] if meta else []


def _without_form(meta: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in meta.items() if k != "form"}


def _named_blocks(pieces: list[str], known: Sequence[Any]) -> list[tuple[str, dict[str, str]]] | None:
    """The pieces as named blocks, or None when a piece shows two documents' names (the wrong separator). A
    piece named in another form than the first block (a heading, a list of links inside an opened article
    after its `URL:` line) is text of the block before it."""
    out: list[tuple[str, dict[str, str]]] = []
    for piece in pieces:
        meta = _names(piece, known)
        if meta is None:
            return None
        if meta and (not out or meta["form"] == out[0][1]["form"]):
            out.append((piece, meta))
        elif out:
            out[-1] = (out[-1][0] + "\n\n" + piece, out[-1][1])
    return out


def _names(piece: str, known: Sequence[Any]) -> dict[str, str] | None:
    """What a piece names: its url, id and title, and `form`, the shape of the line naming it ({} for none; None
    when it names two documents). Only a url on a naming line names a piece (`_naming_urls`)."""
    named = _naming_urls(piece)
    urls = {normalize_url(u): u for u, _ in named}
    form = named[0][1] if named else None
    if len(urls) > 1:  # a block whose header names it may list other pages below it: the header's url names it
        first = next(((u, f) for u, f in named if f[0] == "label" or f[2] < _HEADER_LINES), None)
        urls, form = ({normalize_url(first[0]): first[0]}, first[1]) if first else (urls, form)
    id_lines = list(_ID_LINE.finditer(piece))
    ids = {m.group(1) for m in id_lines} - {u for u in urls.values()}
    ids = {i for i in ids if not _URL.fullmatch(i)}
    if len(urls) > 1 or len(ids) > 1:
        return None
    if urls or ids:  # named by the block itself: the nested unit of that name, if any
        unit = next((u for u in known if (u.url and normalize_url(u.url) in urls) or (u.key and u.key in ids)), None)
        form = form or ("label", "id", 0)
    else:
        unit = _known_unit(piece, known)
    meta: dict[str, str] = {}
    if urls:
        meta["url"] = next(iter(urls.values()))
    if ids:
        meta["doc_id"] = next(iter(ids))
    if unit is not None:
        meta.update({k: v for k, v in (("url", unit.url), ("doc_id", unit.key), ("title", unit.title),
                                       ("unit_id", unit.unit_id)) if v})
    if not meta:
        return {}
    title = _TITLE_LINE.search(piece) or _HEADING.search(piece)
    if title and "title" not in meta:
        meta["title"] = title.group(1)
    meta["form"] = repr(form or ("known",))
    return meta


def _naming_urls(piece: str) -> list[tuple[str, tuple]]:
    """The urls that name `piece`, each with the form of its line, in order: a url on a labelled line (`URL:`,
    `Link:`, `Source:`) anywhere, or on one of the piece's first lines (its header) that is a title, not a
    sentence: its words, the url and a link's brackets aside, at most `_MAX_HEADER_WORDS`. A url in a sentence
    of the text (a link to another page) names nothing (docs/design.md §12)."""
    out = []
    for index, line in enumerate(piece.splitlines()):
        found = [u.rstrip(".,;:!?") for u in _URL.findall(line)]
        if not found:
            continue
        label = _URL_LABEL.match(line)
        if label:
            out += [(u, ("label", label.group(1).lower(), 0)) for u in found]
            continue
        marker = _MARKER.match(line)
        words = _URL.sub(" ", line[marker.end():]).replace("](", " ").split()
        if index < _HEADER_LINES and len(words) <= _MAX_HEADER_WORDS:
            kind = next((k for k, g in zip(("number", "bullet", "heading"), marker.groups()) if g), "")
            out += [(u, ("line", kind, index)) for u in found]
    return out


def _known_unit(piece: str, known: Sequence[Any]) -> Any:
    """The nested retriever unit a piece that shows no url or id line names by its url or id in its text, or by a
    line that is its title (the first such)."""
    lines = {line.strip().strip("#*:- ").strip() for line in piece.splitlines()}
    for u in known:
        if u.url and u.url in piece:
            return u
        if u.key and len(u.key) >= _MIN_NAME and re.search(rf"(?<![\w/.-]){re.escape(u.key)}(?![\w/-])", piece):
            return u
        if u.title and len(u.title) >= _MIN_NAME and u.title in lines:
            return u
    return None
