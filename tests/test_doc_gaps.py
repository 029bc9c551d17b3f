"""The doc-gap queue (`doc_gaps`, `doc_gaps_for`, `workbench gaps`, the Doc gaps page) over a real trace
database: only `ok` turns can be gaps, a question the knowledge base answered in another turn is none, and
the queue is scoped by run, provider and corpus."""

from __future__ import annotations

import csv
import io

import duckdb
import pytest
from streamlit.testing.v1 import AppTest
from test_usage import other_corpus

from conftest import ROOT
from workbench.cli import main
from workbench.corpus import load_corpus
from workbench.providers.base import _PROVIDERS, ModelStep, Provider, register_provider
from workbench.session import Session
from workbench.trace import TraceReader
from workbench.types import ModelCall

SSO, BREAD, CAPITAL, KOMBUCHA = ("How do I configure SSO?", "How do I bake a sourdough loaf?",
                                 "What is the capital of Mongolia?", "How do I brew kombucha?")


class Guesser(Provider):
    """A model that answers at once, from what it believes, without calling a tool: its turns end `ok` and
    consult nothing (as a weak model that never searches)."""

    name = "test-guesser"
    label = "guesser (test)"

    def complete(self, messages, tools):
        return ModelStep("I believe it is somewhere in the settings.", (), ModelCall(self.name, "v1", 1.0, 10, 5, "stop"))


@pytest.fixture(scope="module")
def traced(tmp_path_factory, demo):
    """Turns of three providers on two corpora; the run id of each (provider, corpus)."""
    root = tmp_path_factory.mktemp("gaps")
    db = root / "traces.duckdb"
    register_provider(Guesser.name, Guesser)
    try:
        on_demo = Session.open(demo, trace_db=db)
        for _ in range(2):
            assert on_demo.ask(SSO).payload.sets.consulted, "the knowledge base answers it"
        assert not on_demo.ask(BREAD).payload.sets.consulted
        assert on_demo.ask(SSO, provider=Guesser.name).payload.status == "ok"  # a miss, not a gap
        on_demo.ask(CAPITAL, provider=Guesser.name)
        failed = on_demo.ask(KOMBUCHA, provider="ollama", model="m", host="http://127.0.0.1:9", retries=0)
        assert failed.payload.status != "ok"
        Session.open(load_corpus(other_corpus(root)), trace_db=db).ask(SSO, provider=Guesser.name)
    finally:
        _PROVIDERS.unregister(Guesser.name)
    with duckdb.connect(str(db), read_only=True) as con:
        runs = {(p, c): r for r, p, c in con.execute("SELECT run_id, provider, corpus_id FROM runs").fetchall()}
    return db, runs


def gaps_by_definition(db, runs=None, providers=None, corpora=None) -> dict[tuple[str, str], int]:
    """(question key, corpus) → asks, computed from the raw `turns` and `runs` rows by the definition."""
    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute("SELECT t.question, t.status, t.question_kind, t.n_consulted, t.run_id, r.provider, "
                           "r.corpus_id FROM turns t JOIN runs r USING (run_id)").fetchall()
    ok = [(" ".join(q.lower().split()), n, run, p, c) for q, status, kind, n, run, p, c in rows
          if status == "ok" and kind == "substantive"]
    answered = {(key, c) for key, n, _, _, c in ok if n > 0}
    out: dict[tuple[str, str], int] = {}
    for key, n, run, p, c in ok:
        if n == 0 and (key, c) not in answered and (runs is None or run in runs) \
                and (providers is None or p in providers) and (corpora is None or c in corpora):
            out[key, c] = out.get((key, c), 0) + 1
    return out


def test_only_ok_turns_on_questions_the_knowledge_base_did_not_answer_are_gaps(traced):
    db, runs = traced
    got = {(" ".join(q.lower().split()), c): asks for q, c, asks, *_ in TraceReader(db).gaps()[1]}
    assert got == gaps_by_definition(db)
    # the guesser's SSO turn on the demo is its miss (offline consulted the article), the failed turn no gap;
    # on acme-kb no turn consulted anything for SSO: a gap of that corpus
    assert set(got) == {(BREAD.lower(), "demo"), (CAPITAL.lower(), "demo"), (SSO.lower(), "acme-kb")}
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM doc_gaps").fetchone() == (len(got),)


@pytest.mark.parametrize("scope", [dict(providers=["offline"]), dict(corpora=["acme-kb"]),
                                   dict(runs="guesser-demo"), dict(providers=["ollama"])])
def test_the_queue_is_scoped_by_run_provider_and_corpus(traced, scope):
    db, runs = traced
    if scope.get("runs"):
        scope = dict(runs=[runs["test-guesser", "demo"]])
    got = TraceReader(db).gaps(scope.get("runs"), scope.get("providers"), scope.get("corpora"))[1]
    assert {(" ".join(q.lower().split()), c): asks for q, c, asks, *_ in got} == gaps_by_definition(db, **scope)


def test_cli_gaps_names_the_corpus_and_filters(traced, capsys):
    db, _ = traced
    assert main(["gaps", "--db", str(db), "--csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert {(r["question"], r["corpus_id"]) for r in rows} == {(BREAD, "demo"), (CAPITAL, "demo"), (SSO, "acme-kb")}
    assert main(["gaps", "--db", str(db), "--csv", "--provider", "test-guesser", "--corpus-id", "demo"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [(r["question"], r["corpus_id"], r["asks"]) for r in rows] == [
        (CAPITAL, "demo", str(gaps_by_definition(db, providers=["test-guesser"], corpora=["demo"])[CAPITAL.lower(), "demo"]))]


def test_doc_gaps_page_filters_by_provider_corpus_and_run(traced, monkeypatch):
    db, runs = traced
    monkeypatch.setenv("WORKBENCH_DB", str(db))
    at = AppTest.from_file(str(ROOT / "pages" / "3_Doc_gaps.py"), default_timeout=60).run()
    assert not at.exception, at.exception

    def shown() -> set[tuple[str, str]]:
        assert not at.exception, at.exception
        return {(q, c) for q, c in zip(at.dataframe[0].value["question"], at.dataframe[0].value["corpus_id"])}

    assert shown() == {(BREAD, "demo"), (CAPITAL, "demo"), (SSO, "acme-kb")}, "a miss of one model is no gap"
    at.multiselect(key="gaps_providers").set_value(["offline"]).run()
    assert shown() == {(BREAD, "demo")}
    at.multiselect(key="gaps_providers").set_value([]).run()
    at.multiselect(key="gaps_corpora").set_value(["acme-kb"]).run()
    assert shown() == {(SSO, "acme-kb")}
    at.multiselect(key="gaps_corpora").set_value([]).run()
    at.multiselect(key="gaps_runs").set_value([runs["test-guesser", "demo"]]).run()
    assert shown() == {(CAPITAL, "demo")}
    at.multiselect(key="gaps_runs").set_value([runs["ollama", "demo"]]).run()
    assert not at.dataframe and any("No gaps" in s.value for s in at.success), "a failed turn is no gap"


# --- the kind of gap (issue 33 item 8): a retrieval miss, an article to write, or not this corpus's subject ---------

OKTA, REFUND, CUP, COLOUR = ("Where do I find the Okta metadata URL?", "How do I get a refund?",
                             "Who won the World Cup?", "Can I change the colour of the login page?")


@pytest.fixture(scope="module")
def kinds(tmp_path_factory, demo):
    """Guesser turns that consult nothing: in excerpt mode (the right article retrieved and not used) and in agent
    mode (it never searches: nothing retrieved), on and off the demo corpus's subject."""
    db = tmp_path_factory.mktemp("kinds") / "traces.duckdb"
    register_provider(Guesser.name, Guesser)
    try:
        session = Session.open(demo, trace_db=db)
        for q in (OKTA, REFUND, BREAD, CUP):
            answer = session.ask(q, provider=Guesser.name, mode="excerpts")
            assert not answer.payload.sets.consulted
            if q in (OKTA, REFUND, CUP):  # BM25 finds something for the World Cup too, none of it about it
                assert answer.payload.sets.retrieved
        assert not session.ask(COLOUR, provider=Guesser.name).payload.sets.retrieved
    finally:
        _PROVIDERS.unregister(Guesser.name)
    return db


def test_each_gap_says_whether_it_was_retrieved_unused_not_found_or_off_topic(kinds):
    columns, rows = TraceReader(kinds).gaps()
    got = {r[columns.index("question")]: r[columns.index("kind")] for r in rows}
    assert got == {OKTA: "retrieved_unused", REFUND: "retrieved_unused", COLOUR: "not_found",
                   BREAD: "off_topic", CUP: "off_topic"}
    assert {r[columns.index("question")] for r in TraceReader(kinds).gaps(kinds=["not_found"])[1]} == {COLOUR}


def test_cli_gaps_csv_has_the_kind_and_filters_by_it(kinds, capsys):
    assert main(["gaps", "--db", str(kinds), "--csv", "--kind", "off_topic"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert {(r["question"], r["kind"]) for r in rows} == {(BREAD, "off_topic"), (CUP, "off_topic")}
    with pytest.raises(SystemExit) as refused:
        main(["gaps", "--db", str(kinds), "--kind", "articles"])
    assert refused.value.code == 2 and "invalid choice" in capsys.readouterr().err


def test_doc_gaps_page_filters_by_kind(kinds, monkeypatch):
    monkeypatch.setenv("WORKBENCH_DB", str(kinds))
    at = AppTest.from_file(str(ROOT / "pages" / "3_Doc_gaps.py"), default_timeout=60).run()
    assert not at.exception, at.exception
    assert set(at.dataframe[0].value["kind"]) == {"retrieved_unused", "not_found", "off_topic"}
    at.multiselect(key="gaps_kinds").set_value(["not_found"]).run()
    assert not at.exception, at.exception
    assert list(at.dataframe[0].value["question"]) == [COLOUR], "only the articles to write"
