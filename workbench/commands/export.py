"""`export`: the trace tables as Parquet datasets, Hive-partitioned by run date."""

from __future__ import annotations

import argparse

from ..errors import WorkbenchError
from ._options import add_db_option, db_path


def register(sub) -> None:
    p = sub.add_parser("export", help="Export every trace table to Parquet (one dataset per table, partitioned by run date).")
    p.add_argument("--parquet", metavar="DIR", required=True, help="output folder: DIR/<table>/run_date=YYYY-MM-DD/")
    add_db_option(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..trace.export import export_parquet

    if not args.parquet.strip():
        raise WorkbenchError("--parquet needs a folder")
    counts = export_parquet(db_path(args), args.parquet)
    for table, n in counts.items():
        print(f"{table}: {n} rows" + ("" if n else " (nothing written)"))
    print(f"wrote {args.parquet}")
    return 0
