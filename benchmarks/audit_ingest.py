"""Ingesting 10,000 OpenInference spans (`workbench ingest FILE`) next to a baseline that only parses them.

    .venv/bin/python benchmarks/audit_ingest.py [--traces 1000]

Writes an OTLP JSON lines file of `--traces` traces of 10 spans each (a root CHAIN, a RETRIEVER returning 5 hits,
a postprocessor CHAIN, an LLM span whose prompt holds 3 of the hits and whose answer cites a link, and 6 CHAIN
spans in between), one `ExportTraceServiceRequest` of 10 traces a line, as a team's exporter would write them.
Then, each in a fresh process state and timed with `time.perf_counter`:
(1) parse only: every line through `opentelemetry-proto` into typed spans (`audit.ingest.read_spans`);
(2) ingest: parse, store every span raw (`audit_spans`) and assemble and write every turn into a new DuckDB file,
as `workbench ingest` does. The goal (issue 29): under 10 s for 10,000 spans on this machine.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from workbench.audit.collector import Assembler  # noqa: E402
from workbench.audit.ingest import ingest_spans, read_spans  # noqa: E402
from workbench.audit.units import Resolver  # noqa: E402
from workbench.trace.writer import TraceWriter  # noqa: E402


def _kv(attrs: dict) -> list[dict]:
    return [{"key": k, "value": {"stringValue": v} if isinstance(v, str) else {"doubleValue": v}} for k, v in attrs.items()]


def _trace(t: int) -> list[dict]:
    trace = f"{t + 1:032x}"
    sid = lambda i: f"{t * 16 + i + 1:016x}"  # noqa: E731
    hits = [{"id": f"n{t}-{h}", "content": f"Passage {h} of document d{(t + h) % 50}: how to configure feature {h}.",
             "metadata": json.dumps({"url": f"https://help.example.com/d{(t + h) % 50}"})} for h in range(5)]
    retriever = {"openinference.span.kind": "RETRIEVER"}
    for h, hit in enumerate(hits):
        for k, v in hit.items():
            retriever[f"retrieval.documents.{h}.document.{k}"] = v
        retriever[f"retrieval.documents.{h}.document.score"] = 1.0 / (h + 1)
    context = "\n\n".join(h["content"] for h in hits[:3])
    llm = {"openinference.span.kind": "LLM", "llm.model_name": "m",
           "llm.input_messages.0.message.role": "system", "llm.input_messages.0.message.content": "Answer from context.",
           "llm.input_messages.1.message.role": "user",
           "llm.input_messages.1.message.content": f"Context:\n{context}\nQuestion: how do I configure it {t}?",
           "llm.output_messages.0.message.role": "assistant",
           "llm.output_messages.0.message.content": f"See [doc](https://help.example.com/d{t % 50})."}
    kinds = [({"openinference.span.kind": "CHAIN", "input.value": f"how do I configure it {t}?"}, None),
             (retriever, 0), ({"openinference.span.kind": "CHAIN"}, 0), (llm, 0)]
    kinds += [({"openinference.span.kind": "CHAIN", "output.value": "x"}, 0) for _ in range(6)]
    return [{"traceId": trace, "spanId": sid(i), **({"parentSpanId": sid(p)} if p is not None else {}),
             "name": f"span{i}", "startTimeUnixNano": str(1_700_000_000_000_000_000 + t * 10_000 + i),
             "endTimeUnixNano": str(1_700_000_000_000_000_000 + t * 10_000 + 100 - i), "attributes": _kv(a)}
            for i, (a, p) in enumerate(kinds)]


def write_file(path: Path, traces: int) -> int:
    n = 0
    with path.open("w", encoding="utf-8") as fh:
        for start in range(0, traces, 10):
            spans = [s for t in range(start, min(start + 10, traces)) for s in _trace(t)]
            n += len(spans)
            fh.write(json.dumps({"resourceSpans": [{"resource": {"attributes": _kv({"service.name": "bench"})},
                                                    "scopeSpans": [{"spans": spans}]}]}) + "\n")
    return n


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--traces", type=int, default=1000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        f = Path(tmp) / "spans.jsonl"
        n = write_file(f, args.traces)
        t0 = time.perf_counter()
        with f.open(encoding="utf-8") as fh:
            spans = read_spans(fh, str(f))
        parse = time.perf_counter() - t0
        t0 = time.perf_counter()
        with f.open(encoding="utf-8") as fh:
            spans = read_spans(fh, str(f))
        a = Assembler(TraceWriter(Path(tmp) / "t.duckdb"), Resolver(), name="bench")
        turns = ingest_spans(a, spans)
        total = time.perf_counter() - t0
    print(f"{n} spans, {args.traces} traces, {turns} turns")
    print(f"parse only (opentelemetry-proto → typed spans): {parse:.2f} s ({n / parse:,.0f} spans/s)")
    print(f"ingest (parse, store raw spans, assemble and write turns): {total:.2f} s ({n / total:,.0f} spans/s)")


if __name__ == "__main__":
    main()
