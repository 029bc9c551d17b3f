"""Print query results as an aligned text table, CSV or JSON lines (shared by sql, gaps, eval)."""

from __future__ import annotations

import csv
import json
import sys
from datetime import date, datetime
from typing import Any, TextIO

from ..terminal import neutralize
from ..text import spreadsheet_cell

MAX_CELL = 60


def _cell(v: Any) -> str:
    """A table cell for people: one line, control characters made visible (CSV and JSON keep them)."""
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, datetime):
        return v.strftime("%Y-%m-%d %H:%M:%S")
    s = neutralize(str(v).replace("\n", " "))
    return s if len(s) <= MAX_CELL else s[: MAX_CELL - 1] + "…"


def _jsonable(v: Any) -> Any:
    if isinstance(v, (datetime, date)):
        return v.isoformat()
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    return str(v)


def print_table(columns: list[str], rows: list[tuple], out: TextIO | None = None) -> None:
    out = out or sys.stdout
    cells = [[_cell(v) for v in r] for r in rows]
    columns = [_cell(c) for c in columns]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
    print("  ".join(c.ljust(w) for c, w in zip(columns, widths)).rstrip(), file=out)
    print("  ".join("-" * w for w in widths), file=out)
    for r in cells:
        print("  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip(), file=out)
    print(f"({len(rows)} row{'s' if len(rows) != 1 else ''})", file=out)


def print_csv(columns: list[str], rows: list[tuple], out: TextIO | None = None) -> None:
    """CSV for spreadsheets: a cell that would start a formula is written as text (`text.spreadsheet_cell`)."""
    w = csv.writer(out or sys.stdout)
    w.writerow([spreadsheet_cell(c) for c in columns])
    for r in rows:
        w.writerow([spreadsheet_cell("" if v is None else (v.isoformat() if isinstance(v, (datetime, date)) else v))
                    for v in r])


def print_json(columns: list[str], rows: list[tuple], out: TextIO | None = None) -> None:
    out = out or sys.stdout
    for r in rows:
        print(json.dumps({c: _jsonable(v) for c, v in zip(columns, r)}, ensure_ascii=False), file=out)


def emit(columns: list[str], rows: list[tuple], fmt: str = "table", out: TextIO | None = None) -> None:
    {"table": print_table, "csv": print_csv, "json": print_json}[fmt](columns, rows, out)


def add_format_options(p, *, json_ok: bool = True) -> None:
    g = p.add_mutually_exclusive_group()
    if json_ok:
        g.add_argument("--json", dest="fmt", action="store_const", const="json", help="print JSON, one object per line")
    g.add_argument("--csv", dest="fmt", action="store_const", const="csv", help="print CSV with a header row")
    p.set_defaults(fmt="table")
