"""`provenance`: a DESIGN.md §4 turn record in, the DESIGN.md §2 payload out."""

from __future__ import annotations

import argparse
import json
import sys

from ..errors import TurnRecordError
from ..provenance import build_payload
from ..types import turn_record_from_dict


def register(sub) -> None:
    p = sub.add_parser("provenance", help="Compute the sources payload of one turn record (FILE or - for stdin).")
    p.add_argument("file", help="turn record JSON file, or - for stdin")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        raw = sys.stdin.read() if args.file == "-" else open(args.file, encoding="utf-8").read()
    except OSError as exc:
        raise TurnRecordError(f"{args.file}: cannot read: {exc.strerror}") from None
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise TurnRecordError(f"{args.file}: invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}") from None
    if not isinstance(data, dict):
        raise TurnRecordError(f"{args.file}: a turn record must be a JSON object")
    print(json.dumps(build_payload(turn_record_from_dict(data)), ensure_ascii=False, indent=2))
    return 0
