"""What `collect` and `ingest` share: the trace writer, the corpus resolver and the run's assembler."""

from __future__ import annotations

import argparse
import sys
from datetime import datetime, timezone

from ..corpus import load_corpus
from ..terminal import neutralize
from ._options import db_path, warn_skipped


def add_audit_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--db", metavar="FILE.duckdb",
                   help="trace database (default: $WORKBENCH_DB, else <WORKBENCH_HOME>/traces.duckdb)")
    p.add_argument("--corpus", help="the audited app's knowledge base (folder or .jsonl): urls and ids resolve to its "
                                    "documents and `full` is measured against their text; without it the "
                                    "conservative rule applies (docs/audit.md)")
    p.add_argument("--name", help="name of the run these turns form (default: the command and the time)")


def assembler(args: argparse.Namespace, command: str):
    """The run's assembler (a function-level import: the audit loads DuckDB and opentelemetry-proto)."""
    from ..audit.collector import Assembler
    from ..audit.units import Resolver
    from ..trace.writer import TraceWriter

    corpus = None
    if args.corpus:
        corpus = load_corpus(args.corpus)
        warn_skipped(corpus)
    name = args.name or f"{command}-{datetime.now(timezone.utc).strftime('%Y%m%dT%H%M%SZ')}"
    return Assembler(TraceWriter(db_path(args)), Resolver(corpus), name=name)


def report(a, out=None) -> None:
    """What the run received and wrote, on `out` (default: the standard error of the moment, not of import time)."""
    stored = f", {a.skipped} already stored" if a.skipped else ""
    print(neutralize(f"run {a.name}: {a.spans} spans received, {a.turns} turns written{stored} (run id {a.run_id})"),
          file=out or sys.stderr)
