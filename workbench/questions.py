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

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import CorpusError
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
    """One line of a questions file: `{"question": …}` plus the optional `id`, `expected` and `kind`."""

    text: str
    line: int
    id: Any = None
    #: Gold document ids (evaluation sets); empty when the file gives none.
    expected: tuple[str, ...] = ()
    #: The file's own label, e.g. `substantive`, `listing`, `out_of_scope` (None when absent).
    kind: str | None = None


def read_questions(path: str | Path, *, need_id: bool = False) -> list[Question]:
    """Every question of a JSONL file of `{"question": …}` lines; any problem raises `CorpusError`
    naming the file and line. `need_id` also requires an `"id"` on every line (`retrieve`)."""
    name = str(path)
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise CorpusError(f"cannot read questions file: {exc.strerror}", name) from None
    except UnicodeDecodeError as exc:
        raise CorpusError(f"not valid UTF-8 text ({exc.reason} at byte {exc.start})", name) from None
    out = []
    for i, obj in json_objects(lines, name):
        text = obj.get("question")
        if not isinstance(text, str) or not text.strip():
            raise CorpusError('each line needs a non-empty string field "question"', name, i)
        if need_id and obj.get("id") is None:
            raise CorpusError('each line needs an "id"', name, i)
        expected = obj.get("expected") or []
        if not isinstance(expected, list) or not all(isinstance(e, str) for e in expected):
            raise CorpusError('"expected" must be a list of document ids (strings)', name, i)
        kind = obj.get("kind")
        if kind is not None and not isinstance(kind, str):
            raise CorpusError('"kind" must be a string', name, i)
        out.append(Question(text, i, obj.get("id"), tuple(expected), kind))
    if not out:
        raise CorpusError("no questions in file", name)
    return out
