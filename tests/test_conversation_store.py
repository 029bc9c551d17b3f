"""Conversations in a real DuckDB trace file: m012's columns and `trace.conversation_reader` (docs/design.md §11)."""

from __future__ import annotations

from dataclasses import replace

import duckdb
import pytest

from tracedb import empty_trace_db
from workbench.context_policy import history_for
from workbench.provenance import sources_payload
from workbench.session import Session
from workbench.trace.conversation_reader import conversation_owner, conversation_so_far, list_conversations, load_conversation
from workbench.types import ContextPolicy

QUESTIONS = ["How do I configure SSO?", "How do I reset my password?", "Which articles do you have?"]


def _comparable(record):
    """What a follow-up's history is made of, without the timings the store rounds."""
    return (record.question, record.answer, record.mode, record.turn_id, record.position,
            [(c.name, c.exposure, c.args, c.error, [(i.doc_id, i.title, i.url, i.rank, i.score, i.chunk_index, i.snippet)
                                                    for i in c.results]) for c in record.tool_calls],
            [(e.n, e.doc_id, e.chunk_index, e.score, e.text, e.title, e.url) for e in record.excerpts])


@pytest.mark.parametrize("mode", ["agent", "excerpts"])
def test_a_stored_conversation_is_rebuilt_as_the_records_that_were_asked(tmp_path, mode):
    db = empty_trace_db(tmp_path / "t.duckdb")
    session = Session.open(trace_db=db)
    asked = []
    for q in QUESTIONS:
        asked.append(session.ask(q, mode=mode, history=asked, conversation_id="c-1",
                                 context=ContextPolicy(turns=1)).record)
    session.ask("Unrelated single turn", mode=mode)
    loaded = load_conversation(db, "c-1", session.corpus)
    assert [_comparable(r) for r in loaded] == [_comparable(r) for r in asked]
    assert [r.position for r in loaded] == [1, 2, 3]
    # the history a fourth turn gets is the same from the store as from memory
    policy = ContextPolicy(turns=1)
    assert [(_comparable(h.record), h.context, h.position) for h in history_for(loaded, policy)] == \
        [(_comparable(h.record), h.context, h.position) for h in history_for(asked, policy)]
    if mode == "excerpts":  # numbers continue across the conversation
        numbers = [e.n for r in loaded for e in r.excerpts]
        assert numbers == list(range(1, len(numbers) + 1))
    assert conversation_so_far(db, "c-1", session.corpus)[1] == 3 and conversation_so_far(db, "new", session.corpus) == ([], 0)
    assert load_conversation(db, "new", session.corpus) == []
    [conv] = list_conversations(db)
    assert (conv["conversation_id"], conv["turns"], conv["first_question"]) == ("c-1", 3, QUESTIONS[0])


def test_the_turn_context_and_policy_are_stored_with_each_turn(tmp_path):
    db = empty_trace_db(tmp_path / "t.duckdb")
    session = Session.open(trace_db=db)
    asked = []
    for q in QUESTIONS:
        asked.append(session.ask(q, history=asked, conversation_id="c-2",
                                 context=ContextPolicy(turns=1)).record)
    con = duckdb.connect(str(db), read_only=True, config={"autoload_known_extensions": False})
    try:
        states = con.execute("SELECT t.position, c.earlier_position, c.context FROM turn_context c "
                             "JOIN turns t USING (turn_id) ORDER BY 1, 2").fetchall()
        runs = con.execute("SELECT DISTINCT r.context_turns FROM turns t JOIN runs r USING (run_id) "
                           "WHERE t.conversation_id = 'c-2'").fetchall()
        positions = con.execute("SELECT position, conversation_id FROM turns ORDER BY position").fetchall()
    finally:
        con.close()
    assert states == [(2, 1, "full"), (3, 1, "answer"), (3, 2, "full")]
    assert runs == [(1,)]
    assert positions == [(1, "c-2"), (2, "c-2"), (3, "c-2")]


def test_a_failed_turn_is_not_history_but_keeps_its_position(tmp_path):
    db = empty_trace_db(tmp_path / "t.duckdb")
    session = Session.open(trace_db=db)
    first = session.ask(QUESTIONS[0], conversation_id="c-3")
    failed = replace(first.record, turn_id="failed-2", question=QUESTIONS[1], answer="", status="provider_error",
                     error="the server closed the connection", position=2, tool_calls=())
    session.tracer.log_turn(failed, sources_payload(failed))
    loaded = load_conversation(db, "c-3", session.corpus)
    assert [r.turn_id for r in loaded] == [first.record.turn_id]
    assert conversation_so_far(db, "c-3", session.corpus)[1] == 2  # the failed turn keeps its place


def test_the_context_policy_is_configuration_not_a_secret():
    from workbench.trace.rows import redact_config

    config = {"context": {"turns": 2, "token_budget": 4096}, "options": {"max_tokens": 256, "api_key": "s3",
                                                                          "access_token": "s4", "token": "s5"}}
    assert redact_config(config) == {"context": {"turns": 2, "token_budget": 4096},
                                     "options": {"max_tokens": 256, "api_key": "[redacted]",
                                                 "access_token": "[redacted]", "token": "[redacted]"}}


def test_one_reader_gives_whole_typed_turns_as_they_were_asked(tmp_path):
    """Issue 32 item 6: reopening reads each turn whole through the one reader of stored turns (configuration,
    latency, model calls, claims, verification), with the titles and URLs the turn recorded, whatever corpus is
    loaded now; what it was asked with is typed (`types.TurnConfig`)."""
    from workbench.corpus import Corpus
    from workbench.trace.conversation_reader import read_conversation

    db = empty_trace_db(tmp_path / "t.duckdb")
    session = Session.open(trace_db=db)
    first = session.ask(QUESTIONS[0], conversation_id="c-4", verify=True)
    second = session.ask(QUESTIONS[1], history=[first.record], conversation_id="c-4")
    stored = read_conversation(db, "c-4", Corpus("empty", str(tmp_path), []))  # another corpus: nothing of it
    assert [t.record.turn_id for t in stored] == [first.record.turn_id, second.record.turn_id]
    for t, asked in zip(stored, (first, second)):
        assert _comparable(t.record) == _comparable(asked.record)
        assert t.record.latency_ms == asked.record.latency_ms
        assert t.record.model_calls == asked.record.model_calls
        assert t.record.config == asked.record.config
        assert sources_payload(t.record).rejected_citations == asked.payload.rejected_citations
        assert [c.text for c in t.faithfulness.claims] == [c.text for c in asked.faithfulness.claims]
        assert type(t) is type(asked) and t.other_judges == (), "read back as the Answer it was asked as (issue 42)"
        assert t.payload.sets == asked.payload.sets, "its payload computed anew from its record"
        c = t.record.config  # typed: the one configuration type (issue 42 item 1)
        assert (c.provider, c.model, c.retriever, c.mode, c.k, c.tool_protocol, c.corpus_id, c.corpus_hash) == \
            ("offline", "extractive-v1", "bm25", "agent", 5, "native", "demo", session.corpus.content_hash)
        assert c.option_pairs() == ()
    assert stored[0].verification.to_payload().verdicts == first.payload.verification.verdicts
    assert stored[1].verification is None
    assert [h.steps for h in stored[1].record.history] == [h.steps for h in second.record.history]


def test_a_turn_verified_twice_is_reopened_with_its_latest_verification(tmp_path):
    from workbench.trace.conversation_reader import read_conversation

    db = empty_trace_db(tmp_path / "t.duckdb")
    session = Session.open(trace_db=db)
    first = session.ask(QUESTIONS[0], conversation_id="c-5", verify=True)
    again = session.verify(first)
    assert again.verification.verification_id != first.verification.verification_id
    (stored,) = read_conversation(db, "c-5")
    assert stored.verification.verification_id == again.verification.verification_id
    assert [a.seq for a in stored.verification.ablations] == [a.seq for a in again.verification.ablations]
    assert stored.verification.to_payload().details == again.payload.verification.details


def test_each_conversation_is_its_first_turns_owners(tmp_path):
    """Issue 31 item 3: `list_conversations(owner=…)` lists only that owner's conversations (and, when asked for,
    the ownerless ones the CLI asked), and `conversation_owner` names whose a conversation is."""
    db = empty_trace_db(tmp_path / "t.duckdb")
    session = Session.open(trace_db=db)
    a = session.ask("How do I configure SSO?", conversation_id="c-ana", user_id="ana@x.example", owner="user:ana@x.example")
    session.ask("And with Okta?", history=[a.record], conversation_id="c-ana", user_id="ana@x.example",
                owner="user:ana@x.example")
    session.ask("How do I reset my password?", conversation_id="c-bo", owner="browser:0123")
    session.ask("Which articles do you have?", conversation_id="c-cli")  # asked outside the app: nobody's
    mine = list_conversations(db, owner="user:ana@x.example", ownerless=False)
    assert [(r["conversation_id"], r["turns"], r["owner"]) for r in mine] == [("c-ana", 2, "user:ana@x.example")]
    assert {r["conversation_id"] for r in list_conversations(db, owner="browser:0123")} == {"c-bo", "c-cli"}
    assert {r["conversation_id"] for r in list_conversations(db)} == {"c-ana", "c-bo", "c-cli"}
    assert conversation_owner(db, "c-ana") == (True, "user:ana@x.example")
    assert conversation_owner(db, "c-cli") == (True, None)
    assert conversation_owner(db, "c-none") == (False, None)
