"""What an instrumented app's audited turns must say, derived from what the app really did (design.md §11, §12).

Two records, never a hard-coded id: the app's own (tests/conformance/kit.py: every tool result, every document a
retriever returned or a reranker dropped, every answer, per turn) and the loopback model's (tests/wire_model.py:
every request body it received, every call it asked for). A document reached the model when its url or its
snippet is in a request of the turn; the answer's links are the model's own reply.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from wire_model import URL, Exchange

LINK = re.compile(r"\]\((https?://[^)\s]+)\)")


@dataclass
class AppTurn:
    """One turn as the app recorded it."""

    session: str
    position: int
    question: str
    returned: list[str] = field(default_factory=list)  # documents its tools or retrievers passed to the model
    opened: list[str] = field(default_factory=list)  # opened in full by its own tool call
    dropped: list[str] = field(default_factory=list)  # returned by a retriever, dropped before the prompt
    answer: str = ""


def read_record(path: Path) -> list[AppTurn]:
    turns: dict[tuple, AppTurn] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        e = json.loads(line)
        t = turns.setdefault((e["session"], e["position"]), AppTurn(e["session"], e["position"], e["question"]))
        if e["event"] == "search":
            t.returned += [d for d in e["returned"] if d not in t.returned]
        elif e["event"] == "open" and e["doc_id"]:
            t.opened.append(e["doc_id"])
        elif e["event"] == "drop":
            t.dropped += e["dropped"]
        elif e["event"] == "answer":
            t.answer = e["text"]
    return list(turns.values())


def exchanges_of(turn: AppTurn, exchanges: list[Exchange]) -> list[Exchange]:
    """The model calls of `turn`: those whose last user message asks its question."""
    def last_user(x: Exchange) -> str:
        return next((t for role, t in reversed(x.said.messages) if role == "user"), "")
    return [x for x in exchanges if turn.question in last_user(x)]


def model_input(xs: list[Exchange]) -> str:
    return " ".join(" ".join(t for role, t in x.said.messages if role != "assistant") for x in xs).replace("\\n", " ")


@dataclass
class Expected:
    retrieved: set[str]
    cited: set[str]
    consulted: set[str]
    rejected: list[str]
    not_shown: set[str]
    carried: dict[str, int]  # doc -> position of the earlier turn it is carried from
    calls: list[tuple[str, dict]]  # the tool calls the model asked for, in order
    links: list[str]


def expect(turn: AppTurn, earlier: list[AppTurn], exchanges: list[Exchange], urls: dict[str, str],
           snippets: dict[str, str]) -> Expected:
    """The sets of `turn`, from the two records: `urls`/`snippets` map a document to its url and snippet."""
    xs = exchanges_of(turn, exchanges)
    seen = " ".join(model_input(xs).split())
    seen_urls = set(URL.findall(seen))
    answered = set(LINK.findall(" ".join(t for x in xs for role, t in x.said.messages if role == "assistant")))
    earlier_cited = {d for t in earlier for d in t.returned + t.opened if urls[d] in LINK.findall(t.answer)}

    def shown(d: str) -> bool:  # its url or snippet in the model's input, or an earlier answer's link to it
        return urls[d] in seen_urls or " ".join(snippets[d].split()) in seen or (d in earlier_cited and urls[d] in answered)
    own = [d for d in dict.fromkeys(turn.returned + turn.opened) if shown(d)]
    carried = {d: t.position for t in earlier for d in t.returned + t.opened if d not in own and shown(d)}
    retrieved = set(own) | set(carried)
    links = LINK.findall(xs[-1].move.text) if xs else []
    by_url = {urls[d]: d for d in retrieved}
    cited = {by_url[u] for u in links if u in by_url}
    calls = [x.move.call for x in xs if x.move.call]
    read = {d for d in cited if " ".join(snippets[d].split()) in seen}  # a snippet or more of it reached the model
    return Expected(retrieved, cited, set(turn.opened) | read, [u for u in links if u not in by_url],
                    set(turn.dropped) - retrieved, carried, calls, links)


def corpus_maps(kit_corpus: dict[str, dict], snippet) -> tuple[dict[str, str], dict[str, str]]:
    return {d: a["url"] for d, a in kit_corpus.items()}, {d: snippet(a) for d, a in kit_corpus.items()}


def check_turn(got: dict, exp: Expected, turn: AppTurn, first_turn_id: str | None = None) -> list[str]:
    """Every way the audited turn `got` differs from `exp` (empty when it conforms)."""
    wrong = []
    def same(what: str, have, want):
        if have != want:
            wrong.append(f"{what}: got {have}, expected {want}")
    same("status", got["status"], "ok")
    same("question", got["question"], turn.question)
    same("retrieved", set(got["sets"]["retrieved"]), exp.retrieved)
    same("cited", set(got["sets"]["cited"]), exp.cited)
    same("consulted", set(got["sets"]["consulted"]), exp.consulted)
    same("rejected", [(r["target"], r["reason"]) for r in got["rejected_citations"]],
         [(u, "not_retrieved") for u in exp.rejected])
    same("not_shown", set(got["audit"].get("not_shown") or []), exp.not_shown)
    carried = {s["doc_id"]: s.get("carried_from") for s in got["sources"] if s.get("carried_from")}
    same("carried_from", carried, {d: first_turn_id for d in exp.carried if d in exp.cited})
    if exp.calls:  # a chain that asks no tool: its retriever may be listed as a call
        same("tool calls", [(c["name"], c.get("args")) for c in got.get("tool_calls") or []], [tuple(c) for c in exp.calls])
    full = {d for d, e in (got["audit"].get("evidence") or {}).items() if e.get("exposure") == "full"}
    same("opened in full", full & set(turn.opened), set(turn.opened))
    return wrong


def check_hidden(got: dict, turn: AppTurn) -> list[str]:
    """An unauditable turn claims nothing (§12): no set, no rejection, its links unjudged."""
    wrong = []
    if got["status"] != "unauditable":
        wrong.append(f"status: got {got['status']}, expected unauditable")
    sets = {k: v for k, v in got["sets"].items() if v}
    if sets:
        wrong.append(f"sets: got {sets}, expected none")
    if got["rejected_citations"]:
        wrong.append(f"rejected: got {[r['target'] for r in got['rejected_citations']]}, expected none")
    # the links of the answer as the trace holds it: an app whose hidden mode hides outputs too (pydantic-ai's
    # include_content=False, OpenLLMetry's TRACELOOP_TRACE_CONTENT=false) sends no answer, so none can be listed
    links = LINK.findall(turn.answer) if got["answer"] else []
    unjudged = got["audit"].get("unjudged_citations")
    if sorted(unjudged or []) != sorted(links):
        wrong.append(f"unjudged_citations: got {unjudged}, expected {links}")
    return wrong


__all__ = ["URL", "AppTurn", "Expected", "read_record", "expect", "check_turn", "check_hidden", "corpus_maps"]
