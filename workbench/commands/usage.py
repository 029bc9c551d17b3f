"""`usage`: document usage accounting — per document and corpus, the turns that retrieved, consulted, cited
(after reading) and only listed it."""

from __future__ import annotations

import argparse

from ..config import DEMO_CORPUS
from ..corpus import load_corpus
from ._options import add_corpus_option, add_db_option, db_path, positive_int
from ._table import add_format_options, emit


def register(sub) -> None:
    p = sub.add_parser("usage", help="Document usage: turns in which each document was retrieved, consulted, cited or only listed.",
                       description="Counts are turns, over every run or the --run ones (view doc_usage, "
                                   "docs/traces.md). Consulted is the honest basis for usage accounting.")
    show = p.add_mutually_exclusive_group()
    show.add_argument("--totals", action="store_true",
                      help="totals per category (folder) of the corpus (--corpus; default the demo corpus), over turns on it")
    show.add_argument("--unconsulted", action="store_true",
                      help="documents retrieved in at least --min-turns turns but never consulted")
    show.add_argument("--never-retrieved", action="store_true",
                      help="documents of the corpus (--corpus; default the demo corpus) no turn retrieved")
    p.add_argument("--run", action="append", default=[], metavar="RUN_ID", help="only these runs (repeatable)")
    p.add_argument("--min-turns", type=positive_int, default=2, metavar="N",
                   help="with --unconsulted: retrieved in at least N turns (default 2)")
    add_corpus_option(p)
    add_db_option(p)
    add_format_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..trace import usage

    db = db_path(args)
    if args.totals or args.never_retrieved:
        corpus = load_corpus(args.corpus or DEMO_CORPUS)
        result = (usage.usage_totals(db, args.run, corpus) if args.totals
                  else usage.never_retrieved(db, corpus, args.run))
    elif args.unconsulted:
        result = usage.retrieved_not_consulted(db, args.run, args.min_turns)
    else:
        result = usage.doc_usage(db, args.run)
    emit(*result, args.fmt)
    return 0
