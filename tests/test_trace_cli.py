"""`workbench sql`, `gaps`, `export --parquet` and `eval` over a real trace database."""

from __future__ import annotations

import csv
import io
import json
import re
import shutil

import duckdb
import pandas as pd
import pytest

from tracedb import empty_trace_db
from workbench.cli import main
from workbench.session import Session

QUESTIONS = ["How do I configure SSO?", "What articles do you have?", "What is the capital of Mongolia?",
             "How do I rotate an API key?", "How do I configure SSO?"]


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    path = empty_trace_db(tmp_path_factory.mktemp("cli") / "t.duckdb")
    s = Session.open(trace_db=path)
    for q in QUESTIONS[:4]:
        s.ask(q, verify=q == QUESTIONS[0])  # one verified turn: its re-runs are exported too
    return path


def summary(out: str) -> dict[str, str]:
    return dict(re.split(r"\s{2,}", line.strip(), maxsplit=1) for line in out.splitlines()[2:] if "  " in line.strip())


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_sql_table_json_csv(db, capsys):
    code, out, _ = run(capsys, "sql", "SELECT question, n_consulted FROM turn_sets ORDER BY started_at", "--db", str(db))
    assert code == 0 and "How do I configure SSO?" in out and "(4 rows)" in out
    code, out, _ = run(capsys, "sql", "SELECT question, n_consulted FROM turn_sets ORDER BY started_at", "--db", str(db), "--json")
    rows = [json.loads(line) for line in out.splitlines()]
    assert rows[0] == {"question": "How do I configure SSO?", "n_consulted": 2}
    code, out, _ = run(capsys, "sql", "SELECT question FROM turns", "--db", str(db), "--csv")
    assert list(csv.reader(io.StringIO(out)))[0] == ["question"]
    assert run(capsys, "sql", "SHOW TABLES", "--db", str(db))[0] == 0
    assert run(capsys, "sql", "EXPLAIN SELECT * FROM turns", "--db", str(db))[0] == 0


@pytest.mark.parametrize("statement, kind", [
    ("DROP TABLE turns", "DROP"),
    ("INSERT INTO turns (turn_id, run_id, question, status) VALUES ('x', 'r', 'q', 'ok')", "INSERT"),
    ("ATTACH '{tmp}/other.duckdb' AS other", "ATTACH"),
    ("COPY turns TO '{tmp}/out.csv'", "COPY"),
    ("COPY (SELECT * FROM turns) TO '{tmp}/out.parquet' (FORMAT parquet)", "COPY"),
    ("UPDATE turns SET answer = ''", "UPDATE"),
    ("DELETE FROM turns", "DELETE"),
    ("CREATE TABLE x (i INTEGER)", "CREATE"),
    ("INSTALL httpfs", "LOAD"),
    ("SET threads = 1", "SET"),
    ("EXPORT DATABASE '{tmp}/dump'", "EXPORT"),
    ("EXPLAIN ANALYZE DELETE FROM turns", "EXPLAIN DELETE"),
    ("SELECT 1; DROP TABLE turns", "DROP"),
])
def test_sql_refuses_writes(db, capsys, tmp_path, statement, kind):
    code, out, err = run(capsys, "sql", statement.format(tmp=tmp_path), "--db", str(db))
    assert code == 2 and out == ""
    assert err.startswith(f"error: refused: {kind} statements are not allowed") and "read-only" in err
    assert not list(tmp_path.iterdir())  # nothing was written anywhere
    assert duckdb.connect(str(db), read_only=True).execute("SELECT count(*) FROM turns").fetchone() == (4,)


def test_sql_errors_are_messages_not_tracebacks(db, capsys, tmp_path):
    code, _, err = run(capsys, "sql", "SELECT nope FROM turns", "--db", str(db))
    assert code == 2 and err.startswith("error: query failed") and "Traceback" not in err
    code, _, err = run(capsys, "sql", "SELECT 1", "--db", str(tmp_path / "none.duckdb"))
    assert code == 2 and "nothing has been traced" in err


def test_gaps_table_and_csv(db, capsys):
    code, out, _ = run(capsys, "gaps", "--db", str(db))
    assert code == 0 and "What is the capital of Mongolia?" in out and "What articles" not in out
    code, out, _ = run(capsys, "gaps", "--db", str(db), "--csv")
    rows = list(csv.DictReader(io.StringIO(out)))
    assert [r["question"] for r in rows] == ["What is the capital of Mongolia?"] and rows[0]["asks"] == "1"


def test_export_parquet_reads_back_with_duckdb_and_pandas(db, capsys, tmp_path):
    out_dir = tmp_path / "export"
    code, out, _ = run(capsys, "export", "--parquet", str(out_dir), "--db", str(db))
    assert code == 0 and "turns: 4 rows" in out
    assert list((out_dir / "turns").glob("run_date=*/*.parquet"))
    con = duckdb.connect()
    for table in ("runs", "turns", "tool_calls", "retrieved_items", "citations", "sources", "ablations"):
        src = duckdb.connect(str(db), read_only=True).execute(f"SELECT count(*) FROM {table}").fetchone()[0]
        got = con.execute(f"SELECT count(*), count(DISTINCT run_date) FROM read_parquet('{out_dir}/{table}/**/*.parquet', "
                          "hive_partitioning = true)").fetchone()
        assert got == (src, 1)
    df = pd.read_parquet(out_dir / "sources")
    assert {"turn_id", "doc_id", "cited", "consulted", "run_date"} <= set(df.columns)
    # exporting again replaces the datasets instead of duplicating rows
    run(capsys, "export", "--parquet", str(out_dir), "--db", str(db))
    assert len(pd.read_parquet(out_dir / "turns")) == 4


def test_export_parquet_round_trips_every_table_and_view(db, capsys, tmp_path):
    from workbench.trace.export import open_export, tables, views

    db = shutil.copy(db, tmp_path / "copy.duckdb")  # the module's database stays as the other tests expect it
    s = Session.open(trace_db=db)  # a conversation, so the conversation views have rows too
    s.ask("How do I configure SSO?", conversation_id="c-export")
    out_dir = tmp_path / "export"
    code, out, _ = run(capsys, "export", "--parquet", str(out_dir), "--db", str(db))
    assert code == 0
    src = duckdb.connect(str(db), read_only=True)
    names = tables(src) + views(src)
    assert {"turn_sets", "conversations", "conversation_turns", "doc_gaps", "doc_usage", "source_verdicts",
            "verification_summary"} <= set(names)
    back = open_export(out_dir)
    empty = 0
    for name in names:
        columns = [c for (c, *_) in src.execute(f"DESCRIBE {name}").fetchall()]
        assert [c for (c, *_) in back.execute(f"DESCRIBE {name}").fetchall()] == columns, name
        order = ", ".join(f"{i + 1}" for i in range(len(columns)))
        expected = src.execute(f"SELECT * FROM {name} ORDER BY {order}").fetchall()
        assert back.execute(f"SELECT * FROM {name} ORDER BY {order}").fetchall() == expected, name
        empty += not expected
    assert empty < len(names) / 2  # the round trip is measured on rows, not on empty views
    # the store's own SQL runs on the export as it is
    query = "SELECT question, n_consulted FROM turn_sets ORDER BY started_at"
    assert back.execute(query).fetchall() == src.execute(query).fetchall()
    src.close()


def test_eval_one_run_summary_and_resume_after_interruption(tmp_path, capsys, monkeypatch):
    qfile = tmp_path / "q.jsonl"
    qfile.write_text("".join(json.dumps({"question": q}) + "\n" for q in QUESTIONS))
    db = empty_trace_db(tmp_path / "eval.duckdb")

    # interrupted after 2 turns: the buffered turns are flushed on the way out, never half a turn
    real_ask, calls = Session.ask, []

    def flaky(self, *a, **kw):
        if len(calls) == 2:
            raise KeyboardInterrupt
        calls.append(1)
        return real_ask(self, *a, **kw)

    monkeypatch.setattr(Session, "ask", flaky)
    code, _, err = run(capsys, "eval", str(qfile), "--db", str(db), "--no-progress")
    assert code == 130 and "interrupted" in err
    monkeypatch.setattr(Session, "ask", real_ask)
    con = duckdb.connect(str(db), read_only=True)
    assert con.execute("SELECT count(*) FROM turns").fetchone() == (2,)
    [(run_id,)] = con.execute("SELECT run_id FROM runs").fetchall()
    con.close()

    code, out, err = run(capsys, "eval", str(qfile), "--db", str(db))
    assert code == 0 and run_id in out and "resumed" in out
    assert summary(out)["skipped (already answered)"] == "2" and summary(out)["asked"] == "3"
    con = duckdb.connect(str(db), read_only=True)
    assert con.execute("SELECT count(*), count(DISTINCT run_id) FROM turns").fetchone() == (5, 1)
    assert con.execute("SELECT kind, run_key IS NOT NULL FROM runs").fetchall() == [("eval", True)]
    assert sorted(q for (q,) in con.execute("SELECT question FROM turns").fetchall()) == sorted(QUESTIONS)
    con.close()

    code, out, _ = run(capsys, "eval", str(qfile), "--db", str(db), "--run-id", run_id)
    assert code == 0 and summary(out)["skipped (already answered)"] == "5"
    code, out, _ = run(capsys, "eval", str(qfile), "--db", str(db), "--mode", "excerpts")
    assert code == 0
    assert duckdb.connect(str(db), read_only=True).execute("SELECT count(*) FROM runs").fetchone() == (2,)
    code, _, err = run(capsys, "eval", str(qfile), "--db", str(db), "--run-id", run_id, "--mode", "excerpts")
    assert code == 2 and "mode='agent'" in err
    from workbench.batch import run_key

    assert run_key(QUESTIONS, {"a": 1}, "h") != run_key(QUESTIONS[:-1], {"a": 1}, "h")


def test_a_trace_file_and_an_export_folder_with_a_quote_in_their_paths(tmp_path, capsys):
    """The statements that cannot take a parameter (ATTACH, COPY TO, read_parquet's glob) quote the path as a SQL
    string: a folder named like "O'Brien's traces" is a path like any other, never a syntax error."""
    from workbench.trace.export import open_export

    home = tmp_path / "O'Brien's traces"
    home.mkdir()
    s = Session.open(trace_db=home / "t.duckdb")
    s.ask("How do I configure SSO?")
    code, _, err = run(capsys, "export", "--parquet", str(home / "it's exported"), "--db", str(home / "t.duckdb"))
    assert code == 0, err
    back = open_export(home / "it's exported")
    assert back.execute("SELECT question FROM turns").fetchall() == [("How do I configure SSO?",)]
