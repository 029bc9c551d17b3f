"""Sharing a conversation read-only (`trace.shares`, docs/security.md "Shared conversations"): the owner's "Share"
control above the chat, and the read-only view a share link (`?share=<token>`) opens.

Who can open a link is said where it is made: with sign-in, anyone signed in to this app who has the link; without
sign-in, anyone who can reach the app and has the link. The shared view draws the conversation's turns with no chat
input, no verification and no judge to run (nothing is written for a reader), and checks the share again on every
run, so a revoked link stops showing the conversation at the reader's next click or reload.
"""

from __future__ import annotations

from dataclasses import replace
from urllib.parse import urlencode

import streamlit as st

from ..errors import WorkbenchError
from ..render.escaping import display_text, escape_markdown
from ..trace.shares import LINK, SIGNED_IN, Share, active_share, find_share, may_read, revoke, share
from . import identity
from .state import STORE_PARAM, RunConfig, Turn, default_db, get_session

SHARE_PARAM = "share"  # ?share=<token>: the read-only view of a shared conversation
AUDIENCE_TEXT = {SIGNED_IN: "anyone signed in to this workbench who has the link (your teammates)",
                 LINK: "anyone who can reach this app and has the link — there is no sign-in here"}


def _db(cfg: RunConfig) -> str:
    return cfg.db or default_db()


def link(cfg: RunConfig, token: str) -> str:
    """The share link: this app's address (when the browser told it) with the store's name and the token."""
    query = "?" + urlencode({STORE_PARAM: cfg.store, SHARE_PARAM: token})
    try:
        base = (st.context.url or "").split("?")[0]
    except Exception:  # noqa: BLE001 - no request behind this run (AppTest): the query alone
        base = ""
    return base + query


def control(cfg: RunConfig, conversation_id: str, has_turns: bool) -> None:
    """The "Share" popover of the open conversation: its link and who can open it, made or revoked here."""
    viewer = identity.current()
    audience = SIGNED_IN if viewer.signed_in else LINK
    with st.popover("Share", icon=":material/share:", disabled=not has_turns,
                    help="A read-only link to this conversation, revocable"):
        try:
            current = active_share(_db(cfg), conversation_id)
        except WorkbenchError as exc:
            st.caption(escape_markdown(f"Cannot read the trace store: {exc}"))
            return
        if current is None:
            st.caption(f"A read-only link: {AUDIENCE_TEXT[audience]} can read this conversation — its questions, "
                       "answers, sources and provenance — and ask nothing in it, until you revoke it.")
            st.button("Create a read-only link", key="share-create", type="primary", on_click=_create,
                      args=(cfg, conversation_id, viewer.owner, audience))
            return
        st.caption(f"Shared read-only with {AUDIENCE_TEXT[current.audience]}.")
        st.code(link(cfg, current.token), language=None)
        st.button("Revoke the link", key="share-revoke", on_click=_revoke, args=(cfg, conversation_id, viewer.owner),
                  help="The link stops opening this conversation at once")


def _create(cfg: RunConfig, conversation_id: str, owner: str, audience: str) -> None:
    from .open_conversation import may_open
    from ..trace.conversation_reader import conversation_owner

    exists, first_owner = conversation_owner(_db(cfg), conversation_id)
    if not exists or not may_open(first_owner, identity.current()):
        st.session_state["share_flash"] = "Only the owner of a stored conversation can share it."
        return
    share(_db(cfg), conversation_id, by=owner, audience=audience)


def _revoke(cfg: RunConfig, conversation_id: str, owner: str) -> None:
    revoke(_db(cfg), conversation_id, by=owner)
    st.session_state["share_flash"] = "Link revoked: it no longer opens this conversation."


def flash() -> None:
    """What the last share action said, once."""
    said = st.session_state.pop("share_flash", None)
    if said:
        st.info(said, icon=":material/share:")


def _refused(found: Share | None) -> str:
    if found is not None and found.revoked_at is not None:
        return "This share link was revoked by its owner: the conversation is no longer shared."
    if found is not None:
        return "This conversation is shared with signed-in teammates only: sign in to read it."
    return "This share link opens nothing: it is not a link to a shared conversation in this trace store."


def shared_view(cfg: RunConfig) -> bool:
    """With `?share=<token>` in the address: the shared conversation, read-only, or why it is not shown (True);
    without, nothing (False)."""
    token = st.query_params.get(SHARE_PARAM)
    if not token:
        return False
    from .open_conversation import reopened_turn
    from .turn import document_panel, inline_citation_links, render_turn
    from ..trace.conversation_reader import read_conversation

    st.title("Provenance Workbench")
    try:
        found = find_share(_db(cfg), token)
        if not may_read(found, signed_in=identity.current().signed_in):
            st.warning(_refused(found), icon=":material/lock:")
            return True
        session = get_session(cfg.corpus, cfg.retriever, cfg.db)
        turns = [_read_only(reopened_turn(t, cfg)) for t in read_conversation(_db(cfg), found.conversation_id,
                                                                              session.corpus)]
    except (WorkbenchError, OSError) as exc:
        st.error(escape_markdown(f"Cannot open the shared conversation: {exc}"), icon="🚫")
        return True
    st.info(f"A shared conversation, read-only: shared with {AUDIENCE_TEXT[found.audience]}. Nothing can be asked "
            "in it; New conversation starts your own.", icon=":material/share:")
    st.button("New conversation", key="shared-leave", icon=":material/add_comment:", on_click=_leave)
    opened = bool(st.session_state.get("open_doc"))
    columns = st.columns([3, 2] if opened else [1], gap="medium")
    inline_citation_links(turns)
    with columns[0]:
        for turn in turns:
            with st.chat_message("user"):
                st.text(display_text(turn.question))
            with st.chat_message("assistant"):
                render_turn(turn)
    if opened:
        with columns[1]:
            document_panel(turns)
    return True


def _read_only(turn: Turn) -> Turn:
    """A shared turn as a reader sees it: nothing to re-run (no Verify: the re-runs would write to the store)."""
    turn.read_only = True
    if turn.answer is not None:
        turn.answer = replace(turn.answer, request={})
    return turn


def _leave() -> None:
    st.query_params.pop(SHARE_PARAM, None)
