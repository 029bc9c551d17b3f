"""No DuckDB connection the project opens fetches or loads an extension (issue 24, item 4).

Before the fix `ask --db A_SQLITE_FILE` made the trace writer's DuckDB download `sqlite_scanner` from
extensions.duckdb.org. DuckDB honours HTTP(S)_PROXY for those downloads, so every test here points the
proxy at a loopback listener that records any request: a download attempt is seen, not guessed.
"""

from __future__ import annotations

import sqlite3
from http.server import BaseHTTPRequestHandler

import duckdb
import pytest

from http_server import LoopbackServer, send
from workbench.cli import main
from workbench.errors import TraceStoreError
from workbench.trace import TraceReader
from workbench.trace.writer import TraceWriter

REMOTE = "SELECT * FROM 'https://example.com/x.csv'"  # needs httpfs, which DuckDB would autoload


class RecordingProxy(LoopbackServer):
    """An HTTP proxy that forwards nothing: it records each request line and answers 502."""

    def __init__(self):
        self.requests: list[str] = []
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def _any(self):
                proxy.requests.append(self.requestline)
                send(self, 502, b"no network in tests", "text/plain")

            do_GET = do_HEAD = do_CONNECT = do_POST = _any

            def log_message(self, *args):
                pass

        self._serve(Handler)


@pytest.fixture
def proxy(monkeypatch):
    with RecordingProxy() as p:
        for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
            monkeypatch.setenv(name, p.url)
        for name in ("NO_PROXY", "no_proxy"):
            monkeypatch.delenv(name, raising=False)
        yield p


@pytest.fixture
def sqlite_file(tmp_path):
    path = tmp_path / "notes.sqlite"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE notes (body TEXT)")
    con.execute("INSERT INTO notes VALUES ('keep me')")
    con.commit()
    con.close()
    return path


def test_ask_refuses_a_sqlite_file_as_not_a_trace_database_without_any_download(proxy, sqlite_file, capsys):
    before = sqlite_file.read_bytes()
    assert main(["ask", "How do I configure SSO?", "--db", str(sqlite_file)]) == 1
    assert proxy.requests == []
    out, err = capsys.readouterr()
    assert "Sources: Configure SAML" in out  # the answer survives, as for any trace database that cannot be used
    assert "not a trace database (a SQLite database)" in err and "Traceback" not in err
    assert sqlite_file.read_bytes() == before
    assert sqlite3.connect(sqlite_file).execute("SELECT body FROM notes").fetchall() == [("keep me",)]


@pytest.mark.parametrize("args", [["sql", "SELECT 1"], ["gaps"]], ids=["sql", "gaps"])
def test_readers_refuse_a_sqlite_file_without_any_download(proxy, sqlite_file, capsys, args):
    assert main([*args, "--db", str(sqlite_file)]) == 2
    assert proxy.requests == []
    assert "not a trace database (a SQLite database)" in capsys.readouterr().err


def test_a_file_that_is_no_database_at_all_is_refused_and_left_alone(proxy, tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("just some text, long enough to have a header\n")
    with pytest.raises(TraceStoreError, match=r"not a trace database \(not a DuckDB file\)"):
        TraceReader(path).rows("SELECT 1")
    with pytest.raises(TraceStoreError, match="not a trace database"), TraceWriter(path).connect():
        pass
    assert path.read_text() == "just some text, long enough to have a header\n"
    assert proxy.requests == []


def test_the_writer_and_every_reader_refuse_to_fetch_httpfs(proxy, tmp_path):
    path = tmp_path / "t.duckdb"
    with TraceWriter(path).connect() as con:  # the writer's connection: the chat page's, `ask`'s, `eval`'s
        settings = con.execute("SELECT current_setting('autoinstall_known_extensions'), "
                               "current_setting('autoload_known_extensions')").fetchone()
        with pytest.raises(duckdb.Error, match="httpfs"):
            con.execute(REMOTE)
    assert proxy.requests == []
    assert settings == (False, False)
    reader = TraceReader(path)
    for run in (reader.rows, reader.df, reader.user_query):
        with pytest.raises(TraceStoreError, match="httpfs"):
            run(REMOTE)
    assert proxy.requests == []


def test_one_function_opens_every_duckdb_connection_the_project_makes():
    """`duckdb.connect` appears only in `duckdb_connect` (trace/duck.py, exported by trace/connect.py), so no
    connection forgets the settings: before the fix the schema docs and three benchmarks opened their own."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    files = [*root.glob("workbench/**/*.py"), root / "app.py", *root.glob("pages/*.py"), *root.glob("benchmarks/*.py"),
             *root.glob("notebooks/*.ipynb")]
    direct = [f"{f.relative_to(root)}:{n}" for f in files for n, line in enumerate(f.read_text().splitlines(), 1)
              if re.search(r"\bduckdb\.connect\(", line) and f != root / "workbench" / "trace" / "duck.py"]
    assert direct == []
