"""The design not taken: a turn as one row with nested lists, child tables as views over it.

    .venv/bin/python benchmarks/trace_nested_alternative.py [--turns 300] [--db /tmp/trace_scale.duckdb]

(1) Write cost: the same turns (50 retrieved items) written turn by turn, interleaved, by the trace
writer (one insert per table) and as one nested row per turn (one insert), each in its own
transaction. (2) Read cost, if `--db` names the 1M-turn database built by trace_scale.py: three
analyst queries over the real `sources` table and over a `sources` view that unnests the same rows
from one nested row per turn (built in a copy of `sources` inside a scratch file next to it).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import pyarrow as pa  # noqa: E402

from trace_write import ARROW_TYPES, make_turn  # noqa: E402
from workbench.provenance import sources_payload  # noqa: E402
from workbench.trace.connect import _WRITER_CONFIG, duckdb_connect  # noqa: E402
from workbench.trace.rows import turn_rows  # noqa: E402
from workbench.trace.tables import SCHEMAS  # noqa: E402
from workbench.trace.writer import TraceWriter  # noqa: E402

CHILDREN = ("tool_calls", "retrieved_items", "citations", "sources")


def _fields(name: str) -> list[tuple[str, pa.DataType]]:
    return [(n, ARROW_TYPES[t]) for n, t in zip(SCHEMAS[name].names, SCHEMAS[name].types)]


NESTED = pa.schema(_fields("turns") + [
    (name, pa.list_(pa.struct([f for f in _fields(name) if f[0] != "turn_id"]))) for name in CHILDREN])

QUERIES = {
    "consulted turns per document": "SELECT doc_id, count(*) FROM {t} WHERE consulted GROUP BY 1",
    "turns that retrieved one document": "SELECT count(DISTINCT turn_id) FROM {t} WHERE doc_id = 'doc-7'",
    "consulted documents per turn": "SELECT turn_id, count(*) FILTER (WHERE consulted) FROM {t} GROUP BY 1",
}


def nested_row(rows: dict) -> pa.Table:
    row = [rows["turns"][0].get(n) for n in SCHEMAS["turns"].names]
    for name in CHILDREN:
        names = SCHEMAS[name].names[1:]
        row.append([{n: r.get(n) for n in names} for r in rows.get(name, [])])
    return pa.table({f.name: [v] for f, v in zip(NESTED, row)}, schema=NESTED)


def med(xs: list[float]) -> float:
    return statistics.median(xs) * 1000


def write_cost(n: int) -> None:
    tmp = Path(tempfile.mkdtemp())
    turns = [make_turn(i) for i in range(n)]
    payloads = [sources_payload(t) for t in turns]
    w = TraceWriter(tmp / "tables.duckdb")
    run_id = w.run_for(turns[0].config)
    nested = duckdb_connect(tmp / "nested.duckdb", config=_WRITER_CONFIG)
    empty = pa.Table.from_batches([], schema=NESTED)  # noqa: F841 (scanned by DuckDB)
    nested.execute("CREATE TABLE turn_log AS SELECT * FROM empty")
    tables_ms, nested_ms = [], []
    with w.connect() as con:
        w._write(con, {run_id}, turn_rows(turns[0], payloads[0], run_id))
        for i, (t, p) in enumerate(list(zip(turns, payloads))[1:]):
            for which in ((0, 1) if i % 2 else (1, 0)):
                t0 = time.perf_counter()
                if which:
                    w._write(con, {run_id}, turn_rows(t, p, run_id))
                    tables_ms.append(time.perf_counter() - t0)
                else:
                    row = nested_row(turn_rows(t, p, run_id))  # noqa: F841 (scanned by DuckDB)
                    nested.execute("BEGIN; INSERT INTO turn_log SELECT * FROM row; COMMIT")
                    nested_ms.append(time.perf_counter() - t0)
    nested.close()
    print(f"write, {n} turns with 50 retrieved items, interleaved; load average {os.getloadavg()[0]:.1f}")
    print(f"  one insert per table (the trace writer): median {med(tables_ms):.2f} ms")
    print(f"  one nested row per turn:                 median {med(nested_ms):.2f} ms "
          f"({med(nested_ms) / med(tables_ms):.2f}×)")


def read_cost(db: Path) -> None:
    scratch = Path(tempfile.mkdtemp()) / "copy.duckdb"
    shutil.copy(db, scratch)
    con = duckdb_connect(scratch)
    t0 = time.perf_counter()
    con.execute("""CREATE TABLE turn_nested AS
        SELECT turn_id, list(struct_pack(doc_id := doc_id, title := title, retrieved := retrieved, cited := cited,
               consulted := consulted, exposure := exposure, reason := reason, position := position)) AS srcs
        FROM sources GROUP BY turn_id""")
    con.execute("CREATE VIEW sources_nested AS SELECT turn_id, unnest(srcs, recursive := true) FROM turn_nested")
    n = con.execute("SELECT count(*) FROM sources").fetchone()[0]
    assert con.execute("SELECT count(*) FROM sources_nested").fetchone()[0] == n
    print(f"read, {n:,} source rows (nested copy built in {time.perf_counter() - t0:.1f} s); medians of 3")
    for name, sql in QUERIES.items():
        timings = {}
        for table in ("sources", "sources_nested"):
            xs = []
            for _ in range(3):
                t0 = time.perf_counter()
                con.execute(sql.format(t=table)).fetchall()
                xs.append(time.perf_counter() - t0)
            timings[table] = med(xs)
        print(f"  {name}: table {timings['sources']:.0f} ms, nested view {timings['sources_nested']:.0f} ms "
              f"({timings['sources_nested'] / timings['sources']:.1f}×)")
    con.close()
    scratch.unlink()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--turns", type=int, default=300)
    ap.add_argument("--db", type=Path, help="the 1M-turn database from trace_scale.py (read cost; skipped if absent)")
    args = ap.parse_args()
    write_cost(args.turns)
    if args.db and args.db.exists():
        read_cost(args.db)
    else:
        print("read cost skipped: pass --db with the database benchmarks/trace_scale.py builds")


if __name__ == "__main__":
    main()
