"""Queries typed by users (`workbench sql`, the trace explorer): refusals never raise, nothing downloads,
and the app's explorer reads nothing but the trace database."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from workbench.cli import main
from workbench.errors import ReadOnlyQueryError, TraceStoreError
from workbench.session import Session
from workbench.trace import TraceReader, check_read_only, query_df

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    path = tmp_path_factory.mktemp("usersql") / "t.duckdb"
    Session.open(trace_db=path).ask("How do I configure SSO?")
    return path


@pytest.fixture
def secret_file(tmp_path):
    path = tmp_path / "secret.csv"
    path.write_text("token\nhunter2\n")
    return path


def test_explain_with_options_runs_and_unparsable_explain_is_refused_not_raised(db):
    check_read_only("EXPLAIN (FORMAT json) SELECT 1")
    assert TraceReader(db).user_query("EXPLAIN (FORMAT json) SELECT count(*) FROM turns")[1]
    for sql in ("EXPLAIN /* c */ ANALYZE DELETE FROM turns", "EXPLAIN (FORMAT json) DELETE FROM turns",
                "EXPLAIN (ANALYZE) INSERT INTO turns SELECT * FROM turns"):
        with pytest.raises(ReadOnlyQueryError, match="refused: EXPLAIN"):
            check_read_only(sql)


def test_cli_sql_refuses_unparsable_explain_with_an_error_not_a_traceback(db, capsys):
    assert main(["sql", "EXPLAIN /* c */ ANALYZE DELETE FROM turns", "--db", str(db)]) == 2
    assert "refused" in capsys.readouterr().err


def test_user_queries_never_download_an_extension(db):
    for run in (lambda sql: TraceReader(db).user_query(sql), lambda sql: query_df(sql, db)):
        with pytest.raises(TraceStoreError) as err:
            run("SELECT * FROM 'https://example.com/x.csv'")
        assert "requires the extension httpfs" in str(err.value)
        assert "download" not in str(err.value).lower()


def test_cli_reads_local_files_but_the_app_explorer_reads_only_the_trace_database(db, secret_file):
    sql = f"SELECT * FROM read_csv('{secret_file}')"
    assert TraceReader(db).user_query(sql)[1] == [("hunter2",)]  # a local analyst joining a CSV
    for blocked in (sql, f"SELECT * FROM read_text('{secret_file}')", f"SELECT * FROM glob('{secret_file.parent}/*')"):
        with pytest.raises(TraceStoreError, match="disabled by configuration"):
            TraceReader(db).user_query(blocked, files=False)
    assert TraceReader(db).user_query("SELECT count(*) FROM turns", files=False)[1] == [(1,)]


def test_trace_explorer_refuses_file_reads_and_odd_explains_with_messages(db, secret_file, monkeypatch):
    monkeypatch.setenv("WORKBENCH_DB", str(db))
    at = AppTest.from_file(str(ROOT / "pages" / "2_Trace_explorer.py"), default_timeout=60).run()
    for sql, expect in ((f"SELECT * FROM read_text('{secret_file}')", "disabled by configuration"),
                        ("EXPLAIN /* c */ ANALYZE DELETE FROM turns", "refused")):
        at.text_area(key="sql").set_value(sql)
        at.button[0].click().run()
        assert not at.exception, at.exception
        assert any(expect in e.value.replace("\\", "") for e in at.error), [e.value for e in at.error]
        assert not any("hunter2" in str(d.value) for d in at.dataframe)


def test_doc_gap_chart_shows_html_in_questions_as_text(tmp_path, monkeypatch):
    path = tmp_path / "gaps.duckdb"
    question = 'How do I bake <a href="mailto:x@example.com">bread</a> <b>&amp;</b> cake?'
    Session.open(trace_db=path).ask(question)
    monkeypatch.setenv("WORKBENCH_DB", str(path))
    at = AppTest.from_file(str(ROOT / "pages" / "3_Doc_gaps.py"), default_timeout=60).run()
    assert not at.exception, at.exception
    assert at.dataframe[0].value["question"][0] == question, "the table keeps the question as asked"
    bars = json.loads(at.get("plotly_chart")[0].proto.spec)["data"][0]
    (label,) = bars["y" if bars.get("orientation") == "h" else "x"]
    (hover,) = bars["hovertext"]
    assert hover == question.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    assert "<" not in label and ">" not in label and label.startswith("How do I bake &lt;a")
