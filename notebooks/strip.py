"""Strip outputs and execution counts from the companion notebooks (they are committed clean).

    .venv/bin/python notebooks/strip.py            # strip every notebooks/*.ipynb in place
    .venv/bin/python notebooks/strip.py --check    # exit 1 and list the notebooks that still carry outputs
    .venv/bin/python notebooks/strip.py FILE …     # only these files
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import nbformat

HERE = Path(__file__).resolve().parent


def strip(nb) -> bool:
    """Remove outputs, execution counts and per-run metadata in place; True when anything changed."""
    changed = False
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        if cell.get("outputs") or cell.get("execution_count") is not None:
            cell.outputs, cell.execution_count = [], None
            changed = True
        for key in ("execution", "collapsed", "scrolled"):
            if key in cell.metadata:
                del cell.metadata[key]
                changed = True
    return changed


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="*", type=Path, help="notebooks (default: notebooks/*.ipynb)")
    ap.add_argument("--check", action="store_true", help="only report; exit 1 when a notebook has outputs")
    args = ap.parse_args(argv)
    dirty = []
    for path in args.files or sorted(HERE.glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        if strip(nb):
            dirty.append(path)
            if not args.check:
                nbformat.write(nb, path)
    for path in dirty:
        print(f"{'has outputs' if args.check else 'stripped'}: {path}")
    return 1 if args.check and dirty else 0


if __name__ == "__main__":
    sys.exit(main())
