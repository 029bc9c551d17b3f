"""The app never gives visitors the server's files (issue 17, item 1; docs/security.md).

Paths a visitor types (corpus path, trace database) are confined to the operator's roots
(`WORKBENCH_ALLOWED_ROOTS`; by default the demo corpus and WORKBENCH_HOME, which holds uploads),
resolved through symlinks first; symlinks inside a corpus folder that leave it are not followed;
the app binds to loopback unless the operator says otherwise.
"""

from __future__ import annotations

import hashlib
import tomllib
from pathlib import Path

import duckdb
import pytest
from streamlit.testing.v1 import AppTest

from apptest import APP, unescape
from conftest import ROOT
from clirun import cli
from workbench.config import DEMO_CORPUS, workbench_home
from workbench.corpus import load_corpus
from workbench.errors import PathNotAllowedError

SECRET = "TOKEN-7f3a9c-do-not-leak"


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def outside(tmp_path):
    """A folder outside every allowed root, holding what a visitor must never read."""
    d = tmp_path / "outside"
    d.mkdir()
    (d / "token.txt").write_text(f"The deploy token is {SECRET}. How do I configure SSO? token token\n")
    (d / "notes.md").write_text(f"---\nid: notes\ntitle: Notes\n---\nSSO token {SECRET}\n")
    con = duckdb.connect(str(d / "other.duckdb"))
    con.execute("CREATE TABLE accounts AS SELECT 1 AS id, 'alice' AS name")
    con.close()
    return d


@pytest.fixture
def root(tmp_path, monkeypatch):
    r = tmp_path / "allowed"
    r.mkdir()
    monkeypatch.setenv("WORKBENCH_ALLOWED_ROOTS", str(r))
    return r


# --- the rule itself ---------------------------------------------------------------------------


def test_paths_outside_the_roots_are_refused_in_every_spelling(root, outside, tmp_path):
    from workbench.paths import confine

    (root / "kb").mkdir()
    (root / "kb" / "a.md").write_text("---\nid: a\n---\nA\n")
    (root / "escape").symlink_to(outside, target_is_directory=True)
    (root / "escape.txt").symlink_to(outside / "token.txt")
    (tmp_path / "allowed-sibling").mkdir()  # shares the root's name as a prefix
    attempts = [
        str(outside), str(outside / "token.txt"), str(root / ".." / "outside" / "token.txt"),
        str(root / "kb" / ".." / ".." / "outside"), f"{root}/../outside", "/etc/passwd", "/", "..", "../..",
        "~", "~/", "~root", f"file://{outside}/token.txt", f"file:{outside}", "file:///etc/passwd",
        "http://127.0.0.1:9/x", str(root / "escape"), str(root / "escape" / "token.txt"), str(root / "escape.txt"),
        str(tmp_path / "allowed-sibling"), f"{root}\0/kb", "",
    ]
    for text in attempts:
        with pytest.raises(PathNotAllowedError):
            confine(text, "corpus path")
    assert confine(str(root / "kb"), "corpus path") == (root / "kb").resolve()
    assert confine(f"  {root}/kb/../kb/a.md ", "corpus path") == (root / "kb" / "a.md").resolve()
    assert confine(str(root), "corpus path") == root.resolve()


def test_default_roots_are_the_demo_corpus_and_workbench_home(monkeypatch):
    from workbench.paths import allowed_roots, confine

    monkeypatch.delenv("WORKBENCH_ALLOWED_ROOTS", raising=False)
    assert allowed_roots() == [DEMO_CORPUS.resolve(), workbench_home().resolve()]
    assert confine(str(DEMO_CORPUS / "billing"), "corpus path") == (DEMO_CORPUS / "billing").resolve()
    with pytest.raises(PathNotAllowedError):
        confine(str(DEMO_CORPUS.parent / "demo_gold.jsonl"), "corpus path")


def test_the_operators_stores_are_allowed_wherever_they_are(tmp_path, monkeypatch):
    from workbench.paths import trace_stores

    monkeypatch.setenv("WORKBENCH_DB", str(tmp_path / "ops" / "traces.duckdb"))
    monkeypatch.setenv("WORKBENCH_STORES", f"audit={tmp_path / 'audit' / 'audit.duckdb'}")
    assert trace_stores() == {"default": tmp_path / "ops" / "traces.duckdb",
                              "audit": (tmp_path / "audit" / "audit.duckdb").resolve()}


# --- through the app ---------------------------------------------------------------------------


@pytest.fixture
def app(tmp_path, monkeypatch, root):
    monkeypatch.setenv("WORKBENCH_DB", str(root / "traces.duckdb"))
    return AppTest.from_file(APP, default_timeout=60).run()


def _all_text(at: AppTest) -> str:
    parts = [e.value for e in at.markdown] + [e.value for e in at.error] + [e.value for e in at.caption]
    for t in at.session_state["turns"] if "turns" in at.session_state else []:
        parts.append(str(t.payload.to_json() if t.payload is not None else {}))
    return "\n".join(str(p) for p in parts)


@pytest.mark.parametrize("which", ["folder", "file", "md"])
def test_a_visitor_cannot_read_files_outside_the_roots_as_a_corpus(app, outside, which):
    """Before the fix a `token.txt` in any folder came back in the answer."""
    target = {"folder": outside, "file": outside / "token.txt", "md": outside / "notes.md"}[which]
    app.sidebar.radio(key="cfg_corpus_source").set_value("Folder or JSONL path").run()
    app.sidebar.text_input(key="cfg_corpus_path").set_value(str(target)).run()
    assert not app.exception
    assert any("not allowed" in e.value for e in app.sidebar.error), [e.value for e in app.sidebar.error]
    app.chat_input[0].set_value("What is the deploy token? How do I configure SSO?").run()
    assert not app.exception
    assert SECRET not in _all_text(app)
    assert app.session_state["turns"][-1].config.corpus_label == "demo"


def test_a_visitor_cannot_open_or_create_databases_outside_the_roots(outside, tmp_path, monkeypatch):
    """Before the fix the explorer showed any DuckDB file's tables and migrations were applied to it. Now a visitor
    names only a store the operator lists, by name (`?store=NAME`): a path is refused."""
    monkeypatch.setenv("WORKBENCH_DB", str(tmp_path / "traces.duckdb"))  # as the `app` fixture sets it
    other = outside / "other.duckdb"
    before = _digest(other)
    new = tmp_path / "elsewhere" / "new.duckdb"
    for target in (other, new):
        at = AppTest.from_file(APP, default_timeout=60)
        at.query_params["store"] = str(target)
        at.run()
        assert at.sidebar.radio(key="cfg_corpus_source") is not None  # the sidebar is drawn …
        assert not [t for t in at.sidebar.text_input if t.label == "Trace database"], "… with no database path to type"
        assert any("no trace store named" in unescape(e.value) for e in at.error), [e.value for e in at.error]
        at.chat_input[0].set_value("How do I configure SSO?").run()
        assert not at.exception
    assert _digest(other) == before
    assert not new.parent.exists(), "no folder or file is created outside the roots"
    explorer = AppTest.from_file(str(ROOT / "pages" / "2_Trace_explorer.py"), default_timeout=60)
    explorer.query_params["store"] = str(other)
    explorer.run()
    assert not explorer.exception
    assert any("no trace store named" in unescape(e.value) for e in explorer.error), [e.value for e in explorer.error]
    # The page renders query results (so the check below can fail): a probe query shows its table.
    explorer.text_area(key="sql").set_value("SELECT 'probe-marker' AS marker")
    explorer.button[0].click().run()
    assert any("probe-marker" in str(df.value) for df in explorer.dataframe), "the explorer renders results"
    explorer.text_area(key="sql").set_value("SELECT * FROM accounts")
    explorer.button[0].click().run()
    assert not explorer.exception
    assert not any("alice" in str(df.value) for df in explorer.dataframe), "the refused file's rows are never shown"
    assert any("accounts" in unescape(e.value) for e in explorer.error), (
        "the query ran against the default trace database, which has no `accounts` table")
    assert _digest(other) == before


def test_corpus_inside_the_roots_still_loads(app, root):
    kb = root / "kb"
    kb.mkdir()
    (kb / "a.md").write_text("---\nid: flux\ntitle: Flux widget\n---\nTo calibrate the flux widget press calibrate twice.\n")
    app.sidebar.radio(key="cfg_corpus_source").set_value("Folder or JSONL path").run()
    app.sidebar.text_input(key="cfg_corpus_path").set_value(str(kb)).run()
    assert not app.sidebar.error
    app.chat_input[0].set_value("How do I calibrate the flux widget?").run()
    assert app.session_state["turns"][-1].config.corpus_label == "kb"
    assert "flux" in app.session_state["turns"][-1].payload.sets.consulted


# --- servers a visitor may name (provider options with "format": "uri") ----------------------------


def test_servers_outside_the_allowed_list_are_refused_in_every_spelling(monkeypatch):
    from workbench.paths import confine_server

    monkeypatch.setenv("WORKBENCH_ALLOWED_SERVERS", "http://gpu-box:11434, https://api.example.com/v1")
    for text in ("http://gpu-box:11434", "http://GPU-box:11434/", "http://u:p@gpu-box:11434",
                 "https://api.example.com/v1/", "https://api.example.com:443/v1"):
        assert confine_server(text, "Base URL") == text
    for text in ("http://gpu-box:11435", "https://gpu-box:11434", "http://gpu-box.evil:11434", "gpu-box:11434",
                 "http://evil/?u=http://gpu-box:11434", "http://gpu-box@evil:11434", "http://evil\\@gpu-box:11434",
                 "https://api.example.com/v10", "https://api.example.com/", "https://api.example.com/v1/../x",
                 "https://api.example.com/v1/%2e%2e/x", "file:///etc/passwd", "http://gpu-box:99999", ""):
        with pytest.raises(PathNotAllowedError):
            confine_server(text, "Base URL")
    monkeypatch.delenv("WORKBENCH_ALLOWED_SERVERS")
    with pytest.raises(PathNotAllowedError, match="WORKBENCH_ALLOWED_SERVERS"):
        confine_server("http://gpu-box:11434", "Server")


def test_a_visitor_cannot_send_the_operators_key_to_a_server_of_their_own(app, monkeypatch):
    """The sidebar draws each provider's options from its schema, a base URL among them. Before the
    fix a visitor's URL got the operator's $OPENAI_API_KEY as its bearer token."""
    from loopback import ScriptedServer, openai_reply, refused_url

    key = "sk-operator-canary-0123456789"
    monkeypatch.setenv("OPENAI_API_KEY", key)
    monkeypatch.setenv("OPENAI_BASE_URL", refused_url() + "/v1")  # the operator's server (down)
    with ScriptedServer([openai_reply("Open Settings, then SSO.")], repeat_last=True) as theirs:
        app.sidebar.selectbox(key="cfg_provider").set_value("openai").run()
        app.sidebar.text_input(key="cfg_opt_openai_base_url").set_value(theirs.url + "/v1").run()
        assert any("not allowed" in e.value and "WORKBENCH\\_ALLOWED\\_SERVERS" in e.value
                   for e in app.sidebar.error), [e.value for e in app.sidebar.error]
        app.chat_input[0].set_value("How do I configure SSO?").run()
        assert not app.exception
        assert theirs.requests == [], "the visitor's server got a request, and the operator's key with it"
        assert app.session_state["turns"][-1].payload.status == "connection_error"  # the operator's server
        assert key not in _all_text(app)
        # a server the operator lists is the visitor's to choose
        monkeypatch.setenv("WORKBENCH_ALLOWED_SERVERS", theirs.url + "/v1")
        app.run()
        assert not app.sidebar.error, [e.value for e in app.sidebar.error]
        app.chat_input[0].set_value("How do I configure SSO?").run()
        assert not app.exception
        assert app.session_state["turns"][-1].payload.status == "ok"
        assert theirs.posts()


# --- symlinks inside a corpus folder ------------------------------------------------------------


def test_symlinks_that_leave_a_corpus_folder_are_not_followed(tmp_path, outside):
    kb = tmp_path / "kb"
    (kb / "sub").mkdir(parents=True)
    (kb / ".drafts").mkdir()
    (kb / "a.md").write_text("---\nid: a\ntitle: A\n---\nAlpha.\n")
    (kb / ".drafts" / "c.md").write_text("---\nid: c\ntitle: C\n---\nGamma.\n")
    (kb / "c.md").symlink_to(kb / ".drafts" / "c.md")  # stays inside the folder: followed
    (kb / "token.txt").symlink_to(outside / "token.txt")
    (kb / "notes.md").symlink_to(outside / "notes.md")
    (kb / "linked-dir").symlink_to(outside, target_is_directory=True)
    (kb / "sub" / "up.txt").symlink_to(Path("..") / ".." / "outside" / "token.txt")
    corpus = load_corpus(kb)
    assert sorted(d.doc_id for d in corpus.documents) == ["a", "c"]
    assert all(SECRET not in d.text for d in corpus.documents)
    skipped = "\n".join(corpus.skipped)
    for name in ("token.txt", "notes.md", "up.txt"):
        assert name in skipped
    assert "leaves the corpus folder" in skipped


def test_the_cli_warns_about_skipped_symlinks(tmp_path, outside):

    kb = tmp_path / "kb"
    kb.mkdir()
    (kb / "a.md").write_text("---\nid: a\ntitle: A\n---\nAlpha about tokens.\n")
    (kb / "token.txt").symlink_to(outside / "token.txt")
    r = cli("ask", "--no-trace", "--corpus", str(kb), "token")
    assert r.returncode == 0, r.stderr
    assert SECRET not in r.stdout
    assert "warning:" in r.stderr and "token.txt" in r.stderr and "not followed" in r.stderr


# --- binding --------------------------------------------------------------------------------------


def test_the_app_binds_to_loopback_and_limits_uploads_by_default():
    from workbench.ui.uploads import DEFAULT_MAX_UPLOAD_MB

    cfg = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert cfg["server"]["address"] == "127.0.0.1"
    assert cfg["server"]["maxUploadSize"] == DEFAULT_MAX_UPLOAD_MB
    assert "WORKBENCH_ALLOWED_ROOTS" in (ROOT / "docs" / "security.md").read_text()
    assert "docs/security.md" in (ROOT / "README.md").read_text()


def test_the_app_server_forces_no_full_garbage_collection_after_each_run():
    """Streamlit's `runner.postScriptGC` (a full `gc.collect` after every run) is off, as Streamlit reads the file
    from the app's folder (benchmarks/rerun_cpu.py: 410 against 90 ms of server CPU per pill opened and closed)."""
    from streamlit import config

    assert tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())["runner"]["postScriptGC"] is False
    config.get_option("runner.postScriptGC")  # a real option under this name: an unknown one raises
