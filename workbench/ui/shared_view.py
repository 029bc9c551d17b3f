"""The read-only view of a shared conversation (`?share=TOKEN`, docs/security.md "Shared conversations"): apart from
`ui/shares.py` (the owner's Share control, which the chat's controls show) because it renders the conversation's
turns as the chat reopens them (`ui/open_conversation.py`): imports one way (tests/test_import_circles.py)."""

from __future__ import annotations

from dataclasses import replace

import streamlit as st

from ..errors import WorkbenchError
from ..render.escaping import display_text, escape_markdown
from ..trace.shares import Share, find_share, may_read
from . import identity
from .caches import get_session
from .open_conversation import reopened_turn
from .records import RunConfig, Turn
from .shares import AUDIENCE_TEXT, SHARE_PARAM, db_of


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
    from .panel import document_panel, inline_citation_links
    from .turn import render_turn
    from ..trace.conversation_reader import read_conversation

    st.title("Provenance Workbench")
    try:
        found = find_share(db_of(cfg), token)
        if not may_read(found, signed_in=identity.current().signed_in):
            st.warning(_refused(found), icon=":material/lock:")
            return True
        session = get_session(cfg.corpus, cfg.retriever, cfg.db)
        turns = [_read_only(reopened_turn(t, cfg)) for t in read_conversation(db_of(cfg), found.conversation_id,
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
