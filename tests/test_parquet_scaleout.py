"""Scale-out by Parquet (docs/interop.md): every trace table reads back with DuckDB's
`read_parquet(…, hive_partitioning = true)`, row for row, partitioned by run date."""

from __future__ import annotations

import duckdb

from tracedb import empty_trace_db
from workbench.cli import main
from workbench.session import Session


def test_every_table_reads_back_with_hive_partitioning(tmp_path, capsys):
    db = empty_trace_db(tmp_path / "t.duckdb")
    s = Session.open(trace_db=db)
    for q in ("How do I configure SSO?", "What articles do you have?", "What is the capital of Mongolia?"):
        s.ask(q)
    s.ask("How do I configure SSO?", mode="excerpts", verify=True)  # verified: `ablations` rows too
    with duckdb.connect(str(db)) as con:
        # a run from three days earlier (a second partition)
        con.execute("UPDATE runs SET created_at = created_at - INTERVAL 3 DAY WHERE mode = 'excerpts'")
        tables = [t for (t,) in con.execute("SELECT table_name FROM duckdb_tables() WHERE table_name <> 'migrations'")
                  .fetchall()]
        counts = {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in tables}
        columns = {t: [c for (c,) in con.execute("SELECT column_name FROM duckdb_columns() WHERE table_name = ? "
                                                 "ORDER BY column_index", [t]).fetchall()] for t in tables}
        dates = {r for (r,) in con.execute("SELECT DISTINCT strftime(created_at AT TIME ZONE 'UTC', '%Y-%m-%d') "
                                           "FROM runs").fetchall()}
    assert {"model_calls", "passages", "ablations", "claims"} <= set(tables) and len(dates) == 2

    out = tmp_path / "export"
    assert main(["export", "--parquet", str(out), "--db", str(db)]) == 0
    printed = capsys.readouterr().out
    reader = duckdb.connect()
    for table in tables:
        assert f"{table}: {counts[table]} rows" in printed
        if counts[table] == 0:
            continue
        rel = reader.sql(f"SELECT * FROM read_parquet('{out}/{table}/**/*.parquet', hive_partitioning = true)")
        if table == "passages":  # shared by turns of every run: one unpartitioned file
            assert rel.columns == columns[table] and [p.name for p in (out / table).iterdir()] == ["passages.parquet"]
            assert reader.sql("SELECT count(*) FROM rel").fetchall() == [(counts[table],)]
            continue
        assert rel.columns == columns[table] + ["run_date"], table
        ((n, parts),) = reader.sql("SELECT count(*), count(DISTINCT run_date) FROM rel").fetchall()
        assert n == counts[table], table
        folders = {p.name for p in (out / table).iterdir()}
        assert folders <= {f"run_date={d}" for d in dates} and parts == len(folders)
    # a partition filter prunes files: only one day's turns
    day = min(dates)
    ((n,),) = reader.sql(f"SELECT count(*) FROM read_parquet('{out}/turns/**/*.parquet', hive_partitioning = true) "
                         f"WHERE run_date = '{day}'").fetchall()
    assert n == 1
    assert main(["export", "--parquet", str(out), "--db", str(db)]) == 0  # again: replaced, not added to
    ((n,),) = reader.sql(f"SELECT count(*) FROM read_parquet('{out}/passages/*.parquet')").fetchall()
    assert n == counts["passages"]
