"""JSON Lines input shared by corpora, question files and judge files: one object a line, and every
problem reported with the file and line it is on."""

from __future__ import annotations

import json
from typing import Callable, Iterable, Iterator

from .errors import CorpusError, WorkbenchError

#: error(message, line) -> the exception to raise
ErrorFactory = Callable[[str, int], WorkbenchError]


def json_objects(lines: Iterable[str], path: str, error: ErrorFactory | None = None) -> Iterator[tuple[int, dict]]:
    """(line number, object) for every non-blank line; bad JSON or a non-object raises `error`."""
    make = error or (lambda message, line: CorpusError(message, path, line))
    for lineno, line in enumerate(lines, start=1):
        if lineno == 1:
            line = line.lstrip("\ufeff")  # a byte-order mark from Windows editors is not content
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise make(f"invalid JSON: {exc.msg} (column {exc.colno})", lineno) from None
        except ValueError as exc:  # valid JSON Python will not convert, e.g. an integer of 5,000 digits
            raise make(f"invalid JSON: {value_error_text(exc)}", lineno) from None
        except RecursionError:
            raise make("invalid JSON: nested too deeply", lineno) from None
        if not isinstance(obj, dict):
            raise make("each line must be a JSON object", lineno)
        if "\\u" in line and _has_lone_surrogate(obj):
            raise make("invalid JSON text: an unpaired surrogate escape such as \\ud800 "
                       "(write the character itself)", lineno)
        yield lineno, obj


def value_error_text(exc: ValueError) -> str:
    """What `json.loads` refused, in words: Python converts integers of at most 4,300 digits."""
    if "digits" in str(exc):
        return "a number with more than 4,300 digits (write it as a string)"
    return str(exc)


def _has_lone_surrogate(obj: object) -> bool:
    """True when a string in `obj` holds a \\ud800-style escape that is no character (not UTF-8 text)."""
    try:
        json.dumps(obj, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False
