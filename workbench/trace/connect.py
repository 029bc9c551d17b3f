"""Short-lived DuckDB connections with retry, designed around DuckDB's single-writer file lock.

Measured with DuckDB 2.0.1 on this machine (see docs/traces.md, "Concurrency"): a process holding
a read-write connection blocks every other process from opening the file, even read-only; a
read-only connection blocks writers but not other readers; the lock is taken at connect time, never
mid-transaction. So nobody holds a connection longer than one write batch or one query, and a
"could not set lock" error at connect time is retried with jittered backoff until `timeout`.
Opening costs ~20–30 ms, which is why batch writers buffer turns (see writer.py).

DuckDB's lock is not a queue: a writer logging turns back to back would re-take the file a few
milliseconds after releasing it, and a reader polling with backoff could starve. So a reader that
finds the file locked leaves a marker (`<db>.readers`) and polls fast; a writer about to open the
file sees a fresh marker and waits (at most `YIELD_S`) until the reader has had its turn and
removed it.
"""

from __future__ import annotations

import os
import random
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import duckdb

from ..errors import TraceStoreError

DEFAULT_TIMEOUT_S = 30.0
YIELD_S = 0.25  # longest a writer waits for a queued reader before opening anyway
_MARKER_FRESH_S = 1.0
# The writer's inserts are small: one thread, and no ordering guarantee to keep (rows carry their own
# position columns), ~10% less CPU per turn. Readers keep the defaults (every core for analytics).
_WRITER_CONFIG = {"threads": 1, "preserve_insertion_order": False}
_LOCK_MARKERS = ("could not set lock", "conflicting lock", "different configuration")
#: Queries typed by a user never download or load extensions (no network at run time): a query
#: naming an `https://` file fails with a message instead of fetching `httpfs` from the internet.
NO_DOWNLOADS = {"autoinstall_known_extensions": False, "autoload_known_extensions": False}
#: The app's trace explorer also reads nothing but the trace database (no `read_text('/etc/…')`).
TRACE_FILE_ONLY = {**NO_DOWNLOADS, "enable_external_access": False}


def is_lock_error(exc: BaseException) -> bool:
    return isinstance(exc, duckdb.Error) and any(m in str(exc).lower() for m in _LOCK_MARKERS)


def open_connection(path: str | Path, *, read_only: bool, timeout: float = DEFAULT_TIMEOUT_S,
                    config: dict | None = None):
    """Connect, retrying while another process holds the file; raise TraceStoreError after `timeout`.

    `config` (read-only connections) adds DuckDB settings such as `NO_DOWNLOADS`."""
    path = str(path)
    if read_only and not os.path.exists(path):
        raise TraceStoreError(f"no trace database at {path}: nothing has been traced there yet "
                              "(run `workbench ask …` or `workbench eval …` first, or pass --db / set WORKBENCH_DB)")
    if not read_only:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    marker = Path(path + ".readers")
    if not read_only:
        _yield_to_readers(marker)
    deadline = time.monotonic() + timeout
    delay = 0.005
    while True:
        try:
            con = duckdb.connect(path, read_only=read_only, config=dict(config or {}) if read_only else _WRITER_CONFIG)
            if read_only:
                marker.unlink(missing_ok=True)
            return con
        except duckdb.Error as exc:
            if not is_lock_error(exc):
                raise TraceStoreError(f"cannot open trace database {path}: {exc}") from None
            if read_only:
                _touch(marker)
            if time.monotonic() >= deadline:
                raise TraceStoreError(
                    f"trace database {path} stayed locked by another process for {timeout:.0f} s; "
                    "close the process that holds it (a DuckDB shell or a notebook keeping a connection open), "
                    "or use another file with --db / WORKBENCH_DB") from None
            time.sleep(delay * random.uniform(0.5, 1.5))
            delay = min(delay * 1.6, 0.01 if read_only else 0.05)


def _touch(marker: Path) -> None:
    try:
        marker.touch()
    except OSError:  # a read-only folder: fairness is lost, correctness is not
        pass


def _yield_to_readers(marker: Path) -> None:
    """Wait (at most YIELD_S) while a reader has recently queued for the file."""
    end = time.monotonic() + YIELD_S
    while time.monotonic() < end:
        try:
            fresh = time.time() - marker.stat().st_mtime < _MARKER_FRESH_S
        except OSError:
            return
        if not fresh:
            return
        time.sleep(0.005)


@contextmanager
def connection(path: str | Path, *, read_only: bool, timeout: float = DEFAULT_TIMEOUT_S,
               config: dict | None = None) -> Iterator:
    """`open_connection` as a context manager that always closes (releasing the file lock)."""
    con = open_connection(path, read_only=read_only, timeout=timeout, config=config)
    try:
        yield con
    finally:
        con.close()
