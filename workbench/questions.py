"""Questions: what kind each one is, and the one reader of question files.

Neutral ground, left of everything that uses it (it imports only the shared modules), so the
offline provider, the trace store (the `turns.question_kind` column that the `doc_gaps` view filters
on, and m003's backfill of it), the CLI and the notebooks classify and read questions the same way.

A question is **structural** when it asks what the knowledge base holds ("What articles do you
have?", "List the categories", "Which articles are in the billing section?") and **substantive**
when it asks about a topic. Structural questions are answered with a listing and consult nothing
by design, so they are never doc gaps. A "which articles …" question whose verb is about the
documents' content ("Which articles mention Okta?", "Which guides explain SAML?") is substantive: it is
answered by searching the topic, and if nothing is found that is a gap like any other.
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .config import MAX_CONVERSATION_ID_CHARS, MAX_QUESTION_CHARS
from .errors import CorpusError, WorkbenchError
from .jsonl import json_objects

STRUCTURAL, SUBSTANTIVE = "structural", "substantive"

_CONTENTS = r"(?:articles?|topics?|categories|sections?|docs|documents|guides|pages)"
_STRUCTURAL = re.compile(
    rf"\b(what|which)\b.{{0,40}}\b{_CONTENTS}\b"
    rf"|^\s*(list|show|browse)\b.{{0,30}}\b{_CONTENTS}\b"
    rf"|\blist of\b.{{0,30}}\b{_CONTENTS}\b"
    r"|\bwhat(?:'s|\s+is(?:\s+there)?|\s+(?:can|could)\s+i\s+(?:find|read|see|learn))\s+(?:in|on)\s+"
    r"(?:the|this|your)\s+(?:[\w-]+\s+){0,2}"
    r"(?:help\s*cent(?:er|re)|knowledge\s*base|docs|documentation|wiki)\b"
    r"|\btable of contents\b|\bwhat (can|do) you (help|cover|know)",
    re.IGNORECASE,
)
# Asking how to do something is substantive however it is phrased ("Which article explains how to …").
_ANSWERISH = re.compile(r"\b(how|why|fix|error|configure|set ?up|enable|disable|reset|change)\b", re.I)
# A verb about the documents' content names a topic ("… mention Okta", "… explain SAML"), unless its
# object is the knowledge base itself ("… cover in the help center"). "About billing" / "on billing"
# stay structural: a listing narrowed to a section (`browse_section`), as "which articles do you have
# about billing?" asks.
_TOPICAL = re.compile(
    r"\b(mention(?:s|ed|ing)?|discuss(?:es|ed|ing)?|explain(?:s|ed|ing)?"
    r"|describ(?:e|es|ed|ing)|talk(?:s|ed|ing)? about|deal(?:s|ing)? with|refer(?:s|red|ring)? to"
    r"|relat(?:e|es|ed|ing) to|cover(?:s|ed|ing)?)\s+"
    r"(?!(?:(?:the|this|your|our)\s+)?(?:help\s*cent(?:er|re)|knowledge\s*base|kb|docs?|documentation|site"
    r"|website|wiki|portal)\b)[\w\"'“‘]",
    re.IGNORECASE,
)


def is_structural(question: str) -> bool:
    """True for questions about what the knowledge base contains, not about a topic in it."""
    return (bool(_STRUCTURAL.search(question)) and not _ANSWERISH.search(question)
            and not _TOPICAL.search(question))


def question_kind(question: str) -> str:
    """`structural` (what does the knowledge base hold?) or `substantive` (a question about a topic)."""
    return STRUCTURAL if is_structural(question) else SUBSTANTIVE


#: The fields of a questions file line the workbench reads (docs/experiments.md); any other field is kept in
#: `Question.extra`, never rejected.
FIELDS = ("question", "id", "kind", "expected", "expect_no_sources", "must_cite", "must_not_cite", "tags",
          "conversation")

#: Verbs that open task titles ("Configure SAML …", "Track your order"): such a title reads as "How do I …?".
_TASK_VERBS = frozenset("""activate add change cancel configure connect create delete deprovision disable download
    enable export find fix import install invite link make manage migrate move provision receive recover remove reset
    restore revoke rotate require set share sign switch track transfer turn update upgrade downgrade upload use verify
    view""".split())
_QUESTION_WORDS = ("how", "what", "why", "when", "where", "which", "who", "can", "do", "does", "is", "are")


def example_question(titles: list[str]) -> str | None:
    """A question a corpus can answer, made from its document titles (the app's chat placeholder): the first
    task title of 3–10 words as "How do I …?", else the first such title asked about; None without one."""
    fits = [" ".join(t.split()) for t in titles if 3 <= len(t.split()) <= 10]
    for title in fits:
        first = title.split()[0].lower()
        if first in _QUESTION_WORDS:
            return title if title.endswith("?") else f"{title}?"
        if first in _TASK_VERBS:
            return f"How do I {title[0].lower()}{title[1:]}?"
    return f"Tell me about “{fits[0]}”" if fits else None


@dataclass(frozen=True)
class Question:
    """One line of a questions file: `{"question": …}` plus the optional `id`, `kind` and expectations
    (docs/experiments.md): `expected`, `expect_no_sources`, `must_cite`, `must_not_cite`, `tags`, and the
    `conversation` it is a turn of."""

    text: str
    line: int
    id: Any = None
    #: Documents that must be consulted (gold document ids); empty when the file gives none.
    expected: tuple[str, ...] = ()
    #: The file's own label, e.g. `substantive`, `listing`, `out_of_scope` (None when absent).
    kind: str | None = None
    #: True for listings and chit-chat: the turn must consult nothing.
    expect_no_sources: bool = False
    must_cite: tuple[str, ...] = ()
    #: Documents the answer must neither cite nor consult.
    must_not_cite: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    #: The conversation the line is a turn of: lines with the same id form one conversation, in file order
    #: (docs/design.md §11); None for a question asked on its own.
    conversation: str | None = None
    #: Fields of the line the workbench does not read, kept as they were.
    extra: dict[str, Any] = field(default_factory=dict, compare=False)


@dataclass(frozen=True)
class Dataset:
    """A questions file as an experiment's dataset: its name (the file's stem), the sha256 of its bytes, its lines."""

    name: str
    content_hash: str
    questions: tuple[Question, ...]
    #: Lines whose expectations assert nothing (an empty `"expected"` and no `expect_no_sources`), as warnings
    #: naming FILE:LINE; `eval` prints them.
    warnings: tuple[str, ...] = ()


def _ids(obj: dict[str, Any], key: str, name: str, line: int) -> tuple[str, ...]:
    value = obj.get(key)
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(e, str) and e.strip() for e in value):
        raise CorpusError(f'"{key}" must be a list of document ids (non-empty strings), not {_shown(value)}', name, line)
    # document ids are NFC (corpus.py): "café" typed in either form is one id, and matches the corpus's
    return tuple(dict.fromkeys(unicodedata.normalize("NFC", e) for e in value))  # each id once, in the file's order


def _shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 60 else text[:59] + "…"


def _question(obj: dict[str, Any], name: str, i: int, need_id: bool) -> Question:
    text = obj.get("question")
    if not isinstance(text, str) or not text.strip():
        raise CorpusError('each line needs a non-empty string field "question"', name, i)
    if need_id and obj.get("id") is None:
        raise CorpusError('each line needs an "id"', name, i)
    try:
        check_question_length(text)
    except WorkbenchError as exc:
        raise CorpusError(str(exc), name, i) from None
    if obj.get("expected") in ("", 0, False):  # the reader has always taken these for "none"
        obj = {**obj, "expected": None}
    expected = _ids(obj, "expected", name, i)
    kind = obj.get("kind")
    if kind is not None and not isinstance(kind, str):
        raise CorpusError('"kind" must be a string', name, i)
    no_sources = obj.get("expect_no_sources", False)
    if no_sources is None:
        no_sources = False
    if not isinstance(no_sources, bool):
        raise CorpusError(f'"expect_no_sources" must be true or false, not {_shown(no_sources)}', name, i)
    must_cite, must_not = _ids(obj, "must_cite", name, i), _ids(obj, "must_not_cite", name, i)
    tags = obj.get("tags")
    if tags is not None and (not isinstance(tags, list) or not all(isinstance(t, str) for t in tags)):
        raise CorpusError(f'"tags" must be a list of strings, not {_shown(tags)}', name, i)
    if no_sources and (expected or must_cite):
        raise CorpusError('"expect_no_sources" is true but "expected" or "must_cite" names documents: a turn '
                          'cannot consult nothing and consult or cite those', name, i)
    both = sorted(set(must_cite) & set(must_not))
    if both:
        raise CorpusError(f'{", ".join(both)} is in both "must_cite" and "must_not_cite"', name, i)
    conversation = obj.get("conversation")
    if conversation is not None:
        try:
            check_conversation_id(conversation)
        except WorkbenchError as exc:
            raise CorpusError(f'"conversation": {exc}', name, i) from None
    return Question(text, i, obj.get("id"), expected, kind, no_sources, must_cite, must_not, tuple(tags or ()),
                    conversation, {k: v for k, v in obj.items() if k not in FIELDS})


def check_question_length(text: str) -> None:
    """Refuse a question longer than `MAX_QUESTION_CHARS` (docs/security.md), before anything runs."""
    if len(text) > MAX_QUESTION_CHARS:
        raise WorkbenchError(f"the question is {len(text):,} characters long; a question may have at most "
                             f"{MAX_QUESTION_CHARS:,} (ask about one thing at a time, or quote less)")


def check_conversation_id(value: Any) -> str:
    """A conversation id (`ask --conversation`, a questions file's `"conversation"`): 1 to
    `MAX_CONVERSATION_ID_CHARS` characters of printable text, no control character (docs/security.md)."""
    if not isinstance(value, str) or not value.strip():
        raise WorkbenchError(f"a conversation id must be non-empty text, not {_shown(value)}")
    if len(value) > MAX_CONVERSATION_ID_CHARS:
        raise WorkbenchError(f"a conversation id may have at most {MAX_CONVERSATION_ID_CHARS} characters, not "
                             f"{len(value):,}")
    if not value.isprintable():
        raise WorkbenchError(f"a conversation id must be printable text without control characters, not "
                             f"{_shown(value)}")
    return value


def read_questions(path: str | Path, *, need_id: bool = False) -> list[Question]:
    """Every question of a JSONL file of `{"question": …}` lines; any problem raises `CorpusError`
    naming the file and line. `need_id` also requires an `"id"` on every line (`retrieve`)."""
    return list(read_dataset(path, need_id=need_id).questions)


def read_dataset(path: str | Path, *, need_id: bool = False) -> Dataset:
    """A questions file with its expectations (docs/experiments.md) as a `Dataset`; any problem raises
    `CorpusError` naming the file and line."""
    name = str(path)
    try:
        blob = Path(path).read_bytes()
        lines = blob.decode("utf-8").splitlines()
    except OSError as exc:
        raise CorpusError(f"cannot read questions file: {exc.strerror}", name) from None
    except UnicodeDecodeError as exc:
        raise CorpusError(f"not valid UTF-8 text ({exc.reason} at byte {exc.start})", name) from None
    objects = list(json_objects(lines, name))
    out = [_question(obj, name, i, need_id) for i, obj in objects]
    if not out:
        raise CorpusError("no questions in file", name)
    return Dataset(Path(path).stem, hashlib.sha256(blob).hexdigest(), tuple(out),
                   tuple(_asserts_nothing(objects, name)))


def _asserts_nothing(objects: list[tuple[int, Any]], name: str) -> list[str]:
    """A warning for each line that gives `"expected": []` without `expect_no_sources` (nor a citation
    expectation): such a line passes whatever the turn consults, so it looks like a check and is none."""
    return [f'{name}:{i}: warning: "expected" is empty and "expect_no_sources" is not set: an empty "expected" '
            'asserts nothing (write "expect_no_sources": true if the turn must consult nothing)'
            for i, obj in objects
            if obj.get("expected") == [] and not obj.get("expect_no_sources")
            and not obj.get("must_cite") and not obj.get("must_not_cite")]


def dataset_of(name: str, lines: list[dict[str, Any]]) -> Dataset:
    """A dataset from question lines already in memory (a notebook's, perhaps cut to its first few), read as a
    file's lines are; its hash is the sha256 of the lines as JSON Lines."""
    blob = "".join(json.dumps(obj, ensure_ascii=False, sort_keys=True, default=str) + "\n" for obj in lines)
    out = [_question(dict(obj), name, i, False) for i, obj in enumerate(lines, start=1)]
    if not out:
        raise CorpusError("no questions", name)
    return Dataset(name, hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest(), tuple(out))
