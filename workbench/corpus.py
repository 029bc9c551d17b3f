"""Knowledge bases: a folder of Markdown (YAML front matter), plain-text and PDF files, or a corpus JSONL file.

Plain text and PDF files need no front matter: the id is the file's path below the corpus folder
without its suffix, the title the PDF's metadata title or the first line. PDFs keep their text
page by page (`Document.pages`, extracted with pypdf) so chunks and citations carry a page number;
a plain-text file has pages only where it holds form feeds (\f).

Bad input raises `CorpusError` naming the file (and line); nothing is silently skipped.
See docs/design.md §5.
"""

from __future__ import annotations

import hashlib
import json
import math
import threading
import unicodedata
from collections import Counter
from pathlib import Path
from dataclasses import dataclass
from typing import Any, Iterable

import yaml

from . import safe_yaml
from .errors import CorpusError
from .jsonl import json_objects
from .terminal import all_visible
from .text import STOPWORDS, distinct_words, english_stemmer
from .types import Document

#: Front matter larger than this is refused (safe_yaml: no aliases, bounded size and nesting).
MAX_FRONT_MATTER_BYTES = safe_yaml.MAX_BYTES

#: Suffixes read from a corpus folder; other files are ignored.
MARKDOWN_SUFFIXES = (".md", ".markdown")
FOLDER_SUFFIXES = MARKDOWN_SUFFIXES + (".txt", ".pdf")
OPTIONAL_FIELDS = ("url", "category", "section", "kind", "artifact_kind")

#: A PDF's text costs work its file size does not show: a few KB of compressed content stream can
#: inflate to megabytes of drawing operators (or forms that draw forms), which pypdf parses and runs
#: in Python at ~2 MB a second. So reading one PDF stops, with a clear error instead of minutes of
#: work, past this much decoded page content in one file (counted before a page is parsed; a text
#: page holds 5–50 KB, so 16 MB is a book of hundreds of pages and ~8 s of pypdf), past
#: PDF_MAX_OPERATORS operators run (form contents included) or past PDF_MAX_TEXT_CHARS of text. The
#: app also bounds the page content of all PDFs of a corpus together (`load_corpus(pdf_content_bytes=…)`).
PDF_MAX_CONTENT_BYTES = 16 * 2**20
PDF_MAX_OPERATORS = 5_000_000
PDF_MAX_TEXT_CHARS = 20_000_000


class Corpus:
    """An immutable set of documents with a content hash (the index cache key)."""

    def __init__(self, corpus_id: str, path: str, documents: Iterable[Document], skipped: Iterable[str] = ()):
        self.corpus_id = corpus_id
        self.path = path
        self.documents: tuple[Document, ...] = tuple(documents)
        #: Files of a folder that were deliberately not read, each "path: why" (shown as warnings).
        self.skipped: tuple[str, ...] = tuple(skipped)
        self._by_id = {d.doc_id: d for d in self.documents}
        self.content_hash = _content_hash(self.documents)
        self._terms: dict[str, frozenset[str]] = {}  # doc_id → its terms, for the documents `topic` looked at
        self._vocabulary: frozenset[str] | None = None  # every document's terms, built at the first `topic`
        self._terms_lock = threading.Lock()

    def __len__(self) -> int:
        return len(self.documents)

    def __contains__(self, doc_id: object) -> bool:
        return isinstance(doc_id, str) and self.get(doc_id) is not None

    def get(self, doc_id: str) -> Document | None:
        """The document with `doc_id`, in either Unicode normalisation form (ids are NFC)."""
        found = self._by_id.get(doc_id)
        if found is None and isinstance(doc_id, str) and not doc_id.isascii():
            found = self._by_id.get(unicodedata.normalize("NFC", doc_id))
        return found

    def categories(self) -> dict[str, int]:
        """Category path → number of documents, sorted by path."""
        return dict(sorted(Counter(d.category for d in self.documents if d.category).items()))

    def __repr__(self) -> str:
        return f"Corpus({self.corpus_id!r}, {len(self)} documents, hash={self.content_hash[:12]})"

    def vocabulary(self) -> frozenset[str]:
        """Every term of the corpus (`terms` of all titles and texts), computed once, at the first `topic`."""
        with self._terms_lock:
            if self._vocabulary is None:
                self._vocabulary = terms(*(t for d in self.documents for t in (d.title, d.text)))
            return self._vocabulary

    def terms_of(self, doc_id: str) -> frozenset[str]:
        """The terms of document `doc_id`'s title and text (none for an unknown id), kept once computed."""
        with self._terms_lock:
            found = self._terms.get(doc_id)
        if found is None:
            doc = self.get(doc_id)
            found = terms(doc.title, doc.text) if doc else frozenset()
            with self._terms_lock:
                self._terms[doc_id] = found
        return found


# --- what a question is about, for the doc-gap queue (docs/traces.md, "Doc gaps") -------------------------------

#: The kinds of doc gap (`Topic.kind`), the strongest first: `doc_gaps.kind` of a question is its turns' strongest.
GAP_KINDS = ("retrieved_unused", "not_found", "off_topic")
#: A question is off the corpus's topic when fewer than this share of its terms occur anywhere in the corpus.
OFF_TOPIC_SHARE = 0.5
#: A retrieved document is relevant to a question when it holds at least this share of the question's terms that
#: occur in the corpus (and at least one).
RELEVANT_SHARE = 0.5


def terms(*texts: str) -> frozenset[str]:
    """The distinct stemmed words of `texts` that are not stop words (as BM25 and the judges count them); each
    distinct word is stemmed once."""
    ws = [w for w in distinct_words(*texts) if w not in STOPWORDS and (len(w) > 1 or w.isdigit())]
    return frozenset(english_stemmer().stemWords(ws)) if ws else frozenset()


@dataclass(frozen=True)
class Topic:
    """How a question meets a corpus, recorded with its turn: `terms` (its distinct terms), `in_corpus` (how many
    occur in some document) and `relevant` (how many of the turn's retrieved documents are relevant to it)."""

    terms: int
    in_corpus: int
    relevant: int

    @property
    def kind(self) -> str:
        """The doc gap its turn is when it consults nothing: `off_topic` (too few of its terms are in the corpus:
        no article of this knowledge base is missing), `retrieved_unused` (a relevant document was retrieved and
        not used: a retrieval or model miss, not an article to write) or `not_found` (nothing relevant retrieved)."""
        if self.terms and self.in_corpus < OFF_TOPIC_SHARE * self.terms:
            return "off_topic"
        return "retrieved_unused" if self.relevant else "not_found"


def topic(question: str, corpus: Corpus, retrieved: Iterable[str]) -> Topic:
    """`question` against `corpus` and the documents its turn retrieved (`RELEVANT_SHARE`, `OFF_TOPIC_SHARE`)."""
    asked = terms(question)
    known = asked & corpus.vocabulary()
    need = max(1, math.ceil(len(known) * RELEVANT_SHARE))
    relevant = sum(1 for doc_id in dict.fromkeys(retrieved) if known and len(known & corpus.terms_of(doc_id)) >= need)
    return Topic(terms=len(asked), in_corpus=len(known), relevant=relevant)


def _content_hash(documents: tuple[Document, ...]) -> str:
    h = hashlib.sha256()
    for d in sorted(documents, key=lambda d: d.doc_id):
        h.update(
            json.dumps(
                [d.doc_id, d.title, d.text, d.url, d.category, d.kind, d.artifact_kind, d.pages],
                ensure_ascii=False,
            ).encode()
        )
    return h.hexdigest()


#: File names that say what a file is, not which corpus: such a `.jsonl` is named by its folder.
GENERIC_STEMS = frozenset({"corpus", "documents", "docs"})


def load_corpus(path: str | Path, *, max_documents: int | None = None,
                pdf_content_bytes: int | None = None) -> Corpus:
    """Load a corpus folder or JSONL file; raises `CorpusError` with file and line on bad input.

    The app sets both bounds for visitors' corpora: `max_documents` refuses a corpus with more
    documents before their text is held in memory, `pdf_content_bytes` the page content of all its
    PDFs together (each PDF is bounded anyway, see `PDF_MAX_CONTENT_BYTES`).
    """
    budget = [pdf_content_bytes]  # what is left of it, shared by every PDF of the corpus
    p = Path(path)
    skipped: list[str] = []
    if not p.exists():
        raise CorpusError("corpus path does not exist (give a folder of Markdown, text or PDF files, or a .jsonl file)", str(p))
    if p.is_dir():
        docs = _at_most(_load_folder(p, skipped, budget), max_documents, p)
        corpus_id = p.name
    elif p.suffix.lower() == ".jsonl":
        docs = _at_most(_load_jsonl(p), max_documents, p)
        # a file named for what it is ("corpus.jsonl") is named by its folder: "arduino-help-center", never "corpus"
        corpus_id = p.parent.name if p.stem.lower() in GENERIC_STEMS and p.parent.name else p.stem
    elif p.suffix.lower() in FOLDER_SUFFIXES:
        docs = [_parse_file(p, p.parent, budget)]
        corpus_id = p.stem
    else:
        raise CorpusError("unsupported corpus file; expected a folder, a .jsonl, .md, .txt or .pdf file", str(p))
    if not docs:
        raise CorpusError("corpus contains no documents", str(p))
    return Corpus(corpus_id, str(p), docs, skipped)


def _at_most(docs: Iterable[Document], limit: int | None, path: Path) -> list[Document]:
    out: list[Document] = []
    for doc in docs:
        if limit is not None and len(out) >= limit:
            raise CorpusError(f"corpus has more than {limit:,} documents", str(path))
        out.append(doc)
    return out


# --- folders of Markdown, text and PDF files ------------------------------------------------


def _load_folder(root: Path, skipped: list[str], budget: list) -> Iterable[Document]:
    """Every corpus file below `root`, except hidden ones and symlinks that leave the folder: a corpus
    folder holds its documents, and a link to `~/.ssh/…` or `/etc/…` must not make them one."""
    seen: dict[str, str] = {}
    real_root = root.resolve()
    files = sorted(f for f in root.rglob("*") if f.is_file() and f.suffix.lower() in FOLDER_SUFFIXES)
    for f in files:
        if any(part.startswith(".") for part in f.relative_to(root).parts):
            continue
        try:
            inside = f.resolve().is_relative_to(real_root)
        except (OSError, RuntimeError):  # a symlink loop
            inside = False
        if not inside:
            skipped.append(f"{f}: a symlink that leaves the corpus folder; not followed")
            continue
        doc = _parse_file(f, root, budget)
        if doc.doc_id in seen:
            raise CorpusError(f"duplicate id {doc.doc_id!r} (also in {seen[doc.doc_id]})", str(f), 1)
        seen[doc.doc_id] = str(f)
        yield doc


def _parse_file(f: Path, root: Path, budget: list) -> Document:
    suffix = f.suffix.lower()
    if suffix in MARKDOWN_SUFFIXES:
        return _parse_markdown(f, root)
    if suffix == ".pdf":
        return _paged_document(f, root, *_read_pdf(f, budget))
    return _paged_document(f, root, tuple(_read_text(f).split("\f")), None)


def _paged_document(f: Path, root: Path, pages: tuple[str, ...], title: str | None) -> Document:
    """A document without front matter: id from the path, title from metadata or the first line."""
    pages = tuple(page.strip() for page in pages)
    text = "\n\n".join(page for page in pages if page)
    if not text:
        hint = " (a scanned PDF needs OCR first)" if f.suffix.lower() == ".pdf" else ""
        raise CorpusError(f"no text could be extracted{hint}", str(f))
    first_line = next(line.strip() for line in text.splitlines() if line.strip())
    rel = f.relative_to(root)
    return Document(
        doc_id=clean_id(rel.with_suffix("").as_posix()),
        title=(title or first_line.lstrip("# ")[:200]).strip(),
        text=text,
        category="/".join(rel.parts[:-1]),
        section=rel.parts[0] if len(rel.parts) > 2 else None,
        path=str(f),
        pages=pages if len(pages) > 1 or f.suffix.lower() == ".pdf" else None,
    )


class _PdfTooCostly(Exception):
    pass


def _content_bytes(page) -> int:
    """Decoded size of a page's content streams (zlib in C: cheap next to parsing them)."""
    contents = page.get("/Contents")
    if contents is None:
        return 0
    contents = contents.get_object()
    streams = contents if isinstance(contents, list) else [contents]
    return sum(len(s.get_object().get_data()) for s in streams)


def _read_pdf(f: Path, budget: list | None = None) -> tuple[tuple[str, ...], str | None]:
    """(text of every page in order, metadata title); page n of the PDF is index n-1."""
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError, PyPdfError

    operators = 0

    def count(*_):  # called by pypdf before every content-stream operator, form contents included
        nonlocal operators
        operators += 1
        if operators > PDF_MAX_OPERATORS:
            raise _PdfTooCostly(f"more than {PDF_MAX_OPERATORS:,} drawing operators")

    try:
        reader = PdfReader(str(f))
        if reader.is_encrypted and not reader.decrypt(""):
            raise CorpusError("PDF is encrypted; save an unencrypted copy", str(f))
        pages, chars, content = [], 0, 0
        for page in reader.pages:
            size = _content_bytes(page)
            content += size
            if content > PDF_MAX_CONTENT_BYTES:
                raise _PdfTooCostly(f"more than {PDF_MAX_CONTENT_BYTES // 2**20} MB of page content")
            if budget is not None and budget[0] is not None:
                budget[0] -= size
                if budget[0] < 0:
                    raise _PdfTooCostly("the PDFs of this corpus hold more page content than the app reads "
                                        "(WORKBENCH_MAX_PDF_MB)")
            pages.append(page.extract_text(visitor_operand_before=count) or "")
            chars += len(pages[-1])
            if chars > PDF_MAX_TEXT_CHARS:
                raise _PdfTooCostly(f"more than {PDF_MAX_TEXT_CHARS:,} characters of text")
        pages = tuple(pages)
    except CorpusError:
        raise
    except _PdfTooCostly as exc:
        raise CorpusError(f"PDF page {len(pages) + 1}: {exc} — a decompression bomb, or a PDF too large to "
                          "index here: split it into smaller files", str(f)) from None
    except OSError as exc:
        raise CorpusError(f"cannot read file: {exc.strerror or exc}", str(f)) from None
    except (PdfReadError, PyPdfError, ValueError, KeyError, TypeError, AttributeError, IndexError) as exc:
        # pypdf raises many exception types on damaged files
        raise CorpusError(f"not a readable PDF ({type(exc).__name__}: {exc})", str(f)) from None
    try:
        title = str(reader.metadata.title).strip() if reader.metadata and reader.metadata.title else None
    except Exception:  # a broken info dictionary only costs the title
        title = None
    return pages, title or None


def _read_text(f: Path) -> str:
    try:
        text = f.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise CorpusError(f"not valid UTF-8 text ({exc.reason} at byte {exc.start})", str(f)) from None
    except OSError as exc:
        raise CorpusError(f"cannot read file: {exc.strerror}", str(f)) from None
    if not text.strip():
        raise CorpusError("file is empty", str(f))
    return text.lstrip("\ufeff")


def _parse_markdown(f: Path, root: Path) -> Document:
    text = _read_text(f)
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        raise CorpusError("missing YAML front matter: line 1 must be '---'", str(f), 1)
    end = next((i for i in range(1, len(lines)) if lines[i].strip() in ("---", "...")), None)
    if end is None:
        raise CorpusError("YAML front matter is never closed with '---'", str(f), 1)
    try:
        meta = safe_yaml.load("".join(lines[1:end]))
    except safe_yaml.YamlLimitError as exc:
        raise CorpusError(str(exc), str(f), exc.line + 2) from None
    except yaml.YAMLError as exc:
        # The context mark is where the broken construct starts (e.g. an unclosed "["), which is
        # the line a person needs to fix; the problem mark is where the parser gave up.
        mark = getattr(exc, "context_mark", None) or getattr(exc, "problem_mark", None)
        line = mark.line + 2 if mark is not None else 1  # +1 for the opening '---', +1 for 1-based
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise CorpusError(f"bad YAML front matter: {problem}", str(f), line) from None
    if meta is None:
        meta = {}
    if not isinstance(meta, dict):
        raise CorpusError("front matter must be a YAML mapping (key: value lines)", str(f), 2)
    body = "".join(lines[end + 1 :]).strip()
    rel_parts = f.relative_to(root).parts[:-1]
    folder_category = "/".join(rel_parts)
    return _make_document(meta, body, str(f), 1, default_category=folder_category,
                          default_section=rel_parts[0] if len(rel_parts) > 1 else None,
                          default_title=_first_heading(body) or f.stem)


def _first_heading(body: str) -> str | None:
    for line in body.splitlines():
        if line.startswith("# "):
            return line[2:].strip()
    return None


# --- JSONL -----------------------------------------------------------------------------------


def _load_jsonl(f: Path) -> Iterable[Document]:
    text = _read_text(f)
    seen: dict[str, int] = {}
    for lineno, obj in json_objects(text.splitlines(), str(f)):
        if "text" not in obj:
            raise CorpusError("missing required field 'text'", str(f), lineno)
        doc = _make_document(obj, obj["text"], str(f), lineno, default_category="", default_section=None,
                             default_title=None)
        if doc.doc_id in seen:
            raise CorpusError(f"duplicate id {doc.doc_id!r} (first on line {seen[doc.doc_id]})", str(f), lineno)
        seen[doc.doc_id] = lineno
        yield doc


# --- shared ----------------------------------------------------------------------------------


def _scalar(value: Any, name: str, path: str, line: int) -> str | None:
    if value is None or value == "":
        return None
    if isinstance(value, (dict, list)):
        raise CorpusError(f"field {name!r} must be a single value, not a {type(value).__name__}", path, line)
    return str(value)


def clean_id(doc_id: str) -> str:
    """A document id in Unicode NFC ("café" typed either way is one id), each control character (a newline
    from a file name, a tab, U+202E …) renamed to its visible escape (`\\x0a`, `\\u202e`): ids are shown,
    linked and cited, so they are one line of printable text (docs/security.md)."""
    return all_visible(unicodedata.normalize("NFC", doc_id))


def _make_document(meta: dict, text: Any, path: str, line: int, *, default_category: str,
                   default_section: str | None, default_title: str | None) -> Document:
    doc_id = _scalar(meta.get("id"), "id", path, line)
    if doc_id is None or not doc_id.strip():
        raise CorpusError("missing required field 'id'", path, line)
    doc_id = clean_id(doc_id.strip())
    if not isinstance(text, str):
        raise CorpusError("field 'text' must be a string", path, line)
    fields = {k: _scalar(meta.get(k), k, path, line) for k in OPTIONAL_FIELDS}
    kind = fields["kind"] or "source"
    if kind not in ("source", "generated"):
        raise CorpusError(f"field 'kind' must be 'source' or 'generated', not {kind!r}", path, line)
    derived = meta.get("derived_from") or []
    if isinstance(derived, str):
        derived = [derived]
    if not isinstance(derived, list):
        raise CorpusError("field 'derived_from' must be a list of document ids", path, line)
    title = _scalar(meta.get("title"), "title", path, line) or default_title or doc_id
    category = fields["category"] or default_category
    if fields["section"]:
        section = fields["section"]
        if not fields["category"] or "/" not in category:
            category = f"{section}/{category}" if category else section
    else:
        section = default_section
    return Document(
        doc_id=doc_id,
        title=title.strip(),
        text=text,
        url=fields["url"],
        category=category,
        section=section,
        kind=kind,
        artifact_kind=fields["artifact_kind"],
        derived_from=tuple(clean_id(str(x)) for x in derived),
        path=path,
    )
