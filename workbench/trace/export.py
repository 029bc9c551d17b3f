"""Export every trace table as a Parquet dataset, Hive-partitioned by run date.

`DIR/<table>/run_date=YYYY-MM-DD/*.parquet`: DuckDB (`read_parquet('DIR/turns/**/*.parquet',
hive_partitioning = true)`), pandas/pyarrow (`pd.read_parquet('DIR/turns')`) and Spark read it as is.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import TraceStoreError
from .connect import DEFAULT_TIMEOUT_S, connection
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


def export_parquet(db: str | Path, out_dir: str | Path, *, timeout: float = DEFAULT_TIMEOUT_S) -> dict[str, int]:
    """Write one Parquet dataset per table under `out_dir` (each replaced if present); return row counts."""
    TraceReader(db, timeout=timeout).check()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    counts: dict[str, int] = {}
    with connection(db, read_only=True, timeout=timeout) as con:
        for table in TABLES:
            n = con.execute(f"SELECT count(*) FROM ({_select(table)})").fetchone()[0]
            counts[table] = n
            if n == 0:
                continue
            target = str(out / table).replace("'", "''")
            try:
                con.execute(f"COPY ({_select(table)}) TO '{target}' "
                            "(FORMAT parquet, PARTITION_BY (run_date), OVERWRITE true)")
            except Exception as exc:
                raise TraceStoreError(f"could not export {table} to {target}: {exc}") from None
    return counts
