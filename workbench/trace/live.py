"""Live export: every turn goes to an OTLP collector right after it is written to the trace store.

Set `WORKBENCH_OTLP_ENDPOINT` (e.g. `http://127.0.0.1:6006/v1/traces` for Phoenix; a bare
`http://host:port` gets `/v1/traces`), optionally `WORKBENCH_OTLP_PROJECT` (default `workbench`) and
`WORKBENCH_OTLP_TIMEOUT` (seconds per request, default 5). Turns that are not traced (`--no-trace`)
are not exported either: the trace store stays the source of truth, and a turn reaches the collector
only once its rows are committed (the writer calls `submit` after the commit; batches after each flush).

A slow or failing collector never costs the answer or blocks the app: `submit` only puts the turn's rows
on a bounded in-memory queue (full: the turn is dropped and counted) and returns; one background thread
per endpoint builds the spans and sends them, each request bounded by the timeout. A failure is one
warning on the `workbench.otlp` logger (printed to stderr unless logging is configured) and a count in
`status()`; nothing is retried beyond the exporter's own retries within the timeout, because
`workbench export --openinference` replays any turn from the database, and replaying is idempotent
(span ids are derived from turn ids). At exit a process waits at most one timeout for turns still
queued, then says how many were not exported.
"""

from __future__ import annotations

import atexit
import logging
import queue
import threading
from pathlib import Path
from typing import Any

from ..config import OTLP_ENDPOINT_ENV, env, seconds_setting
from .spans import DEFAULT_PROJECT, TurnRows, turn_spans

ENDPOINT_ENV, PROJECT_ENV, TIMEOUT_ENV = OTLP_ENDPOINT_ENV, "WORKBENCH_OTLP_PROJECT", "WORKBENCH_OTLP_TIMEOUT"
DEFAULT_TIMEOUT_S = 5.0
QUEUE_TURNS = 1000  # turns waiting for the collector before new ones are dropped (and counted)
BATCH_TURNS = 64  # turns per OTLP request when several are waiting

log = logging.getLogger("workbench.otlp")


class LiveExporter:
    """A background sender for one endpoint and project; `submit` never blocks."""

    def __init__(self, endpoint: str, project: str = DEFAULT_PROJECT, timeout: float = DEFAULT_TIMEOUT_S):
        from .openinference import traces_endpoint

        self.endpoint = traces_endpoint(endpoint, ENDPOINT_ENV)  # a malformed URL fails at start-up, not per turn
        self.project = project or DEFAULT_PROJECT
        self.timeout = timeout
        self.exported = self.failed = self.dropped = 0
        self.last_error: str | None = None
        self._queue: queue.Queue = queue.Queue(maxsize=QUEUE_TURNS)
        self._pending = 0  # turns submitted and not yet sent or failed (queued or being sent)
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._runs: dict[str, dict[str, Any] | None] = {}  # run rows looked up in the database

    # --- producer side (called by the trace writer, in the caller's thread) ---------------------

    def listener(self, db: str | Path):
        """The callback a `TraceWriter` calls with each committed turn's rows."""
        return lambda rows: self.submit(db, rows)

    def submit(self, db: str | Path, rows: dict[str, list[dict[str, Any]]]) -> None:
        """Queue one committed turn; drops it (and counts it) when the collector has fallen far behind."""
        with self._lock:
            self._pending += 1
        try:
            self._queue.put_nowait((str(db), rows))
        except queue.Full:
            with self._lock:
                self._pending -= 1
                self.dropped += 1
                first = self.dropped == 1
            if first:
                log.warning("warning: live OTLP export to %s is %d turns behind; dropping new turns (the trace "
                            "database keeps them: replay with `workbench export --openinference`)",
                            self.endpoint, QUEUE_TURNS)
            return
        self._start()

    def _start(self) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="workbench-otlp", daemon=True)
                self._thread.start()

    # --- consumer side (the background thread) ------------------------------------------------

    def _loop(self) -> None:
        sender = None
        while True:
            items = [self._queue.get()]
            while len(items) < BATCH_TURNS:
                try:
                    items.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            try:
                if sender is None:
                    from .openinference import SpanSender

                    sender = SpanSender(self.endpoint, project=self.project, timeout=self.timeout)
                sender.send([s for db, rows in items for s in self._spans(db, rows)])
            except Exception as exc:  # noqa: BLE001 - nothing may escape into the app; it is counted and said
                self._failed(len(items), exc)
            else:
                with self._lock:
                    self.exported += len(items)
                    recovered, self.last_error = self.last_error is not None, None
                if recovered:
                    log.warning("warning: live OTLP export to %s works again", self.endpoint)
            finally:
                with self._lock:
                    self._pending -= len(items)
                for _ in items:
                    self._queue.task_done()

    def _spans(self, db: str, rows: dict[str, list[dict[str, Any]]]):
        run = rows.get("runs")
        (run_id,) = {r["run_id"] for r in rows["turns"]}
        run_row = self._run_row(db, run_id, run[0] if run else None)
        return turn_spans(TurnRows.from_rows(rows, run_row), self.project)

    def _run_row(self, db: str, run_id: str, row: dict[str, Any] | None) -> dict[str, Any] | None:
        """The run's configuration: from the writer when it wrote the run, else read once from the database."""
        if run_id not in self._runs:
            if row is not None:
                self._runs[run_id] = dict(row)
            else:
                from .reader import TraceReader

                columns, found = TraceReader(db, timeout=self.timeout).rows("SELECT * FROM runs WHERE run_id = ?",
                                                                            [run_id])
                self._runs[run_id] = dict(zip(columns, found[0])) if found else None
        return self._runs[run_id]

    def _failed(self, n: int, exc: BaseException) -> None:
        with self._lock:
            self.failed += n
            first = self.last_error is None
            self.last_error = str(exc) or type(exc).__name__
        if first:  # once per outage, not once per turn
            log.warning("warning: live OTLP export failed, %d turn(s) not exported: %s (the trace database keeps "
                        "them: replay with `workbench export --openinference`)", n, self.last_error)

    # --- status and shutdown ------------------------------------------------------------------

    def pending(self) -> int:
        with self._lock:
            return self._pending

    def status(self) -> dict[str, Any]:
        with self._lock:
            return {"endpoint": self.endpoint, "project": self.project, "exported": self.exported,
                    "failed": self.failed, "dropped": self.dropped, "pending": self._pending,
                    "last_error": self.last_error}

    def wait(self, timeout: float) -> bool:
        """Wait at most `timeout` seconds until every queued turn was sent or failed; True if none is left."""
        done = threading.Event()
        threading.Thread(target=lambda: (self._queue.join(), done.set()), daemon=True).start()
        return done.wait(timeout)


_EXPORTERS: dict[tuple[str, str, float], LiveExporter] = {}
_EXPORTERS_LOCK = threading.Lock()


def from_env() -> LiveExporter | None:
    """The process's live exporter for `$WORKBENCH_OTLP_ENDPOINT` (one per endpoint), or None when unset."""
    endpoint = env(ENDPOINT_ENV)
    if not endpoint:
        return None
    timeout = seconds_setting(TIMEOUT_ENV, DEFAULT_TIMEOUT_S)
    key = (endpoint, env(PROJECT_ENV, DEFAULT_PROJECT), timeout)
    with _EXPORTERS_LOCK:
        if key not in _EXPORTERS:
            _EXPORTERS[key] = LiveExporter(*key)
        return _EXPORTERS[key]


def status() -> list[dict[str, Any]]:
    """Counts of every live exporter of this process (the app shows them)."""
    with _EXPORTERS_LOCK:
        return [e.status() for e in _EXPORTERS.values()]


@atexit.register
def _drain_at_exit() -> None:
    with _EXPORTERS_LOCK:
        exporters = list(_EXPORTERS.values())
    for e in exporters:
        if e.pending() and not e.wait(e.timeout):
            log.warning("warning: %d turn(s) were not exported to %s before exit (the trace database keeps them: "
                        "replay with `workbench export --openinference`)", e.pending(), e.endpoint)
