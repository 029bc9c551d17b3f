"""Withholding documents (docs/design.md §9): a view over the same corpus and index, never a copy.

A withheld document never appears in any tool result, answers "not found" exactly like an id that does
not exist, is left out of listings and category counts, and excerpt mode is rebuilt without it; the
original toolbox, its index and the index cache are untouched.
"""

from __future__ import annotations

import json
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workbench.agent import build_excerpts
from workbench.corpus import Corpus
from workbench.retrieval.bm25 import bm25_from_chunks
from workbench.retrieval.chunking import chunk_documents
from workbench.retrieval.withhold import Withholding
from workbench.tools import Toolbox

QUERIES = ["How do I configure SSO?", "SAML single sign-on Okta", "invoice refund", "reset password 2fa",
           "webhook delivery retries", "export workspace data", "slack integration", "api rate limits", "zzzz"]


@pytest.fixture(scope="module")
def toolbox(demo_session):
    return demo_session.toolbox


@pytest.fixture(scope="module")
def doc_ids(toolbox):
    return [d.doc_id for d in toolbox.corpus.documents]


def every_tool_call(box: Toolbox, corpus_docs, categories) -> list:
    """One call of every tool, over every query, document (by id and by URL) and category."""
    outs = [box.call("list_categories", {}), box.call("list_articles", {})]
    outs += [box.call("search", {"query": q, "k": 5}) for q in QUERIES]
    for d in corpus_docs:
        outs.append(box.call("fetch_document", {"doc_id": d.doc_id}))
        if d.url:
            outs.append(box.call("fetch_document", {"doc_id": d.url}))
    for c in categories:
        outs += [box.call("list_articles", {"category": c}), box.call("browse_section", {"category": c})]
    return outs


def mentioned(content) -> set[str]:
    """Every document id a tool's content names in a structured field (never free text)."""
    ids = set()
    for key in ("results", "articles"):
        ids |= {item["doc_id"] for item in content.get(key, [])}
    if "doc_id" in content:
        ids.add(content["doc_id"])
    ids |= set(content.get("derived_from", []))
    return ids


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_withheld_document_never_appears_in_any_tool_result(toolbox, doc_ids, data):
    withheld = set(data.draw(st.lists(st.sampled_from(doc_ids), min_size=1, max_size=6, unique=True)))
    view = toolbox.withholding(withheld)
    corpus = toolbox.corpus
    for out in every_tool_call(view, corpus.documents, list(corpus.categories())):
        assert not {r.doc_id for r in out.call.results} & withheld, out.call
        assert not mentioned(out.content) & withheld, out.content
    for question in QUERIES:
        assert not {e.doc_id for e in build_excerpts(view, question, 5)} & withheld
    # categories and their counts are those of the remaining documents
    remaining = [d for d in corpus.documents if d.doc_id not in withheld]
    counts = {c["category"]: c["n_articles"] for c in view.call("list_categories", {}).content["categories"]}
    assert counts == {c: sum(d.category == c for d in remaining) for c in {d.category for d in remaining}}


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_withheld_answers_not_found_exactly_like_an_id_that_does_not_exist(toolbox, doc_ids, data):
    doc = toolbox.corpus.get(data.draw(st.sampled_from(doc_ids)))
    view = toolbox.withholding([doc.doc_id])
    for target in filter(None, (doc.doc_id, doc.url)):
        withheld = view.call("fetch_document", {"doc_id": target})
        nonexistent = toolbox.call("fetch_document", {"doc_id": target + "-nonexistent"})
        assert withheld.call.error == nonexistent.call.error.replace(target + "-nonexistent", target)
        assert withheld.content == {"error": withheld.call.error} and withheld.call.results == ()


def test_search_ranks_the_rest_as_if_the_withheld_were_not_there(toolbox, doc_ids):
    base = toolbox.retriever
    for withheld in (["sso-saml-setup"], ["sso-saml-setup", "sso-okta", "sso-azure-ad"], doc_ids[:20]):
        view = Withholding(base, withheld)
        for q in QUERIES:
            for k in (1, 5, 20):
                deep = [h for h in base.retrieve(q, len(base.chunks)).hits if h.chunk.doc_id not in withheld]
                got = view.retrieve(q, k).hits
                assert [(h.chunk, h.score) for h in got] == [(h.chunk, h.score) for h in deep[:k]], (withheld, q, k)
                assert [h.rank for h in got] == list(range(1, len(got) + 1))


def test_listings_and_fetches_equal_those_of_a_corpus_without_them(toolbox):
    """Everything but search scores is exactly what a corpus that never held them would give (search ranks
    the same documents, with BM25 statistics from the whole corpus: the one stated approximation), except
    that `derived_from` of a generated overview no longer names them either."""
    withheld = {"sso-saml-setup", "billing-refunds", "overview-billing"}
    corpus = toolbox.corpus
    smaller = Corpus(corpus.corpus_id, corpus.path, [d for d in corpus.documents if d.doc_id not in withheld])
    chunks = chunk_documents(smaller.documents)
    rebuilt = Toolbox(smaller, bm25_from_chunks(chunks, {d.doc_id: d.title for d in smaller.documents}))
    view = toolbox.withholding(withheld)
    for a, b in zip(every_tool_call(view, corpus.documents, list(corpus.categories())),
                    every_tool_call(rebuilt, corpus.documents, list(corpus.categories()))):
        if a.call.name == "search":
            assert {r.doc_id for r in a.call.results} <= {d.doc_id for d in smaller.documents}
            continue
        if "derived_from" in b.content:
            b.content["derived_from"] = [d for d in b.content["derived_from"] if d not in withheld]
        assert (a.call.results, a.content, a.call.error) == (b.call.results, b.content, b.call.error)


def test_a_view_of_a_view_withholds_both_and_the_empty_set_is_the_toolbox_itself(toolbox):
    assert toolbox.withholding([]) is toolbox
    both = toolbox.withholding(["sso-saml-setup"]).withholding(["sso-okta"])
    assert both.withheld == {"sso-saml-setup", "sso-okta"}
    found = {r.doc_id for q in QUERIES for r in both.call("search", {"query": q, "k": 20}).call.results}
    assert found and not found & both.withheld
    assert both.corpus.content_hash == toolbox.corpus.content_hash  # the same knowledge base, recorded as such


def _snapshot(box: Toolbox) -> str:
    outs = every_tool_call(box, box.corpus.documents, list(box.corpus.categories()))
    return json.dumps([[o.call.name, o.content, [r.__dict__ for r in o.call.results]] for o in outs], sort_keys=True)


def _files(root) -> dict[str, tuple[int, int]]:
    return {os.path.join(d, f): (os.stat(os.path.join(d, f)).st_size, os.stat(os.path.join(d, f)).st_mtime_ns)
            for d, _, files in os.walk(root) for f in files}


def test_verification_leaves_the_corpus_index_and_caches_untouched(demo_session, _workbench_home):
    from workbench.providers import get_provider
    from workbench.payload import Payload
    from workbench.verify import verify

    toolbox = demo_session.toolbox
    before, files, chunks = _snapshot(toolbox), _files(_workbench_home / "indexes"), list(toolbox.retriever.chunks)
    for question in ("How do I configure SSO?", "How do I get a refund?"):
        answer = demo_session.ask(question)
        for mode in ("agent", "excerpts"):
            if mode == "excerpts":
                answer = demo_session.ask(question, mode="excerpts")
            checked = verify(answer.record, toolbox, get_provider("offline"), payload=Payload.from_json(answer.payload))
            assert checked.extra_turns > 1
    assert _snapshot(toolbox) == before
    assert toolbox.retriever.chunks == chunks and toolbox.withheld == frozenset()
    assert _files(_workbench_home / "indexes") == files, "no cache file was written, changed or removed"
