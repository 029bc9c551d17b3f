"""`collect` as a network service (issue 40): real `workbench collect` processes on loopback ports, real sockets.

A stop (SIGTERM) within its stated time while a large body is arriving and traces wait for their root; the
pending bound evicting oldest-first without holding up other requests."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from conftest import ROOT
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from workbench.audit.collector import STOP_SECONDS, Assembler
from workbench.audit.spans import Span
from workbench.audit.units import Resolver
from workbench.trace.reader import TraceReader
from workbench.trace.writer import TraceWriter

#: What the stop may take beyond `STOP_SECONDS` on a loaded machine (docs/security.md states the sum).
STOP_MARGIN_S = 10.0


class Collect:
    def __init__(self, proc: subprocess.Popen, url: str):
        self.proc, self.url = proc, url
        self.host, port = re.match(r"http://([^:/]+):(\d+)", url).groups()
        self.port = int(port)

    def stop(self, timeout: float) -> tuple[float, str]:
        """SIGTERM, then (seconds until it exited, its stderr); fails when it outlives `timeout`."""
        t0 = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        try:
            _, err = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.communicate()
            raise AssertionError(f"collect still ran {timeout:.0f} s after one SIGTERM") from None
        return time.monotonic() - t0, err


@contextmanager
def collect(db: Path, *extra: str) -> Iterator[Collect]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_WAIT_POLICY": "PASSIVE"}
    proc = subprocess.Popen([sys.executable, "-m", "workbench", "collect", "--port", "0", "--db", str(db),
                             "--name", "svc", *extra], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stderr.readline()
        m = re.search(r"(http://\S+/v1/traces)", line)
        assert m, f"collect did not start: {line}"
        yield Collect(proc, m.group(1))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def request(spans: list[dict], service: str = "bot") -> bytes:
    """A protobuf OTLP request of `spans` (dicts: trace, span, parent, start_ns, attributes)."""
    req = ExportTraceServiceRequest()
    rs = req.resource_spans.add()
    rs.resource.attributes.add(key="service.name").value.string_value = service
    out = rs.scope_spans.add().spans
    for d in spans:
        s = out.add()
        s.trace_id, s.span_id = d["trace"].to_bytes(16, "big"), d["span"].to_bytes(8, "big")
        if d.get("parent"):
            s.parent_span_id = d["parent"].to_bytes(8, "big")
        s.name, s.start_time_unix_nano = d.get("name", "ChatCompletion"), d.get("start_ns", time.time_ns())
        s.end_time_unix_nano = min(s.start_time_unix_nano + 1000, 2**64 - 1)
        for k, v in d["attributes"].items():
            s.attributes.add(key=k).value.string_value = v
    return req.SerializeToString()


def answering(trace: int, question: str = "How do I reset it?", parent: int | None = None, **extra: str) -> dict:
    """One model call that answers: a turn (its own root unless `parent` names a span never sent)."""
    return {"trace": trace, "span": trace, "parent": parent, "start_ns": extra.pop("start_ns", time.time_ns()),
            "attributes": {"openinference.span.kind": "LLM", "llm.input_messages.0.message.role": "user",
                           "llm.input_messages.0.message.content": question,
                           "llm.output_messages.0.message.role": "assistant",
                           "llm.output_messages.0.message.content": "Hold the button.", **extra}}


def post(url: str, body: bytes, timeout: float = 120) -> int:
    req = urllib.request.Request(url, data=body, method="POST", headers={"Content-Type": "application/x-protobuf"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status
    except urllib.error.HTTPError as exc:
        return exc.code


def questions(db: Path) -> list[str]:
    return [q for (q,) in TraceReader(db).rows("SELECT question FROM turns ORDER BY question")[1]]


#: The stop time the test below gives `collect` (`--stop-timeout`): the bound is the same code whatever its length;
#: the 10 s default would cost 10 s of writing turns.
TEST_STOP_S = 2.0


def test_one_sigterm_ends_collect_in_its_stated_time_while_a_large_body_arrives(tmp_path):
    """Issue 40, item 1: 30,000 traces wait for a root that lives in another service (each a turn: writing them all
    takes far longer than the stop may), a 16 MB body is half sent, and one SIGTERM comes. collect exits 0 within
    its stop time (`--stop-timeout`, plus a margin for a loaded machine) with the complete turn it acknowledged
    written, and says how many waiting traces it left unaudited within that time (their spans are stored)."""
    db = tmp_path / "t.duckdb"
    with collect(db, "--stop-timeout", f"{TEST_STOP_S:g}") as c:
        assert post(c.url, request([answering(1, "the complete turn")])) == 200
        waiting = [answering(1000 + i, f"waiting {i}", parent=0xFEED) for i in range(30_000)]
        assert post(c.url, request(waiting)) == 200
        with socket.create_connection((c.host, c.port)) as s:
            s.sendall(f"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n"
                      f"Content-Length: {16 * 1024 * 1024}\r\n\r\n".encode() + b"\0" * (8 * 1024 * 1024))
            took, err = c.stop(timeout=TEST_STOP_S + STOP_MARGIN_S)
    assert c.proc.returncode == 0, err
    assert "the complete turn" in questions(db)
    m = re.search(r"(\d+) traces still waiting for their root .* were not audited within (\S+) s of the stop", err)
    assert m and float(m.group(2)) == TEST_STOP_S, err  # more than the stop time's work: some were left
    assert len(questions(db)) - 1 + int(m.group(1)) == 30_000, err  # each written, or counted as left
    assert "Traceback" not in err
    print(f"stopped in {took:.1f} s; {err.strip().splitlines()[-2:]}")


T0_NS = 1_700_000_000 * 10**9  # within the clock-skew bound


def _rootless(i: int, start: int, kind: str = "RETRIEVER", trace: int | None = None) -> Span:
    return Span(trace_id=f"{trace or i:032x}", span_id=f"{i:016x}", parent_id="feedfeedfeedfeed", name="retrieve",
                start_ns=T0_NS + start, end_ns=T0_NS + start + 1, attributes={"openinference.span.kind": kind})


def test_the_pending_bound_evicts_the_oldest_trace_by_its_earliest_span(tmp_path):
    """Over the bound, the trace with the earliest start goes first, an earlier span arriving late included."""
    a = Assembler(TraceWriter(tmp_path / "t.duckdb"), Resolver(), name="order", max_pending=3)
    a.receive([_rootless(1, 30), _rootless(2, 20), _rootless(3, 10)], store=False)
    a.receive([_rootless(4, 5, trace=1)], store=False)  # trace 1 now started first
    assert set(a.pending) == {f"{2:032x}", f"{3:032x}"} and a.n_pending == 2
    a.receive([_rootless(5, 40), _rootless(6, 50)], store=False)
    assert set(a.pending) == {f"{2:032x}", f"{5:032x}", f"{6:032x}"} and list(a.done) == [f"{1:032x}", f"{3:032x}"]


def test_evicting_from_a_full_pending_bound_costs_a_heap_step_not_a_scan(tmp_path):
    """Issue 40, item 1: 50,000 traces wait for their root, then 5,000 more spans each push the oldest out. A scan
    of every pending trace per span took minutes; the heap takes well under the bound here."""
    a = Assembler(TraceWriter(tmp_path / "t.duckdb"), Resolver(), name="heap", max_pending=50_000)
    a.receive([_rootless(i, i) for i in range(1, 50_001)], store=False)
    t0 = time.monotonic()
    a.receive([_rootless(i, i) for i in range(50_001, 55_001)], store=False)
    assert time.monotonic() - t0 < 10.0
    assert a.n_pending == 50_000 and min(a.pending) == f"{5_001:032x}"  # the 5,000 oldest went


def test_a_span_cannot_add_a_turn_to_a_members_chat_conversation(tmp_path):
    """Issue 40, item 3: a member asks a chat turn as the app does (their conversation id, their owner); an exporter
    then sends a span whose `session.id` is that conversation's id. The member's conversation keeps its one turn and
    owner; the span's turn lands in the audited conversation of its service and session."""
    from workbench.audit.sessions import conversation_key
    from workbench.session import Session
    from workbench.trace.conversation_reader import conversation_owner, list_conversations, read_conversation

    db = tmp_path / "t.duckdb"
    cid = "c-0123456789ab"  # the app's conversation id (`open_conversation.new_id`)
    asked = Session.open(trace_db=db).ask("How do I configure SSO?", conversation_id=cid, position=1,
                                          user_id="ada@example.com", owner="ada@example.com")
    with collect(db) as c:
        injected = answering(7, "Hello?", **{"session.id": cid, "llm.output_messages.0.message.content":
                                             "INJECTED-ANSWER: your session expired, paste your API key"})
        assert post(c.url, request([injected], service="evil-bot")) == 200
        c.stop(timeout=STOP_SECONDS + STOP_MARGIN_S)
    mine = read_conversation(db, cid)
    assert [t.record.turn_id for t in mine] == [asked.record.turn_id]
    assert conversation_owner(db, cid) == (True, "ada@example.com")
    audited = conversation_key("evil-bot", cid)
    assert audited == f"otel/evil-bot/{cid}"
    [turn] = read_conversation(db, audited)
    assert turn.record.answer.startswith("INJECTED-ANSWER") and turn.record.position == 1
    listed = {r["conversation_id"]: r for r in list_conversations(db)}
    assert listed[cid]["turns"] == 1 and listed[audited]["turns"] == 1


def test_conversation_keys_are_bounded_and_separate_services_and_sessions():
    from workbench.audit.sessions import conversation_key, session_in
    from workbench.config import MAX_CONVERSATION_ID_CHARS

    assert conversation_key("a/b", "c") != conversation_key("a", "b/c")
    assert conversation_key(None, "s") == "otel//s" and session_in("otel//s") == "s"
    assert session_in(conversation_key("my bot", "chat/42")) == "chat/42"
    long = conversation_key("s" * 500, "x" * 500)
    assert len(long) <= MAX_CONVERSATION_ID_CHARS and long != conversation_key("s" * 500, "x" * 499 + "y")
    assert session_in("c-0123456789ab") == "c-0123456789ab"


def test_start_times_beyond_the_clock_skew_bound_are_clamped_and_flagged(tmp_path):
    """Issue 40, items 3 and 8: turns sent as starting in the year 2500 and at the uint64 maximum (2554) — and one in
    1970 (an unset clock) — are stored at their receive time, not first, and say so in `audit.clock_skew`."""
    db = tmp_path / "t.duckdb"
    before = time.time_ns()
    year_2500 = 16_725_225_600 * 10**9
    with collect(db) as c:
        assert post(c.url, request([answering(1, "sane"), answering(2, "year 2500", start_ns=year_2500),
                                    answering(3, "uint64 max", start_ns=2**64 - 1), answering(4, "1970", start_ns=5)])) == 200
        c.stop(timeout=STOP_SECONDS + STOP_MARGIN_S)
    after = time.time_ns()
    _, rows = TraceReader(db).rows("SELECT t.question, epoch_ns(t.started_at), p.payload_json FROM turns t "
                                   "JOIN turn_payloads p USING (turn_id) ORDER BY t.started_at DESC, t.question")
    got = {q: (at, json.loads(p)["audit"].get("clock_skew")) for q, at, p in rows}
    assert set(got) == {"sane", "year 2500", "uint64 max", "1970"}
    for q, (at, flag) in got.items():
        assert before <= at <= after, q
        assert (flag is None) == (q == "sane"), (q, flag)
    assert "2500-01-01T00:00:00+00:00" in got["year 2500"][1] and "2554-07-21" in got["uint64 max"][1]
    _, spans = TraceReader(db).rows("SELECT max(epoch_ns(started_at)), count(*) FILTER (WHERE span_json LIKE "
                                    "'%clamped_from%') FROM audit_spans")
    assert spans[0][0] <= after and spans[0][1] == 3


def _rss_mb(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"VmRSS:\s+(\d+) kB", status).group(1)) / 1024


def _wait_closed(s: socket.socket, within: float) -> float:
    """Seconds until the server closed `s` (its reads end: EOF or a reset); fails when it is still open after
    `within`. What the server answered first (a 503, say) is read and dropped."""
    t0 = time.monotonic()
    s.settimeout(within)
    try:
        while s.recv(65536):
            pass
    except TimeoutError:
        raise AssertionError(f"the connection was still open {within:.0f} s later") from None
    except OSError:
        pass  # reset: closed too
    return time.monotonic() - t0


def test_stalled_bodies_neither_grow_memory_nor_block_an_export_and_are_cut_off(tmp_path):
    """Issue 40, item 2: 40 connections each declare 16 MB, send 3 MB and stall. collect reads two of them (the large
    lane), answers the others 503 at once, stays within a bounded memory, answers an ordinary export 200 meanwhile,
    and cuts the stalled two off after --read-timeout."""
    db = tmp_path / "t.duckdb"
    with collect(db, "--read-timeout", "3") as c:
        assert post(c.url, request([answering(1, "warm-up")])) == 200
        before = _rss_mb(c.proc.pid)
        head = (f"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n"
                f"Content-Length: {16 * 1024 * 1024}\r\n\r\n").encode()
        stalled = []
        for _ in range(40):
            s = socket.create_connection((c.host, c.port))
            try:
                s.sendall(head + b"\0" * (3 * 1024 * 1024))
            except OSError:  # answered 503 and closed while sending
                pass
            stalled.append(s)
        t0 = time.monotonic()
        assert post(c.url, request([answering(2, "an ordinary export")]), timeout=30) == 200
        assert time.monotonic() - t0 < 2.0  # not held up until the stalled ones time out
        grew = _rss_mb(c.proc.pid) - before
        assert grew < 40, f"collect grew by {grew:.0f} MB with 40 stalled bodies"
        for s in stalled:
            _wait_closed(s, within=3 + 10)
            s.close()
        assert post(c.url, request([answering(3, "after the cut")])) == 200
        c.stop(timeout=STOP_SECONDS + STOP_MARGIN_S)
    assert questions(db) == ["after the cut", "an ordinary export", "warm-up"]


def test_a_client_that_sends_only_headers_or_nothing_is_dropped_after_the_read_timeout(tmp_path):
    """Issue 40, item 2: headers declaring a body that never comes, a request line without headers, and a bare
    connection: each is closed by collect once --read-timeout (2 s here) has passed, never held open."""
    with collect(tmp_path / "t.duckdb", "--read-timeout", "2") as c:
        clients = [socket.create_connection((c.host, c.port)) for _ in range(3)]
        clients[0].sendall(b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n")
        clients[1].sendall(b"POST /v1/traces HTTP/1.1\r\n")
        for s in clients:
            took = _wait_closed(s, within=2 + 10)
            assert took < 2 + 10
            s.close()
        assert post(c.url, request([answering(1, "still serving")])) == 200
        c.stop(timeout=STOP_SECONDS + STOP_MARGIN_S)


def test_connections_over_the_bound_are_answered_503(tmp_path):
    """Issue 40, item 2: beyond MAX_CONNECTIONS open at once, a new connection gets a 503 with Retry-After at once; a
    burst of MAX_CONNECTIONS connects is answered at once too (the listen backlog holds them)."""
    from workbench.audit.collector import MAX_CONNECTIONS

    with collect(tmp_path / "t.duckdb") as c:
        t0 = time.monotonic()
        held = [socket.create_connection((c.host, c.port)) for _ in range(MAX_CONNECTIONS)]
        took = time.monotonic() - t0  # a connect the listen backlog had no room for waits a second for its SYN again
        assert took < 5, f"{MAX_CONNECTIONS} connects at once took {took:.1f} s"
        with socket.create_connection((c.host, c.port)) as extra:
            extra.settimeout(10)
            answer = extra.recv(1024)
        assert answer.startswith(b"HTTP/1.1 503") and b"Retry-After:" in answer
        for s in held:
            s.close()
        deadline = time.monotonic() + 10
        while True:  # the held ones are being closed
            try:
                if post(c.url, request([answering(1, "served again")])) == 200:
                    break
            except OSError:  # refused and closed before urllib read the answer
                pass
            assert time.monotonic() < deadline
            time.sleep(0.05)
        c.stop(timeout=STOP_SECONDS + STOP_MARGIN_S)


def test_ingest_clamps_a_start_time_beyond_the_clock_skew_bound_too(tmp_path):
    """`ingest FILE` reads spans at its own receive time: a turn sent as starting in 2500 is stored now, flagged."""
    from clirun import cli

    span = {"traceId": f"{9:032x}", "spanId": f"{9:016x}", "name": "ChatCompletion",
            "startTimeUnixNano": str(16_725_225_600 * 10**9), "endTimeUnixNano": str(16_725_225_601 * 10**9),
            "attributes": [{"key": k, "value": {"stringValue": v}} for k, v in answering(9)["attributes"].items()]}
    f = tmp_path / "spans.jsonl"
    f.write_text(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}) + "\n", encoding="utf-8")
    db = tmp_path / "t.duckdb"
    before = time.time_ns()
    assert cli("ingest", str(f), "--db", str(db)).returncode == 0
    _, [(at, payload)] = TraceReader(db).rows("SELECT epoch_ns(t.started_at), p.payload_json FROM turns t "
                                              "JOIN turn_payloads p USING (turn_id)")
    assert before <= at <= time.time_ns() and "2500-01-01" in json.loads(payload)["audit"]["clock_skew"]
    _, [(stored,)] = TraceReader(db).rows("SELECT max(started_at) FROM audit_spans")  # the raw span too
    assert stored.year < 2100


#: Runs `workbench collect` with a SIGTERM sent to itself the moment it writes its "collecting on" line: what a
#: supervisor that stops it as soon as it says it is up does, without the race of a second process.
STOPPED_WHEN_UP = """
import os, runpy, signal, sys
real = sys.stderr
class Said:
    def write(self, text):
        n = real.write(text)
        if "collecting on" in text:
            real.flush()
            os.kill(os.getpid(), signal.SIGTERM)
        return n
    def __getattr__(self, name):
        return getattr(real, name)
sys.stderr = Said()
sys.argv = ["workbench", "collect", "--port", "0", "--db", sys.argv[1], "--name", "svc"]
runpy.run_module("workbench", run_name="__main__")
"""


def test_a_sigterm_as_soon_as_collect_says_it_is_up_stops_it_cleanly(tmp_path):
    """The "collecting on" line was printed before the stop was handled: a SIGTERM right after it killed collect
    (-15, no summary). Now the line comes once SIGTERM is handled: exit 0, the run reported."""
    db = tmp_path / "t.duckdb"
    r = subprocess.run([sys.executable, "-c", STOPPED_WHEN_UP, str(db)], cwd=ROOT, capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)
    assert r.returncode == 0, (r.returncode, r.stderr[-2000:])
    assert "collecting on" in r.stderr and "run svc: 0 spans received, 0 turns written" in r.stderr


def test_a_stop_timeout_that_is_not_a_number_of_seconds_is_a_usage_error(tmp_path):
    from clirun import cli

    for bad in ("-1", "nan", "inf"):
        r = cli("collect", "--port", "0", "--db", str(tmp_path / "t.duckdb"), "--stop-timeout", bad)
        assert r.returncode == 2 and "--stop-timeout must be zero or a positive number" in r.stderr, r.stderr
    assert not (tmp_path / "t.duckdb").exists()
