"""Export every trace table as a Parquet dataset, Hive-partitioned by run date.

`DIR/<table>/run_date=YYYY-MM-DD/*.parquet`: DuckDB (`read_parquet('DIR/turns/**/*.parquet',
hive_partitioning = true)`), pandas/pyarrow (`pd.read_parquet('DIR/turns')`) and Spark read it as is.
A table whose rows belong to no one run (`passages`, shared by every turn that showed the passage) is one
unpartitioned file, `DIR/<table>/<table>.parquet`.
"""

from __future__ import annotations

from pathlib import Path

import duckdb

from ..errors import TraceStoreError
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


def export_parquet(db: str | Path, out_dir: str | Path, *, timeout: float | None = None) -> dict[str, int]:
    """Write one Parquet dataset per table under `out_dir` (each replaced if present); return row counts.

    Reads the database read-only (never migrates it); a damaged database, an output path that is a
    file or cannot be created are `TraceStoreError`s naming the problem."""
    out = Path(out_dir)
    counts: dict[str, int] = {}
    with TraceReader(db, timeout=timeout).connect() as con:  # a database that is no trace database: no folder
        if out.exists() and not out.is_dir():
            raise TraceStoreError(f"cannot export to {out}: it is a file; give a folder (it is created if missing)")
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise TraceStoreError(f"cannot create the export folder {out}: {exc.strerror or exc}") from None
        try:
            names = tables(con)
        except duckdb.Error as exc:
            raise TraceStoreError(f"could not list the tables of {db}: {exc}") from None
        for table in names:
            target = str(out / table).replace("'", "''")
            try:
                select, partitioned = _select(con, table)
                n = con.execute(f"SELECT count(*) FROM ({select})").fetchone()[0]
                counts[table] = n
                if n == 0:
                    continue
                if partitioned:
                    options = "FORMAT parquet, PARTITION_BY (run_date), OVERWRITE true"
                else:
                    (out / table).mkdir(exist_ok=True)
                    target = str(out / table / f"{table}.parquet").replace("'", "''")
                    options = "FORMAT parquet"
                con.execute(f"COPY ({select}) TO '{target}' ({options})")
            except (duckdb.Error, OSError) as exc:
                raise TraceStoreError(f"could not export {table} to {target}: {exc}") from None
    return counts
