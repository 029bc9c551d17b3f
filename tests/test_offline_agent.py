"""The offline provider's policy and fault simulation, end to end on the demo corpus."""

from __future__ import annotations

import pytest

from workbench.providers.offline import FAULTS, OfflineProvider, corrupt
from workbench.render.sources import source_chips


def ask(session, question, **kw):
    """The turn's payload; not traced (the answer is made before it is written; the trace is not the point here)."""
    return session.ask(question, log=False, **kw).payload


def test_listing_question_gives_links_and_no_sources_row(demo_session):
    p = ask(demo_session, "What articles do you have?")
    n_docs = len(demo_session.corpus)
    assert [c.name for c in p.tool_calls] == ["list_categories", "list_articles"]
    assert len(p.sets.cited) == n_docs  # every article is a working link …
    assert p.sets.consulted == () and source_chips(p) == []  # … and nothing was read
    assert p.rejected_citations == ()
    assert all(s.url.startswith("https://help.orbitly.example/") for s in p.sources)


def test_listing_of_one_category_uses_browse_section(demo_session):
    p = ask(demo_session, "Which articles do you have about billing?")
    assert p.tool_calls[-1].name == "browse_section"
    assert p.tool_calls[-1].args == {"category": "billing"}
    assert p.sets.consulted == ()
    assert p.sets.cited and all(d.startswith(("billing", "overview-billing")) for d in p.sets.cited)


def test_sso_question_has_one_or_two_consulted_sources(demo_session):
    p = ask(demo_session, "How do I configure SSO?")
    assert [c.name for c in p.tool_calls] == ["search", "fetch_document"]
    assert p.sets.consulted[0] == "sso-saml-setup"
    assert 1 <= len(source_chips(p)) <= 2
    assert "](https://help.orbitly.example/articles/sso-saml-setup)" in p.answer
    assert p.rejected_citations == ()


def test_out_of_scope_question_cites_nothing(demo_session):
    p = ask(demo_session, "Who won the football World Cup in 2010?")
    assert p.sets.cited == () and p.sets.consulted == ()
    assert "could not find" in p.answer


def test_fault_corrupt_id_is_rejected_but_opened_doc_still_consulted(demo_session):
    p = ask(demo_session, "How do I configure SSO?", faults=["corrupt_id"])
    [rej] = [r for r in p.rejected_citations if r.nearest_doc_id == "sso-saml-setup"]
    assert rej.reason == "not_retrieved" and rej.edit_distance == 1
    assert "sso-saml-setup" in p.sets.consulted and "sso-saml-setup" not in p.sets.cited


def test_fault_forget_link_keeps_opened_doc_consulted(demo_session):
    p = ask(demo_session, "How do I configure SSO?", faults=["forget_link"])
    assert "sso-saml-setup" not in p.sets.cited
    src = next(s for s in p.sources if s.doc_id == "sso-saml-setup")
    assert src.consulted is True and src.reason == "opened in full (not linked)"


def test_fault_link_listed_is_cited_but_not_consulted(demo_session):
    p = ask(demo_session, "How do I configure SSO?", faults=["link_listed"])
    listed = [s for s in p.sources if s.exposure == "title"]
    assert len(listed) == 1 and listed[0].cited is True and listed[0].consulted is False
    assert listed[0].doc_id not in {c.doc_id for c in source_chips(p)}


def test_fault_cite_unretrieved_is_rejected(demo_session):
    p = ask(demo_session, "How do I configure SSO?", faults=["cite_unretrieved"])
    assert any(r.target.endswith("-legacy") and r.reason == "not_retrieved" for r in p.rejected_citations)


@pytest.mark.parametrize("fault", ["cite_unretrieved", "corrupt_id"])
def test_excerpt_mode_fault_is_out_of_range(demo_session, fault):
    p = ask(demo_session, "How do I configure SSO?", mode="excerpts", faults=[fault])
    assert p.rejected_citations and all(r.reason == "out_of_range" for r in p.rejected_citations)


def test_excerpt_mode_answer_cites_valid_excerpts(demo_session):
    p = ask(demo_session, "How do I configure SSO?", mode="excerpts")
    markers = [c for c in p.citations if c.n is not None]
    assert markers and all(c.valid for c in markers)
    assert p.sets.consulted and set(p.sets.consulted) <= set(p.sets.retrieved)


def test_unknown_fault_is_refused():
    with pytest.raises(ValueError, match="unknown fault"):
        OfflineProvider(faults=["nope"])
    assert set(FAULTS) == {"corrupt_id", "forget_link", "link_listed", "cite_unretrieved"}


def test_offline_is_labelled_no_llm(demo_session):
    p = ask(demo_session, "How do I configure SSO?")
    assert p.config.provider_label == "offline (no LLM)"


def test_corrupt_changes_exactly_one_character():
    assert corrupt("https://x.example/articles/4412377144338") == "https://x.example/articles/4412377144339"
    assert corrupt("sso-setup") == "sso-setuq"


def _quoted(answer: str) -> str:
    """The passage an extractive answer quotes: between "From [title](url):" and a "See also" line."""
    return answer.split("\n\n")[1]


def test_a_quote_never_stops_at_an_introduction(demo_session):
    """Issue 25: "Within about a minute Orbitly:" ended the answer; the steps it introduces follow."""
    quote = _quoted(ask(demo_session, "Deprovision users and handle leavers").answer)
    assert quote.endswith("Records a `member.deactivated` event with the actor `scim` in the audit log."), quote
    steps = [line for line in quote.splitlines() if line[:2] in ("1.", "2.", "3.", "4.")]
    assert len(steps) == 4 and steps[0].startswith("1. **Deactivates** the member. They can no longer sign in")
    dangling = {}
    for doc in demo_session.corpus.documents:  # every article asked by its title
        answer = ask(demo_session, doc.title).answer
        if answer.startswith("From ") and _quoted(answer).rstrip().endswith(":"):
            dangling[doc.title] = _quoted(answer)[-80:]
    assert dangling == {}


def test_an_introduction_without_its_list_in_reach_is_left_out():
    from workbench.providers.offline import MAX_QUOTE_CHARS, _complete

    units = ["Intro sentence.", "Second sentence.", "Follow these steps:", "1. " + "x" * MAX_QUOTE_CHARS]
    assert _complete(units, 0, 3) == ["Intro sentence.", "Second sentence."]
    assert _complete(units[:3] + ["1. Open it.", "2. Close it.", "After."], 0, 3)[-2:] == ["1. Open it.", "2. Close it."]
