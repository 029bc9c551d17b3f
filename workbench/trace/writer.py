"""The trace writer: one transaction per turn, bulk inserts, the file held only while writing.

Why this shape (facts measured with DuckDB 2.0.1, see docs/traces.md): only one process may have
the file open while it writes. So the writer never keeps the file open between writes. `log_turn`
attaches the file (connect.write_connection), writes the turn in one transaction (every table, or
none: a SIGKILL mid-turn leaves no partial turn), and detaches it. Batches (`workbench eval`) use
`buffered()`: turns queue in memory and are flushed together in one transaction holding whole
turns only, so the lock is held only during a flush, readers get in between, and a crash loses
the unflushed turns but never leaves part of one. A queued turn waits for the next turn's flush, or
for `flush_if_due()`, which a batch calls as soon as it is waiting on a slow turn.
"""

from __future__ import annotations

import functools
import json
import math
import threading
import time
import uuid
import weakref
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import duckdb

from ..context_policy import next_position
from ..errors import ConversationMoved, TraceStoreError
from ..payload import Payload
from ..types import TurnRecord
from ..config import lock_timeout
from .connect import OPTIMIZER_OFF, OPTIMIZER_ON, sql_string, write_connection
from .grouped import Batch, Groups
from .kept import Keeper
from .lake import TURN_WRITE_BACKOFF, WRITE_TOKEN, is_team_store, lost_to_another_writer
from .migrate import migrate
from .rows import SHARED_TABLES, TURN_TABLES, Row, ablation_rows, claim_rows, run_row, turn_rows
from .tables import SCHEMAS

_MAX_RETRY_S = 30.0
#: Times a write is placed again when the unique index on (conversation_id, position) refused it (m017).
_PLACE_RETRIES = 3
#: Positions kept for `TraceWriter.placed` (the oldest are forgotten: a batch never asks for them).
_MAX_PLACED = 10_000
_MIGRATED: set[str] = set()  # paths migrated by this process (migrate() runs once per file per process)
#: `runs.kind` of the turns the app's Compare page asks (one run per column of a job, `TraceWriter.new_run`): its
#: columns' conversations are no conversation of the chat's (`conversations.list_conversations(skip_kinds=…)`).
COMPARE_RUN = "compare"
_PROCESS_RUNS: dict[tuple[str, str], str] = {}  # (database, configuration) → interactive run_id, per process


def _rollback(con) -> None:
    try:
        con.execute("ROLLBACK")
    except duckdb.Error:  # the failure came before BEGIN took effect: nothing to undo
        pass
    try:  # a failure between `_place` and the first insert left the optimizer on (the connection is reused)
        con.execute(OPTIMIZER_OFF)
    except duckdb.Error:
        pass


#: The in-memory database of the writes' host (connect.write_connection) that holds the current trace schema.
TEMPLATE = "wb_schema_template"
_TEMPLATE_LOCK = threading.Lock()
_NEW_FILES = [0]  # new trace files this process has created


def schema_template(con) -> str | None:
    """`TEMPLATE`, a new file's schema to copy (migrate.py), once this process creates its second new trace file:
    built then by running the migrations in memory on the writes' host (`con` is a cursor of it), and kept with the
    host. A process that creates one file (a CLI `ask`) runs its migrations, as it always did."""
    with _TEMPLATE_LOCK:
        attached = f"SELECT count(*) FROM duckdb_databases() WHERE database_name = {sql_string(TEMPLATE)}"
        if con.execute(attached).fetchone()[0]:
            return TEMPLATE
        _NEW_FILES[0] += 1
        if _NEW_FILES[0] < 2:
            return None
        builder = con.cursor()
        try:
            builder.execute(f"ATTACH ':memory:' AS {TEMPLATE}; USE {TEMPLATE}")
            try:
                with _optimized(builder):
                    migrate(builder, path="the schema template")
            except BaseException:
                builder.execute(f"USE memory; DETACH {TEMPLATE}")
                raise
        finally:
            builder.close()
        return TEMPLATE


@contextmanager
def _optimized(con) -> Iterator[None]:
    """DuckDB's optimizer back on for a query that needs it (writer connections run without it)."""
    con.execute(OPTIMIZER_ON)
    try:
        yield
    finally:
        con.execute(OPTIMIZER_OFF)


def _literal(value: Any, ty: str) -> str:
    """`value` as a DuckDB literal of type `ty` (one of the trace tables' column types, `tables.SCHEMAS`).

    Why literals and not bound parameters: DuckDB 1.5's Python binding imports pandas (and with it pyarrow)
    the first time it converts any bound value other than None (it checks each value against `pandas.NA`):
    ~0.25 s of every traced `ask` process, for a turn whose write takes a few milliseconds. A string is
    quoted with its quotes doubled (DuckDB's only escape in a standard string); a NUL, which no SQL string
    can hold, is joined in with `chr(0)`."""
    if value is None:
        return "NULL"
    if ty.endswith("[]"):
        return "[" + ", ".join(_literal(v, ty[:-2]) for v in value) + "]"
    if ty == "BOOLEAN":
        return "true" if value else "false"
    if ty in ("INTEGER", "BIGINT"):
        return str(int(value))
    if ty == "DOUBLE":
        f = float(value)
        if not math.isfinite(f):
            return f"'{f}'::DOUBLE"
        text = repr(f)  # the shortest text that reads back as `f`; with an exponent DuckDB reads it as a DOUBLE
        return text if "e" in text else text + "e0"  # (a plain decimal literal is a DECIMAL first: an ulp off)
    text = value.isoformat() if isinstance(value, datetime) else str(value)
    if "\x00" in text:
        return "(" + " || chr(0) || ".join(sql_string(part) for part in text.split("\x00")) + ")"
    return sql_string(text)


#: The key of each table whose rows many turns share (rows.SHARED_TABLES): a row already stored is kept.
SHARED_KEYS = {"runs": "run_id", "passages": "passage_id", "audit_spans": "span_key"}


def _insert_sql(name: str, rows: list[Row], lake: bool = False, ignore: bool = True) -> str:
    """One bulk insert into table `name` (`_select_parts`: the rows as one JSON text literal), matched to the table's
    columns by name (`_literal` says why no parameters). A shared table's row already stored is skipped (unless not
    `ignore`: a row already stored is then a constraint error): by its primary key in a file (INSERT OR IGNORE), by
    its key read in the transaction on a team store, which has no keys (lake.py)."""
    shared = name in SHARED_TABLES and ignore
    if shared and lake:
        rows = list({r[SHARED_KEYS[name]]: r for r in rows}.values())
    head, tail = _select_parts(name)
    select = head + sql_string(_json_rows(name, rows)) + tail
    if shared and lake:
        key = SHARED_KEYS[name]
        return (f"INSERT INTO {name} BY NAME SELECT * FROM ({select}) AS new "
                f"WHERE new.{key} NOT IN (SELECT {key} FROM {name})")
    return f"{'INSERT OR IGNORE' if shared else 'INSERT'} INTO {name} BY NAME {select}"


@functools.cache
def _select_parts(name: str) -> tuple[str, str]:
    """A SELECT of table `name`'s columns, in two parts around the JSON text of its rows (`_json_rows`: a literal,
    or a prepared statement's parameter): read by DuckDB's JSON reader (`json_transform_strict`), each column's
    values as a list of the texts of their SQL literals (`_json_text`), cast to the column's type as a list literal
    of those texts would be, the lists unnested side by side.

    Why JSON: DuckDB parses and binds each element of a list literal as its own constant expression; one JSON text
    per statement reads ~3x faster (10,000 received spans: 0.17 against 0.43 s of DuckDB's time,
    benchmarks/README.md), and stays a literal (no bound parameter: no pandas)."""
    t = SCHEMAS[name]
    spec = ", ".join(f'"{col}": "VARCHAR[]{"[]" if ty.endswith("[]") else ""}"' for col, ty in zip(t.names, t.types))
    values = ", ".join(f'unnest(j.v."{col}"{"" if ty == "VARCHAR" else f"::{ty}[]"}) AS "{col}"'
                       for col, ty in zip(t.names, t.types))
    return f"SELECT {values} FROM (SELECT json_transform_strict(", f", '{{{spec}}}') AS v) AS j"


def _json_rows(name: str, rows: list[Row]) -> str:
    """The JSON text of `rows` of table `name` that `_select_parts` reads: an object of one list per column."""
    t = SCHEMAS[name]
    return json.dumps({col: _column_texts(values, ty) for col, ty, values in zip(t.names, t.types, _columns(name, rows))},
                      ensure_ascii=False, check_circular=False)


def _column_texts(values: list[Any], ty: str) -> list[Any]:
    """`_json_text` of each of a column's values; text and integers, most values, without a call each."""
    if ty == "VARCHAR":
        return [v if type(v) is str or v is None else _json_text(v, ty) for v in values]
    if ty in ("INTEGER", "BIGINT"):
        return [str(v) if type(v) is int else _json_text(v, ty) for v in values]
    return [_json_text(v, ty) for v in values]


def _json_text(value: Any, ty: str) -> Any:
    """`value` for `_json_rows`: the text of its SQL literal (`_literal`), which DuckDB casts to `ty` as it reads that
    literal (a DOUBLE's shortest exact text, 'inf' and 'nan' included, reads back bit for bit); a list column's value
    as a list of them; None as null."""
    if value is None:
        return None
    if ty.endswith("[]"):
        return [_json_text(v, ty[:-2]) for v in value]
    if ty == "BOOLEAN":
        return "true" if value else "false"
    if ty in ("INTEGER", "BIGINT"):
        return str(int(value))
    if ty == "DOUBLE":
        return repr(float(value))
    return value.isoformat() if isinstance(value, datetime) else str(value)


def _columns(name: str, rows: list[Row]) -> list[list[Any]]:
    """The rows of `name` (dicts keyed by column name) as one list per column, in the table's order; a column
    a row leaves out is NULL, a key that is no column of the table is refused (never dropped silently)."""
    names = SCHEMAS[name].names
    unknown = set().union(*rows).difference(names)
    if unknown:
        raise ValueError(f"trace table {name} has no column {', '.join(sorted(unknown))}")
    return [[r.get(n) for r in rows] for n in names]


def _insert(con, table: str, sql: str) -> None:
    """Run one insert into `table` (tests stall or fail it by table)."""
    con.execute(sql)


#: The inserts prepared on each kept connection (`TraceWriter.kept`), by statement name.
_PREPARED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _insert_prepared(con, begin: str, name: str, rows: list[Row], ignore: bool) -> None:
    """`_insert_sql`'s insert into a file's table as a statement prepared once per connection (`PREPARE`), run with
    its rows' JSON text as its argument (`EXECUTE stmt('…')`, a literal: no bound parameter). A connection kept for
    many writes (`collect`) parses, binds and plans each table's insert once, not once a write: ~0.5 ms a table."""
    shared = name in SHARED_TABLES and ignore
    stmt = f"workbench_{'merge' if shared else 'insert'}_{name}"
    prepared = _PREPARED.setdefault(con, set())
    if stmt not in prepared:
        head, tail = _select_parts(name)
        con.execute(f"PREPARE {stmt} AS {'INSERT OR IGNORE' if shared else 'INSERT'} INTO {name} BY NAME "
                    f"{head}$1::VARCHAR{tail}")
        prepared.add(stmt)
    _insert(con, name, f"{begin}EXECUTE {stmt}({sql_string(_json_rows(name, rows))})")


#: The last position of each conversation, read in the write transaction, with the optimizer on: the filter is then
#: pushed into the scan (measured at 1M turns: 0.9 ms for one conversation, 1.8 ms for a list, 4–14 ms without).
#: The ids are literals, not parameters (`_literal`).
_LAST_POSITIONS = """BEGIN; PRAGMA enable_optimizer;
SELECT conversation_id, max(position) FROM turns WHERE conversation_id IN ({}) GROUP BY conversation_id"""


def _place(con, turns: list[Row], if_moved: str) -> list[Row]:
    """`turns` with each conversation turn at the next free position of its conversation (queued turns of one
    conversation in their order), read inside the transaction this opens, so two writers never give one place
    twice. A turn asked as another position (the conversation moved while it ran: docs/design.md, "Concurrent
    turns of one conversation") is written there anyway, its `history_through` telling what it saw, unless
    `if_moved` is "raise" and another turn took its place: then `ConversationMoved` is raised and nothing is
    written. (A turn asked after turns the store does not have, whose writes failed, just takes the next place.)"""
    ids = sorted({r["conversation_id"] for r in turns})
    last = dict(con.execute(_LAST_POSITIONS.format(", ".join(_literal(i, "VARCHAR") for i in ids))).fetchall())
    placed = []
    for r in turns:
        position = next_position([last.get(r["conversation_id"])])
        if if_moved == "raise" and r.get("position") is not None and position > r["position"]:
            raise ConversationMoved(r["conversation_id"], r["position"], position - 1)
        last[r["conversation_id"]] = position
        placed.append({**r, "position": position})
    return placed


def _commit(con, rows: dict[str, list[Row]], if_moved: str = "append", lake: bool = False,
            fresh: frozenset[str] = frozenset(), prepared: bool = False) -> dict[str, list[Row]]:
    """One transaction: for each table with rows, one `INSERT … BY NAME SELECT unnest(…) AS col, …` of the rows
    as one JSON text literal (`_insert_sql`; BEGIN is sent with the first), or with `prepared` (a kept connection:
    `collect`) that insert prepared once on the connection and run with the text (`_insert_prepared`); then COMMIT.

    Why this shape (measured, benchmarks/trace_write.py and benchmarks/traced_ask.py): each statement costs
    DuckDB ~0.5–1 ms here whatever its size, so a turn is one statement per table it touches; row-by-row
    `executemany` is never used. Scanning an Arrow table (an earlier shape) made DuckDB import pandas (and the
    writer pyarrow): ~1 s of a traced `ask` process; so does, on DuckDB 1.5, binding any parameter (`_literal`).
    One list per column converts ~4× faster than one list of row structs; one JSON text ~3× faster than the list
    literals that came before it.

    Conversation turns are placed first (`_place`: one more statement, which opens the transaction); the rows
    as written are returned. A shared table in `fresh` is inserted as new rows (a row already stored is then a
    constraint error, which the caller handles; never on a team store).
    """
    tables = ("runs", *TURN_TABLES)
    unknown = set(rows).difference(tables)
    if unknown:  # never dropped silently
        raise ValueError(f"no trace table {', '.join(sorted(unknown))} is written with a turn (rows.TURN_TABLES)")
    begin = "BEGIN; "  # sent with the first statement (parameters bind to a script's last statement)
    talk = [r for r in rows.get("turns", ()) if r.get("conversation_id") is not None]
    if talk:
        placed = iter(_place(con, talk, if_moved))
        rows = {**rows, "turns": [next(placed) if r.get("conversation_id") is not None else r for r in rows["turns"]]}
        begin = OPTIMIZER_OFF + "; "
    todo = rows
    if lake:  # keyed by DuckLake's conflict detection (lake.TOKENS_TABLE): a turn already stored is skipped
        stored = _claim(con, begin, [r["turn_id"] for r in rows.get("turns", ())])
        todo = {name: [r for r in rs if r.get("turn_id") not in stored] for name, rs in rows.items()} if stored else rows
        begin = ""
    for name in tables:
        r = todo.get(name)
        if r:
            ignore = name not in fresh or lake
            if prepared and not lake:
                _insert_prepared(con, begin, name, r, ignore)
            else:
                _insert(con, name, begin + _insert_sql(name, r, lake, ignore))
            begin = ""
    con.execute(begin + "COMMIT")
    return rows


def _claim(con, begin: str, turn_ids: list[str]) -> set[str]:
    """On a team store: update the write token (lake.WRITE_TOKEN: another write that overlaps this one cannot
    also commit) and return which of `turn_ids` are already stored, both in the transaction."""
    if not turn_ids:
        con.execute(begin + WRITE_TOKEN)
        return set()
    ids = ", ".join(_literal(t, "VARCHAR") for t in turn_ids)
    return {t for (t,) in con.execute(f"{begin}{WRITE_TOKEN}; SELECT turn_id FROM turns WHERE turn_id IN ({ids})")
            .fetchall()}


class TraceWriter:
    """Writes turns to the DuckDB file at `path` (created and migrated on first use)."""

    def __init__(self, path: str | Path, *, timeout: float | None = None):
        self.path = Path(path)
        self._lake = is_team_store(path)  # a team store (lake.py): no keys, so shared rows are inserted by key
        self.timeout = timeout if timeout is not None else lock_timeout()
        self._written_runs: set[str] = set()
        self._new_runs: dict[str, Row] = {}  # run_id → `runs` row, written with the run's first turn
        # run_id → (kind, run_key, eval settings), its row built at its first turn
        self._declared: dict[str, tuple[str, str | None, dict[str, Any] | None]] = {}
        self._passages: set[str] = set()  # passage ids this writer has committed
        self._queue: list[dict[str, Any]] | None = None
        self._flush_at = 0
        self._flush_age = 0.0
        self._queued_since = 0.0
        self._retry_at = 0.0  # after a failed flush, the next try waits (backoff) instead of blocking every turn
        self._retry_delay = 0.0
        self._placed: dict[str, int] = {}  # turn_id → the position it was written at (`placed`), oldest first
        # Turns and flushes may come from several threads (browser sessions sharing the app's cached Session,
        # threads sharing a notebook's): one at a time.
        self._lock = threading.RLock()
        self._keeper: Keeper | None = None  # while `kept()`
        self._staged: dict[str, list[Row]] = {}  # written with the next flush (`stage`)
        self._local = threading.local()  # `batch`: this thread's rows while inside `batch()`
        self.groups = Groups()  # batches waiting for a group write (`batch`, `written`)
        #: Called with each turn's rows (plus its `runs` row when this writer has it) once they are committed,
        #: e.g. live OTLP export (trace/live.py). A listener must return at once and never raise.
        self.listeners: list[Callable[[dict[str, list[Row]]], None]] = []

    # --- connections -------------------------------------------------------------------------

    @contextmanager
    def connect(self) -> Iterator:
        """A read-write connection on a migrated database, closed on exit (the file lock is released), unless the
        writer keeps the file attached (`kept`).

        Any DuckDB failure inside (a damaged file, a value the schema cannot hold) leaves as a
        `TraceStoreError` naming the file; constraint violations pass through for the callers that
        handle them (a duplicate turn in a retried flush)."""
        keeper = self._keeper
        if keeper is None:
            with self._attached() as con:
                yield con
            return
        with self._lock:
            failed = True
            try:
                con = keeper.get()
                with self._store_errors():
                    yield con
                failed = False
            finally:
                keeper.used(failed=failed)

    @contextmanager
    def _attached(self) -> Iterator:
        """The file attached for the time of the block (connect.write_connection), migrated once per process."""
        with self._store_errors(), write_connection(self.path, timeout=self.timeout) as con:
            key = str(self.path.resolve())
            if key not in _MIGRATED:
                with _optimized(con):  # migrations may join and backfill over a large database
                    migrate(con, path=str(self.path), template=functools.partial(schema_template, con))
                _MIGRATED.add(key)
            yield con

    @contextmanager
    def _store_errors(self) -> Iterator[None]:
        try:
            yield
        except duckdb.ConstraintException:
            raise
        except duckdb.Error as exc:
            raise TraceStoreError(f"could not write to trace database {self.path}: {exc}") from None

    @contextmanager
    def kept(self, *, idle_s: float, hold_s: float) -> Iterator[Keeper | None]:
        """Keep the file attached between this writer's writes (`collect`: one write per OTLP request), given up
        as `kept.Keeper` says (idle `idle_s`, held `hold_s`, someone queued for it, a failed write) and on exit.
        A watcher thread gives it up between writes. A team store has no file to keep (None is yielded)."""
        if self._lake:
            yield None
            return
        keeper, stop = Keeper(self._attached, self.path, idle_s=idle_s, hold_s=hold_s), threading.Event()

        def watch() -> None:
            while not stop.wait(min(idle_s, 0.05)):
                with self._lock:
                    keeper.tick()

        with self._lock:
            self._keeper = keeper
        watcher = threading.Thread(target=watch, name="trace-file-keeper", daemon=True)
        watcher.start()
        try:
            yield keeper
        finally:
            stop.set()
            watcher.join()
            with self._lock:
                self._keeper = None
                keeper.release()

    def prepare(self) -> None:
        """Pay the first write's one-time costs now (a batch calls it before its first turn, so that turn's
        flush is only its write): create and migrate the file unless this process already did. A file another
        process holds is left to the first write, which retries it and reports a failure."""
        if str(self.path.resolve()) in _MIGRATED:
            return
        try:
            with self.connect():
                pass
        except TraceStoreError:
            pass

    # --- runs --------------------------------------------------------------------------------

    def run_for(self, config: dict[str, Any]) -> str:
        """The interactive run for this configuration in this process (shared by every writer of the same
        file, e.g. each Session the app creates); its row is written with its first turn (INSERT OR IGNORE)."""
        key = (str(self.path.resolve()), repr(sorted((k, repr(v)) for k, v in config.items())))
        run_id = _PROCESS_RUNS.setdefault(key, uuid.uuid4().hex)
        if run_id not in self._written_runs and run_id not in self._new_runs:
            self._new_runs[run_id] = run_row(run_id, config, "interactive")
        return run_id

    def new_run(self, *, kind: str = "eval", run_key: str | None = None,
                settings: dict[str, Any] | None = None) -> str:
        """Declare a run; its row is written with its first turn, from that turn's configuration (and an eval's
        `settings`, `runs.eval_settings_json`, which a resume compares)."""
        run_id = uuid.uuid4().hex
        self._declared[run_id] = (kind, run_key, settings)
        return run_id

    def resume_run(self, run_id: str) -> None:
        """Log further turns into an existing run (its row is already written)."""
        self._written_runs.add(run_id)

    # --- turns -------------------------------------------------------------------------------

    def log_turn(self, record: TurnRecord, payload: Payload, *, claims: Iterable[Any] | None = None,
                 run_id: str | None = None, ablations: Iterable[dict[str, Any]] | None = None,
                 line: int | None = None, if_moved: str = "append", topic: Any = None) -> str:
        """Write one turn (all its tables, one transaction) and return its turn_id; `ablations` are the rows
        of its verification (`Verification.rows()`), when it was verified before being written; `line` is the
        line of an eval's questions file it answered (`turn_lines`).

        A conversation turn takes the next free position of its conversation (`placed` tells which). When
        that is not the position it was asked as (another turn landed while it ran), `if_moved="raise"`
        raises `ConversationMoved` and writes nothing, for the caller to ask it again with the new history;
        a queued turn (`buffered`) is always written after the others. `topic` (`corpus.Topic`) is how its
        question met the corpus (the doc-gap kind, m017)."""
        if run_id is None or run_id not in self._new_runs:  # (a known run: nothing to do, no wait for a write)
            with self._lock:  # run bookkeeping and the queue are shared by every thread using this writer
                run_id = run_id or self.run_for(record.config)
                if run_id in self._declared and run_id not in self._new_runs:
                    kind, run_key, settings = self._declared[run_id]
                    self._new_runs[run_id] = run_row(run_id, record.config, kind, run_key, settings=settings)
        rows = turn_rows(record, payload, run_id, claims, topic)  # outside the lock: threads build rows in parallel
        if ablations:
            rows["ablations"] = ablation_rows(payload.turn_id, ablations)
        if line is not None:
            rows["turn_lines"] = [{"turn_id": payload.turn_id, "run_id": run_id, "line": line}]
        batch = getattr(self._local, "batch", None)
        if batch is not None:  # this thread's own batch (`batch`): written by its group, not here
            batch.queued.append({"run_id": run_id, "turn_id": payload.turn_id, "rows": rows})
            return payload.turn_id
        with self._lock:
            if self._queue is not None:
                if not self._queue:
                    self._queued_since = time.monotonic()
                self._queue.append({"run_id": run_id, "turn_id": payload.turn_id, "rows": rows})
                now = time.monotonic()
                due = len(self._queue) >= self._flush_at or now - self._queued_since >= self._flush_age
                if due and now >= self._retry_at:
                    self._flush()
            else:
                with self.connect() as con:
                    self._write(con, {run_id}, rows, if_moved=if_moved)
                self._notify([{"run_id": run_id, "rows": rows}])
        return payload.turn_id

    def _notify(self, written: list[dict[str, Any]]) -> None:
        for listener in self.listeners:
            for item in written:
                run = self._new_runs.get(item["run_id"])
                listener({**item["rows"], "runs": [run]} if run else item["rows"])

    @contextmanager
    def buffered(self, max_turns: int = 50, max_age_s: float = 0.5) -> Iterator["TraceWriter"]:
        """Queue turns and flush every `max_turns` turns or `max_age_s` seconds (and on exit)."""
        self._queue, self._flush_at, self._flush_age = [], max_turns, max_age_s
        try:
            yield self
        finally:
            try:
                self.flush()
            except TraceStoreError as exc:
                raise TraceStoreError(f"{exc} ({len(self._queue or ())} buffered turns were not written)") from None
            finally:
                self._queue = None

    def flush(self) -> int:
        """Write every queued turn on one connection, in one transaction (whole turns only); return how many.

        Grouping whole turns keeps the guarantee that matters — a crash leaves no partial turn — while
        paying DuckDB's per-statement cost (~1 ms an INSERT) once per flush instead of once per turn.
        If the group fails on a duplicate turn, the turns are retried one transaction each.

        A flush that fails (the file stayed locked, the disk is full…) keeps every turn queued and
        raises: the next flush retries them after a backoff (1 s, doubling to 30 s), and turns still
        queued when a batch ends are taken with `take_unflushed()` and reported — never dropped.
        """
        with self._lock:
            return self._flush()

    def _flush(self) -> int:
        staged, self._staged = self._staged, {}
        if not self._queue and not staged:
            return 0
        queued = self._queue or []
        try:
            self._write_queued(staged, queued)
        except BaseException:  # staged rows are not kept: their request is answered 503 and sent again
            self._retry_delay = min(_MAX_RETRY_S, max(1.0, self._retry_delay * 2))
            self._retry_at = time.monotonic() + self._retry_delay
            raise
        self._queue = []
        self._retry_at = self._retry_delay = 0.0
        self._notify(queued)  # after the commit, so a listener never sees a turn the file does not hold
        return len(queued)

    def _write_queued(self, staged: dict[str, list[Row]], queued: list[dict[str, Any]]) -> None:
        """Staged rows (`stage`) and queued turns in one transaction (under the writer's lock); when that meets a row
        already stored, the staged rows are written keeping the stored ones, and each turn alone (one already
        written, by an earlier try that got through, is skipped)."""
        with self._lock, self.connect() as con:
            merged: dict[str, list[Row]] = {name: list(rows) for name, rows in staged.items()}
            for item in queued:
                for name, rows in item["rows"].items():
                    merged.setdefault(name, []).extend(rows)
            runs = {item["run_id"] for item in queued}
            try:
                self._write(con, runs, merged, strict=True, fresh=frozenset(staged))
            except duckdb.ConstraintException:
                if staged:  # a row already stored (an exporter's retry) is kept as it was
                    self._write(con, set(), staged)
                for item in queued:
                    self._write(con, {item["run_id"]}, item["rows"])

    @contextmanager
    def batch(self) -> Iterator[Batch]:
        """Inside, this thread's turns (`log_turn`) and staged rows (`stage`) are gathered in a batch of its own; on
        exit (whatever happened inside) the batch joins the next group write, for `written(batch)` to wait for
        (grouped.py: several requests' rows in one transaction, `collect`)."""
        batch = Batch()
        self._local.batch = batch
        try:
            yield batch
        finally:
            self._local.batch = None
            self.groups.join(batch)

    def written(self, batch: Batch) -> None:
        """Return once `batch` (`batch()`) is committed with its group (this thread writes the group when no other
        is being written); raise `TraceStoreError` when the group failed (none of its rows is stored)."""
        self.groups.written(batch, self._write_group)
        if batch.error is not None:
            raise TraceStoreError(f"could not write to trace database {self.path} ({len(batch.queued)} turns, "
                                  f"written with other requests): {type(batch.error).__name__}: {batch.error}")

    def _write_group(self, group: list[Batch]) -> None:
        staged: dict[str, list[Row]] = {}
        for b in group:
            for name, rows in b.staged.items():
                staged.setdefault(name, []).extend(rows)
        queued = [item for b in group for item in b.queued]
        if staged or queued:
            self._write_queued(staged, queued)
            self._notify(queued)  # after the commit, so a listener never sees a turn the file does not hold

    def flush_if_due(self, max_age_s: float | None = None) -> int:
        """Flush the queue if its oldest turn has waited `max_age_s` (default: `buffered`'s) and no failed
        flush is backing off; return how many turns it wrote. A batch waiting on a slow turn calls it with 0,
        so the turns already finished reach the file without waiting for the next one (`batch.run_eval`).
        Raises like `flush`."""
        age = self._flush_age if max_age_s is None else max_age_s
        with self._lock:
            now = time.monotonic()
            if not self._queue or now - self._queued_since < age or now < self._retry_at:
                return 0
            return self._flush()

    def pending_turn_ids(self) -> list[str]:
        """Turns queued and not yet written (after a failed flush, the ones waiting for the retry)."""
        with self._lock:
            return [item["turn_id"] for item in self._queue or ()]

    def take_unflushed(self) -> list[str]:
        """Give up on the queued turns: return their ids (the caller reports them) and empty the queue."""
        with self._lock:
            ids = self.pending_turn_ids()
            if self._queue:
                self._queue = []
            return ids

    def _write(self, con, run_ids: set[str], rows: dict[str, list[Row]], strict: bool = False,
               if_moved: str = "append", fresh: frozenset[str] = frozenset()) -> None:
        """One transaction: new run rows, then every table of the turn(s); all or nothing. A conversation
        position another writer took first (the unique index, m017) is placed again, up to `_PLACE_RETRIES`."""
        new_runs = [self._new_runs[r] for r in sorted(run_ids) if r not in self._written_runs and r in self._new_runs]
        # Passages repeat across turns (the same chunk, asked again): skip those this writer already stored.
        # Their INSERT OR IGNORE costs ~1.5 ms a turn even when nothing is new (benchmarks/README.md).
        passages = {p["passage_id"]: p for p in rows.get("passages", ()) if p["passage_id"] not in self._passages}
        rows = {**rows, "passages": list(passages.values())}
        attempt = lost = 0
        while True:
            try:
                written = _commit(con, {**rows, "runs": new_runs} if new_runs else rows, if_moved, self._lake, fresh,
                                  prepared=self._keeper is not None)
                break
            except duckdb.ConstraintException as exc:
                _rollback(con)
                attempt += 1
                if "position" in str(exc) and "turn_id" not in str(exc) and attempt <= _PLACE_RETRIES:
                    continue  # the place was taken between the read and the insert: read the next free one again
                if strict:
                    raise
                if "Duplicate key" in str(exc) and "turn_id" in str(exc):
                    return  # the same turn written twice (e.g. a retried flush): it is already complete
                raise TraceStoreError(f"could not write turn to {self.path}: {exc}") from None
            except duckdb.Error as exc:  # a team store: another write came first
                _rollback(con)
                if not (self._lake and lost_to_another_writer(exc)) or lost >= TURN_WRITE_BACKOFF.tries:
                    raise
                lost += 1
                TURN_WRITE_BACKOFF.pause(lost)
            except BaseException:
                _rollback(con)
                raise
        self._written_runs.update(run_ids)
        self._passages.update(passages)
        for row, w in zip(rows.get("turns", ()), written.get("turns", ())):
            if row.get("conversation_id") is not None:  # the caller's rows say where the turn went (listeners)
                row["position"] = self._placed[row["turn_id"]] = w["position"]
                if len(self._placed) > _MAX_PLACED:
                    del self._placed[next(iter(self._placed))]

    def placed(self, turn_id: str) -> int | None:
        """The position this writer gave conversation turn `turn_id` (forgotten once asked), or None: not a
        conversation turn, not written yet (a queued one), or long ago. It differs from the position the turn
        was asked as when another turn of the conversation landed while it ran."""
        with self._lock:
            return self._placed.pop(turn_id, None)

    def log_spans(self, rows: list[Row]) -> int:
        """Store received spans (`audit_spans` rows, docs/design.md §12) in one transaction; a span already
        stored (an exporter's retry) is kept as it was. Returns how many rows were offered."""
        if not rows:
            return 0
        with self._lock, self.connect() as con:
            if not self._lake:  # first as new spans: a plain INSERT costs two thirds of an INSERT OR IGNORE
                try:
                    con.execute("BEGIN; " + _insert_sql("audit_spans", rows, ignore=False))
                    con.execute("COMMIT")
                    return len(rows)
                except duckdb.ConstraintException:  # one was stored already (a retry): each kept as it was
                    _rollback(con)
            self._write(con, set(), {"audit_spans": rows})
        return len(rows)

    def stage(self, rows: dict[str, list[Row]]) -> None:
        """Rows of shared tables (`audit_spans`) written with the queued turns, in the same transaction, at the next
        flush (`buffered`) or with this thread's batch (`batch`): `collect` writes a request's spans and turns with
        one commit. Inserted as new rows first; when one is already stored (an exporter's retry), the flush writes
        them again keeping the stored ones."""
        unknown = set(rows).difference(SHARED_KEYS)
        batch = getattr(self._local, "batch", None)
        if unknown or (self._queue is None and batch is None):
            raise ValueError(f"only shared tables' rows are staged, inside `buffered` or `batch`: not {sorted(unknown)}")
        if batch is not None:
            for name, table_rows in rows.items():
                batch.staged.setdefault(name, []).extend(table_rows)
            return
        with self._lock:
            for name, table_rows in rows.items():
                self._staged.setdefault(name, []).extend(table_rows)

    def stored_turn_ids(self, turn_ids: list[str]) -> set[str]:
        """Those of `turn_ids` already stored (an audit ingesting the same spans again writes them once)."""
        if not turn_ids:
            return set()
        with self._lock, self.connect() as con:
            rows = con.execute("SELECT turn_id FROM turns WHERE turn_id IN (SELECT unnest(?::VARCHAR[]))",
                               [turn_ids]).fetchall()
        return {r[0] for r in rows}

    def add_claims(self, turn_id: str, claims: Iterable[Any]) -> int:
        """Add faithfulness claims to a turn already logged (one transaction); return how many."""
        return self._add(turn_id, "claims", claim_rows(turn_id, claims))

    def add_ablations(self, turn_id: str, ablations: Iterable[dict[str, Any]]) -> int:
        """Add a verification's rows (`Verification.rows()`) to a turn already logged, without rewriting the
        turn (one transaction); return how many."""
        return self._add(turn_id, "ablations", ablation_rows(turn_id, ablations))

    def _add(self, turn_id: str, table: str, rows: list[Row]) -> int:
        if not rows:
            return 0
        with self.connect() as con:
            with _optimized(con):  # the filter pushed into the scan: 0.9 vs 31 ms at 1M turns
                known = con.execute("SELECT 1 FROM turns WHERE turn_id = ?", [turn_id]).fetchone() is not None
            if not known:
                raise TraceStoreError(f"no turn {turn_id!r} in {self.path}; log the turn before adding its {table}")
            self._write(con, set(), {table: rows}, strict=True)  # strict: errors pass through as they are
        return len(rows)
