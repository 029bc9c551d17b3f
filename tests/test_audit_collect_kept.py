"""`collect`'s speed (issue 38 item 9, benchmarks/README.md) without losing a guarantee. It keeps the trace file
attached between requests (trace/kept.py): one attachment, so one checkpoint, for requests that come back to back,
where each request paid a checkpoint; the file is given up when idle, and at once to a reader or writer of another
process that waits for it; an answered request is on disk even when the process is killed while it keeps the file.
A request lists the environment's server credentials once, not once per text it scrubs, and still redacts them."""

from __future__ import annotations

import http.client
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))

from audit_collect import bodies  # noqa: E402
from test_audit_receiver import _answering_call, _request  # noqa: E402

import workbench.redact as redact  # noqa: E402

import workbench.trace.writer as writer_module  # noqa: E402
from workbench.audit.collector import Assembler, make_server  # noqa: E402
from workbench.audit.units import Resolver  # noqa: E402
from workbench.trace.reader import TraceReader  # noqa: E402
from workbench.trace.writer import TraceWriter  # noqa: E402

#: Long enough that only what the test does (a waiting process, the idle window it sets) gives the file up.
NEVER_S = 600.0
DEADLINE_S = 60.0
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_WAIT_POLICY": "PASSIVE", "WORKBENCH_LOCK_TIMEOUT": "20"}


@contextmanager
def serving(db: Path, *, idle_s: float = NEVER_S) -> Iterator[tuple]:
    """An in-process receiver whose writer keeps `db` attached (never given up for holding it too long)."""
    a = Assembler(TraceWriter(db), Resolver(), name="kept")
    a.writer.prepare()
    server = make_server(a, "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        with a.writer.kept(idle_s=idle_s, hold_s=NEVER_S) as keeper:
            yield a, keeper, http.client.HTTPConnection(*server.server_address[:2], timeout=DEADLINE_S)
    finally:
        server.shutdown()
        server.server_close()


def _post(conn: http.client.HTTPConnection, body: bytes) -> int:
    conn.request("POST", "/v1/traces", body, {"Content-Type": "application/x-protobuf"})
    answer = conn.getresponse()
    answer.read()
    return answer.status


def _in_another_process(code: str) -> str:
    """Run `code` in a fresh Python process (the lock timeout 20 s); its stdout, which must end well."""
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, env=ENV, capture_output=True,
                       text=True, timeout=DEADLINE_S)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def test_requests_back_to_back_share_one_attachment(tmp_path, monkeypatch):
    opened = []
    real = writer_module.write_connection
    monkeypatch.setattr(writer_module, "write_connection", lambda *a, **k: opened.append(a[0]) or real(*a, **k))
    data, n = bodies(30, per_request=10)
    with serving(tmp_path / "t.duckdb") as (a, keeper, conn):
        del opened[:]  # the file's creation and migration (`prepare`): not the requests'
        assert [_post(conn, body) for body in data] == [200, 200, 200]
        assert keeper.attaches == 1 and len(opened) == 1, f"{len(opened)} attachments for {len(data)} requests"
        assert a.turns == 30 and n == 300


def test_a_reader_and_a_writer_of_another_process_get_the_file_it_keeps(tmp_path):
    db = tmp_path / "t.duckdb"
    data, _ = bodies(30, per_request=10)
    with serving(db) as (a, keeper, conn):
        assert _post(conn, data[0]) == 200
        t0 = time.monotonic()
        counted = _in_another_process(f"""
            from workbench.trace.reader import TraceReader
            print(TraceReader({str(db)!r}).rows("SELECT count(*) FROM turns")[1][0][0])""")
        assert counted == "10", counted  # every turn of the answered request, read while collect keeps the file
        assert keeper.released["queued"] == 1 and time.monotonic() - t0 < 20, "the reader waited for its timeout"
        assert _post(conn, data[1]) == 200 and keeper.attaches == 2  # taken again for the next request
        wrote = _in_another_process(f"""
            from workbench.trace.writer import TraceWriter
            with TraceWriter({str(db)!r}).connect() as con:
                con.execute("CREATE TABLE team_note (t VARCHAR); INSERT INTO team_note VALUES ('mine')")
                print(con.execute("SELECT count(*) FROM turns").fetchone()[0])""")
        assert wrote == "20" and keeper.released["queued"] == 2
        assert _post(conn, data[2]) == 200 and a.turns == 30


def test_a_reader_of_the_same_process_gets_the_file_it_keeps(tmp_path):
    """Another thread of the collecting process (the app's explorer beside a writer that keeps the file) queues too."""
    db = tmp_path / "t.duckdb"
    [body], _ = bodies(10, per_request=10)
    with serving(db) as (_, keeper, conn):
        assert _post(conn, body) == 200
        got = []
        reader = threading.Thread(target=lambda: got.append(TraceReader(db, timeout=20).rows(
            "SELECT count(*) FROM turns")[1][0][0]))
        t0 = time.monotonic()
        reader.start()
        reader.join(DEADLINE_S)
        assert got == [10] and keeper.released["queued"] == 1 and time.monotonic() - t0 < 20


def test_an_idle_collector_gives_the_file_up(tmp_path):
    """Given up after its idle window, the file opens in another process that neither retries nor queues (a
    plain `duckdb.connect`, as a DuckDB shell or a notebook opens it)."""
    db = tmp_path / "t.duckdb"
    [body], _ = bodies(10, per_request=10)
    with serving(db, idle_s=0.3) as (_, keeper, conn):
        assert _post(conn, body) == 200
        deadline = time.monotonic() + DEADLINE_S
        while keeper.released["idle"] == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert keeper.released["idle"] == 1
        counted = _in_another_process(f"""
            import duckdb
            print(duckdb.connect({str(db)!r}).execute("SELECT count(*) FROM turns").fetchone()[0])""")
        assert counted == "10"


KILLED = """
import sys, threading
from workbench.audit.collector import Assembler, make_server
from workbench.audit.units import Resolver
from workbench.trace.writer import TraceWriter
a = Assembler(TraceWriter(sys.argv[1]), Resolver(), name="killed")
server = make_server(a, "127.0.0.1", 0)
with a.writer.kept(idle_s=600, hold_s=600):
    print(f"http://127.0.0.1:{server.server_address[1]}/v1/traces", file=sys.stderr, flush=True)
    server.serve_forever(poll_interval=0.05)
"""


def test_an_answered_request_survives_a_kill_while_the_file_is_kept(tmp_path):
    db = tmp_path / "t.duckdb"
    data, _ = bodies(20, per_request=10)
    proc = subprocess.Popen([sys.executable, "-c", KILLED, str(db)], cwd=ROOT, env=ENV, stderr=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, text=True)
    try:
        host, port = re.search(r"http://([\d.]+):(\d+)/", proc.stderr.readline()).groups()
        conn = http.client.HTTPConnection(host, int(port), timeout=DEADLINE_S)
        assert [_post(conn, body) for body in data] == [200, 200]
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=DEADLINE_S)
    counted = _in_another_process(f"""
        from workbench.trace.reader import TraceReader
        r = TraceReader({str(db)!r})
        print(r.rows("SELECT count(*) FROM turns")[1][0][0], r.rows("SELECT count(*) FROM audit_spans")[1][0][0])""")
    assert counted == "20 200", counted


def test_a_request_lists_the_environment_once_and_still_redacts_a_configured_servers_password(tmp_path, monkeypatch):
    password = "env-pa55word-77"
    monkeypatch.setenv("SOME_SERVICE_URL", f"https://bob:{password}@svc.example")
    listed = []
    real = redact.environment
    monkeypatch.setattr(redact, "environment", lambda: listed.append(1) or real())
    traces = [f"{t:032x}" for t in range(1, 11)]
    spans = [_answering_call(t, "00f067aa0ba902b7", '[{"doc_id": "sso", "snippet": "Open SSO"}]',
                             f"See [sso](sso); the server takes {password}.", question=f"Is {password} right?")
             for t in traces]
    db = tmp_path / "t.duckdb"
    with serving(db) as (a, _, conn):
        conn.request("POST", "/v1/traces", json.dumps(_request(spans)).encode(), {"Content-Type": "application/json"})
        answer = conn.getresponse()
        answer.read()
        assert answer.status == 200 and a.turns == 10
        assert len(listed) == 1, f"the environment listed {len(listed)} times for one request"
    stored = TraceReader(db).rows("SELECT question || answer FROM turns")[1]
    assert len(stored) == 10 and all(password not in q and redact.REDACTED in q for (q,) in stored), stored


def test_a_request_that_repeats_stored_spans_stores_the_others_and_each_span_once(tmp_path):
    """Spans are first inserted as new (a plain INSERT, cheaper); a request repeating stored ones (an exporter's retry
    after a lost answer) is written again keeping the stored ones as they were."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    db = tmp_path / "t.duckdb"
    data, _ = bodies(20, per_request=10)
    both = ExportTraceServiceRequest.FromString(data[0])
    both.MergeFrom(ExportTraceServiceRequest.FromString(data[1]))
    with serving(db) as (a, _, conn):
        assert _post(conn, data[0]) == 200 and _post(conn, both.SerializeToString()) == 200
        assert a.spans == 300 and a.turns == 20
    stored = TraceReader(db).rows("SELECT count(*), count(DISTINCT span_key) FROM audit_spans")[1]
    assert stored == [(200, 200)]


def test_a_requests_spans_and_turns_are_one_transaction(tmp_path, monkeypatch):
    """One commit a request (its fsync and statements paid once): when its turns cannot be written, its spans are not
    either, and the request is answered 503 for the exporter to send again."""
    import duckdb

    real = writer_module._insert

    def failing(con, table, sql):
        if table == "turns":
            raise duckdb.IOException("disk full (the test)")
        return real(con, table, sql)

    db = tmp_path / "t.duckdb"
    [body], _ = bodies(10, per_request=10)
    with serving(db) as (a, _, conn):
        monkeypatch.setattr(writer_module, "_insert", failing)
        assert _post(conn, body) == 503
    stored = TraceReader(db).rows("SELECT (SELECT count(*) FROM audit_spans), (SELECT count(*) FROM turns)")[1]
    assert stored == [(0, 0)], stored
