"""`provenance`: a docs/design.md §4 turn record in, the docs/design.md §2 payload out."""

from __future__ import annotations

import argparse
import json
import sys

from ..errors import TurnRecordError
from ..jsonl import value_error_text
from ..payload import validate_json
from ..provenance import sources_payload
from ..types import turn_record_from_dict


def register(sub) -> None:
    p = sub.add_parser("provenance", help="Compute the sources payload of one turn record (FILE or - for stdin).")
    p.add_argument("file", help="turn record JSON file, or - for stdin")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        if args.file == "-":
            stdin = getattr(sys.stdin, "buffer", None)  # in-process callers may swap in a text stream
            blob = stdin.read() if stdin is not None else sys.stdin.read().encode("utf-8", "surrogateescape")
        else:
            with open(args.file, "rb") as fh:
                blob = fh.read()
        raw = blob.decode("utf-8-sig")  # a byte-order mark is not content
    except OSError as exc:
        raise TurnRecordError(f"{args.file}: cannot read: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise TurnRecordError(f"{args.file}: not valid UTF-8 ({exc.reason} at byte {exc.start})") from None
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise TurnRecordError(f"{args.file}: invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}") from None
    except RecursionError:
        raise TurnRecordError(f"{args.file}: invalid JSON: nested too deeply") from None
    except ValueError as exc:
        raise TurnRecordError(f"{args.file}: invalid JSON: {value_error_text(exc)}") from None
    if not isinstance(data, dict):
        raise TurnRecordError(f"{args.file}: a turn record must be a JSON object")
    payload = validate_json(sources_payload(turn_record_from_dict(data)).to_json())  # the contract, checked at the edge
    out = json.dumps(payload, ensure_ascii=False, indent=2)
    try:
        out.encode("utf-8")
    except UnicodeEncodeError as exc:  # a lone surrogate escape such as "\\ud800" is not text
        raise TurnRecordError(f"{args.file}: contains an unpaired surrogate escape "
                              f"({out[exc.start]!r}); write the character itself") from None
    print(out)
    return 0
