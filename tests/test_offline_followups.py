"""The offline agent in a conversation (issue 22 item 3) and verification of a follow-up (item 7), on the demo corpus.

Each rule of `workbench/providers/offline.py`'s docstring has a test here; the agent reads the messages that
`agent.history_messages` builds, so these go through `Session.ask(history=…)` end to end.
"""

from __future__ import annotations

import json
import uuid

import pytest

from workbench.payload import Payload
from workbench.agent import run_turn
from workbench.context_policy import history_for
from workbench.providers import offline
from workbench.providers.offline import OfflineProvider
from workbench.questions import read_dataset
from workbench.types import ContextPolicy, HistoryTurn, TurnRecord
from workbench.verify import verify as verify_turn

MOBILE = "https://help.orbitly.example/articles/mobile-apps"


def converse(session, *questions, **kw):
    """Ask `questions` as one new conversation (an id of its own: the trace store places a turn after the
    turns its conversation already has); the answers, oldest first."""
    answers, cid = [], f"c-test-{uuid.uuid4().hex[:8]}"
    for q in questions:
        answers.append(session.ask(q, history=[a.record for a in answers], conversation_id=cid, **kw))
    return answers


def searched(answer) -> list[str]:
    return [c.args["query"] for c in answer.record.tool_calls if c.name == "search"]


# --- the current question, not the first -----------------------------------------------------------------------

def test_a_follow_up_answers_the_current_question_not_the_first(demo_session):
    # Before: `_read` took the FIRST user message (the earlier question) and the carried tool results as this
    # turn's, so the second turn called no tool and answered about SSO again.
    first, second = converse(demo_session, "How do I configure SSO?",
                             "I forgot my password and the reset link has expired. What should I do?")
    assert searched(second) == ["I forgot my password and the reset link has expired. What should I do?"]
    assert [c.name for c in second.record.tool_calls] == ["search", "fetch_document"]
    assert second.payload.sets.consulted[0] == "password-reset"
    assert "sso-saml-setup" not in second.payload.sets.consulted


# --- follow-ups searched with the terms of the question they lean on -------------------------------------------

@pytest.mark.parametrize("question", ["And with Okta?", "what about on mobile?", "How about Entra ID?",
                                      "What if I lose my phone?", "Also for guests?", "Why?", "On mobile?",
                                      "How long does that take?", "Can I download them as PDF?"])
def test_what_counts_as_a_follow_up(question):
    assert offline.follows_up(question)


@pytest.mark.parametrize("question", ["How do I reset my password?", "Which plans include SAML single sign-on?",
                                      "Is there a way to export every task of a project to Excel?",
                                      "Android app crashes when opening docs"])
def test_a_question_that_stands_on_its_own_is_no_follow_up(question):
    assert not offline.follows_up(question)


def test_the_search_query_of_a_chain_of_follow_ups_keeps_the_topic():
    assert offline.search_query("And with Okta?", ["How do I configure SSO?"]) == \
        "And with Okta? How do I configure SSO?"
    assert offline.search_query("How long does that take?", ["How do I configure SSO?", "And with Okta?"]) == \
        "How long does that take? And with Okta? How do I configure SSO?"
    # a question that stands alone starts a new topic; a listing is no topic to lean on
    assert offline.search_query("Why?", ["How do I configure SSO?", "How do I reset my password?"]) == \
        "Why? How do I reset my password?"
    assert offline.search_query("And billing?", ["What articles do you have?"]) == "And billing?"
    assert offline.search_query("And with Okta?", []) == "And with Okta?"
    # a chain of long follow-ups stays within the bound of one question (docs/security.md)
    from workbench.config import MAX_QUESTION_CHARS

    long_ones = [f"And {'very ' * 1500}long question {i}?" for i in range(10)]
    query = offline.search_query(long_ones[-1], ["How do I configure SSO?", *long_ones[:-1]])
    assert len(query) == MAX_QUESTION_CHARS and query.startswith(long_ones[-1])


def test_and_with_okta_is_searched_with_the_sso_question(demo_session):
    _, second = converse(demo_session, "How do I configure SSO?", "And with Okta?")
    assert searched(second) == ["And with Okta? How do I configure SSO?"]
    assert second.payload.sets.consulted == ("sso-okta",)  # the opened SSO article is not "seen also" again
    assert second.record.position == 2 and second.record.conversation_id.startswith("c-test-")


def test_a_follow_up_opens_the_hit_about_its_own_words(demo_session):
    # The combined query ranks the rate-limit article first; the follow-up is about paging.
    _, second = converse(demo_session, "The API keeps answering with status 429. How many calls per minute am I "
                                       "allowed to make?", "And how do I page through long lists of results?")
    assert second.record.tool_calls[1].args == {"doc_id": "api-pagination"}
    assert second.payload.sets.consulted == ("api-pagination",)


def test_a_follow_up_opens_a_new_document_before_one_already_read(demo_session):
    # The SSO article (opened in turn 1) and the Entra ID article both cover "Entra ID"; the user has the first.
    *_, third = converse(demo_session, "How do I configure SSO?", "And with Okta?", "What about Entra ID?")
    assert third.record.tool_calls[1].args == {"doc_id": "sso-azure-ad"}
    assert "sso-saml-setup" not in third.payload.sets.cited  # nor is it "seen also" again


def test_a_follow_up_whose_previous_turn_was_dropped_searches_alone(demo_session):
    first = demo_session.ask("How do I configure SSO?")
    # the history as the policy left it: the SSO turn dropped, so "And with Okta?" leans on nothing
    record = run_turn("And with Okta?", OfflineProvider(), demo_session.toolbox,
                      history=(HistoryTurn(record=TurnRecord(question=first.record.question, answer=first.record.answer),
                                           context="dropped", position=1),),
                      conversation_id="c", position=2)
    assert [c.args for c in record.tool_calls][0] == {"query": "And with Okta?", "k": 5}


# --- answering from the document just opened --------------------------------------------------------------------

def test_a_follow_up_about_the_opened_document_is_answered_from_it_without_a_tool_call(demo_session):
    first, second = converse(demo_session, "Can I use Orbitly on my iPhone?", "Does it work offline?")
    assert [c.args for c in first.record.tool_calls][1] == {"doc_id": "mobile-apps"}
    assert second.record.tool_calls == ()
    assert f"]({MOBILE})" in second.record.answer
    assert "available offline" in second.record.answer  # quoted from the carried article's offline section


def test_the_carried_document_must_hold_every_word_of_the_question(demo_session):
    # "that" refers back, but the Okta article says nothing about how long: search, with the topic's terms
    *_, third = converse(demo_session, "How do I configure SSO?", "And with Okta?", "How long does that take?")
    assert searched(third) == ["How long does that take? And with Okta? How do I configure SSO?"]


def test_no_carried_answer_when_the_opened_document_is_no_longer_in_context(demo_session):
    first = demo_session.ask("Can I use Orbitly on my iPhone?")
    second = demo_session.ask("Does it work offline?", history=[first.record], conversation_id="c",
                              context=ContextPolicy(turns=0))  # question and answer only: no tool results
    assert second.record.history[0].context == "answer"
    assert [c.name for c in second.record.tool_calls] == ["search", "fetch_document"]


def test_no_carried_answer_when_the_carried_fetch_is_not_found(demo_session):
    first = demo_session.ask("Can I use Orbitly on my iPhone?")
    history = history_for([first.record], ContextPolicy())
    record = run_turn("Does it work offline?", OfflineProvider(), demo_session.toolbox.withholding(["mobile-apps"]),
                      history=history, conversation_id="c", position=2)
    assert record.tool_calls and record.tool_calls[0].name == "search"
    assert MOBILE not in record.answer


# --- excerpt mode ----------------------------------------------------------------------------------------------

def test_excerpt_mode_follow_up_reads_excerpts_numbered_after_the_first_turn(demo_session):
    # Before: the agent only read excerpts numbered from 1, so a follow-up (6, 7, …) found none.
    first, second = converse(demo_session, "How do I configure SSO?", "And with Okta?", mode="excerpts")
    assert min(e.n for e in second.record.excerpts) == max(e.n for e in first.record.excerpts) + 1
    assert "do not contain enough evidence" not in second.record.answer
    cited = [c.n for c in second.payload.citations if c.n is not None]
    assert cited and all(n in {e.n for e in second.record.excerpts} for n in cited)


# --- the follow-up question set -----------------------------------------------------------------------------------

def test_the_follow_up_question_set_reads_as_conversations(demo_session):
    questions = read_dataset("data/demo_followups.jsonl").questions
    by_conversation: dict[str, list] = {}
    for q in questions:
        by_conversation.setdefault(q.conversation, []).append(q)
    assert all(q.conversation for q in questions) and len(by_conversation) >= 10
    assert all(len(turns) >= 2 for turns in by_conversation.values())
    assert all(q.expected and all(d in demo_session.corpus for d in q.expected) for q in questions)
    assert "conversation" not in questions[0].extra


def test_a_bad_conversation_id_is_a_clear_error(tmp_path):
    from workbench.errors import CorpusError

    path = tmp_path / "q.jsonl"
    path.write_text(json.dumps({"question": "Why?", "conversation": 7}) + "\n", encoding="utf-8")
    with pytest.raises(CorpusError, match='"conversation".* must be non-empty'):
        read_dataset(path)


# --- verification of a follow-up (§11.6) --------------------------------------------------------------------------

class Recording(OfflineProvider):
    """The offline agent, keeping the messages of every model call."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.seen: list[list[dict]] = []

    def complete(self, messages, tools):
        self.seen.append([dict(m) for m in messages])
        return super().complete(messages, tools)


def _carried_fetch(messages) -> dict:
    """The carried (history) fetch_document result among `messages` (before the current question)."""
    last_user = max(i for i, m in enumerate(messages) if m["role"] == "user")
    calls = {tc["id"]: tc["name"] for m in messages[:last_user] for tc in m.get("tool_calls") or []}
    [msg] = [m for m in messages[:last_user] if m["role"] == "tool" and calls[m["tool_call_id"]] == "fetch_document"]
    return json.loads(msg["content"])


def test_verification_re_runs_send_the_history_with_the_withheld_document_not_found(demo_session):
    # Before: re-runs were asked with no history at all, so a follow-up's control answered "And with Okta?" alone.
    _, second = converse(demo_session, "How do I configure SSO?", "And with Okta?")
    provider = Recording()
    checked = verify_turn(second.record, demo_session.toolbox, provider, payload=second.payload, budget=8)
    firsts = [m for m in provider.seen if m[-1]["role"] == "user"]  # each re-run's first model call
    assert len(firsts) == checked.extra_turns
    for messages in firsts:
        assert [m["content"] for m in messages if m["role"] == "user"] == ["How do I configure SSO?", "And with Okta?"]
    runs = dict(zip([a.doc_id for a in checked.ablations if a.reran], firsts))
    assert "sso-saml-setup" in runs  # the carried article is a candidate (retrieved again by this turn's search)
    assert _carried_fetch(runs[None])["doc_id"] == "sso-saml-setup"  # the control carries it …
    # … its ablation carries what a fetch of an unknown id gets
    assert _carried_fetch(runs["sso-saml-setup"])["error"].startswith("no document with doc_id 'sso-saml-setup'")
    assert all("error" not in _carried_fetch(m) for d, m in runs.items() if d != "sso-saml-setup")
    assert checked.control_stable
    # earlier answers stay as they were, even with the document withheld (the method's stated limit)
    assert all(m[-2] == {"role": "assistant", "content": second.record.history[0].record.answer} for m in firsts)


ROTATE = "How do I swap an API token for a new secret without breaking the integration that uses it?"


def test_a_carried_document_the_follow_up_quotes_is_load_bearing(demo_session):
    first, second = converse(demo_session, ROTATE, "Does that need an admin?")
    assert [c.args for c in first.record.tool_calls][1] == {"doc_id": "api-keys-rotate"}
    assert second.record.tool_calls == ()  # answered from the carried article
    checked = demo_session.verify(second)
    assert checked.verification.control_stable
    assert checked.verification.verdicts["api-keys-rotate"] == "load_bearing"


def test_a_carried_document_the_follow_up_only_links_is_decorative(demo_session):
    _, second = converse(demo_session, ROTATE, "Does that need an admin?")
    assert "See also [Create an API key](https://help.orbitly.example/articles/api-keys-create)" in second.record.answer
    checked = demo_session.verify(second)
    assert checked.verification.verdicts["api-keys-create"] == "decorative"


def test_cited_carried_documents_are_candidates():
    """The agreed §11 payload shape: a carried document has `carried_from`; cited, it is a candidate like this turn's
    own (consulted first, in sources order), and a carried one not cited is a hidden-influence candidate."""
    from workbench.verify import candidates

    payload = {
        "answer": "",
        "tool_calls": [{"name": "search", "exposure": "snippet", "doc_ids": ["b", "c"]}],
        "documents": [
            {"doc_id": "a", "cited": True, "consulted": True, "exposure": "full", "carried_from": "t-1",
             "reason": "read in turn 1, cited here"},
            {"doc_id": "b", "cited": True, "consulted": True, "exposure": "snippet", "reason": "snippet cited"},
            {"doc_id": "c", "cited": False, "consulted": False, "exposure": "snippet", "reason": "snippet not cited"},
            {"doc_id": "d", "cited": False, "consulted": False, "exposure": "full", "carried_from": "t-1",
             "reason": "read in turn 1, not cited here"},
        ],
        "sources": [{"doc_id": "a", "carried_from": "t-1"}, {"doc_id": "b"}],
    }
    assert [(c.doc_id, c.used) for c in candidates(Payload.from_json(payload))] == [("a", True), ("b", True), ("d", False), ("c", False)]


def test_an_excerpt_mode_follow_up_re_run_leaves_out_the_withheld_documents_carried_excerpts(demo_session):
    # Before: carried excerpts were sent again as stored, so a document withheld from the re-run still reached the
    # model through the earlier turn's excerpts.
    first, second = converse(demo_session, "How do I configure SSO?", "And with Okta?", mode="excerpts")
    provider = Recording()
    checked = verify_turn(second.record, demo_session.toolbox, provider, payload=second.payload, budget=8)
    assert len(provider.seen) == checked.extra_turns  # one call per excerpt-mode re-run
    runs = dict(zip([a.doc_id for a in checked.ablations if a.reran], provider.seen))
    carried_docs = {e.doc_id for e in first.record.excerpts}
    withheld_carried = [d for d in runs if d in carried_docs]
    assert withheld_carried  # some candidate was among the first turn's excerpts

    def carried_message(messages):
        return next(m["content"] for m in messages if m["role"] == "user")

    def header(e):
        return f"[{e.n}] {e.file_name}, page "

    assert all(header(e) in carried_message(runs[None]) for e in first.record.excerpts)  # the control has them all
    for doc_id in withheld_carried:
        shown = carried_message(runs[doc_id])
        assert not any(header(e) in shown for e in first.record.excerpts if e.doc_id == doc_id)
        assert all(header(e) in shown for e in first.record.excerpts if e.doc_id != doc_id)  # numbers kept


# --- a listing after a reading turn (issue 33 item 1, docs/design.md §11 rule 3e) ----------------------------------

SSO_Q, LISTING_Q = "How do I configure SSO?", "What articles do you have?"


def test_what_articles_after_an_sso_answer_has_no_sources_row_on_the_command_line(tmp_path):
    """The exact two-question conversation through `ask --conversation` (the CLI in-process, a real trace database):
    the listing links every article, among them the ones turn 1 read, and still consults nothing, as after /new."""
    from clirun import cli
    from workbench.render.sources import sources_row

    db = tmp_path / "traces.duckdb"

    def ask(question, conversation):
        r = cli("ask", "--db", db, "--conversation", conversation, "--json", question)
        assert r.returncode == 0, r.stderr
        return Payload.from_json(json.loads(r.stdout))

    first = ask(SSO_Q, "c-listing")
    assert first.sets.consulted, "turn 1 read the SSO articles"
    listing = ask(LISTING_Q, "c-listing")
    assert listing.position == 2 and set(first.sets.consulted) <= set(listing.sets.cited), "it links them"
    assert listing.sets.consulted == () and sources_row(listing).startswith("Sources: none")
    assert all(s.consulted is False for s in listing.sources)
    read = {d.doc_id: d for d in listing.documents if d.doc_id in first.sets.retrieved}
    assert read and all(d.reason.startswith("listed only here, a listing link") for d in read.values())
    alone = ask(LISTING_Q, "c-fresh")  # the listing on its own (after /new): the same sets
    assert (alone.sets.cited, alone.sets.consulted) == (listing.sets.cited, ())


def test_provenance_file_of_the_stored_listing_turn_consults_nothing(demo_session, tmp_path):
    from clirun import cli

    first, listing = converse(demo_session, SSO_Q, LISTING_Q)
    assert listing.record.history and listing.payload.sets.consulted == ()
    path = tmp_path / "turn.json"
    path.write_text(json.dumps(listing.record.to_dict()), encoding="utf-8")
    r = cli("provenance", path)
    assert r.returncode == 0, r.stderr
    payload = json.loads(r.stdout)
    assert payload["sets"]["consulted"] == [] and payload["position"] == 2
    assert set(first.payload.sets.consulted) <= set(payload["sets"]["cited"])
    assert not [s for s in payload["sources"] if s.get("consulted") is not False], "no chip"
