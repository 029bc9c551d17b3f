"""`eval` with a slow provider (issue 23, item 6): progress from the agent loop's own events, a finished turn in
the trace store while the next one still runs, and SIGTERM / Ctrl-C keeping every finished turn, then resuming.

The slow model is a real Ollama client talking to a loopback server (`agent_server.AgentServer`) that holds
every request of the second question's turn until the test releases it: turn 1 has finished, turn 2 is
running for as long as the test needs — no fixed sleeps; every wait is on a condition with a deadline.
`eval` itself runs as a user runs it: `python -m workbench eval …` in a subprocess.
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import duckdb
import pytest

from agent_server import AgentServer
from conftest import ROOT
from tracedb import empty_trace_db
from workbench.providers import get_provider

QUESTIONS = ["How do I configure SSO?", "How do I reset my password?", "How do I rotate an API key?"]
DEADLINE_S = 180.0  # a guard against "never happens" on a loaded machine, not a speed assertion


def wait_for(condition, timeout: float, what: str):
    """Poll `condition()` until it returns something truthy; fail after `timeout` seconds."""
    end = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > end:
            pytest.fail(f"{what}: not within {timeout} s")
        time.sleep(0.1)  # between looks (a reader's connection holds writers off while it is open)


def turns(db: Path) -> list[tuple[str, str, str]] | None:
    """(run_id, question, status) of every turn, in write order; None while the file is absent or being written."""
    if not db.exists():
        return []
    try:
        with duckdb.connect(str(db), read_only=True) as con:
            return con.execute("SELECT run_id, question, status FROM turns ORDER BY rowid").fetchall()
    except duckdb.Error:  # the eval holds the file for a moment while it writes (or is creating it)
        return None


def runs(db: Path) -> list[tuple[str, str]]:
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute("SELECT run_id, kind FROM runs").fetchall()


class Eval:
    """`python -m workbench eval` over QUESTIONS against `srv`, its stderr read line by line as it comes."""

    def __init__(self, srv: AgentServer, tmp_path: Path, *extra: str):
        self.db = tmp_path / "t.duckdb"
        qfile = tmp_path / "q.jsonl"
        qfile.write_text("".join(json.dumps({"question": q}) + "\n" for q in QUESTIONS))
        self.args = [sys.executable, "-m", "workbench", "eval", str(qfile), "--provider", "ollama", "--db",
                     str(self.db), *extra]
        self.env = {**os.environ, "OLLAMA_HOST": srv.url, "WORKBENCH_PROVIDER_RETRIES": "0"}
        self.proc = subprocess.Popen(self.args, cwd=ROOT, env=self.env, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        self.err: list[str] = []
        self._reader = threading.Thread(target=lambda: self.err.extend(self.proc.stderr), daemon=True)
        self._reader.start()

    def finish(self) -> tuple[int, str, str]:
        out = self.proc.stdout.read()
        code = self.proc.wait(DEADLINE_S)
        self._reader.join(DEADLINE_S)
        return code, out, "".join(self.err)

    def again(self) -> subprocess.CompletedProcess:
        return subprocess.run(self.args, cwd=ROOT, env=self.env, capture_output=True, text=True, timeout=DEADLINE_S)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def held(tmp_path, demo_session):
    """An eval whose turn 1 has finished and whose turn 2 is held at the server (its first model call)."""
    demo_session.toolbox  # the demo index built once into this test session's cache, where the eval finds it
    with AgentServer(hold=QUESTIONS[1]) as srv:
        run = Eval(srv, tmp_path)
        try:
            if not srv.held.wait(DEADLINE_S):
                run.kill()
                pytest.fail(f"turn 2 never reached the server; eval exited {run.proc.returncode}: {''.join(run.err)[-3000:]}")
            run.srv = srv
            yield run
        finally:
            srv.release()
            run.kill()


def test_a_finished_turn_is_in_the_store_while_the_next_one_still_runs(held):
    """Before the fix the buffered writer kept turn 1 until turn 2 was written (the batch had no flush between)."""
    start = time.monotonic()
    rows = wait_for(lambda: turns(held.db), 10.0, "turn 1 in the trace store while turn 2 runs")
    assert time.monotonic() - start < 2.0, "a finished turn reaches the store within 2 s"
    assert [(q, status) for _, q, status in rows] == [(QUESTIONS[0], "ok")]
    assert [run_id for run_id, _ in runs(held.db)] == [rows[0][0]], "and its run with it"
    assert held.proc.poll() is None, "turn 2 was still running"
    held.srv.release()
    code, out, err = held.finish()
    assert code == 0, err
    assert [q for _, q, _ in turns(held.db)] == QUESTIONS


def test_progress_shows_the_question_the_step_and_the_tokens_from_the_agent_loop(held):
    """Before the fix `eval` showed a bar at 0/3 with no question, no step, no tokens. Not a TTY: one line an event."""
    wait_for(lambda: any("1 of 3 done" in line for line in held.err) and any("eval 2/3" in line for line in held.err),
             10.0, "progress lines for the end of turn 1 and the start of turn 2")
    lines = [line.rstrip("\n") for line in held.err]
    first = [line for line in lines if line.startswith(f"eval 1/3 {QUESTIONS[0]!r}")]
    # the offline-like agent of the server: search, then fetch the first hit, then answer (120 + 30 tokens a call)
    assert [line.split(" · ", 1)[1] for line in first] == [
        "model call 1 · 0 tokens so far", "model call 1 done · 150 tokens so far", "tool call search · 150 tokens so far",
        "model call 2 · 150 tokens so far", "model call 2 done · 300 tokens so far",
        "tool call fetch_document · 300 tokens so far", "model call 3 · 300 tokens so far",
        "model call 3 done · 450 tokens so far"] + [first[-1].split(" · ", 1)[1]]
    assert first[-1].split(" · ")[1].startswith("ok in ") and first[-1].endswith("450 tokens · 1 of 3 done")
    assert [line for line in lines if line.startswith("eval 2/3")] == [
        f"eval 2/3 {QUESTIONS[1]!r} · model call 1 · 0 tokens so far"], "turn 2 is waiting on its model"


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_during_turn_2_keeps_turn_1_and_the_run_then_the_eval_resumes(held, sig):
    """Before the fix SIGTERM killed the process and lost turn 1 and the run (both were still buffered); Ctrl-C
    said only "interrupted"."""
    held.proc.send_signal(sig)
    code, out, err = held.finish()  # it does not wait for turn 2 (still held at the server)
    assert code == 128 + sig, (code, err[-2000:])
    assert "kept 1 finished turn of 3 in run" in err and signal.Signals(sig).name in err, err[-2000:]
    assert "Traceback" not in err
    rows = turns(held.db)
    assert [(q, status) for _, q, status in rows] == [(QUESTIONS[0], "ok")]
    assert runs(held.db) == [(rows[0][0], "eval")]

    held.srv.release()
    again = held.again()  # the same command resumes the run: turn 1 is not asked again
    assert again.returncode == 0, again.stderr[-2000:]
    assert "resumed" in again.stdout and "yes" in again.stdout
    after = turns(held.db)
    assert [q for _, q, _ in after] == QUESTIONS and {r for r, _, _ in after} == {rows[0][0]}


def test_step_events_are_what_the_turn_did(demo):
    """The observer sees each model call and tool call of the turn as it starts (oracle: the turn's record)."""
    from workbench.agent import StepEvent, run_turn
    from workbench.retrieval import get_retriever
    from workbench.tools import Toolbox

    events: list[StepEvent] = []
    record = run_turn(QUESTIONS[0], get_provider("offline"), Toolbox(demo, get_retriever("bm25", demo)),
                      observe=events.append)
    assert [e.tool for e in events if e.kind == "tool_call"] == [t.name for t in record.tool_calls]
    assert [e.step for e in events if e.kind == "model_call"] == list(range(1, len(record.model_calls) + 1))
    assert sum(e.kind == "model_done" for e in events) == len(record.model_calls)

    def broken(event):
        raise OSError("stderr went away")

    again = run_turn(QUESTIONS[0], get_provider("offline"), Toolbox(demo, get_retriever("bm25", demo)),
                     observe=broken)
    assert again.status == "ok" and again.answer == record.answer, "a failing progress display costs nothing"


class _Tty(io.StringIO):
    def isatty(self):
        return True


def test_the_status_line_is_rewritten_on_a_terminal_and_one_line_an_update_elsewhere():
    from workbench.terminal import StatusLine

    tty, log = _Tty(), io.StringIO()
    for stream in (tty, log):
        line = StatusLine(stream)
        line.show("eval 1/2 'a\x1b]52;c;bad\x07' · model call 1")
        line.show("eval 1/2 · tool call search")
        line.clear()
    assert tty.getvalue() == ("\r\x1b[Keval 1/2 'a\\x1b]52;c;bad\\x07' · model call 1\r\x1b[Keval 1/2 · tool call search"
                              "\r\x1b[K"), "rewritten in place; the question's escape sequence made visible"
    assert log.getvalue() == "eval 1/2 'a\\x1b]52;c;bad\\x07' · model call 1\neval 1/2 · tool call search\n"


def test_a_stopped_concurrent_batch_also_writes_the_turns_finished_behind_a_running_one(tmp_path, monkeypatch):
    """Two workers: turn 2 runs on while turns 1 and 3 finish. Stopped then, the batch writes 1 and 3 (3 is
    finished, only waiting for 2 to be written in question order) and drops 2 and 4; the resume asks those."""
    from workbench.batch import Stop, run_eval
    from workbench.session import Session

    questions = QUESTIONS + ["What articles do you have?"]
    stop, release = Stop(), threading.Event()
    real_ask = Session.ask

    def ask(self, question, **kw):
        if question == questions[3]:  # taken by the worker that finished turn 3: turn 3's answer is ready
            stop.request("SIGTERM")
        if question in (questions[1], questions[3]):
            release.wait(DEADLINE_S)
        return real_ask(self, question, **kw)

    db = empty_trace_db(tmp_path / "t.duckdb")
    monkeypatch.setattr(Session, "ask", ask)
    try:
        result = run_eval(Session.open(trace_db=db), questions, progress=False, concurrency=2, stop=stop)
    finally:
        release.set()
    assert result.interrupted == "SIGTERM" and result.kept == 2
    assert [q for _, q, _ in turns(db)] == [questions[0], questions[2]]
    monkeypatch.setattr(Session, "ask", real_ask)
    again = run_eval(Session.open(trace_db=db), questions, progress=False, concurrency=2)
    assert again.resumed and again.skipped == 2 and again.asked == 2 and again.interrupted is None
    assert sorted(q for _, q, _ in turns(db)) == sorted(questions)
