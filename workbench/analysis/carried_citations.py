"""Conversations in the trace store: how often follow-ups cite documents carried from earlier turns, and
which (views `conversation_turns` and `conversations`, migration m013; docs/design.md §11)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from ..config import DEFAULT_MODE, DEFAULT_PROVIDER, DEFAULT_RETRIEVER

#: Demo conversations for the notebook (questions on the demo help center; a follow-up leans on the turn before).
DEMO_CONVERSATIONS = {
    "demo-sso": ("How do I configure SSO?", "And with Okta?", "How long does that take?"),
    "demo-api-keys": ("How do I rotate API keys?", "What happens to the old key?"),
}


def seed_demo_conversations(db: str | Path, *, corpus: Any = None, retriever: str = DEFAULT_RETRIEVER,
                            provider: str = DEFAULT_PROVIDER, mode: str = DEFAULT_MODE) -> pd.DataFrame:
    """Something to analyse: each demo conversation asked turn by turn, each follow-up with the earlier
    turns as history (docs/design.md §11). A conversation already in the database is not asked again."""
    from ..session import Session
    from ..trace.conversation_reader import list_conversations

    done = {c["conversation_id"] for c in list_conversations(db)}
    session = Session.open(corpus, retriever, trace_db=db)
    for conversation_id, questions in DEMO_CONVERSATIONS.items():
        if conversation_id in done:
            continue
        asked: list = []
        for q in questions:
            asked.append(session.ask(q, provider=provider, mode=mode, history=asked,
                                     conversation_id=conversation_id).record)
    return conversation_table(db)


def _df(db: str | Path, sql: str) -> pd.DataFrame:
    from ..trace import TraceReader

    return TraceReader(db).df(sql)


def conversation_table(db: str | Path) -> pd.DataFrame:
    """One row per conversation: turns, follow-ups, how many of those cite carried documents, the questions."""
    return _df(db, "SELECT conversation_id, turns, follow_ups, follow_ups_citing_carried, questions, started_at "
                   "FROM conversations")


def carried_citation_rate(db: str | Path) -> pd.DataFrame:
    """One row: the `ok` follow-ups, how many cite at least one carried document, and that share (NULL
    without follow-ups), beside how many cite only documents they exposed themselves or nothing at all."""
    return _df(db, """
        SELECT count(*) AS follow_ups,
               count(*) FILTER (WHERE cites_carried) AS citing_carried,
               count(*) FILTER (WHERE cites_carried) / nullif(count(*), 0) AS share_citing_carried,
               count(*) FILTER (WHERE NOT cites_carried AND len(cited) > 0) AS citing_only_their_own,
               count(*) FILTER (WHERE len(cited) = 0) AS citing_nothing
        FROM conversation_turns WHERE position > 1 AND status = 'ok'""")


def carried_documents(db: str | Path) -> pd.DataFrame:
    """Which carried documents follow-ups cite: per document, the follow-ups citing it carried, in how many
    conversations, how many of those citations it was consulted (read in full or as a cited snippet earlier)
    rather than only linked, and how many turns back it came from (median)."""
    return _df(db, """
        SELECT c.doc_id, count(*) AS follow_ups, count(DISTINCT t.conversation_id) AS conversations,
               count(*) FILTER (WHERE c.consulted) AS consulted,
               median(t.position - c.carried_position) AS median_turns_back
        FROM conversation_turns t, unnest(t.carried_cited) AS u(c)
        WHERE t.position > 1 AND t.status = 'ok'
        GROUP BY c.doc_id ORDER BY follow_ups DESC, c.doc_id""")
