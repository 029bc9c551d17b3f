"""`python -m workbench`: a thin shell over library calls; every command lives in `commands/`."""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys

from . import __version__, commands
from .config import Settings
from .errors import WorkbenchError
from .terminal import neutralize


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="workbench", description="Provenance Workbench: which documents did an answer really come from?")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        if not info.name.startswith("_"):
            importlib.import_module(f"{commands.__name__}.{info.name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        args.settings = Settings.from_env()  # the environment, read once here and passed down
        return args.func(args) or 0
    except WorkbenchError as exc:
        print(neutralize(f"error: {exc}"), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
