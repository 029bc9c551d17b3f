"""Schema migrations: a fresh database, and an upgrade from the first migration with rows in it."""

from __future__ import annotations

import re
import shutil

import duckdb

from workbench.trace.migrate import applied, migrate, pending
from workbench.trace.schema import MIGRATIONS

TABLES = {"runs", "turns", "tool_calls", "retrieved_items", "citations", "sources", "claims", "model_calls",
          "passages", "ablations", "migrations", "datasets", "expectations", "experiments", "turn_context",
          "saved_queries", "turn_lines", "audit_spans", "turn_payloads", "conversation_shares"}
VIEWS = {"turn_sets", "doc_gaps", "provider_summary", "retriever_summary", "doc_usage", "doc_usage_totals",
         "source_verdicts", "verification_summary", "expectation_results", "latest_verifications",
         "conversation_turns", "conversations"}


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


def test_m006_records_the_tool_protocol_and_backfills_old_agent_runs(tmp_path):
    con = duckdb.connect(str(tmp_path / "m005.duckdb"))
    migrate(con, [m for m in MIGRATIONS if m.name <= "m005_claims_judge_version"])
    con.execute("""
        INSERT INTO runs (run_id, created_at, kind, provider, mode, k) VALUES
            ('a', '2024-05-01 10:00:00+00', 'interactive', 'ollama', 'agent', 5),
            ('e', '2024-05-01 10:00:00+00', 'interactive', 'ollama', 'excerpts', 5);
    """)
    assert migrate(con, [m for m in MIGRATIONS if m.name <= "m006_tool_protocol"]) == ["m006_tool_protocol"]
    # every agent run before m006 used the provider's own tool calls; excerpt runs offer no tools
    assert con.execute("SELECT run_id, tool_protocol FROM runs ORDER BY run_id").fetchall() == [("a", "native"),
                                                                                              ("e", None)]
    comment = con.execute("SELECT comment FROM duckdb_columns() WHERE table_name = 'runs' "
                          "AND column_name = 'tool_protocol'").fetchone()[0]
    assert "json-steps" in comment


def test_m009_adds_ablations_and_its_views_read_old_turns_as_unverified(tmp_path):
    con = duckdb.connect(str(tmp_path / "m008.duckdb"))
    migrate(con, [m for m in MIGRATIONS if m.name <= "m008_doc_usage"])
    con.execute("""
        INSERT INTO runs (run_id, created_at, kind, provider, model, mode, k) VALUES
            ('r', '2024-05-01 10:00:00+00', 'interactive', 'offline', 'extractive-v1', 'agent', 5);
        INSERT INTO turns (turn_id, run_id, question, status) VALUES ('t', 'r', 'How do I configure SSO?', 'ok');
        INSERT INTO sources (turn_id, doc_id, retrieved, cited, consulted, exposure, position) VALUES
            ('t', 'sso', true, true, true, 'full', 1), ('t', 'okta', true, false, false, 'snippet', 2);
    """)
    assert migrate(con, [m for m in MIGRATIONS if m.name <= "m009_ablations"]) == ["m009_ablations"]
    assert con.execute("SELECT doc_id, verified, verdict FROM source_verdicts ORDER BY doc_id").fetchall() == \
        [("okta", False, None), ("sso", False, None)]
    assert con.execute("SELECT count(*) FROM verification_summary").fetchone() == (0,)
    usage = "SELECT doc_id, consulted_turns, verified_turns, load_bearing_turns, hidden_influence_turns FROM doc_usage"
    assert con.execute(usage + " ORDER BY doc_id").fetchall() == [("okta", 0, 0, 0, 0), ("sso", 1, 0, 0, 0)]
    # a verification added later, twice: the views read the latest
    con.execute("""
        INSERT INTO ablations (turn_id, verification_id, seq, role, doc_id, verdict, status, method, control_stable,
                               extra_calls, verified_at) VALUES
            ('t', 'v1', 0, 'control', NULL, NULL, 'ok', 'ablation-v1', true, 3, '2024-05-02 10:00:00+00'),
            ('t', 'v1', 1, 'candidate', 'sso', 'decorative', 'ok', 'ablation-v1', true, 3, '2024-05-02 10:00:00+00'),
            ('t', 'v2', 0, 'control', NULL, NULL, 'ok', 'ablation-v1', true, 3, '2024-05-03 10:00:00+00'),
            ('t', 'v2', 1, 'candidate', 'sso', 'load_bearing', 'ok', 'ablation-v1', true, 3, '2024-05-03 10:00:00+00'),
            ('t', 'v2', 2, 'candidate', 'okta', 'hidden_influence', 'ok', 'ablation-v1', true, 3,
             '2024-05-03 10:00:00+00');
    """)
    assert con.execute("SELECT doc_id, verified, verdict FROM source_verdicts ORDER BY doc_id").fetchall() == \
        [("okta", True, "hidden_influence"), ("sso", True, "load_bearing")]
    row = con.execute("SELECT verified_turns, load_bearing_share, hidden_influence_rate, extra_calls_per_turn "
                      "FROM verification_summary").fetchone()
    assert row == (1, 1.0, 1.0, 9.0)
    # usage accounting counts the latest verification's verdicts (m009 replaced m008's views and macros)
    assert con.execute(usage + " ORDER BY doc_id").fetchall() == [("okta", 0, 1, 0, 1), ("sso", 1, 1, 1, 0)]
    assert con.execute("SELECT consulted, load_bearing FROM doc_usage_totals").fetchall() == [(1, 1)]
    assert con.execute("SELECT comment FROM duckdb_views() WHERE view_name = 'doc_usage'").fetchone()[0]


def test_a_fresh_database_and_an_upgrade_from_each_migration_are_the_same(tmp_path):
    fresh = duckdb.connect(str(tmp_path / "fresh.duckdb"))
    migrate(fresh)
    expected = _schema(fresh)
    assert expected["columns"] and expected["views"]
    chain = tmp_path / "chain.duckdb"  # the release that stopped at migration i: built up one migration at a time
    for i in range(1, len(MIGRATIONS)):
        con = duckdb.connect(str(chain))
        assert migrate(con, MIGRATIONS[:i]) == [MIGRATIONS[i - 1].name]
        con.close()
        old = tmp_path / f"from{i}.duckdb"
        shutil.copyfile(chain, old)  # closed: checkpointed, nothing in a WAL beside it
        con = duckdb.connect(str(old))  # reopened, as an upgrade happens
        assert migrate(con) == [m.name for m in MIGRATIONS[i:]]
        assert _schema(con) == expected, f"upgrade from {MIGRATIONS[i - 1].name}"
        con.close()


def test_the_writers_columns_are_the_ones_duckdb_reads_from_the_migrations():
    """trace/tables.py parses the DDL; DuckDB executing the same migrations must agree column by column."""
    from workbench.trace.tables import SCHEMAS, table_columns

    con = duckdb.connect(":memory:")
    con.execute("SET TimeZone = 'UTC'")
    migrate(con)
    tables = {t for (t,) in con.execute("SELECT table_name FROM duckdb_tables() WHERE table_name <> 'migrations'")
              .fetchall()}
    assert set(table_columns()) == set(SCHEMAS) == tables
    for name, table in SCHEMAS.items():  # the types the writer casts each column's values to are the table's
        columns = con.execute("SELECT column_name, data_type FROM duckdb_columns() WHERE table_name = ? "
                              "ORDER BY column_index", [name]).fetchall()
        cast = [(n, con.execute(f"SELECT typeof(NULL::{t})").fetchone()[0]) for n, t in zip(table.names, table.types)]
        assert cast == columns, name


def test_the_ddl_reader_refuses_what_it_does_not_understand():
    import pytest

    from workbench.trace.schema import Migration
    from workbench.trace.tables import table_columns

    with pytest.raises(NotImplementedError, match="ALTER TABLE t RENAME"):
        table_columns((Migration("m1", "CREATE TABLE t (\n    a VARCHAR\n);"), Migration("m2", "ALTER TABLE t RENAME a TO b;")))


# --- each migration registered once, by the function named for it (issue 42 item 4) ------------------------

import ast  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
from sources import parsed  # noqa: E402

from workbench.trace.migration import Migration, Migrations  # noqa: E402

TRACE = Path(__file__).resolve().parent.parent / "workbench" / "trace"
MODULES = sorted(TRACE.glob("schema_m*.py"))


def test_each_name_is_written_once_by_the_function_it_registers():
    defs, strings = [], []
    for path in TRACE.parent.rglob("*.py"):
        for node in ast.walk(parsed(path)):
            if isinstance(node, ast.FunctionDef):
                defs.append(node.name)
            elif isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Migration":
                strings += [a.value for a in node.args if isinstance(a, ast.Constant)]
    assert not strings, f"migrations registered by name, not by the function named for them: {strings}"
    for m in MIGRATIONS:
        assert defs.count(m.name) == 1, f"{m.name} is defined {defs.count(m.name)} times"
        assert m.python is not None and m.python.__name__ == m.name
    assert [p.stem[len("schema_"):] for p in MODULES] == [m.name[:4] for m in MIGRATIONS], "one module each"


def test_a_duplicate_name_or_number_is_refused():
    registry = Migrations()
    registry.add(Migration("m001_a", "SELECT 1"))
    with pytest.raises(ValueError, match="m001_a is registered twice"):
        registry.add(Migration("m001_a", "SELECT 2"))
    with pytest.raises(ValueError, match="share the number m001"):
        registry.add(Migration("m001_b", "SELECT 2"))
    with pytest.raises(ValueError, match="three digits"):
        registry(sql="SELECT 1")(lambda con: None)  # a lambda is named <lambda>

    @registry("SELECT 3")
    def m002_c(con):
        """A migration."""

    assert [m.name for m in registry.ordered()] == ["m001_a", "m002_c"] and registry.ordered()[1].python is m002_c


def _schema(con) -> dict:
    """Everything the migrations declare, as the catalog holds it."""
    q = {"columns": "SELECT table_name, column_index, column_name, data_type, is_nullable, column_default, comment "
                    "FROM duckdb_columns() WHERE NOT internal ORDER BY ALL",
         "tables": "SELECT table_name, comment, sql FROM duckdb_tables() WHERE NOT internal ORDER BY ALL",
         "views": "SELECT view_name, comment, sql FROM duckdb_views() WHERE NOT internal ORDER BY ALL",
         "macros": "SELECT function_name, function_type, macro_definition, comment FROM duckdb_functions() "
                   "WHERE NOT internal AND function_type IN ('macro', 'table_macro') ORDER BY ALL",
         "indexes": "SELECT index_name, table_name, sql FROM duckdb_indexes() ORDER BY ALL",
         "constraints": "SELECT table_name, constraint_type, constraint_text FROM duckdb_constraints() ORDER BY ALL"}
    out = {k: con.execute(sql).fetchall() for k, sql in q.items()}
    # DuckDB 1.5 renders one lambda several ways (`(lambda c: …)`, `(c -> …)`, `c -> …`) depending on when the view
    # was last loaded: the views' and macros' SQL compared in one form, without the parentheses the renderings differ by
    for k in ("views", "macros"):
        out[k] = [(*row[:-2], *(re.sub(r"[()]", "", re.sub(r"lambda (\w+): ", r"\1 -> ", v)) if isinstance(v, str) else v
                                for v in row[-2:])) for row in out[k]]
    return out


def _imports(path: Path):
    for node in ast.walk(parsed(path)):
        if isinstance(node, ast.ImportFrom):
            yield node.module or "", [a.name for a in node.names]


def test_a_migration_states_its_own_sql_and_computes_with_frozen_code():
    """One policy for replacing a view: its SQL written out whole in the migration that replaces it (no SQL
    taken from another migration's text); a backfill calls no live code of the workbench (m003 carries the
    question classifier as it shipped), so what a migration computes never changes."""
    for path in MODULES:
        for module, names in _imports(path):
            if module.startswith("schema_m"):
                assert all(not n.isupper() for n in names), f"{path.name} takes SQL {names} from {module}"
            assert not module.startswith(("workbench", ".")) or module in {"migration", "connect"} or \
                module.startswith("schema_m"), f"{path.name} imports {module}"
            assert "questions" not in module, f"{path.name} imports {module}: a backfill must not call live code"
