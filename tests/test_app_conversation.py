"""The app as a conversation (issue 22 item 6, docs/design.md §11) under AppTest: follow-ups carry the earlier
turns, "New conversation", a conversation reopened from the trace database, carried chips, `not_in_context`
rejections, and Compare running a whole conversation per column. Real library, real trace database; the
provider is `tests/scripted_conversation.py`, whose carried documents are known in advance."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import duckdb
import pytest
from streamlit.testing.v1 import AppTest

from apptest import APP, ask, texts, unescape
from workbench.payload import Payload

ROOT = Path(__file__).resolve().parent.parent
QUESTIONS = ("How do I configure SSO with Okta?", "And with SAML?", "How long does that take?")


@pytest.fixture
def followup():
    import scripted_conversation

    scripted_conversation.register()
    yield scripted_conversation
    scripted_conversation.unregister()


@pytest.fixture
def chat(followup, app):
    app.run()  # the provider registered after the first render
    app.sidebar.selectbox(key="cfg_provider").set_value(followup.FollowUp.name).run()
    assert not app.exception, app.exception
    return app


def conversation(at: AppTest, questions=QUESTIONS) -> AppTest:
    for q in questions:
        at = ask(at, q)
    return at


def with_carried(turn, carried: dict[str, object]) -> None:
    """The agreed §11 payload keys (`carried_from`, `carried_position`) on `turn`'s carried documents, as the
    provenance core gives them; a no-op once it does (issue 22 item 1). Until then this stands in for it:
    each document of `carried` (doc_id → the earlier app turn whose tool results held it) becomes cited and
    consulted with its `carried_from`, and its `not_retrieved` rejection goes."""
    payload = turn.payload.to_json()  # edited as the JSON a server would send, then read back
    if any("carried_from" in s for s in payload.get("sources", [])):
        return
    doc = turn.session.corpus.get
    sets = {k: list(v) for k, v in payload["sets"].items()}
    sources, documents = list(payload["sources"]), list(payload.get("documents", []))
    for doc_id, earlier in carried.items():
        d = doc(doc_id)
        entry = {"doc_id": doc_id, "title": d.title, "url": d.url, "cited": True, "consulted": True,
                 "exposure": "full", "reason": "cited; opened in full", "carried_from": earlier.turn_id,
                 "carried_position": earlier.answer.record.position or 1}
        sources.append(entry)
        documents.append(entry)
        for name in ("retrieved", "cited", "consulted"):
            sets[name].append(doc_id)
    rejected = [r for r in payload["rejected_citations"] if r["target"] not in {doc(d).url for d in carried}]
    turn.answer = replace(turn.answer, payload=Payload.from_json({
        **payload, "sets": sets, "sources": sources, "documents": documents, "rejected_citations": rejected}))


def sources_rows(at: AppTest) -> list[str]:
    return [unescape(m.value) for m in at.markdown if "**Sources**" in m.value]


# --- follow-ups carry the conversation ----------------------------------------------------------------


def test_follow_ups_send_the_earlier_turns_as_history_in_one_conversation(chat):
    at = conversation(chat)
    turns = at.session_state["turns"]
    assert [t.question for t in turns] == list(QUESTIONS)
    records = [t.answer.record for t in turns]
    assert all(r.status == "ok" for r in records), [r.error for r in records]
    assert [h.record.turn_id for h in records[1].history] == [records[0].turn_id]
    assert [h.record.turn_id for h in records[2].history] == [records[0].turn_id, records[1].turn_id]
    assert [h.context for h in records[2].history] == ["full", "full"], "the default policy keeps two turns' results"
    cid = at.session_state["conversation_id"]
    assert {r.conversation_id for r in records} == {cid}
    assert [r.position for r in records] == [1, 2, 3]
    assert records[2].tool_calls == (), "turn 3 answered from the carried tool results"
    assert at.query_params["conversation"] == cid, "the address names the open conversation"


def test_new_conversation_starts_over_without_history(chat):
    at = conversation(chat, QUESTIONS[:2])
    old = at.session_state["conversation_id"]
    at.button(key="new-conversation").click().run()
    assert not at.exception, at.exception
    assert at.session_state["turns"] == []
    assert at.session_state["conversation_id"] != old
    assert "conversation" not in at.query_params
    assert "**Sources**" not in texts(at), "the old turns are gone from the chat"
    at = ask(at, QUESTIONS[1])
    record = at.session_state["turns"][0].answer.record
    assert record.history == () and record.position == 1
    assert record.conversation_id == at.session_state["conversation_id"] != old


def test_new_conversation_is_offered_once_there_is_a_turn(chat):
    assert chat.button(key="new-conversation").disabled
    at = ask(chat, QUESTIONS[0])
    assert not at.button(key="new-conversation").disabled


def test_a_question_on_another_corpus_starts_a_new_conversation(chat, tmp_path, monkeypatch):
    at = ask(chat, QUESTIONS[0])
    old = at.session_state["conversation_id"]
    corpus = tmp_path / "widgets"
    corpus.mkdir()
    (corpus / "a.md").write_text("---\nid: a\ntitle: Calibrate the widget\n---\nPress calibrate twice.\n")
    monkeypatch.setenv("WORKBENCH_ALLOWED_ROOTS", str(tmp_path))
    at.sidebar.radio(key="cfg_corpus_source").set_value("Folder or JSONL path").run()
    at.sidebar.text_input(key="cfg_corpus_path").input(str(corpus)).run()
    at = ask(at, "How do I calibrate the widget?")
    turns = at.session_state["turns"]
    assert len(turns) == 1 and turns[0].answer.record.history == ()
    assert turns[0].answer.record.conversation_id == at.session_state["conversation_id"] != old


# --- a conversation reopened from the trace database ------------------------------------------------------


def reload(cid: str, browser: AppTest | None = None) -> AppTest:
    """A fresh browser session opening `?conversation=cid`: a reload of `browser` (the same browser, so the same
    viewer: without sign-in a browser is known by its token, `identity.browser_token`), else another browser
    (a shared link)."""
    at = AppTest.from_file(APP, default_timeout=60)
    if browser is not None:
        at.session_state["viewer_token"] = browser.session_state["viewer_token"]
    at.query_params["conversation"] = cid
    at.run()
    assert not at.exception, at.exception
    return at


def test_a_reload_reopens_the_conversation_and_a_follow_up_continues_it(chat, followup):
    at = conversation(chat)
    cid = at.session_state["conversation_id"]
    asked = at.session_state["turns"]
    again = reload(cid, at)
    turns = again.session_state["turns"]
    assert again.session_state["conversation_id"] == cid
    assert [t.turn_id for t in turns] == [t.turn_id for t in asked]
    assert [t.question for t in turns] == list(QUESTIONS)
    assert [t.payload.answer for t in turns] == [t.payload.answer for t in asked]
    for old, new in zip(asked, turns):  # each turn shown with the history it was asked with
        assert [(h.record.turn_id, h.context) for h in new.answer.record.history] == \
            [(h.record.turn_id, h.context) for h in old.answer.record.history]
        for key in ("sets", "rejected_citations", "sources"):  # so provenance computed again gives the same payload
            assert getattr(new.payload, key) == getattr(old.payload, key), key
    assert turns[0].config.provider == followup.FollowUp.name, "the provider it ran with, not the sidebar's"
    assert sources_rows(again) == sources_rows(at), "the same chips (carried ones: read in turn k) after the reload"
    assert [b.label for b in again.button] == [b.label for b in at.button], \
        "Verify sources on offer as before the reload (tests/test_app_reopen.py)"
    again.sidebar.selectbox(key="cfg_provider").set_value(followup.FollowUp.name).run()
    again = ask(again, "And on mobile?")
    record = again.session_state["turns"][-1].answer.record
    assert record.status == "ok" and record.conversation_id == cid and record.position == 4
    assert [h.record.turn_id for h in record.history] == [t.turn_id for t in asked]


def test_an_unknown_conversation_in_the_address_says_so_and_starts_a_new_one(app):
    at = reload("c-nosuchconversation")
    assert any("There is no conversation c\\-nosuchconversation" in w.value for w in at.warning), \
        [w.value for w in at.warning]
    assert at.session_state["turns"] == [] and at.session_state["conversation_id"] != "c-nosuchconversation"
    assert "conversation" not in at.query_params
    at = reload("x" * 201)
    assert any("1 to 200 characters" in w.value for w in at.warning)


def when(at: AppTest, i: int) -> str:
    """When the last turn of the picker's `i`-th conversation was asked, from the store, as the picker says it
    (`short_time`: "today 14:05", its formats tested below)."""
    from datetime import datetime

    from workbench.trace.conversation_reader import list_conversations
    from workbench.ui.open_conversation import short_time

    rows = list_conversations(at.session_state["turns"][0].session.tracer.path)
    return short_time(rows[i]["last_at"], datetime.now().astimezone())


def test_a_past_conversation_is_reopened_from_the_picker(chat, followup):
    at = conversation(chat, QUESTIONS[:2])
    first = at.session_state["conversation_id"]
    ids = [t.turn_id for t in at.session_state["turns"]]
    at.button(key="new-conversation").click().run()
    at = ask(at, "What about SCIM provisioning?")
    picker = at.selectbox(key="past-conversation")
    provider = f"{followup.FollowUp.name} · corpus {at.session_state['turns'][0].session.corpus.corpus_id}"
    assert picker.options == [f"What about SCIM provisioning? · 1 turn · {when(at, 0)} · {provider}",
                              f"{QUESTIONS[0]} · 2 turns · {when(at, 1)} · {provider}"], "the latest first"
    assert when(at, 0).startswith("today ")
    picker.set_value(first).run()
    at.button(key="open-conversation").click().run()
    assert not at.exception, at.exception
    assert [t.turn_id for t in at.session_state["turns"]] == ids
    assert at.session_state["conversation_id"] == first and at.query_params["conversation"] == first


@pytest.mark.parametrize("at, text", [
    ("2026-12-03T14:05:00+00:00", "today 14:05"),
    ("2026-12-02T23:59:00+00:00", "yesterday 23:59"),
    ("2026-03-01T08:30:00+00:00", "1 Mar 08:30"),
    ("2025-12-03T14:05:00+00:00", "3 Dec 2025"),
    ("2026-12-03T13:05:00-02:00", "today 15:05"),  # the store's time in the viewer's zone
])
def test_a_past_conversations_time_is_compact_and_local(at, text):
    from datetime import datetime

    from workbench.ui.open_conversation import short_time

    assert short_time(datetime.fromisoformat(at), datetime.fromisoformat("2026-12-03T18:00:00+00:00")) == text


def test_a_past_conversation_names_its_provider_its_model_when_not_the_default_and_its_corpus():
    from datetime import datetime

    from workbench.ui.open_conversation import listed_label

    now = datetime.fromisoformat("2026-12-03T18:00:00+00:00")
    row = {"first_question": "How do I configure SSO?", "turns": 1, "last_at": now, "provider": "ollama",
           "model": "qwen2.5:7b", "corpus_id": "demo_corpus"}
    assert listed_label(row, now, "qwen2.5:7b") == "How do I configure SSO? · 1 turn · today 18:00 · ollama · corpus demo_corpus"
    assert listed_label(row, now, "llama3.2:1b") == \
        "How do I configure SSO? · 1 turn · today 18:00 · ollama qwen2.5:7b · corpus demo_corpus"


def test_the_compare_pages_conversations_are_not_the_chats_past_conversations(chat, followup, tmp_path):
    """Issue 34 item 4: each Compare column asks its questions as a conversation of its own; those are recorded as
    runs of kind `compare` and the chat's "Open a past conversation" leaves them out, though the same browser
    (its viewer token: the same owner) asked them."""
    at = AppTest.from_file(str(ROOT / "pages" / "1_Compare.py"), default_timeout=60)
    at.session_state["viewer_token"] = chat.session_state["viewer_token"]
    at.run()
    at.text_input(key="cmp_question").set_value(QUESTIONS[0])
    at.text_area(key="cmp_followups").set_value(QUESTIONS[1])
    at.button[0].click().run()
    assert not at.exception, at.exception
    compared = {t.answer.record.conversation_id for c in at.session_state["cmp_conversations"] for t in c}
    assert len(compared) == 2 and None not in compared
    with duckdb.connect(str(tmp_path / "traces.duckdb"), read_only=True,
                        config={"autoload_known_extensions": False}) as con:
        kinds = con.execute("SELECT DISTINCT r.kind FROM turns t JOIN runs r USING (run_id) "
                            "WHERE t.conversation_id IN (SELECT unnest(?))", [sorted(compared)]).fetchall()
    assert kinds == [("compare",)]
    chat = ask(chat, "What about SCIM provisioning?")
    picker = chat.selectbox(key="past-conversation")
    assert len(picker.options) == 1, picker.options  # only the chat's own conversation
    assert picker.options[0].startswith("What about SCIM provisioning? · 1 turn · today "), picker.options


# --- carried documents say where they came from ---------------------------------------------------------


def test_carried_chips_and_the_provenance_expander_name_the_turn_that_read_them(chat):
    at = conversation(chat)
    first, second, third = at.session_state["turns"]
    with_carried(second, {"sso-okta": first})
    with_carried(third, {"sso-okta": first, "sso-saml-setup": second})
    at.run()
    assert not at.exception, at.exception
    rows = sources_rows(at)
    assert len(rows) == 3
    assert "read in turn" not in rows[0], "turn 1 read its own document"
    assert "Configure SAML single sign-on (SSO)" in rows[1] and "Set up SSO with Okta · read in turn 1" in rows[1]
    assert "Configure SAML single sign-on (SSO) · read in turn 1" not in rows[1]
    assert "Set up SSO with Okta · read in turn 1" in rows[2]
    assert "Configure SAML single sign-on (SSO) · read in turn 2" in rows[2]
    md = unescape(texts(at))
    assert md.count("**Carried from earlier turns** (") == 2, "turns 2 and 3 carried documents"
    assert f"**Set up SSO with Okta** · read in turn 1 (“{QUESTIONS[0]}”)" in md
    assert f"**Configure SAML single sign-on (SSO)** · read in turn 2 (“{QUESTIONS[1]}”)" in md


def test_a_not_in_context_rejection_names_the_turn_that_had_the_document(chat):
    at = conversation(chat, QUESTIONS[:2])
    first, second = at.session_state["turns"]
    url = "https://help.orbitly.example/articles/sso-okta"
    rejection = {"target": url, "reason": "not_in_context", "turn_id": first.turn_id, "position": 1,
                 "nearest_doc_id": None, "edit_distance": None}
    payload = second.payload.to_json()  # edited as the JSON a server would send, then read back
    second.answer = replace(second.answer, payload=Payload.from_json({
        **payload, "rejected_citations": [r for r in payload["rejected_citations"] if r["target"] != url] + [rejection],
        "citations": [{**c, "valid": False, "reason": "not_in_context", "turn_id": first.turn_id, "position": 1}
                      if c.get("target") == url else c for c in payload.get("citations", [])]}))
    at.run()
    assert not at.exception, at.exception
    md = unescape(texts(at))
    expected = "not in context (read in turn 1, dropped by the context policy)"
    assert f"articles/sso-okta  \n  {expected}" in md, "the Provenance expander names the turn"
    assert f"⚠ rejected citation: {expected}" in md, "so does the answer's badge"


def test_rejection_text_of_each_reason():
    from workbench.payload import Rejection
    from workbench.render.answer_links import rejection_text

    assert rejection_text(Rejection("x", "not_in_context", turn_id="t-1", position=2)) == \
        "not in context (read in turn 2, dropped by the context policy)"
    assert rejection_text(Rejection("x", "not_in_context", turn_id="t-1")) == \
        "not in context (read in turn t-1, dropped by the context policy)"
    assert rejection_text(Rejection("x", "not_retrieved")) == "not retrieved"


# --- Compare runs a whole conversation -------------------------------------------------------------------


def compare_page() -> AppTest:
    at = AppTest.from_file(str(ROOT / "pages" / "1_Compare.py"), default_timeout=60).run()
    assert not at.exception, at.exception
    return at


def test_compare_runs_a_whole_conversation_in_each_column(followup, app):
    at = compare_page()
    at.selectbox(key="cmp_provider_0").set_value(followup.FollowUp.name)
    at.selectbox(key="cmp_provider_1").set_value("offline")
    at.text_input(key="cmp_question").set_value(QUESTIONS[0])
    at.text_area(key="cmp_followups").set_value("\n".join(QUESTIONS[1:]) + "\n\n")
    at.button[0].click().run()
    assert not at.exception, at.exception
    columns = at.session_state["cmp_conversations"]
    assert [[t.question for t in c] for c in columns] == [list(QUESTIONS)] * 2
    for column in columns:
        records = [t.answer.record for t in column]
        assert [r.position for r in records] == [1, 2, 3]
        assert [[h.record.turn_id for h in r.history] for r in records] == [[], [records[0].turn_id],
                                                                      [records[0].turn_id, records[1].turn_id]]
        assert len({r.conversation_id for r in records}) == 1
    assert columns[0][0].answer.record.conversation_id != columns[1][0].answer.record.conversation_id, \
        "each column is a conversation of its own"
    assert columns[0][2].answer.record.tool_calls == ()
    md = unescape(texts(at))
    for p, q in enumerate(QUESTIONS[1:], start=2):
        assert f"#### Turn {p}: {q}" in md
    assert md.count("**Consulted** (") == 6, "each turn's sets, in each column"
    assert at.session_state["cmp_turns"] == [c[-1] for c in columns]


def test_compare_refuses_too_many_follow_ups(app):
    from workbench.ui.compare import MAX_FOLLOWUPS

    at = compare_page()
    at.text_area(key="cmp_followups").set_value("\n".join(f"and {i}?" for i in range(MAX_FOLLOWUPS + 1)))
    at.button[0].click().run()
    assert not at.exception, at.exception
    assert any(f"at most {MAX_FOLLOWUPS} follow-up questions" in unescape(e.value) for e in at.error)
    assert "cmp_conversations" not in at.session_state


def test_two_app_sessions_on_one_conversation_each_take_the_next_place(chat, followup):
    """Issue 33 item 3: a tab that did not see another session's turn still writes after it (never at its place),
    and then shows it, so its next question is asked with the whole conversation."""
    import duckdb

    at = ask(chat, QUESTIONS[0])
    cid = at.session_state["conversation_id"]
    other = reload(cid, at)  # another tab of the same browser
    other.sidebar.selectbox(key="cfg_provider").set_value(followup.FollowUp.name).run()
    other = ask(other, QUESTIONS[1])
    assert other.session_state["turns"][-1].answer.record.position == 2
    at = ask(at, QUESTIONS[2])  # this tab still shows one turn
    turns = at.session_state["turns"]
    assert turns[-1].answer.record.position == 3 and turns[-1].error is None
    assert [t.question for t in turns] == list(QUESTIONS), "the other session's turn is shown in its place"
    with duckdb.connect(str(turns[-1].session.tracer.path), read_only=True) as con:
        assert con.execute("SELECT position, history_through FROM turns WHERE conversation_id = ? ORDER BY position",
                           [cid]).fetchall() == [(1, 0), (2, 1), (3, 1)]
    at = ask(at, "And on mobile?")
    record = at.session_state["turns"][-1].answer.record
    assert record.position == 4 and [h.position for h in record.history] == [1, 2, 3]


def test_an_excerpt_turn_another_session_overtook_is_asked_again_with_its_turn(app):
    """In excerpt mode the overtaken turn is asked again after the other session's turn, so no excerpt number is
    issued twice in the conversation (docs/design.md, "Concurrent turns of one conversation")."""
    import duckdb

    app.sidebar.radio(key="cfg_mode").set_value("excerpts").run()
    at = ask(app, "How do I configure SSO?")
    cid = at.session_state["conversation_id"]
    other = reload(cid, at)  # another tab of the same browser
    other.sidebar.radio(key="cfg_mode").set_value("excerpts").run()
    other = ask(other, "And with Okta?")
    at = ask(at, "How do I rotate an API key?")
    turns = at.session_state["turns"]
    assert [t.answer.record.position for t in turns] == [1, 2, 3] and turns[-1].error is None
    assert [h.position for h in turns[-1].answer.record.history] == [1, 2], "asked again with the other's turn"
    with duckdb.connect(str(turns[-1].session.tracer.path), read_only=True) as con:
        numbers = [n for (n,) in con.execute("""
            SELECT i.excerpt_n FROM retrieved_items i JOIN turns t USING (turn_id)
            WHERE t.conversation_id = ? AND i.excerpt_n IS NOT NULL""", [cid]).fetchall()]
        assert con.execute("SELECT position, history_through FROM turns WHERE conversation_id = ? ORDER BY 1",
                           [cid]).fetchall() == [(1, 0), (2, 1), (3, 2)]
    assert numbers and len(numbers) == len(set(numbers))


# --- issue 33 item 1: a listing after reading has no chips; a re-read document's chip names its turn ----------


def test_what_articles_after_an_sso_answer_draws_no_sources_row(app):
    """The offline provider, the exact two questions in one conversation: the listing links what turn 1 read, yet
    its links are this turn's titles (docs/design.md §11 rule 3e), so no chip is drawn."""
    at = ask(ask(app, "How do I configure SSO?"), "What articles do you have?")
    first, listing = at.session_state["turns"]
    assert listing.answer.record.history, "asked as a follow-up"
    assert set(first.payload.sets.consulted) <= set(listing.payload.sets.cited)
    rows = sources_rows(at)
    assert len(rows) == 1, rows  # turn 1's only
    assert "No sources: nothing was read to answer this." in [unescape(c.value) for c in at.caption]


class Reread:
    """A scripted provider: turn 1 opens `sso-okta` and cites it; turn 2 searches "Okta" (a snippet of the same
    document) and cites it again, so its strongest exposure is turn 1's full text."""

    @staticmethod
    def provider():
        from workbench.providers.base import ModelStep, Provider, ToolRequest
        from workbench.types import ModelCall

        class _Reread(Provider):
            name = "scripted-reread"
            label = "scripted re-read (test)"

            def complete(self, messages, tools):
                users = [i for i, m in enumerate(messages) if m["role"] == "user"]
                this_turn, call = messages[users[-1] + 1:], ModelCall(self.name, "v1", 1.0, 10, 5, "stop")
                if not this_turn:
                    request = ToolRequest("f1", "fetch_document", {"doc_id": "sso-okta"}) if len(users) == 1 \
                        else ToolRequest("s1", "search", {"query": "Okta", "k": 5})
                    return ModelStep("", (request,), call)
                return ModelStep("See [Set up SSO with Okta](https://help.orbitly.example/articles/sso-okta).", (), call)

        return _Reread


@pytest.fixture
def reread(app):
    from workbench.providers.base import _PROVIDERS, register_provider

    cls = Reread.provider()
    register_provider(cls.name, cls)
    app.run()
    app.sidebar.selectbox(key="cfg_provider").set_value(cls.name).run()
    assert not app.exception, app.exception
    yield app
    _PROVIDERS.unregister(cls.name)


def test_the_chip_of_a_document_read_in_an_earlier_turn_says_so_even_when_this_turn_saw_a_snippet(reread):
    at = ask(ask(reread, "How do I configure SSO with Okta?"), "And again?")
    second = at.session_state["turns"][1]
    [src] = second.payload.sources
    assert (src.exposure, src.consulted, src.carried_from) == ("full", True, None), "this turn searched it too"
    rows = sources_rows(at)
    assert "read in turn" not in rows[0], "turn 1 read its own document"
    assert "Set up SSO with Okta · read in turn 1" in rows[1], rows[1]


# --- issue 34 item 9: the sidebar sets the conversation's context policy, recorded like the CLI's ----------------


def test_the_sidebars_context_policy_is_the_one_the_turns_are_asked_and_recorded_with(app, tmp_path):
    import duckdb

    app.sidebar.number_input(key="cfg_context_turns").set_value(0).run()
    app.sidebar.number_input(key="cfg_context_budget").set_value(5000).run()
    at = ask(ask(app, "How do I configure SSO?"), "And with Okta?")
    first, second = at.session_state["turns"]
    for t in (first, second):
        assert t.answer.record.config["context"]["turns"] == 0, t.answer.record.config["context"]
        assert t.answer.record.config["context"]["token_budget"] == 5000
    assert [h.context for h in second.answer.record.history] == ["answer"], "no earlier turn kept whole"
    with duckdb.connect(str(tmp_path / "traces.duckdb"), read_only=True) as con:
        recorded = {json.loads(c)["context"]["turns"] for (c,) in con.execute("SELECT config_json FROM runs").fetchall()}
    assert recorded == {0}
    # the default is the CLI's (`ask --context-turns 2`, the budget derived from the model's context)
    at.sidebar.number_input(key="cfg_context_turns").set_value(2).run()
    at.sidebar.number_input(key="cfg_context_budget").set_value(0).run()
    at = ask(at, "And on mobile?")
    context = at.session_state["turns"][-1].answer.record.config["context"]
    assert context["turns"] == 2 and context["token_budget"] is None
    assert [h.context for h in at.session_state["turns"][-1].answer.record.history] == ["full", "full"]
