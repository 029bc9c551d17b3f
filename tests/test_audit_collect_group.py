"""Group commit in `collect` (issue 38 item 9, trace/grouped.py): the requests that arrive while a group of requests is
being written are written together, in one transaction, and each is answered only once that transaction committed;
when it fails, every request in it is answered 503 and none of their spans or turns is stored."""

from __future__ import annotations

import http.client
import threading
import time

import duckdb

from test_audit_collect_kept import DEADLINE_S, _post, bodies, serving

import workbench.trace.writer as writer_module
from workbench.trace.reader import TraceReader


def _wait_for(condition, what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.01)


def _three_requests(tmp_path, monkeypatch, *, second_group_fails: bool):
    """Request A's write is held inside its transaction until B and C (on connections of their own) have been audited
    and wait; then A's write goes on (and, with `second_group_fails`, the next group's write fails). Returns each
    request's answer, the groups written when each was answered, the writer's group counts, and what is stored."""
    real, entered, gate, fail = writer_module._insert, threading.Event(), threading.Event(), threading.Event()

    def held_then_failing(con, table, sql):
        if table == "turns" and not entered.is_set():
            entered.set()
            assert gate.wait(DEADLINE_S)
        elif table == "turns" and fail.is_set():
            raise duckdb.IOException("disk full (the test)")
        return real(con, table, sql)

    monkeypatch.setattr(writer_module, "_insert", held_then_failing)
    data, _ = bodies(30, per_request=10)  # three requests of 10 traces (100 spans, 10 turns) each
    db = tmp_path / "t.duckdb"
    answers: dict[str, tuple[int, int]] = {}
    with serving(db) as (a, _, _conn):
        def post(name: str, body: bytes) -> None:
            conn = http.client.HTTPConnection(_conn.host, _conn.port, timeout=DEADLINE_S)
            status = _post(conn, body)
            answers[name] = (status, a.writer.groups.groups)  # the groups committed when it was answered
            conn.close()

        threads = {"A": threading.Thread(target=post, args=("A", data[0]))}
        threads["A"].start()
        assert entered.wait(DEADLINE_S), "request A's write never began"
        for name, body in (("B", data[1]), ("C", data[2])):
            threads[name] = threading.Thread(target=post, args=(name, body))
            threads[name].start()
        _wait_for(lambda: a.writer.groups.waiting == 2, "B and C audited and waiting for A's write")
        assert answers == {}  # nobody is answered before their rows are committed
        if second_group_fails:
            fail.set()
        gate.set()
        for t in threads.values():
            t.join(DEADLINE_S)
        counts = (a.writer.groups.groups, a.writer.groups.batches)
    stored = TraceReader(db).rows("SELECT (SELECT count(*) FROM audit_spans), (SELECT count(*) FROM turns), "
                                  "(SELECT count(DISTINCT trace_id) FROM audit_spans)")[1][0]
    return answers, counts, stored


def test_requests_that_arrive_during_a_write_are_written_together_and_answered_once_committed(tmp_path, monkeypatch):
    answers, counts, stored = _three_requests(tmp_path, monkeypatch, second_group_fails=False)
    assert counts == (2, 3)  # A alone, then B and C in one transaction
    assert answers == {"A": (200, 1), "B": (200, 2), "C": (200, 2)}  # each answered after its group committed
    assert stored == (300, 30, 30)


def test_a_failed_group_write_answers_every_request_in_it_with_503_and_stores_none(tmp_path, monkeypatch):
    answers, counts, stored = _three_requests(tmp_path, monkeypatch, second_group_fails=True)
    assert counts == (2, 3)
    assert {k: v[0] for k, v in answers.items()} == {"A": 200, "B": 503, "C": 503}
    assert stored == (100, 10, 10)  # A's spans and turns only: nothing of B or C
