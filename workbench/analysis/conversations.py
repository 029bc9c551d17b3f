"""Conversations in the trace store: how often follow-ups cite documents carried from earlier turns, and
which (views `conversation_turns` and `conversations`, migration m013; docs/design.md §11)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd


def _df(db: str | Path, sql: str) -> pd.DataFrame:
    from ..trace import TraceReader

    return TraceReader(db).df(sql)


def conversations(db: str | Path) -> pd.DataFrame:
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
