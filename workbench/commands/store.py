"""`store import FOLDER` (an export from another DuckDB version, into a new file) and `store maintain` (a team
store's upkeep): docs/traces.md."""

from __future__ import annotations

import argparse

from ..errors import WorkbenchError
from ._options import add_db_option, db_path


def register(sub) -> None:
    p = sub.add_parser("store", help="Look after the trace store: import an export from another DuckDB version, "
                                     "maintain a team store.")
    store = p.add_subparsers(dest="store_command", metavar="SUBCOMMAND", required=True)
    imp = store.add_parser("import", help="load a trace database exported with `EXPORT DATABASE 'FOLDER' (FORMAT "
                                          "parquet)` (e.g. by DuckDB 2.x) into a new trace file (--db)")
    imp.add_argument("folder", metavar="FOLDER", help="the folder EXPORT DATABASE wrote")
    add_db_option(imp)
    imp.set_defaults(func=run_import)
    keep = store.add_parser("maintain", help="a team store's upkeep, safe while writers run: flush rows inlined in "
                                             "the catalog to Parquet, merge small files, expire old snapshots and "
                                             "delete the files only they used (run it daily: docs/traces.md)")
    keep.add_argument("--keep-days", type=int, default=None, metavar="DAYS",
                      help="snapshots (time travel) to keep, in days (default 7)")
    add_db_option(keep)
    keep.set_defaults(func=run_maintain)


def run_import(args: argparse.Namespace) -> int:
    from ..trace.imports import import_export

    counts = import_export(args.folder, db_path(args))
    print(f"imported {sum(counts.values())} rows in {len(counts)} tables into {db_path(args)}")
    return 0


def run_maintain(args: argparse.Namespace) -> int:
    from ..trace.lake import KEEP_SNAPSHOT_DAYS, is_team_store, maintain

    db = db_path(args)
    if not is_team_store(db):
        raise WorkbenchError(f"{db} is a trace file, which needs no upkeep (DuckDB checkpoints it on every write); "
                             "`store maintain` is for a team store (--db ducklake:postgres:…)")
    keep = KEEP_SNAPSHOT_DAYS if args.keep_days is None else args.keep_days
    if keep < 0:
        raise WorkbenchError("--keep-days must be 0 or more")
    done = maintain(db, keep)
    print(", ".join(f"{k.replace('_', ' ')}: {v}" for k, v in done.items()))
    return 0
