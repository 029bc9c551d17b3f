"""Question kinds and the one question-file reader (workbench/questions.py)."""

from __future__ import annotations

import json

import pytest

from conftest import ROOT
from workbench.errors import CorpusError
from workbench.questions import is_structural, question_kind, read_questions


@pytest.mark.parametrize("q", [
    "What articles do you have?",
    "Which topics does the help center cover?",
    "List all categories",
    "Which articles are in the billing section?",
    "Which articles do you have about billing?",
    "Show me the articles in Billing",
    "What can you help with?",
    "Which articles are on this site?",
    "Give me a list of all the help categories.",
    "What can I find in the Orbitly help center?",
    "What is in the knowledge base?",
])
def test_structural_questions_ask_what_the_knowledge_base_holds(q):
    assert is_structural(q) and question_kind(q) == "structural"


@pytest.mark.parametrize("q", [
    # The known misclassification: a "which articles …" question that names a topic is about the topic.
    "Which articles mention Okta?",
    "Which articles explain the 429 status?",
    "Which documents talk about data retention?",
    "What articles do you have that discuss SSO?",
    "Which articles cover SAML?",
    "Which guides discuss webhooks?",
    # and what was already right
    "How do I configure SSO?",
    "Which article explains how to reset my password?",
    "Who won the football World Cup in 2010?",
])
def test_topical_questions_are_substantive(q):
    assert not is_structural(q) and question_kind(q) == "substantive"


def test_the_demo_gold_labels_agree_with_the_classifier():
    """Every `listing` question of the gold set is structural; every other one (substantive or out of
    scope) is substantive — otherwise an out-of-scope question would never reach the doc-gap queue."""
    for q in read_questions(ROOT / "data" / "demo_gold.jsonl"):
        assert is_structural(q.text) == (q.kind == "listing"), q


def test_a_topical_which_articles_question_is_searched_not_listed(demo_session):
    answer = demo_session.ask("Which articles mention Okta?", judge=None)
    assert [t.name for t in answer.record.tool_calls][:1] == ["search"]
    assert answer.payload.sets.consulted, "the topic was read, so the turn is no doc gap"
    listing = demo_session.ask("Which articles are in the billing section?", judge=None)
    assert [t.name for t in listing.record.tool_calls] == ["list_categories", "browse_section"]
    assert listing.payload.sets.consulted == ()


def test_the_trace_stores_the_kind_and_doc_gaps_use_it(tmp_path):
    from workbench.session import Session
    from workbench.trace import TraceReader

    db = tmp_path / "t.duckdb"
    s = Session.open(trace_db=db)
    for q in ("Which articles mention sourdough starters?", "Which articles are in the billing section?"):
        s.ask(q, judge=None)
    reader = TraceReader(db)
    kinds = dict(reader.rows("SELECT question, question_kind FROM turns")[1])
    assert kinds == {"Which articles mention sourdough starters?": "substantive",
                     "Which articles are in the billing section?": "structural"}
    gaps = [r[0] for r in reader.rows("SELECT question FROM doc_gaps")[1]]
    assert gaps == ["Which articles mention sourdough starters?"]


def test_reader_keeps_ids_gold_and_labels(tmp_path):
    f = tmp_path / "q.jsonl"
    f.write_text('{"question": "a?", "expected": ["x"], "id": 7}\n\n{"question": "b?", "kind": "listing"}\n')
    qs = read_questions(f)
    assert [(q.text, q.line, q.id, q.expected, q.kind) for q in qs] == [("a?", 1, 7, ("x",), None),
                                                                        ("b?", 3, None, (), "listing")]


@pytest.mark.parametrize("lines,need_id,message", [
    (['{"q": "x"}'], False, ':1: each line needs a non-empty string field "question"'),
    (['{"question": "a"}', '{"question": "b"}'], True, ':1: each line needs an "id"'),
    (['{"question": "a", "expected": "doc"}'], False, ':1: "expected" must be a list'),
    (['{"question": "a", "kind": 3}'], False, ':1: "kind" must be a string'),
    ([""], False, "no questions in file"),
])
def test_reader_errors_name_file_and_line(tmp_path, lines, need_id, message):
    f = tmp_path / "q.jsonl"
    f.write_text("\n".join(lines) + "\n")
    with pytest.raises(CorpusError, match=message.replace("[", r"\[")):
        read_questions(f, need_id=need_id)


@pytest.mark.parametrize("args", [["ask", "--no-trace", "--questions"], ["retrieve", "--queries"], ["eval"]])
def test_every_command_reads_question_files_the_same_way(tmp_path, args, capsys):
    from workbench.cli import main

    f = tmp_path / "q.jsonl"
    f.write_text(json.dumps({"id": 1, "question": "How do I configure SSO?"}) + '\n{"id": 2}\n')
    extra = ["--db", str(tmp_path / "t.duckdb"), "--no-progress"] if args == ["eval"] else []
    assert main([*args, str(f), *extra]) == 2
    assert f'error: {f}:2: each line needs a non-empty string field "question"' in capsys.readouterr().err
