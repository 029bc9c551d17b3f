"""`store import FOLDER`: a trace database exported by another DuckDB version, into a new file (docs/traces.md)."""

from __future__ import annotations

import argparse

from ._options import add_db_option, db_path


def register(sub) -> None:
    p = sub.add_parser("store", help="Look after the trace store: import an export from another DuckDB version.")
    store = p.add_subparsers(dest="store_command", metavar="SUBCOMMAND", required=True)
    imp = store.add_parser("import", help="load a trace database exported with `EXPORT DATABASE 'FOLDER' (FORMAT "
                                          "parquet)` (e.g. by DuckDB 2.x) into a new trace file (--db)")
    imp.add_argument("folder", metavar="FOLDER", help="the folder EXPORT DATABASE wrote")
    add_db_option(imp)
    imp.set_defaults(func=run_import)


def run_import(args: argparse.Namespace) -> int:
    from ..trace.imports import import_export

    counts = import_export(args.folder, db_path(args))
    print(f"imported {sum(counts.values())} rows in {len(counts)} tables into {db_path(args)}")
    return 0
