"""Short-lived DuckDB connections with retry, designed around DuckDB's single-writer file lock.

Measured with DuckDB 2.0.1 on this machine (see docs/traces.md, "Concurrency"): a process holding
a read-write connection blocks every other process from opening the file, even read-only; a
read-only connection blocks writers but not other readers; the lock is taken at connect time, never
mid-transaction. So nobody holds a connection longer than one write batch or one query, and a
"could not set lock" error at connect time is retried with jittered backoff until `timeout`.
Every statement costs ~0.5–1 ms whatever its size, which is why batch writers buffer turns and
write them in one transaction per flush (see writer.py).

DuckDB's lock is not a queue: a writer logging turns back to back would re-take the file a few
milliseconds after releasing it, and a reader polling with backoff could starve. So a reader that
finds the file locked leaves a marker and polls fast; a writer about to open the file sees a fresh
marker and waits (at most `YIELD_S`) until the reader has had its turn and removed it. The marker
lives in the system's temporary folder, keyed by the database's real path: a reader creates nothing
beside the database (readers never write where it lives).

Inside one process, writes go through one in-memory DuckDB that ATTACHes the trace file for the
write and DETACHes it after (`write_connection`): the file lock is held exactly as long as with a
fresh connection, but DuckDB's per-connection start-up (~20–30 ms, building its function catalog)
is paid once per process instead of once per turn (measured side by side: open + write + close 43–54 ms,
attach + write + detach 22–27 ms; benchmarks/trace_write.py). DuckDB's lock is a POSIX lock, held by the
process, and a second open of the same file in the same process, even one that fails, drops it
(closing any descriptor of a file releases the process's locks on it). So this process's own
connections to one trace file take turns (`_in_process`), readers and writer alike.
"""

from __future__ import annotations

import hashlib
import os
import random
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator, TypeVar

import duckdb

from ..errors import TraceStoreError
from .duck import NO_DOWNLOADS, TRACE_FILE_ONLY, duckdb_connect, sql_string  # noqa: F401 (their home for callers)
from .lake import cursor, is_team_store

T = TypeVar("T")

DEFAULT_TIMEOUT_S = 30.0
YIELD_S = 0.25  # longest a writer waits for a queued reader before opening anyway
_MARKER_FRESH_S = 1.0
_HEADER_MAGIC_AT, _HEADER_MAGIC = 8, b"DUCK"  # every DuckDB database file: an 8-byte checksum, then "DUCK"
#: Then the storage version (8 bytes), flags, and at byte 52 the version of the DuckDB library that created the
#: file, e.g. b"v2.0.1", NUL-padded to 32 bytes (read from files DuckDB 1.5.5 and 2.0.1 wrote).
_HEADER_WRITER_AT, _HEADER_WRITER_LEN = 52, 32
# The writer's statements are small inserts: one thread, no ordering guarantee to keep (rows carry
# their own position columns; ~10% less CPU per turn) and no query optimizer (an `INSERT … SELECT` of
# the rows bound as a parameter has nothing to optimise, and the optimizer's passes cost ~0.25 ms a
# statement: ~15% of a turn's write, measured in benchmarks/trace_write.py). The writer turns it back on for migrations and
# its one lookup by turn_id (writer._optimized). Readers keep the defaults (every core, optimizer on).
_WRITER_CONFIG = {"threads": 1, "preserve_insertion_order": False}
#: DuckDB 1.5 has the optimizer switch as a pragma of each connection (not a setting a config or a cursor
#: inherits), so every writer connection and cursor sends it once opened.
OPTIMIZER_OFF, OPTIMIZER_ON = "PRAGMA disable_optimizer", "PRAGMA enable_optimizer"
# "unique file handle conflict": this process has the file open through another DuckDB instance
# (e.g. a notebook's own `duckdb.connect`): wait for it like for another process.
_LOCK_MARKERS = ("could not set lock", "conflicting lock", "different configuration", "unique file handle conflict")
def is_lock_error(exc: BaseException) -> bool:
    return isinstance(exc, duckdb.Error) and any(m in str(exc).lower() for m in _LOCK_MARKERS)


def _retrying(path: str, *, read_only: bool, timeout: float, attempt: Callable[[], T]) -> T:
    """Run `attempt` (which opens the file) until no other holder's lock is in the way, or `timeout`. While it
    waits, a reader queues in the readers' marker, a writer in the writers' (`queued`: a writer keeping the file
    attached gives it up). A writer waits for a queued reader before (`_yield_to_readers`, called by
    `connection` and `write_connection` before this process's turn: a reader of this process queued for that turn
    cannot have it while the writer holds it)."""
    marker = _marker(path)
    queue = marker if read_only else _marker(path, _WRITERS)
    deadline = time.monotonic() + timeout
    delay = 0.005
    while True:
        try:
            result = attempt()
            if read_only or queue.exists():
                queue.unlink(missing_ok=True)
            return result
        except duckdb.Error as exc:
            if not is_lock_error(exc):
                if _NEWER_FILE in str(exc).lower():
                    raise _newer_file_error(path) from None
                raise TraceStoreError(f"cannot open trace database {path}: {exc}") from None
            _touch(queue)
            if time.monotonic() >= deadline:
                raise TraceStoreError(
                    f"trace database {path} stayed locked by another process for {timeout:g} s; "
                    "close the process that holds it (a DuckDB shell or a notebook keeping a connection open), "
                    "or use another trace database file (WORKBENCH_DB)") from None
            time.sleep(delay * random.uniform(0.5, 1.5))
            delay = min(delay * 1.6, 0.01 if read_only else 0.05)


def _check_path(path: str, read_only: bool) -> None:
    if read_only and not os.path.exists(path):
        raise TraceStoreError(f"no trace database at {path}: nothing has been traced there yet "
                              "(run `workbench ask …` or `workbench eval …` first, or choose another trace database file)")
    _check_format(path)
    if not read_only:
        Path(path).parent.mkdir(parents=True, exist_ok=True)


def _check_format(path: str) -> None:
    """Refuse a file that is not a DuckDB database before DuckDB sees it: DuckDB would open a SQLite file
    through its `sqlite_scanner` extension (which it is not allowed to fetch), and a trace database is
    never anything but DuckDB. A new (missing or empty) file passes; the file is only read."""
    try:
        with open(path, "rb") as f:
            head = f.read(16)
    except OSError:  # missing (a writer creates it), a folder, unreadable: DuckDB says which
        return
    if head and head[_HEADER_MAGIC_AT:_HEADER_MAGIC_AT + len(_HEADER_MAGIC)] != _HEADER_MAGIC:
        kind = "a SQLite database" if head.startswith(b"SQLite format 3") else "not a DuckDB file"
        raise TraceStoreError(f"{path} is not a trace database ({kind}); it was left as it is — pick another "
                              "trace database file")


#: DuckDB's words for a file whose storage version it cannot read (one written by a newer DuckDB).
_NEWER_FILE = "trying to read a database file with version number"


def _writer_version(path: str) -> str:
    """The version of the DuckDB library that created the file at `path` (its header), or '' when unreadable."""
    try:
        with open(path, "rb") as f:
            head = f.read(_HEADER_WRITER_AT + _HEADER_WRITER_LEN)
    except OSError:
        return ""
    return head[_HEADER_WRITER_AT:].split(b"\0", 1)[0].decode("ascii", "replace").lstrip("v")


def _newer_file_error(path: str) -> TraceStoreError:
    """What to do with a file DuckDB refused as written by a newer version (2.x files, read by this 1.5 line,
    which the project runs because the team store's extensions exist for it only: docs/design.md §13)."""
    v = _writer_version(path) or "a newer version"
    return TraceStoreError(
        f"{path} was written by DuckDB {v}; the workbench runs DuckDB {duckdb.__version__}, which cannot read it. "
        f"The way back: export it with the DuckDB that wrote it (`pip install duckdb=={v}` in another "
        "environment, then run `EXPORT DATABASE 'traces-export' (FORMAT parquet)` on the file), then "
        "`workbench store import traces-export --db NEW.duckdb` and use the new file (`--db` or WORKBENCH_DB); "
        'docs/traces.md, "A trace file from DuckDB 2.x", has the commands. The file was left as it is.')


def open_connection(path: str | Path, *, read_only: bool, timeout: float = DEFAULT_TIMEOUT_S,
                    config: dict | None = None):
    """Connect, retrying while another process holds the file; raise TraceStoreError after `timeout`.

    `config` (read-only connections) adds DuckDB settings such as `TRACE_FILE_ONLY`. Prefer
    `connection` / `write_connection`, which also take turns with this process's other connections."""
    path = str(path)
    _check_path(path, read_only)
    cfg = dict(config or {}) if read_only else _WRITER_CONFIG
    con = _retrying(path, read_only=read_only, timeout=timeout,
                    attempt=lambda: duckdb_connect(path, read_only=read_only, config=cfg))
    if not read_only:
        con.execute(OPTIMIZER_OFF)
    return con


_WRITERS = ".writers"


def _marker(path: str, suffix: str = "") -> Path:
    """Where readers (`suffix` "") or writers (`_WRITERS`) queue for `path`: one file per database, outside its
    folder. Only a writer that keeps the file attached between writes reads the writers' marker (`queued`); other
    writers never wait on it (a batch of writers taking turns would each wait for the others)."""
    key = hashlib.sha1(os.path.realpath(path).encode()).hexdigest()[:20]
    return Path(tempfile.gettempdir()) / "provenance-workbench-readers" / (key + suffix)


def _fresh(marker: Path) -> bool:
    try:
        return time.time() - marker.stat().st_mtime < _MARKER_FRESH_S
    except OSError:
        return False


def queued(path: str | Path) -> bool:
    """Whether another connection, a reader or a writer, of this process or another, has recently found the file
    at `path` locked and is waiting for it (its marker is fresh)."""
    return _fresh(_marker(str(path))) or _fresh(_marker(str(path), _WRITERS))


def give_way(path: str | Path) -> None:
    """Wait (at most YIELD_S) while a reader or a writer is queued for the file (`queued`): what a writer that kept
    the file and gave it up because someone was waiting does before taking it again."""
    end = time.monotonic() + YIELD_S
    while time.monotonic() < end and queued(path):
        time.sleep(0.005)


def _touch(marker: Path) -> None:
    try:
        marker.parent.mkdir(exist_ok=True)
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


_PATH_LOCKS: dict[str, threading.Lock] = {}
_PATH_LOCKS_GUARD = threading.Lock()
_HELD = threading.local()


@contextmanager
def _in_process(path: str, timeout: float, read_only: bool) -> Iterator[None]:
    """This process's connections to one file take turns (see the module docstring); one that has to wait queues
    like one waiting for another process (`queued`), so a writer keeping the file attached gives it up."""
    key = os.path.realpath(path)
    with _PATH_LOCKS_GUARD:
        lock = _PATH_LOCKS.setdefault(key, threading.Lock())
    held = _HELD.__dict__.setdefault("paths", set())
    if key in held:  # waiting would deadlock: this thread already has the file open
        raise TraceStoreError(f"trace database {path} is already open in this thread; close that connection "
                              "before opening another one")
    if not lock.acquire(blocking=False):
        _touch(_marker(path, "" if read_only else _WRITERS))
        if not lock.acquire(timeout=timeout):
            raise TraceStoreError(f"trace database {path} stayed busy in this process for {timeout:.0f} s")
    held.add(key)
    try:
        yield
    finally:
        held.discard(key)
        lock.release()


@contextmanager
def connection(path: str | Path, *, read_only: bool, timeout: float = DEFAULT_TIMEOUT_S,
               config: dict | None = None) -> Iterator:
    """`open_connection` as a context manager that always closes (releasing the file lock). On a team store
    (lake.py), a cursor of the process's kept attachment: no lock to take turns on."""
    if is_team_store(path):
        with cursor(path, config) as con:
            yield con
        return
    if not read_only:
        _yield_to_readers(_marker(str(path)))
    with _in_process(str(path), timeout, read_only):
        con = open_connection(path, read_only=read_only, timeout=timeout, config=config)
        try:
            yield con
        finally:
            con.close()


_HOST: list = []  # [(pid, in-memory DuckDB connection)]: the writes' host, one per process


def _host():
    with _PATH_LOCKS_GUARD:
        if not _HOST or _HOST[0][0] != os.getpid():  # a forked child builds its own
            _HOST[:] = [(os.getpid(), duckdb_connect(":memory:", config=_WRITER_CONFIG))]
            _HOST[0][1].execute(OPTIMIZER_OFF)
        return _HOST[0][1]


@contextmanager
def write_connection(path: str | Path, *, timeout: float = DEFAULT_TIMEOUT_S) -> Iterator:
    """A read-write connection to the trace file: a cursor of this process's in-memory DuckDB with the
    file ATTACHed (and made the default catalog) for the duration; DETACHed on exit, which
    checkpoints and releases the file lock. On a team store, a cursor of the process's kept attachment."""
    if is_team_store(path):
        with cursor(path) as cur:
            cur.execute(OPTIMIZER_OFF)
            yield cur
        return
    path = str(path)
    _check_path(path, read_only=False)
    alias = "trace_" + hashlib.sha1(os.path.realpath(path).encode()).hexdigest()[:16]
    _yield_to_readers(_marker(path))  # before this process's turn, which a queued reader of this process waits for
    with _in_process(path, timeout, False):
        cur = _host().cursor()
        try:
            cur.execute(OPTIMIZER_OFF)
            _retrying(path, read_only=False, timeout=timeout,
                      attempt=lambda: cur.execute(f"ATTACH {sql_string(path)} AS {alias}; USE {alias}"))
            try:
                yield cur
            finally:
                _detach(cur, alias)
        finally:
            cur.close()


def _detach(cur, alias: str) -> None:
    try:
        cur.execute(f"USE memory; DETACH {alias}")
    except duckdb.Error:  # e.g. a transaction left open by a failure: undo it, then detach
        try:
            cur.execute("ROLLBACK")
        except duckdb.Error:
            pass
        try:
            cur.execute(f"USE memory; DETACH {alias}")
        except duckdb.Error:  # last resort: drop the whole host (closing it releases the file)
            with _PATH_LOCKS_GUARD:
                host = _HOST.pop()[1] if _HOST else None
            if host is not None:
                host.close()
