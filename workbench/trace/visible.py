"""The trace database as one viewer of the app may see it: their own turns and the operator's, nobody else's.

The app without sign-in keeps each browser's conversations and uploads its own (docs/security.md, "Who sees
what"), and the Trace explorer's SQL must not read them either: an uploaded document's text reaches
`passages`, `turns.answer`, `claims`, `tool_calls` and `model_calls`. A typed query can name any table, any
catalog and any table function, so no filter written into the query would hold. Instead, when the file holds
turns of other owners (`turns.owner`, m018), the query runs on a copy that holds nothing else:
`visible_copy` builds an in-memory database with the current schema (every migration: the same tables,
views and macros), copies into it the rows this viewer may see, detaches the file and turns file access
off. What is not copied is not there to be read. A file whose turns are all the viewer's own, or nobody's,
is queried as it is (`others_in`). A team store is always read through the copy: asking whether it holds others'
turns would cost an attachment of its own (extensions loaded, the catalog read, the macros created: ~0.5 s of a
viewer's query), so the store is attached once, by the copy, and checked there (`check`).

What one viewer sees: turns whose `owner` is theirs or NULL (the operator's: CLI, `eval`, notebooks); every
row of a per-turn table (`turn_id`) of those turns; the passages those turns retrieved; the runs those turns
ran in, and runs without turns (eval runs being set up); every row of the tables that are no one's
(`datasets`, `expectations`, `migrations`, `saved_queries`), and the `experiments` of the runs copied.
"""

from __future__ import annotations

from pathlib import Path

from .connect import _retrying, duckdb_connect, sql_string
from .history import OWNERS
from .lake import attach, is_team_store
from .migrate import migrate

#: Tables copied whole: nobody's (questions files and their expectations) or the schema's own record.
_WHOLE = frozenset({"datasets", "expectations", "migrations", "saved_queries"})


def others_in(con, owner: str) -> bool:
    """Whether the trace database open on `con` (read-only) holds turns that are neither `owner`'s nor nobody's."""
    # literals: a bound parameter makes DuckDB 1.5 import pandas, a second of a typed query's process (writer._literal)
    if not con.execute(f"SELECT count(*) FROM migrations WHERE name = {sql_string(OWNERS)}").fetchone()[0]:
        return False  # before m018 no turn has an owner
    return bool(con.execute("SELECT EXISTS (SELECT 1 FROM turns WHERE owner IS NOT NULL AND owner <> "
                            f"{sql_string(owner)})").fetchone()[0])


def _filter(table: str, columns: set[str]) -> str:
    """The WHERE clause selecting the rows of `table` one viewer (`$owner`, replaced by its literal) may see."""
    if table == "turns":  # before m018 (no `owner` column) every turn is nobody's
        return "owner IS NULL OR owner = $owner" if "owner" in columns else "true"
    if "turn_id" in columns:
        return "turn_id IN (SELECT turn_id FROM main.turns)"
    if table == "passages":
        return "passage_id IN (SELECT passage_id FROM main.retrieved_items WHERE passage_id IS NOT NULL)"
    if table == "runs":
        return "run_id IN (SELECT run_id FROM main.turns) OR run_id NOT IN (SELECT run_id FROM src.main.turns)"
    if "run_id" in columns:
        return "run_id IN (SELECT run_id FROM main.runs)"
    return "true" if table in _WHOLE else "false"


def _order(table: str) -> int:
    """Copy order: turns first (the rest select by them), then per-turn tables, passages, runs, the rest."""
    return {"turns": 0, "passages": 2, "runs": 3, "experiments": 4}.get(table, 1)


def visible_copy(path: str | Path, owner: str, *, timeout: float, config: dict, check=None):
    """An in-memory DuckDB connection holding what `owner` may see of the trace file at `path` (module doc),
    with file access off; `config` bounds it like any typed query (memory, spilling, threads). `check(con)`, when
    given, is run on the attached store (its current database) before anything is copied from it."""
    con = duckdb_connect(":memory:", config={k: v for k, v in config.items() if k != "enable_external_access"})
    try:
        migrate(con, path=":memory:")
        if is_team_store(path):
            attach(con, path, "src", read_only=True)
        else:
            _retrying(str(path), read_only=True, timeout=timeout,
                      attempt=lambda: con.execute(f"ATTACH {sql_string(path)} AS src (READ_ONLY)"))
        try:
            if check is not None:
                con.execute("USE src")
                try:
                    check(con)
                finally:
                    con.execute("USE memory")
            _copy_rows(con, owner)
        finally:
            con.execute("DETACH src")
        con.execute("SET enable_external_access = false")
        con.execute("SET lock_configuration = true")
    except BaseException:
        con.close()
        raise
    return con


def _copy_rows(con, owner: str) -> None:
    """Copy what `owner` may see from `src` into the in-memory database: in one transaction, so every table is read
    from one snapshot, and a team store's catalog is read once rather than once per statement (DuckLake looks the
    latest snapshot up for each transaction); a table whose filter selects nothing is not read at all."""
    con.execute("BEGIN TRANSACTION")
    try:
        columns: dict[tuple[str, str], list[str]] = {}
        for database, table, column in con.execute(
                "SELECT database_name, table_name, column_name FROM duckdb_columns() WHERE schema_name = 'main' "
                "AND database_name IN ('src', 'memory') AND NOT internal ORDER BY database_name, table_name, "
                "column_index").fetchall():
            columns.setdefault((database, table), []).append(column)
        # `information_schema` rather than `duckdb_tables()`, whose size estimates read every table's statistics
        # from a team store's catalog (measured: 72 catalog queries against 31)
        src = {t for (t,) in con.execute("SELECT table_name FROM information_schema.tables WHERE table_catalog = "
                                         "'src' AND table_schema = 'main' AND table_type = 'BASE TABLE'").fetchall()}
        mine = {t for (t,) in con.execute("SELECT table_name FROM duckdb_tables() WHERE database_name = 'memory'")
                .fetchall()}
        both = (src & mine) - {"migrations"}
        for table in sorted(sorted(both), key=_order):
            src_cols = set(columns[("src", table)])
            where = _filter(table, src_cols)
            if where == "false":
                continue
            cols = ", ".join(f'"{c}"' for c in columns[("memory", table)] if c in src_cols)
            con.execute(f'INSERT INTO main."{table}" ({cols}) SELECT {cols} FROM src.main."{table}" '
                        f'WHERE {where.replace("$owner", sql_string(owner))}')
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
