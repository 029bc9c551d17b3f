"""Spans in, audited turns out: the assembler (raw spans stored, turns written as their traces complete) and the
OTLP/HTTP receiver of `workbench collect` (docs/design.md §12, docs/audit.md).

A trace is complete when its root span arrives (exporters send a span when it ends, and the root ends last);
it is then assembled once: a span that arrives again (an exporter's retry) is stored once and never makes a
second turn, and a turn's id is fixed by its trace, so even a second `collect` on the same database writes it
once. Memory stays bounded: at most `max_pending` spans wait for their root; beyond that the traces that started
first are assembled as they are (a heap: O(log n) a span). `finish()` assembles everything still waiting (SIGTERM,
Ctrl-C, end of a file), within a time budget when `collect` stops. GenAI log events (`POST /v1/logs`, `logs.py`) wait
with the pending spans and are joined to their spans when their trace is assembled; a trace whose GenAI model calls
hold no messages of their own waits for them (`parked`), at most `logs.LOG_WAIT_SECONDS` after its root came. The
receiver bounds connections, bodies read at once and the time a request has to arrive (`_Server`); every bound is in
docs/security.md.
"""

from __future__ import annotations

import dataclasses
import heapq
import json
import socket
import sys
import threading
import time
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

from ..config import COLLECT_READ_TIMEOUT_S
from ..corpus import topic
from ..redact import environment_read_once, scrub_secrets
from ..trace.audits import AUDIT_KIND
from ..trace.grouped import Batch
from ..trace.writer import TraceWriter
from .audited import AuditedTurn, Earlier, audit_trace
from .logs import LOG_WAIT_SECONDS, LogEvent, PendingLogs, awaits_logs, joined, parse_logs_request
from .spans import (EARLIEST_START_NS, MAX_BODY_BYTES, MAX_CLOCK_SKEW_NS, BodyTooLarge, Span, SpanFormatError, inflate,
                    on_receiving_clock, parse_request)
from .turns import current_from, model_calls, session_of
from .units import Resolver

#: Spans held in memory while their trace's root has not arrived (docs/security.md).
MAX_PENDING_SPANS = 100_000
_MAX_TOOL_STEPS = 100_000
#: Spans taken into the bookkeeping per hold of the lock (a large request lets others in between).
_CHUNK = 10_000
#: Traces remembered as assembled (a later span of one is stored but makes no turn), sessions and earlier turns per
#: session kept for conversations: the oldest are forgotten first (docs/security.md).
MAX_DONE_TRACES = 200_000
MAX_SESSIONS = 10_000
MAX_EARLIER_TURNS = 50
#: On SIGTERM, the time given to assembling the traces still waiting for their root (their spans are stored
#: whatever happens); complete traces are always written (docs/security.md).
STOP_SECONDS = 10.0
#: The trace file stays attached between requests (one checkpoint per hold, not one per request: issue 38 item 9),
#: given up after `KEEP_IDLE_S` without a request, at the end of the request that has held it `KEEP_HOLD_S`, and as
#: soon as another process (`ask`, a reader) is waiting for it (trace/kept.py; docs/security.md).
KEEP_IDLE_S = 1.0
KEEP_HOLD_S = 5.0
#: What a 503 asks the exporter to wait before sending again (OTLP exporters retry a 503).
RETRY_AFTER_SECONDS = 2
#: Connections open at once; one more is answered 503 and closed (docs/security.md).
MAX_CONNECTIONS = 64
#: Request bodies read and processed at once, in two lanes so that large stalled bodies never hold up an
#: exporter's ordinary batch: up to `MAX_LARGE_BODIES` over `SMALL_BODY_BYTES`, and `MAX_SMALL_BODIES` others;
#: a body with its lane full is answered 503 with Retry-After (docs/security.md).
MAX_LARGE_BODIES = 2
MAX_SMALL_BODIES = 8
SMALL_BODY_BYTES = 1024 * 1024


def span_rows(spans: list[Span], run_id: str) -> list[dict[str, Any]]:
    """The `audit_spans` rows of spans, secrets redacted (scrubbed as one text: a JSON dump holds no raw newline,
    so the lines are the spans again; once per request rather than once per span, a third of an ingest's time)."""
    if not spans:
        return []
    texts = scrub_secrets("\n".join(json.dumps(s.to_json(), ensure_ascii=False, default=str) for s in spans)).split("\n")
    return [{"span_key": f"{s.trace_id}:{s.span_id}", "trace_id": s.trace_id, "span_id": s.span_id,
             "parent_id": s.parent_id, "run_id": run_id, "name": s.name, "kind": s.kind, "service": s.service,
             "started_at": datetime.fromtimestamp(s.start_ns / 1e9, timezone.utc), "span_json": text}
            for s, text in zip(spans, texts, strict=True)]


class Closed(RuntimeError):
    """The assembler stopped (`finish`): spans are no longer received (collect answers 503; the exporter retries)."""


class Assembler:
    """Receives spans, stores them raw, and writes each completed trace's turn (if it is one) to the run.

    Two locks: `_lock` guards the bookkeeping only (pending traces, the oldest-first heap, counters), held for a
    chunk of at most `_CHUNK` spans at a time, so a large request never holds it for long; `_assembling` makes one
    trace's turn at a time (sessions, tool steps and the write need the turns of a session in order). Parsing,
    redacting and storing raw spans take neither. Pending traces are evicted oldest-first (their earliest start)
    from a heap with lazy deletion: O(log n) a span, where a scan of every pending trace was O(n)."""

    def __init__(self, writer: TraceWriter, resolver: Resolver, *, name: str, max_pending: int = MAX_PENDING_SPANS):
        self.writer, self.resolver, self.name, self.max_pending = writer, resolver, name, max_pending
        self.run_id = writer.new_run(kind=AUDIT_KIND)
        self.pending: dict[str, dict[str, Span]] = {}
        self.n_pending = 0
        self._first: dict[str, int] = {}  # pending trace -> its earliest start (the heap entry that is current)
        self._oldest: list[tuple[int, str]] = []  # (earliest start, trace id); stale entries skipped when popped
        self.done: dict[str, None] = {}  # insertion-ordered: the oldest is forgotten first
        self.sessions: dict[str, list[Earlier]] = {}
        self.tool_steps: dict[str, str] = {}  # tool call id -> the trace whose model call asked for it
        self.turns = 0
        self.spans = 0
        #: Turns already in the store (an ingest run again): assembled, for the conversations they are part of,
        #: but not written again; `skipped` counts them.
        self.stored: set[str] = set()
        self.skipped = 0
        #: Traces `finish` had not assembled when `stop_seconds` ran out (their spans are stored).
        self.left = 0
        self.closed = False
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)  # a request's assembly ended (`_active` went down)
        self._active = 0  # requests assembling the traces they took
        self._handed: list[tuple[str, list[Span]]] = []  # traces a request took, left to `finish` to write
        self._assembling = threading.RLock()
        #: GenAI log events waiting for their trace, and traces whose root came waiting for their calls' log events
        #: (trace -> the monotonic time they stop waiting): `logs.py`, the waiting rule.
        self.logs = PendingLogs()
        self.parked: dict[str, float] = {}
        self._awaiting: set[str] = set()  # parked traces still waiting for log events (not only behind another)
        #: Held by each request (spans or log events) and by the end of a wait from taking its traces to writing their
        #: turns, so turns are written in the order their traces were taken: a logs request that releases turn 1 is
        #: never overtaken by the spans request that completes turn 2 (the writer's lock orders the writes alone).
        self._order = threading.Lock()
        self._parked_session: dict[str, str | None] = {}

    def receive(self, spans: list[Span], *, store: bool = True, on_root: bool = True) -> None:
        """Store `spans` raw and assemble every trace whose root is now here (with `on_root`; a file's traces wait
        for `finish`). Raises `Closed` once `finish` has begun: the spans not yet taken are left to the exporter's
        retry, and the traces this call took but has not assembled are handed to `finish`, which writes them."""
        spans = on_receiving_clock(spans, time.time_ns())
        if store:
            self.writer.log_spans(span_rows(spans, self.run_id))
        for i in range(0, len(spans), _CHUNK):
            with self._lock:
                if self.closed:
                    raise Closed("collect is stopping")
                taken = self._take(spans[i:i + _CHUNK], on_root)
                self._active += 1
            self._assemble(taken)

    def _assemble(self, taken: list[tuple[str, list[Span]]]) -> None:
        """Make the turns of the traces a request took (`_active` counted up by the caller, under `_lock`)."""
        try:
            for k, (trace_id, trace) in enumerate(taken):
                with self._assembling:
                    if self.closed:
                        with self._lock:
                            self._handed.extend(taken[k:])
                        raise Closed("collect is stopping")
                    self._turn(trace_id, trace)
        finally:
            with self._lock:
                self._active -= 1
                self._idle.notify_all()

    def receive_request(self, spans: list[Span]) -> None:
        """One OTLP request (`collect`): its spans and the turns of the traces it completed written together, in one
        transaction with those of the requests that came with it (group commit: `_batched`, `_committed`), before it is answered
        (issue 38 item 9; `collect` also keeps the file attached across requests, `TraceWriter.kept`). The
        assembler's own lock is still held for bookkeeping only (`receive`). The environment's server credentials,
        which every scrubbed text is cleaned of, are listed once for the request (`redact.environment_read_once`)."""
        spans = on_receiving_clock(spans, time.time_ns())

        def work() -> None:
            with environment_read_once():
                self.writer.stage({"audit_spans": span_rows(spans, self.run_id)})  # with the turns: one commit
                self.receive(spans, store=False)

        with self._order:  # the batches join the group writes in the order their traces were taken
            batch, failure = self._batched(work)
        self._committed(batch, failure)

    def _batched(self, work: Callable[[], None]) -> tuple[Batch, BaseException | None]:
        """Run `work` (assembling traces, under `_order`) with its rows gathered in a batch of its own
        (`TraceWriter.batch`), which then joins the group writes; return it and what `work` raised (the batch is
        written even when `work` stopped part-way, `Closed`: the turns it made are written)."""
        failure = None
        with self.writer.batch() as batch:
            try:
                work()
            except BaseException as exc:  # noqa: BLE001 — raised by `_committed`, once the turns it made are written
                failure = exc
        return batch, failure

    def _committed(self, batch: Batch, failure: BaseException | None) -> None:
        """Wait until `batch`'s group is committed (trace/grouped.py: the requests that arrive while a group is
        written are written together, one transaction and one commit, and each is answered only once it is on
        disk; a failed group raises in every request it held), then raise `failure`, if any."""
        self.writer.written(batch)
        if failure is not None:
            raise failure

    def receive_logs(self, events: list[LogEvent], *, assemble: bool = True) -> None:
        """One OTLP logs request's GenAI events (`logs.py`): each held for its trace (dropped, counted in `logs.late`,
        when that trace was assembled already); a parked trace whose calls' events have all come now is assembled
        (with `assemble`), its turn written before the request is answered."""
        with self._order:
            self._receive_logs(events, assemble)

    def _receive_logs(self, events: list[LogEvent], assemble: bool) -> None:
        with self._lock:
            if self.closed:
                raise Closed("collect is stopping")
            touched = set()
            self.logs.received += len(events)
            for e in events:
                if e.trace_id in self.done:
                    self.logs.late += 1
                else:
                    self.logs.add(e)
                    touched.add(e.trace_id)
            for t in touched & self._awaiting:
                if not awaits_logs(self.pending[t].values(), self.logs.of(t)):
                    self._awaiting.discard(t)
            taken = [(t, self._pop(t)) for t in self._released(time.monotonic())] if assemble else []
            self._active += 1
        self._written(taken)

    def _released(self, now: float) -> list[str]:
        """The parked traces that may be assembled now, in start order (under `_lock`): those whose log events came
        or whose wait is over, each after every earlier-started parked trace of its conversation (a conversation's
        turns are audited in the order they started, whichever's log events came first)."""
        out, held = [], set()
        for t in sorted(self.parked, key=lambda t: self._first.get(t, 0)):
            session = self._parked_session.get(t)
            if (t not in self._awaiting or self.parked[t] <= now) and (session is None or session not in held):
                out.append(t)
            elif session is not None:
                held.add(session)
        return out

    def assemble_due(self, now: float | None = None) -> int:
        """Assemble the parked traces whose wait for log events is over (`LOG_WAIT_SECONDS`); how many."""
        now = time.monotonic() if now is None else now
        with self._order:
            with self._lock:
                if self.closed or not any(at <= now for at in self.parked.values()):
                    return 0
                taken = [(t, self._pop(t)) for t in self._released(now)]
                self._active += 1
            self._written(taken)
            return len(taken)

    def _written(self, taken: list[tuple[str, list[Span]]]) -> None:
        """`_assemble(taken)` (under `_order`, which the caller holds), the turns written as a request's are: one
        batch, in a group write after those queued before it (`_batched`)."""
        if not taken:
            return self._assemble(taken)
        self._committed(*self._batched(lambda: self._assemble(taken)))

    def wait_for_logs(self, every: float = 0.2) -> None:
        """Until `finish`: assemble the parked traces whose wait is over (`collect` runs it in a thread)."""
        pause = threading.Event()
        while not self.closed and not pause.wait(every):
            try:
                self.assemble_due()
            except Closed:
                return

    def _take(self, spans: list[Span], on_root: bool) -> list[tuple[str, list[Span]]]:
        """Bookkeeping (under `_lock`): add `spans` to their pending traces; return the traces to assemble now (those
        whose root came, then the oldest while over `max_pending`), taken out of pending."""
        ready = []
        for s in spans:
            self.spans += 1
            if s.trace_id in self.done:
                continue
            trace = self.pending.setdefault(s.trace_id, {})
            if s.span_id not in trace:
                trace[s.span_id] = s
                self.n_pending += 1
                if s.start_ns < self._first.get(s.trace_id, s.start_ns + 1):
                    self._first[s.trace_id] = s.start_ns
                    heapq.heappush(self._oldest, (s.start_ns, s.trace_id))
            if s.parent_id is None and on_root:
                ready.append(s.trace_id)
        taken = self._park(t for t in dict.fromkeys(ready) if t in self.pending)
        while self.n_pending > self.max_pending and self._oldest:
            start, trace_id = heapq.heappop(self._oldest)
            if self._first.get(trace_id) == start:  # else stale: the trace left, or an earlier span came since
                taken.append((trace_id, self._pop(trace_id)))
        if len(self._oldest) > 2 * len(self._first) + 1024:  # stale entries of assembled traces: rebuilt, O(1) amortised
            self._oldest = [(start, t) for t, start in self._first.items()]
            heapq.heapify(self._oldest)
        return taken

    def _park(self, ready) -> list[tuple[str, list[Span]]]:
        """The traces whose root came, taken out of pending, but for those that wait for their model calls' log events
        (`logs.py`: the waiting rule) and those of a conversation one of whose earlier turns waits: parked (under
        `_lock`)."""
        now, direct = time.monotonic(), []
        for t in ready:
            trace = list(self.pending[t].values())
            awaiting = awaits_logs(trace, self.logs.of(t))
            if not awaiting and not self.parked:
                direct.append(t)
                continue
            self._parked_session[t] = session_of(trace)  # parked, even if only behind an earlier turn of its session
            self.parked.setdefault(t, now + LOG_WAIT_SECONDS)
            if awaiting:
                self._awaiting.add(t)
        taken = [(t, self._pop(t)) for t in direct]
        return taken + [(t, self._pop(t)) for t in self._released(now)] if self.parked else taken

    def _pop(self, trace_id: str) -> list[Span]:
        """Take a trace out of pending, its log events joined to its spans, and remember it as assembled (under
        `_lock`)."""
        spans = list(self.pending.pop(trace_id).values())
        self.n_pending -= len(spans)
        self._first.pop(trace_id, None)
        self.parked.pop(trace_id, None)
        self._awaiting.discard(trace_id)
        self._parked_session.pop(trace_id, None)
        spans = joined(spans, self.logs.pop(trace_id))
        self.done[trace_id] = None
        if len(self.done) > MAX_DONE_TRACES:
            del self.done[next(iter(self.done))]
        return spans

    def finish(self, stop_seconds: float | None = None) -> int:
        """Stop receiving; once every request has handed over the traces it took (requests not answered 200, so
        their exporters send them again), assemble those, then every trace still waiting for its root, oldest first;
        within `stop_seconds` when given (the traces left are counted in `left`, their spans stay stored). Return
        how many turns this assembler wrote."""
        with self._lock:
            self.closed = True
            while self._active:  # each request stops after the trace it is making
                self._idle.wait()
            handed, self._handed = self._handed, []
            waiting = [(t, self._pop(t)) for t in sorted(self._first, key=self._first.__getitem__)]
            self._oldest = []
        deadline = None if stop_seconds is None else time.monotonic() + stop_seconds
        todo = handed + waiting
        with self._assembling:
            for k, (trace_id, spans) in enumerate(todo):
                if deadline is not None and time.monotonic() > deadline:
                    self.left = len(todo) - k
                    break
                self._turn(trace_id, spans)
            return self.turns

    def _turn(self, trace_id: str, spans: list[Span]) -> None:
        calls = model_calls(spans)
        for c in calls:
            for r in c.requests:
                if r.call_id and len(self.tool_steps) < _MAX_TOOL_STEPS:
                    self.tool_steps[r.call_id] = trace_id
        steps = ()
        if calls:
            final = calls[-1]
            ids = [m.tool_call_id for m in final.inputs[current_from(final.inputs):] if m.tool_call_id]
            steps = tuple(dict.fromkeys(self.tool_steps.pop(i) for i in ids if i in self.tool_steps))
        session_key = session_of(spans)
        earlier = self.sessions.get(session_key, []) if session_key else []
        turn = audit_trace(spans, self.resolver, run=self.name, earlier=earlier, extra_trace_ids=steps)
        if turn is None:
            return
        turn = _clock_flagged(turn, spans)
        if turn.record.turn_id in self.stored:
            self.skipped += 1
        else:
            corpus = self.resolver.corpus
            gap = topic(turn.record.question, corpus, turn.payload.sets.retrieved) if corpus is not None else None
            self.writer.log_turn(turn.record, turn.payload, run_id=self.run_id, topic=gap)  # gap: the doc-gap kind
            self.turns += 1
        if session_key:
            turns = self.sessions.pop(session_key, [])  # re-inserted: the most recently used session is last
            self.sessions[session_key] = [*turns, turn.earlier][-MAX_EARLIER_TURNS:]
            if len(self.sessions) > MAX_SESSIONS:
                del self.sessions[next(iter(self.sessions))]


def _clock_flagged(turn: AuditedTurn, spans: list[Span]) -> AuditedTurn:
    """`turn` with `audit.clock_skew` saying which start times were clamped to the receive time (docs/security.md)."""
    sent = sorted(s.clamped_from for s in spans if s.clamped_from is not None)
    if not sent or turn.payload.audit is None:
        return turn
    at = lambda ns: datetime.fromtimestamp(ns / 1e9, timezone.utc).isoformat(timespec="seconds")  # noqa: E731
    note = (f"{len(sent)} of {len(spans)} spans started beyond the clock-skew bound ({MAX_CLOCK_SKEW_NS // 10**9} s "
            f"ahead of the receiving clock, or before {at(EARLIEST_START_NS)}): sent {at(sent[0])}"
            + (f" to {at(sent[-1])}" if sent[-1] != sent[0] else "") + "; the receive time stands for them")
    payload = dataclasses.replace(turn.payload, audit=dataclasses.replace(turn.payload.audit, clock_skew=note))
    return dataclasses.replace(turn, payload=payload)


def _reply(handler: BaseHTTPRequestHandler, status: int, body: bytes, content_type: str, retry_after: int = 0) -> None:
    handler.send_response(status)
    handler.send_header("Content-Type", content_type)
    if retry_after:
        handler.send_header("Retry-After", str(retry_after))
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


def _error(handler: BaseHTTPRequestHandler, status: int, message: str, retry_after: int = 0) -> None:
    _reply(handler, status, json.dumps({"code": 3, "message": message}).encode(), "application/json", retry_after)


def _drain(stream, length: int, piece: int = 1 << 16) -> None:
    while length > 0:
        got = stream.read(min(piece, length))
        if not got:
            return
        length -= len(got)


class _Server(ThreadingHTTPServer):
    """The receiver's server: at most `MAX_CONNECTIONS` connections, at most `MAX_LARGE_BODIES` bodies over
    `SMALL_BODY_BYTES` and `MAX_SMALL_BODIES` others read and processed at once, and `read_timeout` seconds for a
    request to arrive whole (request line, headers and body) once the server waits for it: a client that stalls
    is cut off (`service_actions`, which `serve_forever` runs every poll interval, shuts its socket down)."""

    daemon_threads = True
    #: Connections the kernel holds until accepted (`listen` backlog): a burst of up to `MAX_CONNECTIONS` connects at
    #: once (socketserver's 5 made every sixth one wait a SYN retransmit, a second).
    request_queue_size = MAX_CONNECTIONS

    def __init__(self, address, handler, read_timeout: float):
        self.read_timeout = read_timeout
        self.bodies = {False: threading.BoundedSemaphore(MAX_SMALL_BODIES),
                       True: threading.BoundedSemaphore(MAX_LARGE_BODIES)}
        self._deadlines: dict[socket.socket, float] = {}
        self._watch = threading.Lock()
        self.connections = 0
        super().__init__(address, handler)

    def verify_request(self, request, client_address) -> bool:
        with self._watch:
            if self.connections < MAX_CONNECTIONS:
                self.connections += 1
                return True
        try:  # refused at once (the socket is closed next); best effort, never blocking the accept loop
            request.setblocking(False)
            request.send(b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: %d\r\nContent-Length: 0\r\n"
                         b"Connection: close\r\n\r\n" % RETRY_AFTER_SECONDS)
        except OSError:
            pass
        return False

    def process_request_thread(self, request, client_address) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self._watch:
                self.connections -= 1
                self._deadlines.pop(request, None)

    def arm(self, connection: socket.socket) -> None:
        with self._watch:
            self._deadlines[connection] = time.monotonic() + self.read_timeout

    def disarm(self, connection: socket.socket) -> None:
        with self._watch:
            self._deadlines.pop(connection, None)

    def service_actions(self) -> None:
        now = time.monotonic()
        with self._watch:
            late = [c for c, at in self._deadlines.items() if at < now]
            for c in late:
                del self._deadlines[c]
        for c in late:
            try:
                c.shutdown(socket.SHUT_RDWR)  # the handler's read ends; it closes the connection
            except OSError:
                pass

    def handle_error(self, request, client_address) -> None:
        """A connection cut or reset (a stalled client, one gone) is no error to print; anything else is."""
        if not isinstance(sys.exc_info()[1], OSError):
            super().handle_error(request, client_address)


#: The receiver's paths: spans, and the GenAI log events (`logs.py`).
ROUTES = ("/v1/traces", "/v1/logs")


def _route(path: str) -> str:
    return path.split("?")[0].rstrip("/")


def _deliver(assembler: Assembler, route: str, body: bytes, kind: str | None) -> None:
    """One request's body, parsed, handed to the assembler: GenAI log events (`/v1/logs`) or spans."""
    if route == "/v1/logs":
        assembler.receive_logs(parse_logs_request(body, kind))
    else:
        assembler.receive_request(parse_request(body, kind))


def make_server(assembler: Assembler, host: str, port: int, *, read_timeout: float = COLLECT_READ_TIMEOUT_S
                ) -> ThreadingHTTPServer:
    """An OTLP/HTTP trace receiver on (host, port): `POST /v1/traces`, and `POST /v1/logs` for the GenAI log
    events (`logs.py`), protobuf or JSON, gzip or not (bounds: `_Server`, docs/security.md)."""
    threading.Thread(target=assembler.wait_for_logs, daemon=True, name="collect-log-wait").start()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        timeout = read_timeout  # each read of the socket, besides the whole request's deadline

        def log_message(self, *args):  # requests are not logged (they may hold the audited app's data)
            pass

        def handle_one_request(self):
            self.server.arm(self.connection)
            try:
                super().handle_one_request()
            finally:
                self.server.disarm(self.connection)

        def do_POST(self):
            length = self._length()
            if length is None:
                return
            lane = self.server.bodies[length > SMALL_BODY_BYTES]
            if not lane.acquire(blocking=False):
                if length <= SMALL_BODY_BYTES:
                    _drain(self.rfile, length)  # read and dropped, so the client sees the answer
                self.close_connection = True
                return _error(self, 503, "too many request bodies at once: send again later", RETRY_AFTER_SECONDS)
            try:
                body = self.rfile.read(length)
                self.server.disarm(self.connection)
                if len(body) < length:  # cut off (the read timeout) or the client went away: nobody to answer
                    self.close_connection = True
                    return
                self._receive(body)
            finally:
                lane.release()

        def _length(self) -> int | None:
            """The request's Content-Length, or None once it was answered (a wrong path, none, over the bound)."""
            if _route(self.path) not in ROUTES:
                self.close_connection = True
                return _error(self, 404, f"no such path {self.path[:100]!r}: send traces to {' or '.join(ROUTES)}")
            try:
                length = int(self.headers.get("Content-Length") or "-1")
            except ValueError:
                length = -1
            if length < 0:
                self.close_connection = True
                return _error(self, 411, "Content-Length is required")
            if length > MAX_BODY_BYTES:
                _drain(self.rfile, length)  # read and dropped a piece at a time, so the client sees the answer
                self.close_connection = True
                return _error(self, 413, f"request body of {length} bytes is over the {MAX_BODY_BYTES}-byte bound")
            return length

        def _receive(self, body: bytes) -> None:
            kind = self.headers.get("Content-Type")
            try:
                _deliver(assembler, _route(self.path), inflate(body, self.headers.get("Content-Encoding")), kind)
            except BodyTooLarge as exc:
                return _error(self, 413, str(exc))
            except SpanFormatError as exc:
                return _error(self, 400, str(exc))
            except Closed:
                self.close_connection = True
                return _error(self, 503, "collect is stopping: send the spans again", RETRY_AFTER_SECONDS)
            except Exception as exc:  # noqa: BLE001 — a failure to store is the exporter's retry signal, never a crash
                return _error(self, 503, f"could not store the spans: {type(exc).__name__}: {exc}"[:500])
            is_json = (kind or "").split(";")[0].strip().lower() == "application/json"
            _reply(self, 200, b"{}" if is_json else b"", "application/json" if is_json else "application/x-protobuf")

        def do_GET(self):
            self.close_connection = True
            _error(self, 405, "send traces with POST /v1/traces (GenAI log events: POST /v1/logs)")

    return _Server((host, port), Handler, read_timeout)
