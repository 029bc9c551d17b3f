"""The trace writer: one transaction per turn, bulk Arrow inserts, short-lived connections.

Why this shape (facts measured with DuckDB 2.0.1, see docs/traces.md): only one process may have
the file open while it writes, and opening costs ~20–30 ms. So the writer never keeps the file
open between writes. `log_turn` opens, writes the turn in one transaction (every table, or none:
a SIGKILL mid-turn leaves no partial turn), and closes. Batches (`workbench eval`) use
`buffered()`: turns queue in memory and are flushed together in one transaction holding whole
turns only, so the lock is held only during a flush, readers get in between, and a crash loses
the unflushed turns but never leaves part of one.
"""

from __future__ import annotations

import time
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterable, Iterator

import duckdb
import pyarrow as pa

from ..errors import TraceStoreError
from ..types import TurnRecord
from .connect import DEFAULT_TIMEOUT_S, open_connection
from .migrate import migrate
from .rows import TURN_TABLES, claim_rows, run_row, turn_tables, rows_to_table

_MIGRATED: set[str] = set()  # paths migrated by this process (migrate() runs once per file per process)
_PROCESS_RUNS: dict[tuple[str, str], str] = {}  # (database, configuration) → interactive run_id, per process


def _insert(con, table: str, rows, verb: str = "INSERT") -> None:
    """Bulk insert an Arrow table by column name (DuckDB scans the local `rows` directly)."""
    con.execute(f"{verb} INTO {table} BY NAME SELECT * FROM rows")


def _rollback(con) -> None:
    try:
        con.execute("ROLLBACK")
    except duckdb.Error:  # the failure came before BEGIN took effect: nothing to undo
        pass


def _commit(con, runs_rows, tables: dict[str, Any]) -> None:
    """BEGIN, one bulk `INSERT … BY NAME` per table, COMMIT — sent as one script (one round trip,
    ~12% less CPU per turn than separate calls). DuckDB's replacement scan reads the Arrow tables
    from the local variables named in the script."""
    turns_rows, tool_calls_rows = tables.get("turns"), tables.get("tool_calls")  # noqa: F841 (scanned by DuckDB)
    retrieved_items_rows, citations_rows = tables.get("retrieved_items"), tables.get("citations")  # noqa: F841
    sources_rows, claims_rows = tables.get("sources"), tables.get("claims")  # noqa: F841
    script = ["BEGIN;"]
    if runs_rows is not None:
        script.append("INSERT OR IGNORE INTO runs BY NAME SELECT * FROM runs_rows;")
    script += [f"INSERT INTO {name} BY NAME SELECT * FROM {name}_rows;" for name in TURN_TABLES if name in tables]
    script.append("COMMIT;")
    con.execute(" ".join(script))


class TraceWriter:
    """Writes turns to the DuckDB file at `path` (created and migrated on first use)."""

    def __init__(self, path: str | Path, *, timeout: float = DEFAULT_TIMEOUT_S):
        self.path = Path(path)
        self.timeout = timeout
        self._written_runs: set[str] = set()
        self._new_runs: dict[str, Any] = {}  # run_id → Arrow row, written with the run's first turn
        self._declared: dict[str, tuple[str, str | None]] = {}  # run_id → (kind, run_key), row built at first turn
        self._queue: list[dict[str, Any]] | None = None
        self._flush_at = 0
        self._flush_age = 0.0
        self._queued_since = 0.0

    # --- connections -------------------------------------------------------------------------

    @contextmanager
    def connect(self) -> Iterator:
        """A read-write connection on a migrated database, closed on exit (the file lock is released)."""
        con = open_connection(self.path, read_only=False, timeout=self.timeout)
        try:
            key = str(self.path.resolve())
            if key not in _MIGRATED:
                migrate(con)
                _MIGRATED.add(key)
            yield con
        finally:
            con.close()

    # --- runs --------------------------------------------------------------------------------

    def run_for(self, config: dict[str, Any]) -> str:
        """The interactive run for this configuration in this process (shared by every writer of the same
        file, e.g. each Session the app creates); its row is written with its first turn (INSERT OR IGNORE)."""
        key = (str(self.path.resolve()), repr(sorted((k, repr(v)) for k, v in config.items())))
        run_id = _PROCESS_RUNS.setdefault(key, uuid.uuid4().hex)
        if run_id not in self._written_runs and run_id not in self._new_runs:
            self._new_runs[run_id] = run_row(run_id, config, "interactive")
        return run_id

    def new_run(self, *, kind: str = "eval", run_key: str | None = None) -> str:
        """Declare a run; its row is written with its first turn, from that turn's configuration."""
        run_id = uuid.uuid4().hex
        self._declared[run_id] = (kind, run_key)
        return run_id

    def resume_run(self, run_id: str) -> None:
        """Log further turns into an existing run (its row is already written)."""
        self._written_runs.add(run_id)

    # --- turns -------------------------------------------------------------------------------

    def log_turn(self, record: TurnRecord, payload: dict[str, Any], *, claims: Iterable[Any] | None = None,
                 run_id: str | None = None) -> str:
        """Write one turn (all its tables, one transaction) and return its turn_id."""
        run_id = run_id or self.run_for(record.config)
        if run_id in self._declared and run_id not in self._new_runs:
            kind, run_key = self._declared[run_id]
            self._new_runs[run_id] = run_row(run_id, record.config, kind, run_key)
        tables = turn_tables(record, payload, run_id, claims)
        if self._queue is not None:
            if not self._queue:
                self._queued_since = time.monotonic()
            self._queue.append({"run_id": run_id, "tables": tables})
            if len(self._queue) >= self._flush_at or time.monotonic() - self._queued_since >= self._flush_age:
                self.flush()
        else:
            with self.connect() as con:
                self._write(con, {run_id}, tables)
        return payload["turn_id"]

    @contextmanager
    def buffered(self, max_turns: int = 50, max_age_s: float = 0.5) -> Iterator["TraceWriter"]:
        """Queue turns and flush every `max_turns` turns or `max_age_s` seconds (and on exit)."""
        self._queue, self._flush_at, self._flush_age = [], max_turns, max_age_s
        try:
            yield self
        finally:
            try:
                self.flush()
            finally:
                self._queue = None

    def flush(self) -> int:
        """Write every queued turn on one connection, in one transaction (whole turns only); return how many.

        Grouping whole turns keeps the guarantee that matters — a crash leaves no partial turn — while
        paying DuckDB's per-statement cost (~1 ms an INSERT) once per flush instead of once per turn.
        If the group fails on a duplicate turn, the turns are retried one transaction each.
        """
        if not self._queue:
            return 0
        queued, self._queue = self._queue, []
        with self.connect() as con:
            merged: dict[str, list[Any]] = {}
            for item in queued:
                for name, table in item["tables"].items():
                    merged.setdefault(name, []).append(table)
            runs = {item["run_id"] for item in queued}
            try:
                self._write(con, runs, {name: pa.concat_tables(ts) for name, ts in merged.items()}, strict=True)
            except duckdb.ConstraintException:
                for item in queued:
                    self._write(con, {item["run_id"]}, item["tables"])
        return len(queued)

    def _write(self, con, run_ids: set[str], tables: dict[str, Any], strict: bool = False) -> None:
        """One transaction: new run rows, then every table of the turn(s); all or nothing."""
        new_runs = [self._new_runs[r] for r in run_ids if r not in self._written_runs and r in self._new_runs]
        runs = pa.concat_tables(new_runs) if new_runs else None
        try:
            _commit(con, runs, tables)
        except duckdb.ConstraintException as exc:
            _rollback(con)
            if strict:
                raise
            if "Duplicate key" in str(exc) and "turn_id" in str(exc):
                return  # the same turn written twice (e.g. a retried flush): it is already complete
            raise TraceStoreError(f"could not write turn to {self.path}: {exc}") from None
        except BaseException:
            _rollback(con)
            raise
        self._written_runs.update(run_ids)

    def add_claims(self, turn_id: str, claims: Iterable[Any]) -> int:
        """Add faithfulness claims to a turn already logged (one transaction); return how many."""
        rows = claim_rows(turn_id, claims)
        if not rows:
            return 0
        with self.connect() as con:
            if con.execute("SELECT 1 FROM turns WHERE turn_id = ?", [turn_id]).fetchone() is None:
                raise TraceStoreError(f"no turn {turn_id!r} in {self.path}; log the turn before adding its claims")
            con.execute("BEGIN")
            _insert(con, "claims", rows_to_table("claims", rows))
            con.execute("COMMIT")
        return len(rows)
