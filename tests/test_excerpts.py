"""Excerpt mode on the demo corpus: numbered excerpts, [n] citations, out-of-range rejection, labels."""

from __future__ import annotations

import json
import re

import pytest

from conftest import ROOT, schema_validator
from workbench.agent import build_excerpts, excerpt_message
from workbench.cli import main
from workbench.prompts import EXCERPTS_PROMPT_VERSION, PROMPTS
from workbench.render.sources import sources_row, summary_line
from workbench.session import Session

#: docs/design.md §3: what every excerpt citation record carries.
CITATION_FIELDS = {"doc_id", "file_name", "chunk_index", "page", "score", "snippet", "chunk_type", "title",
                   "generated", "artifact_kind", "label"}
GOLD = [json.loads(line) for line in (ROOT / "data" / "demo_gold.jsonl").read_text().splitlines() if line.strip()]
SUBSTANTIVE = [g["question"] for g in GOLD if g.get("kind") == "substantive"][:8]


def _validator(name):
    return schema_validator(name)


def test_user_message_numbers_excerpts_with_file_page_and_chunk(demo_session):
    excerpts = build_excerpts(demo_session.toolbox, "How do I rotate an API key?", 3)
    message = excerpt_message("How do I rotate an API key?", excerpts)
    heads = re.findall(r"^\[(\d+)\] (\S+), page (-|\d+), chunk (\d+)$", message, re.MULTILINE)
    assert [int(h[0]) for h in heads] == [1, 2, 3]
    assert [h[1] for h in heads] == [e.file_name for e in excerpts] and all(h[1].endswith(".md") for h in heads)
    assert [int(h[3]) for h in heads] == [e.chunk_index for e in excerpts]
    for e in excerpts:
        assert e.text in message


def test_system_prompt_is_versioned_and_says_what_design_asks():
    prompt = PROMPTS[EXCERPTS_PROMPT_VERSION].lower()
    for phrase in ("directly", "only the numbered excerpts", "long passages", "evidence", "interpretation",
                   "[2]", "missing"):
        assert phrase in prompt


@pytest.mark.parametrize("question", SUBSTANTIVE)
def test_every_marker_resolves_to_an_excerpt(demo_session, question):
    answer = demo_session.ask(question, mode="excerpts", k=5)
    record, payload = answer.record, answer.payload
    assert record.config["prompt_version"] == EXCERPTS_PROMPT_VERSION and record.mode == "excerpts"
    markers = [int(n) for n in re.findall(r"\[(\d+)\]", record.answer)]
    assert markers, record.answer
    assert all(1 <= n <= len(record.excerpts) for n in markers)
    assert payload.rejected_citations == ()
    cited = [c for c in payload.citations if c.n is not None]
    assert sorted(c.n for c in cited) == sorted(markers)
    by_n = {e.n: e for e in record.excerpts}
    for c in cited:
        assert c.valid and CITATION_FIELDS <= set(c.to_json())
        e, x = by_n[c.n], c.excerpt
        assert (c.doc_id, x["chunk_index"], x["snippet"], x["file_name"]) == (e.doc_id, e.chunk_index, e.text,
                                                                            e.file_name)
        assert x["generated"] == (e.chunk_type == "generated")
    # every excerpt is retrieved as a snippet; a cited one makes its document consulted
    assert set(payload.sets.retrieved) == {e.doc_id for e in record.excerpts}
    assert set(payload.sets.consulted) == {by_n[n].doc_id for n in markers}
    _validator("payload.schema.json").validate(payload.to_json())
    _validator("turn-record.schema.json").validate(json.loads(json.dumps(record.to_dict())))


@pytest.mark.parametrize("fault", ["cite_unretrieved", "corrupt_id"])
def test_fabricated_marker_is_rejected_as_out_of_range(demo_session, fault):
    answer = demo_session.ask("How do I configure SSO?", mode="excerpts", k=5, faults=[fault])
    payload = answer.payload
    bad = [c for c in payload.citations if not c.valid]
    assert bad and all(c.reason == "out_of_range" and c.n > len(answer.record.excerpts) for c in bad)
    assert payload.rejected_citations[0].reason == "out_of_range"
    assert payload.sets.cited == () and payload.sets.consulted == ()
    assert f"rejected {bad[0].target}: out_of_range" in summary_line(payload)  # shown as such


def test_generated_artifacts_are_labelled(tmp_path):
    corpus = tmp_path / "kb.jsonl"
    rows = [
        {"id": "glacier-source", "title": "Glacier tours", "text": "Glacier tours leave at dawn from the north pier."},
        {"id": "glacier-overview", "title": "Glacier overview", "kind": "generated", "artifact_kind": "category overview",
         "derived_from": ["glacier-source"], "text": "Overview: glacier tours leave at dawn from the north pier."},
        {"id": "glacier-faq", "title": "Glacier questions", "kind": "generated",
         "text": "Questions people ask: when do glacier tours leave from the pier?"},
    ]
    corpus.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    answer = Session.open(corpus).ask("When do glacier tours leave the pier?", mode="excerpts", k=3)
    labels = {c.doc_id: c.excerpt["label"] for c in answer.payload.citations if c.valid}
    docs = {d.doc_id: d.label for d in answer.payload.documents}
    assert docs == {"glacier-source": "Source text", "glacier-overview": "Generated category overview",
                    "glacier-faq": "Generated retrieval aid"}
    assert labels and all(labels[d] == docs[d] for d in labels)
    for s in answer.payload.sources:
        assert s.label == docs[s.doc_id]
        if s.label != "Source text":
            assert f"[{s.label}]" in sources_row(answer.payload)


def test_ask_cli_lists_labelled_excerpts(capsys):
    assert main(["ask", "What does the Business plan cost?", "--mode", "excerpts", "--no-trace"]) == 0
    out = capsys.readouterr().out
    assert "Excerpts:" in out and "· Source text ·" in out and "· cited" in out
    assert re.search(r"^  \[1\] \S+\.md, page -, chunk \d+ · ", out, re.MULTILINE)


# --- issue 33 item 7: an answer of range markers writes a bounded number of citation rows ---------------------


def test_ask_with_an_answer_of_range_markers_writes_a_bounded_number_of_citation_rows(tmp_path):
    """Before: each `[0-50]` became 51 citations, and `ask` wrote 510,000 citation rows for a 50 KB answer. Now a
    marker is at most the issued excerpts plus one rejection, and a turn keeps at most 1,000 occurrences."""
    import duckdb

    from clirun import cli
    from workbench.providers.base import _PROVIDERS, ModelStep, Provider, register_provider
    from workbench.types import ModelCall

    class Markers(Provider):
        name = "scripted-markers"
        label = "scripted markers (test)"

        def complete(self, messages, tools):
            return ModelStep("[0-50]" * (50 * 1024 // 6), (), ModelCall(self.name, "v1", 1.0, 10, 5, "stop"))

    register_provider(Markers.name, Markers)
    try:
        db = tmp_path / "traces.duckdb"
        r = cli("ask", "--provider", Markers.name, "--mode", "excerpts", "-k", "5", "--db", db, "--json",
                "How do I configure SSO?")
    finally:
        _PROVIDERS.unregister(Markers.name)
    assert r.returncode == 0, r.stderr
    payload = json.loads(r.stdout)
    assert len(payload["citations"]) == 1000 and payload["citations_omitted"] == 8533 * 6 - 1000
    assert len(payload["sets"]["cited"]) >= 1 and [x["target"] for x in payload["rejected_citations"]] == ["[0, 6-50]"]
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM citations").fetchone()[0] == 1000
