"""The team store: a DuckLake whose catalog is a PostgreSQL database and whose data are Parquet files on a
shared path (docs/design.md §13, docs/traces.md "The team store").

Named `ducklake:postgres:<libpq connection string>` wherever a trace database is (`--db`, `WORKBENCH_DB`), with
`WORKBENCH_DATA_PATH` (`--data-path`) naming the folder, share or object-store prefix of its Parquet files
(needed when the store is created; DuckLake records it in its catalog). The password never appears in the name:
libpq reads it from `PGPASSWORD` or `~/.pgpass`; a `password=` in the name is refused.

No lock machinery (connect.py's markers, backoff and attach/detach per write belong to the file store): readers
see a snapshot and never block writers, so a process attaches the store once and keeps it (`_host`); each use is a
cursor of that one in-memory DuckDB. Extensions come from the PyPI wheels pinned in requirements.txt and are
loaded by path, never downloaded (autoloading stays off: connect.NO_DOWNLOADS); DuckDB wants the PostgreSQL one
named `postgres_scanner.duckdb_extension`, so each is linked under its DuckDB name in a private folder.
"""

from __future__ import annotations

import importlib.util
import json
import os
import random
import re
import tempfile
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import duckdb

from ..config import env
from ..errors import ReadOnlyQueryError, TraceStoreError
from .duck import NO_DOWNLOADS, duckdb_connect, sql_string

PREFIX = "ducklake:postgres:"
DATA_PATH_ENV = "WORKBENCH_DATA_PATH"
#: The name the store is attached as in each process's DuckDB (its tables are read unqualified: `USE`).
ALIAS = "trace_lake"
#: DuckLake's own retry of a commit that conflicts with another writer's (stated in docs/traces.md): appends to a
#: table never conflict; a commit that does is tried again up to 20 times, waiting 20 ms × 1.5^attempt (capped by
#: DuckLake), ~30 s in all, about the file store's lock wait.
RETRY_SETTINGS = {"ducklake_max_retry_count": 20, "ducklake_retry_wait_ms": 20, "ducklake_retry_backoff": 1.5}
#: (wheel module, file in the wheel, the name DuckDB loads it as), in load order.
_EXTENSIONS = (("duckdb_extension_postgres", "postgres", "postgres_scanner"),
               ("duckdb_extension_ducklake", "ducklake", "ducklake"))
_HTTPFS = ("duckdb_extension_httpfs", "httpfs", "httpfs")
#: A password in a store's name: `password=` or `sslpassword=` (key=value, or a URL's query), or a URL's user:password@.
_PASSWORD = re.compile(r"(^|[\s?&])(ssl)?password\s*=|:/+[^/@\s]*:[^/@\s]*@", re.I)


def is_team_store(db: str | Path) -> bool:
    return str(db).startswith(PREFIX)


def where(db: str | Path) -> str:
    """Where a store is, as a page of the app says it: a file's path; for a team store only that it is one (its
    connection string, host, port, user and database, stays with the operator: docs/security.md)."""
    return "a team store" if is_team_store(db) else str(db)


def store_exists(db: str | Path) -> bool:
    """Whether the trace store `db` holds something: a file that is there, a team store that has been migrated
    (one nobody has written to yet is like a missing file: nothing traced there)."""
    if not is_team_store(db):
        return Path(db).exists()
    if str(db) in _MIGRATED_STORES:
        return True
    with cursor(db) as con:
        found = con.execute("SELECT count(*) FROM duckdb_tables() WHERE database_name = current_database() "
                            "AND table_name = 'migrations'").fetchone()[0] > 0
    if found:
        _MIGRATED_STORES.add(str(db))
    return found


def snapshot_id(db: str | Path) -> int | None:
    """The team store's latest DuckLake snapshot: it changes with every commit, whoever made it (what a file's size
    and modification time tell of a file: the app's caches are keyed by it); None when it cannot be read."""
    try:
        with cursor(db) as con:
            return con.execute(f"SELECT * FROM {ALIAS}.current_snapshot()").fetchone()[0]
    except (duckdb.Error, TraceStoreError):
        return None


def store_version(db: str | Path) -> tuple:
    """Changes whenever the trace store `db` is written, by this process or any other: a file's size, modification
    time and inode and those of its write-ahead log (a write may reach only the log until the next checkpoint);
    a team store's latest snapshot (`snapshot_id`), which no file of this machine shows. What the app's caches
    and a reader's known schema (reader.py) are keyed by."""
    if is_team_store(db):
        return ("snapshot", snapshot_id(db))
    out = []
    for p in (str(db), f"{db}.wal"):
        try:
            st = os.stat(p)
            out.append((st.st_size, st.st_mtime_ns, st.st_ino))
        except OSError:
            out.append(None)
    return tuple(out)


def check_name(db: str | Path) -> str:
    """The libpq connection string of the team store `db`; refuse one carrying a password."""
    libpq = str(db)[len(PREFIX):]
    if _PASSWORD.search(libpq):
        raise TraceStoreError("a team store's name must not carry a password (it would be printed and kept in "
                              "shell histories): put it in PGPASSWORD or ~/.pgpass, where libpq reads it")
    if re.match(r"^\s*postgres(ql)?:", libpq, re.I):  # a file path's rules (`Path`) would fold its `//`
        raise TraceStoreError(f"name a team store with libpq's key=value form, e.g. "
                              f"'{PREFIX}host=db.internal port=5432 dbname=traces user=workbench', not a URL")
    if not libpq.strip():
        raise TraceStoreError(f"a team store is named {PREFIX}<libpq connection string>, e.g. "
                              f"'{PREFIX}host=db.internal dbname=traces user=workbench'")
    return libpq


def data_path() -> str | None:
    return env(DATA_PATH_ENV)


def _wheel_file(module: str, stem: str) -> Path:
    spec = importlib.util.find_spec(module)
    folder = Path(next(iter(spec.submodule_search_locations))) if spec and spec.submodule_search_locations else None
    path = folder / "extensions" / f"v{duckdb.__version__}" / f"{stem}.duckdb_extension" if folder else None
    if path is None or not path.is_file():
        dist = module.replace("_", "-")
        raise TraceStoreError(f"the team store needs the DuckDB extension wheel {dist}=={duckdb.__version__} "
                              f"(pip install -r requirements.txt); nothing is downloaded at run time")
    return path


def extension_folder(extensions=_EXTENSIONS) -> Path:
    """A folder of this user's with each extension linked under the name DuckDB loads it as."""
    folder = Path(tempfile.gettempdir()) / f"provenance-workbench-{os.getuid()}" / f"duckdb-{duckdb.__version__}"
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    if folder.parent.stat().st_uid != os.getuid() or folder.parent.is_symlink():
        raise TraceStoreError(f"{folder.parent} belongs to another user; remove it")
    for module, stem, name in extensions:
        source, link = _wheel_file(module, stem), folder / f"{name}.duckdb_extension"
        if not link.is_symlink() or Path(os.readlink(link)) != source:
            tmp = folder / f".{name}.{os.getpid()}"
            tmp.unlink(missing_ok=True)
            tmp.symlink_to(source)
            os.replace(tmp, link)  # atomic: another process loading it sees the old link or the new one
    return folder


def _needs_httpfs(path: str | None) -> bool:
    return bool(path) and re.match(r"^(s3|gcs|gs|r2|https?|az|azure|abfss)://", path or "", re.I) is not None


def attach(con, db: str | Path, alias: str = ALIAS, *, read_only: bool = False) -> None:
    """Attach the team store `db` to the DuckDB connection `con` as `alias`, its extensions loaded by path."""
    libpq, where = check_name(db), data_path()
    folder = extension_folder(_EXTENSIONS + ((_HTTPFS,) if _needs_httpfs(where) else ()))
    for name in ("postgres_scanner", "ducklake") + (("httpfs",) if _needs_httpfs(where) else ()):
        con.execute(f"LOAD {sql_string(folder / f'{name}.duckdb_extension')}")
    for key, value in RETRY_SETTINGS.items():
        con.execute(f"SET {key} = {value}")
    attach_sql = f"ATTACH {sql_string(PREFIX + libpq)} AS {alias}"
    try:  # a store that exists keeps its files where its catalog says (so one app can list several team stores)
        con.execute(attach_sql + (" (READ_ONLY)" if read_only else ""))
    except duckdb.InvalidInputException as exc:
        if "data_path is not set" not in str(exc):
            raise
        if not where:
            raise TraceStoreError(f"the team store is new and needs a place for its files: set {DATA_PATH_ENV} (or "
                                  "`--data-path`) to a folder, a network share or an object-store prefix") from None
        # a new store: its files go to the data path given (`WORKBENCH_DATA_PATH`), which DuckLake records
        con.execute(attach_sql + f" (DATA_PATH {sql_string(where)}" + (", READ_ONLY)" if read_only else ")"))


def open_store(db: str | Path, config: dict | None = None):
    """A new in-memory DuckDB with the team store attached (and `USE`d), its extensions loaded by path."""
    config = dict(config or {})
    closed = config.pop("enable_external_access", True) is False  # set after the attach, which needs the network
    con = duckdb_connect(":memory:", config={**config, **NO_DOWNLOADS})
    try:
        attach(con, db, read_only=bool(config))  # settings of its own: a typed query, which only reads
        con.execute(f"USE {ALIAS}")
        con.execute(SEARCH_PATH)
        install_macros(con)
        if closed:  # a visitor's query reads the store's own files and nothing else (docs/security.md)
            stored = con.execute(f"SELECT value FROM __ducklake_metadata_{ALIAS}.ducklake_metadata "
                                 "WHERE key = 'data_path'").fetchone()
            allowed = [stored[0]] if stored else [p for p in (data_path(),) if p]  # its own files, not another's
            con.execute("SET allowed_directories = [" + ", ".join(sql_string(p) for p in allowed) + "]")
            con.execute("SET enable_external_access = false")
        return con
    except TraceStoreError:  # said already, without the name (which may carry what check_name refused)
        con.close()
        raise
    except duckdb.Error as exc:
        con.close()
        raise TraceStoreError(f"cannot open the team store {db}: {_first_line(exc)}") from None


#: Functions a typed query may not call on a team store: the PostgreSQL extension's (`postgres_query` runs any SQL
#: on the catalog's server, e.g. `pg_read_file`), DuckLake's (some change the store: `ducklake_expire_snapshots`),
#: and `query`/`query_table`, which would run a string the check never saw.
_REFUSED_PREFIXES = ("postgres_", "ducklake_")
_REFUSED_NAMES = {"query", "query_table"}


def _function_names(tree) -> Iterator[str]:
    if isinstance(tree, dict):
        if isinstance(tree.get("function_name"), str):
            yield tree["function_name"]
        for value in tree.values():
            yield from _function_names(value)
    elif isinstance(tree, list):
        for value in tree:
            yield from _function_names(value)


def check_typed_query(sql: str) -> None:
    """Refuse a typed query (already checked read-only) that calls a function reaching past the store's tables."""

    con = duckdb_connect()
    try:
        tree = json.loads(con.execute(f"SELECT json_serialize_sql({sql_string(sql)})").fetchone()[0])
    finally:
        con.close()
    for name in _function_names(tree):
        if name.lower().startswith(_REFUSED_PREFIXES) or name.lower() in _REFUSED_NAMES:
            raise ReadOnlyQueryError(f"refused: {name}() is not allowed on a team store — a typed query reads the "
                                     "store's tables and views only (docs/security.md)")


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


_HOSTS: dict[tuple[int, str, str | None], object] = {}
_MIGRATED_STORES: set[str] = set()  # team stores seen with a `migrations` table (store_exists)
_HOSTS_GUARD = threading.Lock()


def _host_cursor(db: str):
    """A cursor of this process's DuckDB with the team store attached, which is opened once and kept (readers
    never hold writers); each thread's use gets its own cursor (a DuckDB connection serves one thread)."""
    key = (os.getpid(), db, data_path())
    with _HOSTS_GUARD:
        if key not in _HOSTS:
            _HOSTS[key] = open_store(db)
        return _HOSTS[key].cursor()


@contextmanager
def cursor(db: str | Path, config: dict | None = None) -> Iterator:
    """A cursor on the team store: of the process's kept attachment, or, for a query with settings of its own
    (`config`: a visitor's bounded query), of a DuckDB opened for it and closed after. `NO_DOWNLOADS`, which every
    DuckDB of the process has (the kept one too), is no setting of its own: a notebook's `query_df` reads through the
    kept attachment instead of attaching the store again (extensions, ATTACH, macros: ~0.8 s of CPU a query)."""
    own = open_store(db, config) if config and config.items() - NO_DOWNLOADS.items() else None
    con = own if own is not None else _host_cursor(str(db))
    try:
        if own is None:
            con.execute(f"USE {ALIAS}; {SEARCH_PATH}")
        yield con
    finally:
        con.close()


#: DuckLake has no primary keys, unique constraints or indexes: the migrations' DDL, written for a file, is
#: translated here, in one place, when it runs on a team store (uniqueness comes from elsewhere: docs/traces.md).
_KEY = re.compile(r" (PRIMARY KEY|UNIQUE)(?=\s*[,\n)])")  # a column's constraint (upper case), never comment text
_INDEX = re.compile(r"^\s*CREATE\s+(UNIQUE\s+)?INDEX\b[^;]*;", re.I | re.M)


_VIEW_COLUMN_COMMENT = re.compile(r"^(?:\s*--[^\n]*\n)*\s*COMMENT\s+ON\s+COLUMN\s+(\w+)\.", re.I)
_COMMENT = re.compile(r"^(?:\s*--[^\n]*\n)*\s*COMMENT\s+ON\b", re.I)


def lake_ddl(sql: str) -> str:
    return _INDEX.sub("", _KEY.sub("", sql))


_MACRO = re.compile(r"^(?:\s*--[^\n]*\n)*\s*CREATE\s+(OR\s+REPLACE\s+)?MACRO\s+(\w+)", re.I)  # after comments


def _temp_macro(text: str) -> str | None:
    """A `CREATE MACRO` statement as the same macro, temporary (this process's DuckDB); None for another statement.

    Why: DuckLake 1.5.5 cannot store a macro whose parameter defaults to NULL, as the analysts' macros do
    (`doc_gaps_for(run_ids := NULL, …)`): a plain NULL is refused ("unsupported type NULL") and a typed one is
    stored but then the store cannot be attached again ("INTERNAL Error: Attempting to dereference an optional
    pointer"), measured. So on a team store the macros live in each process, from the migrations: temporary while
    a migration creates the views that call them (a transaction writes one database, temporary objects aside),
    then in the process's own in-memory database (`install_macros`), which every cursor searches after the
    store (`SEARCH_PATH`); the views stored in the lake call them by name."""
    made = _MACRO.match(text)
    return None if made is None else _MACRO.sub(f"CREATE OR REPLACE TEMP MACRO {made.group(2)}", text, count=1)


SEARCH_PATH = f"SET search_path = '{ALIAS}.main,memory.main'"
#: Where a team store keeps its macros' definitions (written with the migration that made them; `_temp_macro`).
MACROS_TABLE = "team_store_macros"
_MACROS_DDL = f"""CREATE TABLE IF NOT EXISTS {MACROS_TABLE} (name VARCHAR, seq BIGINT, definition VARCHAR);
COMMENT ON TABLE {MACROS_TABLE} IS 'Team store only: the analysts'' macros (doc_gaps_for, …), created in each process''s own DuckDB from here (DuckLake cannot store them).'"""


#: The row every keyed write on a team store updates in its transaction (`WRITE_TOKEN`): DuckLake has no unique keys,
#: but it refuses to commit a transaction that updated rows another transaction committed meanwhile (measured on
#: 1.5.5: the same row, or another row of the same table, conflict; plain appends never do). So two writes that
#: could store one key twice (a conversation position, a span an exporter sent again, a passage, a turn retried
#: after a commit whose answer was lost) cannot both commit: the loser is rolled back and the writer runs it again,
#: reading what the winner stored (`TURN_WRITE_BACKOFF`). No check-then-insert race.
TOKENS_TABLE = "team_store_tokens"
TOKENS_DDL = f"""CREATE TABLE {TOKENS_TABLE} (name VARCHAR, n BIGINT);
INSERT INTO {TOKENS_TABLE} VALUES ('writes', 0);
COMMENT ON TABLE {TOKENS_TABLE} IS 'Team store only: the row every keyed write updates, so DuckLake''s conflict detection lets one of two overlapping writes commit (docs/traces.md, "The team store").'"""
WRITE_TOKEN = f"UPDATE {TOKENS_TABLE} SET n = n + 1 WHERE name = 'writes'"
#: DuckDB's words when a DuckLake commit lost to another writer's (the workbench runs the transaction again).
LOST_COMMIT = "failed to commit ducklake transaction"


@dataclass(frozen=True)
class Backoff:
    """How a write that lost to another writer's commit (`lost_to_another_writer`) is run again: at most `tries`
    times, each after a random wait of up to `first` s × `growth`^try, at most `cap` s. The one retry rule of a team
    store; each kind of write names its figures below."""

    tries: int
    first: float
    growth: float
    cap: float

    def pause(self, lost: int) -> None:
        """Wait before running a write again after its `lost`-th loss (1, 2, …)."""
        time.sleep(random.uniform(0, min(self.cap, self.first * self.growth ** lost)))


#: A turn's write (writer.py): up to 100 tries, a random wait of up to 2 ms × 2^try, at most 0.25 s (~20 s in all):
#: many writers of turns at once conflict often, and most conflicts clear in a few milliseconds.
TURN_WRITE_BACKOFF = Backoff(tries=100, first=0.002, growth=2.0, cap=0.25)
#: A keyed write outside the turn writer (`keyed_write`: a saved query replaced): up to 20 tries, a random wait of
#: up to 50 ms × 1.25^try, at most 0.5 s (~6 s in all): rarer, longer transactions.
KEYED_BACKOFF = Backoff(tries=20, first=0.05, growth=1.25, cap=0.5)
#: Each `store maintain` step: up to 50 tries, the same waits, at most 1 s (~40 s in all). A step rewrites files
#: for seconds and loses to every writer's commit meanwhile; upkeep can wait, a writer should not.
MAINTAIN_BACKOFF = Backoff(tries=50, first=0.05, growth=1.25, cap=1.0)


def keyed_write(con, statements: list[tuple[str, list]]) -> None:
    """Run `statements` ((sql, parameters) pairs) on a team store as one transaction that also updates the write
    token, so an overlapping keyed write cannot commit too (DuckLake has no unique key, nor `INSERT OR REPLACE`);
    the one that lost is run again, reading what the winner stored."""
    def write():
        con.execute("BEGIN TRANSACTION")
        con.execute(WRITE_TOKEN)
        for sql, params in statements:
            con.execute(sql, params)
        con.execute("COMMIT")

    again_when_lost(con, write)


def again_when_lost(con, step, backoff: Backoff = KEYED_BACKOFF):
    """`step()`, rolled back and run again (`backoff`) while it fails because another writer's commit came first."""
    for lost in range(backoff.tries + 1):
        try:
            return step()
        except duckdb.Error as exc:
            try:
                con.execute("ROLLBACK")
            except duckdb.Error:  # nothing left open
                pass
            if not lost_to_another_writer(exc) or lost == backoff.tries:
                raise
            backoff.pause(lost + 1)


def _keep_macro(con, name: str, temp: str) -> None:
    """Record macro `name` (in the migration's transaction) as it will be created in every process."""
    definition = temp.replace(f"CREATE OR REPLACE TEMP MACRO {name}", f"CREATE OR REPLACE MACRO memory.main.{name}", 1)
    con.execute(_MACROS_DDL)
    con.execute(f"DELETE FROM {MACROS_TABLE} WHERE name = {sql_string(name)}")
    con.execute(f"INSERT INTO {MACROS_TABLE} SELECT {sql_string(name)}, coalesce(max(seq), 0) + 1, "
                f"{sql_string(definition)} FROM {MACROS_TABLE}")


def install_macros(con) -> None:
    """Create the store's macros in this process's DuckDB (see `_temp_macro`), as its migrations left them. A
    macro that calls one created after it waits for the next pass."""
    has = con.execute("SELECT count(*) FROM duckdb_tables() WHERE database_name = current_database() "
                      f"AND table_name = '{MACROS_TABLE}'").fetchone()[0]
    todo = [d for (d,) in con.execute(f"SELECT definition FROM {MACROS_TABLE} ORDER BY seq").fetchall()] if has else []
    while todo:
        failed = []
        for definition in todo:
            try:
                con.execute(definition)
            except (duckdb.CatalogException, duckdb.BinderException):
                failed.append(definition)
        if len(failed) == len(todo):
            raise TraceStoreError(f"the team store's macros cannot be created: {failed[0][:200]}")
        todo = failed


def execute_ddl(con, sql: str, params=None):
    """Run a migration's SQL on a team store: without keys and indexes (`lake_ddl`), its macros temporary
    (`_temp_macro`), and without comments on a view's columns, which DuckLake refuses ("it is not a table"; a
    view's own comment is kept). Returns `con`, holding the last statement's result."""
    if params is not None:
        return con.execute(sql, params)
    views = None  # the store's views, read once for a run of comments (each catalog read is DuckLake round trips)
    for statement in duckdb.extract_statements(lake_ddl(sql)):
        text = statement.query
        temp = _temp_macro(text)
        if temp is not None:
            con.execute(temp)
            _keep_macro(con, _MACRO.match(text).group(2), temp)
            continue
        on = _VIEW_COLUMN_COMMENT.match(text)
        if on:
            if views is None:
                views = {v for (v,) in con.execute("SELECT view_name FROM duckdb_views() "
                                                   "WHERE database_name = current_database()").fetchall()}
            if on.group(1) in views:
                continue
        elif not _COMMENT.match(text):
            views = None  # a statement that may create or drop a view
        con.execute(text)
    return con


class LakeMigration:
    """A connection as a migration's Python step sees it on a team store: its SQL goes through `execute_ddl`."""

    def __init__(self, con):
        self._con = con

    def execute(self, sql: str, params=None):
        return execute_ddl(self._con, sql, params)

    def __getattr__(self, name):
        return getattr(self._con, name)


def is_lake(con) -> bool:
    """Whether the connection's current database is a DuckLake (a team store)."""
    row = con.execute("SELECT type FROM duckdb_databases() WHERE database_name = current_database()").fetchone()
    return bool(row) and row[0] == "ducklake"


#: Snapshots `workbench store maintain` keeps (time travel reaches this far back); older ones, and the files
#: only they referenced, are removed.
KEEP_SNAPSHOT_DAYS = 7


def lost_to_another_writer(exc: BaseException) -> bool:
    """Whether a DuckLake step failed because a writer's commit came first (run it again), measured wordings:
    the commit refused, or the catalog's PostgreSQL transaction failed on a concurrent update."""
    text = str(exc).lower()
    return any(words in text for words in (LOST_COMMIT, "transaction is aborted", "conflict", "could not serialize"))


def maintain(db: str | Path, keep_days: int = KEEP_SNAPSHOT_DAYS) -> dict[str, int]:
    """DuckLake's upkeep of a team store, each step its own transaction (safe while writers run: a step that loses
    to a writer's commit is run again): rows inlined in the catalog written out as Parquet, small adjacent files
    merged, snapshots older than `keep_days` expired and the files only they used deleted. Returns what each did."""
    older = f"older_than => now() - INTERVAL {int(keep_days)} DAY"
    steps = {"flushed_tables": f"CALL ducklake_flush_inlined_data('{ALIAS}')",
             "merged": f"CALL ducklake_merge_adjacent_files('{ALIAS}')",
             "expired_snapshots": f"CALL ducklake_expire_snapshots('{ALIAS}', {older})",
             "deleted_files": f"CALL ducklake_cleanup_old_files('{ALIAS}', {older})"}
    done = {}
    with cursor(db) as con:
        for name, sql in steps.items():
            try:
                done[name] = again_when_lost(con, lambda sql=sql: len(con.execute(sql).fetchall()), MAINTAIN_BACKOFF)
            except duckdb.Error as exc:
                raise TraceStoreError(f"store maintenance ({name}) failed: {exc}") from None
    return done
