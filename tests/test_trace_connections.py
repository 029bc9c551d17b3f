"""The writer's connections: each write attaches the trace file to this process's in-memory DuckDB and
detaches it after; the file lock is held exactly while writing; this process's own connections to one
file take turns (DuckDB's POSIX lock is dropped by any second open of the file in the same process)."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
import uuid

import duckdb
import pytest

from workbench.errors import TraceStoreError
from workbench.provenance import sources_payload
from workbench.trace import TraceReader
from workbench.trace import connect as C
from workbench.trace.writer import TraceWriter
from workbench.types import ResultItem, ToolCall, TurnRecord


def _turn(i: int) -> TurnRecord:
    call = ToolCall("search", "snippet", {"query": f"q{i}"},
                    tuple(ResultItem(f"doc-{j}", f"Doc {j}", rank=j + 1, score=1.0) for j in range(5)))
    return TurnRecord(question=f"How do I do thing {i}?", answer="See [Doc 1](doc-1).", tool_calls=(call,),
                      turn_id=uuid.uuid4().hex, config={"provider": "offline", "mode": "agent"})


def _open_elsewhere(db) -> str:
    """Open the file read-only from another process: 'ok' or its error."""
    code = "import duckdb, sys; duckdb.connect(sys.argv[1], read_only=True).close(); print('ok')"
    r = subprocess.run([sys.executable, "-c", code, str(db)], capture_output=True, text=True, timeout=60)
    return r.stdout.strip() or r.stderr.strip().splitlines()[-1]


def _attached() -> list[str]:
    return [n for (n,) in C._host().execute("SELECT database_name FROM duckdb_databases()").fetchall()
            if n.startswith("trace_")]


def test_the_file_is_locked_while_a_write_holds_it_and_free_after(tmp_path):
    db = tmp_path / "t.duckdb"
    w = TraceWriter(db)
    with w.connect() as con:
        assert con.execute("SELECT count(*) FROM turns").fetchone() == (0,)  # the trace file is the default
        assert "Could not set lock" in _open_elsewhere(db)
        assert len(_attached()) == 1
    assert _attached() == []
    assert _open_elsewhere(db) == "ok"
    t = _turn(0)
    w.log_turn(t, sources_payload(t))
    assert _open_elsewhere(db) == "ok"
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT turn_id FROM turns").fetchall() == [(t.turn_id,)]


def test_a_second_connection_in_the_same_thread_is_refused_at_once_and_keeps_the_lock(tmp_path):
    db = tmp_path / "t.duckdb"
    w = TraceWriter(db)
    with w.connect():
        t0 = time.monotonic()
        with pytest.raises(TraceStoreError, match="already open in this thread"):
            TraceReader(db, timeout=20).rows("SELECT count(*) FROM turns")
        assert time.monotonic() - t0 < 5
        assert "Could not set lock" in _open_elsewhere(db)  # the refused open did not drop the file lock


def test_a_failed_write_detaches_and_the_next_write_works(tmp_path):
    db = tmp_path / "t.duckdb"
    w = TraceWriter(db)
    with pytest.raises(TraceStoreError):  # a DuckDB failure inside leaves as a TraceStoreError naming the file
        with w.connect() as con:
            con.execute("BEGIN")
            con.execute("SELECT * FROM no_such_table")
    assert _attached() == []
    t = _turn(1)
    w.log_turn(t, sources_payload(t))
    assert TraceReader(db).rows("SELECT count(*) FROM turns")[1] == [(1,)]


def test_threads_writing_and_reading_one_file_take_turns(tmp_path):
    db = tmp_path / "t.duckdb"
    errors: list[BaseException] = []
    written: list[str] = []
    stop = threading.Event()

    def write(k: int) -> None:
        w = TraceWriter(db)
        try:
            for i in range(15):
                t = _turn(k * 100 + i)
                written.append(w.log_turn(t, sources_payload(t)))
        except BaseException as exc:  # noqa: BLE001 (reported below)
            errors.append(exc)

    def read() -> None:
        r = TraceReader(db)
        try:
            while not stop.is_set():
                r.rows("SELECT count(*) FROM turn_sets")
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    t = _turn(-1)
    TraceWriter(db).log_turn(t, sources_payload(t))  # the file exists before the reader starts
    threads = [threading.Thread(target=write, args=(k,)) for k in range(3)]
    reader = threading.Thread(target=read)
    reader.start()
    for th in threads:
        th.start()
    for th in threads:
        th.join(120)
    stop.set()
    reader.join(60)
    assert errors == []
    _, rows = TraceReader(db).rows("SELECT turn_id, n_retrieved FROM turns")
    assert {r[0] for r in rows} == set(written) | {t.turn_id} and all(n == 5 for _, n in rows)
    assert TraceReader(db).rows("SELECT count(*) FROM retrieved_items")[1] == [(5 * 46,)]
    assert _attached() == []


def test_writes_run_without_the_optimizer_and_lookups_with_it(tmp_path):
    from workbench.trace.writer import _optimized

    def setting(con):  # DuckDB 1.5 has no setting to read: the plan tells whether the optimizer ran (without it,
        # a FILTER operator above the scan; with it, the filter is pushed into the scan or the scan pruned)
        return "FILTER" not in con.execute("EXPLAIN SELECT 1 FROM turns WHERE turn_id = 'x'").fetchall()[0][1]

    w, t = TraceWriter(tmp_path / "t.duckdb"), _turn(0)
    w.log_turn(t, sources_payload(t))
    lookup = "EXPLAIN SELECT 1 FROM turns WHERE turn_id = ?"
    with w.connect() as con:
        assert setting(con) is False
        assert "Filters:" not in con.execute(lookup, [t.turn_id]).fetchall()[0][1]  # a scan, then a filter
        with _optimized(con):
            assert setting(con) is True
            assert "Filters:" in con.execute(lookup, [t.turn_id]).fetchall()[0][1]  # pushed into the scan
        assert setting(con) is False


def test_a_writer_waits_for_queued_readers_before_its_turn_in_this_process_not_while_holding_it(tmp_path, monkeypatch):
    """A writer waits (at most YIELD_S) for a reader that found the file taken; a reader of this process waits for
    this process's turn, so a writer that waited while holding that turn waited the whole YIELD_S for nothing, on
    every write while the app's explorer or a thread reads (measured: 11 s of the threads test above idle)."""
    import os

    db = tmp_path / "t.duckdb"
    holding: list[bool] = []
    real = C._yield_to_readers

    def spy(marker):
        holding.append(os.path.realpath(db) in C._HELD.__dict__.get("paths", set()))
        return real(marker)

    monkeypatch.setattr(C, "_yield_to_readers", spy)
    t = _turn(0)
    TraceWriter(db).log_turn(t, sources_payload(t))
    with C.connection(db, read_only=False, timeout=5) as con:
        con.execute("SELECT 1")
    assert len(holding) == 2 and not any(holding), holding
