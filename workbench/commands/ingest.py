"""`ingest FILE` / `ingest --phoenix URL --project NAME`: audit the turns of a file of OTLP JSON lines (one
ExportTraceServiceRequest a line), or of the spans an Arize Phoenix project holds."""

from __future__ import annotations

import argparse
import sys

from ..errors import WorkbenchError
from ._audit import add_audit_options, assembler, finish_run


def register(sub) -> None:
    p = sub.add_parser("ingest", help="Audit the turns in a file of OTLP JSON lines, or in a Phoenix project "
                                      "(docs/audit.md).")
    p.add_argument("file", nargs="*", metavar="FILE",
                   help="OTLP JSON lines files (one ExportTraceServiceRequest a line; lines of ExportLogsServiceRequest "
                        "carry GenAI log events, joined to their spans: a traces file and a logs file are read together)")
    p.add_argument("--phoenix", metavar="URL", help="read the spans of a Phoenix project instead: the server's base "
                                                    "URL, e.g. http://127.0.0.1:6006 (PHOENIX_API_KEY is sent when set)")
    p.add_argument("--project", metavar="NAME", help="the Phoenix project whose spans to audit (with --phoenix)")
    add_audit_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..audit.ingest import ingest_spans, rooted

    if bool(args.file) == bool(args.phoenix):
        raise WorkbenchError("give FILEs of OTLP JSON lines or --phoenix URL --project NAME (one of the two)")
    if bool(args.phoenix) != bool(args.project):
        raise WorkbenchError("--phoenix URL and --project NAME go together")
    waiting, events = 0, []
    if args.phoenix:  # all read before anything is written
        spans, waiting = rooted(_phoenix_spans(args))
    else:
        spans, events = [], []
        for path in args.file:
            more, more_events = _file_spans(path)
            spans += more
            events += more_events
    a = assembler(args, "ingest")
    ingest_spans(a, spans, events)
    if waiting:
        print(f"{waiting} traces have no root span in Phoenix yet (still arriving, or their root was never sent): "
              "left for a later ingest", file=sys.stderr)
    return finish_run(args, a)


def _file_spans(path: str):
    from ..audit.ingest import read_requests

    try:
        with open(path, encoding="utf-8") as fh:
            return read_requests(fh, path)
    except OSError as exc:
        raise WorkbenchError(f"{path}: cannot read: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise WorkbenchError(f"{path}: not valid UTF-8 ({exc.reason} at byte {exc.start})") from None


def _phoenix_spans(args: argparse.Namespace):
    from ..audit.phoenix import project_spans

    return project_spans(args.phoenix, args.project)
