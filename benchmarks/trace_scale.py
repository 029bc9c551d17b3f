"""1M synthetic turns (~21M rows) generated in bulk with DuckDB SQL, then the analyst views timed.

    .venv/bin/python benchmarks/trace_scale.py [--turns 1000000] [--db /tmp/trace_scale.duckdb]
    .venv/bin/python benchmarks/trace_scale.py --team [--turns 100000]     # + the same rows in a team store

With `--team` the same rows are then copied, in bulk and in one transaction, into a new team store (a DuckLake on a
PostgreSQL the script starts, tests/pgserver.py, its data in a folder beside `--db`), and every query is timed on
both stores in the same run, each through an open connection and through `TraceReader`.

Rows per turn: 2 model calls, 2 tool calls, 10 retrieved items (9 search snippets pointing at one of 2,000
608-character passages, one per document, as real snippets repeat), 2 citations, 6 sources (~23 rows with
the turn). One turn in 10 is verified by ablation: a control row and one `ablations` row per source
(consulted ones load-bearing, the rest no effect), ~0.7 rows per turn on average.
Not part of the test suite (it takes minutes and ~1 GB of disk).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from workbench.trace.connect import duckdb_connect  # noqa: E402
from workbench.trace.migrate import migrate  # noqa: E402
from workbench.trace.reader import TraceReader  # noqa: E402
from workbench.trace.schema_m004 import SQL as M004_VIEWS  # noqa: E402
from workbench.trace.schema_m009 import M009_ABLATIONS  # noqa: E402

GENERATE = """
INSERT INTO runs (run_id, created_at, kind, provider, model, retriever, mode, k, prompt_version, corpus_id, corpus_hash, config_json)
SELECT 'run-' || r, TIMESTAMPTZ '2024-01-01 00:00:00+00' + INTERVAL (r) HOUR, 'eval',
       ['offline', 'ollama', 'gemini'][r % 3 + 1], ['extractive-v1', 'llama3.2', 'gemini-2.0-flash'][r % 3 + 1],
       ['bm25', 'vector', 'hybrid'][(r // 3) % 3 + 1], CASE WHEN r % 2 = 0 THEN 'agent' ELSE 'excerpts' END,
       5, 'agent-v1', 'demo', 'hash', '{{}}'
FROM range({runs}) t(r);

INSERT INTO turns
SELECT printf('%032x', i) AS turn_id, 'run-' || (i % {runs}) AS run_id,
       CASE WHEN i % 50 = 0 THEN 'What articles do you have?'
            ELSE 'How do I fix problem number ' || (hash(i) % 5000) || '?' END AS question,
       'An answer citing [a](doc-1).' AS answer,
       CASE WHEN i % 97 = 0 THEN 'provider_error' ELSE 'ok' END AS status,
       CASE WHEN i % 97 = 0 THEN 'timeout' END AS error,
       TIMESTAMPTZ '2024-01-01 00:00:00+00' + INTERVAL (i) SECOND AS started_at,
       5 + (hash(i) % 2000) / 10.0 AS latency_ms, 800 + i % 300 AS tokens_in, 120 + i % 80 AS tokens_out,
       CASE WHEN i % 50 = 0 THEN 'structural' ELSE 'substantive' END AS question_kind,
       6 AS n_retrieved, CASE WHEN i % 10 = 0 THEN 0 ELSE 2 END AS n_cited,
       CASE WHEN i % 10 = 0 THEN 0 ELSE 1 + i % 2 END AS n_consulted,
       CASE WHEN i % 23 = 0 THEN 1 ELSE 0 END AS n_rejected, 2 AS n_tool_calls, 2 AS n_model_calls,
       4 + (hash(i) % 1000) / 10.0 AS model_latency_ms
FROM range({turns}) t(i);

INSERT INTO tool_calls
SELECT printf('%032x', i), s, CASE WHEN s = 0 THEN 'search' ELSE 'fetch_document' END,
       CASE WHEN s = 0 THEN 'snippet' ELSE 'full' END, '{{"query": "q"}}', 1.5, CASE WHEN s = 0 THEN 9 ELSE 1 END,
       NULL, NULL
FROM range({turns}) t(i), range(2) u(s);

INSERT INTO retrieved_items
SELECT printf('%032x', i), CASE WHEN r < 9 THEN 0 ELSE 1 END, CASE WHEN r < 9 THEN r + 1 END,
       'doc-' || ((hash(i) + r) % 2000), r % 3, CASE WHEN r < 9 THEN 10.0 - r END,
       CASE WHEN r < 9 THEN 'snippet' ELSE 'full' END, CASE WHEN r < 9 THEN r + 1 ELSE 1 END, NULL, NULL,
       CASE WHEN r < 9 THEN md5('passage-' || ((hash(i) + r) % 2000)) END
FROM range({turns}) t(i), range(10) u(r);

INSERT INTO passages
SELECT md5('passage-' || d), array_to_string(list_transform(range(19), lambda k: md5(d || '-' || k)), '')
FROM range(2000) t(d);

INSERT INTO model_calls
SELECT printf('%032x', i), c, 'offline', 'extractive-v1', NULL, 2 + (hash(i) % 500) / 10.0, NULL, NULL,
       CASE WHEN c = 0 THEN 'tool_calls' ELSE 'stop' END, 0, CASE WHEN c = 0 THEN 2 ELSE 0 END
FROM range({turns}) t(i), range(2) u(c);

INSERT INTO citations
SELECT printf('%032x', i), c, 'doc-' || ((hash(i) + c) % 2000), 'doc-' || ((hash(i) + c) % 2000),
       NOT (i % 23 = 0 AND c = 1), CASE WHEN i % 23 = 0 AND c = 1 THEN 'not_retrieved' END, NULL, NULL, NULL,
       10 * c, 10 * c + 8
FROM range({turns}) t(i), range(2) u(c);

INSERT INTO sources
SELECT printf('%032x', i), 'doc-' || ((hash(i) + d) % 2000), 'Title ' || d, NULL, true,
       i % 10 <> 0 AND d < 2, i % 10 <> 0 AND d < 1 + i % 2, CASE WHEN d = 0 THEN 'full' ELSE 'snippet' END,
       'reason', 'source', NULL, 0, d + 1, CASE WHEN d < 2 THEN d + 1 END
FROM range({turns}) t(i), range(6) u(d);

INSERT INTO ablations (turn_id, verification_id, seq, role, doc_id, verdict, status, similarity, extra_calls, latency_ms,
                       method, control_stable, similarity_threshold, verified_at)
SELECT turn_id, 'v-' || turn_id, 0, 'control', NULL, NULL, 'ok', 1.0, 2, 3.0, 'ablation-v1', true, 0.8,
       TIMESTAMPTZ '2024-06-01 00:00:00+00'
FROM turns WHERE hash(turn_id) % 10 = 0
UNION ALL
SELECT s.turn_id, 'v-' || s.turn_id, s.position, 'candidate', s.doc_id,
       CASE WHEN s.consulted THEN 'load_bearing' ELSE 'no_effect' END, 'ok', CASE WHEN s.consulted THEN 0.3 ELSE 1.0 END,
       2, 3.0, 'ablation-v1', true, 0.8, TIMESTAMPTZ '2024-06-01 00:00:00+00'
FROM sources s WHERE hash(s.turn_id) % 10 = 0;
"""

# The anchor: `doc_usage` as m008 defined it, before m009 joined each source to its verdict.
DOC_USAGE_M008 = """
SELECT s.doc_id, arg_max(s.title, t.started_at) AS title, arg_max(s.kind, t.started_at) AS kind,
       arg_max(s.artifact_kind, t.started_at) AS artifact_kind, count(*) AS retrieved_turns,
       count(*) FILTER (WHERE s.cited) AS cited_turns, count(*) FILTER (WHERE s.consulted) AS consulted_turns,
       count(DISTINCT t.run_id) AS runs, min(t.started_at) AS first_used, max(t.started_at) AS last_used,
       max(t.started_at) FILTER (WHERE s.consulted) AS last_consulted
FROM sources s JOIN turns t USING (turn_id)
GROUP BY s.doc_id
ORDER BY consulted_turns DESC, cited_turns DESC, retrieved_turns DESC, s.doc_id
"""



def _shipped(sql: str, start: str, end: str) -> str:
    """The query of a view or macro as an earlier migration shipped it (the anchors below), cut from its SQL."""
    i = sql.index(start) + len(start)
    return sql[i:sql.index(end, i) + len(end) - 1]


# Anchors for m010: `doc_gaps` as m004 defined it (no corpus, no "answered elsewhere" anti-join) and
# `doc_usage` as m009 defined it (per document, not per corpus; no runs join), both over all runs.
DOC_GAPS_M004 = _shipped(M004_VIEWS, "CREATE VIEW doc_gaps AS", "ORDER BY asks DESC, last_seen DESC;")
DOC_USAGE_M009 = _shipped(M009_ABLATIONS, "CREATE OR REPLACE MACRO doc_usage_for(run_ids := NULL) AS TABLE",
                          "retrieved_turns DESC, s.doc_id;").replace(
    "WHERE run_ids IS NULL OR list_contains(run_ids, t.run_id)", "")

QUERIES = {
    "turn_sets (all rows → Arrow)": "SELECT * FROM turn_sets",
    "turn_sets (one run)": "SELECT * FROM turn_sets WHERE run_id = 'run-7'",
    "turn_sets (aggregate)": "SELECT provider, avg(n_retrieved), avg(n_cited), avg(n_consulted) FROM turn_sets GROUP BY 1",
    "doc_gaps": "SELECT * FROM doc_gaps",
    "doc_gaps as m004 had it (anchor)": DOC_GAPS_M004,
    "doc_gaps (one provider)": "SELECT * FROM doc_gaps_for(providers := ['ollama'])",
    "provider_summary": "SELECT * FROM provider_summary",
    "retriever_summary": "SELECT * FROM retriever_summary",
    "doc_usage": "SELECT * FROM doc_usage",
    "doc_usage as m008 had it (anchor)": DOC_USAGE_M008,
    "doc_usage as m009 had it (anchor)": DOC_USAGE_M009,
    "doc_usage (one run)": "SELECT * FROM doc_usage_for(run_ids := ['run-7'])",
    "doc_usage_totals": "SELECT * FROM doc_usage_totals",
    "source_verdicts (one turn)": "SELECT * FROM source_verdicts WHERE turn_id = printf('%032x', 10)",
    "verification_summary": "SELECT * FROM verification_summary",
}


def _generate(con, sql: str) -> None:
    """Run GENERATE's inserts: one without a column list fills the table's first columns (the ones its query was
    written for; later migrations appended the rest, which stay NULL)."""
    for statement in filter(str.strip, sql.split(";\n")):
        head = re.match(r"\s*INSERT INTO (\w+)\s*\n(SELECT.*)", statement, re.S)
        if head:
            table, select = head.groups()
            width = len(con.execute(f"DESCRIBE {select}").fetchall())
            names = [c for (c,) in con.execute("SELECT column_name FROM duckdb_columns() WHERE table_name = "
                                               f"'{table}' ORDER BY column_index").fetchall()][:width]
            statement = f"INSERT INTO {table} ({', '.join(names)})\n{select}"
        con.execute(statement)


def _to_team_store(file: str, server, data: Path) -> str:
    """A new team store holding every row of the trace file `file` (migrated, then copied in one transaction)."""
    import shutil

    from workbench.trace.lake import cursor

    shutil.rmtree(data, ignore_errors=True)
    os.environ["WORKBENCH_DATA_PATH"] = str(data)
    lake = "ducklake:postgres:" + server.create_database(f"scale_{os.getpid()}")
    t0 = time.perf_counter()
    with cursor(lake) as con:
        migrate(con)
        migrated = time.perf_counter() - t0
        con.execute(f"ATTACH '{file}' AS scale_file (READ_ONLY)")
        tables = [t for (t,) in con.execute("SELECT table_name FROM duckdb_tables() WHERE database_name = 'scale_file' "
                                            "AND table_name <> 'migrations'").fetchall()]
        t1 = time.perf_counter()
        con.execute("BEGIN")
        for table in tables:
            if con.execute(f"SELECT count(*) FROM scale_file.{table}").fetchone()[0]:
                con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM scale_file.{table}")
        con.execute("COMMIT")
        con.execute("DETACH scale_file")
    size = sum(f.stat().st_size for f in data.rglob("*") if f.is_file())
    print(f"team store: migrated in {migrated:.1f} s, rows copied in {time.perf_counter() - t1:.1f} s; "
          f"data path {size / 1e6:.0f} MB")
    return lake


def _time_queries(label: str, db: str, con, repeat: int) -> dict[str, tuple[float, float, int]]:
    """Per query: median seconds on the open connection `con`, through `TraceReader(db)`, and the rows."""
    print(f"\n{label}\n{'query':36} {'open conn. median':>18} {'TraceReader median':>20} {'rows':>9}")
    reader, out = TraceReader(db), {}
    for name, sql in QUERIES.items():
        warm = con.sql(sql).to_arrow_table()
        t_open, t_reader = [], []
        for _ in range(repeat):
            t = time.perf_counter()
            con.sql(sql).to_arrow_table()
            t_open.append(time.perf_counter() - t)
            t = time.perf_counter()
            reader.arrow(sql)
            t_reader.append(time.perf_counter() - t)
        out[name] = (statistics.median(t_open), statistics.median(t_reader), warm.num_rows)
        print(f"{name:36} {out[name][0] * 1000:15.0f} ms {out[name][1] * 1000:17.0f} ms {warm.num_rows:9,}", flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--turns", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=60)
    ap.add_argument("--db", default="/tmp/trace_scale.duckdb")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--team", action="store_true", help="also a team store with the same rows, timed beside the file")
    args = ap.parse_args()
    print("load average before:", os.getloadavg())

    for suffix in ("", ".wal"):
        Path(args.db + suffix).unlink(missing_ok=True)
    con = duckdb_connect(args.db)
    migrate(con)
    t0 = time.perf_counter()
    con.execute("BEGIN")
    _generate(con, GENERATE.format(turns=args.turns, runs=args.runs))
    con.execute("COMMIT")
    con.execute("CHECKPOINT")
    gen_s = time.perf_counter() - t0
    counts = {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
              for t in ("runs", "turns", "model_calls", "tool_calls", "retrieved_items", "passages", "citations",
                        "sources", "ablations")}
    con.close()
    total = sum(counts.values())
    size = os.path.getsize(args.db)
    print(f"generated {total:,} rows in {gen_s:.1f} s: " + ", ".join(f"{t} {n:,}" for t, n in counts.items()))
    print(f"database size: {size / 1e6:.0f} MB ({size / 1e6 / (args.turns / 1e6):.0f} MB per 1M turns)")

    if not args.team:
        con = duckdb_connect(args.db, read_only=True)
        _time_queries("file", args.db, con, args.repeat)
        con.close()
        return
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    import pgserver

    from workbench.trace.lake import cursor

    reason = pgserver.available()
    if reason:
        raise SystemExit(f"SKIP: {reason}")
    server = pgserver.Server().start()
    try:
        lake = _to_team_store(args.db, server, Path(args.db + ".lake"))
        con = duckdb_connect(args.db, read_only=True)
        file_times = _time_queries(f"file (load {os.getloadavg()[0]:.1f})", args.db, con, args.repeat)
        con.close()
        with cursor(lake) as con:
            team_times = _time_queries(f"team store (load {os.getloadavg()[0]:.1f})", lake, con, args.repeat)
    finally:
        server.stop()
    print("\n| query | file: open connection | team: open connection | file: TraceReader | team: TraceReader | rows |")
    print("|---|---|---|---|---|---|")
    for name, (f_open, f_reader, rows) in file_times.items():
        t_open, t_reader, _ = team_times[name]
        print(f"| {name} | {f_open * 1000:.0f} ms | {t_open * 1000:.0f} ms | {f_reader * 1000:.0f} ms | "
              f"{t_reader * 1000:.0f} ms | {rows:,} |")
    print("load average after:", os.getloadavg())


if __name__ == "__main__":
    main()
