"""The schema's history in one place (issue 21, item 10): readers ask `Schema.has`, never the catalog, and
m014 states "each turn's latest verification" once, as the view `latest_verifications`."""

from __future__ import annotations

import re

import duckdb
import pytest

from conftest import ROOT
from workbench.trace.history import CREATED_BY, Schema
from workbench.trace.migrate import migrate
from workbench.trace.schema import MIGRATIONS
from workbench.trace.spans import read_stored_turns

BEFORE_M014 = tuple(m for m in MIGRATIONS if m.name < "m014")
THROUGH_M014 = tuple(m for m in MIGRATIONS if m.name < "m015")
LATEST = re.compile(r"arg_max\(\s*verification_id\s*,\s*verified_at\s*\)", re.I)


def _definitions(con) -> dict[str, str]:
    views = con.execute("SELECT view_name, sql FROM duckdb_views() WHERE NOT internal").fetchall()
    macros = con.execute("SELECT function_name, macro_definition FROM duckdb_functions() "
                         "WHERE function_type = 'table_macro' AND NOT internal").fetchall()
    return {name: sql or "" for name, sql in [*views, *macros]}


def _comments(con, views) -> list[tuple]:
    return sorted(con.execute("SELECT table_name, column_name, comment FROM duckdb_columns() WHERE list_contains(?, "
                              "table_name)", [list(views)]).fetchall()
                  + con.execute("SELECT view_name, NULL, comment FROM duckdb_views() WHERE list_contains(?, view_name)",
                                [list(views)]).fetchall(), key=str)


def test_the_latest_verification_is_written_once_as_a_view():
    con = duckdb.connect()
    migrate(con)
    using = {name for name, sql in _definitions(con).items() if LATEST.search(sql)}
    assert using == {"latest_verifications"}, using
    readers = {name for name, sql in _definitions(con).items() if "latest_verifications" in sql}
    assert {"source_verdicts", "verification_summary", "doc_usage_for"} <= readers


def test_m014_keeps_the_replaced_views_comments_and_results(tmp_path):
    con = duckdb.connect(str(tmp_path / "old.duckdb"))
    migrate(con, BEFORE_M014)
    con.execute("""
        INSERT INTO runs (run_id, created_at, kind, provider, model, retriever, mode, k, corpus_id)
            VALUES ('r1', '2024-05-01 10:00:00+00', 'interactive', 'offline', 'm', 'bm25', 'agent', 5, 'c');
        INSERT INTO turns (turn_id, run_id, question, answer, status, started_at, latency_ms)
            VALUES ('t1', 'r1', 'q', 'a', 'ok', '2024-05-01 10:00:01+00', 1.0);
        INSERT INTO sources (turn_id, doc_id, retrieved, cited, consulted, exposure, position)
            VALUES ('t1', 'a', true, true, true, 'full', 1), ('t1', 'b', true, false, true, 'full', 2);
        INSERT INTO ablations (turn_id, verification_id, seq, role, doc_id, verdict, status, method, control_stable,
                               verified_at)
            VALUES ('t1', 'v1', 0, 'control', NULL, NULL, 'ok', 'm', true, '2024-05-01 11:00:00+00'),
                   ('t1', 'v1', 1, 'candidate', 'a', 'decorative', 'ok', 'm', true, '2024-05-01 11:00:00+00'),
                   ('t1', 'v2', 0, 'control', NULL, NULL, 'ok', 'm', true, '2024-05-02 11:00:00+00'),
                   ('t1', 'v2', 1, 'candidate', 'a', 'load_bearing', 'ok', 'm', true, '2024-05-02 11:00:00+00');
    """)
    views = ("source_verdicts", "verification_summary")
    queries = ["FROM source_verdicts ORDER BY doc_id", "FROM verification_summary", "FROM doc_usage ORDER BY doc_id"]
    before = [con.execute(q).fetchall() for q in queries]
    comments = _comments(con, views)
    assert any(c for *_, c in comments)
    assert migrate(con, THROUGH_M014) == ["m014_latest_verification"]
    assert [con.execute(q).fetchall() for q in queries] == before
    assert _comments(con, views) == comments
    assert con.execute("SELECT verification_id FROM latest_verifications").fetchall() == [("v2",)]
    assert con.execute("SELECT verdict FROM source_verdicts WHERE doc_id = 'a'").fetchone() == ("load_bearing",)


def test_created_by_is_read_from_the_migrations():
    assert CREATED_BY["turns"] == "m001_initial" and CREATED_BY["passages"] == "m007_model_calls_passages"
    assert CREATED_BY["source_verdicts"] == "m009_ablations"  # replaced later, created once
    assert CREATED_BY["latest_verifications"] == "m014_latest_verification"
    with pytest.raises(KeyError, match="no migration creates"):
        Schema(frozenset()).has("no_such_table")


def test_an_older_database_is_read_as_it_is():
    """A database from before m007 (no passages, no model_calls, no verdicts) reads by its schema."""
    con = duckdb.connect()
    old = tuple(m for m in MIGRATIONS if m.name < "m007")
    migrate(con, old)
    con.execute("""
        INSERT INTO runs (run_id, created_at, kind, provider, model, retriever, mode, k)
            VALUES ('r1', '2024-05-01 10:00:00+00', 'interactive', 'offline', 'm', 'bm25', 'agent', 5);
        INSERT INTO turns (turn_id, run_id, question, answer, status, started_at, latency_ms)
            VALUES ('t1', 'r1', 'q', 'a', 'ok', '2024-05-01 10:00:01+00', 1.0);
    """)
    schema = Schema.read(con)
    assert schema.has("sources") and not schema.has("passages") and not schema.has("source_verdicts")
    assert schema.missing == [m.name for m in MIGRATIONS if m not in old]
    (turn,) = read_stored_turns(con)
    assert turn.turn["turn_id"] == "t1" and turn.model_calls == [] and turn.verdicts == {}


def test_readers_never_probe_the_catalog():
    """Only the modules that migrate, document or export the whole store read DuckDB's catalog."""
    allowed = {"migrate.py", "docs.py", "export.py", "visible.py",  # visible.py copies every table for one viewer
               "lake.py", "imports.py"}  # a team store's migrations (lake.py); importing a whole export
    probe = re.compile(r"duckdb_tables|duckdb_views|information_schema")
    bad = [f.name for f in (ROOT / "workbench").rglob("*.py")
           if f.name not in allowed and not f.name.startswith("schema_m") and probe.search(f.read_text(encoding="utf-8"))]
    assert not bad, bad
