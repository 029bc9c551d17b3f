"""Trace write cost per turn, for a turn with 50 retrieved items (2 searches × 25, a fetch, 3 citations).

    .venv/bin/python benchmarks/trace_write.py [--turns 300]

Prints medians of: (1) one turn written in its own transaction on an open connection (the write
itself: 5 bulk Arrow inserts + commit); (2) `log_turn` as an interactive ask does it, including
opening and closing the short-lived connection; (3) per turn inside a buffered batch of 50 turns
(how `eval` writes), connection included.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from workbench.provenance import build_payload  # noqa: E402
from workbench.trace.rows import turn_tables  # noqa: E402
from workbench.trace.writer import TraceWriter  # noqa: E402
from workbench.types import ModelCall, ResultItem, ToolCall, TurnRecord  # noqa: E402


def make_turn(i: int) -> TurnRecord:
    calls = (
        ToolCall("search", "snippet", {"query": f"question {i}"},
                 tuple(ResultItem(f"doc-{j}", f"Doc {j}", url=f"https://h.example/{j}", rank=j + 1, score=10 - j / 5,
                                  chunk_index=j % 3) for j in range(25))),
        ToolCall("search", "snippet", {"query": f"other {i}"},
                 tuple(ResultItem(f"doc-{j}", f"Doc {j}", rank=j - 24, score=5 - j / 10, chunk_index=0)
                       for j in range(25, 50))),
        ToolCall("fetch_document", "full", {"doc_id": "doc-1"}, (ResultItem("doc-1", "Doc 1"),)),
    )
    return TurnRecord(question=f"How do I do thing {i}?", answer="See [Doc 1](doc-1), [Doc 30](doc-30) and [x](doc-3x).",
                      tool_calls=calls, turn_id=uuid.uuid4().hex, model_calls=(ModelCall("offline", tokens_in=900,
                                                                                         tokens_out=120),),
                      config={"provider": "offline", "model": "m", "retriever": "bm25", "mode": "agent", "k": 25},
                      started_at="2024-05-01T10:00:00+00:00", latency_ms=12.0)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--turns", type=int, default=300)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp())
    turns = [make_turn(i) for i in range(args.turns)]
    payloads = [build_payload(t) for t in turns]
    assert sum(len(c.results) for c in turns[0].tool_calls) == 51  # 50 search items + the fetch

    w = TraceWriter(tmp / "a.duckdb")
    run_id = w.run_for(turns[0].config)
    rows_ms, write_ms, cpu_ms = [], [], []
    with w.connect() as con:
        for t, p in zip(turns, payloads):
            c0, t0 = time.process_time(), time.perf_counter()
            tables = turn_tables(t, p, run_id)
            t1 = time.perf_counter()
            w._write(con, {run_id}, tables)
            t2 = time.perf_counter()
            cpu_ms.append((time.process_time() - c0) * 1000)
            rows_ms.append((t1 - t0) * 1000)
            write_ms.append((t2 - t0) * 1000)

    # the same, with DuckDB's fsync_mode = none: how much of (1) is the disk flush at commit
    # (diagnosis only: the store keeps the default, STANDARD)
    wn = TraceWriter(tmp / "n.duckdb")
    nosync_ms = []
    with wn.connect() as con:
        con.execute("SET fsync_mode = 'none'")
        for t in turns:
            p = build_payload(t)
            t0 = time.perf_counter()
            wn._write(con, {run_id}, turn_tables(t, p, run_id))
            nosync_ms.append((time.perf_counter() - t0) * 1000)

    w2 = TraceWriter(tmp / "b.duckdb")
    log_ms = []
    for t, p in list(zip(turns, payloads))[:60]:
        t0 = time.perf_counter()
        w2.log_turn(t, p)
        log_ms.append((time.perf_counter() - t0) * 1000)

    w3 = TraceWriter(tmp / "c.duckdb")
    with w3.connect():
        pass  # create and migrate outside the timing
    fresh = [make_turn(i) for i in range(args.turns)]
    t0 = time.perf_counter()
    with w3.buffered(max_turns=50, max_age_s=60):
        for t in fresh:
            w3.log_turn(t, build_payload(t))
    batch_total = time.perf_counter() - t0
    t0 = time.perf_counter()
    for t in fresh:
        build_payload(t)
    payload_s = time.perf_counter() - t0

    import os

    print(f"turn with 50 retrieved items, {args.turns} turns; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print(f"  (1) one transaction per turn, open connection: median {statistics.median(write_ms):.2f} ms "
          f"(of which building the Arrow tables {statistics.median(rows_ms):.2f} ms), p90 "
          f"{sorted(write_ms)[int(len(write_ms) * 0.9)]:.2f} ms")
    print(f"      CPU time of this process per turn (insensitive to other load): median {statistics.median(cpu_ms):.2f} ms")
    print(f"  (1b) as (1) with fsync_mode = none (diagnosis): median {statistics.median(nosync_ms):.2f} ms")
    print(f"  (2) log_turn with its own short-lived connection: median {statistics.median(log_ms):.1f} ms")
    print(f"  (3) buffered batch of 50 (eval), connection included: "
          f"{(batch_total - payload_s) / args.turns * 1000:.2f} ms per turn")


if __name__ == "__main__":
    main()
