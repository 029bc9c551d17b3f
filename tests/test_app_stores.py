"""The trace stores the app may open: the operator's list (`default` and `$WORKBENCH_STORES`), offered by name, named
in links (`?store=NAME`), never a path a visitor types (docs/security.md, "Trace stores")."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout

import pytest
from streamlit.testing.v1 import AppTest

from apptest import unescape
from conftest import ROOT
from dbcopy import copy_db
from workbench.cli import main
from workbench.errors import PathNotAllowedError

LINES = [{"question": "How do I configure SSO?", "expected": ["sso-saml-setup"]},
         {"question": "What articles do you have?", "expect_no_sources": True}]


def _eval(questions, db, *names_and_args) -> None:
    for name, *args in names_and_args:
        assert main(["eval", str(questions), "--name", name, "--db", str(db), "--no-progress", *args]) == 0


@pytest.fixture(scope="module")
def stores_once(tmp_path_factory):
    """The default store's database with runs `clean` and `faulty`, and the `audit` store's with runs `a-old`,
    `a-mid` and `a-new`, built once for the module."""
    tmp = tmp_path_factory.mktemp("stores")
    questions = tmp / "q.jsonl"
    questions.write_text("".join(json.dumps(line) + "\n" for line in LINES), encoding="utf-8")
    default, audit = tmp / "traces.duckdb", tmp / "audit.duckdb"
    with redirect_stdout(io.StringIO()):
        _eval(questions, default, ("clean",), ("faulty", "--fault", "corrupt_id"))
        _eval(questions, audit, ("a-old",), ("a-mid",), ("a-new", "--fault", "corrupt_id"))
    return default, audit


@pytest.fixture
def stores(stores_once, tmp_path, monkeypatch):
    """The default store; an `audit` store elsewhere (outside every allowed root): copies of `stores_once`' for the
    test (the chat writes to a store)."""
    default, audit = (copy_db(src, dst) for src, dst in zip(
        stores_once, (tmp_path / "traces.duckdb", tmp_path / "elsewhere" / "audit.duckdb")))
    monkeypatch.setenv("WORKBENCH_DB", str(default))
    monkeypatch.setenv("WORKBENCH_STORES", f"audit={audit}")
    return default, audit


def _experiments() -> AppTest:
    return AppTest.from_file(str(ROOT / "pages" / "5_Experiments.py"), default_timeout=60)


def test_the_operators_list_parses_and_refuses_a_malformed_entry(tmp_path, monkeypatch):
    from workbench.paths import trace_stores

    monkeypatch.setenv("WORKBENCH_DB", str(tmp_path / "t.duckdb"))
    monkeypatch.setenv("WORKBENCH_STORES", f"audit={tmp_path}/a.duckdb:staging = {tmp_path}/s.duckdb:")
    assert trace_stores() == {"default": tmp_path / "t.duckdb", "audit": tmp_path / "a.duckdb",
                              "staging": tmp_path / "s.duckdb"}
    for bad, says in ((f"{tmp_path}/a.duckdb", "not NAME=PATH"), ("a b=x.duckdb", "store name"),
                      ("default=x.duckdb", "given twice"), ("=x.duckdb", "store name")):
        monkeypatch.setenv("WORKBENCH_STORES", bad)
        with pytest.raises(PathNotAllowedError, match=says):
            trace_stores()


def test_stores_are_offered_by_name_and_the_chosen_one_is_opened(stores):
    at = _experiments().run()
    assert not at.exception, at.exception
    picker = at.sidebar.selectbox(key="cfg_store")
    assert picker.options == ["default", "audit"]
    assert not [t for t in at.sidebar.text_input if t.label == "Trace database"], "no path for a visitor to type"
    assert at.multiselect(key="exp_runs").value == ["clean", "faulty"]
    picker.set_value("audit").run()
    assert not at.exception, at.exception
    assert at.query_params["store"] == "audit", "the address names the store, by its name"
    # the two newest named runs of the store switched to, as when the page opens on it
    assert at.multiselect(key="exp_runs").value == ["a-mid", "a-new"]
    assert str(stores[1]) not in str(at.query_params), "never its path"


def test_a_store_the_operator_does_not_list_is_refused_on_the_page(stores, tmp_path):
    for asked in (str(stores[1]), "nosuch", str(tmp_path / "x.duckdb")):
        at = _experiments()
        at.query_params["store"] = asked
        at.run()
        assert not at.exception, at.exception
        assert not at.sidebar.error, "said where the visitor looks, not at the bottom of the sidebar"
        assert any("There is no trace store named" in e.value for e in at.main.error), [e.value for e in at.error]
        assert at.session_state["cfg_store"] == "default"
        assert at.multiselect(key="exp_runs").value == ["clean", "faulty"]


def test_open_turn_links_name_the_store_and_open_its_turn(stores):
    from workbench.trace.scoring import compare

    at = _experiments()
    at.query_params["store"] = "audit"
    at.run()
    assert not at.exception, at.exception
    expected = compare(stores[1], ["a-mid", "a-new"])
    first = expected.diff[0]
    diff = at.dataframe[-1].value
    link = diff["a-new: turn"][0]
    assert link == f"?store=audit&turn={first.turn_id['a-new']}"

    fresh = _experiments()  # the link opened in a new tab: a new session
    fresh.query_params["store"], fresh.query_params["turn"] = "audit", first.turn_id["a-new"]
    fresh.run()
    assert not fresh.exception, fresh.exception
    assert not fresh.warning, [w.value for w in fresh.warning]
    docs = fresh.dataframe[0].value
    assert set(docs[docs["consulted"]]["doc_id"]) == set(first.consulted["a-new"])


def test_a_turn_not_in_the_store_says_so_without_literal_backticks(stores):
    at = _experiments()
    at.query_params["turn"] = "e34f-nosuch"
    at.run()
    warning = at.warning[0].value
    assert "\\`" not in warning and "`workbench runs list`" in warning, warning
    warning = unescape(warning)
    assert "No turn e34f-nosuch of an experiment run in the trace store 'default'" in warning
    assert str(stores[0]) not in warning, "the store by its name, not its path"


def test_the_chat_asks_into_the_store_picked_and_its_address_names_it(stores):
    from apptest import APP, ask
    from workbench.trace.conversation_reader import list_conversations

    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params["store"] = "audit"
    at.run()
    ask(at, "How do I configure SSO?")
    cid = at.session_state["conversation_id"]
    assert at.query_params["store"] == "audit" and at.query_params["conversation"] == cid, "a link reopens it there"
    assert cid in {r["conversation_id"] for r in list_conversations(stores[1])}
    assert cid not in {r["conversation_id"] for r in list_conversations(stores[0])}


def test_a_store_without_a_database_yet_says_so_by_name(stores, tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_STORES", f"audit={stores[1]}:empty={tmp_path / 'none.duckdb'}")
    at = _experiments()
    at.query_params["store"] = "empty"
    at.run()
    said = at.info[0].value
    assert "`workbench eval QUESTIONS.jsonl --name NAME`" in said, "the command as code, not literal backticks"
    assert "The trace store 'empty' has no database yet" in unescape(said)
    assert not (tmp_path / "none.duckdb").exists(), "opening a page creates no database"
