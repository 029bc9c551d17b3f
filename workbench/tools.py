"""Tools the model can call. Every tool declares its exposure (docs/design.md §1).

`Tool.call()` is the one place that times a call and turns a bad argument into a tool error the
model sees; subclasses implement `_run()` and return exactly what they exposed, so provenance comes
from explicit return values.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

from .errors import ToolError, UnknownNameError
from .types import Exposure, ResultItem, ToolCall

SNIPPET_CHARS = 600


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

    def call(self, args: dict[str, Any] | None, call_id: str | None = None) -> ToolOutput:
        start = time.perf_counter()
        args = dict(args or {})
        try:
            unknown = set(args) - set(self.parameters.get("properties", {}))
            if unknown:
                raise ToolError(f"unexpected argument(s) {sorted(unknown)} for {self.name}")
            for req in self.parameters.get("required", []):
                if args.get(req) in (None, ""):
                    raise ToolError(f"{self.name} needs the argument {req!r}")
            results, content = self._run(**args)
            error = None
        except ToolError as exc:
            results, content, error = (), {"error": str(exc)}, str(exc)
        except TypeError as exc:  # wrong argument types from a model
            results, content, error = (), {"error": f"bad arguments: {exc}"}, f"bad arguments: {exc}"
        latency = (time.perf_counter() - start) * 1000
        record = ToolCall(self.name, self.exposure, args, tuple(results), error, latency, call_id)
        return ToolOutput(record, content)

    @abstractmethod
    def _run(self, **args) -> tuple[list[ResultItem], dict[str, Any]]: ...

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


class Search(Tool):
    name = "search"
    exposure = "snippet"
    description = "Search the knowledge base. Returns the best passage (snippet) of each matching document."
    parameters = {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "what to look for"},
            "k": {"type": "integer", "description": "how many documents (1-20)", "default": 5},
        },
        "required": ["query"],
    }

    def _run(self, query: str, k: int = 5):
        k = _as_int(k, "k", 1, 20)
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
        content = {"results": [
            {"doc_id": i.doc_id, "title": i.title, "url": i.url, "score": i.score, "snippet": i.snippet,
             "kind": i.kind, "label": self.toolbox.corpus.get(i.doc_id).label}
            for i in items
        ]}
        return items, content


class FetchDocument(Tool):
    name = "fetch_document"
    exposure = "full"
    description = "Open one document by its doc_id (or URL) and read its whole text."
    parameters = {
        "type": "object",
        "properties": {"doc_id": {"type": "string", "description": "a doc_id returned by another tool"}},
        "required": ["doc_id"],
    }

    def _run(self, doc_id: str):
        doc = self.toolbox.resolve(str(doc_id))
        content = {**self._listing(doc), "derived_from": list(doc.derived_from), "text": doc.text}
        return [self._item(doc, rank=1)], content


class ListCategories(Tool):
    name = "list_categories"
    exposure = "title"
    description = "List the knowledge base's categories with how many articles each has."

    def _run(self):
        cats = self.toolbox.corpus.categories()
        return [], {"categories": [{"category": c, "n_articles": n} for c, n in cats.items()]}


class ListArticles(Tool):
    name = "list_articles"
    exposure = "title"
    description = "List article titles and links, optionally only those in one category."
    parameters = {
        "type": "object",
        "properties": {"category": {"type": "string", "description": "a category from list_categories"}},
    }

    def _run(self, category: str | None = None):
        docs = self.toolbox.in_category(category) if category else list(self.toolbox.corpus.documents)
        items = [self._item(d, rank=i) for i, d in enumerate(docs, start=1)]
        return items, {"articles": [self._listing(d) for d in docs]}


class BrowseSection(Tool):
    name = "browse_section"
    exposure = "title"
    description = "Browse one category (section): its sub-categories and the titles and links of its articles."
    parameters = {
        "type": "object",
        "properties": {"category": {"type": "string", "description": "a category from list_categories"}},
        "required": ["category"],
    }

    def _run(self, category: str):
        docs = self.toolbox.in_category(category)
        prefix = self.toolbox.match_category(category)
        subs = sorted({d.category for d in docs if d.category != prefix})
        items = [self._item(d, rank=i) for i, d in enumerate(docs, start=1)]
        return items, {"category": prefix, "subcategories": subs, "articles": [self._listing(d) for d in docs]}


TOOL_CLASSES: tuple[type[Tool], ...] = (Search, FetchDocument, ListCategories, ListArticles, BrowseSection)


class Toolbox:
    """The tools over one corpus and retriever; `call()` never raises for a model's mistake."""

    def __init__(self, corpus, retriever, tool_classes=TOOL_CLASSES):
        self.corpus = corpus
        self.retriever = retriever
        self.tools: dict[str, Tool] = {cls.name: cls(self) for cls in tool_classes}
        self._by_url = {d.url.rstrip("/"): d for d in corpus.documents if d.url}

    def specs(self) -> list[dict[str, Any]]:
        return [t.spec() for t in self.tools.values()]

    def call(self, name: str, args: Any, call_id: str | None = None) -> ToolOutput:
        """Run tool `name`; an unknown tool or non-object arguments come back as a tool error."""
        tool = self.tools.get(name)
        if tool is None:
            msg = str(UnknownNameError("tool", name, list(self.tools)))
            return ToolOutput(ToolCall(name, "title", args if isinstance(args, dict) else {}, (), msg, 0.0, call_id),
                              {"error": msg})
        if not isinstance(args, dict):
            msg = f"arguments for {name} must be a JSON object, got {str(args)[:200]!r}"
            return ToolOutput(ToolCall(name, tool.exposure, {}, (), msg, 0.0, call_id), {"error": msg})
        return tool.call(args, call_id)

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
