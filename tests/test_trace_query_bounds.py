"""Typed SQL (`workbench sql`, the Trace explorer) is bounded in memory, rows and result size, not only in
time: the hostile queries of issue 24 end with a clear message or a cut result, and the process that
asked stays small (measured with getrusage in a fresh process)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from workbench.cli import main
from workbench.session import Session
from workbench.trace import TraceReader
from workbench.trace.isolated import (MAX_QUERY_ROWS, MAX_RESULT_BYTES, QUERY_ADDRESS_SPACE, QUERY_MEMORY_LIMIT,
                                      QUERY_TEMP_LIMIT)

ROOT = Path(__file__).resolve().parent.parent
MANY_ROWS = "SELECT * FROM range(60000000)"  # reached 3.1 GB before the fix
HUGE_LIST = "SELECT list(i) FROM range(400000000) t(i)"  # reached 3.5 GB
HUGE_STRINGS = "SELECT repeat('x', 100000000) FROM range(100000)"  # strings DuckDB allocates outside memory_limit

MEASURE = """
import json, resource, sys
from workbench.trace import TraceReader
try:
    r = TraceReader(sys.argv[1]).user_query(sys.argv[2], files=False)
    out = {"rows": len(r.rows), "cut": r.cut}
except Exception as exc:
    out = {"error": type(exc).__name__, "message": str(exc)}
# VmHWM: this process's own peak (ru_maxrss would carry over pytest's, inherited across fork and exec)
hwm = next(line for line in open("/proc/self/status") if line.startswith("VmHWM:"))
out["self_mb"] = int(hwm.split()[1]) / 1024
out["children_mb"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    path = tmp_path_factory.mktemp("bounds") / "t.duckdb"
    Session.open(trace_db=path).ask("How do I configure SSO?")
    return path


def measured(db: Path, sql: str) -> dict:
    """Run one typed query in a fresh process; its outcome and peak memory (its own and its children's)."""
    proc = subprocess.run([sys.executable, "-c", MEASURE, str(db), sql], capture_output=True, text=True, cwd=ROOT,
                          timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_sixty_million_rows_come_back_cut_to_the_row_cap_and_memory_stays_small(db):
    out = measured(db, MANY_ROWS)
    assert out.get("rows") == MAX_QUERY_ROWS, out
    assert f"first {MAX_QUERY_ROWS:,} rows" in out["cut"] and "row cap" in out["cut"]
    assert out["self_mb"] < 300, out  # the asking process (the app, the CLI) never holds the whole result
    assert out["children_mb"] < QUERY_ADDRESS_SPACE / 1024**2


@pytest.mark.parametrize("sql", [HUGE_LIST, HUGE_STRINGS], ids=["list", "strings"])
def test_a_query_needing_gigabytes_ends_with_a_message_naming_the_limit(db, sql):
    out = measured(db, sql)
    assert out.get("error") == "TraceStoreError", out
    assert "needed more memory than a typed query may use" in out["message"] and QUERY_MEMORY_LIMIT in out["message"]
    assert "Traceback" not in out["message"]
    assert out["self_mb"] < 300, out
    assert out["children_mb"] < QUERY_ADDRESS_SPACE / 1024**2, out


def test_long_rows_are_cut_at_the_result_size_cap(db):
    result = TraceReader(db).user_query("SELECT i, repeat('x', 10000) FROM range(10000) t(i)", files=False)
    assert len(result.rows) < MAX_QUERY_ROWS and result.rows[-1][0] == len(result.rows) - 1  # a prefix, in order
    assert f"over {MAX_RESULT_BYTES // 1024**2} MB" in result.cut
    assert sum(len(r[1]) for r in result.rows) <= MAX_RESULT_BYTES


def test_a_whole_result_is_not_cut(db):
    result = TraceReader(db).user_query(f"SELECT * FROM range({MAX_QUERY_ROWS})")
    assert len(result.rows) == MAX_QUERY_ROWS and result.cut is None


def test_the_query_runs_with_the_documented_settings_and_spills_nowhere_near_the_database(db):
    (memory, temp, spill, ext, threads), = TraceReader(db).user_query(
        "SELECT current_setting('memory_limit'), current_setting('max_temp_directory_size'), "
        "current_setting('temp_directory'), current_setting('autoload_known_extensions'), current_setting('threads')",
        files=False).rows
    assert (memory, temp, threads) == ("244.1 MiB", "953.6 MiB", 2)  # DuckDB's spelling of 256MB and 1GB
    assert (QUERY_MEMORY_LIMIT, QUERY_TEMP_LIMIT) == ("256MB", "1GB")
    assert Path(spill).parent == Path(tempfile.gettempdir()) and Path(spill).name.startswith("workbench-query-")
    assert not Path(spill).exists()  # removed with the query (other workers' queries may have theirs meanwhile)
    assert ext is False
    assert sorted(p.name for p in db.parent.iterdir()) == ["t.duckdb"]  # no `t.duckdb.tmp` spill folder beside it


def test_cli_sql_says_when_rows_were_cut(db, capsys):
    assert main(["sql", "SELECT * FROM range(60000000)", "--db", str(db), "--csv"]) == 0
    out, err = capsys.readouterr()
    assert out.count("\n") == MAX_QUERY_ROWS + 1  # header + the capped rows
    assert f"note: only the first {MAX_QUERY_ROWS:,} rows are shown" in err
    assert main(["sql", HUGE_LIST, "--db", str(db)]) == 2
    assert "needed more memory" in capsys.readouterr().err


def test_trace_explorer_shows_the_cut_and_the_memory_limit(db, monkeypatch):
    monkeypatch.setenv("WORKBENCH_DB", str(db))
    at = AppTest.from_file(str(ROOT / "pages" / "2_Trace_explorer.py"), default_timeout=90).run()
    at.text_area(key="sql").set_value(MANY_ROWS)
    at.button[0].click().run()
    assert not at.exception, at.exception
    assert any(f"first {MAX_QUERY_ROWS:,} rows" in w.value.replace("\\", "") for w in at.warning), at.warning
    assert len(at.dataframe[0].value) == MAX_QUERY_ROWS
    at.text_area(key="sql").set_value(HUGE_LIST)
    at.button[0].click().run()
    assert any("needed more memory" in e.value.replace("\\", "") for e in at.error), [e.value for e in at.error]
