"""A new trace file is a copy of the process's schema template (migrate.py, `writer.schema_template`) once the
process creates its second one: the same catalog as running every migration (tables, columns, views, macros,
comments, constraints and the `migrations` rows, stamped with the time of the copy), whole or not at all."""

from __future__ import annotations

import datetime

import duckdb
import pytest

from test_trace_migrations import _schema
from workbench.errors import TraceStoreError
from workbench.trace import migrate as migrate_module
from workbench.trace.migrate import migrate
from workbench.trace.schema import MIGRATIONS
from workbench.trace.writer import TraceWriter


@pytest.fixture
def copies(monkeypatch):
    """The templates the new files of this test were copied from, in order."""
    seen, real = [], migrate_module._copy_schema
    monkeypatch.setattr(migrate_module, "_copy_schema", lambda con, template, path: seen.append(template)
                        or real(con, template, path))
    return seen


def _created(path) -> None:
    with TraceWriter(path).connect():  # created and migrated on first use
        pass


def test_a_new_file_copied_from_the_template_is_the_migrated_schema(tmp_path, copies):
    ran = duckdb.connect(str(tmp_path / "ran.duckdb"))
    migrate(ran)
    expected = _schema(ran)
    ran.close()
    _created(tmp_path / "first.duckdb")
    _created(tmp_path / "second.duckdb")  # the template exists from here on
    start = datetime.datetime.now(datetime.timezone.utc)
    _created(tmp_path / "third.duckdb")
    assert copies and copies[-1] == "wb_schema_template", "a process's second new file is a copy of the template"
    for name in ("first.duckdb", "second.duckdb", "third.duckdb"):
        con = duckdb.connect(str(tmp_path / name), read_only=True)
        assert _schema(con) == expected, name
        rows = con.execute("SELECT name, applied_at FROM migrations ORDER BY name").fetchall()
        assert [n for n, _ in rows] == sorted(m.name for m in MIGRATIONS)
        con.close()
    con = duckdb.connect(str(tmp_path / "third.duckdb"), read_only=True)
    assert all(at >= start for (at,) in con.execute("SELECT applied_at FROM migrations").fetchall()), (
        "applied when this file was created, not when the template was")


def test_a_copy_that_fails_leaves_the_new_file_empty(tmp_path, copies, monkeypatch):
    _created(tmp_path / "one.duckdb")
    _created(tmp_path / "two.duckdb")  # the template exists from here on
    monkeypatch.setattr(migrate_module, "_STAMP", "UPDATE migrations SET no_such_column = now()")
    with pytest.raises(TraceStoreError, match="creating the trace schema failed .* nothing of it was applied"):
        _created(tmp_path / "failed.duckdb")
    assert copies[-1] == "wb_schema_template"
    con = duckdb.connect(str(tmp_path / "failed.duckdb"), read_only=True)
    assert con.execute("SELECT count(*) FROM duckdb_tables() WHERE NOT internal").fetchone() == (0,)
    con.close()
    monkeypatch.undo()
    _created(tmp_path / "failed.duckdb")  # nothing half-made stands in the way of the next try
    con = duckdb.connect(str(tmp_path / "failed.duckdb"), read_only=True)
    assert con.execute("SELECT count(*) FROM migrations").fetchone() == (len(MIGRATIONS),)
