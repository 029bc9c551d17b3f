"""`ingest FILE`: audit the turns of a file of OTLP JSON lines (one ExportTraceServiceRequest a line)."""

from __future__ import annotations

import argparse

from ..errors import WorkbenchError
from ._audit import add_audit_options, assembler, finish_run


def register(sub) -> None:
    p = sub.add_parser("ingest", help="Audit the turns in a file of OTLP JSON lines (docs/audit.md).")
    p.add_argument("file", help="OTLP JSON lines file (one ExportTraceServiceRequest a line)")
    add_audit_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..audit.ingest import ingest_spans, read_spans

    try:
        with open(args.file, encoding="utf-8") as fh:
            spans = read_spans(fh, args.file)
    except OSError as exc:
        raise WorkbenchError(f"{args.file}: cannot read: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise WorkbenchError(f"{args.file}: not valid UTF-8 ({exc.reason} at byte {exc.start})") from None
    a = assembler(args, "ingest")
    ingest_spans(a, spans)
    return finish_run(args, a)
