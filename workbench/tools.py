"""Tools the model can call. Every tool declares its exposure (docs/design.md §1).

`Tool.call()` is the one place that times a call and turns a bad argument into a tool error the
model sees; subclasses implement `_run()` and return exactly what they exposed, so provenance comes
from explicit return values.

Results that fit (docs/design.md, "Results that fit"): given a `Room` (the tokens left in the model's context,
and the size of one page for the turn), `list_articles`, `browse_section` and `search` return one page of their
items that fits, with the total and how to get the next page (`page=`); `fetch_document` returns one part of a
long document (`part=`), recorded with exposure `snippet`. What was left out is the call's `Cut`. Without a
`Room` (a context that is not known) every result is whole, as before.
"""

from __future__ import annotations

import copy
import json
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

from .config import DEFAULT_K
from .corpus import Corpus
from .errors import ToolError, UnknownNameError
from .retrieval.withhold import Withholding
from .text import CHARS_PER_TOKEN, estimate_tokens
from .types import Cut, Exposure, ResultItem, ToolCall

SNIPPET_CHARS = 600
#: Tokens a paged result counts for its own fields besides the items (total, page, the note on the next page).
PAGE_OVERHEAD_TOKENS = 80
#: A result with less room than this is not sent: the tool answers that the context is full.
MIN_ROOM_TOKENS = 40
#: The largest page or part number a model may ask for (a bigger one names no page of any corpus).
MAX_PAGE = 100_000
#: The most documents a model may ask `search` for (unless the turn's k is more).
MAX_SEARCH_K = 20


@dataclass(frozen=True)
class Room:
    """How much of the model's context one tool result may fill, in tokens as `text.estimate_tokens` counts them.

    `tokens` is what is left now (the model's context minus the messages so far and the answer's budget);
    `page_tokens` is the size of one page or part for the whole turn, so that page 2 starts where page 1 ended."""

    tokens: int
    page_tokens: int
    #: Where the result must stop (an item's rank from 0, a character of the text): a recorded call run again
    #: (`Room.again`) gives exactly what it gave the first time.
    upto: int | None = None

    @classmethod
    def again(cls, cut: Cut | None) -> "Room | None":
        """The room that gives a call recorded with `cut` the same result again (None: it was whole)."""
        return None if cut is None else cls(1 << 40, cut.size, cut.end)




@dataclass(frozen=True)
class ToolOutput:
    """The record of the call (for provenance) and the content the model reads."""

    call: ToolCall
    content: dict[str, Any]


class Tool(ABC):
    name: str
    exposure: Exposure
    description: str
    parameters: dict[str, Any] = {"type": "object", "properties": {}}

    def __init__(self, toolbox: "Toolbox"):
        self.toolbox = toolbox

    def spec(self) -> dict[str, Any]:
        """Provider-neutral function declaration (name, description, JSON-Schema parameters)."""
        return {"name": self.name, "description": self.description, "parameters": self.parameters}

    def call(self, args: dict[str, Any] | None, call_id: str | None = None, room: Room | None = None) -> ToolOutput:
        """Run the tool; with `room`, its result fits it (see the module docstring)."""
        start = time.perf_counter()
        args = dict(args or {})
        cut = None
        try:
            unknown = set(args) - set(self.parameters.get("properties", {}))
            if unknown:
                raise ToolError(f"unexpected argument(s) {sorted(unknown)} for {self.name}")
            for req in self.parameters.get("required", []):
                if args.get(req) in (None, ""):
                    raise ToolError(f"{self.name} needs the argument {req!r}")
            results, content, cut = self._run(room, **args)
            error = None
        except ToolError as exc:
            results, content, error = (), {"error": str(exc)}, str(exc)
        except TypeError as exc:  # wrong argument types from a model
            results, content, error = (), {"error": f"bad arguments: {exc}"}, f"bad arguments: {exc}"
        latency = (time.perf_counter() - start) * 1000
        exposure = "snippet" if cut is not None and cut.kind == "part" and self.exposure == "full" else self.exposure
        record = ToolCall(self.name, exposure, args, tuple(results), error, latency, call_id, cut)
        return ToolOutput(record, content)

    @abstractmethod
    def _run(self, room: Room | None, **args) -> tuple[list[ResultItem], dict[str, Any], Cut | None]: ...

    def _item(self, doc, **extra) -> ResultItem:
        return ResultItem(doc.doc_id, doc.title, doc.url, doc.kind, doc.artifact_kind, **extra)

    @staticmethod
    def _listing(doc) -> dict[str, Any]:
        return {"doc_id": doc.doc_id, "title": doc.title, "url": doc.url, "category": doc.category,
                "label": doc.label}


def _as_int(value: Any, name: str, lo: int, hi: int) -> int:
    try:
        n = int(value)
    except (TypeError, ValueError):
        raise ToolError(f"{name} must be an integer, got {value!r}") from None
    return max(lo, min(hi, n))


def _tokens(value: Any) -> int:
    """Tokens `value` counts as in a tool result (its JSON, as the model receives it)."""
    return estimate_tokens(json.dumps(value, ensure_ascii=False))


def _no_room(room: Room) -> ToolError:
    return ToolError(f"the model's context has no room left for this result (about {max(room.tokens, 0):,} tokens "
                     f"left); answer with what you have")


def page_ranges(costs: list[int], capacity: int) -> list[tuple[int, int]]:
    """Items of token `costs` in pages of at most `capacity` tokens, as [start, end) ranges (one item at least)."""
    pages, start, used = [], 0, 0
    for i, cost in enumerate(costs):
        if i > start and used + cost > capacity:
            pages.append((start, i))
            start, used = i, 0
        used += cost
    pages.append((start, len(costs)))
    return pages


@dataclass(frozen=True)
class _Page:
    """The items [start, end) of a listing that one result shows, its `Cut` (None: whole) and the note it adds."""

    start: int
    end: int
    cut: Cut | None = None
    note: dict[str, Any] | None = None


def _page(tool: str, entries: list[Any], page: Any, room: Room | None, noun: str, narrow: str = "") -> _Page:
    """Page `page` of `entries` as it fits `room` (docs/design.md, "Results that fit"); without a room, all of them."""
    n = len(entries)
    page = _as_int(1 if page is None else page, "page", 1, MAX_PAGE)
    if room is None:
        if page != 1:
            raise ToolError(f"there is no page {page}: the {n} {noun} are all in page 1")
        return _Page(0, n)
    costs = [_tokens(e) + 1 for e in entries]
    if page == 1 and room.upto is None and sum(costs) + PAGE_OVERHEAD_TOKENS <= room.tokens:  # it fits whole
        return _Page(0, n)
    pages = page_ranges(costs, max(1, room.page_tokens - PAGE_OVERHEAD_TOKENS))
    if page > len(pages):
        raise ToolError(f"there is no page {page}: the {n} {noun} fill {len(pages)} page(s)")
    start, end = pages[page - 1]
    fit, shown, used = room.tokens - PAGE_OVERHEAD_TOKENS, start, 0
    stop = end if room.upto is None else min(end, room.upto)
    while shown < stop and used + costs[shown] <= fit:
        used, shown = used + costs[shown], shown + 1
    if n and (shown == start or fit < MIN_ROOM_TOKENS):
        raise _no_room(room)
    if len(pages) == 1 and shown == end:
        return _Page(0, n)
    span = f"{noun} {start + 1}–{shown} of {n}" if shown > start else f"no {noun}"
    if shown < end:
        reason = (f"page {page} of {len(pages)} cut to {span}: only about {room.tokens:,} tokens were left in the "
                  f"model's context")
        nxt = "the context has no room for the rest of this page: answer with what you have"
    else:
        reason = (f"the {n} {noun} do not fit in one result: page {page} of {len(pages)} ({span}), at most "
                  f"{room.page_tokens:,} tokens a page")
        nxt = (f"call {tool} again with page={page + 1} for the next {noun}{narrow}" if page < len(pages)
               else f"this is the last page of {noun}")
    cut = Cut("page", page, len(pages), n, start, shown, room.page_tokens, reason)
    return _Page(start, shown, cut, {"total": n, "page": page, "pages": len(pages), "shown": span, "next": nxt})


def _paged(content: dict[str, Any], page: _Page) -> dict[str, Any]:
    return {**content, **(page.note or {})}


PAGE_PARAM = {"type": "integer", "description": "which page of a long result (from 1; the result says how many)",
              "default": 1}


class Search(Tool):
    name = "search"
    exposure = "snippet"
    description = "Search the knowledge base. Returns the best passage (snippet) of each matching document."
    parameters = {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "what to look for"},
            "k": {"type": "integer", "description": "how many documents"},
            "page": PAGE_PARAM,
        },
        "required": ["query"],
    }

    def spec(self) -> dict[str, Any]:
        """The declaration with the turn's k as the default of `k` (`Toolbox.searching`), and its maximum."""
        spec = super().spec()
        k = {**spec["parameters"]["properties"]["k"], "default": self.toolbox.search_k,
             "description": f"how many documents (1-{self._max_k})"}
        return {**spec, "parameters": {**spec["parameters"],
                                       "properties": {**spec["parameters"]["properties"], "k": k}}}

    @property
    def _max_k(self) -> int:
        return max(MAX_SEARCH_K, self.toolbox.search_k)

    def _run(self, room: Room | None, query: str, k: int | None = None, page: int | None = None):
        k = _as_int(self.toolbox.search_k if k is None else k, "k", 1, self._max_k)
        if not isinstance(query, str):
            raise ToolError("query must be a string")
        retrieval = self.toolbox.retriever.retrieve(query, k * 4)
        items, seen = [], set()
        for hit in retrieval.hits:  # best chunk per document, documents ranked by their best chunk
            if hit.chunk.doc_id in seen:
                continue
            seen.add(hit.chunk.doc_id)
            doc = self.toolbox.corpus.get(hit.chunk.doc_id)
            items.append(self._item(doc, rank=len(items) + 1, score=round(hit.score, 4),
                                    chunk_index=hit.chunk.chunk_index, page=hit.chunk.page,
                                    snippet=hit.chunk.text[:SNIPPET_CHARS]))
            if len(items) == k:
                break
        entries = [{"doc_id": i.doc_id, "title": i.title, "url": i.url, "score": i.score, "snippet": i.snippet,
                    "kind": i.kind, "label": self.toolbox.corpus.get(i.doc_id).label} for i in items]
        shown = _page(self.name, entries, page, room, "results")
        return (items[shown.start:shown.end], _paged({"results": entries[shown.start:shown.end]}, shown), shown.cut)


class FetchDocument(Tool):
    name = "fetch_document"
    exposure = "full"
    description = ("Open one document by its doc_id (or URL) and read its text; a long one comes in parts "
                   "(the result says how many).")
    parameters = {
        "type": "object",
        "properties": {"doc_id": {"type": "string", "description": "a doc_id returned by another tool"},
                       "part": {"type": "integer", "description": "which part of a long document (from 1)",
                                "default": 1}},
        "required": ["doc_id"],
    }

    def _run(self, room: Room | None, doc_id: str, part: int | None = None):
        doc = self.toolbox.resolve(str(doc_id))
        derived = [d for d in doc.derived_from if d not in self.toolbox.withheld]  # withheld: not in the corpus
        head = {**self._listing(doc), "derived_from": derived}
        part = _as_int(1 if part is None else part, "part", 1, MAX_PAGE)
        if room is None:
            if part != 1:
                raise ToolError(f"there is no part {part}: {doc.doc_id!r} comes whole, in part 1")
            return [self._item(doc, rank=1)], {**head, "text": doc.text}, None
        overhead = _tokens(head) + PAGE_OVERHEAD_TOKENS
        whole = {**head, "text": doc.text}
        if part == 1 and room.upto is None and _tokens(whole) + PAGE_OVERHEAD_TOKENS <= room.tokens:  # it fits whole
            return [self._item(doc, rank=1)], whole, None
        bounds = part_ranges(doc.text, (room.page_tokens - overhead) * CHARS_PER_TOKEN)
        if part > len(bounds):
            raise ToolError(f"there is no part {part}: {doc.doc_id!r} has {len(bounds)} part(s)")
        start, end = bounds[part - 1]
        fit = (room.tokens - overhead) * CHARS_PER_TOKEN
        if fit < MIN_ROOM_TOKENS * CHARS_PER_TOKEN:
            raise _no_room(room)
        shown = start + len(_prefix_within(doc.text[start:end if room.upto is None else min(end, room.upto)], fit))
        if len(bounds) == 1 and shown == end:
            return [self._item(doc, rank=1)], {**head, "text": doc.text}, None
        n, chars = len(bounds), len(doc.text)
        where = f"part {part} of {n} (characters {start + 1:,}–{shown:,} of {chars:,})"
        if shown < end:
            reason = f"{where}: the part was cut, only about {room.tokens:,} tokens were left in the model's context"
            nxt = "the context has no room for the rest of this part: answer with what you have"
        else:
            reason = f"the document ({chars:,} characters) does not fit in one result: {where}"
            nxt = (f"call fetch_document again with doc_id={doc.doc_id!r} and part={part + 1} for the next part"
                   if part < n else "this is the last part")
        cut = Cut("part", part, n, chars, start, shown, room.page_tokens, reason)
        content = {**head, "part": part, "parts": n, "shown": where, "next": nxt, "text": doc.text[start:shown]}
        return [self._item(doc, rank=1)], content, cut


def _prefix_within(text: str, limit: int) -> str:
    """The longest prefix of `text` whose JSON string is at most `limit` characters (escapes count)."""
    if len(json.dumps(text, ensure_ascii=False)) <= limit:
        return text
    lo, hi = 0, min(len(text), max(limit, 0))
    while lo < hi:  # binary search: the escaped length grows with the prefix
        mid = (lo + hi + 1) // 2
        if len(json.dumps(text[:mid], ensure_ascii=False)) <= limit:
            lo = mid
        else:
            hi = mid - 1
    return text[:lo]


def part_ranges(text: str, limit: int) -> list[tuple[int, int]]:
    """`text` in parts whose JSON strings are at most `limit` characters, as [start, end) ranges, each ending after
    a line break or a space where one is near (so words are not split)."""
    limit = max(limit, 200)
    bounds, start = [], 0
    while True:
        piece = _prefix_within(text[start:], limit)
        end = start + len(piece)
        if end >= len(text):
            bounds.append((start, len(text)))
            return bounds
        cut = max(piece.rfind("\n"), piece.rfind(" "))
        if cut > len(piece) * 3 // 4:
            end = start + cut + 1
        bounds.append((start, end))
        start = end


class ListCategories(Tool):
    name = "list_categories"
    exposure = "title"
    description = "List the knowledge base's categories with how many articles each has."

    def _run(self, room: Room | None):
        cats = self.toolbox.corpus.categories()
        entries = [{"category": c, "n_articles": n} for c, n in cats.items()]
        if room is not None and _tokens(entries) > room.tokens:  # exposes no document: shortened, never paged
            raise _no_room(room)
        return [], {"categories": entries}, None


class ListArticles(Tool):
    name = "list_articles"
    exposure = "title"
    description = ("List article titles and links, optionally only those in one category; a long list comes in "
                   "pages (the result says how many).")
    parameters = {
        "type": "object",
        "properties": {"category": {"type": "string", "description": "a category from list_categories"},
                       "page": PAGE_PARAM},
    }

    def _run(self, room: Room | None, category: str | None = None, page: int | None = None):
        docs = self.toolbox.in_category(category) if category else list(self.toolbox.corpus.documents)
        entries = [self._listing(d) for d in docs]
        shown = _page(self.name, entries, page, room, "articles",
                      "" if category else ", or list the articles of one category (list_categories names them)")
        items = [self._item(d, rank=i) for i, d in enumerate(docs, start=1)][shown.start:shown.end]
        return items, _paged({"articles": entries[shown.start:shown.end]}, shown), shown.cut


class BrowseSection(Tool):
    name = "browse_section"
    exposure = "title"
    description = "Browse one category (section): its sub-categories and the titles and links of its articles."
    parameters = {
        "type": "object",
        "properties": {"category": {"type": "string", "description": "a category from list_categories"},
                       "page": PAGE_PARAM},
        "required": ["category"],
    }

    def _run(self, room: Room | None, category: str, page: int | None = None):
        docs = self.toolbox.in_category(category)
        prefix = self.toolbox.match_category(category)
        subs = sorted({d.category for d in docs if d.category != prefix})
        entries = [self._listing(d) for d in docs]
        if room is not None:  # the sub-categories come with every page, within the room left now
            room = Room(room.tokens - _tokens(subs), room.page_tokens, room.upto)
        shown = _page(self.name, entries, page, room, "articles", ", or browse one of its subcategories")
        items = [self._item(d, rank=i) for i, d in enumerate(docs, start=1)][shown.start:shown.end]
        content = {"category": prefix, "subcategories": subs, "articles": entries[shown.start:shown.end]}
        return items, _paged(content, shown), shown.cut


TOOL_CLASSES: tuple[type[Tool], ...] = (Search, FetchDocument, ListCategories, ListArticles, BrowseSection)


class Toolbox:
    """The tools over one corpus and retriever; `call()` never raises for a model's mistake."""

    def __init__(self, corpus, retriever, tool_classes=TOOL_CLASSES):
        self.corpus = corpus
        self.retriever = retriever
        self.tool_classes = tuple(tool_classes)
        self.tools: dict[str, Tool] = {cls.name: cls(self) for cls in tool_classes}
        self._by_url = {d.url.rstrip("/"): d for d in corpus.documents if d.url}
        #: Documents this toolbox acts as if the corpus did not hold (`withholding`).
        self.withheld: frozenset[str] = frozenset()
        #: How many documents `search` returns when the model does not say (`searching`: the turn's k).
        self.search_k = DEFAULT_K

    def searching(self, k: int) -> "Toolbox":
        """These tools with `search` returning `k` documents unless the model asks for another number (at most
        `MAX_SEARCH_K`, or `k` when more): the run's k reaches agent mode as the tool's declared default. A view
        over the same corpus and index, like `withholding`; this toolbox is untouched."""
        if k == self.search_k:
            return self
        box = copy.copy(self)
        box.search_k = k
        box.tools = {cls.name: cls(box) for cls in self.tool_classes}
        return box

    def withholding(self, doc_ids) -> "Toolbox":
        """These tools with `doc_ids` withheld, for re-running a turn without them (docs/design.md §9).

        A view over the same corpus and the same loaded index (nothing is rebuilt, copied or cached;
        this toolbox is untouched): `search` and excerpt mode never return the withheld documents'
        chunks and rank the rest as if those were not in the corpus (`retrieval/withhold.py`, which
        also states the one approximation: BM25 term statistics still come from the whole corpus);
        `fetch_document` answers a withheld id or URL with exactly the error of an id that does not
        exist; `list_articles`, `browse_section` and `list_categories` (its counts too) leave them
        out, and a category whose every document is withheld is unknown; `derived_from` omits them.
        """
        withheld = frozenset(doc_ids) - self.withheld
        if not withheld:
            return self
        box = Toolbox(_CorpusWithout(self.corpus, withheld), Withholding(self.retriever, withheld),
                      self.tool_classes)
        box.withheld = self.withheld | withheld
        box.search_k = self.search_k
        return box

    def specs(self) -> list[dict[str, Any]]:
        return [t.spec() for t in self.tools.values()]

    def call(self, name: str, args: Any, call_id: str | None = None, room: Room | None = None) -> ToolOutput:
        """Run tool `name` (its result within `room`, when given); an unknown tool or non-object arguments come back
        as a tool error."""
        tool = self.tools.get(name)
        if tool is None:
            msg = str(UnknownNameError("tool", name, list(self.tools)))
            return ToolOutput(ToolCall(name, "title", args if isinstance(args, dict) else {}, (), msg, 0.0, call_id),
                              {"error": msg})
        if not isinstance(args, dict):
            msg = f"arguments for {name} must be a JSON object, got {str(args)[:200]!r}"
            return ToolOutput(ToolCall(name, tool.exposure, {}, (), msg, 0.0, call_id), {"error": msg})
        return tool.call(args, call_id, room)

    def resolve(self, doc_id: str):
        doc = self.corpus.get(doc_id.strip()) or self._by_url.get(doc_id.strip().split("#")[0].rstrip("/"))
        if doc is None:
            raise ToolError(f"no document with doc_id {doc_id!r}; use a doc_id returned by search or list_articles")
        return doc

    def match_category(self, category: str) -> str:
        if not isinstance(category, str):
            raise ToolError(f"category must be a string, got {category!r}"[:300])
        cats = self.corpus.categories()
        wanted = category.strip().strip("/").lower()
        for c in cats:
            if c.lower() == wanted:
                return c
        tails = [c for c in cats if c.lower().rsplit("/", 1)[-1] == wanted]
        if len(tails) == 1:
            return tails[0]
        prefixes = {c.split("/")[0] for c in cats}
        for p in prefixes:
            if p.lower() == wanted:
                return p
        raise ToolError(f"unknown category {category!r}; call list_categories for the valid names")

    def in_category(self, category: str) -> list:
        prefix = self.match_category(category)
        return [d for d in self.corpus.documents if d.category == prefix or d.category.startswith(prefix + "/")]


class _CorpusWithout(Corpus):
    """`base` minus some documents, as the tools of a withholding toolbox see it.

    Keeps `base`'s id, path and content hash: a re-run records the same knowledge base as the turn
    it verifies (what was withheld is recorded beside it), and hashing every text again would cost
    more than the re-run itself.
    """

    def __init__(self, base: Corpus, withheld: frozenset[str]):  # no super().__init__: nothing to hash
        self.corpus_id, self.path, self.content_hash = base.corpus_id, base.path, base.content_hash
        self.documents = tuple(d for d in base.documents if d.doc_id not in withheld)
        self._by_id = {d.doc_id: d for d in self.documents}
