"""Asking a question from a page: one turn with a `RunConfig`, every failure a message on the turn, never an
exception; the corpus warmed before the first question and a question it can answer."""

from __future__ import annotations

import time
from typing import Any, Sequence

import streamlit as st

from .. import questions
from ..errors import ConversationMoved, WorkbenchError
from ..render.escaping import escape_markdown
from ..session import Session
from ..types import ANSWERED
from .caches import get_session
from .records import RunConfig, Turn


def warm(cfg: RunConfig) -> str | None:
    """Load (or fetch from cache) the session for `cfg`; a user-facing message when that fails."""
    try:
        session = get_session(cfg.corpus, cfg.retriever, cfg.db)
    except (WorkbenchError, OSError) as exc:
        return escape_markdown(f"cannot load the corpus: {exc}")
    for line in session.corpus.skipped:
        st.warning(escape_markdown(line), icon="⚠️")
    return None


def example_question(cfg: RunConfig) -> str | None:
    """A question the loaded corpus can answer, from its source documents' titles (`questions.example_question`);
    None when it cannot be loaded or has no fitting title."""
    try:
        corpus = get_session(cfg.corpus, cfg.retriever, cfg.db).corpus
    except (WorkbenchError, OSError):
        return None
    return questions.example_question([d.title for d in corpus.documents if d.kind != "generated"])


def run(question: str, cfg: RunConfig, session: Session | None = None, *, history: Sequence[Any] = (),
        conversation_id: str | None = None, position: int | None = None, if_moved: str = "append",
        run_id: str | None = None) -> Turn:
    """Ask `question` with `cfg` (in `session`, else the cached one for `cfg`: a worker thread without the
    page's script context gets its session from the page); every failure becomes `Turn.error`, never an
    exception, but `ConversationMoved` (`if_moved="raise"`, `Session.log`), which the caller answers by asking
    again. A follow-up passes its conversation's earlier records as `history` (docs/design.md §11); `run_id` is a
    run declared for it (the Compare page's, `COMPARE_RUN`), else the interactive run of its configuration."""
    start = time.perf_counter()
    turn = Turn(question, cfg)
    try:
        turn.session = session or get_session(cfg.corpus, cfg.retriever, cfg.db)
        turn.answer = ask(turn.session, question, cfg, history=history, conversation_id=conversation_id,
                          position=position, if_moved=if_moved, run_id=run_id)
        payload = turn.answer.payload
        if payload.status not in ANSWERED:  # a truncated answer is shown, with its warning
            turn.error = payload.error or payload.status
    except ConversationMoved:
        raise
    except (WorkbenchError, ValueError, OSError) as exc:
        turn.error = str(exc)
    turn.elapsed_ms = (time.perf_counter() - start) * 1000
    return turn


def ask(session: Session, question: str, cfg: RunConfig, *, history: Sequence[Any] = (),
        conversation_id: str | None = None, position: int | None = None, if_moved: str = "append",
        run_id: str | None = None):
    """`Session.ask` with the sidebar's options; the session logs the turn to its trace database (in `run_id`, else
    its configuration's interactive run)."""
    return session.ask(question, cfg.asked(), history=history, conversation_id=conversation_id, position=position,
                       if_moved=if_moved, run_id=run_id, user_id=cfg.user_id, owner=cfg.owner, context=cfg.context)
