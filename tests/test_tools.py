"""Tools declare their exposure and turn bad arguments into errors the model sees."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def toolbox(demo_session):
    return demo_session.toolbox


def test_every_tool_declares_an_exposure(toolbox):
    expected = {"search": "snippet", "fetch_document": "full", "list_categories": "title",
                "list_articles": "title", "browse_section": "title"}
    assert {n: t.exposure for n, t in toolbox.tools.items()} == expected
    for spec in toolbox.specs():
        assert spec["parameters"]["type"] == "object" and spec["description"]


def test_search_returns_one_snippet_per_document(toolbox):
    out = toolbox.call("search", {"query": "SAML single sign-on", "k": 4})
    ids = [r.doc_id for r in out.call.results]
    assert len(ids) == len(set(ids)) == 4
    assert [r.rank for r in out.call.results] == [1, 2, 3, 4]
    assert all(r.snippet and r.chunk_index is not None and r.score > 0 for r in out.call.results)
    assert out.call.latency_ms is not None and out.call.error is None


def test_fetch_document_by_id_and_url(toolbox):
    a = toolbox.call("fetch_document", {"doc_id": "sso-saml-setup"})
    b = toolbox.call("fetch_document", {"doc_id": "https://help.orbitly.example/articles/sso-saml-setup/"})
    assert a.content["text"] == b.content["text"] and a.call.exposure == "full"


@pytest.mark.parametrize("name,args,needle", [
    ("fetch_document", {"doc_id": "sso-saml-setuq"}, "no document with doc_id"),
    ("fetch_document", {}, "needs the argument 'doc_id'"),
    ("browse_section", {"category": "astrology"}, "unknown category"),
    ("list_articles", {"category": "nope"}, "unknown category"),
    ("search", {"query": "x", "k": "many"}, "k must be an integer"),
    ("search", {"query": "x", "bogus": 1}, "unexpected argument"),
    ("teleport", {}, "unknown tool"),
    ("search", "not-an-object", "must be a JSON object"),
])
def test_bad_calls_return_tool_errors(toolbox, name, args, needle):
    out = toolbox.call(name, args)
    assert needle in out.call.error and out.content == {"error": out.call.error}
    assert out.call.results == ()


def test_listing_tools_expose_titles_only(toolbox):
    cats = toolbox.call("list_categories", {})
    assert cats.call.results == () and len(cats.content["categories"]) >= 6
    listed = toolbox.call("list_articles", {"category": "billing"})
    assert listed.call.results and all("text" not in a for a in listed.content["articles"])
    browsed = toolbox.call("browse_section", {"category": "Billing"})
    assert [r.doc_id for r in browsed.call.results] == [r.doc_id for r in listed.call.results]


def test_the_runs_k_is_what_search_returns_unless_the_model_asks_for_another_number(toolbox, demo_session):
    """The sidebar's and `-k`'s "results per search" reach agent mode: the search tool declares the turn's k as its
    default, returns that many when the model names no number, still honours a number the model names, and the
    offline agent asks for the declared default by name (so the recorded call says how many)."""
    for k in (2, 8):
        box = toolbox.searching(k)
        spec = next(s for s in box.specs() if s["name"] == "search")
        assert spec["parameters"]["properties"]["k"]["default"] == k
        assert len(box.call("search", {"query": "SSO"}).call.results) == k
        assert len(box.call("search", {"query": "SSO", "k": 3}).call.results) == 3
        assert toolbox.search_k == 5, "the toolbox it was made from is untouched"
        answer = demo_session.ask("How do I configure SSO?", k=k)
        search = next(c for c in answer.record.tool_calls if c.name == "search")
        assert dict(search.args)["k"] == k and len(search.results) == k
        assert answer.record.config["k"] == k
    # a model asking for more gets at most 20, or the run's k when that is more (23 documents match "SSO")
    assert len(toolbox.call("search", {"query": "SSO", "k": 30}).call.results) == 20
    assert len(toolbox.searching(40).call("search", {"query": "SSO", "k": 30}).call.results) == 23
