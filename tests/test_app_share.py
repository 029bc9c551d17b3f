"""A conversation shared read-only and revoked (issue 41, item 3): its owner makes a link in the app, another browser
opens it read-only (nothing to ask, nothing written), still cannot open or continue the conversation itself, and
revoking ends the link. Two browser sessions of one server under AppTest, over a real trace store; who may open what
with sign-in is the rule `trace.shares.may_read` (docs/security.md, "Shared conversations")."""

from __future__ import annotations

from datetime import datetime, timezone

from streamlit.testing.v1 import AppTest

from apptest import APP, ask, unescape
from workbench.trace.shares import LINK, SIGNED_IN, Share, active_share, may_read


def browser(**params: str) -> AppTest:
    """Another browser (its own token) opening the chat with `params` in its address."""
    at = AppTest.from_file(APP, default_timeout=60)
    for k, v in params.items():
        at.query_params[k] = v
    at.run()
    assert not at.exception, at.exception
    return at


def _button(at: AppTest, key: str):
    return next(b for b in at.button if b.key == key)


def _turn_count(db, cid: str) -> int:
    from workbench.trace.conversation_reader import list_conversations

    return {r["conversation_id"]: r["turns"] for r in list_conversations(db)}.get(cid, 0)


def test_a_shared_conversation_opens_read_only_for_another_browser_until_revoked(app):
    owner = ask(app, "How do I configure SSO?")
    ask(owner, "And with Okta?")
    cid = owner.session_state["conversation_id"]
    db = owner.session_state["turns"][0].session.tracer.path
    assert any("no sign-in here" in unescape(c.value) for c in owner.caption), "who can open it is said before sharing"

    stranger = browser(conversation=cid)  # without a share, the conversation stays its owner's
    assert any("someone else" in w.value for w in stranger.warning)

    _button(owner, "share-create").click().run()
    assert not owner.exception, owner.exception
    made = active_share(db, cid)
    assert made is not None and made.audience == LINK and made.conversation_id == cid
    shown = [c.value for c in owner.code]
    assert any(f"share={made.token}" in c and "store=default" in c for c in shown), shown

    reader = browser(store="default", share=made.token)
    questions = [m.value for m in reader.text]
    assert "How do I configure SSO?" in questions and "And with Okta?" in questions, questions
    assert not reader.chat_input, "nothing can be asked in a shared conversation"
    assert any("read-only" in i.value and "has the link" in i.value for i in reader.info), [i.value for i in reader.info]
    assert not [b for b in reader.button if b.label == "Verify sources"], "a reader re-runs nothing"
    assert _turn_count(db, cid) == 2
    # the share opens the conversation for reading only: it still cannot be reopened or continued as one's own
    assert any("someone else" in w.value for w in browser(conversation=cid).warning)

    owner.run()
    _button(owner, "share-revoke").click().run()
    assert active_share(db, cid) is None
    reader.run()  # the reader's next click or reload
    assert any("revoked" in w.value for w in reader.warning), [w.value for w in reader.warning]
    assert not [m for m in reader.text if m.value == "How do I configure SSO?"], "revoked: nothing of it is shown"
    assert any("revoked" in w.value for w in browser(store="default", share=made.token).warning)


def test_a_made_up_token_opens_nothing(app):
    ask(app, "How do I configure SSO?")
    reader = browser(share="x" * 22)
    assert any("opens nothing" in w.value for w in reader.warning)
    assert not [m for m in reader.text if m.value == "How do I configure SSO?"]


def test_who_may_read_a_share():
    now = datetime.now(timezone.utc)
    team = Share("t", "c-1", "user:ann@example.com", SIGNED_IN, now)
    anyone = Share("l", "c-2", "browser:abc", LINK, now)
    assert may_read(team, signed_in=True) and not may_read(team, signed_in=False), \
        "a teammates' share needs sign-in, even if the app's sign-in was turned off since"
    assert may_read(anyone, signed_in=False) and may_read(anyone, signed_in=True)
    assert not may_read(Share("t", "c-1", "user:ann@example.com", SIGNED_IN, now, revoked_at=now), signed_in=True)
    assert not may_read(None, signed_in=True)
