"""The chat page's conversation (docs/design.md §11): its turns in session state, follow-ups asked with the
earlier turns as history, "New conversation", and a past conversation reopened from the trace database.

The open conversation's id is the page's `?conversation=ID` query parameter, so a browser reload (or a
shared link) reopens it from the trace database. An id from the address bar is untrusted: at most
`MAX_CONVERSATION_ID_CHARS` characters, looked up as a query parameter, shown only as text.
"""

from __future__ import annotations

import uuid
from dataclasses import replace
from typing import Any

import streamlit as st

from ..config import MAX_CONVERSATION_ID_CHARS  # the longest conversation id, also from the address bar
from ..errors import WorkbenchError
from ..render import display_text, escape_markdown
from ..types import TRUNCATED
from .state import RunConfig, Turn, default_db, get_session, run
from .tables import QUERY_CACHE_SECONDS, db_version

TURNS = "turns"  # session_state: the open conversation's turns (`state.Turn`), oldest first
CONVERSATION = "conversation_id"  # session_state: the open conversation's id
QUERY = "conversation"  # the query parameter naming it
#: Past conversations offered in the "Open a past conversation" picker (the latest first).
MAX_LISTED = 50


def new_id() -> str:
    return f"c-{uuid.uuid4().hex[:12]}"


def turns() -> list[Turn]:
    return st.session_state.setdefault(TURNS, [])


def conversation_id() -> str:
    return st.session_state.setdefault(CONVERSATION, new_id())


def history(earlier: list[Turn]) -> list[Any]:
    """The records a follow-up sends as its history: the earlier turns that answered (a failed turn, which has
    no record of what the model saw, is not part of the conversation the model is shown)."""
    return [t.answer.record for t in earlier
            if t.answer is not None and t.error is None and t.answer.record.status == "ok"]


def next_position(earlier: list[Turn]) -> int:
    """The place of the next turn: after every earlier turn that ran, a failed one too (its place is taken in the
    trace store, though it is not history); a reopened conversation's failed turns are not reopened but counted."""
    return 1 + max((t.answer.record.position or 0 for t in earlier if t.answer is not None), default=0)


def clear_view() -> None:
    """Close the side panel and forget the citation pills' state (they belong to the turns shown)."""
    st.session_state["open_doc"] = None
    for key in list(st.session_state):
        if isinstance(key, str) and key.startswith("cite-"):
            del st.session_state[key]


def new_conversation() -> None:
    """The "New conversation" button: an empty chat with a fresh id; the old one stays in the trace database."""
    st.session_state[TURNS] = []
    st.session_state[CONVERSATION] = new_id()
    clear_view()
    st.query_params.pop(QUERY, None)


def turn_from_record(record: Any, cfg: RunConfig) -> Turn:
    """A traced turn as the chat shows it: its payload computed again from its record (provenance is pure), in the
    session of the sidebar's corpus. Its claims are not judged again here (they are in the trace database's
    `claims` table), so a reopened turn has no Claims expander."""
    from ..provenance import sources_payload
    from ..session import Answer

    ran = record.config or {}
    options = tuple((k, tuple(v) if isinstance(v, list) else v) for k, v in (ran.get("options") or {}).items())
    tcfg = replace(cfg, provider=ran.get("provider") or cfg.provider, model=ran.get("model"),
                   retriever=ran.get("retriever") or cfg.retriever, mode=record.mode,
                   k=int(ran.get("k") or cfg.k), options=options, tool_protocol=ran.get("tool_protocol"))
    turn = Turn(record.question, tcfg, elapsed_ms=float(record.latency_ms or 0.0))
    try:
        turn.session = get_session(cfg.corpus, tcfg.retriever, cfg.db)
    except (WorkbenchError, OSError):  # a retriever no longer registered: the sidebar's, for the documents
        turn.session = get_session(cfg.corpus, cfg.retriever, cfg.db)
    if record.status not in ("ok", TRUNCATED):  # a truncated answer is shown, with its warning
        turn.error = record.error or record.status
    turn.answer = Answer(record, sources_payload(record))  # no `request`: not re-run (verified) from here
    return turn


def as_asked(records: list[Any], details: dict[str, dict[str, Any]]) -> list[Any]:
    """The rebuilt records of a conversation (`trace.conversations.load_conversation`, each with its history in
    the context states the trace recorded, so that provenance computed again finds the same carried documents)
    with the rest of what each was asked with: its run's configuration and its latency."""
    out = []
    for r in records:
        d = details.get(r.turn_id, {})
        out.append(replace(r, config=d.get("config") or r.config, latency_ms=d.get("latency_ms")))
    return out


def reopen(cid: str, cfg: RunConfig) -> str | None:
    """Make conversation `cid` of the trace database the open one; a message when it cannot be."""
    from ..trace.conversations import load_conversation, turn_details

    if not cid or len(cid) > MAX_CONVERSATION_ID_CHARS:
        return f"A conversation id has 1 to {MAX_CONVERSATION_ID_CHARS} characters; this one has {len(cid)}."
    try:
        session = get_session(cfg.corpus, cfg.retriever, cfg.db)
        db = session.tracer.path if session.tracer else (cfg.db or default_db())
        records = load_conversation(db, cid, session.corpus)
        records = as_asked(records, turn_details(db, [r.turn_id for r in records]))
        reopened = [turn_from_record(r, cfg) for r in records]
    except (WorkbenchError, OSError) as exc:
        return f"Cannot reopen conversation {cid}: {exc}"
    if not reopened:
        return f"There is no conversation {cid} in the trace database."
    st.session_state[TURNS] = reopened
    st.session_state[CONVERSATION] = cid
    clear_view()
    return None


def follow_address(cfg: RunConfig) -> None:
    """Keep the open conversation and the `?conversation=` parameter in step: a parameter naming another
    conversation than the open one (a reload, a shared link) reopens it; otherwise the parameter names the
    open conversation once it has a turn."""
    wanted = st.query_params.get(QUERY)
    if wanted and wanted != st.session_state.get(CONVERSATION):
        problem = reopen(wanted, cfg)
        if problem:
            st.warning(escape_markdown(problem), icon="⚠️")
            new_conversation()
            return
    if turns():
        st.query_params[QUERY] = conversation_id()


def ask(question: str, cfg: RunConfig) -> Turn:
    """Ask `question` as the next turn of the open conversation and add it to the conversation; asked on another
    corpus than the conversation's last turn, it starts a new conversation."""
    earlier = turns()
    if earlier and earlier[-1].config.corpus != cfg.corpus:  # another corpus's turns are no history for this one
        new_conversation()
        st.toast("Another corpus: a new conversation (the earlier one stays in the trace database).", icon="ℹ️")
        earlier = turns()
    turn = run(question, cfg, history=history(earlier), conversation_id=conversation_id(), position=next_position(earlier))
    earlier.append(turn)
    st.query_params[QUERY] = conversation_id()
    return turn


def _label(row: dict[str, Any]) -> str:
    first = display_text(str(row.get("first_question") or row.get("question") or ""), " ")
    first = first if len(first) <= 70 else first[:69] + "…"
    n = row.get("turns")
    return f"{first} · {n} turn{'' if n == 1 else 's'}" if n is not None else first


def controls(cfg: RunConfig) -> None:
    """"New conversation" and "Open a past conversation" (from the trace database), above the chat."""
    with st.container(horizontal=True, vertical_alignment="center", key="conversation-controls"):
        st.button("New conversation", key="new-conversation", on_click=new_conversation, icon=":material/add_comment:",
                  disabled=not turns(), help="Start over: the next question has no history. This conversation "
                                             "stays in the trace database, to reopen later.")
        with st.popover("Open a past conversation", icon=":material/history:"):
            past(cfg)


@st.cache_data(show_spinner=False, ttl=QUERY_CACHE_SECONDS, max_entries=16)
def _listed(path: str, version: tuple) -> list[dict[str, Any]]:
    """The latest `MAX_LISTED` conversations of the trace database at `path`, read again only when it changed
    (`version`): the chat draws its picker on every rerun, a click included."""
    from ..trace.conversations import list_conversations

    return [dict(r) for r in list_conversations(path)][:MAX_LISTED]


def past(cfg: RunConfig) -> None:
    try:
        session = get_session(cfg.corpus, cfg.retriever, cfg.db)
        path = str(session.tracer.path if session.tracer else (cfg.db or default_db()))
        rows = _listed(path, db_version(path))
    except (WorkbenchError, OSError) as exc:
        st.caption(escape_markdown(f"Cannot read the trace database: {exc}"))
        return
    if not rows:
        st.caption("No conversation in the trace database yet.")
        return
    ids = [str(r["conversation_id"]) for r in rows]
    by_id = dict(zip(ids, rows))
    chosen = st.selectbox("Conversation", ids, key="past-conversation",
                          format_func=lambda c: _label(by_id[c]))  # options are plain text, never markdown
    if st.button("Open", key="open-conversation", disabled=chosen == st.session_state.get(CONVERSATION)):
        problem = reopen(chosen, cfg)
        if problem:
            st.warning(escape_markdown(problem), icon="⚠️")
        else:
            st.query_params[QUERY] = chosen
            st.rerun()
