"""`sql`: run a read-only SQL query on the trace database."""

from __future__ import annotations

import argparse
import sys

from ._options import add_db_option, db_path, positive_seconds
from ._table import add_format_options, emit


def register(sub) -> None:
    p = sub.add_parser("sql", help="Run a read-only SQL query on the trace database (writes are refused).",
                       description="Tables and views: docs/traces.md. Only SELECT (and SHOW, DESCRIBE, SUMMARIZE, "
                                   "EXPLAIN SELECT) run; DROP, INSERT, ATTACH, COPY and other writes are refused. "
                                   "This is the operator's local analyst tool: a query can read any file your user "
                                   "can (read_csv('…'), read_text('…')), like the DuckDB shell. The app's Trace "
                                   "explorer, which visitors use, refuses every file but the trace database "
                                   "(docs/security.md). A query runs in its own process with bounded memory and "
                                   "returns a bounded number of rows (a note on stderr says when rows were cut); use "
                                   "`workbench export` for whole tables.")
    p.add_argument("query", help='the query, e.g. "SELECT * FROM turn_sets LIMIT 10" (or - for stdin)')
    add_db_option(p)
    add_format_options(p)
    p.add_argument("--timeout", type=positive_seconds, metavar="SECONDS",
                   help="stop the query after this long (default $WORKBENCH_QUERY_TIMEOUT, else 20): a running "
                        "query holds the trace file and writers wait for it")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..trace import TraceReader

    query = sys.stdin.read() if args.query == "-" else args.query
    result = TraceReader(db_path(args), query_timeout=args.timeout).user_query(query)
    emit(result.columns, result.rows, args.fmt)
    if result.cut:
        print(f"note: {result.cut}", file=sys.stderr)
    return 0
