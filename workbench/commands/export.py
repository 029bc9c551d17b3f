"""`export`: the trace tables as Parquet datasets (Hive-partitioned by run date), or the stored turns as
OpenInference spans over OTLP/HTTP (Phoenix, Langfuse, any OTLP collector)."""

from __future__ import annotations

import argparse

from ..errors import WorkbenchError
from ._options import add_db_option, db_path, positive_seconds


def register(sub) -> None:
    p = sub.add_parser("export", help="Export the trace store: every table to Parquet (--parquet DIR), or every turn "
                                      "as OpenInference spans to an OTLP collector (--openinference --endpoint URL).",
                       description="docs/interop.md: what goes where, and how Phoenix, Langfuse, DuckDB, Spark and "
                                   "Trino read it.")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--parquet", metavar="DIR", help="output folder: DIR/<table or view>/run_date=YYYY-MM-DD/")
    what.add_argument("--openinference", action="store_true",
                      help="replay stored turns as OpenInference spans over OTLP/HTTP (needs --endpoint)")
    p.add_argument("--endpoint", metavar="URL",
                   help="OTLP/HTTP traces endpoint, e.g. http://127.0.0.1:6006/v1/traces (Phoenix); a bare "
                        "http://host:port gets /v1/traces")
    p.add_argument("--project", default="workbench",
                   help="project name (resource attribute openinference.project.name; default: workbench)")
    p.add_argument("--run", metavar="RUN_ID", help="only the turns of this run (default: every turn)")
    p.add_argument("--annotate", action="store_true",
                   help="Phoenix only: also log each retrieved document's consulted flag as a document annotation")
    p.add_argument("--timeout", type=positive_seconds, default=10.0, help="seconds per request (default 10)")
    add_db_option(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.openinference:
        return _openinference(args)
    if args.endpoint or args.run or args.annotate:
        raise WorkbenchError("--endpoint, --run and --annotate go with --openinference")
    from ..trace.export import export_parquet

    if not args.parquet.strip():
        raise WorkbenchError("--parquet needs a folder")
    counts = export_parquet(db_path(args), args.parquet)
    for table, n in counts.items():
        print(f"{table}: {n} rows" + ("" if n else " (columns only)"))
    print(f"wrote {args.parquet}")
    return 0


def _openinference(args: argparse.Namespace) -> int:
    from ..trace.openinference import export_turns, traces_endpoint
    from ..trace.spans import stored_turns

    if not args.endpoint:
        raise WorkbenchError("--openinference needs --endpoint URL (e.g. http://127.0.0.1:6006/v1/traces)")
    traces_endpoint(args.endpoint)  # a malformed URL is refused before the database is read
    turns = stored_turns(db_path(args), args.run)
    if args.run and not turns:
        raise WorkbenchError(f"no turns of run {args.run!r} in {db_path(args)}")
    result = export_turns(turns, args.endpoint, project=args.project, timeout=args.timeout, annotate=args.annotate)
    print(f"exported {result.turns} turns ({result.spans} spans) to {result.endpoint}, project {result.project!r}"
          + (f"; {result.annotations} document annotations" if args.annotate else ""))
    return 0
