"""The chat page's conversation (docs/design.md §11): its turns in session state, follow-ups asked with the
earlier turns as history, "New conversation", and a past conversation reopened from the trace database.

The open conversation's id is the page's `?conversation=ID` query parameter, so a browser reload (or a
shared link) reopens it from the trace database. An id from the address bar is untrusted: at most
`MAX_CONVERSATION_ID_CHARS` characters, looked up as a query parameter, shown only as text.
"""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError
from typing import TYPE_CHECKING, Any

import streamlit as st

from ..config import DEMO_CORPUS, MAX_CONVERSATION_ID_CHARS
from ..context_policy import MAX_REASKS, history_of, next_position, reask_when_moved
from ..errors import ConversationMoved, WorkbenchError
from ..providers import declared, provider_names, readiness
from ..providers.options import properties
from ..redact import REDACTED
from ..render.escaping import display_text, escape_markdown
from ..trace.writer import COMPARE_RUN
from . import identity, shares
from .asking import run
from .caches import app_corpus, get_session, provider_caps
from .records import RunConfig, Turn
from .stores import default_db

if TYPE_CHECKING:
    from ..answer import Answer
    from ..types import TurnConfig
from .tables import QUERY_CACHE_SECONDS, db_version

TURNS = "turns"  # session_state: the open conversation's turns (`records.Turn`), oldest first
CONVERSATION = "conversation_id"  # session_state: the open conversation's id
QUERY = "conversation"  # the query parameter naming it
#: Past conversations offered in the "Open a past conversation" picker (the latest first).
MAX_LISTED = 50
#: The "Open a past conversation" popover's key (its open state), and where a refused "Open" leaves its message.
PICKER_KEY, OPEN_PROBLEM = "past-popover", "past-open-problem"
#: The picker's width: a popover is as wide as what it holds.
PICKER_PX = 720


def new_id() -> str:
    return f"c-{uuid.uuid4().hex[:12]}"


def turns() -> list[Turn]:
    return st.session_state.setdefault(TURNS, [])


def conversation_id() -> str:
    return st.session_state.setdefault(CONVERSATION, new_id())


def history(earlier: list[Turn]) -> list[Any]:
    """The records a follow-up sends as its history (`context_policy.history_of`: the earlier turns that answered)."""
    return [t.answer.record for t in history_of(earlier, lambda t: t.answer.record if t.answer is not None else None)]


def places(earlier: list[Turn]) -> list[int | None]:
    """The positions the earlier turns that ran took (failed ones too), for `context_policy.next_position`; a
    reopened conversation's failed turns are not reopened, and the store places the turn after them anyway."""
    return [t.answer.record.position for t in earlier if t.answer is not None]


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


def asked_corpus(asked: TurnConfig, cfg: RunConfig) -> tuple[str, str] | None:
    """(path, label) of a corpus the app can load whose content is the one `asked` recorded (its hash): the
    sidebar's, else the bundled demo corpus; None when neither is (the turn was asked with another corpus, or
    one since edited). A turn recorded without a hash (an older store) is taken to be the sidebar's."""
    if asked.corpus_hash is None:
        return cfg.corpus, cfg.corpus_label
    for path, label in ((cfg.corpus, cfg.corpus_label), (str(DEMO_CORPUS), "demo")):
        try:
            if app_corpus(path).content_hash == asked.corpus_hash:
                return path, label
        except (WorkbenchError, OSError):  # a corpus that no longer loads is not the one it was asked with
            continue
    return None


def rerun_request(asked: TurnConfig, cfg: RunConfig) -> dict[str, Any]:
    """What `Session.verify` re-runs a reopened turn with (`Answer.request`): its provider, model and recorded
    options, plus the secrets the store never holds (a `writeOnly` option, or a value recorded redacted) from the
    sidebar when it has the same provider selected; empty when the provider is not registered or not configured
    here (verification cannot run)."""
    if asked.provider not in provider_names() or not readiness(asked.provider):
        return {}
    options = {name: list(v) if isinstance(v, tuple) else v for name, v in asked.option_pairs()}
    if cfg.provider == asked.provider:
        props = properties(declared(asked.provider, "options_schema"))
        for name, value in cfg.options:
            if props.get(name, {}).get("writeOnly") or REDACTED in str(options.get(name, "")):
                options[name] = list(value) if isinstance(value, tuple) else value
    return {"provider": asked.provider, "model": asked.model, "options": options}


def _corpus_note(asked: TurnConfig, cfg: RunConfig, found: tuple[str, str] | None) -> str | None:
    """What a reopened turn says about its corpus when it is not the sidebar's."""
    named = f"corpus {asked.corpus_id or '(unnamed)'} (content {(asked.corpus_hash or '')[:12]})"
    if found is None:
        return (f"Asked with {named}, which is not loaded: the sidebar's corpus {cfg.corpus_label} differs. Its "
                "sources and citations are shown as recorded; opening its documents, verifying it and following it "
                "up need that corpus, chosen in the sidebar.")
    if found[0] != cfg.corpus:
        return (f"Asked with {named}, not the sidebar's corpus {cfg.corpus_label}: it is shown with that corpus, and "
                "a question asked now starts a new conversation unless that corpus is chosen in the sidebar.")
    return None


def reopened_turn(stored: Answer, cfg: RunConfig) -> Turn:
    """A traced turn as the chat shows it: as it was asked (its run's provider, model, retriever, options and
    corpus, its recorded time), its payload computed again from its record (provenance is pure), with the claims
    and the latest verification the trace database holds. It can be verified again where that can run: its
    corpus is loaded and its provider is configured here."""
    if stored.payload.audit is not None:  # audited: shown as stored (ui/audited.py)
        from .audited import reopened

        return reopened(stored, cfg, cfg.db or default_db())
    record, asked = stored.record, stored.record.config
    found = asked_corpus(asked, cfg)
    corpus, label = found or (f"{asked.corpus_id or ''}@{asked.corpus_hash or ''}", asked.corpus_id or "(not loaded)")
    tcfg = replace(cfg, provider=asked.provider or cfg.provider, model=asked.model,
                   retriever=asked.retriever or cfg.retriever, mode=record.mode, k=asked.k or cfg.k,
                   options=asked.option_pairs(), tool_protocol=asked.tool_protocol, corpus=corpus, corpus_label=label)
    turn = Turn(record.question, tcfg, note=_corpus_note(asked, cfg, found))
    if found is not None:
        try:
            turn.session = get_session(corpus, tcfg.retriever, cfg.db)
        except (WorkbenchError, OSError):  # a retriever no longer registered: the corpus's documents still open
            turn.session = get_session(corpus, cfg.retriever, cfg.db)
    rerunnable = turn.session is not None and turn.session.retriever_name == tcfg.retriever
    turn.answer = replace(stored, request=rerun_request(asked, cfg) if rerunnable else {})
    turn.llm_faithfulness = next((f for f in stored.other_judges if f.judge == "llm"), None)
    return turn


def for_viewer(stored: list[Answer]) -> list[Answer]:
    """`stored` less its audited turns (another app's users' questions) when the viewer is not an analyst: the
    chat never shows them to anyone else (docs/security.md, "Who sees what")."""
    from .audited import may_see

    native = [t for t in stored if t.payload is None or t.payload.audit is None]
    return stored if len(native) == len(stored) or may_see() else native


def not_yours(cid: str) -> str:
    return (f"Conversation {cid} is someone else's: it is not shown here and nothing can be added to it. "
            "Ask your question in a new conversation; to read theirs, ask its owner for a share link (Share).")


def reopen(cid: str, cfg: RunConfig) -> str | None:
    """Make conversation `cid` of the trace database the open one; a message when it cannot be (no such
    conversation, or someone else's: `identity.may_open`)."""
    from ..trace.conversation_reader import conversation_owner, read_conversation

    if not cid or len(cid) > MAX_CONVERSATION_ID_CHARS:
        return f"A conversation id has 1 to {MAX_CONVERSATION_ID_CHARS} characters; this one has {len(cid)}."
    try:
        session = get_session(cfg.corpus, cfg.retriever, cfg.db)
        db = session.tracer.path if session.tracer else (cfg.db or default_db())
        exists, owner = conversation_owner(db, cid)
        if exists and not identity.may_open(owner, identity.current()):
            return not_yours(cid)
        stored = read_conversation(db, cid, session.corpus)
        reopened = [reopened_turn(t, cfg) for t in for_viewer(stored)]
    except (WorkbenchError, OSError) as exc:
        return f"Cannot reopen conversation {cid}: {exc}"
    if stored and not reopened:
        from .audited import FOR_ANALYSTS

        return f"Conversation {cid} is not shown to you. {FOR_ANALYSTS}"
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
    problem = _someone_elses(conversation_id(), cfg)
    if problem:  # never appended to: the question goes to a new conversation of the viewer's own
        st.warning(escape_markdown(problem), icon="⚠️")
        new_conversation()
        earlier = turns()
    cid, reask = conversation_id(), reask_when_moved(cfg.mode)
    for attempt in range(MAX_REASKS + 1):
        asked = next_position(places(earlier))
        try:
            turn = run(question, cfg, history=history(earlier), conversation_id=cid, position=asked,
                       if_moved="raise" if reask and attempt < MAX_REASKS else "append")
            break
        except ConversationMoved:  # another session's turn landed first: ask again after it
            earlier = catch_up(cid, cfg)
    if turn.answer is not None and turn.answer.record.position not in (None, asked):
        earlier = catch_up(cid, cfg, turn.answer.record.turn_id)  # written after another session's turns
    earlier.append(turn)
    st.query_params[QUERY] = cid
    return turn


def catch_up(cid: str, cfg: RunConfig, asked: str | None = None) -> list[Turn]:
    """The open conversation with the turns other sessions (another tab, another process) wrote to the trace
    database added in their places (not `asked`, the turn being added here), so the next turn is asked with
    them (docs/design.md, "Concurrent turns of one conversation"); the turns asked here are kept as they are."""
    from ..trace.conversation_reader import read_conversation

    earlier = turns()
    known = {t.answer.record.turn_id for t in earlier if t.answer is not None} | {asked}
    try:
        session = get_session(cfg.corpus, cfg.retriever, cfg.db)
        db = session.tracer.path if session.tracer else (cfg.db or default_db())
        added = [reopened_turn(t, cfg) for t in for_viewer(read_conversation(db, cid, session.corpus))
                 if t.record.turn_id not in known]
    except (WorkbenchError, OSError):  # the store cannot be read now: the next turn is placed after them anyway
        return earlier
    for a in added:  # oldest first, each before the first turn asked here after it
        at = a.answer.record.position or 0
        i = next((i for i, t in enumerate(earlier) if t.answer and (t.answer.record.position or 0) > at), len(earlier))
        earlier.insert(i, a)
    return earlier


def _someone_elses(cid: str, cfg: RunConfig) -> str | None:
    """A message when the trace database holds conversation `cid` as someone else's (`identity.may_open`); else None."""
    from ..trace.conversation_reader import conversation_owner

    try:
        session = get_session(cfg.corpus, cfg.retriever, cfg.db)
        exists, owner = conversation_owner(session.tracer.path if session.tracer else (cfg.db or default_db()), cid)
    except (WorkbenchError, OSError):
        return None  # the turn itself reports an unreadable trace database
    return not_yours(cid) if exists and not identity.may_open(owner, identity.current()) else None


def short_time(at: datetime | None, now: datetime) -> str:
    """When a conversation's last turn was asked, compact and in `now`'s time zone: "today 14:05",
    "yesterday 09:12", "3 Dec 14:05" this year, "3 Dec 2025" before; "" when the store has no time."""
    if at is None:
        return ""
    at = at.astimezone(now.tzinfo) if at.tzinfo is not None and now.tzinfo is not None else at
    days = (now.date() - at.date()).days
    if days == 0:
        return f"today {at:%H:%M}"
    if days == 1:
        return f"yesterday {at:%H:%M}"
    if at.year == now.year:
        return f"{at.day} {at:%b %H:%M}"
    return f"{at.day} {at:%b %Y}"


def listed_label(row: dict[str, Any], now: datetime, default_model: str | None = None) -> str:
    """A past conversation as the picker lists it: its first question, its turns, when its last turn was asked,
    its provider (and model, when not `default_model`, the provider's own) and corpus (`list_conversations`)."""
    first = display_text(str(row.get("first_question") or row.get("question") or ""), " ")
    parts = [first if len(first) <= 70 else first[:69] + "…"]
    n = row.get("turns")
    if n is not None:
        parts.append(f"{n} turn{'' if n == 1 else 's'}")
    parts.append(short_time(row.get("last_at"), now))
    provider, model = row.get("provider"), row.get("model")
    if provider:
        parts.append(display_text(f"{provider} {model}" if model and model != default_model else provider, " "))
    if row.get("corpus_id"):
        parts.append(display_text(f"corpus {row['corpus_id']}", " "))
    return " · ".join(p for p in parts if p)


def _now() -> datetime:
    """Now in the viewer's time zone (the browser's, `st.context.timezone`), else the server's."""
    try:
        zone = ZoneInfo(st.context.timezone) if st.context.timezone else None
    except (ZoneInfoNotFoundError, ValueError):
        zone = None
    return datetime.now(zone) if zone is not None else datetime.now().astimezone()


def controls(cfg: RunConfig) -> None:
    """"New conversation" and "Open a past conversation" (from the trace database), above the chat."""
    with st.container(horizontal=True, vertical_alignment="center", key="conversation-controls"):
        st.button("New conversation", key="new-conversation", on_click=new_conversation, icon=":material/add_comment:",
                  disabled=not turns(), help="Start over: the next question has no history. This conversation "
                                             "stays in the trace database, to reopen later.")
        # stateful (a key and on_change): "Open" closes it (`_open_chosen`); a plain popover stays open in the browser
        with st.popover("Open a past conversation", icon=":material/history:", key=PICKER_KEY, on_change="rerun"):
            past(cfg)
        shares.control(cfg, conversation_id(), bool(turns()))
    shares.flash()


@st.cache_data(show_spinner=False, ttl=QUERY_CACHE_SECONDS, max_entries=16)
def _listed(path: str, version: tuple, owner: str, ownerless: bool) -> list[dict[str, Any]]:
    """The latest `MAX_LISTED` conversations of `owner` in the trace database at `path` (and the ownerless ones
    when `ownerless`: `identity.may_open`), but the Compare page's columns (`COMPARE_RUN`), read again only when it changed
    (`version`): the chat draws its picker on every rerun, a click included."""
    from ..trace.conversation_reader import list_conversations

    return [dict(r) for r in list_conversations(path, owner=owner, ownerless=ownerless,
                                                skip_kinds=(COMPARE_RUN,))][:MAX_LISTED]


def past(cfg: RunConfig) -> None:
    try:
        session = get_session(cfg.corpus, cfg.retriever, cfg.db)
        path = str(session.tracer.path if session.tracer else (cfg.db or default_db()))
        viewer = identity.current()
        rows = _listed(path, db_version(path), viewer.owner, viewer.analyst)
    except (WorkbenchError, OSError) as exc:
        st.caption(escape_markdown(f"Cannot read the trace database: {exc}"))
        return
    if not rows:
        st.caption("No conversation in the trace database yet.")
        return
    ids = [str(r["conversation_id"]) for r in rows]
    now = _now()
    labels = {c: listed_label(r, now, provider_caps(r["provider"])["model"] if r.get("provider") in provider_names()
                              else None) for c, r in zip(ids, rows)}
    # options are plain text, never markdown; wide enough for a label's time, provider and corpus after its question
    chosen = st.selectbox("Conversation", ids, key="past-conversation", format_func=labels.__getitem__,
                          width=PICKER_PX)
    st.button("Open", key="open-conversation", disabled=chosen == st.session_state.get(CONVERSATION),
              on_click=_open_chosen, args=(cfg,))
    problem = st.session_state.pop(OPEN_PROBLEM, None)
    if problem:
        st.warning(escape_markdown(problem), icon="⚠️")


def _open_chosen(cfg: RunConfig) -> None:
    """"Open": the picked conversation reopened and named in the address, and the popover closed (a callback: before
    the rerun draws the popover, the only time its state may change); a refusal is shown in the popover."""
    chosen = st.session_state.get("past-conversation")
    problem = reopen(chosen, cfg) if chosen else None
    if problem:
        st.session_state[OPEN_PROBLEM] = problem
        return
    st.query_params[QUERY] = chosen
    st.session_state[PICKER_KEY] = False
