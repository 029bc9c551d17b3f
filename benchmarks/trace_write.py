"""Trace write cost per turn, for a turn with 50 retrieved items (2 searches × 25, a fetch, 3 citations).

    .venv/bin/python benchmarks/trace_write.py [--turns 300]

Prints medians of: (1) one turn written in its own transaction on an open connection (the write
itself, building its rows included: one `INSERT … BY NAME SELECT unnest(?::TYPE[]) AS column, …` per
table, the rows dicts bound as one list per column), next to (1a) the previous write (one-row tables as VALUES, the others as Arrow
tables scanned by DuckDB, which imports pandas to do it) and (1f) the floor of any
one-transaction-per-turn write into these tables (one 1-row insert per table), timed turn by turn in the
same run — this machine's speed drifts by up to 3× within minutes, so only side-by-side figures compare;
(2) `log_turn` as an interactive ask does it (the file attached to the process's in-memory DuckDB for the
write), split into attach / write / detach, next to (2a) a DuckDB connection opened and closed per turn;
(3) per turn inside a buffered batch of 50 turns (how `eval` writes), connection included.
A pure-Python reference loop timed at the start and end shows how fast the machine was.
"""

from __future__ import annotations

import argparse
import dataclasses
import resource
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from workbench.provenance import sources_payload  # noqa: E402

from workbench.trace.connect import open_connection, write_connection  # noqa: E402
from workbench.trace.rows import SHARED_TABLES, TURN_TABLES, turn_rows  # noqa: E402
from workbench.trace.tables import SCHEMAS  # noqa: E402
from workbench.trace.writer import TraceWriter, _rollback  # noqa: E402
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


# (1a) The previous write, verbatim but for taking dict rows: rows as tuples in column order, one-row
# tables as a parameterised VALUES insert, every other table as an Arrow table DuckDB scans.
import functools  # noqa: E402

import pyarrow as pa  # noqa: E402

ARROW_TYPES = {"VARCHAR": pa.string(), "INTEGER": pa.int32(), "BIGINT": pa.int64(), "DOUBLE": pa.float64(),
               "BOOLEAN": pa.bool_(), "TIMESTAMPTZ": pa.timestamp("us", tz="UTC"), "VARCHAR[]": pa.list_(pa.string())}


def _tuples(name: str, rows: list[dict]) -> list[tuple]:
    return [tuple(r.get(c) for c in SCHEMAS[name].names) for r in rows]


@functools.lru_cache(maxsize=None)
def _values_sql(verb: str, name: str, n_rows: int) -> str:
    cols = SCHEMAS[name].names
    row = "(" + ", ".join("?" * len(cols)) + ")"
    return f"{verb} INTO {name} ({', '.join(cols)}) VALUES " + ", ".join([row] * n_rows)


def rows_to_table(name: str, rows: list[tuple]) -> pa.Table:
    t = SCHEMAS[name]
    schema = pa.schema([(n, ARROW_TYPES[ty]) for n, ty in zip(t.names, t.types)])
    cols = list(zip(*rows)) if rows else [()] * len(schema)
    return pa.table({f.name: list(c) for f, c in zip(schema, cols)}, schema=schema)


def previous_write(con, dict_rows: dict) -> None:
    rows = {name: _tuples(name, r) for name, r in dict_rows.items()}
    begin = "BEGIN; "
    bulk: dict[str, pa.Table] = {}
    try:
        for name in ("runs", *TURN_TABLES):
            r = rows.get(name)
            if not r:
                continue
            if name == "runs" or len(r) == 1:
                verb = "INSERT OR IGNORE" if name in SHARED_TABLES else "INSERT"
                con.execute(begin + _values_sql(verb, name, len(r)), [v for row in r for v in row])
                begin = ""
            else:
                bulk[name] = rows_to_table(name, r)
        script = begin + " ".join([f"INSERT {'OR IGNORE ' if name in SHARED_TABLES else ''}INTO {name} BY NAME "
                                   f"SELECT * FROM {name}_rows;" for name in bulk] + ["COMMIT;"])
        scope = {f"{name}_rows": table for name, table in bulk.items()}
        eval("_con.execute(_script)", {}, {**scope, "_con": con, "_script": script})
    except BaseException:
        _rollback(con)
        raise


def floor_write(con, rows: dict) -> None:
    """The least a one-transaction-per-turn write into these tables can cost: BEGIN, one one-row VALUES
    insert into each table the turn touches (one row, whatever the turn holds), COMMIT."""
    con.execute("BEGIN")
    for name, r in rows.items():
        con.execute(_values_sql("INSERT", name, 1), list(_tuples(name, r[:1])[0]))
    con.execute("COMMIT")


def flush_cost(tmp: Path, rounds: int = 7) -> tuple[list[float], list[float]]:
    """CPU time of writing 50 turns in one transaction (a batch's flush): this write vs the previous one,
    interleaved, each on its own file."""
    from workbench.trace.writer import _commit

    def cpu() -> float:
        r = resource.getrusage(resource.RUSAGE_SELF)
        return r.ru_utime + r.ru_stime

    w_new, w_old = TraceWriter(tmp / "flush-new.duckdb"), TraceWriter(tmp / "flush-old.duckdb")
    new, old = [], []
    with w_new.connect() as cn, w_old.connect() as co:
        for r in range(rounds):
            merged: dict[str, list] = {}
            for i in range(50):
                t = dataclasses.replace(make_turn(i), turn_id=uuid.uuid4().hex)
                for name, rows in turn_rows(t, sources_payload(t), "r" * 32).items():
                    merged.setdefault(name, []).extend(rows)
            for which in ((0, 1) if r % 2 else (1, 0)):
                c = cpu()
                if which:
                    _commit(cn, merged)
                    new.append(cpu() - c)
                else:
                    previous_write(co, merged)
                    old.append(cpu() - c)
    return new, old


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

    # (1), (1a) and (1f), interleaved turn by turn (rotating which goes first), one file each
    w, w_old, w_floor = (TraceWriter(tmp / f"{name}.duckdb") for name in ("a", "old", "floor"))
    run_id = w.run_for(turns[0].config)
    for other in (w_old, w_floor):
        with other.connect():
            pass  # created and migrated
    new_ms, cpu_ms, old_ms, floor_ms = [], [], [], []
    with w.connect() as con, w_old.connect() as old, w_floor.connect() as floor:
        w._write(con, {run_id}, turn_rows(turns[0], payloads[0], run_id))  # the run row, outside the timing
        previous_write(old, {**turn_rows(turns[0], payloads[0], run_id), "runs": [w._new_runs[run_id]]})
        for i, (t, p) in enumerate(zip(turns, payloads)):
            t = dataclasses.replace(t, turn_id=uuid.uuid4().hex)
            p = {**p, "turn_id": t.turn_id}
            for which in ((i + j) % 3 for j in range(3)):
                if which == 0:
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
    flush_new, flush_old = flush_cost(tmp)
    ref_end = reference_loop_ms()

    import os

    print(f"turn with 50 retrieved items, {args.turns} turns; load average {os.getloadavg()[0]:.1f} on "
          f"{os.cpu_count()} CPUs; reference loop {ref_start:.0f} ms at the start, {ref_end:.0f} ms at the end")
    print(f"  (1)  one transaction per turn, open connection: median {med(new_ms):.2f} ms, "
          f"p90 {sorted(new_ms)[int(len(new_ms) * 0.9)] * 1000:.2f} ms (CPU {med(cpu_ms):.2f} ms)")
    print(f"  (1a) anchor, the previous write (VALUES + Arrow tables), same turns interleaved: median "
          f"{med(old_ms):.2f} ms (this path {med(new_ms) / med(old_ms):.2f}× of it)")
    print(f"  (1f) floor, one 1-row insert per table in one transaction, interleaved: median {med(floor_ms):.2f} ms")
    print(f"  (2)  log_turn, the file attached for the write and detached after: median {med(log_ms):.1f} ms "
          f"(attach {med(open_ms):.1f} + write {med(write_ms):.1f} + detach {med(close_ms):.1f} ms)")
    print(f"  (2a) anchor, a DuckDB connection opened and closed per turn, "
          f"interleaved: median {med(prev_ms):.1f} ms")
    print(f"  (3)  buffered batch of 50 (eval), connection included: {batch_ms:.2f} ms per turn")
    print(f"  (3a) one flush of 50 turns, CPU: median {med(flush_new):.1f} ms; the previous write (VALUES + Arrow, "
          f"pandas already loaded by (1a)), interleaved: {med(flush_old):.1f} ms")


if __name__ == "__main__":
    main()
