"""What one script run of the app reads from the trace database (every click reruns the whole script): a rerun
that finds the file unchanged opens it not at all, a read opens it once (its schema check and its query on one
connection), and every cache of those reads still sees what other processes write to the same file (another
process's share, its migrations). Real trace files, real writer processes, the app under AppTest."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from apptest import ask
from conftest import ROOT
from workbench.trace import connect
from workbench.trace.conversation_reader import conversation_owner, list_conversations
from workbench.trace.reader import TraceReader
from workbench.trace.schema import MIGRATIONS
from workbench.trace.shares import active_share


@pytest.fixture
def opens(monkeypatch) -> list[str]:
    """The trace files this process opens read-only (`connect.open_connection`, under every reader), as they happen."""
    seen: list[str] = []
    real = connect.open_connection

    def counted(path, *, read_only, **kw):
        if read_only:
            seen.append(str(path))
        return real(path, read_only=read_only, **kw)

    monkeypatch.setattr(connect, "open_connection", counted)
    return seen


def in_another_process(code: str, db: Path) -> None:
    """Run `code` (with `db` bound to the trace file's path) in a new Python process: another writer of the file."""
    subprocess.run([sys.executable, "-c", f"db = {str(db)!r}\n" + textwrap.dedent(code)], cwd=ROOT, check=True,
                   timeout=120)


def new_store(db: Path, migrations=MIGRATIONS) -> None:
    from workbench.trace.migrate import migrate
    from workbench.trace.writer import TraceWriter

    with TraceWriter(db).connect():  # every migration
        pass
    if migrations is not MIGRATIONS:  # an older store: made again with only `migrations`
        db.unlink()
        import duckdb

        con = duckdb.connect(str(db))
        migrate(con, migrations)
        con.close()


def test_a_read_opens_the_file_once_and_an_unchanged_file_is_not_opened_to_check_it(tmp_path, opens):
    db = tmp_path / "traces.duckdb"
    new_store(db)
    assert active_share(db, "c-1") is None
    assert opens == [str(db)], "the schema check and the query on one connection"
    TraceReader(db).check()
    assert list_conversations(db) == [] and conversation_owner(db, "c-1") == (False, None)
    assert opens == [str(db)] * 3, "no check of its own for an unchanged file: one open for each read"
    in_another_process("""
        from workbench.trace.shares import share
        share(db, "c-1", by="browser:x", audience="link")
    """, db)
    TraceReader(db).check()
    assert len(opens) == 4, "a file another process wrote is checked again"


def test_a_file_another_process_migrates_is_read_with_its_new_schema(tmp_path):
    """The schema a reader of this process knew (no shares table yet) is not kept once another process migrated."""
    db = tmp_path / "traces.duckdb"
    older = tuple(m for m in MIGRATIONS if m.name < "m024")
    new_store(db, older)
    reader = TraceReader(db)
    reader.check()
    assert not reader.schema.has("conversation_shares")
    assert active_share(db, "c-1") is None, "an older store has no shares"
    in_another_process("""
        from workbench.trace.shares import share
        share(db, "c-1", by="browser:x", audience="link")  # its writer migrates the file first
    """, db)
    made = active_share(db, "c-1")
    assert made is not None and made.shared_by == "browser:x"
    assert TraceReader(db).rows_with(lambda s: "SELECT 1" if s.has("conversation_shares") else None) == (["1"], [(1,)])


def test_a_chat_rerun_with_nothing_new_opens_no_trace_file_and_sees_another_process_share(app, opens):
    at = ask(app, "How do I configure SSO?")
    cid = at.session_state["conversation_id"]
    db = at.session_state["turns"][0].session.tracer.path
    at.run()
    opens.clear()
    at.run()  # a click: nothing asked, the file unchanged
    assert not at.exception, at.exception
    assert opens == [], f"an unchanged trace file opened {len(opens)} times by a rerun"
    assert any(b.key == "share-create" for b in at.button), "not shared yet"
    in_another_process(f"""
        from workbench.trace.shares import share
        share(db, {cid!r}, by="browser:other", audience="link")
    """, db)
    at.run()
    made = active_share(db, cid)
    assert made is not None
    assert any(f"share={made.token}" in c.value for c in at.code), "the other process's share is shown at the next run"
    assert not any(b.key == "share-create" for b in at.button)


def test_the_corpus_fingerprint_counts_what_rglob_finds_and_changes_with_a_nested_edit(tmp_path):
    """`caches._fingerprint` (read on every run) walks the folder with os.scandir; it counts the files `Path.rglob`
    finds (hidden ones and symlinked files included, symlinked folders not entered, a broken link not a file) and
    changes when a file deep in the folder is edited."""
    import os

    from workbench.ui.caches import _fingerprint

    corpus, elsewhere = tmp_path / "corpus", tmp_path / "elsewhere"
    (corpus / "a" / "b").mkdir(parents=True)
    elsewhere.mkdir()
    (elsewhere / "x.md").write_text("x")
    (corpus / "top.md").write_text("top")
    (corpus / ".hidden.md").write_text("h")
    deep = corpus / "a" / "b" / "deep.md"
    deep.write_text("deep")
    (corpus / "linked.md").symlink_to(elsewhere / "x.md")
    (corpus / "linked-folder").symlink_to(elsewhere)
    (corpus / "broken.md").symlink_to(tmp_path / "gone.md")
    files = [f for f in corpus.rglob("*") if f.is_file()]
    assert _fingerprint(str(corpus)) == f"{len(files)}:{max(f.stat().st_mtime_ns for f in files)}" == \
        f"4:{max(f.stat().st_mtime_ns for f in files)}"
    before = _fingerprint(str(corpus))
    os.utime(deep, ns=(deep.stat().st_atime_ns, deep.stat().st_mtime_ns + 10**9))
    assert _fingerprint(str(corpus)) != before
    assert _fingerprint(str(deep)) == f"1:{deep.stat().st_mtime_ns}"
    assert _fingerprint(str(tmp_path / "missing")) == "0:0"


def test_the_experiments_and_usage_pages_rerun_without_reading_an_unchanged_store_and_see_another_process_run(
        tmp_path, monkeypatch, opens):
    """The Experiments page's runs and audited runs and the Document usage page's counts are read again only once the
    store changed (`ui.tables.stored`); a run another process records shows at the next rerun."""
    import json

    from streamlit.testing.v1 import AppTest

    db, questions = tmp_path / "traces.duckdb", tmp_path / "q.jsonl"
    monkeypatch.setenv("WORKBENCH_DB", str(db))
    questions.write_text(json.dumps({"question": "How do I configure SSO?", "expected": ["sso-saml-setup"]}) + "\n")

    def evaluated(name: str) -> None:  # a real `workbench eval` process: another writer of the file
        subprocess.run([sys.executable, "-m", "workbench", "eval", str(questions), "--db", str(db), "--name", name,
                        "--no-progress"], cwd=ROOT, check=True, capture_output=True, timeout=300)

    evaluated("first-run")
    pages = {name: AppTest.from_file(str(ROOT / "pages" / name), default_timeout=60).run()
             for name in ("5_Experiments.py", "4_Document_usage.py")}
    assert all(not at.exception for at in pages.values()), [at.exception for at in pages.values()]

    def offered(at) -> str:  # the Experiments page's runs to pick
        return "\n".join(str(o) for m in at.multiselect for o in m.options)

    assert "first-run" in offered(pages["5_Experiments.py"])
    usage_before = [m.value for m in pages["4_Document_usage.py"].metric]

    def retrieved(at) -> int:  # turns that retrieved the most-used source, in the usage page's first table
        table = next(d.value for d in at.dataframe if "retrieved_turns" in d.value.columns)
        return int(table["retrieved_turns"].max())

    retrieved_before = retrieved(pages["4_Document_usage.py"])
    opens.clear()
    for at in pages.values():
        at.run()
        assert not at.exception, at.exception
    assert opens == [], f"an unchanged store opened {len(opens)} times by two reruns"
    evaluated("second-run")
    for at in pages.values():
        at.run()
        assert not at.exception, at.exception
    assert "second-run" in offered(pages["5_Experiments.py"]), "the other process's run shows at the next rerun"
    assert opens, "a changed store is read again"
    assert [m.value for m in pages["4_Document_usage.py"].metric] == usage_before  # the same documents retrieved
    assert retrieved(pages["4_Document_usage.py"]) == 2 * retrieved_before, "the other process's turn is counted"
