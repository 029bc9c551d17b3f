"""`docs-traces`: regenerate docs/traces.md from the trace schema (or check it is current)."""

from __future__ import annotations

import argparse

from ..errors import WorkbenchError


def register(sub) -> None:
    p = sub.add_parser("docs-traces", help="Regenerate docs/traces.md from the trace schema (--check: fail if stale).")
    p.add_argument("--check", action="store_true", help="do not write; exit 1 if docs/traces.md is out of date")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..trace import docs

    if args.check:
        current = docs.DOCS_PATH.read_text(encoding="utf-8") if docs.DOCS_PATH.exists() else ""
        if current != docs.render():
            raise WorkbenchError(f"{docs.DOCS_PATH} is out of date: run `python -m workbench docs-traces`")
        print(f"{docs.DOCS_PATH} is up to date")
        return 0
    changed = docs.write()
    print(f"{'wrote' if changed else 'unchanged:'} {docs.DOCS_PATH}")
    return 0
