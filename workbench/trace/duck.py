"""The one place the project opens a DuckDB database, and how it writes a SQL string literal."""

from __future__ import annotations

from pathlib import Path

import duckdb

#: No connection the project opens downloads or loads an extension (no network at run time): a query
#: naming an `https://` file fails with a message instead of fetching `httpfs` from the internet, and a
#: SQLite file given as a trace database is refused instead of fetching `sqlite_scanner`. Every connection
#: goes through `duckdb_connect`, which sets these whatever else it is given.
NO_DOWNLOADS = {"autoinstall_known_extensions": False, "autoload_known_extensions": False}
#: The app's trace explorer also reads nothing but the trace database (no `read_text('/etc/…')`).
TRACE_FILE_ONLY = {**NO_DOWNLOADS, "enable_external_access": False}


def duckdb_connect(path: str | Path = ":memory:", *, read_only: bool = False, config: dict | None = None):
    """The one place the project opens a DuckDB database (trace files, the writer's in-memory host, the
    schema docs, the benchmarks): `NO_DOWNLOADS` always, on top of `config`."""
    return duckdb.connect(str(path), read_only=read_only, config={**(config or {}), **NO_DOWNLOADS})


def sql_string(value: str | Path) -> str:
    """`value` as a SQL string literal, for the statements DuckDB cannot take a parameter in (ATTACH, COPY TO,
    read_parquet's glob, COMMENT ON): single quotes doubled inside single quotes."""
    return "'" + str(value).replace("'", "''") + "'"
