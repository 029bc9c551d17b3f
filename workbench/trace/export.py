"""Export every trace table as a Parquet dataset, Hive-partitioned by run date.

`DIR/<table>/run_date=YYYY-MM-DD/*.parquet`: DuckDB (`read_parquet('DIR/turns/**/*.parquet',
hive_partitioning = true)`), pandas/pyarrow (`pd.read_parquet('DIR/turns')`) and Spark read it as is.
A table whose rows belong to no one run (`passages`, shared by every turn that showed the passage) is one
unpartitioned file, `DIR/<table>/<table>.parquet`.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import TraceStoreError
from .connect import DEFAULT_TIMEOUT_S, connection
from .reader import TraceReader

_RUN_DATE = "strftime(r.created_at AT TIME ZONE 'UTC', '%Y-%m-%d') AS run_date"


def tables(con) -> list[str]:
    """Every table of the trace schema but `migrations`, in creation order: tables added by later
    migrations (`model_calls`, verification's `ablations`, …) are exported without a change here."""
    return [n for (n,) in con.execute("SELECT table_name FROM duckdb_tables() WHERE NOT internal "
                                      "AND table_name <> 'migrations' ORDER BY table_oid").fetchall()]


def _select(con, table: str) -> tuple[str, bool]:
    """The table's rows with the date of their run (tables key rows by `run_id` or `turn_id`), and whether
    it is partitioned; a table with neither (shared rows) is exported as it is."""
    if table == "runs":
        return f"SELECT r.*, {_RUN_DATE} FROM runs r", True
    columns = {c for (c,) in con.execute("SELECT column_name FROM duckdb_columns() WHERE table_name = ?",
                                          [table]).fetchall()}
    if "run_id" in columns:
        return f"SELECT x.*, {_RUN_DATE} FROM {table} x JOIN runs r USING (run_id)", True
    if "turn_id" in columns:
        return (f"SELECT x.*, {_RUN_DATE} FROM {table} x JOIN turns t USING (turn_id) "
                "JOIN runs r ON r.run_id = t.run_id"), True
    return f"SELECT * FROM {table}", False


def export_parquet(db: str | Path, out_dir: str | Path, *, timeout: float = DEFAULT_TIMEOUT_S) -> dict[str, int]:
    """Write one Parquet dataset per table under `out_dir` (each replaced if present); return row counts."""
    TraceReader(db, timeout=timeout).ensure_schema()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    counts: dict[str, int] = {}
    with connection(db, read_only=True, timeout=timeout) as con:
        for table in tables(con):
            select, partitioned = _select(con, table)
            n = con.execute(f"SELECT count(*) FROM ({select})").fetchone()[0]
            counts[table] = n
            if n == 0:
                continue
            if partitioned:
                target = str(out / table).replace("'", "''")
                options = "FORMAT parquet, PARTITION_BY (run_date), OVERWRITE true"
            else:
                (out / table).mkdir(exist_ok=True)
                target = str(out / table / f"{table}.parquet").replace("'", "''")
                options = "FORMAT parquet"
            try:
                con.execute(f"COPY ({select}) TO '{target}' ({options})")
            except Exception as exc:
                raise TraceStoreError(f"could not export {table} to {target}: {exc}") from None
    return counts
