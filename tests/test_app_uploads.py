"""Corpus uploads in the app sidebar: files land where load_corpus reads them, zip slip refused."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import pytest

from workbench.corpus import load_corpus
from workbench.errors import CorpusError
from workbench.ui.uploads import save_upload

MD = "---\nid: a\ntitle: A\n---\nAlpha text.\n"


def _zip(files: dict[str, str]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, text in files.items():
            zf.writestr(name, text)
    return buf.getvalue()


def test_jsonl_md_and_zip_uploads_load_as_corpora(tmp_path):
    line = json.dumps({"id": "x", "title": "X", "text": "hello"})
    assert [d.doc_id for d in load_corpus(save_upload("c.jsonl", line.encode(), tmp_path)).documents] == ["x"]
    assert [d.doc_id for d in load_corpus(save_upload("a.md", MD.encode(), tmp_path)).documents] == ["a"]
    z = _zip({"kb/a.md": MD, "kb/b.md": MD.replace("id: a", "id: b"), "logo.png": "ignored"})
    corpus = load_corpus(save_upload("kb.zip", z, tmp_path))
    assert sorted(d.doc_id for d in corpus.documents) == ["a", "b"]


@pytest.mark.parametrize("name,data", [("c.jsonl", b'{"id": "x", "title": "X", "text": "hello"}\n'),
                                       ("a.md", MD.encode()), ("kb.zip", _zip({"a.md": MD}))])
def test_the_same_upload_on_every_rerun_keeps_the_app_session(name, data, tmp_path):
    """Streamlit hands the sidebar the upload again on every rerun: storing it again changed the files'
    mtime, so the session cache key (`_fingerprint`) changed and every click reloaded the corpus."""
    from workbench.ui.caches import _fingerprint

    first = save_upload(name, data, tmp_path)
    before = _fingerprint(str(first))
    assert save_upload(name, data, tmp_path) == first and _fingerprint(str(first)) == before
    assert not [p for p in tmp_path.rglob(".partial-*")], "no scratch file is left behind"


def test_zip_slip_members_are_never_written_outside(tmp_path):
    z = _zip({"../evil.md": MD, "/abs/evil.md": MD, "ok/a.md": MD})
    root = tmp_path / "uploads"
    path = save_upload("kb.zip", z, root)
    assert [p.relative_to(path).as_posix() for p in path.rglob("*.md")] == ["ok/a.md"]
    assert not (tmp_path / "evil.md").exists() and not list(root.parent.glob("*.md"))


def test_bad_uploads_are_corpus_errors(tmp_path):
    with pytest.raises(CorpusError, match="upload a .jsonl"):
        save_upload("x.exe", b"MZ", tmp_path)
    with pytest.raises(CorpusError, match="not a valid .zip"):
        save_upload("x.zip", b"nope", tmp_path)
    with pytest.raises(CorpusError, match="no corpus files"):
        save_upload("x.zip", _zip({"a.png": "t"}), tmp_path)


# --- uploads belong to the browser session that made them (issue 24, item 8) ---------------------

SECRET_MD = ("---\nid: payroll-secrets\ntitle: Payroll secrets of session A\n---\n"
             "The payroll export key is kept in the vault; rotate the payroll key every month.\n")


@pytest.mark.parametrize("allowed_roots", [None, "uploads"])
def test_the_uploads_folder_is_no_path_a_visitor_may_type(allowed_roots, monkeypatch):
    from workbench.config import uploads_dir, workbench_home
    from workbench.errors import PathNotAllowedError
    from workbench.paths import confine

    uploads = uploads_dir()
    if allowed_roots:  # even an operator who lists the uploads folder as a root does not open it to everyone
        monkeypatch.setenv("WORKBENCH_ALLOWED_ROOTS", str(uploads))
    (uploads / ("0" * 32)).mkdir(parents=True, exist_ok=True)
    for typed in (str(uploads), str(uploads / ("0" * 32)), str(workbench_home() / "x" / ".." / "uploads" / "a"),
                  str(uploads) + "/"):
        with pytest.raises(PathNotAllowedError, match="holds the uploads of this app's visitors"):
            confine(typed, "corpus path")
    if not allowed_roots:
        assert confine(str(workbench_home() / "kb"), "corpus path"), "the rest of WORKBENCH_HOME stays allowed"


def _upload(at, name: str, data: bytes):
    at.sidebar.radio(key="cfg_corpus_source").set_value("Upload").run()
    at.file_uploader(key="corpus_upload").set_value((name, data, "text/markdown")).run()
    assert not at.exception, at.exception


def test_a_second_session_cannot_load_the_first_sessions_upload(app):
    from streamlit.testing.v1 import AppTest

    from apptest import APP, ask, unescape
    from workbench.config import uploads_dir

    _upload(app, "payroll.md", SECRET_MD.encode())
    at = ask(app, "How do I rotate the payroll key?")
    turn = at.session_state["turns"][0]
    mine = Path(turn.config.corpus)
    assert "payroll-secrets" in turn.payload.sets.consulted, "session A answers from its upload"

    other = AppTest.from_file(APP, default_timeout=60).run()  # another browser session, same server
    for typed in (str(mine), str(mine.parent), str(uploads_dir())):
        other.sidebar.radio(key="cfg_corpus_source").set_value("Folder or JSONL path").run()
        other.sidebar.text_input(key="cfg_corpus_path").set_value(typed).run()
        errors = [e.value for e in other.sidebar.error]
        assert any("holds the uploads of this app" in e for e in errors), (typed, errors)
        ask(other, "How do I rotate the payroll key?")
        last = other.session_state["turns"][-1]
        assert last.config.corpus_label == "demo", "the demo corpus stays in use"
        assert "payroll-secrets" not in last.payload.sets.retrieved
    other.query_params["store"] = str(mine.parent / "deep" / "t.duckdb")  # a store is named, never a path
    other.run()
    assert any("no trace store named" in unescape(e.value) for e in other.error), [e.value for e in other.error]
    ask(other, "How do I rotate the payroll key?")
    assert not (mine.parent / "deep").exists(), "no database is created under the uploads"
    # the upload lives in session A's own folder, named by a token only session A's viewer has
    token = at.session_state["viewer"].uploads_token
    assert mine.is_relative_to(uploads_dir() / token), f"{mine} is not in session A's own uploads folder"
    assert other.session_state["viewer"].uploads_token != token
