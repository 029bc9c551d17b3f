"""Run the CLI in this process, as click's `CliRunner` and sqlite-utils' tests do: `workbench.cli.main(argv)`
with stdin, stdout and stderr swapped for in-memory streams, its exit code and what it printed returned.

A `python -m workbench` process costs about a second of start-up (imports) on the test machine; this costs
none after the first test. It is the same code path as `python -m workbench` (`workbench/__main__.py` is
`sys.exit(main())`), including what a process adds: `SystemExit` (argparse's exit 2) becomes the exit code,
and an uncaught exception is printed as a traceback with exit code 1, so a test asserting "no traceback"
still can fail. What only a real process shows — signals, the interpreter's own exit, the memory ceiling and
watchdog of `bounded.py` — stays with `bounded.workbench`, used by the few end-to-end tests.
"""

from __future__ import annotations

import io
import os
import sys
import traceback
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator


@dataclass
class Result:
    """Like `subprocess.CompletedProcess`: `returncode`, and `stdout` / `stderr` as text."""

    returncode: int
    stdout: str
    stderr: str
    args: tuple[str, ...] = ()


def _stream(data: bytes = b"") -> io.TextIOWrapper:
    # UTF-8 like the test processes' (a real stdout is a TextIOWrapper with a `.buffer` too)
    return io.TextIOWrapper(io.BytesIO(data), encoding="utf-8", errors="strict", newline=None, write_through=True)


@contextmanager
def _environ(env: dict[str, str | None] | None) -> Iterator[None]:
    old = {k: os.environ.get(k) for k in env or {}}
    for k, v in (env or {}).items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _text(stream: io.TextIOWrapper) -> str:
    stream.flush()
    return stream.buffer.getvalue().decode("utf-8", "replace")  # type: ignore[attr-defined]


def cli(*args, input: str | bytes | None = None, env: dict[str, str | None] | None = None) -> Result:
    """`python -m workbench ARGS` in this process; `input` is stdin (text, or bytes as they are), `env` sets
    (None: unsets) variables for the call's duration."""
    from workbench.cli import main

    argv = [str(a) for a in args]
    data = input if isinstance(input, bytes) else (input or "").encode("utf-8")
    stdin, stdout, stderr = _stream(data), _stream(), _stream()
    saved = sys.stdin, sys.stdout, sys.stderr
    sys.stdin, sys.stdout, sys.stderr = stdin, stdout, stderr
    try:
        with _environ(env):
            try:
                code = main(argv)
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
                if exc.code is not None and not isinstance(exc.code, int):
                    print(exc.code, file=sys.stderr)
            except Exception:  # what the interpreter does with an uncaught exception
                traceback.print_exc()
                code = 1
        out, err = _text(stdout), _text(stderr)
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved
    return Result(code if code is not None else 0, out, err, tuple(argv))
