"""A query typed by a user, run in a child process whose memory, rows and result size are bounded.

DuckDB's `memory_limit` bounds its operators (hash tables, sorts, spilling), but not everything: a scalar
function such as `repeat('x', 100000000)` allocates its strings outside the buffer manager, and fetching
10,000 rows of a megabyte each builds gigabytes of Python objects. So a visitor's query runs in a child
process (`query_child.child`, which imports this module and `reader.py`; this one spawns it) whose address space is capped (`QUERY_ADDRESS_SPACE`):
whatever the query does, the app or CLI process is never the one that grows, and a query over the
bound ends with a message naming it. Inside the child DuckDB gets `QUERY_MEMORY_LIMIT`, spills to a
private temporary folder capped at `QUERY_TEMP_LIMIT` and removed after the query, and at most
`MAX_QUERY_ROWS` rows (`MAX_RESULT_BYTES` of them) come back, with a note saying the result was cut.
Starting the child costs ~0.3 s per query (mostly importing DuckDB; measured 0.32 s against 0.04 s
for the same query in-process), paid only by typed queries.
"""

from __future__ import annotations

import json
import os
import pickle
import signal
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

from .. import errors
from ..config import child_environment, env, usable_cores
from ..errors import TraceStoreError

#: DuckDB's `memory_limit` for a typed query (its default is 80 % of the machine's RAM).
QUERY_MEMORY_LIMIT = "256MB"
#: DuckDB's `max_temp_directory_size`: what one query may spill to disk, in a private temporary folder.
QUERY_TEMP_LIMIT = "1GB"
#: Threads DuckDB uses for a typed query on a trace file (each thread has its own buffers): the reader holds every
#: writer for as long as it runs, so it is not slowed down on purpose.
FILE_QUERY_THREADS = 2
#: On a team store (whose readers hold no writer) an analyst's query is bounded so that the app stays responsive
#: (measured: benchmarks/README.md, "The team store"): the variable capping its threads (default: one core fewer
#: than the process may use), and the one lowering its process's CPU priority (`nice`, 0 to 19) with its default.
QUERY_THREADS_ENV = "WORKBENCH_QUERY_THREADS"
QUERY_NICE_ENV, DEFAULT_QUERY_NICE = "WORKBENCH_QUERY_NICE", 10
#: The address space (`RLIMIT_AS`) of the process that runs a typed query: everything it allocates.
QUERY_ADDRESS_SPACE = 2 * 1024**3
#: Rows a typed query returns at most; the result says when there were more.
MAX_QUERY_ROWS = 10_000
#: Bytes (pickled) of the rows a typed query returns at most; the result says when it was cut.
MAX_RESULT_BYTES = 32 * 1024**2

_ROOT = Path(__file__).resolve().parents[2]  # the folder that holds the `workbench` package


class UserRows(NamedTuple):
    """A typed query's result: column names, rows, and why rows are missing (None: the result is whole)."""

    columns: list[str]
    rows: list[tuple]
    cut: str | None = None


def query_threads() -> int:
    """Threads for a typed query on a team store: `$WORKBENCH_QUERY_THREADS` (1 to the cores this process may use),
    else one core fewer than those (at least 1), so an analyst's query leaves a core to the app's turns."""
    cores, raw = usable_cores(), env(QUERY_THREADS_ENV)
    if raw is None:
        return max(1, cores - 1)
    if not raw.isdigit() or not 1 <= int(raw) <= cores:
        raise TraceStoreError(f"{QUERY_THREADS_ENV}={raw!r}: a typed query's threads must be a whole number from 1 "
                              f"to {cores} (the cores this process may use)")
    return int(raw)


def query_nice() -> int:
    """How far a typed query's process on a team store lowers its priority: `$WORKBENCH_QUERY_NICE` (0 to 19)."""
    raw = env(QUERY_NICE_ENV)
    if raw is None:
        return DEFAULT_QUERY_NICE
    if not raw.isdigit() or int(raw) > 19:
        raise TraceStoreError(f"{QUERY_NICE_ENV}={raw!r}: a typed query's niceness must be a whole number from 0 to 19")
    return int(raw)


def duckdb_limits(temp_directory: str, *, team_store: bool = False) -> dict:
    """The DuckDB settings bounding one typed query (docs/security.md). On a file the query holds every writer
    while it runs, so it runs as fast as it can (`FILE_QUERY_THREADS`); on a team store it holds nobody, so it
    leaves a core to the writers (`query_threads`)."""
    return {"memory_limit": QUERY_MEMORY_LIMIT, "max_temp_directory_size": QUERY_TEMP_LIMIT,
            "temp_directory": temp_directory, "threads": query_threads() if team_store else FILE_QUERY_THREADS}


def fetch_capped(result) -> UserRows:
    """At most `MAX_QUERY_ROWS` rows and `MAX_RESULT_BYTES` of a DuckDB result, fetched in batches."""
    columns = [d[0] for d in result.description or []]
    rows: list[tuple] = []
    size = 0
    while True:
        batch = result.fetchmany(min(1024, MAX_QUERY_ROWS + 1 - len(rows)))
        if not batch:
            return UserRows(columns, rows)
        for row in batch:
            if len(rows) == MAX_QUERY_ROWS:
                return UserRows(columns, rows, f"only the first {MAX_QUERY_ROWS:,} rows are shown: the query returned "
                                               "more (the row cap of a typed query); add a LIMIT or aggregate, or use "
                                               "`workbench export` for whole tables")
            size += len(pickle.dumps(row, protocol=pickle.HIGHEST_PROTOCOL))
            if size > MAX_RESULT_BYTES:
                return UserRows(columns, rows, f"only the first {len(rows):,} rows are shown: the next would take the "
                                               f"result over {MAX_RESULT_BYTES // 1024**2} MB (the size cap of a typed "
                                               "query); select fewer or shorter columns")
            rows.append(row)


def memory_message() -> str:
    return (f"query stopped: it needed more memory than a typed query may use (DuckDB {QUERY_MEMORY_LIMIT}, "
            f"spilling {QUERY_TEMP_LIMIT}, {QUERY_ADDRESS_SPACE // 1024**3} GB for its process); aggregate, filter "
            "or add a LIMIT")


def run_user_query(path: Path, sql: str, *, files: bool, lock_timeout: float, query_timeout: float,
                   owner: str | None = None) -> UserRows:
    """Run `sql` (already checked read-only) in a bounded child process, over what `owner` may see when given
    (visible.py); raise its error here."""
    request = json.dumps({"path": str(path), "sql": sql, "files": files, "lock_timeout": lock_timeout,
                          "query_timeout": query_timeout, "owner": owner})
    child_env = child_environment(PYTHONPATH=os.pathsep.join(filter(None, [str(_ROOT), env("PYTHONPATH")])))
    try:
        proc = subprocess.run([sys.executable, "-c", "from workbench.trace.query_child import child; child()"],
                              input=request.encode(),
                              capture_output=True, env=child_env, timeout=lock_timeout + query_timeout + 15)
    except subprocess.TimeoutExpired:
        raise TraceStoreError(f"query stopped after {query_timeout:g} s, the limit for one query, and its process "
                              "was ended; narrow it") from None
    try:
        status, value = pickle.loads(proc.stdout) if proc.stdout else (None, None)
    except Exception:  # a child cut short mid-write
        status, value = None, None
    if status == "ok":
        return UserRows(*value)
    if status == "error":
        kind, message = value
        cls = getattr(errors, kind, TraceStoreError)
        raise (cls if isinstance(cls, type) and issubclass(cls, errors.WorkbenchError) else TraceStoreError)(message)
    if proc.returncode < 0 or b"MemoryError" in proc.stderr or b"bad_alloc" in proc.stderr:
        raise TraceStoreError(memory_message() + (f" (its process ended with signal {signal.Signals(-proc.returncode).name})"
                                                   if proc.returncode < 0 else ""))
    tail = proc.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["no message"]
    raise TraceStoreError(f"query failed: its process ended with status {proc.returncode}: {tail[0]}")
