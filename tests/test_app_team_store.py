"""Every page of the app on a team store (issue 39 item 3; docs/design.md §13): `WORKBENCH_DB=ducklake:postgres:…`
with `WORKBENCH_DATA_PATH`, a real PostgreSQL (tests/pgserver.py, one server per test session), Streamlit's AppTest.
Each page is visited and does its main action: the chat (ask, a follow-up, verify, reopen, share), Compare, the
Trace explorer (its bounds and refusals: only the store is readable), Doc gaps, Document usage, Experiments (a
turn link), audited runs, uploads and the CSV downloads. One store for the module: its migrations are ~40 DuckLake
commits (20–30 s here), so the tests share it and each asks its own questions; it is a copy of one the migrations made
once per PostgreSQL server (tests/pgserver.py, `migrated_team_store`)."""

from __future__ import annotations

import json
import uuid

import pytest
from streamlit.testing.v1 import AppTest

from apptest import APP, ask, unescape
from clirun import cli
from conftest import ROOT, new_team_store
from pgserver import migrated_team_store
from workbench.errors import WorkbenchError
from workbench.trace import TraceReader


@pytest.fixture(scope="module")
def lake(pg_server, tmp_path_factory):
    """A team store, migrated, with a first turn, named by `WORKBENCH_DB` (and its data path) for the module."""
    import os

    folder = tmp_path_factory.mktemp("lake")
    store = migrated_team_store(pg_server, folder / "lake-data")
    old = {k: os.environ.get(k) for k in ("WORKBENCH_DB", "WORKBENCH_DATA_PATH")}
    os.environ["WORKBENCH_DB"] = store
    os.environ["WORKBENCH_DATA_PATH"] = str(folder / "lake-data")
    assert cli("ask", "How do I configure SSO?", "--db", store).returncode == 0
    yield store
    for key, value in old.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


def _rows(store: str, sql: str) -> list[tuple]:
    return TraceReader(store).rows(sql)[1]


def _page(name: str, browser: AppTest | None = None, **params: str) -> AppTest:
    at = AppTest.from_file(str(ROOT / "pages" / name) if name != "app.py" else APP, default_timeout=90)
    if browser is not None:
        at.session_state["viewer_token"] = browser.session_state["viewer_token"]
    for key, value in params.items():
        at.query_params[key] = value
    at.run()
    assert not at.exception, at.exception
    return at


def _click(at: AppTest, label: str) -> AppTest:
    next(b for b in at.button if b.label == label).click().run()
    assert not at.exception, at.exception
    return at


def _shown(at: AppTest) -> str:
    """Everything the page draws as text (to check what it never shows)."""
    parts = [e.value for kind in ("markdown", "caption", "info", "warning", "error", "success", "code", "text")
             for e in at.get(kind) if isinstance(getattr(e, "value", None), str)]
    return "\n".join(parts)


def test_chat_asks_follows_up_verifies_reopens_and_shares_on_a_team_store(lake):
    question = f"How do I configure SSO? {uuid.uuid4().hex[:6]}"
    at = ask(_page("app.py"), question)
    ask(at, "And with Okta?")
    cid = at.session_state["conversation_id"]
    assert [p for (p,) in _rows(lake, f"SELECT position FROM turns WHERE conversation_id = '{cid}' ORDER BY 1")] == [1, 2]
    at = _click(at, "Verify sources")
    turn = at.session_state["turns"][0]
    assert _rows(lake, f"SELECT count(*) FROM ablations WHERE turn_id = '{turn.payload.turn_id}'")[0][0] > 0

    again = _page("app.py", at, conversation=cid)  # a reload: the conversation from the team store
    assert question in [m.value for m in again.text] and "And with Okta?" in [m.value for m in again.text]
    assert "load-bearing" in unescape("\n".join(m.value for m in again.markdown)), "its stored verification"
    ask(again, "And with Entra ID?")
    assert _rows(lake, f"SELECT max(position) FROM turns WHERE conversation_id = '{cid}'")[0][0] == 3

    next(b for b in again.button if b.key == "share-create").click().run()
    assert not again.exception, again.exception
    link = next((c.value for c in again.code if "share=" in c.value), None)
    assert link, "the share link is shown"
    token = link.split("share=")[1].split("&")[0]
    reader = _page("app.py", store="default", share=token)  # another browser opens the share read-only
    assert question in [m.value for m in reader.text] and not reader.chat_input
    for at_ in (at, again, reader):
        assert "127.0.0.1" not in _shown(at_) and "ducklake:" not in _shown(at_), "the store's name is not shown"

    again.run()
    next(b for b in again.button if b.key == "share-revoke").click().run()
    assert not again.exception, again.exception
    reader.run()  # the reader's next click
    assert any("revoked" in w.value for w in reader.warning), [w.value for w in reader.warning]


def test_compare_runs_its_columns_into_the_team_store(lake):
    at = _page("1_Compare.py")
    at.radio(key="cmp_mode_0").set_value("agent")
    at.radio(key="cmp_mode_1").set_value("excerpts")
    question = f"How do I rotate an API key? {uuid.uuid4().hex[:6]}"
    at.text_input(key="cmp_question").set_value(question)
    at.button[0].click().run()
    assert not at.exception, at.exception
    assert [t.payload.mode for t in at.session_state["cmp_turns"]] == ["agent", "excerpts"]
    assert _rows(lake, f"SELECT count(*) FROM turns t JOIN runs r USING (run_id) WHERE question = '{question}' "
                       "AND r.kind = 'compare'")[0][0] == 2


def test_trace_explorer_queries_and_its_refusals_hold_on_a_team_store(lake, tmp_path):
    chat = ask(_page("app.py"), "How do I bake a sourdough loaf?")
    at = _page("2_Trace_explorer.py", chat)
    assert int(at.dataframe[0].value["turns"].sum()) >= 1, "the first canned query ran"
    at.text_area(key="sql").set_value("SELECT count(*) AS n FROM turns")
    at.button[0].click().run()
    assert int(at.dataframe[0].value["n"][0]) >= 1
    assert any(b.label == "Download CSV" for b in at.get("download_button"))
    secret = tmp_path / "secret.txt"
    secret.write_text("the operator's own file")
    for sql, words in (("DELETE FROM turns", "refused"),
                       (f"SELECT content FROM read_text('{secret}')", ""),
                       ("SELECT * FROM postgres_query('__ducklake_metadata_trace_lake', 'SELECT 1')",
                        "not allowed on a team store"),
                       ("SELECT * FROM ducklake_snapshots('trace_lake')", "not allowed on a team store"),
                       ("ATTACH 'x.duckdb'", "refused")):
        at.text_area(key="sql").set_value(sql)
        at.button[0].click().run()
        assert not at.exception, at.exception
        errors = "\n".join(e.value for e in at.error)
        assert errors and words in errors and "operator's own file" not in _shown(at), (sql, errors)
        assert "127.0.0.1" not in errors and "dbname" not in errors, errors

    from workbench.trace.saved_queries import saved_queries

    name = f"Turns {uuid.uuid4().hex[:6]}"  # a saved query: written to the team store, opened by its link, deleted
    at.text_area(key="sql").set_value("SELECT count(*) AS n FROM turns")
    at.text_input(key="save_query_name").set_value(name)
    at.button(key="save_query").click().run()
    assert not at.exception, at.exception
    assert name in [q.name for q in saved_queries(lake)]
    linked = _page("2_Trace_explorer.py", chat, query=name)
    assert int(linked.dataframe[0].value["n"][0]) >= 1
    linked.button(key="delete_query").click().run()
    assert not linked.exception, linked.exception
    assert name not in [q.name for q in saved_queries(lake)]


def test_doc_gaps_and_document_usage_read_the_team_store(lake):
    chat = ask(_page("app.py"), "How do I bake a sourdough loaf?")
    gaps = _page("3_Doc_gaps.py", chat)
    questions = [" ".join(q.lower().split()) for q in gaps.dataframe[0].value["question"]]
    assert "how do i bake a sourdough loaf?" in questions
    assert any(b.label == "Download CSV" for b in gaps.get("download_button"))
    usage = _page("4_Document_usage.py", chat)
    assert usage.metric and int(usage.metric[1].value) >= 1, [m.value for m in usage.metric]
    assert sum(b.label == "Download CSV" for b in usage.get("download_button")) >= 1


def test_experiments_and_audited_runs_on_a_team_store(lake, tmp_path):
    questions = tmp_path / "exp.jsonl"
    questions.write_text(json.dumps({"question": "How do I configure SSO?", "expected": ["sso-saml-setup"]}) + "\n"
                         + json.dumps({"question": "How do I reset my password?", "expected": ["sso-saml-setup"]})
                         + "\n", encoding="utf-8")
    name = f"exp-{uuid.uuid4().hex[:6]}"
    for run in (name, name + "-faulty"):
        extra = ("--fault", "corrupt_id") if run != name else ()
        r = cli("eval", str(questions), "--name", run, "--db", lake, "--no-progress", *extra)
        assert r.returncode in (0, 1), r.stderr
    at = _page("5_Experiments.py")
    at.multiselect(key="exp_runs").set_value([name, name + "-faulty"]).run()
    assert not at.exception, at.exception
    assert list(at.dataframe[0].value["run"]) == [name, name + "-faulty"]
    turn = _rows(lake, "SELECT turn_id FROM turn_lines WHERE run_id = "
                       f"(SELECT run_id FROM experiments WHERE name = '{name}') ORDER BY line LIMIT 1")[0][0]
    opened = _page("5_Experiments.py", turn=turn, store="default")
    assert "sso-saml-setup" in set(opened.dataframe[0].value["doc_id"])

    from test_audit_app import _llm, _request, _span

    spans = [_span(1, 1, "query", "CHAIN", 0, 1200, None, **{"input.value": "How do I cancel our plan?"}),
             _llm(1, 3, 200, "Question: How do I cancel our plan?", "Open Billing.")]
    f = tmp_path / "spans.jsonl"
    f.write_text(_request(spans) + "\n", encoding="utf-8")
    bot = f"bot-{uuid.uuid4().hex[:6]}"
    r = cli("ingest", str(f), "--db", lake, "--name", bot)
    assert r.returncode == 0, r.stderr
    at = _page("5_Experiments.py")
    runs = next(d.value for d in at.dataframe if "scored as" in d.value.columns)
    assert any(bot in str(v) for v in runs.iloc[:, 0]), runs


def test_an_upload_is_asked_and_traced_into_the_team_store(lake):
    from test_app_uploads import _upload

    at = _page("app.py")
    doc = b"---\nid: payroll-rotation\ntitle: Payroll key rotation\n---\nRotate the payroll key monthly.\n"

    _upload(at, "payroll.md", doc)
    at = ask(at, "How do I rotate the payroll key?")
    turn = at.session_state["turns"][-1]
    assert "payroll-rotation" in turn.payload.sets.consulted
    assert _rows(lake, f"SELECT count(*) FROM turns WHERE turn_id = '{turn.payload.turn_id}'")[0][0] == 1


def test_a_team_store_in_the_operators_list_is_offered_by_name(lake, pg_server, tmp_path, monkeypatch):
    """`WORKBENCH_STORES=lake=ducklake:postgres:…` beside a file as `default` (the colons of a team store's name are
    no separators): offered by name, asked into, named in the address by its name, never its connection string."""
    from workbench.paths import trace_stores

    other = new_team_store(pg_server, tmp_path / "empty-lake")  # a team store nobody has written to yet
    monkeypatch.setenv("WORKBENCH_DATA_PATH", str(tmp_path / "empty-lake"))
    monkeypatch.setenv("WORKBENCH_DB", str(tmp_path / "traces.duckdb"))
    monkeypatch.setenv("WORKBENCH_STORES", f"audit={tmp_path}/a.duckdb:lake={lake}:fresh={other}")
    assert trace_stores() == {"default": tmp_path / "traces.duckdb", "audit": tmp_path / "a.duckdb", "lake": lake,
                              "fresh": other}
    empty = _page("5_Experiments.py", store="fresh")
    assert any("'fresh' has no database yet" in unescape(i.value) for i in empty.info), [i.value for i in empty.info]
    assert "dbname" not in _shown(empty) and "127.0.0.1" not in _shown(empty), "the store by its name only"

    at = _page("app.py", store="lake")
    assert at.sidebar.selectbox(key="cfg_store").options == ["default", "audit", "lake", "fresh"]
    ask(at, "How do I configure SSO?")
    cid = at.session_state["conversation_id"]
    assert at.query_params["store"] == "lake", "the address names the store by its name"
    assert _rows(lake, f"SELECT count(*) FROM turns WHERE conversation_id = '{cid}'")[0][0] == 1
    assert not (tmp_path / "traces.duckdb").exists(), "nothing went to the default store"
    assert "dbname" not in str(at.query_params) and "dbname" not in _shown(at)

    # a visitor's query on `lake` reads its own files, not those under another store's data path (the one set now)
    (tmp_path / "empty-lake").mkdir(exist_ok=True)
    (tmp_path / "empty-lake" / "other.csv").write_text("secret\nthe other store's file\n")
    with pytest.raises(WorkbenchError, match="(?i)permission|not allowed|disabled"):
        TraceReader(lake).user_query(f"SELECT * FROM read_csv('{tmp_path}/empty-lake/other.csv')")


def test_a_password_in_a_listed_team_store_is_the_operators_error(monkeypatch, tmp_path):
    monkeypatch.setenv("WORKBENCH_DB", str(tmp_path / "traces.duckdb"))
    monkeypatch.setenv("WORKBENCH_STORES", "lake=ducklake:postgres:host=127.0.0.1 dbname=x password=hunter2")
    at = _page("app.py")
    said = "\n".join(e.value for e in at.error)
    assert "PGPASSWORD" in said and "hunter2" not in _shown(at), said
    assert at.sidebar.selectbox(key="cfg_store").options == ["default"]


def test_a_new_team_store_without_a_data_path_says_which_setting(pg_server, monkeypatch):
    store = "ducklake:postgres:" + pg_server.create_database(f"nodata_{uuid.uuid4().hex[:6]}")
    monkeypatch.delenv("WORKBENCH_DATA_PATH", raising=False)
    r = cli("ask", "How do I configure SSO?", "--db", store)
    assert r.returncode != 0 and "WORKBENCH_DATA_PATH" in r.stderr, r.stderr


def test_a_team_store_named_by_a_url_is_refused_with_the_form_to_use():
    """A URL's `//` would be folded on the way (a store's name goes where a file path goes): refused, saying how."""
    r = cli("runs", "list", "--db", "ducklake:postgres:postgresql://postgres@127.0.0.1:5432/traces")
    assert r.returncode == 2 and "key=value" in r.stderr, r.stderr
    r = cli("runs", "list", "--db", "ducklake:postgres:postgresql://u@127.0.0.1/x?password=hunter2")
    assert r.returncode == 2 and "hunter2" not in r.stderr + r.stdout, r.stderr
