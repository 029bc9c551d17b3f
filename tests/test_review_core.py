"""Regressions found in review of the core (provenance, JSON Lines input, CLI): adversarial input
must end in `error: …` and exit 2, never a traceback."""

from __future__ import annotations

import json

import pytest

from clirun import cli

RECORD = {"question": "q", "answer": "See [SSO](sso-setup).", "tool_calls": [
    {"name": "fetch_document", "exposure": "full", "args": {"doc_id": "sso-setup"},
     "results": [{"doc_id": "sso-setup", "title": "Configure SSO"}]}]}
DEEP = "[" * 100_000 + "]" * 100_000


def run(*args, stdin: bytes | None = None):
    r = cli(*args, input=stdin)
    return r.returncode, r.stdout, r.stderr


def test_provenance_accepts_a_byte_order_mark_from_file_and_stdin(tmp_path):
    blob = b"\xef\xbb\xbf" + json.dumps(RECORD).encode()
    f = tmp_path / "bom.json"
    f.write_bytes(blob)
    for args, stdin in ((("provenance", str(f)), None), (("provenance", "-"), blob)):
        code, out, err = run(*args, stdin=stdin)
        assert code == 0, err
        assert json.loads(out)["sets"]["consulted"] == ["sso-setup"]


@pytest.mark.parametrize("blob,needle", [
    (b"\xff\xfe{}", "not valid UTF-8"),
    (DEEP.encode(), "nested too deeply"),
    (json.dumps({**RECORD, "question": "\ud800"}).encode(), "unpaired surrogate"),
])
def test_provenance_rejects_undecodable_input_without_a_traceback(tmp_path, blob, needle):
    f = tmp_path / "bad.json"
    f.write_bytes(blob)
    for args, stdin in ((("provenance", str(f)), None), (("provenance", "-"), blob)):
        code, _, err = run(*args, stdin=stdin)
        assert code == 2 and "Traceback" not in err, err
        assert err.startswith("error: ") and needle in err, err


def test_jsonl_readers_skip_a_byte_order_mark_and_reject_deep_nesting():
    from workbench.errors import CorpusError
    from workbench.jsonl import json_objects

    assert list(json_objects(['\ufeff{"question": "a"}'], "q.jsonl")) == [(1, {"question": "a"})]
    with pytest.raises(CorpusError, match=r"q.jsonl:2: invalid JSON: nested too deeply"):
        list(json_objects(["{}", DEEP], "q.jsonl"))


def test_question_files_with_bom_bad_utf8_or_deep_nesting(tmp_path):
    from workbench.errors import CorpusError
    from workbench.questions import read_questions

    bom = tmp_path / "bom.jsonl"
    bom.write_bytes(b'\xef\xbb\xbf{"question": "How do I configure SSO?"}\n')
    assert [q.text for q in read_questions(bom)] == ["How do I configure SSO?"]
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b'{"question": "caf\xe9"}\n')
    with pytest.raises(CorpusError, match="not valid UTF-8"):
        read_questions(str(bad))
    deep = tmp_path / "deep.jsonl"
    deep.write_text(DEEP + "\n")
    code, _, err = run("ask", "--questions", str(deep), "--no-trace")
    assert code == 2 and "nested too deeply" in err and "Traceback" not in err, err


def _payload(answer, results, exposure="snippet"):
    from workbench.provenance import sources_payload
    from workbench.types import turn_record_from_dict

    return sources_payload(turn_record_from_dict({"question": "q", "answer": answer, "tool_calls": [
        {"name": "search", "exposure": exposure, "args": {}, "results": results}]}))


def test_ids_with_spaces_and_percent_encoded_targets_resolve_to_the_retrieved_document():
    results = [{"doc_id": "guides/Annual Report (v2)", "title": "Annual report"},
               {"doc_id": "café", "title": "Café", "url": "https://help.example.com/articles/caf%C3%A9"}]
    p = _payload("See [report](<guides/Annual Report (v2)>), [c](caf%C3%A9) and "
                 "[c2](https://help.example.com/articles/café).", results)
    assert p.sets.cited == ("guides/Annual Report (v2)", "café")
    assert p.sets.consulted == ("guides/Annual Report (v2)", "café")
    assert p.rejected_citations == ()
    # decoding never turns a fabrication into a source
    p = _payload("See [x](caf%C3%A8).", results)
    assert p.sets.cited == () and p.rejected_citations[0].nearest_doc_id == "café"


def test_jsonl_lone_surrogate_escapes_are_rejected_with_file_and_line(tmp_path):
    from workbench.corpus import load_corpus
    from workbench.errors import CorpusError
    from workbench.jsonl import json_objects

    f = tmp_path / "c.jsonl"
    f.write_text('{"id": "ok\\ud83d\\ude00", "title": "T", "text": "x"}\n{"id": "a\\ud800", "title": "T", "text": "x"}\n')
    with pytest.raises(CorpusError, match=r"c.jsonl:2: .*unpaired surrogate"):
        load_corpus(f)
    assert list(json_objects(['{"q": "\\ud83d\\ude00"}'], "q.jsonl")) == [(1, {"q": "😀"})]  # a real pair is fine
    code, _, err = run("ask", "--corpus", str(f), "x", "--no-trace")
    assert code == 2 and "Traceback" not in err, err


def _corpus_session(tmp_path, docs):
    from workbench.session import Session

    f = tmp_path / "c.jsonl"
    f.write_text("\n".join(json.dumps(d) for d in docs) + "\n")
    return Session.open(str(f), trace=False)


def test_offline_excerpts_ignore_numbered_reference_lines_inside_a_chunk(tmp_path):
    s = _corpus_session(tmp_path, [{"id": "p1", "title": "Paper", "text": "We study tokenizers.\n\nReferences\n"
                                    "[7] Smith et al.\nTokenizers for search engines improve recall."}])
    p = s.ask("Smith tokenizers engines improve recall", mode="excerpts", k=2).payload
    assert p.rejected_citations == () and p.sets.consulted == ("p1",), p.answer


def test_offline_links_ids_with_spaces_and_parentheses_so_they_count_as_cited(tmp_path):
    s = _corpus_session(tmp_path, [
        {"id": "paper one", "title": "Paper (one)", "text": "Tokenizers for search engines improve recall."},
        {"id": "paper (two)", "title": "Paper two", "text": "Tokenizers for search engines improve recall too."}])
    p = s.ask("tokenizers for search engines recall").payload
    assert set(p.sets.cited) == {"paper one", "paper (two)"} and p.rejected_citations == (), p.answer
    p = s.ask("tokenizers for search engines recall", faults=["corrupt_id", "cite_unretrieved"]).payload
    assert [r.reason for r in p.rejected_citations] == ["not_retrieved"] * 2, p.answer  # corrupted + legacy


@pytest.mark.parametrize("name,args", [("browse_section", {"category": 5}), ("list_articles", {"category": ["a"]})])
def test_a_non_string_category_is_a_tool_error_the_model_sees_not_a_crash(demo_session, name, args):
    out = demo_session.toolbox.call(name, args)
    assert out.call.error == out.content["error"] and "category must be a string" in out.call.error
    assert out.call.results == ()


@pytest.mark.parametrize("k", ["0", "-3", "two"])
def test_ask_rejects_a_k_below_one(k):
    code, out, err = run("ask", "How do I configure SSO?", "--no-trace", "--mode", "excerpts", "-k", k)
    assert code == 2 and "-k" in err and out == "", err
