"""Ingest spans all at once (a file of OTLP JSON lines, a Phoenix project): every span stored in one transaction,
turns written in traces' start order, a turn already stored (the same spans ingested again) not written again. A
file's lines may be logs requests too (`ExportLogsServiceRequest`, `resourceLogs`): their GenAI log events are
joined to their spans (`logs.py`)."""

from __future__ import annotations

import time
from typing import Iterable, TextIO

from .audited import turn_id_for
from .collector import Assembler, span_rows
from .logs import LogEvent, parse_logs_json_line
from .spans import Span, SpanFormatError, on_receiving_clock, parse_json_line


def read_spans(lines: TextIO | Iterable[str], name: str = "-") -> list[Span]:
    """The spans of every line (blank lines skipped); a bad line is an error naming FILE:LINE."""
    return read_requests(lines, name)[0]


def read_requests(lines: TextIO | Iterable[str], name: str = "-") -> tuple[list[Span], list[LogEvent]]:
    """The spans and the GenAI log events of every line (a trace request, or a logs request: one with
    `resourceLogs`); blank lines skipped; a bad line is an error naming FILE:LINE."""
    spans: list[Span] = []
    events: list[LogEvent] = []
    for i, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            if '"resourceLogs"' in line and '"resourceSpans"' not in line:  # a logs request
                events.extend(parse_logs_json_line(line))
            else:
                spans.extend(parse_json_line(line))
        except SpanFormatError as exc:
            raise SpanFormatError(f"{name}:{i}: {exc}") from None
    return spans, events


def rooted(spans: list[Span]) -> tuple[list[Span], int]:
    """`spans` less the traces whose root span is not among them, and how many traces that leaves out. A store
    that is still receiving a trace (Phoenix inserts spans as they come, the root last) holds part of it: such a
    trace is left for a later ingest rather than audited on part of itself."""
    roots = {s.trace_id for s in spans if s.parent_id is None}
    return [s for s in spans if s.trace_id in roots], len({s.trace_id for s in spans} - roots)


def ingest_spans(a: Assembler, spans: list[Span], events: Iterable[LogEvent] = ()) -> int:
    """Store `spans` and assemble their traces (a root-less trace too), oldest trace first, each with its GenAI log
    `events` joined; return turns written."""
    a.receive_logs(list(events), assemble=False)
    spans = on_receiving_clock(spans, time.time_ns())
    a.writer.log_spans(span_rows(spans, a.run_id))
    first: dict[str, int] = {}
    for s in spans:
        first[s.trace_id] = min(first.get(s.trace_id, s.start_ns), s.start_ns)
    ordered = sorted(spans, key=lambda s: (first[s.trace_id], s.start_ns))
    a.stored = a.writer.stored_turn_ids([turn_id_for(t) for t in first])
    with a.writer.buffered(max_turns=500, max_age_s=5.0):
        a.receive(ordered, store=False, on_root=False)
        return a.finish()
