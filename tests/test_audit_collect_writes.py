"""`collect` writes one OTLP request on one connection (issue 38 item 9, benchmarks/README.md): its spans and the
turns of every trace it completes, in one transaction, before the request is answered. Each connection of the
trace file ends with a checkpoint; one per turn made a 100-span request cost 11 of them."""

from __future__ import annotations

import http.client
import sys
import threading

from conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))

from audit_collect import bodies  # noqa: E402

import workbench.trace.writer as writer_module  # noqa: E402
from workbench.audit.collector import Assembler, make_server  # noqa: E402
from workbench.audit.units import Resolver  # noqa: E402
from workbench.trace.reader import TraceReader  # noqa: E402
from workbench.trace.writer import TraceWriter  # noqa: E402


def test_one_request_of_ten_traces_is_one_connection_and_every_turn_is_written_before_the_answer(tmp_path, monkeypatch):
    db = tmp_path / "t.duckdb"
    a = Assembler(TraceWriter(db), Resolver(), name="one-request")
    a.writer.prepare()  # the file's creation and migration: not the request's
    opened = []
    real = writer_module.write_connection

    def counting(*args, **kwargs):
        opened.append(args[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(writer_module, "write_connection", counting)
    [body], n = bodies(10, per_request=10)
    server = make_server(a, "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        conn = http.client.HTTPConnection(*server.server_address[:2], timeout=60)
        conn.request("POST", "/v1/traces", body, {"Content-Type": "application/x-protobuf"})
        answer = conn.getresponse()
        answer.read()
        assert answer.status == 200
        assert len(opened) == 1, f"{len(opened)} connections for one request"
        assert a.turns == 10 and n == 100
        reader = TraceReader(db)  # on disk when answered
        assert reader.rows("SELECT count(*) FROM turns")[1] == [(10,)]
        assert reader.rows("SELECT count(*) FROM audit_spans")[1] == [(100,)]
    finally:
        server.shutdown()
        server.server_close()
