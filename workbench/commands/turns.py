"""`turns --json`: the stored turns' payloads, one per line, audited and native alike."""

from __future__ import annotations

import argparse
import sys

from ..errors import WorkbenchError
from ._options import add_db_option, db_path


def register(sub) -> None:
    p = sub.add_parser("turns", help="Print stored turns' sources payloads (audited and native), one JSON per line.")
    p.add_argument("--run", metavar="NAME", help="only this run (its --name, or its run id)")
    p.add_argument("--conversation", metavar="ID", help="only this conversation (session.id for audited turns)")
    p.add_argument("--json", action="store_true", required=True, help="print JSON, one payload per line")
    add_db_option(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..trace.lake import store_exists
    from ..trace.payloads import stored_payloads

    path = db_path(args)
    if not store_exists(path):
        raise WorkbenchError(f"no trace database at {path}")
    for text in stored_payloads(path, run=args.run, conversation=args.conversation):
        sys.stdout.write(text + "\n")
    return 0
