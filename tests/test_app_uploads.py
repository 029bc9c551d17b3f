"""Corpus uploads in the app sidebar: files land where load_corpus reads them, zip slip refused."""

from __future__ import annotations

import io
import json
import zipfile

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
    from workbench.ui.state import _fingerprint

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
