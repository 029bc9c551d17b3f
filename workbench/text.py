"""Small text utilities: stemmed content words and sentences (the offline provider, the judges), and CSV cells
safe for spreadsheets (every CSV the CLI and the app write)."""

from __future__ import annotations

import re
import threading
from functools import lru_cache

_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)?", re.UNICODE)
# Link text without brackets and a target without parentheses: each `[` is scanned only up to the
# next bracket or parenthesis, so text full of `[` or `](` costs linear time (it was quadratic).
_MD_LINK = re.compile(r"!?\[([^\[\]]*)\]\([^()]*\)")
_HTML_TAG = re.compile(r"<[^>]{1,200}>")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"“(])")

STOPWORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before being below
    between both but by can could did do does doing down during each few for from further had has have
    having he her here hers herself him himself his how i if in into is it its itself just me more most my
    myself no nor not now of off on once only or other our ours ourselves out over own same she should so
    some such than that the their theirs them themselves then there these they this those through to too
    under until up very was we were what when where which while who whom why will with would you your
    yours yourself yourselves get got also may might must can't don't let use using via please want need
    tell know""".split()
)


#: Characters per token a budget counts with (a conversation's history, a tool result's room). Chat models'
#: tokenizers average about four characters of English per token; counting three over-estimates, so what is judged
#: to fit does fit (docs/security.md).
CHARS_PER_TOKEN = 3


def estimate_tokens(text: str) -> int:
    """Tokens `text` counts as in a budget: its characters / `CHARS_PER_TOKEN`, rounded up."""
    return -(-len(text) // CHARS_PER_TOKEN)


_LOCAL = threading.local()


def english_stemmer():
    """This thread's English Snowball stemmer (PyStemmer), for the judges here and BM25's queries: an
    instance "must not be called concurrently", and concurrent batch turns search and judge claims in
    several threads, so each thread gets its own."""
    stemmer = getattr(_LOCAL, "stemmer", None)
    if stemmer is None:
        import Stemmer  # PyStemmer (Snowball), installed with llama-index-retrievers-bm25

        stemmer = _LOCAL.stemmer = Stemmer.Stemmer("english")
    return stemmer


def words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def distinct_words(*texts: str) -> set[str]:
    """The distinct `words` of `texts` (collected before lower-casing: a long text costs C-level work only)."""
    found: set[str] = set()
    for text in texts:
        found.update(_WORD.findall(text))
    return {w.lower() for w in found}


def content_terms(text: str) -> list[str]:
    """Stemmed words minus stop words, in order (duplicates kept)."""
    return list(_content_terms(text))


@lru_cache(maxsize=16384)
def _content_terms(text: str) -> tuple[str, ...]:
    # Cached: judges score every claim against the same sentence windows of a cited document.
    ws = [w for w in words(text) if w not in STOPWORDS and (len(w) > 1 or w.isdigit())]
    return tuple(english_stemmer().stemWords(ws)) if ws else ()


def plain(markdown: str) -> str:
    """Markdown/HTML to plain prose: link text kept, targets, images and tags dropped."""
    text = _MD_LINK.sub(lambda m: m.group(1), markdown)
    return _HTML_TAG.sub(" ", text)


LIST_ITEM = re.compile(r"^(?:[-*+]|\d+[.)])\s")


def sentences(text: str, *, whole_items: bool = False) -> list[str]:
    """Split prose into sentences; each block (paragraph, list item, heading) starts a new one. With
    `whole_items`, a list item stays one unit, its number and all its sentences ("1. Open it. Then …")."""
    out: list[str] = []
    for block in re.split(r"\n\s*\n|\n(?=\s*(?:[-*+]|\d+[.)])\s)|\n(?=#)", text):
        block = " ".join(block.split())
        if whole_items and LIST_ITEM.match(block):
            out.append(block)
        elif block:
            out.extend(s.strip() for s in _SENTENCE_END.split(block) if s.strip())
    return out


#: What a spreadsheet reads as the start of a formula (OWASP "CSV injection"): a visitor's question such as
#: `=HYPERLINK(…)` would run when an analyst opens the doc-gap CSV (docs/security.md).
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_cell(value):
    """`value` for a CSV meant for a spreadsheet: text that a spreadsheet would take for a formula gets a
    leading `'` (shown as text, the rest kept exactly); numbers and everything else pass unchanged."""
    if isinstance(value, str) and value.startswith(_FORMULA_START):
        return "'" + value
    return value
