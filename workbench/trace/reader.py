"""Read-only queries over the trace store: short-lived read-only connections with retry.

Readers (`workbench sql`, notebooks, the app's explorer) never hold the file: each query opens a
read-only connection, fetches its whole result and closes, so a writer in another process is
blocked for one query at most, and a lock held by the writer is waited out (see connect.py).
"""

from __future__ import annotations

import os
import re
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

import duckdb

from ..config import default_db_path, lock_timeout, query_timeout
from ..corpus import GAP_KINDS
from ..errors import ReadOnlyQueryError, TraceStoreError, WorkbenchError
from .connect import NO_DOWNLOADS, TRACE_FILE_ONLY, connection
from .history import Schema
from .isolated import UserRows, duckdb_limits, fetch_capped, memory_message, run_user_query
from .migrate import check_trace_database
from .visible import others_in, visible_copy
from .lake import check_typed_query, is_team_store, store_exists, store_version

# EXPLAIN [ANALYZE] or EXPLAIN (option, …) in front of the statement it explains
_EXPLAIN = re.compile(r"^\s*explain\s*(analyze\s+|\([^()]*\)\s*)?", re.IGNORECASE)


def check_read_only(sql: str) -> None:
    """Refuse anything but SELECT (incl. SHOW/DESCRIBE/SUMMARIZE/FROM…) and EXPLAIN of a SELECT."""
    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error as exc:
        raise TraceStoreError(f"cannot parse the query: {exc}") from None
    if not statements:
        raise TraceStoreError("empty query: give a SELECT statement")
    for st in statements:
        kind = st.type.name
        if kind == "EXPLAIN":
            inner = _EXPLAIN.sub("", st.query, count=1)
            try:
                inner_types = [s.type.name for s in duckdb.extract_statements(inner)] if inner.strip() else []
            except duckdb.Error:  # e.g. a comment between EXPLAIN and ANALYZE: refuse, never raise
                inner_types = ["(unparsable)"]
            if inner_types == ["SELECT"]:
                continue
            kind = f"EXPLAIN {inner_types[0] if inner_types else ''}".strip()
        if kind != "SELECT":
            raise ReadOnlyQueryError(
                f"refused: {kind} statements are not allowed — `workbench sql` is read-only; "
                "only SELECT (also WITH…, FROM…, SHOW, DESCRIBE, SUMMARIZE) and EXPLAIN SELECT run here")


#: The schema this process last read from each trace file (by real path), with the file's version then
#: (`store_version`): a reader of the file while it is unchanged takes it without opening the file (any write
#: changes the version; a writer's migrations are writes).
_KNOWN: dict[str, tuple[tuple, Schema]] = {}


class TraceReader:
    """Read-only access to the trace database at `path`.

    A reader never migrates, creates or writes (docs/security.md): a file that is not a trace database
    is refused with a message and left as it is, and an old trace database is read as it is — a query
    that needs a newer table or view says which migrations are missing and that any writer upgrades it.
    """

    def __init__(self, path: str | Path, *, timeout: float | None = None, query_timeout: float | None = None):
        self.path = Path(path)
        self.timeout = timeout if timeout is not None else lock_timeout()  # waiting for another's lock
        #: Longest one query may run (default `$WORKBENCH_QUERY_TIMEOUT`, 20 s): a reader holds the file
        #: while its query runs and writers wait, so no query may hold it without bound.
        self.query_timeout = query_timeout
        #: What the database has (its applied migrations), once checked; readers ask it, never the catalog.
        self.schema: Schema | None = None

    def check(self) -> None:
        """Raise `TraceStoreError` unless the file is a readable trace database (it is only read). A file this
        process has checked and that is unchanged since (`_KNOWN`) is not opened again."""
        if self.schema is None and self._known(self._version()):
            return
        with self.connect():
            pass

    @contextmanager
    def connect(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """One read-only connection to the database, checked first (`check`): for a read of many queries."""
        version = self._version()  # before the file is opened: a write after this is seen by the next check
        with connection(self.path, read_only=True, timeout=self.timeout) as con:
            self._check(con, version)
            yield con

    def _version(self) -> tuple | None:
        """The file's `store_version` (None for a team store: its schema is read on its kept attachment)."""
        return None if is_team_store(self.path) else store_version(self.path)

    def _known(self, version: tuple | None) -> bool:
        """Take the schema this process read from the file when it was at `version`, if it was."""
        known = _KNOWN.get(os.path.realpath(self.path)) if version is not None else None
        if known is not None and known[0] == version:
            self.schema = known[1]
        return self.schema is not None

    def _check(self, con, version: tuple | None) -> None:
        if self.schema is not None or self._known(version):
            return
        done = set(check_trace_database(con, str(self.path)))
        if not done:
            raise TraceStoreError(f"{self.path} is an empty DuckDB database, not a trace database: nothing has "
                                  "been traced there yet (run `workbench ask --db …` first)")
        self.schema = Schema(frozenset(done))
        if version is not None:
            _KNOWN[os.path.realpath(self.path)] = (version, self.schema)

    def _run(self, sql: str | Callable[[Schema], str | None], params: list[Any] | None, fetch: str,
             config: dict | None = None, owner: str | None = None):
        if owner is not None and is_team_store(self.path):  # the copy's attachment is the only one (visible.py)
            return self._on_copy(sql, params, fetch, config, owner, check=lambda con: self._check(con, None))
        version = self._version()
        with connection(self.path, read_only=True, timeout=self.timeout, config=config) as con:
            self._check(con, version)
            sql = self._written(sql)  # `rows_with`: written for the schema just checked, on the same connection
            if sql is None:
                return None
            if owner is None or not others_in(con, owner):
                return self._timed(con, sql, params, fetch)
        # other owners' turns are in the file: the query reads a copy of what `owner` may see (visible.py)
        return self._on_copy(sql, params, fetch, config, owner)

    def _on_copy(self, sql: str | Callable[[Schema], str | None], params: list[Any] | None, fetch: str,
                 config: dict | None, owner: str, check=None):
        mine = visible_copy(self.path, owner, timeout=self.timeout, config=config or {}, check=check)
        try:
            sql = self._written(sql)  # `rows_with` on a team store: the schema was checked on the copy's attachment
            if sql is None:
                return None
            return self._timed(mine, sql, params, fetch)
        finally:
            mine.close()

    def _written(self, sql: str | Callable[[Schema], str | None]) -> str | None:
        """`sql`, or what a `rows_with` writer gives for the checked schema (None: no query for it)."""
        return sql(self.schema) if callable(sql) else sql

    def _timed(self, con, sql: str, params: list[Any] | None, fetch: str):
        limit = self.query_timeout if self.query_timeout is not None else query_timeout()
        timer = threading.Timer(limit, con.interrupt)
        timer.daemon = True
        timer.start()
        try:
            return self._fetch(con, sql, params, fetch, limit)
        except TraceStoreError as exc:
            if self.schema.missing:
                raise TraceStoreError(
                    f"{exc}\n{self.path} has an older trace schema (missing {', '.join(self.schema.missing)}); readers "
                    f"never change a database: the next `workbench ask --db {self.path} …` or `workbench eval`, "
                    "or a question in the app, upgrades it") from None
            raise
        finally:
            timer.cancel()

    @staticmethod
    def _fetch(con, sql: str, params: list[Any] | None, fetch: str, limit: float):
        try:
            if fetch in ("df", "arrow"):  # relation API: no extra copy of the rows
                rel = con.sql(sql, params=params or None)
                return rel.df() if fetch == "df" else rel.to_arrow_table()
            rel = con.execute(sql, params or [])
            if fetch == "capped":
                return fetch_capped(rel)
            columns = [d[0] for d in rel.description or []]
            return columns, rel.fetchall()
        except duckdb.OutOfMemoryException as exc:
            raise TraceStoreError(f"{memory_message()} ({str(exc).splitlines()[0]})") from None
        except duckdb.InterruptException:
            raise TraceStoreError(
                f"query stopped after {limit:g} s, the limit for one query (a query holds the trace file and "
                "writers wait for it); narrow it, or raise the limit with `workbench sql --timeout SECONDS` or "
                "WORKBENCH_QUERY_TIMEOUT") from None
        except duckdb.Error as exc:
            raise TraceStoreError(f"query failed: {exc}") from None

    def rows(self, sql: str, params: list[Any] | None = None) -> tuple[list[str], list[tuple]]:
        """(column names, rows) of a query you trust (library code)."""
        return self._run(sql, params, "rows")

    def rows_with(self, write: Callable[[Schema], str | None],
                  params: list[Any] | None = None) -> tuple[list[str], list[tuple]] | None:
        """`rows` of the query `write` gives for the database's schema (what it has: `Schema.has`), checked and run on
        one connection; None, and no query, when `write` gives None (e.g. an older database without its table)."""
        return self._run(write, params, "rows")

    def df(self, sql: str, params: list[Any] | None = None):
        """A pandas DataFrame of a query (notebooks, the app)."""
        return self._run(sql, params, "df")

    def arrow(self, sql: str, params: list[Any] | None = None):
        return self._run(sql, params, "arrow")

    def user_query(self, sql: str, *, files: bool = True, owner: str | None = None) -> UserRows:
        """A query typed by a user: refused unless it only reads, then run read-only, never downloading
        an extension. `files=False` (the app's explorer, which anyone reaching the app can use) also
        refuses every file but the trace database: no `read_text`, `read_csv`, `glob` or URLs.

        It runs in a child process with bounded memory and returns at most `MAX_QUERY_ROWS` rows
        (`UserRows.cut` says why rows are missing): see isolated.py and docs/security.md. With `owner` (an app
        viewer's `turns.owner`), it reads only that owner's turns and nobody's (visible.py)."""
        check_read_only(sql)
        if is_team_store(self.path):  # refused here, before a process is started for it (its child checks again)
            check_typed_query(sql)
        limit = self.query_timeout if self.query_timeout is not None else query_timeout()
        return run_user_query(self.path, sql, files=files, lock_timeout=self.timeout, query_timeout=limit, owner=owner)

    def run_bounded(self, sql: str, *, files: bool, temp_directory: str, owner: str | None = None) -> UserRows:
        """`user_query`'s work inside its child process (isolated.py): DuckDB's memory and spilling bounded,
        the rows capped; with `owner`, over what that owner may see (visible.py)."""
        check_read_only(sql)
        team = is_team_store(self.path)
        if team:  # a team store's typed query reads the store only (lake.py)
            check_typed_query(sql)
            files = False
        return self._run(sql, None, "capped", {**(NO_DOWNLOADS if files else TRACE_FILE_ONLY),
                                               **duckdb_limits(temp_directory, team_store=team)}, owner=owner)

    def gaps(self, run_ids: list[str] | None = None, providers: list[str] | None = None,
             corpus_ids: list[str] | None = None, kinds: list[str] | None = None, *,
             owner: str | None = None) -> tuple[list[str], list[tuple]]:
        """The doc-gap queue (`doc_gaps_for`), over every run or only the given runs, providers, corpora and
        kinds of gap (`GAP_KINDS`; None or empty: no restriction); `kind` is NULL on a database from before m017.
        With `owner`, over that owner's turns and nobody's (visible.py)."""
        unknown = sorted(set(kinds or ()) - set(GAP_KINDS))
        if unknown:
            raise WorkbenchError(f"unknown doc-gap kind {unknown[0]!r}; choose one of: {', '.join(GAP_KINDS)}")
        if self.schema is None:
            self.check()
        kind = "kind" if "m017_doc_gap_kinds" in self.schema.applied else "NULL::VARCHAR AS kind"  # before m017
        return self._run(f"""
            SELECT * FROM (SELECT question, corpus_id, asks, runs, first_seen, last_seen, max_retrieved, last_turn_id,
                                  {kind}
                           FROM doc_gaps_for(run_ids := ?, providers := ?, corpus_ids := ?))
            WHERE ?::VARCHAR[] IS NULL OR list_contains(?::VARCHAR[], kind)""",
                         [run_ids or None, providers or None, corpus_ids or None, kinds or None, kinds or None], "rows",
                         owner=owner)

    def find_run(self, *, run_id: str | None = None, run_key: str | None = None) -> dict[str, Any] | None:
        """The run with `run_id`, or the latest with `run_key`; None when absent (or no database yet)."""
        if not store_exists(self.path):
            return None
        where, value = ("run_id = ?", run_id) if run_id is not None else ("run_key = ?", run_key)
        columns, rows = self.rows(f"SELECT * FROM runs WHERE {where} ORDER BY created_at DESC LIMIT 1", [value])
        return dict(zip(columns, rows[0])) if rows else None

    def stored_lines(self, run_id: str) -> list[tuple[int, str, str]]:
        """(line, turn_id, status) of every turn of eval run `run_id` stored with the line of the questions file
        it answered (`turn_lines`, m021), in the order written; empty for a run from before m021."""
        if not store_exists(self.path):
            return []
        self.check()
        if not self.schema.has("turn_lines"):
            return []
        _, rows = self.rows("SELECT l.line, l.turn_id, t.status FROM turn_lines l JOIN turns t USING (turn_id) "
                            "WHERE l.run_id = ? ORDER BY t.rowid", [run_id])
        return [(int(line), tid, status) for line, tid, status in rows]

    def answered_counts(self, run_id: str) -> dict[str, int]:
        """How many `ok` turns each question has in `run_id` (resuming a batch skips those; failed turns are retried)."""
        _, rows = self.rows("SELECT question, count(*) FROM turns WHERE run_id = ? AND status = 'ok' GROUP BY 1",
                            [run_id])
        return dict(rows)


def as_reader(db: "str | Path | TraceReader") -> TraceReader:
    """`db` if it is a reader already, else a reader of the database at that path."""
    return db if isinstance(db, TraceReader) else TraceReader(db)


def query_df(sql: str, db: str | Path | None = None):
    """Notebook helper: run a read-only query on the trace store (default database) into a DataFrame."""

    check_read_only(sql)
    return TraceReader(db or default_db_path())._run(sql, None, "df", NO_DOWNLOADS)
