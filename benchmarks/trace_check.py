"""CPU of `check_trace_database`'s catalog query, on a trace file and on a team store, beside the query it replaced.

    .venv/bin/python benchmarks/trace_check.py [--runs 30]

Each store holds two traced turns, on one open connection: **the anchor, `SELECT 1`**; the query before this change
(`duckdb_tables()` read twice, `BEFORE` below); and `migrate._OBJECTS` (read once). A team store is a DuckLake on a
PostgreSQL this script starts (tests/pgserver.py; SKIP when absent), where each reading of the catalog goes to the
server. Medians of `--runs`, in milliseconds of wall time (the team store's time is mostly PostgreSQL's).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from workbench.session import Session  # noqa: E402
from workbench.trace.connect import connection  # noqa: E402
from workbench.trace.migrate import _OBJECTS  # noqa: E402

BEFORE = """
SELECT (SELECT count(*) FROM duckdb_tables() WHERE database_name = current_database()
                                           AND schema_name = current_schema() AND table_name = 'migrations'),
       (SELECT count(*) FROM duckdb_tables() WHERE database_name = current_database() AND NOT internal)
     + (SELECT count(*) FROM duckdb_views() WHERE database_name = current_database() AND NOT internal)
"""
QUERIES = {"anchor: SELECT 1": "SELECT 1", "before (two readings)": BEFORE, "_OBJECTS (one reading)": _OBJECTS}


def measure(store: str, runs: int) -> dict[str, float]:
    session = Session.open(trace_db=store)
    for question in ("How do I configure SSO?", "How do I reset my password?"):
        session.ask(question)
    times: dict[str, list[float]] = {name: [] for name in QUERIES}
    with connection(store, read_only=True) as con:
        assert con.execute(BEFORE).fetchone() == con.execute(_OBJECTS).fetchone()  # the same answer
        for _ in range(runs):
            for name, sql in QUERIES.items():
                start = time.perf_counter()
                con.execute(sql).fetchone()
                times[name].append((time.perf_counter() - start) * 1000)
    return {name: statistics.median(values) for name, values in times.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=30)
    args = ap.parse_args()
    import pgserver

    folder = Path(tempfile.mkdtemp(prefix="wb-trace-check-"))
    os.environ["WORKBENCH_HOME"] = str(folder / "home")
    results = {"trace file": measure(str(folder / "traces.duckdb"), args.runs)}
    if pgserver.available() is None:
        server = pgserver.Server().start()
        try:
            results["team store"] = measure(pgserver.migrated_team_store(server, folder / "lake-data"), args.runs)
        finally:
            server.stop()
    else:
        print(f"team store SKIPPED: {pgserver.available()}")
    for store, medians in results.items():
        for name, ms in medians.items():
            print(f"{store:11} {name:24} median {ms:6.2f} ms   ({args.runs} runs)")


if __name__ == "__main__":
    main()
