"""`gaps`: the doc-gap queue — substantive questions whose turn consulted nothing."""

from __future__ import annotations

import argparse

from ._options import add_db_option, db_path
from ._table import add_format_options, emit


def register(sub) -> None:
    p = sub.add_parser("gaps", help="Show the doc-gap queue: substantive questions the knowledge base could not answer.")
    add_db_option(p)
    add_format_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..trace import TraceReader

    columns, rows = TraceReader(db_path(args)).gaps()
    emit(columns, rows, args.fmt)
    return 0
