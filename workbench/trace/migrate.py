"""Apply the schema's pending migrations, each in one transaction with its `migrations` row (on a new database
file, all of them in one).

A migration runs whole or not at all: its SQL (COMMENT ONs included), its Python step and its row in
`migrations` commit together, and the `migrations` table itself is created inside the first
migration's transaction — so a failing migration leaves the database exactly as it was.

A new database file may instead be a copy of a `template`: a database attached to the same DuckDB that holds
every migration and nothing else (the writer keeps one per process, `writer.schema_template`). DuckDB's
`COPY FROM DATABASE` copies its tables, views, macros, comments, constraints and its `migrations` rows, in one
transaction with `applied_at` set to now: the same catalog (`tests/test_schema_template.py`) for 17 ms of CPU
instead of the 103 ms of running the migrations (`benchmarks/new_trace_file.py`), which every new file paid.
"""

from __future__ import annotations

import functools
from contextlib import contextmanager
from typing import Callable, Iterator

import duckdb

from ..errors import TraceStoreError
from .duck import sql_string
from .lake import TOKENS_DDL, LakeMigration, execute_ddl, install_macros, is_lake
from .schema import MIGRATIONS, Migration

_MIGRATIONS_TABLE = """
CREATE TABLE migrations (name VARCHAR PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL);
COMMENT ON TABLE migrations IS 'The schema migrations applied to this database, by name, in order.';
COMMENT ON COLUMN migrations.name IS 'Migration name (`m001_initial`, …), in workbench/trace/schema.py.';
COMMENT ON COLUMN migrations.applied_at IS 'When it was applied (UTC).';
"""
#: One reading of each catalog function (a team store's catalog is read from its server at every reading: ~10 ms
#: each). A database of the user's holds no internal tables, so counting `migrations` among them changes nothing.
_OBJECTS = """
SELECT count(*) FILTER (WHERE schema_name = current_schema() AND table_name = 'migrations'),
       count(*) + (SELECT count(*) FROM duckdb_views() WHERE database_name = current_database() AND NOT internal)
FROM duckdb_tables() WHERE database_name = current_database() AND NOT internal
"""


def _objects(con) -> tuple[bool, int]:
    """(has a `migrations` table, number of user tables and views) of the connection's current database."""
    try:
        has, n = con.execute(_OBJECTS).fetchone()
    except duckdb.Error as exc:
        raise TraceStoreError(f"cannot read the database catalog (damaged file?): {exc}") from None
    return bool(has), n


def applied(con) -> list[str]:
    """Names of the applied migrations; [] for a database without a `migrations` table. Any other failure
    (a damaged file) raises `TraceStoreError`: a database that cannot be read is not an empty one."""
    return _applied(con, _objects(con)[0])


def _applied(con, has_table: bool) -> list[str]:
    if not has_table:
        return []
    try:
        return [n for (n,) in con.execute("SELECT name FROM migrations ORDER BY name").fetchall()]
    except duckdb.Error as exc:
        raise TraceStoreError(f"cannot read the migrations table (damaged file?): {exc}") from None


def check_trace_database(con, path: str = "the database") -> list[str]:
    """The applied migrations; `TraceStoreError` when the file holds something other than a trace database.

    An empty database (a new file) is fine; one with tables or views but no workbench `migrations`
    table is someone else's data, and nothing of the workbench's is added to it.
    """
    has_table, objects = _objects(con)
    done = _applied(con, has_table)
    if done and MIGRATIONS[0].name not in done:
        raise TraceStoreError(f"{path} is not a trace database (its `migrations` table is not the workbench's); "
                              "pick another trace database file")
    if not done and objects:
        raise TraceStoreError(f"{path} is a DuckDB database but not a trace database (it has tables and no "
                              "`migrations` table); it was left as it is — pick another trace database file")
    return done


def pending(con, migrations: tuple[Migration, ...] = MIGRATIONS) -> list[Migration]:
    done = set(applied(con))
    return [m for m in migrations if m.name not in done]


def migrate(con, migrations: tuple[Migration, ...] = MIGRATIONS, path: str = "the database",
            template: Callable[[], str | None] | None = None) -> list[str]:
    """Apply every pending migration in order on a read-write connection; return their names. A new file whose
    connection has a `template()` (the name of a database holding every migration, or None) is a copy of it."""
    done = set(check_trace_database(con, path))
    # Past that check, no migration applied means no `migrations` table (an empty one is refused there).
    todo = [m for m in migrations if m.name not in done]
    lake = bool(todo) and is_lake(con)
    if todo and not done and not lake and migrations is MIGRATIONS and template is not None:
        name = template()
        if name is not None:
            _copy_schema(con, name, path)
            return [m.name for m in todo]
    run = functools.partial(execute_ddl, con) if lake else con.execute  # a team store: lake.py
    # A new database file takes them all in one transaction: one commit (one sync to disk) instead of one a
    # migration, which was most of the time a new trace database took to open; an existing one, each in its own.
    for group in ([todo] if todo and not done and not lake else [[m] for m in todo]):
        with _whole(con, lambda: f"migration {m.name} failed on {path}"):  # `m`: the one running when it failed
            for m in group:
                if not done and m is todo[0]:  # with the first migration, so a failure leaves nothing behind
                    run(_MIGRATIONS_TABLE + (TOKENS_DDL if lake else ""))
                run(m.sql)
                if m.python is not None:
                    m.python(LakeMigration(con) if lake else con)
                # a literal: a bound parameter makes DuckDB 1.5 import pandas (writer._literal)
                con.execute(f"INSERT INTO migrations VALUES ({sql_string(m.name)}, now())")
    if lake:
        install_macros(con)
    return [m.name for m in todo]


#: What a copied schema's `migrations` rows say: applied now, with this database, not when the template was made.
_STAMP = "UPDATE migrations SET applied_at = now()"


def _copy_schema(con, template: str, path: str) -> None:
    """Make the new, empty database open on `con` a copy of `template` (module doc), whole or not at all."""
    (target,) = con.execute("SELECT current_database()").fetchone()
    with _whole(con, lambda: f"creating the trace schema failed on {path}"):
        con.execute(f'COPY FROM DATABASE "{template}" TO "{target}"')
        con.execute(_STAMP)


@contextmanager
def _whole(con, failed: Callable[[], str]) -> Iterator[None]:
    """The block in one transaction: committed, or rolled back with a `TraceStoreError` saying `failed()`."""
    con.execute("BEGIN")
    try:
        yield
        con.execute("COMMIT")
    except BaseException as exc:
        try:
            con.execute("ROLLBACK")
        except duckdb.Error:  # the failure already ended the transaction
            pass
        if isinstance(exc, duckdb.Error):
            raise TraceStoreError(f"{failed()}, nothing of it was applied: {exc}") from None
        raise
