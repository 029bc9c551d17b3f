"""Sharing a conversation read-only (`trace.shares`, docs/security.md "Shared conversations"): the owner's "Share"
control above the chat, and the read-only view a share link (`?share=<token>`) opens.

Who can open a link is said where it is made: with sign-in, anyone signed in to this app who has the link; without
sign-in, anyone who can reach the app and has the link. The shared view draws the conversation's turns with no chat
input, no verification and no judge to run (nothing is written for a reader), and checks the share again on every
run, so a revoked link stops showing the conversation at the reader's next click or reload.
"""

from __future__ import annotations

from urllib.parse import urlencode

import streamlit as st

from ..errors import WorkbenchError
from ..render.escaping import escape_markdown
from ..trace.shares import LINK, SIGNED_IN, active_share, revoke, share
from . import identity
from .records import RunConfig
from .stores import STORE_PARAM, default_db
from .tables import stored

SHARE_PARAM = "share"  # ?share=<token>: the read-only view of a shared conversation
AUDIENCE_TEXT = {SIGNED_IN: "anyone signed in to this workbench who has the link (your teammates)",
                 LINK: "anyone who can reach this app and has the link — there is no sign-in here"}


def db_of(cfg: RunConfig) -> str:
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
            current = stored(active_share, db_of(cfg), conversation_id)  # drawn on every rerun of the chat
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
    from ..trace.conversation_reader import conversation_owner

    exists, first_owner = conversation_owner(db_of(cfg), conversation_id)
    if not exists or not identity.may_open(first_owner, identity.current()):
        st.session_state["share_flash"] = "Only the owner of a stored conversation can share it."
        return
    share(db_of(cfg), conversation_id, by=owner, audience=audience)


def _revoke(cfg: RunConfig, conversation_id: str, owner: str) -> None:
    revoke(db_of(cfg), conversation_id, by=owner)
    st.session_state["share_flash"] = "Link revoked: it no longer opens this conversation."


def flash() -> None:
    """What the last share action said, once."""
    said = st.session_state.pop("share_flash", None)
    if said:
        st.info(said, icon=":material/share:")
