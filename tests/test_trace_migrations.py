"""Schema migrations: a fresh database, and an upgrade from the first migration with rows in it."""

from __future__ import annotations

import duckdb

from workbench.trace.migrate import applied, migrate, pending
from workbench.trace.reader import TraceReader
from workbench.trace.schema import MIGRATIONS

TABLES = {"runs", "turns", "tool_calls", "retrieved_items", "citations", "sources", "claims", "model_calls",
          "passages", "migrations"}
VIEWS = {"turn_sets", "doc_gaps", "provider_summary", "retriever_summary", "doc_usage", "doc_usage_totals"}


def _objects(con):
    tables = {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
    views = {r[0] for r in con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()}
    return tables, views


def test_fresh_database_gets_every_migration_once(tmp_path):
    con = duckdb.connect(str(tmp_path / "fresh.duckdb"))
    assert migrate(con) == [m.name for m in MIGRATIONS]
    assert applied(con) == sorted(m.name for m in MIGRATIONS)
    assert _objects(con) == (TABLES, VIEWS)
    assert migrate(con) == [] and pending(con) == []
    names = [m.name for m in MIGRATIONS]
    assert len(set(names)) == len(names) and names == sorted(names)  # append-only, ordered by name


def test_upgrade_from_first_migration_with_rows(tmp_path):
    path = tmp_path / "old.duckdb"
    con = duckdb.connect(str(path))
    migrate(con, MIGRATIONS[:1])
    assert applied(con) == ["m001_initial"]
    con.execute("""
        INSERT INTO runs (run_id, created_at, kind, provider, model, retriever, mode, k)
            VALUES ('r1', '2024-05-01 10:00:00+00', 'interactive', 'offline', 'extractive-v1', 'bm25', 'agent', 5);
        INSERT INTO turns (turn_id, run_id, question, answer, status, started_at, latency_ms) VALUES
            ('t1', 'r1', 'How do I configure SSO?', 'See [SSO](sso).', 'ok', '2024-05-01 10:00:01+00', 12.5),
            ('t2', 'r1', 'What articles do you have?', '- [SSO](sso)', 'ok', '2024-05-01 10:00:02+00', 3.0),
            ('t3', 'r1', 'What is the capital of Mongolia?', 'Nothing found.', 'ok', '2024-05-01 10:00:03+00', 2.0);
        INSERT INTO tool_calls (turn_id, seq, name, exposure, n_results) VALUES
            ('t1', 0, 'search', 'snippet', 2), ('t1', 1, 'fetch_document', 'full', 1), ('t2', 0, 'list_articles', 'title', 1);
        INSERT INTO sources (turn_id, doc_id, retrieved, cited, consulted, exposure, position) VALUES
            ('t1', 'sso', true, true, true, 'full', 1), ('t1', 'okta', true, false, false, 'snippet', 2),
            ('t2', 'sso', true, true, false, 'title', 1);
        INSERT INTO citations (turn_id, idx, target, doc_id, valid) VALUES
            ('t1', 0, 'sso', 'sso', true), ('t1', 1, 'ssx', NULL, false), ('t1', 2, 'ssx', NULL, false);
    """)
    con.close()

    con = duckdb.connect(str(path))
    assert migrate(con) == [m.name for m in MIGRATIONS[1:]]
    assert _objects(con) == (TABLES, VIEWS)
    rows = con.execute("SELECT turn_id, question_kind, n_retrieved, n_cited, n_consulted, n_rejected, n_tool_calls "
                       "FROM turns ORDER BY turn_id").fetchall()
    assert rows == [("t1", "substantive", 2, 1, 1, 1, 2), ("t2", "structural", 1, 1, 0, 0, 1),
                    ("t3", "substantive", 0, 0, 0, 0, 0)]
    assert con.execute("SELECT question FROM doc_gaps").fetchall() == [("What is the capital of Mongolia?",)]
    assert con.execute("SELECT count(*) FROM turn_sets").fetchone() == (3,)
    assert con.execute("SELECT turns FROM provider_summary").fetchone() == (3,)
    con.close()


def test_reader_upgrades_an_old_database_before_querying(tmp_path):
    path = tmp_path / "old.duckdb"
    con = duckdb.connect(str(path))
    migrate(con, MIGRATIONS[:1])
    con.close()
    assert TraceReader(path).rows("SELECT count(*) FROM doc_gaps")[1] == [(0,)]
