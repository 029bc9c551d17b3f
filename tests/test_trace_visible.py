"""The Trace explorer's SQL without sign-in reads only the viewer's own turns and the operator's (issue 31 item 3,
docs/security.md "Who sees what", `trace/visible.py`): real DuckDB files, the real child process of a typed query.

The probes of every table read one copy of what browser B sees (`b_copy`, built as B's query process builds it:
~5 s on a team store, once per store rather than once per probe); the route from `user_query` to that copy is
checked through real query processes by the other tests."""

from __future__ import annotations

import re

import pytest

from workbench.corpus import load_corpus
from workbench.session import Session
from workbench.trace import TraceReader

SECRET = "payroll-rotation-key-7Q4Z"
DOC = f"---\nid: payroll\ntitle: Payroll key rotation\n---\nRotate the payroll key with the code {SECRET} every month.\n"


@pytest.fixture(scope="module", params=["file", "team"])
def db(tmp_path_factory, request):
    """Browser A asked about its own upload (holding SECRET); browser B and the CLI asked the demo corpus. Once on
    a DuckDB file, once on a team store (a DuckLake on the real PostgreSQL of tests/pgserver.py)."""
    tmp = tmp_path_factory.mktemp("visible")
    (tmp / "upload").mkdir()
    (tmp / "upload" / "payroll.md").write_text(DOC)
    if request.param == "file":
        path = tmp / "traces.duckdb"
    else:
        from pgserver import migrated_team_store

        path = migrated_team_store(request.getfixturevalue("pg_server"), tmp / "lake-data")
    mine = Session.open(load_corpus(tmp / "upload"), trace_db=path)
    a = mine.ask("How do I rotate the payroll key?", conversation_id="c-a", owner="browser:a")
    assert "payroll" in a.payload.sets.consulted and SECRET in a.record.answer + str(a.record.tool_calls)
    demo = Session.open(trace_db=path)
    demo.ask("How do I configure SSO?", conversation_id="c-b", owner="browser:b")
    demo.ask("How do I reset my password?")  # the operator's (CLI): nobody's
    return path


PROBES = ["SELECT text FROM passages", "SELECT question, answer FROM turns", "SELECT * FROM tool_calls",
          "SELECT * FROM claims", "SELECT * FROM model_calls", "SELECT * FROM turn_sets",
          "SELECT * FROM doc_gaps", "SELECT * FROM runs",
          "SELECT * FROM query('SELECT string_agg(text, '' '') FROM passages')"]


def dump(db, sql: str, owner: str | None) -> str:
    from workbench.errors import ReadOnlyQueryError

    try:
        columns, rows, _ = TraceReader(db).user_query(sql, files=False, owner=owner)
    except ReadOnlyQueryError as exc:  # a team store refuses query(): nothing read
        assert "team store" in str(exc)
        return ""
    return repr(rows)


@pytest.fixture(scope="module")
def b_copy(db, tmp_path_factory):
    """What browser B's typed queries read: `visible_copy` with the settings of B's query process (reader.run_bounded:
    the app's `files=False`, DuckDB's bounds)."""
    from workbench.trace.duck import TRACE_FILE_ONLY
    from workbench.trace.isolated import duckdb_limits
    from workbench.trace.lake import is_team_store
    from workbench.trace.visible import visible_copy

    config = {**TRACE_FILE_ONLY, **duckdb_limits(str(tmp_path_factory.mktemp("spill")), team_store=is_team_store(db))}
    copy = visible_copy(db, "browser:b", timeout=30, config=config)
    yield copy
    copy.close()


def dump_copy(db, copy, sql: str) -> str:
    """What `sql` returns on B's copy, checked first as B's query process checks it (a team store refuses query())."""
    from workbench.errors import ReadOnlyQueryError
    from workbench.trace.lake import check_typed_query, is_team_store
    from workbench.trace.reader import check_read_only

    check_read_only(sql)
    try:
        if is_team_store(db):
            check_typed_query(sql)
    except ReadOnlyQueryError as exc:
        assert "team store" in str(exc)
        return ""
    return repr(copy.execute(sql).fetchall())


@pytest.mark.parametrize("sql", PROBES)
def test_another_browser_reads_nothing_of_an_upload_through_sql(db, b_copy, sql):
    seen = dump_copy(db, b_copy, sql)
    assert SECRET not in seen and "payroll" not in seen.lower()


def test_each_browser_reads_its_own_turns_and_the_operators(db):
    b = TraceReader(db).user_query("SELECT (SELECT list(question ORDER BY question) FROM turns), "
                                   "(SELECT string_agg(text, ' ') FROM passages)", files=False, owner="browser:b")
    [(questions, passages)] = b.rows  # B's query process reads B's copy (`b_copy`)
    assert questions == ["How do I configure SSO?", "How do I reset my password?"]
    assert passages and SECRET not in passages and "payroll" not in passages.lower(), "the demo's passages, not A's"
    assert SECRET in dump(db, "SELECT text FROM passages", "browser:a"), "A reads its own upload"
    assert SECRET in dump(db, "SELECT text FROM passages", None), "the operator's CLI (and an analyst) reads all"
    gaps = TraceReader(db).gaps(owner="browser:b")[1]
    assert "payroll" not in repr(gaps).lower()


def test_the_copy_cannot_reach_the_file(db):
    """The copy has file access off: the trace file itself cannot be attached or read from a typed query."""
    from workbench.errors import WorkbenchError

    for sql in (f"SELECT * FROM read_text('{db}')", f"SELECT * FROM read_blob('{db}')"):
        with pytest.raises(WorkbenchError):
            TraceReader(db).user_query(sql, files=False, owner="browser:b")


def test_the_copy_imports_no_pandas(db):
    """The copy is built with SQL literals, never a bound parameter (which makes DuckDB 1.5 import pandas: a second and
    more of every typed query's process, writer._literal): a viewer's query in a process of its own, as its child is."""
    import subprocess
    import sys

    from conftest import ROOT

    code = ("import sys, tempfile\nfrom workbench.trace import TraceReader\n"
            f"rows = TraceReader({str(db)!r}).run_bounded('SELECT question FROM turns', files=False, "
            "temp_directory=tempfile.mkdtemp(), owner='browser:b').rows\n"
            "print('RESULT', len(rows), 'pandas' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    # DuckDB draws its progress bar on stdout when a statement runs over 2 s (a loaded machine): the marked line counts
    assert r.returncode == 0 and re.findall(r"RESULT (\d+) (\w+)", r.stdout) == [("2", "False")], \
        (r.stdout[-2000:], r.stderr[-2000:])


def test_a_viewers_query_attaches_a_team_store_once(db, monkeypatch):
    """On a team store a viewer's query is read through its copy, which attaches the store and checks it there: one
    attachment per query (each loads the extensions and reads the catalog: ~0.5 s), not one to ask whether others'
    turns are there and another for the copy. A file is never attached as a team store."""
    import tempfile

    from workbench.trace import lake

    attached = []
    real = lake.attach
    monkeypatch.setattr(lake, "attach", lambda *a, **k: attached.append(a[2:] or k) or real(*a, **k))
    import workbench.trace.visible as visible

    monkeypatch.setattr(visible, "attach", lake.attach)
    rows = TraceReader(db).run_bounded("SELECT question FROM turns ORDER BY 1", files=False,
                                       temp_directory=tempfile.mkdtemp(), owner="browser:b").rows
    assert rows == [("How do I configure SSO?",), ("How do I reset my password?",)]
    assert len(attached) == (1 if lake.is_team_store(db) else 0), attached
