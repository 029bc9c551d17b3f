"""Units (chunks, nodes, hits) and the documents they belong to (docs/design.md §12 *Documents and units*).

Units come from every RETRIEVER span's `retrieval.documents`, every RERANKER span's input and output documents,
every TOOL span's output and every `role: tool` message, a tool result being parsed as JSON when it is JSON.
A unit belongs to a document: with a corpus, the corpus document its url, id or file name names; otherwise the
document its metadata names (`url`, `doc_id`, `document_id`, `source`, `file_name`), else the unit itself.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any, Iterator

from ..corpus import Corpus
from ..provenance import normalize_url
from ..types import file_name_of
from .shapes import tool_args
from .spans import Span
from .text_results import text_documents

_DOC_KEY = re.compile(r"^(retrieval\.documents|reranker\.(?:input|output)_documents)\.(\d+)\.document\.(\w+)$")
_ID_KEYS = ("doc_id", "document_id", "source", "file_name", "id")
_TEXT_KEYS = ("text", "content", "snippet", "body", "page_content", "chunk", "passage")
_TITLE_KEYS = ("title", "name")
_MAX_UNITS_PER_RESULT = 1000
_MIN_TEXT = 40  # a corpus text shorter than this is too common to name the result that holds it


@dataclass(frozen=True, slots=True)
class Origin:
    """Where units came from: a retriever, reranker or tool span, or a tool message of a model input."""

    name: str
    kind: str  # RETRIEVER | RERANKER | TOOL
    args: dict[str, Any] = field(default_factory=dict)
    call_id: str | None = None


@dataclass(frozen=True, slots=True)
class Unit:
    origin: Origin
    content: str
    title: str | None = None
    url: str | None = None
    key: str | None = None  # the document id its metadata names
    unit_id: str | None = None
    whole: bool = False  # a tool result that is one document's full record
    score: float | None = None
    rank: int | None = None
    file_name: str | None = None
    unnamed: bool = False  # a tool result that names no document: a unit of its own


@dataclass(frozen=True, slots=True)
class DocRef:
    doc_id: str
    title: str | None
    url: str | None
    text: str | None  # the corpus text, when a corpus names it


@dataclass(frozen=True, slots=True)
class ToolSpan:
    """What a TOOL span (OpenInference, or a GenAI `execute_tool` span) says of its call: the tool's name, the
    arguments it ran with (`input.value` or `gen_ai.tool.call.arguments`; never `tool.parameters`, the tool's
    JSON schema), its tool-call id when it names one, and its result text."""

    name: str
    args: dict[str, Any]
    call_id: str | None
    output: str | None


def tool_span(span: Span) -> ToolSpan:
    a = span.attributes
    name = next((a[k] for k in ("tool.name", "gen_ai.tool.name") if isinstance(a.get(k), str) and a[k]), span.name)
    raw = next((a[k] for k in ("input.value", "gen_ai.tool.call.arguments") if isinstance(a.get(k), str)), None)
    call_id = next((str(a[k]) for k in ("tool_call.id", "gen_ai.tool.call.id") if a.get(k) not in (None, "")), None)
    output = next((a[k] for k in ("output.value", "gen_ai.tool.call.result") if isinstance(a.get(k), str)), None)
    return ToolSpan(name=str(name), args=tool_args(raw), call_id=call_id, output=output)


def span_units(span: Span, origin: Origin | None = None) -> list[Unit]:
    """Units a RETRIEVER or RERANKER span lists (a reranker's output documents), credited to `origin` (the tool
    call it is nested in) or to the span itself."""
    if span.kind not in ("RETRIEVER", "RERANKER"):
        return []
    fields: dict[tuple[str, int], dict[str, Any]] = {}
    for key, value in span.attributes.items():
        m = _DOC_KEY.match(key)
        if m:
            fields.setdefault((m.group(1), int(m.group(2))), {})[m.group(3)] = value
    want = "retrieval.documents" if span.kind == "RETRIEVER" else "reranker.output_documents"
    origin = origin or Origin(name=span.name, kind=span.kind)
    out = []
    for (group, i), f in sorted(fields.items()):
        if group == want:
            meta = _json_object(f.get("metadata"))
            out.append(_unit(origin, f.get("content"), meta, f.get("id"), f.get("score"), i + 1))
    return out


def reranker_inputs(span: Span, origin: Origin | None = None) -> list[Unit]:
    """A reranker's input documents (what it was handed: candidates it may drop)."""
    if span.kind != "RERANKER":
        return []
    out = []
    for key, value in sorted(span.attributes.items()):
        m = _DOC_KEY.match(key)
        if m and m.group(1) == "reranker.input_documents" and m.group(3) == "content":
            i = m.group(2)
            meta = _json_object(span.attributes.get(f"reranker.input_documents.{i}.document.metadata"))
            out.append(_unit(origin or Origin(name=span.name, kind="RERANKER"), value, meta,
                             span.attributes.get(f"reranker.input_documents.{i}.document.id"), None, int(i) + 1))
    return out


def _unit(origin: Origin, content: Any, meta: dict[str, Any], unit_id: Any, score: Any, rank: int,
          whole: bool = False) -> Unit:
    key = next((str(meta[k]) for k in _ID_KEYS if meta.get(k) not in (None, "")), None)
    url = meta.get("url") if isinstance(meta.get("url"), str) else None
    title = next((str(meta[k]) for k in _TITLE_KEYS if isinstance(meta.get(k), str) and meta[k]), None)
    return Unit(origin=origin, content=content if isinstance(content, str) else "", title=title, url=url, key=key,
                unit_id=None if unit_id is None else str(unit_id), whole=whole,
                score=float(score) if isinstance(score, (int, float)) else None, rank=rank,
                file_name=meta.get("file_name") if isinstance(meta.get("file_name"), str) else None)


def tool_units(text: str, origin: Origin, known: list[Unit] = ()) -> list[Unit]:
    """Units a tool result names (docs/design.md §12 *Tool results*), its framework's wrapper taken off first:
    the records of its JSON (a single record with text is the document's full record); else the documents a
    plain text shows (blocks named by a url or id, each matched to a `known` unit of a retriever nested in the
    tool when it names one; a JSON object holding only one text is that text); else the result itself, one unit
    of its own."""
    text = unwrapped(text)
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        data = None
    if isinstance(data, dict) and len(data) == 1 and isinstance(next(iter(data.values())), str) \
            and not _is_record(data):  # a text under one key (Gemini wraps a function's text: `{"article": …}`)
        text, data = next(iter(data.values())), None
    if isinstance(data, dict) and _is_record(data):
        content = next((data[k] for k in _TEXT_KEYS if isinstance(data.get(k), str)), "")
        return [_unit(origin, content, data, data.get("id"), data.get("score"), 1, whole=bool(content))]
    records = list(_records(data))[:_MAX_UNITS_PER_RESULT] if data is not None else []
    if records:
        return [_unit(origin, next((r[k] for k in _TEXT_KEYS if isinstance(r.get(k), str)), ""), r, r.get("id"),
                      r.get("score"), i + 1) for i, r in enumerate(records)]
    blocks = text_documents(text, known) if data is None else []
    if blocks:
        return [_unit(origin, body, meta, meta.get("unit_id"), None, i + 1) for i, (body, meta) in enumerate(blocks)]
    unit_id = f"{origin.name}:{origin.call_id or hashlib.sha256(text.encode()).hexdigest()[:12]}"
    return [Unit(origin=origin, content=text, unit_id=unit_id, rank=1, unnamed=True)]


def unwrapped(text: str) -> str:
    """A tool result without its framework's wrapper: LangChain's serialised `ToolMessage` (`{"type": "tool",
    "data": {"content": …}}`, `{"lc": 1, "type": "constructor", "id": [… "ToolMessage"], "kwargs": {…}}`, or the
    message's own fields) is its `content`; llama-index's `ToolOutput` (`{"blocks": [{"text": …}], "tool_name": …}`)
    is its blocks' text; each also under OpenLLMetry's `{"output": …}`; anything else is the result as it is."""
    if not text.startswith("{"):
        return text
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return text
    if isinstance(data, dict) and isinstance(data.get("output"), dict) and set(data) <= {"output", "kwargs"}:
        data = data["output"]  # OpenLLMetry's `gen_ai.tool.call.result`: `{"output": <ToolMessage>, "kwargs": …}`
    if not isinstance(data, dict):
        return text
    inner = None
    if data.get("type") == "tool" and isinstance(data.get("data"), dict):
        inner = data["data"]
    elif data.get("lc") == 1 and isinstance(data.get("kwargs"), dict) and "ToolMessage" in map(str, data.get("id") or ()):
        inner = data["kwargs"]
    elif data.get("type") == "tool" and "tool_call_id" in data:
        inner = data
    elif "tool_name" in data and isinstance(data.get("blocks"), list):  # llama-index's `ToolOutput`
        inner = {"content": data["blocks"]}
    if inner is None or "content" not in inner:
        return text
    content = inner["content"]
    if isinstance(content, list):
        texts = [b.get("text") if isinstance(b, dict) else b for b in content]
        if all(isinstance(t, str) for t in texts):
            return "\n".join(texts)
    return content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)


def _is_record(d: dict[str, Any]) -> bool:
    return any(d.get(k) not in (None, "") for k in (*_ID_KEYS, "url"))


def _records(data: Any, depth: int = 0) -> Iterator[dict[str, Any]]:
    if depth > 8:
        return
    if isinstance(data, list):
        for item in data:
            yield from _records(item, depth + 1)
    elif isinstance(data, dict):
        if _is_record(data):
            yield data
        else:
            for value in data.values():
                if isinstance(value, (list, dict)):
                    yield from _records(value, depth + 1)


def _json_object(value: Any) -> dict[str, Any]:
    data = tool_args(value) if isinstance(value, (str, dict)) else {}
    return {} if set(data) == {"arguments"} else data


class Resolver:
    """The document a unit belongs to: a corpus document when a corpus names it, else what its metadata names."""

    def __init__(self, corpus: Corpus | None = None):
        self.corpus = corpus
        self._by_url: dict[str, str] = {}
        self._by_file: dict[str, str] = {}
        self._texts: list[tuple[str, Any]] | None = None  # normalised corpus texts, read at the first need
        for d in corpus.documents if corpus is not None else ():
            if d.url:
                self._by_url.setdefault(normalize_url(d.url), d.doc_id)
            if d.file_name:
                self._by_file.setdefault(d.file_name, d.doc_id)

    def document(self, unit: Unit) -> DocRef:
        found = self._in_corpus(unit)
        if found is None and unit.unnamed:
            found = self._holding(unit.content)
        if found is not None:
            return DocRef(doc_id=found.doc_id, title=found.title, url=found.url, text=found.text)
        doc_id = unit.key or unit.url or unit.unit_id or "unit-" + hashlib.sha256(unit.content.encode()).hexdigest()[:16]
        return DocRef(doc_id=doc_id, title=unit.title, url=unit.url, text=None)

    def _holding(self, content: str):
        """The first corpus document whose whole text a result that names no document holds (a tool that returns
        an article's text under its title only), or None."""
        if self.corpus is None:
            return None
        if self._texts is None:
            self._texts = [(" ".join(d.text.split()), d) for d in self.corpus.documents if len(d.text.strip()) >= _MIN_TEXT]
        text = " ".join(content.split())
        return next((d for whole, d in self._texts if whole in text), None)

    def _in_corpus(self, unit: Unit):
        if self.corpus is None:
            return None
        for name in (unit.key, unit.unit_id):
            if name and name in self.corpus:
                return self.corpus.get(name)
        for value in (unit.url, unit.key):
            if value and "/" in value and normalize_url(value) in self._by_url:
                return self.corpus.get(self._by_url[normalize_url(value)])
        for value in (unit.file_name, unit.key):
            name = file_name_of(value)
            if name and name in self._by_file:
                return self.corpus.get(self._by_file[name])
        return None
