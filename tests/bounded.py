"""Run hostile input in a child process with a memory ceiling and a watchdog.

Regression tests for memory bombs and runaway algorithms must not take the test machine down when
a fix regresses: the child gets an address-space limit (`MemoryError` instead of swapping) and a
wall-clock watchdog (a hang fails the test instead of blocking the suite). The watchdog is a
guard against "never finishes", not a speed assertion: speed is measured in benchmarks/hostile.py.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run(args: list, *, mem_gb: float = 4.0, timeout: float = 120.0, env: dict | None = None,
        input: str | None = None, text: bool = True) -> subprocess.CompletedProcess:
    """`python ARGS` with at most `mem_gb` of address space; a timeout raises `subprocess.TimeoutExpired`.
    `env` adds to (or overrides) this process's environment; `text=False` keeps stdout and stderr as bytes."""
    limit = int(mem_gb * 2**30)

    def cap():
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    full_env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE", **(env or {})}
    return subprocess.run([sys.executable, *args], capture_output=True, text=text, cwd=ROOT, env=full_env,
                          preexec_fn=cap, timeout=timeout, input=input)


def python(code: str, **kwargs) -> subprocess.CompletedProcess:
    return run(["-c", code], **kwargs)


def workbench(*args, **kwargs) -> subprocess.CompletedProcess:
    """`python -m workbench ARGS` as a user runs it, bounded like `run` (a hang fails the test)."""
    return run(["-m", "workbench", *args], **kwargs)
