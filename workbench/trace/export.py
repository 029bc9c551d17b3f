"""Export every trace table as a Parquet dataset, Hive-partitioned by run date.

`DIR/<table>/run_date=YYYY-MM-DD/*.parquet`: DuckDB (`read_parquet('DIR/turns/**/*.parquet',
hive_partitioning = true)`), pandas/pyarrow (`pd.read_parquet('DIR/turns')`) and Spark read it as is.
"""

from __future__ import annotations

from pathlib import Path

import duckdb

from ..errors import TraceStoreError
from .connect import connection
from .reader import TraceReader

TABLES = ("runs", "turns", "tool_calls", "retrieved_items", "citations", "sources", "claims")
_RUN_DATE = "strftime(r.created_at AT TIME ZONE 'UTC', '%Y-%m-%d') AS run_date"


def _select(table: str) -> str:
    if table == "runs":
        return f"SELECT r.*, {_RUN_DATE} FROM runs r"
    if table == "turns":
        return f"SELECT x.*, {_RUN_DATE} FROM turns x JOIN runs r USING (run_id)"
    return (f"SELECT x.*, {_RUN_DATE} FROM {table} x JOIN turns t USING (turn_id) "
            "JOIN runs r ON r.run_id = t.run_id")


def export_parquet(db: str | Path, out_dir: str | Path, *, timeout: float | None = None) -> dict[str, int]:
    """Write one Parquet dataset per table under `out_dir` (each replaced if present); return row counts.

    Reads the database read-only (never migrates it); a damaged database, an output path that is a
    file or cannot be created are `TraceStoreError`s naming the problem."""
    reader = TraceReader(db, timeout=timeout)
    reader.check()
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise TraceStoreError(f"cannot export to {out}: it is a file; give a folder (it is created if missing)")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise TraceStoreError(f"cannot create the export folder {out}: {exc.strerror or exc}") from None
    counts: dict[str, int] = {}
    with connection(db, read_only=True, timeout=reader.timeout) as con:
        for table in TABLES:
            target = str(out / table).replace("'", "''")
            try:
                n = con.execute(f"SELECT count(*) FROM ({_select(table)})").fetchone()[0]
                counts[table] = n
                if n:
                    con.execute(f"COPY ({_select(table)}) TO '{target}' "
                                "(FORMAT parquet, PARTITION_BY (run_date), OVERWRITE true)")
            except duckdb.Error as exc:
                raise TraceStoreError(f"could not export {table} to {target}: {exc}") from None
    return counts
