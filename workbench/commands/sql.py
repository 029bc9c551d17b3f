"""`sql`: run a read-only SQL query on the trace database."""

from __future__ import annotations

import argparse
import sys

from ._options import add_db_option, db_path
from ._table import add_format_options, emit


def register(sub) -> None:
    p = sub.add_parser("sql", help="Run a read-only SQL query on the trace database (writes are refused).",
                       description="Tables and views: docs/traces.md. Only SELECT (and SHOW, DESCRIBE, SUMMARIZE, "
                                   "EXPLAIN SELECT) run; DROP, INSERT, ATTACH, COPY and other writes are refused.")
    p.add_argument("query", help='the query, e.g. "SELECT * FROM turn_sets LIMIT 10" (or - for stdin)')
    add_db_option(p)
    add_format_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..trace import TraceReader

    query = sys.stdin.read() if args.query == "-" else args.query
    columns, rows = TraceReader(db_path(args)).user_query(query)
    emit(columns, rows, args.fmt)
    return 0
