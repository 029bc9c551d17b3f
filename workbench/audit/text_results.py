"""Plain-text tool results that hold several documents (docs/design.md §12 *Tool results*).

`create_retriever_tool` and most hand-written search tools return blocks of text, each with a title and a url
or id. Such a text is split into its documents by the names it shows: a url, an `id:` / `doc_id:` / `source:`
line, or the url, id or title of a unit that a retriever nested in the tool returned (`known`). The blocks are
found by the first separator that gives each named block exactly one name: a rule line (`---`), a blank line,
or a numbered or titled block start (`1.`, `[1]`, `Source 1:`, `# Title`, `<document`). A block that shows
several urls is named by the first url of its first three lines (its header), the others being links in its
text; with no url in its header it names no single document. A block that names no
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
                return found[:_MAX_BLOCKS]
    meta = _names(text, known)
    return [(text.strip(), meta)] if meta else []


def _named_blocks(pieces: list[str], known: Sequence[Any]) -> list[tuple[str, dict[str, str]]] | None:
    """The pieces as named blocks, or None when a piece shows two documents' names (the wrong separator)."""
    out: list[tuple[str, dict[str, str]]] = []
    for piece in pieces:
        meta = _names(piece, known)
        if meta is None:
            return None
        if meta:
            out.append((piece, meta))
        elif out:
            out[-1] = (out[-1][0] + "\n\n" + piece, out[-1][1])
    return out


def _names(piece: str, known: Sequence[Any]) -> dict[str, str] | None:
    """What a piece names: its url, id and title ({} for none; None when it names two documents)."""
    urls = {normalize_url(u.rstrip(".,;:!?")): u.rstrip(".,;:!?") for u in _URL.findall(piece)}
    if len(urls) > 1:  # a block whose header names it may link other pages in its text: the header's url names it
        header = "\n".join(piece.splitlines()[:_HEADER_LINES])
        first = _URL.search(header)
        urls = {normalize_url(first.group(0).rstrip(".,;:!?")): first.group(0).rstrip(".,;:!?")} if first else urls
    ids = {m.group(1) for m in _ID_LINE.finditer(piece)} - {u for u in urls.values()}
    ids = {i for i in ids if not _URL.fullmatch(i)}
    if len(urls) > 1 or len(ids) > 1:
        return None
    if urls or ids:  # named by the block itself: the nested unit of that name, if any
        unit = next((u for u in known if (u.url and normalize_url(u.url) in urls) or (u.key and u.key in ids)), None)
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
    return meta


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
