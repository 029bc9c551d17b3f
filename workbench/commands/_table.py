"""Print query results as an aligned text table, CSV or JSON lines (shared by sql, gaps, eval)."""

from __future__ import annotations

import csv
import json
import shutil
import sys
import textwrap
from datetime import date, datetime
from typing import Any, TextIO

from ..config import env
from ..terminal import neutralize
from ..text import spreadsheet_cell

MAX_CELL = 60
#: The narrowest a column is squeezed to when a table is fitted to the terminal's width (`fit`).
MIN_FITTED = 8


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


def fitted(widths: list[int], total: int) -> list[int]:
    """Column widths whose sum with the two-space gaps is at most `total` (when it can be), as `rich` fits a table:
    the widest column gives up a character at a time, no column below `MIN_FITTED` (or its own width)."""
    widths = list(widths)
    while sum(widths) + 2 * (len(widths) - 1) > total:
        i = max(range(len(widths)), key=widths.__getitem__)
        if widths[i] <= MIN_FITTED:
            break  # as narrow as columns go: wider than the terminal, but readable
        widths[i] -= 1
    return widths


def _lines(cells: list[str], widths: list[int]) -> list[str]:
    """One table row as text lines: each cell wrapped to its column's width."""
    wrapped = [(textwrap.wrap(c, w, break_on_hyphens=False) or [""]) if len(c) > w else [c]
               for c, w in zip(cells, widths)]
    return ["  ".join((col[i] if i < len(col) else "").ljust(w) for col, w in zip(wrapped, widths)).rstrip()
            for i in range(max(len(col) for col in wrapped))]


def _expanded(columns: list[str], cells: list[list[str]], total: int, out: TextIO) -> None:
    """Each row as a block of `column  value` lines, its values wrapped to what the names leave (psql's expanded
    display): for a table whose columns cannot all fit side by side."""
    name_width = max(len(c) for c in columns)
    value_width = max(total - name_width - 2, MIN_FITTED)
    for n, r in enumerate(cells, 1):
        print(f"-[ {n} ]".ljust(min(total, name_width + 2 + value_width), "-"), file=out)
        for c, v in zip(columns, r):
            print("\n".join(_lines([c, v], [name_width, value_width])), file=out)


def terminal_width(out: TextIO) -> int | None:
    """The width to fit output to: `COLUMNS` when set, else the terminal's when `out` is one; None when it is a pipe
    or a file (a script reads the whole table, as it did before tables were fitted; `--json` is the machines')."""
    if (env("COLUMNS") or "").isdigit():
        return shutil.get_terminal_size().columns
    try:
        return shutil.get_terminal_size().columns if out.isatty() else None
    except (AttributeError, ValueError, OSError):
        return None


def print_table(columns: list[str], rows: list[tuple], out: TextIO | None = None, *, fit: bool = False) -> None:
    """An aligned text table; with `fit`, as wide as the terminal at most (`shutil.get_terminal_size`, which reads
    `COLUMNS` first): the widest columns are narrowed and their cells wrapped onto more lines, and a table with too
    many columns for that is shown a row at a time (`_expanded`)."""
    out = out or sys.stdout
    cells = [[_cell(v) for v in r] for r in rows]
    columns = [_cell(c) for c in columns]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
    total = terminal_width(out) if fit else None
    if total is not None:
        widths = fitted(widths, total)
        if sum(widths) + 2 * (len(widths) - 1) > total:
            _expanded(columns, cells, total, out)
            print(f"({len(rows)} row{'s' if len(rows) != 1 else ''})", file=out)
            return
    print("\n".join(_lines(columns, widths)), file=out)
    print("  ".join("-" * w for w in widths), file=out)
    for r in cells:
        print("\n".join(_lines(r, widths)), file=out)
    print(f"({len(rows)} row{'s' if len(rows) != 1 else ''})", file=out)


def print_fitted(text: str, out: TextIO | None = None, indent: str = "") -> None:
    """A line of text wrapped to the terminal's width (`shutil.get_terminal_size`), its later lines indented by two
    spaces more than `indent`."""
    width = terminal_width(out or sys.stdout)
    if width is None:
        print(indent + text, file=out or sys.stdout)
        return
    print(textwrap.fill(text, width, initial_indent=indent, subsequent_indent=indent + "  ", break_on_hyphens=False,
                        break_long_words=True), file=out or sys.stdout)


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
