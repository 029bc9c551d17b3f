"""Corpus loading: Markdown folders, JSONL, and clear errors for bad input (never a traceback)."""

from __future__ import annotations

import json
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clirun import cli
from conftest import require_shared
from workbench.config import DEMO_CORPUS
from workbench.corpus import load_corpus
from workbench.errors import CorpusError


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def md(doc_id, title="T", extra=""):
    return f"---\nid: {doc_id}\ntitle: {title}\n{extra}---\n\nBody of {doc_id}.\n"


def test_demo_corpus_meets_the_brief():
    c = load_corpus(DEMO_CORPUS)
    sources = [d for d in c.documents if d.kind == "source"]
    generated = [d for d in c.documents if d.kind == "generated"]
    assert len(sources) >= 40
    assert len({d.category for d in sources}) >= 6
    assert len(generated) >= 3
    for g in generated:
        assert g.artifact_kind and g.derived_from and all(x in c for x in g.derived_from)
    assert all(d.url and d.url.startswith("https://") for d in c.documents)
    linked = sum("https://help.orbitly.example/articles/" in d.text for d in sources)
    assert linked >= 20  # internal links between articles


def test_category_defaults_to_folders(tmp_path):
    write(tmp_path / "Section" / "Cat" / "a.md", md("a"))
    write(tmp_path / "b.md", md("b", extra="category: Custom\n"))
    c = load_corpus(tmp_path)
    assert c.get("a").category == "Section/Cat" and c.get("a").section == "Section"
    assert c.get("b").category == "Custom"


def test_ids_stay_exact_strings(tmp_path):
    write(tmp_path / "a.md", md("0123"))
    write(tmp_path / "b.md", md("4412377144338"))
    c = load_corpus(tmp_path)
    assert "0123" in c and "4412377144338" in c


@pytest.mark.parametrize("content,line,needle", [
    ("---\ntitle: x\n---\nbody", 1, "missing required field 'id'"),
    ("---\nid: a\ntitle: [unclosed\n---\nbody", 3, "bad YAML"),
    ("no front matter here", 1, "missing YAML front matter"),
    ("---\nid: a\n", 1, "never closed"),
    ("   \n", None, "file is empty"),
    ("---\n- a\n- b\n---\nbody", 2, "must be a YAML mapping"),
])
def test_bad_markdown_names_file_and_line(tmp_path, content, line, needle):
    f = write(tmp_path / "bad.md", content)
    with pytest.raises(CorpusError) as exc:
        load_corpus(tmp_path)
    assert needle in str(exc.value)
    assert str(f) in str(exc.value)
    assert exc.value.line == line


def test_duplicate_id_in_folder(tmp_path):
    write(tmp_path / "x" / "a.md", md("same"))
    write(tmp_path / "y" / "b.md", md("same"))
    with pytest.raises(CorpusError, match="duplicate id 'same'"):
        load_corpus(tmp_path)


def test_undecodable_file(tmp_path):
    (tmp_path / "a.md").write_bytes(b"---\nid: a\n---\n\xff\xfe bad")
    with pytest.raises(CorpusError, match="not valid UTF-8"):
        load_corpus(tmp_path)


@pytest.mark.skipif(os.geteuid() == 0, reason="root can read files without permission bits")
def test_unreadable_file(tmp_path):
    f = write(tmp_path / "a.md", md("a"))
    f.chmod(0)
    with pytest.raises(CorpusError, match="cannot read"):
        load_corpus(tmp_path)


@pytest.mark.parametrize("lines,line,needle", [
    (['{"id": "a", "text": "x"}', '{"id": "a", "text": "y"}'], 2, "duplicate id 'a' (first on line 1)"),
    (['{"id": "a", "text": "x"}', '{"title": "no id", "text": "y"}'], 2, "missing required field 'id'"),
    (['{"id": "a", "text": "x"}', '{"id": "b", "text": "y",'], 2, "invalid JSON"),
    (['[1, 2]'], 1, "must be a JSON object"),
    (['{"id": "a"}'], 1, "missing required field 'text'"),
    (['{"id": "a", "text": "x", "kind": "weird"}'], 1, "field 'kind'"),
])
def test_bad_jsonl_names_line(tmp_path, lines, line, needle):
    f = write(tmp_path / "c.jsonl", "\n".join(lines) + "\n")
    with pytest.raises(CorpusError) as exc:
        load_corpus(f)
    assert needle in str(exc.value) and f"{f}:{line}:" in str(exc.value)


def test_jsonl_fields(tmp_path):
    f = write(tmp_path / "c.jsonl", json.dumps({
        "id": 17, "title": "T", "text": "x", "url": "https://e.x/17", "section": "S", "category": "C",
        "kind": "generated", "artifact_kind": "profile", "derived_from": ["a"]}) + "\n\n")
    d = load_corpus(f).get("17")
    assert (d.category, d.section, d.kind, d.artifact_kind, d.derived_from) == ("S/C", "S", "generated", "profile", ("a",))
    assert d.label == "Generated profile"


def test_missing_path_and_unsupported_file(tmp_path):
    with pytest.raises(CorpusError, match="does not exist"):
        load_corpus(tmp_path / "nope")
    with pytest.raises(CorpusError, match="unsupported"):
        load_corpus(write(tmp_path / "x.csv", "a,b"))
    with pytest.raises(CorpusError, match="no documents"):
        load_corpus(write(tmp_path / "empty" / "readme.rst", "x").parent)


def test_content_hash_changes_with_content(tmp_path):
    write(tmp_path / "a.md", md("a"))
    h1 = load_corpus(tmp_path).content_hash
    assert load_corpus(tmp_path).content_hash == h1
    write(tmp_path / "a.md", md("a", title="Changed"))
    assert load_corpus(tmp_path).content_hash != h1


def test_cli_bad_corpus_exits_2_without_traceback(tmp_path):
    write(tmp_path / "bad.md", "---\nid: a\ntitle: [oops\n---\n")
    r = cli("ask", "--corpus", str(tmp_path), "hello")
    assert r.returncode == 2
    assert "Traceback" not in r.stderr and "bad.md:3: bad YAML" in r.stderr


def test_arduino_folder_and_jsonl_agree():
    folder = load_corpus(require_shared("arduino-help-center", "articles"))
    jsonl = load_corpus(require_shared("arduino-help-center", "corpus.jsonl"))
    assert len(folder) == len(jsonl) == 407
    assert {d.doc_id for d in folder.documents} == {d.doc_id for d in jsonl.documents}
    assert len(folder.categories()) == len(jsonl.categories()) == 43
    a, b = folder.get("360011787880"), jsonl.get("360011787880")
    assert a.title == b.title and a.category == b.category


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=300))
def test_random_markdown_never_crashes_outside_corpus_error(tmp_path_factory, text):
    d = tmp_path_factory.mktemp("fuzz")
    (d / "a.md").write_text(text, encoding="utf-8")
    try:
        c = load_corpus(d)
    except CorpusError:
        return
    assert len(c) == 1
