"""Read-only means read-only; migrations run whole or not at all (issue 17, item 4).

Readers (`sql`, `gaps`, `export`, TraceReader, query_df) never migrate, create or write: a DuckDB
file that is not a trace database, a damaged trace database and an old one are left byte for byte
as they were (compared before and after), with a message instead of a traceback.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys

import duckdb
import pytest

from clirun import cli
from damage import KINDS, blocks_of, damage, traced_db
from tracedb import empty_trace_db
from workbench.errors import TraceStoreError
from workbench.session import Session
from workbench.trace import TraceReader, query_df
from workbench.trace.migrate import applied, check_trace_database, migrate
from workbench.trace.schema import MIGRATIONS, Migration


def _state(path):
    """Bytes of the file and of every sidecar DuckDB could leave next to it."""
    out = {}
    for p in sorted(path.parent.iterdir()):
        if p.name.startswith(path.name):
            out[p.name] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def _cli(*args):
    return cli(*args)


@pytest.fixture(scope="module")
def good(tmp_path_factory):
    return traced_db(tmp_path_factory.mktemp("good") / "good.duckdb")


@pytest.fixture
def unrelated(tmp_path):
    path = tmp_path / "shop.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE orders AS SELECT range AS id, 'x' AS item FROM range(1000)")
    con.close()
    return path


READERS = [("sql", "SELECT count(*) FROM turns"), ("gaps",), ("export", "--parquet", "{out}")]


@pytest.mark.parametrize("reader", READERS, ids=lambda r: r[0])
def test_readers_refuse_an_unrelated_duckdb_file_and_leave_it_untouched(unrelated, tmp_path, reader):
    """Before the fix `sql "SELECT 1"` added 13 trace tables to it."""
    before = _state(unrelated)
    args = [a.replace("{out}", str(tmp_path / "out")) for a in reader]
    r = _cli(*args, "--db", str(unrelated))
    assert r.returncode == 2, r.stderr
    assert "not a trace database" in r.stderr and "Traceback" not in r.stderr
    assert _state(unrelated) == before
    con = duckdb.connect(str(unrelated), read_only=True)
    assert [t for (t,) in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()] == ["orders"]
    con.close()


SOMEONE_ELSES = {  # what a database holds -> the words of the refusal
    "a table": ("CREATE TABLE orders (id INT)", "it has tables and no `migrations` table"),
    "a view only": ("CREATE VIEW answer AS SELECT 42 AS n", "it has tables and no `migrations` table"),
    "a view named migrations": ("CREATE VIEW migrations AS SELECT 'm001_initial' AS name",
                                "it has tables and no `migrations` table"),
    "migrations in another schema": ("CREATE SCHEMA other; CREATE TABLE other.migrations (name VARCHAR); "
                                     "INSERT INTO other.migrations VALUES ('m001_initial')",
                                     "it has tables and no `migrations` table"),
    "another program's migrations": ("CREATE TABLE migrations (name VARCHAR); "
                                     "INSERT INTO migrations VALUES ('0001_init')",
                                     "its `migrations` table is not the workbench's"),
}


@pytest.mark.parametrize("holds", SOMEONE_ELSES, ids=str)
def test_the_check_refuses_every_database_that_is_not_a_trace_database(holds):
    sql, words = SOMEONE_ELSES[holds]
    con = duckdb.connect()
    con.execute(sql)
    with pytest.raises(TraceStoreError, match="not a trace database") as refused:
        check_trace_database(con, "x.duckdb")
    assert words in str(refused.value)


def test_the_check_takes_an_empty_database_and_names_a_trace_databases_migrations():
    con = duckdb.connect()
    assert check_trace_database(con) == []
    migrate(con)
    assert check_trace_database(con) == sorted(m.name for m in MIGRATIONS)


def test_library_readers_refuse_an_unrelated_duckdb_file(unrelated):
    before = _state(unrelated)
    with pytest.raises(TraceStoreError, match="not a trace database"):
        TraceReader(unrelated).rows("SELECT 1")
    with pytest.raises(TraceStoreError, match="not a trace database"):
        query_df("SELECT 1", unrelated)
    assert _state(unrelated) == before


def test_a_writer_refuses_an_unrelated_duckdb_file_but_the_answer_survives(unrelated):
    before = _state(unrelated)
    r = _cli("ask", "How do I configure SSO?", "--db", str(unrelated))
    assert r.returncode == 1 and "Sources: Configure SAML" in r.stdout
    assert "not a trace database" in r.stderr and "Traceback" not in r.stderr
    assert _state(unrelated) == before


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("reader", READERS, ids=lambda r: r[0])
def test_readers_leave_a_damaged_trace_database_byte_identical(good, tmp_path, kind, reader):
    """Before the fix a truncated file was 'migrated' (changed) and then raised a traceback."""
    bad = damage(good, kind, tmp_path / "bad.duckdb")
    before = _state(bad)
    args = [a.replace("{out}", str(tmp_path / "out")) for a in reader]
    r = _cli(*args, "--db", str(bad))
    assert "Traceback" not in r.stderr, r.stderr[-3000:]
    assert r.returncode in (0, 2)  # a damage the query never reaches may still answer
    assert _state(bad) == before


def test_an_old_trace_database_is_read_as_it_is_and_never_upgraded(tmp_path):
    path = tmp_path / "old.duckdb"
    con = duckdb.connect(str(path))
    migrate(con, MIGRATIONS[:1])
    con.execute("INSERT INTO runs (run_id, created_at, kind) VALUES ('r1', now(), 'interactive')")
    con.close()
    before = _state(path)
    assert TraceReader(path).rows("SELECT count(*) FROM runs")[1] == [(1,)]
    with pytest.raises(TraceStoreError, match="older") as exc:
        TraceReader(path).rows("SELECT count(*) FROM doc_gaps")
    assert "workbench ask" in str(exc.value)
    r = _cli("gaps", "--db", str(path))
    assert r.returncode == 2 and "older" in r.stderr and "Traceback" not in r.stderr
    assert _state(path) == before
    con = duckdb.connect(str(path), read_only=True)
    assert applied(con) == ["m001_initial"]
    con.close()
    Session.open(trace_db=path).ask("How do I configure SSO?")  # a writer upgrades it
    assert TraceReader(path).rows("SELECT count(*) FROM doc_gaps")[1] == [(0,)]


def test_applied_reports_damage_instead_of_an_empty_schema(good, tmp_path):
    """`applied()` used to swallow every exception, so a damaged file looked unmigrated."""
    bad = tmp_path / "bad.duckdb"  # the catalog opens; the migrations table's own blocks are garbage
    shutil.copy(good, bad)
    offsets, block = blocks_of(good, "migrations")
    with open(bad, "r+b") as f:
        for at in offsets:
            f.seek(at)
            f.write(b"\xef" * block)
    con = duckdb.connect(str(bad), read_only=True)
    try:
        with pytest.raises(TraceStoreError, match="cannot read"):
            applied(con)
    finally:
        con.close()
    fresh = duckdb.connect(":memory:")
    assert applied(fresh) == []


def _catalog(path):
    con = duckdb.connect(str(path), read_only=True)
    try:
        return (con.execute("SELECT table_name, comment FROM duckdb_tables() ORDER BY 1").fetchall(),
                con.execute("SELECT table_name, column_name, comment FROM duckdb_columns() WHERE NOT internal "
                            "ORDER BY 1, 2").fetchall(),
                con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal ORDER BY 1").fetchall())
    finally:
        con.close()


def _failing(name: str, after_python: bool = False) -> Migration:
    sql = ("CREATE TABLE half (a INTEGER); COMMENT ON TABLE half IS 'half done'; "
           "COMMENT ON COLUMN half.a IS 'a column'; COMMENT ON TABLE runs IS 'CHANGED'; ")
    if after_python:
        def boom(con):
            raise RuntimeError("the backfill failed")
        return Migration(name, sql, boom)
    return Migration(name, sql + "SELECT * FROM no_such_table")


@pytest.mark.parametrize("after_python", [False, True])
def test_a_failing_first_migration_leaves_nothing_behind(tmp_path, after_python):
    """The migrations table and its COMMENT ONs used to be committed before the first migration ran."""
    path = tmp_path / "fresh.duckdb"
    first = Migration("m001_initial", MIGRATIONS[0].sql + ";\n" + _failing("x", after_python).sql,
                      _failing("x", after_python).python)
    con = duckdb.connect(str(path))
    with pytest.raises((TraceStoreError, RuntimeError)):
        migrate(con, (first,))
    con.close()
    assert _catalog(path) == ([], [], [])


def test_a_new_database_takes_every_migration_in_one_transaction(tmp_path):
    """A new file is migrated in one transaction (one commit, not one a migration: most of the time a new trace
    database took), so one failing at the end leaves the file as empty as it was, not half a schema."""
    path = tmp_path / "fresh.duckdb"
    con = duckdb.connect(str(path))
    with pytest.raises(TraceStoreError, match="m999_fails"):
        migrate(con, MIGRATIONS + (_failing("m999_fails", False),))
    assert applied(con) == []
    con.close()
    assert _catalog(path) == ([], [], [])


@pytest.mark.parametrize("after_python", [False, True])
def test_a_failing_later_migration_leaves_the_schema_as_it_was(tmp_path, after_python):
    path = empty_trace_db(tmp_path / "t.duckdb")  # every migration applied
    before = _catalog(path)
    con = duckdb.connect(str(path))
    with pytest.raises((TraceStoreError, RuntimeError)):
        migrate(con, MIGRATIONS + (_failing("m999_fails", after_python),))
    assert applied(con) == sorted(m.name for m in MIGRATIONS)
    con.close()
    assert _catalog(path) == before


def test_a_reader_that_waits_for_a_lock_creates_nothing_beside_the_database(good, tmp_path):
    """The readers' queue marker used to be `<db>.readers` next to the file, left behind when a reader
    gave up: readers create nothing where the database lives."""
    db = tmp_path / "locked.duckdb"
    shutil.copy(good, db)
    before = sorted(p.name for p in tmp_path.iterdir())
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time, duckdb; c = duckdb.connect(sys.argv[1]); "
                               "print('locked', flush=True); time.sleep(60)", str(db)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(TraceStoreError, match="locked"):
            TraceReader(db, timeout=0.5).rows("SELECT count(*) FROM turns")
        assert sorted(p.name for p in tmp_path.iterdir()) == before
    finally:
        holder.kill()
        holder.wait()
