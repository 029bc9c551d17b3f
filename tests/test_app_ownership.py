"""Each browser's own conversations and uploads in the app without sign-in (issue 31 item 3, docs/security.md
"Who sees what"): two browser sessions of one server under AppTest, a real trace database. With sign-in the same
rules key on the signed-in person: tests/test_browser_signin.py."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

from apptest import APP, ask


def browser(conversation: str | None = None) -> AppTest:
    """Another browser (its own token), opening `?conversation=` when given."""
    at = AppTest.from_file(APP, default_timeout=60)
    if conversation is not None:
        at.query_params["conversation"] = conversation
    at.run()
    assert not at.exception, at.exception
    return at


def test_another_browser_neither_lists_nor_opens_nor_continues_a_conversation(app):
    a = ask(app, "How do I configure SSO?")
    cid = a.session_state["conversation_id"]
    b = browser()
    ask(b, "How do I reset my password?")
    picker = b.selectbox(key="past-conversation")
    assert [o.split(" · ")[:2] for o in picker.options] == [["How do I reset my password?", "1 turn"]], \
        "only B's own conversation is listed"
    b_own = b.session_state["conversation_id"]

    c = browser(cid)  # A's link, opened by another browser
    warnings = [w.value for w in c.warning]
    assert any("is someone else" in w and "nothing can be added" in w for w in warnings), warnings
    assert c.session_state["turns"] == [] and c.session_state["conversation_id"] != cid
    assert "conversation" not in c.query_params
    ask(c, "And with Okta?")
    assert c.session_state["conversation_id"] != cid, "the question went to a conversation of C's own"

    from workbench.trace.conversation_reader import list_conversations

    db = a.session_state["turns"][0].session.tracer.path
    counts = {r["conversation_id"]: r["turns"] for r in list_conversations(db)}
    assert counts[cid] == 1, "nothing was appended to A's conversation"
    assert b_own in counts

    # a forged session that names A's conversation as its open one still cannot append to it
    c.session_state["conversation_id"] = cid
    c.session_state["turns"] = []
    c.query_params.clear()
    ask(c, "How long does that take?")
    assert any("is someone else" in w.value for w in c.warning)
    assert {r["conversation_id"]: r["turns"] for r in list_conversations(db)}[cid] == 1
