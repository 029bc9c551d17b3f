"""Issue 24's "Also" items: question length, control characters and Unicode forms in document ids, and
duplicate keys in front matter."""

from __future__ import annotations

import json
import unicodedata

import pytest

from workbench.cli import main
from workbench.config import MAX_QUESTION_CHARS
from workbench.corpus import load_corpus
from workbench.errors import CorpusError, WorkbenchError
from workbench.provenance import sources_payload
from workbench.questions import read_questions
from workbench.types import ResultItem, ToolCall, TurnRecord

# --- question length -------------------------------------------------------------------------------


def test_a_ten_megabyte_question_is_refused_by_the_cli_before_anything_runs(tmp_path, capsys):
    """Before the fix it was answered (18 s, 468 MB) and stored whole in the trace database."""
    db = tmp_path / "t.duckdb"
    assert main(["ask", "How do I configure SSO? " * 420_000, "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert f"at most {MAX_QUESTION_CHARS:,}" in err and "10,080,000 characters" in err and "Traceback" not in err
    assert not db.exists()  # nothing ran, nothing was stored


def test_the_library_refuses_a_long_question_and_takes_one_at_the_bound(demo_session):
    with pytest.raises(WorkbenchError, match=f"at most {MAX_QUESTION_CHARS:,}"):
        demo_session.ask("x" * (MAX_QUESTION_CHARS + 1), log=False)
    words = ("How do I configure SSO? " * MAX_QUESTION_CHARS)[:MAX_QUESTION_CHARS]
    assert demo_session.ask(words, log=False).payload.status == "ok"


def test_a_questions_file_with_a_long_question_names_its_line(tmp_path):
    f = tmp_path / "q.jsonl"
    f.write_text(json.dumps({"question": "short?"}) + "\n" + json.dumps({"question": "y" * 20_000}) + "\n")
    with pytest.raises(CorpusError, match=rf"q.jsonl:2: the question is 20,000 characters long; .*at most"):
        read_questions(f)


def test_the_chat_box_has_the_same_bound(app):
    """The browser stops typing at the bound; a client that sends more is refused by `Session.ask` (above)."""
    from apptest import ask

    assert app.chat_input[0].proto.max_chars == MAX_QUESTION_CHARS
    ask(app, "z" * (MAX_QUESTION_CHARS + 1))  # AppTest, like the browser, keeps the first MAX_QUESTION_CHARS
    # The question is shown whole; lines over render.escaping.MAX_LINE_CHARS are wrapped for display (not cut).
    assert [t.value.replace("\n", "") for t in app.text] == ["z" * MAX_QUESTION_CHARS]


# --- document ids ------------------------------------------------------------------------------------


def test_a_file_name_with_a_newline_or_a_bidi_override_gives_a_one_line_printable_id(tmp_path):
    (tmp_path / "report\n2024.txt").write_text("Quarterly report text.\n")
    (tmp_path / "photo\u202egpj.exe.txt").write_text("Not a picture.\n")
    (tmp_path / "tab\there.txt").write_text("Tabbed.\n")
    ids = sorted(d.doc_id for d in load_corpus(tmp_path).documents)
    assert ids == ["photo\\u202egpj.exe", "report\\x0a2024", "tab\\x09here"]
    assert all(i.isprintable() for i in ids)


def test_front_matter_and_jsonl_ids_with_control_characters_are_renamed_visibly(tmp_path):
    kb = tmp_path / "kb.jsonl"
    kb.write_text(json.dumps({"id": "a\nb", "text": "t", "derived_from": ["c\u2028d"]}) + "\n")
    [doc] = load_corpus(kb).documents
    assert doc.doc_id == "a\\x0ab" and doc.derived_from == ("c\\u2028d",)


def test_cafe_in_nfc_and_nfd_is_one_id(tmp_path):
    nfc, nfd = unicodedata.normalize("NFC", "café"), unicodedata.normalize("NFD", "café")
    assert nfc != nfd
    (tmp_path / "one.md").write_text(f"---\nid: {nfc}\n---\nFirst.\n")
    (tmp_path / "two.md").write_text(f"---\nid: {nfd}\n---\nSecond.\n")
    with pytest.raises(CorpusError, match="duplicate id 'café'"):
        load_corpus(tmp_path)
    (tmp_path / "one.md").unlink()
    corpus = load_corpus(tmp_path)
    assert [d.doc_id for d in corpus.documents] == [nfc]
    assert corpus.get(nfd) is corpus.get(nfc) is not None and nfd in corpus
    # a model that writes the id in the other form cites the same document
    call = ToolCall("search", "snippet", {}, (ResultItem(nfc, "Café", None),))
    p = sources_payload(TurnRecord("q", f"See [it]({nfd}).", "agent", (call,)))
    assert p.sets.cited == (nfc,) and p.rejected_citations == ()


def test_a_file_name_in_nfd_gives_an_nfc_id(tmp_path):
    (tmp_path / unicodedata.normalize("NFD", "résumé.txt")).write_text("CV.\n")
    assert [d.doc_id for d in load_corpus(tmp_path).documents] == [unicodedata.normalize("NFC", "résumé")]


# --- duplicate keys in front matter --------------------------------------------------------------------


@pytest.mark.parametrize("front, line", [("id: a\ntitle: T\nid: b\n", 4), ("id: a\nmeta:\n  x: 1\n  x: 2\n", 5),
                                         ("id: a\ntags: [{k: 1, k: 2}]\n", 3)], ids=["id", "nested", "flow"])
def test_a_duplicate_key_in_front_matter_is_an_error_naming_file_and_line(tmp_path, front, line):
    """Before the fix PyYAML kept the last value silently (`id: b`)."""
    f = tmp_path / "doc.md"
    f.write_text(f"---\n{front}---\nBody.\n")
    with pytest.raises(CorpusError, match=rf"doc\.md:{line}: duplicate key '(id|x|k)' in front matter"):
        load_corpus(tmp_path)


def test_the_same_key_in_different_mappings_is_fine(tmp_path):
    (tmp_path / "doc.md").write_text("---\nid: a\nx: {id: 1}\ny: [{id: 2}, {id: 3}]\n---\nBody.\n")
    assert [d.doc_id for d in load_corpus(tmp_path).documents] == ["a"]
