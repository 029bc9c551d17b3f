"""The `offline` provider: a deterministic agent with no model ("no LLM").

It is the default for the app, notebooks, tests and CI. Policy (issue #2):
- a structural question ("what articles do you have?", `questions.is_structural`) →
  `list_categories`, then `list_articles` or `browse_section`; the answer is a list of links and
  nothing is consulted;
- otherwise `search`; when the best hit covers too few of the question's content words it says the
  knowledge base has nothing and cites nothing; else it opens the best document (`by_title`: among the hits
  scoring at least `SECOND_SCORE_RATIO` of the top one, the one whose title holds most of the question's words) with
  `fetch_document`, answers with its most relevant passage and links it, and may cite a second,
  clearly relevant search hit without opening it (that snippet + citation makes it consulted);
- in excerpt mode it answers from the numbered excerpts and cites them as `[n]`.

In a conversation (docs/design.md §11) the messages hold the earlier turns before the current
question (`agent.history_messages`: each turn's question, then, for a turn carried in full, its tool
calls and their results, then its answer). The question is the **last** user message; the tool
results after it are this turn's, the ones before it are carried. The rules, all deterministic:
- *Follow-up search* (`follows_up`, `search_query`): a question that leans on the one before it is
  searched with the question followed by the previous question's own search query, so a chain of
  follow-ups keeps its topic. A question leans on the previous one when there is an earlier question
  that is not structural and it opens with a continuation (`FOLLOW_UP_OPENERS`: "and", "but",
  "also", "what about", "how about", "what if"), or has at most `ELLIPTICAL_MAX_TERMS` content word
  ("Why?", "On mobile?"), or refers back (`refers_back`: a `REFERRING` word such as it, that, them,
  there, and at most `REFERRING_MAX_TERMS` content words: "How long does that take?").
- *Which hit*: a hit is relevant when it covers `MIN_COVERAGE` of the query's content words or of
  the follow-up's own; the follow-up opens the one that covers most of its own words, then one no
  earlier turn opened, then the most of the query's words (ties: search order). Its "See also" must
  cover `MIN_COVERAGE` of its own words and is never a document an earlier turn opened. The quoted
  passage is chosen by its own words first (each occurrence of one counts `FOCUS_WEIGHT` times).
- *Answer from the carried document* (`carried_document`): when the follow-up refers back and the
  document just opened — the last document opened (and found) by the latest earlier turn whose tool
  calls are in the context — contains every one of its own content words (at least one), it is
  answered from that document, linking it, with no new tool call; like a first answer it may add
  "See also" for another hit of that turn's search that covers `MIN_COVERAGE` of its own words and
  scores `SECOND_SCORE_RATIO` of the document's. Otherwise it searches as above.
- In excerpt mode the excerpts are scored with the follow-up's search query; a follow-up's excerpts
  are numbered after the earlier turns' (§11), and they are read from whatever number they start at.

A quoted passage is at most `MAX_QUOTE_CHARS` long (cut with " …", finish_reason "quote_cut"), so a
document without sentence breaks never becomes a 1 MB answer. The answer itself is whole (no token limit cut it:
not "length", which would end the turn `truncated`).

Fault simulation (each off by default) reproduces what real models get wrong, for demos and tests:
`corrupt_id` (the cited id is off by one character), `forget_link` (the opened document is not
linked), `link_listed` (links a document it only saw as a title), `cite_unretrieved` (links a
document no tool returned; in excerpt mode cites an out-of-range `[n]`).
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from typing import Any

from ..config import MAX_QUESTION_CHARS
from ..questions import is_structural
from ..text import LIST_ITEM, content_terms, plain, sentences, words
from ..types import ModelCall
from .base import ModelStep, Provider, ToolRequest

FAULTS = ("corrupt_id", "forget_link", "link_listed", "cite_unretrieved")
MIN_COVERAGE = 0.35  # share of the question's content words the best hit must contain (tuned on data/demo_gold.jsonl)
SECOND_SCORE_RATIO = 0.8  # a second hit is cited only when nearly as strong as the first
WINDOW = 4  # units (sentences or list items) quoted from the opened document
#: Longest passage quoted in an answer. A document with no sentence breaks (one 1 MB line) is one
#: "sentence"; quoting it whole would dump the document. A cut passage ends with " …" and the model
#: call's finish_reason is "quote_cut" (the answer is whole: not "length", a token limit's cut, `truncated`).
MAX_QUOTE_CHARS = 1200
#: Openings of a follow-up that continues the question before it ("And with Okta?", "What about on mobile?").
FOLLOW_UP_OPENERS = ("and", "but", "also", "what about", "how about", "what if")
#: Referring words: a short question with one of them points back at the question or document before it.
REFERRING = frozenset("it its that this these those they them their there".split())
#: A question with a referring word and at most this many content words is a follow-up ("How long does that take?").
REFERRING_MAX_TERMS = 2
#: A question with at most this many content words is elliptical, a follow-up ("Why?", "On mobile?").
ELLIPTICAL_MAX_TERMS = 1
#: How much more a follow-up's own words count than its referent's when choosing the passage to quote.
FOCUS_WEIGHT = 2

# The `[n] file, page p, chunk c` line of prompts.excerpt_header — not any "[7] Smith et al." line of a chunk.
_EXCERPT_HEAD = re.compile(r"^\[(\d+)\] .*, page (?:\d+|-), chunk (?:\d+|-)$", re.MULTILINE)


def coverage(question_terms: set[str], text: str) -> float:
    if not question_terms:
        return 0.0
    return len(question_terms & set(content_terms(text))) / len(question_terms)


def by_title(ranked: list[dict[str, Any]], own: set[str]) -> list[dict[str, Any]]:
    """`ranked` with the hit a reader would open first: among the source hits that score at least
    `SECOND_SCORE_RATIO` of the best, the one whose title holds most of the question's content words (ties: search
    order). "How do I turn on two-factor authentication?" opens "Turn on two-factor authentication", not "Require
    two-factor authentication for all members", whose text says "two-factor authentication" more often."""
    if not ranked or ranked[0].get("kind") == "generated":
        return ranked
    best = ranked[0].get("score") or 0
    close = [h for h in ranked if h.get("kind") != "generated" and (h.get("score") or 0) >= SECOND_SCORE_RATIO * best]
    top = max(close, key=lambda h: coverage(own, h.get("title") or ""))  # max keeps the first of equals
    return [top, *(h for h in ranked if h is not top)]


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
        talk = _read(messages)
        if not tools:
            text, calls = self._excerpt_answer(messages[-1]["content"], talk), ()
        else:
            text, calls = self._agent_step(talk, tools)
        finish = "tool_calls" if calls else "quote_cut" if self._capped else "stop"
        call = ModelCall(self.name, self.model, (time.perf_counter() - start) * 1000, None, None, finish)
        return ModelStep(text, tuple(calls), call)

    # --- agent mode --------------------------------------------------------------------------

    def _agent_step(self, talk: "_Talk", tools: list[dict[str, Any]]):
        question, history = talk.question, talk.calls
        # as many results as the search tool's declaration offers by default (the run's k), asked for by name so
        # the call's recorded arguments say how many it was
        search_k = next((t["parameters"]["properties"]["k"].get("default") for t in tools if t["name"] == "search"), None)

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

        query = search_query(question, talk.earlier_questions)
        own = set(content_terms(question))
        if not names:
            carried, carried_hits = carried_document(talk)
            if (carried is not None and query != question and refers_back(question)
                    and own <= set(content_terms(carried["text"]))):
                # "See also" as in a first answer, from that turn's search, about the question's own words
                top = next((h for h in carried_hits if h["doc_id"] == carried["doc_id"]), {})
                others = [h for h in carried_hits if h["doc_id"] != carried["doc_id"]
                          and coverage(own, f"{h['title']} {h['snippet']}") >= MIN_COVERAGE]
                return self._extractive_answer(question, own, own, carried, [top, *others], carried_hits, []), []
            return ask("search", query=query, **({"k": search_k} if search_k else {}))
        hits = history[0][2].get("results", [])
        terms = set(content_terms(query))
        follow_up = query != question

        def fit(h: dict[str, Any]) -> tuple[float, float]:  # (coverage of the query's words, of the question's own)
            text = f"{h['title']} {h['snippet']}"
            return coverage(terms, text), coverage(own, text) if follow_up else 0.0

        # A follow-up's hit is relevant when it covers enough of the query's words or of its own words.
        relevant = [h for h in hits if max(fit(h)) >= MIN_COVERAGE]
        if not relevant:
            return ("I could not find anything about this in the knowledge base, so I cannot answer it "
                    "from the documentation."), []
        # Prefer source text over generated artifacts (overviews are retrieval aids, not evidence). A follow-up then
        # prefers the hit that covers most of its own words, then one no earlier turn opened (the user has that one),
        # then the most of the query's words (ties: search order); its "See also" must be about its own words too,
        # and never a document an earlier turn opened.
        read = {r.get("doc_id") for e in talk.earlier for name, _, r in e.calls if name == "fetch_document"}

        def rank(h: dict[str, Any]) -> tuple:
            query_fit, own_fit = fit(h)
            return (h.get("kind") == "generated", *((-own_fit, h["doc_id"] in read, -query_fit) if follow_up else ()))

        ranked = sorted(relevant, key=rank)
        if not follow_up:
            ranked = by_title(ranked, own)
        if follow_up:
            ranked = ranked[:1] + [h for h in ranked[1:] if fit(h)[1] >= MIN_COVERAGE and h["doc_id"] not in read]
        top = ranked[0]
        if len(names) == 1:
            return ask("fetch_document", doc_id=top["doc_id"])
        if "link_listed" in self.faults and "list_articles" not in names:
            return ask("list_articles")
        opened = next(h[2] for h in history if h[0] == "fetch_document")
        if "error" in opened:
            return f"I could not open the best matching article: {opened['error']}", []
        listed = next((h[2]["articles"] for h in history if h[0] == "list_articles" and "articles" in h[2]), [])
        return self._extractive_answer(question, terms, own if follow_up else set(), opened, ranked, hits, listed), []

    def _extractive_answer(self, question, terms, own, opened, ranked, hits, listed) -> str:
        units = [u for u in sentences(plain(opened["text"]), whole_items=True) if not u.startswith(("#", "|", "---"))]
        units = [re.sub(r"^>\s*(\[!\w+\]\s*)?", "", u) for u in units]
        units = [u for u in units if u]
        best, best_score = 0, -1
        for i in range(max(1, len(units) - WINDOW + 1)):
            window = content_terms(" ".join(units[i:i + WINDOW]))
            # a follow-up's own words count FOCUS_WEIGHT times each time they occur
            score = FOCUS_WEIGHT * sum(t in own for t in window) + len(terms & set(window))
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

    def _excerpt_answer(self, prompt: str, talk: "_Talk") -> str:
        heads: list[re.Match] = []
        # numbered n, n+1, n+2 … in order: a follow-up continues the numbers of the earlier turns
        for m in _EXCERPT_HEAD.finditer(prompt):
            if not heads or int(m.group(1)) == int(heads[-1].group(1)) + 1:
                heads.append(m)
        excerpts: list[tuple[int, str]] = []
        for i, m in enumerate(heads):
            end = heads[i + 1].start() if i + 1 < len(heads) else len(prompt)
            excerpts.append((int(m.group(1)), prompt[m.end():end].strip()))
        terms = set(content_terms(search_query(talk.question, talk.earlier_questions)))
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


@dataclass(frozen=True)
class _Earlier:
    """An earlier turn as the messages carry it: its question, and its tool calls' (name, args, result) when it is
    carried in full (else none)."""

    question: str
    calls: tuple[tuple[str, dict, dict], ...]


@dataclass(frozen=True)
class _Talk:
    """What the messages say: the current question, this turn's (name, args, result) so far, the earlier turns."""

    question: str
    calls: list[tuple[str, dict, dict]]
    earlier: tuple[_Earlier, ...] = ()

    @property
    def earlier_questions(self) -> list[str]:
        return [e.question for e in self.earlier]


def refers_back(question: str) -> bool:
    """A referring word and at most `REFERRING_MAX_TERMS` content words ("How long does that take?")."""
    return bool(REFERRING & set(words(question))) and len(content_terms(question)) <= REFERRING_MAX_TERMS


def follows_up(question: str) -> bool:
    """Does `question` lean on the question before it (the module docstring's rule)? Only asked when there is one."""
    text = " ".join(words(question))
    return (text.startswith(tuple(f"{o} " for o in FOLLOW_UP_OPENERS)) or text in FOLLOW_UP_OPENERS
            or len(content_terms(question)) <= ELLIPTICAL_MAX_TERMS or refers_back(question))


def search_query(question: str, earlier: list[str]) -> str:
    """What the offline agent searches for `question` after the `earlier` questions of its conversation (oldest
    first): the question itself, or, for a follow-up (`follows_up`) of a question that is not structural, the
    question followed by the previous question's own search query (so "How long does that take?" after "And with
    Okta?" after "How do I configure SSO?" searches all three), at most `MAX_QUESTION_CHARS` long."""
    query: str | None = None
    for q in [*earlier, question]:
        lean = query is not None and follows_up(q)
        # bounded like a question: a long chain of follow-ups loses its oldest words, never grows without end
        query = None if is_structural(q) else f"{q} {query}"[:MAX_QUESTION_CHARS] if lean else q
    return query if query is not None else question


def carried_document(talk: _Talk) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """(the document just opened, the search hits of the turn that opened it): the last `fetch_document` result of
    the latest earlier turn whose tool calls are in the context (carried in full), if it opened one that was found;
    else (None, [])."""
    latest = next((e for e in reversed(talk.earlier) if e.calls), None)
    calls = latest.calls if latest else ()
    opened = [r for name, _, r in calls if name == "fetch_document"]
    doc = opened[-1] if opened else None
    if not (doc and "error" not in doc and isinstance(doc.get("text"), str) and doc.get("doc_id")):
        return None, []
    return doc, [h for name, _, r in calls if name == "search" for h in r.get("results") or () if isinstance(h, dict)]


def _question_of(content: Any) -> str:
    """The question of a user message (an excerpt-mode message is "Question: …" followed by the excerpts)."""
    question = content if isinstance(content, str) else ""
    if "\nQuestion: " in question or question.startswith("Question: "):
        question = question.split("Question: ", 1)[1].split("\n", 1)[0]
    return question


def _read(messages: list[dict[str, Any]]) -> _Talk:
    """The current question (the last user message), this turn's (tool name, args, result) so far, and the
    earlier turns of the conversation that the messages carry (`agent.history_messages`), oldest first."""
    turns: list[list[dict[str, Any]]] = []
    for m in messages:
        if m.get("role") == "user":
            turns.append([m])
        elif turns:
            turns[-1].append(m)
    if not turns:
        return _Talk("", [])
    earlier = tuple(_Earlier(_question_of(t[0]["content"]), tuple(_results(t[1:]))) for t in turns[:-1])
    return _Talk(_question_of(turns[-1][0]["content"]), _results(turns[-1][1:]), earlier)


def _results(messages: list[dict[str, Any]]) -> list[tuple[str, dict, dict]]:
    """(tool name, args, result) of each tool message, in order."""
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
            history.append((name, args, result if isinstance(result, dict) else {"error": str(result)}))
    return history
