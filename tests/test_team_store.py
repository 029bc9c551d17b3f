"""The same trace-store suite on a file and on a team store (a DuckLake on a real PostgreSQL, docs/design.md §13):
every test takes `store`, once a DuckDB file and once `ducklake:postgres:…` on the server tests/pgserver.py starts
(skipped with the reason where PostgreSQL is absent). One store per kind for the module: a team store's migrations
are ~40 DuckLake commits (20–30 s on this machine), so the tests share it and each uses its own names, and a team store
is a copy of one the migrations made once per PostgreSQL server (tests/pgserver.py, `migrated_team_store`)."""

from __future__ import annotations

import json
import uuid

import duckdb
import pytest
from clirun import cli
from conftest import new_team_store
from pgserver import migrated_team_store

from workbench.trace import TraceReader
from workbench.trace.lake import extension_folder, is_team_store


@pytest.fixture(scope="module", params=["file", "team"])
def store(request, tmp_path_factory):
    folder = tmp_path_factory.mktemp("store")
    if request.param == "file":
        return str(folder / "traces.duckdb")
    return migrated_team_store(request.getfixturevalue("pg_server"), folder / "lake-data")


def _count(store: str, sql: str) -> int:
    return TraceReader(store).rows(sql)[1][0][0]


def test_ask_is_traced_and_sql_reads_it(store):
    question = f"How do I configure SSO? {uuid.uuid4().hex[:6]}"
    r = cli("ask", question, "--db", store)
    assert r.returncode == 0 and "Sources:" in r.stdout, r.stderr
    r = cli("sql", f"SELECT count(*) FROM turns WHERE question = '{question}'", "--db", store, "--json")
    assert r.returncode == 0 and json.loads(r.stdout.splitlines()[0]) == {"count_star()": 1}, r.stderr
    assert _count(store, f"SELECT count(*) FROM turn_sets WHERE question = '{question}'") == 1  # the views too
    assert _count(store, "SELECT count(*) FROM migrations") >= 20


def test_sql_refuses_writes_and_on_a_team_store_reads_only_the_store(store, tmp_path):
    assert cli("ask", "How do I configure SSO?", "--db", store).returncode == 0
    for query in ("DROP TABLE turns", "INSERT INTO runs (run_id) VALUES ('x')", "ATTACH 'x.duckdb'"):
        r = cli("sql", query, "--db", store)
        assert r.returncode == 2 and "refused" in r.stderr, (query, r.stderr)
    secret = tmp_path / "secret.txt"
    secret.write_text("the analyst's own file")
    r = cli("sql", f"SELECT content FROM read_text('{secret}')", "--db", store)
    if is_team_store(store):  # a team store: only the store is readable (allowed directories: its data path)
        assert r.returncode != 0 and "analyst's own file" not in r.stdout, r.stdout
        for query in ("SELECT * FROM postgres_query('__ducklake_metadata_trace_lake', 'SELECT pg_read_file(''/etc/hostname'')')",
                      "SELECT * FROM query('SELECT 1')",
                      "SELECT * FROM ducklake_expire_snapshots('trace_lake', dry_run => true)"):
            r = cli("sql", query, "--db", store)
            assert r.returncode == 2 and "not allowed on a team store" in r.stderr, (query, r.stderr)
    else:  # the operator's local tool on a file reads the operator's files (docs/security.md)
        assert r.returncode == 0 and "analyst's own file" in r.stdout, r.stderr


def test_eval_with_concurrency_resume_and_runs(store, tmp_path):
    name = f"run-{uuid.uuid4().hex[:6]}"
    args = ("eval", "data/demo_gold.jsonl", "--provider", "offline", "--retriever", "bm25", "--concurrency", "4",
            "--name", name, "--db", store)
    r = cli(*args)
    assert r.returncode in (0, 1), r.stderr  # 1: the gate; every line answered either way
    run = TraceReader(store).rows(f"SELECT run_id FROM experiments WHERE name = '{name}'")[1]
    assert len(run) == 1
    lines = _count(store, f"SELECT count(DISTINCT line) FROM turn_lines WHERE run_id = '{run[0][0]}'")
    total = sum(1 for line in open("data/demo_gold.jsonl") if line.strip())
    assert lines == total and _count(store, f"SELECT count(*) FROM turn_lines WHERE run_id = '{run[0][0]}'") == total
    r = cli(*args[:-4], "--name", name, "--db", store)  # resumed: nothing left to ask
    assert _count(store, f"SELECT count(*) FROM turn_lines WHERE run_id = '{run[0][0]}'") == total, r.stderr
    r = cli("runs", "list", "--db", store, "--json")
    assert r.returncode == 0 and name in r.stdout, r.stderr
    r = cli("runs", "show", name, "--db", store)
    assert r.returncode == 0, r.stderr
    gated = cli(*args[:-4], "--name", f"{name}-b", "--baseline", name, "--fail-on-regression", "--db", store)
    assert gated.returncode == 0, gated.stderr  # the gate: the same configuration does not regress


def test_usage_gaps_and_export(store, tmp_path):
    assert cli("ask", "How do I configure SSO?", "--db", store).returncode == 0
    r = cli("usage", "--db", store, "--csv")
    assert r.returncode == 0 and "sso-saml-setup" in r.stdout, r.stderr
    r = cli("gaps", "--db", store, "--csv")
    assert r.returncode == 0, r.stderr
    r = cli("export", "--parquet", str(tmp_path / "out"), "--db", store)
    assert r.returncode == 0, r.stderr
    turns = list((tmp_path / "out").glob("turns/**/*.parquet"))
    assert turns and duckdb.sql(f"SELECT count(*) FROM read_parquet('{tmp_path}/out/turns/**/*.parquet')").fetchone()[0] \
        == _count(store, "SELECT count(*) FROM turns")


def test_a_team_store_name_never_carries_a_password(tmp_path):
    r = cli("runs", "list", "--db", "ducklake:postgres:host=127.0.0.1 dbname=x user=u password=hunter2")
    assert r.returncode == 2 and "PGPASSWORD" in r.stderr and "hunter2" not in r.stderr + r.stdout
    r = cli("ask", "How do I configure SSO?", "--db", "ducklake:postgres:postgresql://u:hunter2@127.0.0.1/x")
    assert "hunter2" not in r.stderr + r.stdout and "PGPASSWORD" in r.stderr


def test_extensions_come_from_the_wheels_under_duckdbs_names():
    folder = extension_folder()
    link = folder / "postgres_scanner.duckdb_extension"
    assert link.is_symlink() and "duckdb_extension_postgres" in str(link.resolve())
    assert (folder / "ducklake.duckdb_extension").resolve().is_file()


#: `python -c APPENDER STORE GATE N TURNS CID SPAN_KEY`: after N processes are ready (a file each in GATE), write
#: TURNS turns of conversation CID (each placed by the writer), the span SPAN_KEY (an exporter's retry: every
#: process sends it), and one turn every process writes with the same turn_id (a write retried after its commit).
APPENDER = r"""
import os, sys, time, uuid
from pathlib import Path
from workbench.provenance import sources_payload
from workbench.trace.writer import TraceWriter
from workbench.types import TurnRecord

store, gate, n, turns, cid, span = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6]
w = TraceWriter(store)
w.prepare()
(gate / f"ready-{os.getpid()}").touch()
deadline = time.monotonic() + 120
while len(list(gate.glob("ready-*"))) < n:
    assert time.monotonic() < deadline, "the other processes never got ready"
    time.sleep(0.005)
for i in range(turns):
    rec = TurnRecord(question=f"q{i} from {os.getpid()}", answer="a", turn_id=uuid.uuid4().hex,
                     config={"provider": "offline"}, started_at="2024-05-01T10:00:00+00:00",
                     conversation_id=cid, position=1)
    w.log_turn(rec, sources_payload(rec))
    if i == 0:
        w.log_spans([{"span_key": span, "trace_id": "t", "span_id": span, "name": "llm", "span_json": "{}"}])
rec = TurnRecord(question="the same turn", answer="a", turn_id=cid[:16] * 2, config={"provider": "offline"},
                 started_at="2024-05-01T10:00:00+00:00")
w.log_turn(rec, sources_payload(rec))
print("DONE", flush=True)
"""


def test_keys_hold_with_processes_writing_at_once(store, tmp_path):
    """DESIGN §13: positions unique and gapless with writers appending to one conversation at once, a span stored
    once when every process sends it, a turn written once when written again — real processes, started together."""
    import os
    import subprocess
    import sys

    from conftest import ROOT

    n, turns, cid, span = 3, 6, uuid.uuid4().hex, uuid.uuid4().hex
    cli("ask", "warm up", "--db", store)  # migrated before the race (a migration is not what is measured)
    gate = tmp_path / "gate"
    gate.mkdir()
    procs = [subprocess.Popen([sys.executable, "-c", APPENDER, store, str(gate), str(n), str(turns), cid, span],
                              cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(n)]
    for p in procs:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0 and "DONE" in out, err[-2000:]
    positions = TraceReader(store).rows(f"SELECT position FROM turns WHERE conversation_id = '{cid}' ORDER BY 1")[1]
    assert [p for (p,) in positions] == list(range(1, n * turns + 1))
    assert _count(store, f"SELECT count(*) FROM audit_spans WHERE span_key = '{span}'") == 1
    assert _count(store, f"SELECT count(*) FROM turns WHERE turn_id = '{cid[:16] * 2}'") == 1


def test_store_maintain_while_a_writer_runs(pg_server, tmp_path):
    """`store maintain` flushes inlined rows to Parquet, merges, expires; a writer process appending to a
    conversation meanwhile loses nothing (each side runs again what lost to the other's commit)."""
    import os
    import subprocess
    import sys

    from conftest import ROOT

    store = migrated_team_store(pg_server, tmp_path / "lake-data")
    assert cli("ask", "How do I configure SSO?", "--db", store).returncode == 0
    cid, span, gate = uuid.uuid4().hex, uuid.uuid4().hex, tmp_path / "gate"
    gate.mkdir()
    writer = subprocess.Popen([sys.executable, "-c", APPENDER, store, str(gate), "1", "15", cid, span], cwd=ROOT,
                              env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    import time

    while not list(gate.glob("ready-*")) and writer.poll() is None:  # until the writer has attached the store
        time.sleep(0.01)
    runs = [cli("store", "maintain", "--db", store, "--keep-days", "0") for _ in range(2)]
    out, err = writer.communicate(timeout=600)
    assert writer.returncode == 0, err[-2000:]
    assert all(r.returncode == 0 and "flushed tables" in r.stdout for r in runs), [r.stderr for r in runs]
    assert cli("store", "maintain", "--db", store).returncode == 0
    parquet = list((tmp_path / "lake-data").rglob("*.parquet"))
    assert parquet, "the inlined rows were written out as Parquet files"
    positions = TraceReader(store).rows(f"SELECT position FROM turns WHERE conversation_id = '{cid}' ORDER BY 1")[1]
    assert [p for (p,) in positions] == list(range(1, 16))
    assert _count(store, "SELECT count(*) FROM turns") == 15 + 2  # the first ask, the writer's, its repeated turn


def test_store_maintain_refuses_a_file(tmp_path):
    r = cli("store", "maintain", "--db", str(tmp_path / "t.duckdb"))
    assert r.returncode == 2 and "needs no upkeep" in r.stderr


def test_collect_and_ingest_store_a_span_once(store, tmp_path):
    """`collect` (its receiver over loopback HTTP) and `ingest` (a file of OTLP JSON lines): a request sent twice
    and a file ingested twice store each turn once."""
    import threading

    from test_audit_receiver import _answering_call, _post, _request

    from workbench.audit.collector import Assembler, make_server
    from workbench.audit.units import Resolver
    from workbench.trace.payloads import stored_payloads
    from workbench.trace.writer import TraceWriter

    trace = uuid.uuid4().hex
    body = json.dumps(_request([_answering_call(trace, trace[:16], json.dumps([{"doc_id": "sso", "snippet": "Open SSO"}]),
                                                "See [sso](sso).")])).encode()
    server = make_server(Assembler(TraceWriter(store), Resolver(), name=f"rx-{trace[:6]}"), "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/v1/traces"
        assert _post(url, body)[0] == 200 and _post(url, body)[0] == 200  # an exporter's retry
    finally:
        server.shutdown()
        server.server_close()
    assert _count(store, f"SELECT count(*) FROM turns WHERE turn_id = 'otel-{trace}'") == 1
    assert _count(store, f"SELECT count(*) FROM audit_spans WHERE trace_id = '{trace}'") == 1
    f = tmp_path / "spans.jsonl"
    ids = [uuid.uuid4().hex for _ in range(3)]
    f.write_text("".join(json.dumps(_request([_answering_call(t, t[:16], json.dumps([{"doc_id": "sso", "snippet": "x"}]),
                                                              "See [sso](sso).")])) + "\n" for t in ids))
    r = cli("ingest", str(f), "--db", store, "--name", f"file-{ids[0][:6]}")
    assert r.returncode == 0 and "3 turns written" in r.stderr, r.stderr
    again = cli("ingest", str(f), "--db", store, "--name", f"again-{ids[0][:6]}")
    assert again.returncode == 0 and "0 turns written, 3 already stored" in again.stderr, again.stderr
    assert sum(1 for p in stored_payloads(store) if p and json.loads(p)["turn_id"] in {f"otel-{t}" for t in ids}) == 3


def test_eval_with_verification_writes_its_ablations(store, tmp_path):
    questions = tmp_path / "q.jsonl"
    questions.write_text("".join(open("data/demo_gold.jsonl").readlines()[:2]))
    name = f"verified-{uuid.uuid4().hex[:6]}"
    r = cli("eval", str(questions), "--provider", "offline", "--retriever", "bm25", "--verify", "--name", name,
            "--db", store)
    assert r.returncode in (0, 1), r.stderr
    assert _count(store, "SELECT count(*) FROM ablations a JOIN turn_lines l USING (turn_id) JOIN experiments e "
                         f"USING (run_id) WHERE e.name = '{name}'") > 0


def test_chat_and_ask_go_on_with_one_conversation(store):
    """`chat` (questions on stdin) starts a conversation; `ask --conversation` goes on with it, reading its
    history from the store, at the next place."""
    cid = uuid.uuid4().hex
    r = cli("chat", "--conversation", cid, "--db", store, input="How do I configure SSO?\nAnd with Okta?\n")
    assert r.returncode == 0, r.stderr
    r = cli("ask", "What about Entra ID?", "--conversation", cid, "--db", store, "--json")
    assert r.returncode == 0, r.stderr
    rows = TraceReader(store).rows(f"SELECT position, question FROM turns WHERE conversation_id = '{cid}' ORDER BY 1")[1]
    assert [p for p, _ in rows] == [1, 2, 3] and rows[2][1] == "What about Entra ID?"
    assert _count(store, f"SELECT count(*) FROM conversation_turns WHERE conversation_id = '{cid}'") == 3


def _schema_of(con) -> dict:
    """Tables with their columns and types and comments, views with their comments (a team store's own tables,
    `team_store_*`, left out)."""
    tables = con.execute("SELECT table_name, comment FROM duckdb_tables() WHERE database_name = current_database() "
                         "AND table_name NOT LIKE 'team_store_%' ORDER BY ALL").fetchall()
    columns = con.execute("SELECT table_name, column_name, data_type, comment FROM duckdb_columns() "
                          "WHERE database_name = current_database() AND table_name NOT LIKE 'team_store_%' "
                          "AND table_name IN (SELECT table_name FROM duckdb_tables() "
                          "WHERE database_name = current_database()) ORDER BY ALL").fetchall()
    views = con.execute("SELECT view_name, comment FROM duckdb_views() WHERE database_name = current_database() "
                        "AND NOT internal ORDER BY ALL").fetchall()
    return {"tables": tables, "columns": columns, "views": views}


def test_migrations_create_and_upgrade_a_team_store_as_a_file(pg_server, tmp_path):
    """A team store created by the migrations, and one upgraded from an older schema, have the file's tables,
    columns, types and comments, and its views (DuckLake has no keys or indexes: lake.py leaves them out). The created
    one is a copy of the store the migrations made from an empty catalog for this server (`migrated_team_store`),
    migrated again (nothing to do)."""
    from workbench.trace.lake import cursor
    from workbench.trace.migrate import applied, migrate
    from workbench.trace.schema import MIGRATIONS

    file = duckdb.connect(str(tmp_path / "t.duckdb"))
    migrate(file)
    expected = _schema_of(file)
    fresh = migrated_team_store(pg_server, tmp_path / "fresh")
    with cursor(fresh) as con:
        assert migrate(con) == []
        got = _schema_of(con)
        assert set(got["columns"]) ^ set(expected["columns"]) == set()
        assert got == expected
        assert applied(con) == sorted(m.name for m in MIGRATIONS)
    upgraded = new_team_store(pg_server, tmp_path / "upgraded")
    half = len(MIGRATIONS) // 2
    with cursor(upgraded) as con:
        migrate(con, MIGRATIONS[:half])
    # a viewer's query on a store from before turns had owners (m018) reads every turn (each nobody's) through
    # its copy (visible.py: a team store is always read through one)
    from workbench.trace.history import OWNERS

    assert MIGRATIONS[half - 1].name < OWNERS
    assert TraceReader(upgraded).user_query("SELECT count(*) FROM turns", owner="browser:x").rows == [(0,)]
    with cursor(upgraded) as con:
        migrate(con)
        assert _schema_of(con) == expected
    assert cli("sql", "SELECT count(*) FROM doc_gaps", "--db", upgraded).returncode == 0  # its macros work


def _query_children() -> list[int]:
    """This process's children running a typed query (isolated.py spawns one per query)."""
    import os
    from pathlib import Path

    found = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1]) == os.getpid() \
                    and b"query_child" in (proc / "cmdline").read_bytes():
                found.append(int(proc.name))
        except (OSError, IndexError, ValueError):  # ended meanwhile
            pass
    return found


def test_an_analysts_query_on_a_team_store_leaves_the_writers_a_core(store, monkeypatch):
    """On a team store a typed query runs with one core fewer than the process may use and at a lower priority
    (nice 10), so an analyst's long query cannot starve the app's turns (docs/security.md); both are settings. On
    a file it keeps 2 threads and its priority: there it holds every writer, so it must end soon."""
    import os
    import threading

    from workbench.config import usable_cores
    from workbench.trace.isolated import DEFAULT_QUERY_NICE, FILE_QUERY_THREADS

    team = is_team_store(store)
    cli("ask", "How do I configure SSO?", "--db", store)
    r = cli("sql", "SELECT current_setting('threads') AS t", "--db", store, "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout.splitlines()[0]) == {"t": max(1, usable_cores() - 1) if team else FILE_QUERY_THREADS}
    seen, result = set(), {}
    query = threading.Thread(target=lambda: result.update(r=cli(
        "sql", "SELECT sum(hash(range)) FROM range(20000000000)", "--db", store, "--timeout", "1")))
    query.start()
    while query.is_alive():  # the niceness of the query's process, read while it runs (every 20 ms)
        for pid in _query_children():
            try:
                seen.add(os.getpriority(os.PRIO_PROCESS, pid) - os.getpriority(os.PRIO_PROCESS, 0))
            except OSError:  # it ended meanwhile
                pass
        query.join(0.02)
    assert "stopped after 1 s" in result["r"].stderr, result["r"].stderr
    assert max(seen) == (DEFAULT_QUERY_NICE if team else 0), seen
    if team:
        monkeypatch.setenv("WORKBENCH_QUERY_THREADS", str(usable_cores()))
        r = cli("sql", "SELECT current_setting('threads') AS t", "--db", store, "--json")
        assert json.loads(r.stdout.splitlines()[0]) == {"t": usable_cores()}, r.stderr
        monkeypatch.setenv("WORKBENCH_QUERY_THREADS", "0")
        r = cli("sql", "SELECT 1", "--db", store)
        assert r.returncode != 0 and "WORKBENCH_QUERY_THREADS='0'" in r.stderr, r.stderr


def test_a_refused_typed_query_on_a_team_store_starts_no_process(monkeypatch):
    """A function a typed query may not call on a team store is refused before the query's process is started (a
    process costs ~0.4 s of CPU: DuckDB imported, its extensions loaded); the child checks again (`run_bounded`)."""
    from workbench.errors import ReadOnlyQueryError
    from workbench.trace import isolated

    started = []
    monkeypatch.setattr(isolated.subprocess, "run", lambda *a, **k: started.append(a) or pytest.fail("a process"))
    reader = TraceReader("ducklake:postgres:host=127.0.0.1 port=1 dbname=nowhere user=nobody")
    for query in ("SELECT * FROM postgres_query('x', 'SELECT 1')", "SELECT * FROM query('SELECT 1')"):
        with pytest.raises(ReadOnlyQueryError, match="not allowed on a team store"):
            reader.user_query(query)
    assert started == []
