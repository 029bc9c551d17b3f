"""docs/traces.md is generated from the schema: it must match, and every table, view and column is documented."""

from __future__ import annotations

import duckdb

from workbench.cli import main
from workbench.trace import docs
from workbench.trace.migrate import migrate


def test_docs_match_the_schema():
    assert docs.DOCS_PATH.read_text(encoding="utf-8") == docs.render(), (
        "docs/traces.md is stale: run `python -m workbench docs-traces`")


def test_every_table_view_and_column_has_a_comment():
    con = duckdb.connect()
    migrate(con)
    undocumented = con.execute("""
        SELECT table_name FROM duckdb_tables() WHERE comment IS NULL
        UNION ALL SELECT view_name FROM duckdb_views() WHERE NOT internal AND comment IS NULL
        UNION ALL SELECT table_name || '.' || column_name FROM duckdb_columns() WHERE NOT internal AND comment IS NULL
    """).fetchall()
    assert undocumented == []
    text = docs.render()
    for (name,) in con.execute("SELECT table_name FROM duckdb_tables() UNION ALL "
                               "SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall():
        assert f"### `{name}`" in text


def test_docs_traces_check_command(capsys):
    assert main(["docs-traces", "--check"]) == 0
    assert "up to date" in capsys.readouterr().out
