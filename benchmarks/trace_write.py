"""Trace write cost per turn, for a turn with 50 retrieved items (2 searches × 25, a fetch, 3 citations).

    .venv/bin/python benchmarks/trace_write.py [--turns 300]

Prints medians of: (1) one turn written in its own transaction on an open connection (the write
itself, building its rows included), next to (1a) the previous write path (every table as an Arrow
insert, optimizer on), (1b) the write as it was before the Arrow schemas were derived from the
migrations (hand-written schemas, each bulk table bound to a specially named local variable for
DuckDB's replacement scan; the write path is otherwise the same) and (1f) the floor of any
one-transaction-per-turn write into these tables (one 1-row insert per table), timed turn by turn
in the same run — this machine's speed drifts by up to
3× within minutes, so only side-by-side figures compare; (2) `log_turn` as an interactive
ask does it (the file attached to the process's in-memory DuckDB for the write), split into attach /
write / detach, next to (2a) the previous interactive path (a DuckDB connection opened and closed
per turn);
(3) per turn inside a buffered batch of 50 turns (how `eval` writes), connection included.
A pure-Python reference loop timed at the start and end shows how fast the machine was.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from workbench.provenance import sources_payload  # noqa: E402

from workbench.trace.connect import duckdb_connect, open_connection, write_connection  # noqa: E402
from workbench.trace.rows import TURN_TABLES, rows_to_table, turn_rows  # noqa: E402
from workbench.trace.writer import TraceWriter, _rollback, _values_sql  # noqa: E402
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


def reference_loop_ms() -> float:
    """A fixed pure-Python loop: how fast this (shared, drifting) machine is right now."""
    t0, total = time.perf_counter(), 0
    for i in range(1_000_000):
        total += i
    return (time.perf_counter() - t0) * 1000


def previous_write(con, rows: dict) -> None:
    """The write path before this version (the anchor): every table as a bulk Arrow insert, sent as one
    script, on a connection with DuckDB's optimizer on."""
    tables = {name: rows_to_table(name, r) for name, r in rows.items()}
    turns_rows, tool_calls_rows = tables.get("turns"), tables.get("tool_calls")  # noqa: F841 (scanned by DuckDB)
    retrieved_items_rows, citations_rows, sources_rows = (tables.get("retrieved_items"), tables.get("citations"),  # noqa: F841
                                                          tables.get("sources"))
    model_calls_rows = tables.get("model_calls")  # noqa: F841
    con.execute(" ".join(["BEGIN;"] + [f"INSERT INTO {n} BY NAME SELECT * FROM {n}_rows;" for n in tables]
                         + ["COMMIT;"]))


# (1b) The trace write as it was before one definition per table: hand-written Arrow schemas (a second
# copy of the DDL) and each bulk table bound to a local variable DuckDB's replacement scan finds by name.
import pyarrow as pa  # noqa: E402

S, I32, F64, B, TS = pa.string(), pa.int32(), pa.float64(), pa.bool_(), pa.timestamp("us", tz="UTC")
HAND_SCHEMAS: dict[str, pa.Schema] = {
    "turns": pa.schema([("turn_id", S), ("run_id", S), ("question", S), ("answer", S), ("status", S), ("error", S),
                        ("started_at", TS), ("latency_ms", F64), ("tokens_in", pa.int64()), ("tokens_out", pa.int64()),
                        ("question_kind", S), ("n_retrieved", I32), ("n_cited", I32), ("n_consulted", I32),
                        ("n_rejected", I32), ("n_tool_calls", I32), ("n_model_calls", I32),
                        ("model_latency_ms", F64)]),
    "tool_calls": pa.schema([("turn_id", S), ("seq", I32), ("name", S), ("exposure", S), ("args_json", S),
                             ("latency_ms", F64), ("n_results", I32), ("error", S), ("call_id", S)]),
    "retrieved_items": pa.schema([("turn_id", S), ("tool_call_seq", I32), ("rank", I32), ("doc_id", S),
                                  ("chunk_index", I32), ("score", F64), ("exposure", S), ("position", I32),
                                  ("excerpt_n", I32), ("page", I32)]),
    "citations": pa.schema([("turn_id", S), ("idx", I32), ("target", S), ("doc_id", S), ("valid", B), ("reason", S),
                            ("nearest_doc_id", S), ("edit_distance", I32), ("n", I32), ("start_offset", I32),
                            ("end_offset", I32)]),
    "sources": pa.schema([("turn_id", S), ("doc_id", S), ("title", S), ("url", S), ("retrieved", B), ("cited", B),
                          ("consulted", B), ("exposure", S), ("reason", S), ("kind", S), ("artifact_kind", S),
                          ("tool_call_seq", I32), ("position", I32), ("shown_position", I32)]),
}


def _hand_table(name: str, rows: list[tuple]) -> pa.Table:
    schema = HAND_SCHEMAS[name]
    cols = list(zip(*rows)) if rows else [()] * len(schema)
    return pa.table({f.name: list(c) for f, c in zip(schema, cols)}, schema=schema)


def before_write(con, rows: dict) -> None:
    """writer._commit before this version, verbatim but for the hand-written schemas above."""
    begin = "BEGIN; "
    bulk: dict[str, pa.Table] = {}
    try:
        for name in TURN_TABLES:
            r = rows.get(name)
            if not r:
                continue
            if len(r) == 1:
                con.execute(begin + _values_sql("INSERT", name, len(r)), [v for row in r for v in row])
                begin = ""
            else:
                bulk[name] = _hand_table(name, r)
        turns_rows, tool_calls_rows = bulk.get("turns"), bulk.get("tool_calls")  # noqa: F841 (scanned by DuckDB)
        retrieved_items_rows, citations_rows = bulk.get("retrieved_items"), bulk.get("citations")  # noqa: F841
        sources_rows, claims_rows = bulk.get("sources"), bulk.get("claims")  # noqa: F841
        con.execute(begin + " ".join([f"INSERT INTO {name} BY NAME SELECT * FROM {name}_rows;" for name in bulk]
                                     + ["COMMIT;"]))
    except BaseException:
        _rollback(con)
        raise


def _singles_then_bulk(con, rows: dict) -> tuple[str, dict]:
    """writer._commit's first half: BEGIN and every one-row table as VALUES; the rest as Arrow tables."""
    begin, bulk = "BEGIN; ", {}
    for name in TURN_TABLES:
        r = rows.get(name)
        if r and len(r) == 1:
            con.execute(begin + _values_sql("INSERT", name, 1), list(r[0]))
            begin = ""
        elif r:
            bulk[name] = rows_to_table(name, r)
    return begin, bulk


def register_write(con, rows: dict) -> None:
    """(1r) alternative loop: each bulk table registered on the connection, then unregistered."""
    begin, bulk = _singles_then_bulk(con, rows)
    for name, table in bulk.items():
        con.register(f"{name}_rows", table)
    con.execute(begin + " ".join([f"INSERT INTO {n} BY NAME SELECT * FROM {n}_rows;" for n in bulk] + ["COMMIT;"]))
    for name in bulk:
        con.unregister(f"{name}_rows")


def insert_into_write(con, rows: dict) -> None:
    """(1i) alternative loop: each bulk table inserted through a DuckDB relation (`from_arrow(…).insert_into`)."""
    begin, bulk = _singles_then_bulk(con, rows)
    if begin:
        con.execute("BEGIN")
    for name, table in bulk.items():
        con.from_arrow(table).insert_into(name)
    con.execute("COMMIT")


def floor_write(con, rows: dict) -> None:
    """The least a one-transaction-per-turn write into these tables can cost: BEGIN, one one-row VALUES
    insert into each table the turn touches (one row, whatever the turn holds), COMMIT."""
    con.execute("BEGIN")
    for name, r in rows.items():
        con.execute(_values_sql("INSERT", name, 1), list(r[0]))
    con.execute("COMMIT")


def med(xs: list[float]) -> float:
    return statistics.median(xs) * 1000


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--turns", type=int, default=300)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp())
    ref_start = reference_loop_ms()
    turns = [make_turn(i) for i in range(args.turns)]
    payloads = [sources_payload(t) for t in turns]
    assert sum(len(c.results) for c in turns[0].tool_calls) == 51  # 50 search items + the fetch

    # (1), (1a), (1b), (1r), (1i) and (1f), interleaved turn by turn (rotating which goes first), one file each
    names = ("a", "old", "before", "floor", "register", "insert_into")
    w, w_old, w_before, w_floor, w_reg, w_ins = (TraceWriter(tmp / f"{name}.duckdb") for name in names)
    run_id = w.run_for(turns[0].config)
    for other in (w_old, w_before, w_floor, w_reg, w_ins):
        with other.connect():
            pass  # created and migrated
    old = duckdb_connect(w_old.path, config={"threads": 1, "preserve_insertion_order": False})
    new_ms, cpu_ms, old_ms, before_ms, floor_ms = [], [], [], [], []
    alternatives = {"register": (register_write, []), "insert_into": (insert_into_write, [])}
    with (w.connect() as con, w_floor.connect() as floor, w_before.connect() as before, w_reg.connect() as reg,
          w_ins.connect() as ins):
        alt_cons = {"register": reg, "insert_into": ins}
        w._write(con, {run_id}, turn_rows(turns[0], payloads[0], run_id))  # the run row, outside the timing
        for i, (t, p) in enumerate(zip(turns, payloads)):
            t = dataclasses.replace(t, turn_id=uuid.uuid4().hex)
            p = {**p, "turn_id": t.turn_id}
            for which in ((i + j) % 6 for j in range(6)):
                if which in (4, 5):
                    name = "register" if which == 4 else "insert_into"
                    fn, times = alternatives[name]
                    t0 = time.perf_counter()
                    fn(alt_cons[name], turn_rows(t, p, run_id))
                    times.append(time.perf_counter() - t0)
                elif which == 3:
                    t0 = time.perf_counter()
                    before_write(before, turn_rows(t, p, run_id))
                    before_ms.append(time.perf_counter() - t0)
                elif which == 0:
                    c0, t0 = time.process_time(), time.perf_counter()
                    w._write(con, {run_id}, turn_rows(t, p, run_id))
                    new_ms.append(time.perf_counter() - t0)
                    cpu_ms.append(time.process_time() - c0)
                elif which == 1:
                    t0 = time.perf_counter()
                    previous_write(old, turn_rows(t, p, run_id))
                    old_ms.append(time.perf_counter() - t0)
                else:
                    rows = turn_rows(t, p, run_id)
                    t0 = time.perf_counter()
                    floor_write(floor, rows)
                    floor_ms.append(time.perf_counter() - t0)
    old.close()

    # (2) the interactive path, whole and split into attach / write / detach, next to (2a) the previous
    # interactive path (a fresh DuckDB connection opened and closed per turn), interleaved
    w2, w_prev = TraceWriter(tmp / "b.duckdb"), TraceWriter(tmp / "prev.duckdb")
    with w_prev.connect():
        pass  # created and migrated
    run_prev = w_prev.run_for(turns[0].config)
    log_ms, prev_ms = [], []
    for i, (t, p) in enumerate(list(zip(turns, payloads))[:60]):
        for which in ((0, 1) if i % 2 else (1, 0)):
            t0 = time.perf_counter()
            if which:
                w2.log_turn(t, p)
                log_ms.append(time.perf_counter() - t0)
            else:
                con = open_connection(w_prev.path, read_only=False)
                w_prev._write(con, {run_prev}, turn_rows(t, p, run_prev))
                con.close()
                prev_ms.append(time.perf_counter() - t0)
    run2 = w2.run_for(turns[0].config)
    open_ms, write_ms, close_ms = [], [], []
    for t, p in list(zip(turns, payloads))[60:120]:
        t0 = time.perf_counter()
        cm = write_connection(w2.path)
        con = cm.__enter__()
        t1 = time.perf_counter()
        w2._write(con, {run2}, turn_rows(t, p, run2))
        t2 = time.perf_counter()
        cm.__exit__(None, None, None)
        open_ms.append(t1 - t0)
        write_ms.append(t2 - t1)
        close_ms.append(time.perf_counter() - t2)

    # (3) buffered batches, as `eval` writes
    w3 = TraceWriter(tmp / "c.duckdb")
    with w3.connect():
        pass  # create and migrate outside the timing
    fresh = [make_turn(i) for i in range(args.turns)]
    fresh_payloads = [sources_payload(t) for t in fresh]
    t0 = time.perf_counter()
    with w3.buffered(max_turns=50, max_age_s=60):
        for t, p in zip(fresh, fresh_payloads):
            w3.log_turn(t, p)
    batch_ms = (time.perf_counter() - t0) / args.turns * 1000
    ref_end = reference_loop_ms()

    import os

    print(f"turn with 50 retrieved items, {args.turns} turns; load average {os.getloadavg()[0]:.1f} on "
          f"{os.cpu_count()} CPUs; reference loop {ref_start:.0f} ms at the start, {ref_end:.0f} ms at the end")
    print(f"  (1)  one transaction per turn, open connection: median {med(new_ms):.2f} ms, "
          f"p90 {sorted(new_ms)[int(len(new_ms) * 0.9)] * 1000:.2f} ms (CPU {med(cpu_ms):.2f} ms)")
    print(f"  (1a) anchor, the previous path, same turns interleaved: median {med(old_ms):.2f} ms "
          f"(this path {med(new_ms) / med(old_ms):.2f}× of it)")
    print(f"  (1b) anchor, before one definition per table (hand-written schemas, named locals), interleaved: "
          f"median {med(before_ms):.2f} ms (this path {med(new_ms) / med(before_ms):.2f}× of it)")
    for label, name in (("(1r) alternative loop, con.register + unregister per table", "register"),
                        ("(1i) alternative loop, a relation's insert_into per table", "insert_into")):
        times = alternatives[name][1]
        print(f"  {label}, interleaved: median {med(times):.2f} ms "
              f"({med(times) / med(before_ms):.2f}× of (1b))")
    print(f"  (1f) floor, one 1-row insert per table in one transaction, interleaved: median {med(floor_ms):.2f} ms")
    print(f"  (2)  log_turn, the file attached for the write and detached after: median {med(log_ms):.1f} ms "
          f"(attach {med(open_ms):.1f} + write {med(write_ms):.1f} + detach {med(close_ms):.1f} ms)")
    print(f"  (2a) anchor, the previous interactive path (a DuckDB connection opened and closed per turn), "
          f"interleaved: median {med(prev_ms):.1f} ms")
    print(f"  (3)  buffered batch of 50 (eval), connection included: {batch_ms:.2f} ms per turn")


if __name__ == "__main__":
    main()
