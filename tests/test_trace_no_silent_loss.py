"""Nothing is lost silently (issue 17, item 3), with real processes holding the DuckDB file lock.

- A flush that cannot get the file keeps its turns and retries them; turns that still cannot be
  written count as failed, `eval` warns and exits non-zero, and the resume asks them again — with one
  worker and with `--concurrency 4` (workers answer, the main thread writes in question order).
- No reader holds writers off without bound: user queries stop after a time limit.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

from clirun import cli
from conftest import ROOT
from workbench.batch import run_eval
from workbench.errors import TraceStoreError
from workbench.session import Session

QUESTIONS = [json.loads(line)["question"] for line in (ROOT / "data" / "demo_gold.jsonl").read_text().splitlines()
             if line.strip()][:12]

HOLDER = """
import sys, time, duckdb
con = duckdb.connect(sys.argv[1], read_only=True)
print("locked", flush=True)
time.sleep(float(sys.argv[2]))
con.close()
print("released", flush=True)
"""


def _hold(db: Path, seconds: float) -> subprocess.Popen:
    """Another process holding the file (a read-only connection blocks every writer) for `seconds`."""
    p = subprocess.Popen([sys.executable, "-c", HOLDER, str(db), str(seconds)], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "locked"
    return p


def _stop(p: subprocess.Popen) -> None:
    p.kill()
    p.wait()


def _count(db: Path, sql: str = "SELECT count(*) FROM turns"):
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(sql).fetchone()[0]
    finally:
        con.close()


@pytest.fixture(scope="module")
def one_turn(tmp_path_factory):
    path = tmp_path_factory.mktemp("one-turn") / "t.duckdb"
    Session.open(trace_db=path).ask("How do I configure SSO?")  # the file exists, so a reader can hold it
    return path


@pytest.fixture
def db(one_turn, tmp_path):
    """A trace database holding one turn: a copy of the module's (a new one costs its migrations' commits)."""
    path = tmp_path / "t.duckdb"
    shutil.copyfile(one_turn, path)
    return path


@pytest.mark.parametrize("concurrency", [1, 4])
def test_a_flush_blocked_for_a_while_keeps_its_turns_and_writes_them_later(db, concurrency):
    """Before the fix the blocked flush dropped its turns and the batch still reported 0 failed."""
    session = Session.open(trace_db=db)
    session.tracer.timeout = 0.1  # the lock wait of a flush (WORKBENCH_LOCK_TIMEOUT)
    questions = QUESTIONS * 10
    holder = _hold(db, 120)
    real_flush = session.tracer._flush
    failed_flushes = []

    def flush():  # the other process lets go once a flush has failed on its lock, wherever the flush ran: a
        try:       # turn's write, or the batch's idle flush while a slow turn runs (a loaded machine)
            return real_flush()
        except TraceStoreError:
            failed_flushes.append(len(session.tracer.pending_turn_ids()))
            _stop(holder)
            raise

    session.tracer._flush = flush
    try:
        result = run_eval(session, questions, progress=False, concurrency=concurrency)
    finally:
        _stop(holder)
    assert result.concurrency == concurrency
    assert result.asked == len(questions)
    assert failed_flushes and failed_flushes[0] > 0, "a flush failed with turns queued, and kept them"
    assert result.trace_error and "locked" in result.trace_error, "a flush did fail while the file was held"
    assert result.failed == 0 and result.unwritten == 0
    # every turn written by the retries, once, in question order
    assert _count(db, f"SELECT count(*) FROM turns WHERE run_id = '{result.run_id}'") == len(questions)
    con = duckdb.connect(str(db), read_only=True)
    try:
        stored = con.execute("SELECT turn_id, question FROM turns WHERE run_id = ?", [result.run_id]).fetchall()
    finally:
        con.close()
    assert [p.turn_id for p in result.payloads] == [t for t, _ in stored]
    assert [q for _, q in stored] == questions


@pytest.mark.parametrize("concurrency", [1, 4])
def test_turns_that_stay_unwritten_count_as_failed_and_the_resume_asks_them_again(db, concurrency):
    session = Session.open(trace_db=db)
    session.tracer.timeout = 0.05  # every flush fails: the file stays held
    holder = _hold(db, 60)
    try:
        result = run_eval(session, QUESTIONS, progress=False, concurrency=concurrency)
    finally:
        _stop(holder)
    assert result.asked == len(QUESTIONS)
    assert result.unwritten == len(QUESTIONS) and result.failed == len(QUESTIONS)
    assert result.trace_error and "locked" in result.trace_error
    assert _count(db) == 1
    again = run_eval(Session.open(trace_db=db), QUESTIONS, progress=False, concurrency=concurrency)
    assert again.asked == len(QUESTIONS) and again.failed == 0 and again.skipped == 0
    assert _count(db) == 1 + len(QUESTIONS)


def test_eval_warns_and_exits_non_zero_when_turns_could_not_be_stored(db, tmp_path):
    qfile = tmp_path / "q.jsonl"
    qfile.write_text("".join(json.dumps({"question": q}) + "\n" for q in QUESTIONS))
    holder = _hold(db, 120)
    try:  # `workbench eval` in this process (tests/clirun.py): the lock is held by the other process
        r = cli("eval", qfile, "--db", db, "--no-progress", "--concurrency", "4", env={"WORKBENCH_LOCK_TIMEOUT": "0.05"})
    finally:
        _stop(holder)
    assert r.returncode == 1, r.stderr
    assert "Traceback" not in r.stderr
    assert f"warning: {len(QUESTIONS)} turns could not be written" in r.stderr
    assert "run the same command again" in r.stderr
    rows = dict(line.rsplit(None, 1) for line in r.stdout.splitlines()[2:] if line.strip() and "  " in line)
    assert rows["failed"] == str(len(QUESTIONS))
    assert _count(db) == 1


SLOW_QUERY = "SELECT sum(hash(a.range * b.range)) FROM range(100000000) a, range(1000) b"


def test_a_slow_user_query_is_stopped_so_a_writer_gets_in(db):
    """Before the fix `workbench sql` held the file for as long as its query ran and the writer timed out."""
    reader = subprocess.Popen([sys.executable, "-m", "workbench", "sql", SLOW_QUERY, "--db", str(db), "--timeout", "1"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:  # wait until the reader holds the file
            try:
                duckdb.connect(str(db)).close()
            except duckdb.Error:
                break
            time.sleep(0.05)
        session = Session.open(trace_db=db)
        session.tracer.timeout = 20
        answer = session.ask("How do I rotate an API key?")
        assert answer.trace_error is None
        out, err = reader.communicate(timeout=30)
    finally:
        reader.kill()
        reader.wait()
    assert reader.returncode == 2 and "stopped after 1 s" in err and "Traceback" not in err
    assert _count(db) == 2


def test_library_and_app_queries_have_a_time_limit(db, monkeypatch):
    from workbench.trace import TraceReader

    with pytest.raises(TraceStoreError, match="stopped after 0.25 s"):
        TraceReader(db, query_timeout=0.25).rows(SLOW_QUERY)
    monkeypatch.setenv("WORKBENCH_QUERY_TIMEOUT", "0.25")
    with pytest.raises(TraceStoreError, match="stopped after 0.25 s"):
        TraceReader(db).user_query(SLOW_QUERY, files=False)
