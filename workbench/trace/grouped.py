"""Group commit: the rows of writes that come together (several exporters' requests to `collect`) written in one
transaction, each writer answered once that transaction has committed (issue 38 item 9).

A caller gathers its rows in a `Batch` of its own (`TraceWriter.batch`), queues it (`Groups.join`, in the order the
callers made their rows), and waits (`Groups.written`). The first waiting caller that finds no group being written
writes every batch queued so far, its own included, in one transaction; the others wait for it, and those queued
meanwhile form the next group. One commit (and one fsync) a group instead of one a caller, and the callers' own work
(auditing the next request) goes on while a group is written. A group that fails is failed for every caller in it:
the transaction is rolled back, so none of its rows is stored, and each caller raises.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Callable

Row = dict[str, Any]


@dataclass(eq=False)
class Batch:
    """One caller's rows: shared tables' rows (`TraceWriter.stage`) and whole turns (`TraceWriter.log_turn`'s queue
    items); `done` once the group holding them was written, `error` when it failed."""

    staged: dict[str, list[Row]] = field(default_factory=dict)
    queued: list[dict[str, Any]] = field(default_factory=list)
    done: bool = False
    error: BaseException | None = None


class Groups:
    """The batches waiting to be written, and whether a group is being written now."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._waiting: list[Batch] = []
        self._writing = False
        #: Groups written and how many batches they held in all (tests and benchmarks read them).
        self.groups = self.batches = 0

    @property
    def waiting(self) -> int:
        """Batches queued for the next group."""
        with self._changed:
            return len(self._waiting)

    def join(self, batch: Batch) -> None:
        """Queue `batch` for the next group (callers join in the order their writes must reach the file)."""
        with self._changed:
            self._waiting.append(batch)

    def written(self, batch: Batch, write: Callable[[list[Batch]], None]) -> None:
        """Return once `batch` (joined before) was written: by the group another caller is writing, or by the next
        group, which this caller writes (`write(group)`) when no other group is being written. `batch.error` is
        set when its group failed."""
        with self._changed:
            while self._writing and not batch.done:
                self._changed.wait()
            if batch.done:
                return
            group, self._waiting, self._writing = self._waiting, [], True
        error = None
        try:
            write(group)
        except BaseException as exc:  # noqa: BLE001 — handed to every caller of the group
            error = exc
        with self._changed:
            for b in group:
                b.done, b.error = True, error
            self.groups += 1
            self.batches += len(group)
            self._writing = False
            self._changed.notify_all()
