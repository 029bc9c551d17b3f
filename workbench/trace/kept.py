"""The trace file kept attached between writes, for a writer whose writes come back to back (`collect`: one per OTLP
request; issue 38 item 9).

Each attach and detach of the file costs a checkpoint (connect.py): for `collect` receiving 500-span requests, a
third of its time. A `Keeper` keeps the attachment across writes and gives the file up when nobody writes
(`idle_s` without a write), once it has held it `hold_s` (at the end of the write then running), as soon as another
connection is queued for it (`connect.queued`: a reader or a writer found it locked), and after a failed write. A
committed write is in DuckDB's write-ahead log on disk whether or not the file is detached (a process killed while
it keeps the file loses nothing it committed: DuckDB replays the log at the next open). Taking the file again after
giving way to someone, it first waits for them (`connect.give_way`, at most `connect.YIELD_S`).

Not thread-safe by itself: the writer calls it under its own lock.
"""

from __future__ import annotations

import time
from contextlib import AbstractContextManager, ExitStack
from pathlib import Path
from typing import Any, Callable

from .connect import give_way, queued


class Keeper:
    """One kept attachment of the trace file at `path`, opened with `open_` (the writer's own connection)."""

    def __init__(self, open_: Callable[[], AbstractContextManager], path: Path, *, idle_s: float, hold_s: float):
        self._open, self.path, self.idle_s, self.hold_s = open_, path, idle_s, hold_s
        self._stack: ExitStack | None = None
        self._con: Any = None
        self._since = self._last = 0.0
        self._gave_way = False
        #: Times the file was attached, and why it was given up (counted: tests and benchmarks read them).
        self.attaches = 0
        self.released = {"idle": 0, "hold": 0, "queued": 0, "failed": 0, "end": 0}

    def get(self):
        """The kept connection, the file attached first if it is not."""
        if self._con is None:
            if self._gave_way:
                give_way(self.path)
                self._gave_way = False
            stack = ExitStack()
            self._con = stack.enter_context(self._open())
            self._stack, self._since = stack, time.monotonic()
            self._last = self._since
            self.attaches += 1
        return self._con

    def used(self, *, failed: bool) -> None:
        """A write ended: give the file up if it failed, was held `hold_s`, or someone waits for it."""
        self._last = time.monotonic()
        if self._con is None:
            return
        if failed:
            self.release("failed")
        elif self._last - self._since >= self.hold_s:
            self.release("hold")
        elif queued(self.path):
            self._gave_way = True
            self.release("queued")

    def tick(self) -> None:
        """Between writes (the writer's watcher): give the file up when idle `idle_s` or someone waits for it."""
        if self._con is None:
            return
        if time.monotonic() - self._last >= self.idle_s:
            self.release("idle")
        elif queued(self.path):
            self._gave_way = True
            self.release("queued")

    def release(self, why: str = "end") -> None:
        """Detach the file (a checkpoint; an open transaction is rolled back) and release its lock."""
        stack, self._stack, self._con = self._stack, None, None
        if stack is not None:
            try:
                stack.close()
            finally:  # counted once the lock is released: a reader may open the file as soon as it reads this
                self.released[why] += 1
