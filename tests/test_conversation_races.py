"""Real processes appending to one conversation at once (issue 33 item 3): every turn gets its own position,
gapless, and in excerpt mode its own excerpt numbers (docs/design.md, "Concurrent turns of one conversation").

The test starts a conversation with one turn (beside another conversation of two turns), then starts two
`python -m workbench ask --conversation ID` processes against the same DuckDB file. A gate makes the race certain
instead of likely: each process, once it has read the conversation's history and is about to call the model for
the first time, waits until the other one is there too, so both have read the same history before either writes.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from tests.clirun import cli
from tracedb import empty_trace_db

ROOT = Path(__file__).resolve().parent.parent

#: `python -c RACER GATE N ARGS…`: the CLI (`workbench.cli.main(ARGS)`) whose first model call waits until N
#: processes have reached theirs (a file each in GATE); a re-asked turn's later calls do not wait.
RACER = r"""
import os, sys, time
from pathlib import Path
from workbench.providers import offline

gate, n = Path(sys.argv[1]), int(sys.argv[2])
real, waited = offline.OfflineProvider.complete, []

def complete(self, messages, tools):
    if not waited:
        waited.append(1)
        (gate / f"ready-{os.getpid()}").touch()
        deadline = time.monotonic() + 60
        while len(list(gate.glob("ready-*"))) < n:
            if time.monotonic() > deadline:
                raise SystemExit("the other process never reached its model call")
            time.sleep(0.005)
    return real(self, messages, tools)

offline.OfflineProvider.complete = complete
from workbench.cli import main
sys.exit(main(sys.argv[3:]))
"""

QUESTIONS = ("How do I configure SSO?", "And with Okta?", "How do I rotate an API key?")


def _race(db: Path, gate: Path, cid: str, mode: str, questions: tuple[str, ...]) -> list[subprocess.CompletedProcess]:
    gate.mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_WAIT_POLICY": "PASSIVE"}
    procs = [subprocess.Popen([sys.executable, "-c", RACER, str(gate), str(len(questions)), "ask", q,
                               "--conversation", cid, "--mode", mode, "--db", str(db)],
                              cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for q in questions]
    out = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=180)
        out.append(subprocess.CompletedProcess(p.args, p.returncode, stdout, stderr))
    return out


def _positions(db: Path, cid: str) -> list[int]:
    return [p for p, _ in _places(db, cid)]


def _places(db: Path, cid: str) -> list[tuple[int, int]]:
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute("SELECT position, history_through FROM turns WHERE conversation_id = ? ORDER BY position",
                           [cid]).fetchall()


def _excerpt_numbers(db: Path, cid: str) -> list[int]:
    with duckdb.connect(str(db), read_only=True) as con:
        return [n for (n,) in con.execute("""
            SELECT i.excerpt_n FROM retrieved_items i JOIN turns t USING (turn_id)
            WHERE t.conversation_id = ? AND i.excerpt_n IS NOT NULL ORDER BY i.excerpt_n""", [cid]).fetchall()]


@pytest.mark.parametrize("mode", ["agent", "excerpts"])
def test_two_processes_asking_one_conversation_at_once_get_their_own_positions(tmp_path, mode):
    db = empty_trace_db(tmp_path / "traces.duckdb")
    other = f"before-{mode}"  # another conversation already in the store: positions are counted per conversation
    for q in QUESTIONS[:2]:
        assert cli("ask", q, "--conversation", other, "--mode", mode, "--db", str(db)).returncode == 0
    cid = f"race-{mode}"
    first = cli("ask", QUESTIONS[0], "--conversation", cid, "--mode", mode, "--db", str(db))
    assert first.returncode == 0, first.stderr
    done = _race(db, tmp_path / "gate", cid, mode, QUESTIONS[1:])
    for d in done:
        assert d.returncode == 0, d.stderr
    assert _positions(db, cid) == [1, 2, 3], "positions collided or were lost"
    assert _positions(db, other) == [1, 2], "the other conversation is as it was"
    # the turn overtaken says what it saw: in agent mode it is written after the other, asked after turn 1;
    # in excerpt mode it was asked again, after turn 2
    assert _places(db, cid) == ([(1, 0), (2, 1), (3, 1)] if mode == "agent" else [(1, 0), (2, 1), (3, 2)])
    if mode == "excerpts":
        numbers = _excerpt_numbers(db, cid)
        assert len(numbers) == len(set(numbers)), "excerpt numbers shared by two turns"
        # a later turn's [n] names one excerpt: ask one and see its citations accepted
        later = cli("ask", "How do I configure SSO with Okta?", "--conversation", cid, "--mode", mode,
                    "--db", str(db), "--json")
        assert later.returncode == 0, later.stderr
        assert '"out_of_range"' not in later.stdout and '"not_retrieved"' not in later.stdout


def test_m016_renumbers_positions_written_twice_before_it_and_refuses_them_after(tmp_path):
    from workbench.trace.migrate import migrate
    from workbench.trace.schema import MIGRATIONS

    con = duckdb.connect(str(tmp_path / "old.duckdb"))
    migrate(con, tuple(m for m in MIGRATIONS if m.name < "m016"))
    con.execute("""
        INSERT INTO runs (run_id, created_at, kind, provider, model, retriever, mode, k, corpus_id)
            VALUES ('r1', '2024-05-01 10:00:00+00', 'interactive', 'offline', 'm', 'bm25', 'agent', 5, 'c');
        INSERT INTO turns (turn_id, run_id, question, answer, status, started_at, latency_ms, conversation_id, position)
            VALUES ('t1', 'r1', 'q1', 'a', 'ok', '2024-05-01 10:00:01+00', 1.0, 'c', 1),
                   ('t3', 'r1', 'q3', 'a', 'ok', '2024-05-01 10:00:03+00', 1.0, 'c', 2),
                   ('t2', 'r1', 'q2', 'a', 'ok', '2024-05-01 10:00:02+00', 1.0, 'c', 2),
                   ('t4', 'r1', 'q4', 'a', 'ok', '2024-05-01 10:00:04+00', 1.0, 'c', 3),
                   ('u1', 'r1', 'q', 'a', 'ok', '2024-05-01 10:00:05+00', 1.0, 'd', 1),
                   ('s1', 'r1', 'q', 'a', 'ok', '2024-05-01 10:00:05+00', 1.0, NULL, NULL),
                   ('s2', 'r1', 'q', 'a', 'ok', '2024-05-01 10:00:06+00', 1.0, NULL, NULL);
        INSERT INTO turn_context VALUES ('t4', 't1', 1, 'answer'), ('t4', 't2', 2, 'full'), ('t4', 't3', 2, 'full');
    """)
    assert migrate(con, tuple(m for m in MIGRATIONS if m.name < "m018"))[-2:] == ["m016_conversation_positions",
                                                                                   "m017_doc_gap_kinds"]
    assert con.execute("SELECT turn_id, position, history_through FROM turns WHERE conversation_id = 'c' "
                       "ORDER BY position").fetchall() == [("t1", 1, 0), ("t2", 2, 1), ("t3", 3, 1), ("t4", 4, 2)]
    assert con.execute("SELECT earlier_turn_id, earlier_position FROM turn_context ORDER BY 2").fetchall() == \
        [("t1", 1), ("t2", 2), ("t3", 3)]
    assert con.execute("SELECT position, history_through FROM turns WHERE turn_id = 'u1'").fetchone() == (1, 0)
    with pytest.raises(duckdb.ConstraintException):
        con.execute("INSERT INTO turns (turn_id, run_id, question, status, conversation_id, position) "
                    "VALUES ('t5', 'r1', 'q', 'ok', 'c', 4)")


def _asked_as(position: int, n: int) -> list:
    from workbench.types import TurnRecord

    return [TurnRecord(question=f"Question {i}?", answer="An answer.", turn_id=f"t-{position}-{i}",
                       config={"provider": "offline", "mode": "agent"}, started_at="2024-05-01T10:00:00+00:00",
                       latency_ms=1.0, conversation_id="c", position=position) for i in range(n)]


def test_threads_writing_turns_asked_as_one_place_get_consecutive_places(tmp_path):
    import threading

    from workbench.errors import ConversationMoved
    from workbench.provenance import sources_payload
    from workbench.trace.writer import TraceWriter

    db = tmp_path / "t.duckdb"
    records = _asked_as(1, 8)
    go = threading.Barrier(len(records))

    def write(record):
        w = TraceWriter(db)  # a writer each, as separate sessions have
        go.wait()
        w.log_turn(record, sources_payload(record))
        assert w.placed(record.turn_id) is not None

    threads = [threading.Thread(target=write, args=(r,)) for r in records]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT position, history_through FROM turns ORDER BY position").fetchall() == \
            [(p, 0) for p in range(1, 9)]
    late = _asked_as(3, 1)[0]
    with pytest.raises(ConversationMoved) as moved:
        TraceWriter(db).log_turn(late, sources_payload(late), if_moved="raise")
    assert (moved.value.asked, moved.value.last) == (3, 8)
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM turns").fetchone() == (8,), "nothing of the refused turn is written"


def test_a_place_taken_between_the_read_and_the_insert_is_read_again(tmp_path, monkeypatch):
    from workbench.provenance import sources_payload
    from workbench.trace import writer as W

    db = empty_trace_db(tmp_path / "t.duckdb")
    w = W.TraceWriter(db)
    first, second = _asked_as(1, 2)
    w.log_turn(first, sources_payload(first))
    real, stale = W._place, []

    def placing_stale(con, turns, if_moved):  # the first read misses turn 1, as a racing writer's would
        placed = real(con, turns, if_moved)
        if not stale:
            stale.append(1)
            return [{**r, "position": 1} for r in placed]
        return placed

    monkeypatch.setattr(W, "_place", placing_stale)
    w.log_turn(second, sources_payload(second))
    assert stale and w.placed(second.turn_id) == 2
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT turn_id, position FROM turns ORDER BY position").fetchall() == \
            [(first.turn_id, 1), (second.turn_id, 2)]


def test_a_refused_turn_leaves_the_writer_connection_as_it_was(tmp_path):
    """`ConversationMoved` is raised inside the write transaction, after the placement turned the optimizer on:
    the process's writer connection (reused for every later write) gets it back off."""
    from workbench.errors import ConversationMoved
    from workbench.provenance import sources_payload
    from workbench.trace.connect import write_connection
    from workbench.trace.writer import TraceWriter

    db = empty_trace_db(tmp_path / "t.duckdb")
    w = TraceWriter(db)
    for r in _asked_as(1, 2):
        w.log_turn(r, sources_payload(r))
    late = _asked_as(1, 1)[0]
    with pytest.raises(ConversationMoved):
        w.log_turn(late, sources_payload(late), if_moved="raise")
    with write_connection(db, timeout=5) as con:
        plan = con.execute("EXPLAIN SELECT 1 FROM turns WHERE turn_id = 'x'").fetchall()[0][1]
        assert "FILTER" in plan  # the optimizer is off again after the refused write (a filter above the scan)
