"""Provenance: the three sets of a turn, citation validation and the sources payload.

Pure functions over an explicit `TurnRecord` (docs/design.md §1–§4); no I/O, no clock, no globals.

The three sets (docs/design.md §1):
- **retrieved**: every document any tool returned (or every excerpt), with its strongest exposure
  (`full` > `snippet` > `title`). It is the allow-list: a citation that resolves to no retrieved
  document is *rejected* as a fabrication — never auto-corrected, even when it is one character off
  a real id; we only report the nearest retrieved id and the edit distance so a researcher sees why
  it was probably produced.
- **cited**: retrieved documents the answer links to (markdown links by URL or bare id; `[n]`
  markers in excerpt mode, where `n` outside `1..len(excerpts)` is rejected as `out_of_range`).
- **consulted**: documents whose text the model read, by exactly these rules:
  1. exposure `full` → consulted whether or not the answer links it (a forgotten link is a
     formatting slip, not missing evidence);
  2. exposure `snippet` and cited → consulted (the citation says which candidate was used);
  3. exposure `title` → never consulted, even when linked.

The payload keeps the whole cited set plus the consulted set, each entry flagged `consulted`;
renderers show a chip only where `consulted` is not false (see `render/sources.py`).

A turn of a conversation (a record with `history`) follows docs/design.md §11: documents carried from
earlier turns join the allow-list, `not_in_context` rejections name the turn whose exposure the context
policy dropped, and a carried document is consulted only when this turn cites it — and not when this turn's own
tools gave it only as a title (a listing's link, rule 3e: "What articles do you have?" never gets a sources row).
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_right
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any, Callable, Iterable, TypeVar
from urllib.parse import unquote, urlsplit, urlunsplit

from markdown_it import MarkdownIt
from markdown_it.rules_inline import autolink, backtick, escape, html_inline, link
from rapidfuzz.distance import Levenshtein
from rapidfuzz.process import extractOne

from .payload import CitationEntry, DocumentEntry, Payload, Rejection, Sets, Source, ToolCallEntry
from .turn_ids import content_id
from .types import EXPOSURE_RANK, UNAUDITABLE, Excerpt, HistoryTurn, TurnRecord, artifact_label


# [3], [1, 2], [1][2], [2-4] in the answer's text (never in code, links or raw HTML), not a link's text ([1](url)).
_MARKER = re.compile(r"\[(\d{1,4}(?:\s*(?:,|;|-|–)\s*\d{1,4})*)\](?!\()")
_WEB = re.compile(r"(?i)https?://")  # autolinks that may cite: `<https://…>`, not `<mailto:…>`


# --- URL and id matching -----------------------------------------------------------------------


@lru_cache(maxsize=65536)
def normalize_url(url: str) -> str:
    """Canonical form for matching: lower-case scheme and host, no fragment, query or trailing slash."""
    url = url.strip()
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    if not parts.scheme and not parts.netloc:
        return parts.path.rstrip("/") or url
    netloc = parts.netloc.lower()
    if netloc.endswith(":443") and parts.scheme.lower() == "https":
        netloc = netloc[:-4]
    elif netloc.endswith(":80") and parts.scheme.lower() == "http":
        netloc = netloc[:-3]
    return urlunsplit((parts.scheme.lower(), netloc, parts.path.rstrip("/"), "", ""))


def _id_part(target: str) -> str:
    """The part of a target that should be an id: a URL's last path segment, else the target."""
    if "/" in target:
        path = urlsplit(target).path if "://" in target else target.split("#")[0].split("?")[0]
        segs = [s for s in path.split("/") if s]
        return segs[-1] if segs else target
    return target


# --- records ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Citation:
    """One citation occurrence in the answer and its validation outcome."""

    target: str
    start: int
    end: int
    doc_id: str | None = None
    valid: bool = False
    reason: str | None = None  # None when valid; "not_retrieved" | "out_of_range" | "not_in_context"
    nearest_doc_id: str | None = None
    edit_distance: int | None = None
    n: int | None = None  # excerpt number for [n] markers
    text: str | None = None  # link text for markdown links
    turn: int | None = None  # not_in_context: index in `history` of the earlier turn that had the document
    upto: int | None = None  # a marker's range `[n-upto]` as extracted (validate expands it over the issued numbers)


@dataclass
class _Retrieved:
    doc_id: str
    title: str | None
    url: str | None
    kind: str
    artifact_kind: str | None
    exposure: str
    tool_call: int | None  # index of the first call that gave the strongest exposure
    tool_calls: list[int] = field(default_factory=list)
    excerpt_ns: list[int] = field(default_factory=list)


def collect_retrieved(record: TurnRecord) -> dict[str, _Retrieved]:
    """Every document the turn's own tool calls and excerpts exposed, in first-seen order, with its strongest
    exposure (a conversation's carried documents are `carried_exposures`')."""
    seen: dict[str, _Retrieved] = {}

    def add(doc_id, title, url, kind, artifact_kind, exposure, call_idx, n=None):
        r = seen.get(doc_id)
        if r is None:
            r = seen[doc_id] = _Retrieved(doc_id=doc_id, title=title or None, url=url, kind=kind or "source",
                                          artifact_kind=artifact_kind, exposure=exposure, tool_call=call_idx)
        elif EXPOSURE_RANK[exposure] > EXPOSURE_RANK[r.exposure]:
            r.exposure, r.tool_call = exposure, call_idx
        r.title = r.title or title or None
        r.url = r.url or url
        if call_idx is not None and call_idx not in r.tool_calls:
            r.tool_calls.append(call_idx)
        if n is not None:
            r.excerpt_ns.append(n)

    read: dict[str, list[tuple[int, int]]] = {}  # doc id -> the character ranges of it read in part
    for i, call in enumerate(record.tool_calls):
        for item in call.results:
            add(item.doc_id, item.title, item.url, item.kind, item.artifact_kind, item.exposure or call.exposure, i)
            if call.cut is not None and call.cut.kind == "part" and _read_whole(read, item.doc_id, call.cut):
                add(item.doc_id, item.title, item.url, item.kind, item.artifact_kind, "full", i)
    for e in record.excerpts:
        if e.doc_id is not None:  # an excerpt that shows no document exposes nothing
            add(e.doc_id, e.title, e.url, e.chunk_type, e.artifact_kind, "snippet", None, e.n)
    return seen


def _read_whole(read: dict[str, list[tuple[int, int]]], doc_id: str, cut) -> bool:
    """Record that the part `cut` of `doc_id` was read; True once its parts cover the whole text. A document read only
    in part is a `snippet` exposure; every part read, it is `full`, as if opened whole (docs/design.md,
    "Results that fit")."""
    ranges = read.setdefault(doc_id, [])
    ranges.append((cut.start, cut.end))
    reached = 0
    for start, end in sorted(ranges):
        if start > reached:
            return False
        reached = max(reached, end)
    return reached >= cut.total


def _lookup(retrieved: dict[str, _Retrieved]) -> dict[str, str]:
    table: dict[str, str] = {}
    for r in retrieved.values():
        if r.url:
            table.setdefault(normalize_url(r.url), r.doc_id)
            if "%" in r.url:
                table.setdefault(normalize_url(unquote(r.url)), r.doc_id)
    for r in retrieved.values():  # a bare id always wins over a URL that happens to look like it
        table[r.doc_id] = r.doc_id
    return table


# --- finding citations: a CommonMark parser (markdown-it-py) decides what is a link ---------------
#
# The parser says which `[text](target)`, `[text][ref]` and `<https://…>` are links; code (fences of
# backticks or tildes, indented blocks, code spans of any length), escaped brackets and raw HTML never
# are, because the parser never makes links there. markdown-it's tokens carry no character offsets, so
# its inline rules are wrapped to record where each link, code span, escape and HTML tag starts and
# ends in its block's text; each block's text is then located in the answer line by line.


def _recording(rule, kind: str):
    def wrapped(state, silent: bool) -> bool:
        start, n = state.pos, len(state.tokens)
        ok = rule(state, silent)
        if ok and not silent:
            target = None
            if kind in ("link", "autolink"):  # its first token (pending text is pushed before it)
                opened = next((t for t in state.tokens[n:] if t.type == "link_open"), None)
                target = None if opened is None else _link_target(state, start, opened) if kind == "link" \
                    else state.src[start + 1:state.pos - 1]
            state.env["_spans"].append((id(state.tokens), kind, start, state.pos, target))
        return ok
    return wrapped


def _link_target(state, start: int, token) -> tuple[str, str]:
    """(link text, target as written) of the link the parser found at `start` (`normalizeLink` is off, so
    the token's href is the destination as written, backslash escapes and entities resolved)."""
    label_end = state.md.helpers.parseLinkLabel(state, start, True)
    return (state.src[start + 1:label_end] if label_end > start else ""), token.attrs.get("href", "")


def _parser() -> MarkdownIt:
    md = MarkdownIt("commonmark")
    md.validateLink = lambda url: True  # `javascript:` stays a link here, to be rejected as a citation
    md.normalizeLink = lambda url: url  # targets as written (validate() matches URL forms), and 3× faster
    for name, rule, kind in (("link", link, "link"), ("autolink", autolink, "autolink"), ("backticks", backtick, "code"),
                             ("escape", escape, "escape"), ("html_inline", html_inline, "html")):
        md.inline.ruler.at(name, _recording(rule, kind))
    md.core.ruler.disable("text_join")  # it replaces each block's token list, which the spans are keyed by
    md.parse("")  # builds the rule chains once, before threads share the parser
    return md


_MD = _parser()


def _block_offsets(answer: str, line_starts: list[int], token) -> tuple[list[int], list[int]]:
    """Where each line of an inline block's text starts in `answer`, and where it starts in the text."""
    lines = token.content.split("\n")
    first = token.map[0] if token.map else 0
    at_answer, at_text, pos = [], [], 0
    for i, line in enumerate(lines):
        row = min(first + i, len(line_starts) - 1)
        begin = line_starts[row]
        end = line_starts[row + 1] - 1 if row + 1 < len(line_starts) else len(answer)
        found = answer.rfind(line, begin, end) if line else -1
        at_answer.append(found if found >= 0 else max(begin, end - len(line)))
        at_text.append(pos)
        pos += len(line) + 1
    return at_answer, at_text


def _parse(answer: str) -> list[tuple[str, int, int, Any]]:
    """(kind, start, end, target) of every link, autolink, code span, escape and inline HTML the parser
    found, as offsets into `answer`, plus ("text", start, end, None) for each block's inline text."""
    # markdown-it turns \r\n, \r and NUL into \n and U+FFFD; these replacements keep every offset.
    src = answer.replace("\r\n", " \n").replace("\r", "\n").replace("\0", "\ufffd")
    env: dict[str, Any] = {"_spans": []}
    tokens = _MD.parse(src, env)
    line_starts = [0] + [m.end() for m in re.finditer("\n", src)]
    by_block: dict[int, list] = {}
    for rec in env["_spans"]:
        by_block.setdefault(rec[0], []).append(rec[1:])
    out: list[tuple[str, int, int, Any]] = []
    for token in tokens:
        if token.type != "inline":
            continue
        at_answer, at_text = _block_offsets(src, line_starts, token)

        def where(p: int) -> int:
            i = bisect_right(at_text, p) - 1
            return at_answer[i] + p - at_text[i]

        for i, line in enumerate(token.content.split("\n")):
            out.append(("text", at_answer[i], at_answer[i] + len(line), (token.content, at_text[i])))
        for kind, start, end, target in by_block.get(id(token.children), ()):  # image alt text is not here
            out.append((kind, where(start), where(end - 1) + 1, target))
    return out


def extract_citations(answer: str, mode: str) -> list[Citation]:
    """Every citation in `answer`, in order: links (both modes) and `[n]` (excerpt mode), as a CommonMark
    parser reads the answer: nothing inside code, escaped brackets or raw HTML is a citation."""
    found: list[Citation] = []
    if "[" not in answer and "<" not in answer:  # no link, autolink or marker can start anywhere
        return found
    skip: list[tuple[int, int]] = []  # where a `[n]` is not text: links, code spans, escapes, inline HTML
    texts = []
    for kind, start, end, extra in _parse(answer):
        if kind == "text":
            texts.append((start, end))
            continue
        skip.append((start, end))
        if kind == "link" and extra is not None:
            text, target = extra
            target = target.strip()
            if target and not target.startswith("#"):  # in-answer anchors are not documents
                found.append(Citation(target, start, end, text=text))
        elif kind == "autolink" and extra and _WEB.match(extra):
            found.append(Citation(extra, start, end))
    if mode == "excerpts":
        skip.sort()
        starts = [s for s, _ in skip]
        for t_start, t_end in texts:
            for m in _MARKER.finditer(answer, t_start, t_end):
                k = bisect_right(starts, m.end() - 1) - 1
                if any(s < m.end() and m.start() < e for s, e in skip[max(0, k - 8):k + 1]):
                    continue
                for n, upto in _marker_parts(m.group(1)):
                    found.append(Citation(f"[{n}]" if upto is None else f"[{n}-{upto}]", m.start(), m.end(), n=n,
                                          upto=upto))
    found.sort(key=lambda c: (c.start, c.n or 0))
    return found


#: The widest `[a-b]` range read as a range; a wider one (or a reversed one) cites its two ends.
MAX_MARKER_RANGE = 50


def _marker_parts(body: str) -> list[tuple[int, int | None]]:
    """The parts of one marker's body, each once: (n, None) for a number, (a, b) for a range `a-b` of at most
    `MAX_MARKER_RANGE` + 1 numbers. A range is not expanded here: `validate` knows which numbers were issued,
    so `[0-50]` costs what it cites, not 51 citations."""
    parts: dict[tuple[int, int | None], None] = {}
    for part in re.split(r"\s*[,;]\s*", body):
        if re.search(r"[-–]", part):
            a, b = (int(x) for x in re.split(r"\s*[-–]\s*", part)[:2])
            if 0 <= b - a <= MAX_MARKER_RANGE:
                parts[(a, b) if b > a else (a, None)] = None
            else:
                parts[(a, None)] = parts[(b, None)] = None
        else:
            parts[(int(part), None)] = None
    return list(parts)


def _runs(numbers: list[int]) -> str:
    """Sorted distinct numbers as a marker body: [0, 6, 7, 8] -> "0, 6-8"."""
    out, i = [], 0
    while i < len(numbers):
        j = i
        while j + 1 < len(numbers) and numbers[j + 1] == numbers[j] + 1:
            j += 1
        out.append(str(numbers[i]) if i == j else f"{numbers[i]}-{numbers[j]}")
        i = j + 1
    return ", ".join(out)


#: What one marker cites: (target, n, doc_id, reason, turn) per citation; reason None means valid.
_Plan = tuple[tuple[str, int, "str | None", "str | None", "int | None"], ...]


def _marker_plan(parts: tuple[tuple[int, int | None], ...], issued: list[int], excerpts_by_n: dict[int, Excerpt],
                 dropped: _DroppedExposures | None) -> _Plan:
    """The citations of one `[…]` marker (its parts (n, upto), in order): each issued number it names once, valid or
    `not_in_context`; every number it names that was never issued, together, as ONE `out_of_range` rejection
    (`issued`: the sorted numbers that name an excerpt in the conversation)."""
    out, seen, missing = [], set(), set()
    for n0, upto in parts:
        if upto is None:
            numbers = [n0]
        else:
            numbers = issued[bisect_right(issued, n0 - 1):bisect_right(issued, upto)]
            missing.update(set(range(n0, upto + 1)).difference(numbers))
        for n in numbers:
            if n in seen:
                continue
            seen.add(n)
            e = excerpts_by_n.get(n)
            if e is not None:  # an excerpt that names no document: the marker cites nothing that was retrieved
                out.append((f"[{n}]", n, e.doc_id, None if e.doc_id is not None else "not_retrieved", None))
            elif dropped is not None and n in dropped.excerpts:
                out.append((f"[{n}]", n, None, "not_in_context", dropped.excerpts[n]))
            else:
                missing.add(n)
    if missing:
        never = sorted(missing)
        out.append((f"[{_runs(never)}]", never[0], None, "out_of_range", None))
    return tuple(out)


def _resolve(target: str, table: dict[str, str]) -> str | None:
    """The document a link target names in `table` (see `_lookup`), or None."""
    doc_id = table.get(target) or table.get(normalize_url(target))
    if doc_id is None and "%" in target:  # caf%C3%A9 and café name the same document (RFC 3986)
        decoded = unquote(target)
        doc_id = table.get(decoded) or table.get(normalize_url(decoded))
    if doc_id is None and not target.isascii():  # ids are NFC: "café" typed in NFD is the same id
        composed = unicodedata.normalize("NFC", unquote(target))
        doc_id = table.get(composed) or table.get(normalize_url(composed))
    return doc_id


def validate(citations: list[Citation], retrieved: dict[str, _Retrieved],
             excerpts_by_n: dict[int, Excerpt], dropped: _DroppedExposures | None = None) -> list[Citation]:
    """Resolve each citation against the allow-list; never auto-correct a near miss.

    In a conversation, `dropped` holds what earlier turns exposed that the context policy took away: a
    citation of it is `not_in_context` (naming the turn), not `not_retrieved`."""
    table = _lookup(retrieved)
    ids = list(retrieved)
    issued = sorted({*excerpts_by_n, *(dropped.excerpts if dropped is not None else ())})
    out: list[Citation] = []
    marker: list[tuple[int, int | None]] = []  # the parts of the `[…]` marker being read
    plans: dict[tuple[tuple[int, int | None], ...], _Plan] = {}  # an answer repeats its markers: plan each once
    for i, c in enumerate(citations):
        if c.n is not None:
            marker.append((c.n, c.upto))
            after = citations[i + 1] if i + 1 < len(citations) else None
            if after is None or after.n is None or (after.start, after.end) != (c.start, c.end):
                key = tuple(marker)
                plan = plans.get(key)
                if plan is None:
                    plan = plans[key] = _marker_plan(key, issued, excerpts_by_n, dropped)
                out += [Citation(target, c.start, c.end, doc_id, reason is None, reason, n=n, turn=turn)
                        for target, n, doc_id, reason, turn in plan]
                marker = []
            continue
        doc_id = _resolve(c.target, table)
        if doc_id is not None:
            out.append(_replace(c, doc_id=doc_id, valid=True))
            continue
        gone = _resolve(c.target, dropped.table) if dropped is not None else None
        if gone is not None:
            out.append(_replace(c, valid=False, reason="not_in_context", turn=dropped.turns[gone]))
            continue
        nearest = extractOne(_id_part(c.target), ids, scorer=Levenshtein.distance) if ids else None
        out.append(_replace(c, valid=False, reason="not_retrieved",
                            nearest_doc_id=nearest[0] if nearest else None,
                            edit_distance=int(nearest[1]) if nearest else None))
    return out


def _replace(c: Citation, **changes) -> Citation:
    # Direct construction: dataclasses.replace costs a third of sources_payload's time budget.
    return Citation(target=c.target, start=c.start, end=c.end, doc_id=changes.get("doc_id"),
                    valid=changes.get("valid", False), reason=changes.get("reason"),
                    nearest_doc_id=changes.get("nearest_doc_id"), edit_distance=changes.get("edit_distance"), n=c.n,
                    text=c.text, turn=changes.get("turn"))


def consulted_reason(exposure: str, cited: bool) -> tuple[bool, str]:
    """Apply the consulted rules of docs/design.md §1 to one document: (consulted?, why)."""
    if exposure == "full":
        return True, "opened in full" if cited else "opened in full (not linked)"
    if exposure == "snippet":
        return (True, "snippet cited") if cited else (False, "snippet not cited")
    return False, "listed only" + (" (linked, but only its title was seen)" if cited else "")


# --- conversations (docs/design.md §11) ------------------------------------------------------------
#
# A follow-up's allow-list holds what this turn exposed plus what is *carried*: the exposures of earlier
# turns whose tool results the context policy kept (`full`), and — with exposure `title` — the documents
# linked by accepted citations of earlier answers the policy kept (`full` or `answer`). An earlier
# answer's link is *accepted* when it resolves against the allow-list that turn had when it was answered,
# rebuilt the same way from its own exposures and the turns before it in the context states it was asked
# with (`HistoryTurn.prior_context`, which the workbench records). A record that does not say gives the
# states it gives them now: a policy only ever weakens an earlier turn's state as the conversation goes on,
# so that is never more than the allow-list the turn really had.


@dataclass
class _Carried:
    """A document's strongest exposure still in context from earlier turns (latest turn on a tie)."""

    exposure: str
    turn: int  # index in `history`
    meta: _Retrieved  # title, url and kind of the document, as the earlier turn had them
    excerpt_ns: list[int] = field(default_factory=list)  # its excerpts of `full` turns (numbers stay valid)


@dataclass
class _DroppedExposures:
    """What earlier turns exposed that the context policy took away: a citation of it is `not_in_context`."""

    table: dict[str, str]  # ids and URLs of those documents -> doc id (as `_lookup`)
    turns: dict[str, int]  # doc id -> index in `history` of the latest turn whose exposure was dropped
    excerpts: dict[int, int]  # excerpt number of an `answer` or `dropped` turn -> index of that turn


def _linked(history: tuple[HistoryTurn, ...]) -> list[dict[str, _Retrieved]]:
    """Per earlier turn, the documents its answer linked with an accepted citation (markdown links and
    autolinks; an `[n]` marker shows the model a number, not a link)."""
    linked: list[dict[str, _Retrieved]] = []
    for i, h in enumerate(history):
        allow = collect_retrieved(h.record)
        for doc_id, c in _carried(_history_when_asked(history[:i], h), linked).items():
            allow.setdefault(doc_id, c.meta)
        table, accepted = _lookup(allow), {}
        for c in extract_citations(h.record.answer, h.record.mode):
            doc_id = _resolve(c.target, table) if c.n is None else None
            if doc_id is not None:
                accepted.setdefault(doc_id, allow[doc_id])
        linked.append(accepted)
    return linked


def _history_when_asked(before: tuple[HistoryTurn, ...], h: HistoryTurn) -> tuple[HistoryTurn, ...]:
    """The turns before `h` in the context states `h` itself was asked with, where its record says."""
    then = dict(h.prior_context)
    if not then:
        return before
    return tuple(replace(b, context=then[b.record.turn_id]) if b.record.turn_id in then else b for b in before)


def _carried(history: tuple[HistoryTurn, ...], linked: list[dict[str, _Retrieved]]) -> dict[str, _Carried]:
    """Documents the earlier turns still put in context, oldest first seen first, each with its strongest
    exposure and the turn that gave it (the latest such turn on a tie)."""
    carried: dict[str, _Carried] = {}

    def offer(exposure: str, i: int, r: _Retrieved, ns: list[int]) -> None:
        have = carried.get(r.doc_id)
        if have is None:
            carried[r.doc_id] = _Carried(exposure, i, r, list(ns))
            return
        if EXPOSURE_RANK[exposure] >= EXPOSURE_RANK[have.exposure]:
            have.exposure, have.turn = exposure, i
        have.excerpt_ns.extend(ns)

    for i, h in enumerate(history):
        if h.context == "full":
            for r in collect_retrieved(h.record).values():
                offer(r.exposure, i, r, r.excerpt_ns)
        if h.context in ("full", "answer"):
            for r in linked[i].values():
                offer("title", i, r, [])
    return carried


def _dropped(history: tuple[HistoryTurn, ...], linked: list[dict[str, _Retrieved]],
             numbers: set[int]) -> _DroppedExposures:
    """Exposures of earlier turns that the context policy dropped: tool results and excerpts of `answer`
    and `dropped` turns, accepted links of `dropped` turns (`numbers`: the excerpt numbers that name one
    excerpt in the conversation)."""
    gone: dict[str, _Retrieved] = {}
    turns: dict[str, int] = {}
    excerpts: dict[int, int] = {}
    for i, h in enumerate(history):
        if h.context == "full":
            continue
        found = list(collect_retrieved(h.record).values())
        if h.context == "dropped":
            found += linked[i].values()
        for r in found:
            gone.setdefault(r.doc_id, r)
            turns[r.doc_id] = i  # the latest turn that had it
        excerpts.update((e.n, i) for e in h.record.excerpts if e.n in numbers)
    return _DroppedExposures(_lookup(gone), turns, excerpts)


def _history_position(record: TurnRecord, i: int) -> int:
    """The 1-based position of `record.history[i]` in the conversation (its own, else its place in it)."""
    return record.history[i].position or i + 1


# --- the payload -------------------------------------------------------------------------------


def _numbered(record: TurnRecord) -> set[int]:
    """The excerpt numbers a `[n]` may cite: 1..(excerpts in the conversation), each naming exactly one.

    Numbers continue across a conversation (turn 2 starts after turn 1's last), so the count is over every
    turn. A record built by hand (not by the agent, not through `turn_record_from_dict`) may number an
    excerpt 0, -1 or twice; such a number names no single excerpt, so a citation of it is `out_of_range`."""
    every = [e.n for h in record.history for e in h.record.excerpts] + [e.n for e in record.excerpts]
    counts: dict[int, int] = {}
    for n in every:
        counts[n] = counts.get(n, 0) + 1
    k = len(every)
    return {n for n, c in counts.items() if type(n) is int and 1 <= n <= k and c == 1}


def excerpt_numbers(record: TurnRecord) -> dict[int, Excerpt]:
    """n -> excerpt for every number a `[n]` may cite and whose excerpt is in context: this turn's, and those
    of earlier turns whose tool results the context policy kept (`full`)."""
    numbers = _numbered(record)
    kept = [e for h in record.history if h.context == "full" for e in h.record.excerpts]
    return {e.n: e for e in (*kept, *record.excerpts) if e.n in numbers}


def turn_id_of(record: TurnRecord) -> str:
    """The record's turn id, or a stable id derived from the content fields `turn_ids` names (provenance stays pure)."""
    return record.turn_id or content_id(record)


_T = TypeVar("_T")


def distinct_rejections(citations: Iterable[_T], *, target: Callable[[_T], str], valid: Callable[[_T], bool]) -> list[_T]:
    """The rule for listing rejected citations, stated once: one rejection per distinct target, in answer order
    (`citations` in answer order; the first citation of each rejected target stands for it)."""
    out, seen = [], set()
    for c in citations:
        if not valid(c) and target(c) not in seen:
            seen.add(target(c))
            out.append(c)
    return out


def sources_payload(record: TurnRecord) -> Payload:
    """The sources payload of docs/design.md §2 for one turn (plus per-document and per-citation detail); for a
    turn of a conversation, by the rules of docs/design.md §11 (a record with no history gives exactly §2)."""
    retrieved = collect_retrieved(record)
    allow, carried, dropped = retrieved, {}, None
    if record.history:
        linked = _linked(record.history)
        carried = _carried(record.history, linked)
        dropped = _dropped(record.history, linked, _numbered(record))
        allow = dict(retrieved)
        for doc_id, c in carried.items():
            allow.setdefault(doc_id, _Retrieved(doc_id=doc_id, title=c.meta.title, url=c.meta.url, kind=c.meta.kind,
                                                artifact_kind=c.meta.artifact_kind, exposure=c.exposure,
                                                tool_call=None))
    excerpts_by_n = excerpt_numbers(record)
    # an unauditable turn claims nothing: with its allow-list unknown, no citation of it is judged
    found = extract_citations(record.answer, record.mode) if record.status != UNAUDITABLE else []
    citations, omitted = bound_citations(validate(found, allow, excerpts_by_n, dropped))

    cited_order: list[str] = []
    for c in citations:
        if c.valid and c.doc_id not in cited_order:
            cited_order.append(c.doc_id)
    cited = set(cited_order)

    documents = [_document(record, r, retrieved.get(r.doc_id), carried.get(r.doc_id), r.doc_id in cited)
                 for r in allow.values()]
    by_id = {d.doc_id: d for d in documents}
    order = cited_order + [d.doc_id for d in documents if d.consulted and d.doc_id not in cited]
    sources = tuple(Source(doc_id=d.doc_id, cited=d.cited, title=d.title, url=d.url, consulted=d.consulted,
                           exposure=d.exposure, reason=d.reason, kind=d.kind, artifact_kind=d.artifact_kind,
                           label=d.label, carried_from=d.carried_from, carried_position=d.carried_position,
                           exposure_from=d.exposure_from, exposure_position=d.exposure_position)
                    for d in (by_id[i] for i in order))

    rejected = [Rejection(target=c.target, reason=c.reason, nearest_doc_id=c.nearest_doc_id,
                          edit_distance=c.edit_distance, turn_id=turn_id, position=position)
                for c in distinct_rejections(citations, target=lambda c: c.target, valid=lambda c: c.valid)
                for turn_id, position in (_turn_named(record, c),)]

    return Payload(
        answer=record.answer,
        sources=sources,
        sets=Sets(retrieved=tuple(allow), cited=tuple(cited_order),
                  consulted=tuple(i for i in order if by_id[i].consulted)),
        rejected_citations=tuple(rejected),
        turn_id=turn_id_of(record),
        question=record.question,
        mode=record.mode,
        status=record.status,
        error=record.error,
        citations=tuple(_citation_entry(record, c, excerpts_by_n) for c in citations),
        documents=tuple(documents),
        tool_calls=tuple(ToolCallEntry(seq=i, name=t.name, exposure=t.exposure, args=dict(t.args),
                                       doc_ids=tuple(r.doc_id for r in t.results), latency_ms=t.latency_ms,
                                       error=t.error, cut=t.cut.to_dict() if t.cut else None)
                         for i, t in enumerate(record.tool_calls)),
        config=record.config,
        conversation_id=record.conversation_id,
        position=record.position,
        citations_omitted=omitted or None,
    )


#: Citation occurrences kept per answer (docs/security.md): past it, only the first occurrence of each cited
#: document or rejected target is kept, so the three sets and the rejections stay exact and what is stored,
#: printed and drawn stays bounded however many markers an answer repeats.
MAX_CITATIONS = 1000


def bound_citations(citations: list[Citation]) -> tuple[list[Citation], int]:
    """`citations` up to `MAX_CITATIONS`, then only each document's or target's first; and how many were left out."""
    if len(citations) <= MAX_CITATIONS:
        return citations, 0
    kept, seen = citations[:MAX_CITATIONS], set()
    for c in kept:
        seen.add(c.doc_id if c.valid else c.target)
    for c in citations[MAX_CITATIONS:]:
        key = c.doc_id if c.valid else c.target
        if key not in seen:
            seen.add(key)
            kept.append(c)
    return kept, len(citations) - len(kept)


def _consulted_in_turn(record: TurnRecord, own: _Retrieved | None, c: _Carried | None,
                       cited: bool) -> tuple[str, bool, str]:
    """(exposure, consulted?, why) of one document of turn t by docs/design.md §1 and §11 rule 3: `own` is what
    turn t's tools exposed of it, `c` what earlier turns still carry."""
    if c is None or (own is not None and EXPOSURE_RANK[own.exposure] >= EXPOSURE_RANK[c.exposure]):
        return (own.exposure, *consulted_reason(own.exposure, cited))  # this turn's exposure is the strongest: §1
    k = _history_position(record, c.turn)  # the strongest exposure is carried: rules (b)-(e) of §11
    if c.exposure == "title":
        return (c.exposure, *consulted_reason(c.exposure, cited))
    if not cited:
        return c.exposure, False, f"read in turn {k}, not cited here"
    if own is not None and own.exposure == "title":
        # (e) a listing's link: this turn's own tools gave only its title, so the citation links the list the
        # model just received, not the text an earlier turn read ("What articles do you have?" stays source-less)
        return c.exposure, False, f"listed only here, a listing link (its text was read in turn {k})"
    return c.exposure, True, f"read in turn {k}, cited here"


def _document(record: TurnRecord, r: _Retrieved, own: _Retrieved | None, c: _Carried | None, cited: bool) -> DocumentEntry:
    """One document of the allow-list with its exposure, whether it is consulted and why, and where it came from."""
    exposure, consulted, reason = _consulted_in_turn(record, own, c, cited)
    excerpt_ns, carried_from, carried_position, exposure_from, exposure_position = r.excerpt_ns, None, None, None, None
    if c is not None:
        excerpt_ns = excerpt_ns + [n for n in c.excerpt_ns if n not in excerpt_ns]
        earlier = record.history[c.turn].record.turn_id, _history_position(record, c.turn)
        if own is None:  # carried_from only when this turn did not expose it
            carried_from, carried_position = earlier
        if own is None or EXPOSURE_RANK[own.exposure] < EXPOSURE_RANK[c.exposure]:
            exposure_from, exposure_position = earlier  # the exposure shown is the earlier turn's
    return DocumentEntry(doc_id=r.doc_id, title=r.title, url=r.url, cited=cited, consulted=consulted, exposure=exposure,
                    reason=reason, kind=r.kind, artifact_kind=r.artifact_kind,
                    label=artifact_label(r.kind, r.artifact_kind), tool_call=r.tool_call, tool_calls=tuple(r.tool_calls),
                    excerpts=tuple(excerpt_ns), carried_from=carried_from, carried_position=carried_position,
                    exposure_from=exposure_from, exposure_position=exposure_position)


def _turn_named(record: TurnRecord, c: Citation) -> tuple[str | None, int | None]:
    """The earlier turn a `not_in_context` rejection names: its id and position ((None, None) otherwise)."""
    if c.turn is None:
        return None, None
    return record.history[c.turn].record.turn_id, _history_position(record, c.turn)


def _citation_entry(record: TurnRecord, c: Citation, excerpts_by_n: dict[int, Excerpt]) -> CitationEntry:
    excerpt = None
    if c.n is not None:
        e = excerpts_by_n.get(c.n)  # None for a number that names no single excerpt (`out_of_range`)
        if e is not None and e.doc_id is not None:  # the citation record of docs/design.md §3
            excerpt = {"file_name": e.file_name, "chunk_index": e.chunk_index, "page": e.page, "score": e.score,
                       "snippet": e.text, "chunk_type": e.chunk_type, "title": e.title,
                       "generated": e.chunk_type == "generated", "artifact_kind": e.artifact_kind,
                       "label": artifact_label(e.chunk_type, e.artifact_kind)}
    turn_id, position = _turn_named(record, c)
    return CitationEntry(target=c.target, doc_id=c.doc_id, valid=c.valid, reason=c.reason,
                         nearest_doc_id=c.nearest_doc_id, edit_distance=c.edit_distance, start=c.start, end=c.end,
                         n=c.n, excerpt=excerpt, turn_id=turn_id, position=position)
