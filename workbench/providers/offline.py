"""The `offline` provider: a deterministic agent with no model ("no LLM").

It is the default for the app, notebooks, tests and CI. Policy (issue #2):
- a structural question ("what articles do you have?", `questions.is_structural`) →
  `list_categories`, then `list_articles` or `browse_section`; the answer is a list of links and
  nothing is consulted;
- otherwise `search`; when the best hit covers too few of the question's content words it says the
  knowledge base has nothing and cites nothing; else it opens the best document with
  `fetch_document`, answers with its most relevant passage and links it, and may cite a second,
  clearly relevant search hit without opening it (that snippet + citation makes it consulted);
- in excerpt mode it answers from the numbered excerpts and cites them as `[n]`.

A quoted passage is at most `MAX_QUOTE_CHARS` long (cut with " …", finish_reason "length"), so a
document without sentence breaks never becomes a 1 MB answer.

Fault simulation (each off by default) reproduces what real models get wrong, for demos and tests:
`corrupt_id` (the cited id is off by one character), `forget_link` (the opened document is not
linked), `link_listed` (links a document it only saw as a title), `cite_unretrieved` (links a
document no tool returned; in excerpt mode cites an out-of-range `[n]`).
"""

from __future__ import annotations

import json
import re
import time
from typing import Any

from ..questions import is_structural
from ..text import LIST_ITEM, content_terms, plain, sentences
from ..types import ModelCall
from .base import ModelStep, Provider, ToolRequest

FAULTS = ("corrupt_id", "forget_link", "link_listed", "cite_unretrieved")
MIN_COVERAGE = 0.35  # share of the question's content words the best hit must contain (tuned on data/demo_gold.jsonl)
SECOND_SCORE_RATIO = 0.8  # a second hit is cited only when nearly as strong as the first
WINDOW = 4  # units (sentences or list items) quoted from the opened document
#: Longest passage quoted in an answer. A document with no sentence breaks (one 1 MB line) is one
#: "sentence"; quoting it whole would dump the document. A cut passage ends with " …" and the model
#: call's finish_reason is "length", the usual mark of output cut at a length limit.
MAX_QUOTE_CHARS = 1200

# The `[n] file, page p, chunk c` line of prompts.excerpt_header — not any "[7] Smith et al." line of a chunk.
_EXCERPT_HEAD = re.compile(r"^\[(\d+)\] .*, page (?:\d+|-), chunk (?:\d+|-)$", re.MULTILINE)


def coverage(question_terms: set[str], text: str) -> float:
    if not question_terms:
        return 0.0
    return len(question_terms & set(content_terms(text))) / len(question_terms)


def corrupt(target: str) -> str:
    """Change one character of the id part of `target` (a URL's last segment, or a bare id)."""
    head, sep, tail = target.rstrip("/").rpartition("/")
    ident = tail or target
    last = ident[-1]
    if last.isdigit():
        new = str((int(last) + 1) % 10)
    else:
        new = "q" if last != "q" else "x"
    changed = ident[:-1] + new
    return f"{head}{sep}{changed}" if sep else changed


def _link(item: dict[str, Any]) -> str:
    return _md_target(item.get("url") or item["doc_id"])


def _md_target(target: str) -> str:
    """A markdown link target; one with spaces or parentheses (an id like "Annual Report (v2)") is written <…>."""
    return f"<{target}>" if re.search(r"[\s()<>]", target) else target


class OfflineProvider(Provider):
    name = "offline"
    label = "offline (no LLM)"
    supports_tools = True  # it asks for tools like a model would; the agent loop runs them
    supports_json_schema = False
    free_calls = True  # no model: verifying a turn by ablation costs milliseconds, so the app does not ask
    options_schema = {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "faults": {
                "type": "array", "items": {"enum": list(FAULTS)}, "uniqueItems": True, "default": [],
                "title": "Offline fault simulation",
                "description": "Reproduce what real models get wrong: corrupt_id (a cited id one character off), "
                               "forget_link (an opened document not linked), link_listed (a link to a document "
                               "seen only as a title), cite_unretrieved (a link to a document no tool returned; "
                               "an out-of-range [n] in excerpt mode).",
            },
        },
    }

    def __init__(self, model: str | None = None, faults: Any = (), **options: Any):
        super().__init__(model or "extractive-v1", **options)
        unknown = set(faults) - set(FAULTS)
        if unknown:
            raise ValueError(f"unknown fault(s) {sorted(unknown)}; choose from {', '.join(FAULTS)}")
        self.faults = frozenset(faults)
        self._capped = False  # the last answer's quote was cut at MAX_QUOTE_CHARS

    def list_models(self) -> list[str]:
        return ["extractive-v1"]

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> ModelStep:
        start = time.perf_counter()
        self._capped = False
        question, history = _read(messages)
        if not tools:
            text, calls = self._excerpt_answer(messages[-1]["content"], question), ()
        else:
            text, calls = self._agent_step(question, history, {t["name"] for t in tools})
        finish = "tool_calls" if calls else "length" if self._capped else "stop"
        call = ModelCall(self.name, self.model, (time.perf_counter() - start) * 1000, None, None, finish)
        return ModelStep(text, tuple(calls), call)

    # --- agent mode --------------------------------------------------------------------------

    def _agent_step(self, question: str, history: list[tuple[str, dict, dict]], tools: set[str]):
        def ask(name: str, **args):
            return "", [ToolRequest(f"call-{len(history) + 1}", name, args)]

        names = [h[0] for h in history]
        if is_structural(question):
            if not names:
                return ask("list_categories")
            if len(names) == 1:
                cats = [c["category"] for c in history[0][2].get("categories", [])]
                wanted = _mentioned_category(question, cats)
                return ask("browse_section", category=wanted) if wanted else ask("list_articles")
            return self._listing_answer(history[-1][2]), []

        if not names:
            return ask("search", query=question, k=5)
        hits = history[0][2].get("results", [])
        terms = set(content_terms(question))
        relevant = [h for h in hits if coverage(terms, f"{h['title']} {h['snippet']}") >= MIN_COVERAGE]
        if not relevant:
            return ("I could not find anything about this in the knowledge base, so I cannot answer it "
                    "from the documentation."), []
        # Prefer source text over generated artifacts (overviews are retrieval aids, not evidence).
        ranked = sorted(relevant, key=lambda h: h.get("kind") == "generated")
        top = ranked[0]
        if len(names) == 1:
            return ask("fetch_document", doc_id=top["doc_id"])
        if "link_listed" in self.faults and "list_articles" not in names:
            return ask("list_articles")
        opened = next(h[2] for h in history if h[0] == "fetch_document")
        if "error" in opened:
            return f"I could not open the best matching article: {opened['error']}", []
        listed = next((h[2]["articles"] for h in history if h[0] == "list_articles" and "articles" in h[2]), [])
        return self._extractive_answer(question, terms, opened, ranked, hits, listed), []

    def _extractive_answer(self, question, terms, opened, ranked, hits, listed) -> str:
        units = [u for u in sentences(plain(opened["text"]), whole_items=True) if not u.startswith(("#", "|", "---"))]
        units = [re.sub(r"^>\s*(\[!\w+\]\s*)?", "", u) for u in units]
        units = [u for u in units if u]
        best, best_score = 0, -1
        for i in range(max(1, len(units) - WINDOW + 1)):
            window_terms = set(content_terms(" ".join(units[i:i + WINDOW])))
            score = len(terms & window_terms)
            if score > best_score:
                best, best_score = i, score
        passage = self._cap(_join(_complete(units, best, best + WINDOW)))
        target = opened.get("url") or opened["doc_id"]
        if "corrupt_id" in self.faults:
            target = corrupt(target)
        target = _md_target(target)
        if "forget_link" in self.faults:
            lines = [f"From the article “{opened['title']}”:", "", passage]
        else:
            lines = [f"From [{opened['title']}]({target}):", "", passage]
        second = next((h for h in ranked[1:] if h.get("kind") != "generated"), None)
        if second is not None and (second.get("score") or 0) >= SECOND_SCORE_RATIO * (ranked[0].get("score") or 0):
            lines += ["", f"See also [{second['title']}]({_link(second)})."]
        if "link_listed" in self.faults:
            seen = {h["doc_id"] for h in hits}
            extra = next((a for a in listed if a["doc_id"] not in seen), None)
            if extra:
                lines += ["", f"Related: [{extra['title']}]({_link(extra)})."]
        if "cite_unretrieved" in self.faults:
            fake = _md_target((opened.get("url") or opened["doc_id"]).rstrip("/") + "-legacy")
            lines += ["", f"For older workspaces see [{opened['title']} (legacy)]({fake})."]
        return "\n".join(lines)

    def _cap(self, passage: str) -> str:
        """`passage`, cut at a word boundary before MAX_QUOTE_CHARS (and marked) when longer."""
        if len(passage) <= MAX_QUOTE_CHARS:
            return passage
        self._capped = True
        cut = passage[:MAX_QUOTE_CHARS]
        space = cut.rfind(" ", MAX_QUOTE_CHARS // 2)
        return (cut[:space] if space > 0 else cut).rstrip() + " …"

    @staticmethod
    def _listing_answer(result: dict[str, Any]) -> str:
        articles = result.get("articles", [])
        if not articles:
            return "The knowledge base has no articles in that section."
        by_cat: dict[str, list[dict]] = {}
        for a in articles:
            by_cat.setdefault(a.get("category") or "Uncategorised", []).append(a)
        lines = [f"The knowledge base has {len(articles)} articles in {len(by_cat)} categories:"]
        for cat, items in by_cat.items():
            lines += ["", f"**{cat}**"]
            lines += [f"- [{a['title']}]({_link(a)})" for a in items]
        return "\n".join(lines)

    # --- excerpt mode ------------------------------------------------------------------------

    def _excerpt_answer(self, prompt: str, question: str) -> str:
        heads = []
        for m in _EXCERPT_HEAD.finditer(prompt):  # numbered 1, 2, 3 … in order
            if int(m.group(1)) == len(heads) + 1:
                heads.append(m)
        excerpts: list[tuple[int, str]] = []
        for i, m in enumerate(heads):
            end = heads[i + 1].start() if i + 1 < len(heads) else len(prompt)
            excerpts.append((int(m.group(1)), prompt[m.end():end].strip()))
        terms = set(content_terms(question))
        scored = sorted(((coverage(terms, body), -n, n, body) for n, body in excerpts), reverse=True)
        if not scored or scored[0][0] < MIN_COVERAGE:
            return "The excerpts do not contain enough evidence to answer this question."
        picked = [s for s in scored[:2] if s[0] >= MIN_COVERAGE and s[0] >= scored[0][0] * SECOND_SCORE_RATIO]
        parts = []
        for _, _, n, body in picked:
            units = [u for u in sentences(plain(body)) if not u.startswith("#")]
            best = self._cap(max(units, key=lambda u: len(terms & set(content_terms(u))), default=body[:200]))
            marker = n
            if "corrupt_id" in self.faults or "cite_unretrieved" in self.faults:
                marker = len(excerpts) + 3  # beyond the excerpts: must be rejected as out_of_range
            parts.append(f"{best} [{marker}]")
        return " ".join(parts)


def _mentioned_category(question: str, categories: list[str]) -> str | None:
    q = set(content_terms(question))
    best, best_n = None, 0
    for c in categories:
        n = len(q & set(content_terms(c.replace("-", " ").replace("/", " "))))
        if n > best_n:
            best, best_n = c, n
    return best


def _complete(units: list[str], start: int, end: int) -> list[str]:
    """`units[start:end]`, never ending on an introduction ("Follow these steps:"): the list it introduces
    follows, item by item while the quote stays within MAX_QUOTE_CHARS; without one, the window ends on the
    sentence before it."""
    window = units[start:end]
    end = start + len(window)
    if not window or not window[-1].endswith(":"):
        return window
    while end < len(units) and LIST_ITEM.match(units[end]) and len(_join(units[start:end + 1])) <= MAX_QUOTE_CHARS:
        end += 1
    if end > start + len(window):
        return units[start:end]
    while len(window) > 1 and window[-1].endswith(":"):
        window.pop()
    return window


def _join(units: list[str]) -> str:
    out: list[str] = []
    for u in units:
        if LIST_ITEM.match(u) and out:
            out.append("\n" + u)
        else:
            out.append((" " if out else "") + u)
    return "".join(out).strip()


def _read(messages: list[dict[str, Any]]) -> tuple[str, list[tuple[str, dict, dict]]]:
    """The user's question and the (tool name, args, result) history so far."""
    question = next((m["content"] for m in messages if m["role"] == "user"), "")
    if "\nQuestion: " in question or question.startswith("Question: "):
        question = question.split("Question: ", 1)[1].split("\n", 1)[0]
    requests: dict[str, tuple[str, dict]] = {}
    history: list[tuple[str, dict, dict]] = []
    for m in messages:
        for tc in m.get("tool_calls") or []:
            requests[tc["id"]] = (tc["name"], tc.get("args") or {})
        if m["role"] == "tool":
            name, args = requests.get(m.get("tool_call_id"), (m.get("name", ""), {}))
            try:
                result = json.loads(m["content"])
            except (TypeError, ValueError):
                result = {"error": str(m["content"])}
            history.append((name, args, result))
    return question, history
