"""`gaps`: the doc-gap queue — substantive questions whose turn consulted nothing."""

from __future__ import annotations

import argparse

from ..corpus import GAP_KINDS
from ._options import add_db_option, db_path
from ._table import add_format_options, emit


def register(sub) -> None:
    p = sub.add_parser("gaps", help="Show the doc-gap queue: substantive questions the knowledge base could not answer.",
                       description="Substantive questions whose ok turns consulted nothing and that no ok turn on the "
                                   "same corpus consulted a document for (view doc_gaps, docs/traces.md).")
    p.add_argument("--run", action="append", default=[], metavar="RUN_ID", help="only these runs (repeatable)")
    p.add_argument("--provider", action="append", default=[], metavar="NAME",
                   help="only turns of these providers (repeatable)")
    p.add_argument("--corpus-id", action="append", default=[], metavar="ID",
                   help="only questions asked of these corpora (`runs.corpus_id`, repeatable)")
    p.add_argument("--kind", action="append", default=[], choices=GAP_KINDS,
                   help="only gaps of these kinds (repeatable): retrieved_unused (a relevant document was retrieved "
                        "and not used), not_found (nothing relevant retrieved: an article to write), off_topic "
                        "(not this knowledge base's subject); docs/traces.md, \"Doc gaps\"")
    add_db_option(p)
    add_format_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..trace import TraceReader

    columns, rows = TraceReader(db_path(args)).gaps(args.run, args.provider, args.corpus_id, args.kind)
    emit(columns, rows, args.fmt)
    return 0
