"""Bring a trace database exported by another DuckDB version into a new file of this one (`workbench store import`).

The way back for a file DuckDB 1.5 cannot read (one written by DuckDB 2.x, docs/design.md §13): export it with
the version that wrote it (`EXPORT DATABASE 'folder' (FORMAT parquet)`), then import the folder here. DuckDB's own
`IMPORT DATABASE` is not enough: 2.x exports the views in name order, and 1.5 refuses a view that reads one
created after it (measured: `latest_verifications does not exist`). So the tables are loaded into a new file
migrated to the export's own migrations, then the newer migrations run over them (their backfills included),
exactly as an upgrade of the original file would have.
"""

from __future__ import annotations

from pathlib import Path

import duckdb

from ..errors import TraceStoreError
from .connect import duckdb_connect, sql_string
from .migrate import migrate
from .schema import MIGRATIONS


def _exported(folder: Path, table: str) -> Path | None:
    for ext in ("parquet", "csv"):
        if (folder / f"{table}.{ext}").is_file():
            return folder / f"{table}.{ext}"
    return None


def _read(path: Path) -> str:
    reader = "read_parquet" if path.suffix == ".parquet" else "read_csv"
    return f"{reader}({sql_string(path)})"


def _their_migrations(con, folder: Path) -> list[str]:
    source = _exported(folder, "migrations")
    if source is None:
        raise TraceStoreError(f"{folder} holds no exported trace database (no migrations.parquet or migrations.csv): "
                              "export one with `EXPORT DATABASE 'folder' (FORMAT parquet)`")
    names = [n for (n,) in con.execute(f"SELECT name FROM {_read(source)} ORDER BY name").fetchall()]
    ours = [m.name for m in MIGRATIONS]
    if names != ours[:len(names)]:
        raise TraceStoreError(f"{folder} was exported from a trace database with migrations this workbench does not "
                              f"have ({', '.join(sorted(set(names) - set(ours))) or 'in another order'}); import it "
                              "with the workbench version that wrote it")
    return names


def import_export(folder: str | Path, db: str | Path) -> dict[str, int]:
    """Load the exported trace database in `folder` into the new trace file `db`; return rows per table."""
    folder, db = Path(folder), Path(db)
    if db.exists() and db.stat().st_size:
        raise TraceStoreError(f"{db} already exists; import into a new file (nothing was changed)")
    db.parent.mkdir(parents=True, exist_ok=True)
    con = duckdb_connect(db)
    try:
        theirs = _their_migrations(con, folder)
        migrate(con, tuple(m for m in MIGRATIONS if m.name in theirs), path=str(db))
        con.execute("BEGIN")
        tables = [t for (t,) in con.execute("SELECT table_name FROM duckdb_tables() WHERE NOT internal "
                                            "AND table_name <> 'migrations' ORDER BY 1").fetchall()]
        counts = {}
        for table in tables:
            source = _exported(folder, table)
            if source is not None:
                con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM {_read(source)}")
                counts[table] = con.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
        con.execute("COMMIT")
        migrate(con, path=str(db))
        return counts
    except BaseException as exc:
        con.close()
        for leftover in (db, db.with_name(db.name + ".wal")):
            leftover.unlink(missing_ok=True)
        if isinstance(exc, duckdb.Error):
            raise TraceStoreError(f"could not import {folder} into {db} (nothing was kept): {exc}") from None
        raise
    finally:
        con.close()
