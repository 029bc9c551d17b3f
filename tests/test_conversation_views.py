"""The conversation views of m013 (`conversation_turns`, `conversations`), the doc-gap queue in a conversation and
the notebook's analysis of carried citations (`workbench.analysis.carried_citations`), over a real trace database.

The turns are asked for real (offline agent, demo corpus, each follow-up with its history) and written by the
real writer. Which cited documents a follow-up carried from an earlier turn is provenance's to say (design §11);
here each follow-up's payload says it in the agreed fields (`carried_from`, `carried_position`), and the
expectations are computed from those payloads, not from the views under test."""

from __future__ import annotations

import copy

import duckdb
import pytest
from test_doc_gaps import Guesser

from workbench.providers.base import _PROVIDERS, register_provider

from workbench.analysis import carried_citations as analysis
from workbench.payload import Payload
from workbench.session import Session
from workbench.trace import TraceReader
from workbench.trace.writer import TraceWriter
from workbench.types import ContextPolicy

SSO, WHERE, BREAD, KEYS = ("How do I configure SSO?", "Thanks, where was that article again?",
                             "How do I bake a sourdough loaf?", "How do I rotate API keys?")


def carry(payload: dict, earlier: dict, earlier_position: int, doc_id: str, *, consulted: bool) -> dict:
    """`payload` whose answer also cites `doc_id`, carried from the `earlier` turn's payload: a document entry
    with `carried_from`/`carried_position` (the exposure the earlier turn gave it: `full` when read there and
    consulted here, §11 rule 3b; `title` when only linked, never consulted, rule 3d)."""
    out = copy.deepcopy(payload)
    entry = next(d for d in earlier["documents"] if d["doc_id"] == doc_id)
    out["documents"] = [d for d in out["documents"] if d["doc_id"] != doc_id] + [{
        **entry, "cited": True, "consulted": consulted, "exposure": "full" if consulted else "title",
        "reason": "carried, cited" if consulted else "listed only", "tool_call": None,
        "carried_from": earlier["turn_id"], "carried_position": earlier_position}]
    sets = out["sets"]
    sets["retrieved"] = [d for d in sets["retrieved"] if d != doc_id] + [doc_id]
    sets["cited"] = [d for d in sets["cited"] if d != doc_id] + [doc_id]
    sets["consulted"] = [d for d in sets["consulted"] if d != doc_id] + ([doc_id] if consulted else [])
    return out


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    """Two conversations and a single turn; returns the db and, per conversation, its payloads in order."""
    db = tmp_path_factory.mktemp("conv") / "t.duckdb"
    session = Session.open(trace=False)
    writer = TraceWriter(db)
    written: dict[str, list[dict]] = {}

    def ask(conv: str | None, question: str, history: list, change=None, provider: str = "offline"):
        answer = session.ask(question, history=history, conversation_id=conv, context=ContextPolicy(turns=1),
                             judge=False, provider=provider) if conv else session.ask(question, judge=False)
        # the expectations below read the payloads as JSON: a `change` edits that JSON (a carried citation)
        payload = change(answer.payload.to_json()) if change else answer.payload.to_json()
        writer.log_turn(answer.record, Payload.from_json(payload))
        if conv:
            history.append(answer.record)
            written.setdefault(conv, []).append(payload)
        return payload

    a: list = []
    first = ask("c-a", SSO, a)
    assert "sso-saml-setup" in first["sets"]["consulted"]
    # a follow-up answered from the link of turn 1's answer, with no tool call of its own: consults nothing
    ask("c-a", WHERE, a, lambda p: carry({**p, "documents": [], "sources": [], "citations": [],
                                          "sets": {"retrieved": [], "cited": [], "consulted": []}},
                                         first, 1, "sso-saml-setup", consulted=False))
    register_provider(Guesser.name, Guesser)
    try:  # a follow-up answered from belief, citing nothing: consults nothing, and is still a gap
        assert not ask("c-a", BREAD, a, provider=Guesser.name)["sets"]["consulted"]
    finally:
        _PROVIDERS.unregister(Guesser.name)
    b: list = []
    keys = ask("c-b", KEYS, b)
    read = keys["sets"]["consulted"][0]
    ask("c-b", "And how often should I do that?", b, lambda p: carry(p, keys, 1, read, consulted=True))
    ask(None, SSO, [])
    return db, written


def view(db, sql: str) -> list[dict]:
    columns, rows = TraceReader(db).rows(sql)
    return [dict(zip(columns, r)) for r in rows]


def test_conversations_view_gives_turns_questions_sets_and_carried_citations(traced):
    db, written = traced
    got = {r["conversation_id"]: r for r in view(db, "SELECT * FROM conversations")}
    assert set(got) == set(written), "single turns are no conversation"
    for conv, payloads in written.items():
        row = got[conv]
        assert row["turn_ids"] == [p["turn_id"] for p in payloads]
        assert row["questions"] == [p["question"] for p in payloads]
        assert row["turns"] == len(payloads) and row["follow_ups"] == len(payloads) - 1
        assert row["sets"] == [{"position": i, **{k: p["sets"][k] for k in ("retrieved", "cited", "consulted")}}
                               for i, p in enumerate(payloads, start=1)]
        carried = [{"position": i, "doc_id": d["doc_id"], "carried_from": d["carried_from"],
                    "carried_position": d["carried_position"]}
                   for i, p in enumerate(payloads, start=1) for d in p["documents"]
                   if d.get("carried_from") and d["cited"]]
        assert row["carried_citations"] == carried and carried
        assert row["follow_ups_citing_carried"] == len({c["position"] for c in carried})


def test_conversation_turns_view_has_the_context_each_follow_up_was_asked_in(traced):
    db, written = traced
    rows = view(db, "SELECT * FROM conversation_turns WHERE conversation_id = 'c-a' ORDER BY position")
    assert [r["position"] for r in rows] == [1, 2, 3]
    # ContextPolicy(turns=1): the latest earlier turn keeps its tool results, older ones question and answer
    assert rows[0]["context"] == []
    assert [c["context"] for c in rows[2]["context"]] == ["answer", "full"]
    assert [c["turn_id"] for c in rows[2]["context"]] == [p["turn_id"] for p in written["c-a"][:2]]
    assert {r["context_turns"] for r in rows} == {1}
    assert [r["cites_carried"] for r in rows] == [False, True, False]
    assert rows[1]["carried"] == ["sso-saml-setup"] and rows[1]["consulted"] == []


def test_a_follow_up_citing_a_carried_document_is_no_doc_gap(traced):
    db, written = traced
    with duckdb.connect(str(db), read_only=True) as con:
        consulted_nothing = {q for (q,) in con.execute(
            "SELECT question FROM turns WHERE status = 'ok' AND n_consulted = 0").fetchall()}
    assert {WHERE, BREAD} <= consulted_nothing  # both follow-ups consulted nothing…
    columns, rows = TraceReader(db).gaps()
    gaps = {dict(zip(columns, r))["question"] for r in rows}
    assert WHERE not in gaps  # …but this one answered from a document the conversation had read
    assert BREAD in gaps  # being a follow-up is not enough
    assert {q for (q,) in view_rows(db, "SELECT question FROM doc_gaps")} == gaps


def view_rows(db, sql: str) -> list[tuple]:
    return TraceReader(db).rows(sql)[1]


def test_analysis_counts_follow_ups_citing_carried_documents_and_which(traced):
    db, written = traced
    follow_ups = [(i, p) for payloads in written.values() for i, p in enumerate(payloads, start=1)
                  if i > 1 and p["status"] == "ok"]
    citing = [p for _, p in follow_ups if any(d.get("carried_from") and d["cited"] for d in p["documents"])]
    [rate] = analysis.carried_citation_rate(db).to_dict("records")
    assert rate["follow_ups"] == len(follow_ups) == 3
    assert rate["citing_carried"] == len(citing) == 2
    assert rate["share_citing_carried"] == pytest.approx(2 / 3)
    docs = analysis.carried_documents(db).set_index("doc_id").to_dict("index")
    read = written["c-b"][0]["sets"]["consulted"][0]
    assert set(docs) == {"sso-saml-setup", read}
    assert docs["sso-saml-setup"]["follow_ups"] == 1 and docs["sso-saml-setup"]["consulted"] == 0
    assert docs[read]["consulted"] == 1 and docs[read]["median_turns_back"] == 1
    assert list(analysis.conversation_table(db)["conversation_id"]) == ["c-b", "c-a"]  # latest first
