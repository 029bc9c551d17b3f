"""The Trace explorer's saved, named queries, kept in the trace store (`saved_queries`, migration m022).

A query is saved only when it is read-only (`reader.check_read_only`, as a typed query is checked before it
runs) and within the bounds below (docs/security.md); it runs like any typed query, read-only and bounded.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from ..errors import WorkbenchError
from ..terminal import all_visible
from .reader import TraceReader, check_read_only
from .writer import TraceWriter
from .lake import is_team_store, keyed_write, store_exists

#: The longest name and SQL text a saved query may have.
MAX_QUERY_NAME_CHARS = 80
MAX_SAVED_SQL_CHARS = 20_000


class SavedQueryError(WorkbenchError):
    """A name or SQL text that cannot be saved, or a saved query that is not there."""


@dataclass(frozen=True)
class SavedQuery:
    name: str
    sql: str
    saved_at: datetime
    saved_by: str | None = None


def check_name(name: str) -> str:
    """`name` without surrounding blanks, if it can name a saved query; else a `SavedQueryError` saying why."""
    name = name.strip()
    if not name:
        raise SavedQueryError("give the query a name")
    if len(name) > MAX_QUERY_NAME_CHARS:
        raise SavedQueryError(f"a query's name has at most {MAX_QUERY_NAME_CHARS} characters ({len(name)} given)")
    if all_visible(name) != name:  # a control (tab and newline too) or bidi character: `terminal` escapes them
        raise SavedQueryError("a query's name cannot hold control or bidi characters")
    return name


def save_query(db: str | Path, name: str, sql: str, *, by: str | None = None) -> SavedQuery:
    """Save `sql` under `name` (replacing the query of that name), if it is read-only and within bounds."""
    name = check_name(name)
    if not sql.strip():
        raise SavedQueryError("there is no SQL to save")
    if len(sql) > MAX_SAVED_SQL_CHARS:
        raise SavedQueryError(f"a saved query has at most {MAX_SAVED_SQL_CHARS:,} characters ({len(sql):,} given)")
    check_read_only(sql)
    query = SavedQuery(name, sql, datetime.now(timezone.utc), by)
    values = [query.name, query.sql, query.saved_at, query.saved_by]
    with TraceWriter(db).connect() as con:
        if is_team_store(db):  # no key, so no INSERT OR REPLACE: the old one deleted in the same keyed transaction
            keyed_write(con, [("DELETE FROM saved_queries WHERE name = ?", [query.name]),
                              ("INSERT INTO saved_queries VALUES (?, ?, ?, ?)", values)])
        else:
            con.execute("INSERT OR REPLACE INTO saved_queries VALUES (?, ?, ?, ?)", values)
    return query


def saved_queries(db: str | Path) -> list[SavedQuery]:
    """Every saved query, by name; none when there is no database yet, or it predates saved queries."""
    reader = TraceReader(db)
    if not store_exists(reader.path):
        return []
    got = reader.rows_with(lambda schema: "SELECT name, sql, saved_at, saved_by FROM saved_queries ORDER BY lower(name), "
                           "name" if schema.has("saved_queries") else None)  # checked and read on one connection
    return [SavedQuery(*row) for row in got[1]] if got else []


def delete_query(db: str | Path, name: str) -> None:
    """Forget the saved query `name`; one that is not there is a `SavedQueryError`."""
    with TraceWriter(db).connect() as con:
        # the count DuckDB reports, not `RETURNING`: DuckLake (a team store) has no RETURNING on a delete or update
        if not con.execute("DELETE FROM saved_queries WHERE name = ?", [name]).fetchone()[0]:
            raise SavedQueryError(f"no saved query is named {name!r}")
