"""Export every trace table and view as a Parquet dataset, Hive-partitioned by run date; read them back.

`DIR/<table>/run_date=YYYY-MM-DD/*.parquet`: DuckDB (`read_parquet('DIR/turns/**/*.parquet',
hive_partitioning = true)`), pandas/pyarrow (`pd.read_parquet('DIR/turns')`) and Spark read it as is.
A table or view whose rows belong to no one run (`passages`, shared by every turn that showed the passage;
`doc_usage`, summed over runs) is one unpartitioned file, `DIR/<name>/<name>.parquet`, and so is an empty
one (its columns kept, no rows). The views (`turn_sets`, `conversations`, `doc_gaps`, the scoring views …)
are exported as the rows they give at export time, so `open_export` answers the same SQL as the store.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb

from ..errors import TraceStoreError
from .connect import duckdb_connect, sql_string
from .reader import TraceReader

_RUN_DATE = "strftime(r.created_at AT TIME ZONE 'UTC', '%Y-%m-%d') AS run_date"


def tables(con) -> list[str]:
    """Every table of the trace schema but `migrations`, in creation order: tables added by later
    migrations (`model_calls`, verification's `ablations`, …) are exported without a change here."""
    return [n for (n,) in con.execute("SELECT table_name FROM duckdb_tables() WHERE NOT internal "
                                      "AND table_name <> 'migrations' ORDER BY table_oid").fetchall()]


def views(con) -> list[str]:
    """Every view of the trace schema, in creation order (a view a later migration adds is exported too)."""
    return [n for (n,) in con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal "
                                      "AND schema_name = 'main' ORDER BY view_oid").fetchall()]


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
    """Write one Parquet dataset per table and view under `out_dir` (each replaced if present); return row counts.

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
            names = tables(con) + views(con)
        except duckdb.Error as exc:
            raise TraceStoreError(f"could not list the tables of {db}: {exc}") from None
        for name in names:
            counts[name] = _export_one(con, name, out)
    return counts


def _export_one(con, name: str, out: Path) -> int:
    """Write one table or view; an empty one (or one of no run) is a single file holding its columns."""
    target = str(out / name)
    try:
        select, partitioned = _select(con, name)
        n = con.execute(f"SELECT count(*) FROM ({select})").fetchone()[0]
        if partitioned and n:
            options = "FORMAT parquet, PARTITION_BY (run_date), OVERWRITE true"
        else:
            if (out / name).is_dir():
                shutil.rmtree(out / name)
            (out / name).mkdir()
            target = str(out / name / f"{name}.parquet")
            options = "FORMAT parquet"
        con.execute(f"COPY ({select}) TO {sql_string(target)} ({options})")
    except (duckdb.Error, OSError) as exc:
        raise TraceStoreError(f"could not export {name} to {target}: {exc}") from None
    return n


def open_export(out_dir: str | Path):
    """An in-memory DuckDB connection with one view per dataset of an export, named as in the trace store and
    with the store's columns (`run_date`, the partition column, left out): the store's SQL runs on it as is.

    A folder that holds no export is a `TraceStoreError`."""
    out = Path(out_dir)
    folders = sorted(p for p in out.iterdir() if p.is_dir()) if out.is_dir() else []
    if not folders:
        raise TraceStoreError(f"{out} holds no Parquet export of a trace database")
    con = duckdb_connect()
    for folder in folders:
        source = f"read_parquet({sql_string(f'{folder}/**/*.parquet')}, hive_partitioning = true)"
        try:
            columns = [c for (c, *_) in con.execute(f"DESCRIBE SELECT * FROM {source}").fetchall()]
            keep = "* EXCLUDE (run_date)" if "run_date" in columns else "*"
            con.execute(f'CREATE VIEW "{folder.name}" AS SELECT {keep} FROM {source}')
        except duckdb.Error as exc:
            raise TraceStoreError(f"could not read the exported {folder.name} in {folder}: {exc}") from None
    return con
