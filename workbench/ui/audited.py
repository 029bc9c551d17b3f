"""Audited turns in the app (docs/design.md §12, docs/audit.md): turns assembled from another app's OpenInference
spans by `workbench collect` or `ingest`, shown by the same turn view as the workbench's own turns, from what the
trace store holds — the stored payload (the three sets, chips, rejections and the `audit` object), the record, and
the timeline of the spans the turn was assembled from. No corpus is needed.

The turn view (`ui/turn.py`, `ui/chips.py`, `ui/charts.py`) calls in here where an audited turn differs: its caption
(the audited app and model), its status (an unauditable turn says why and claims no set), the `audit` object in the
Provenance expander, and the timeline.
The Experiments page lists the audited runs and opens any of their turns (`ui/audited_runs.py`, which imports
this module and `ui/turn.py`, so that neither imports the other back), for analysts only: the questions are the
audited app's users'. Every text from the spans (questions, answers, titles, ids, span names,
the app's name) goes through `render.escaping.escape_markdown` into markdown, or into widgets that never parse it
(`tables.shown` for a table).
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from ..config import DEFAULT_RETRIEVER
from ..errors import WorkbenchError
from ..payload import AUDITED, Payload
from ..render.escaping import escape_markdown
from .caches import app_corpus, get_session
from .records import RunConfig, Turn
from .tables import shown

#: Turns offered in an audited run's turn picker (the earliest first; `ui/audited_runs.py`).
MAX_LISTED_TURNS = 500
#: What a viewer who is not an analyst is told wherever an audited turn would be shown (docs/security.md).
FOR_ANALYSTS = ("Audited runs hold another app's users' questions and answers: they are for analysts "
                "(`WORKBENCH_ANALYSTS`, docs/security.md).")


def may_see() -> bool:
    """Whether this run's viewer may see audited runs and turns: analysts only (docs/security.md, "Who sees what";
    without sign-in the operator, who is the analyst)."""
    from . import identity

    return identity.current().analyst


def visible_runs(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`runs` (rows with a `kind`) less the audited ones when the viewer is not an analyst."""
    from ..trace.audits import AUDIT_KIND

    return runs if may_see() else [r for r in runs if r.get("kind") != AUDIT_KIND]


def is_audited(turn: Turn) -> bool:
    return turn.payload is not None and turn.payload.audit is not None


def from_store(record: Any, payload: Payload, *, db: str, cfg: RunConfig | None = None, verification: Any = None,
               corpus: tuple[str, str] | None = None, note: str | None = None) -> Turn:
    """An audited turn as the app shows it: its stored payload (never computed again: the audit measured it from
    the spans), its record (for the answer's passages) and its spans' timeline. `corpus` ((path, label), when
    the one it was audited against is loaded) lets its cited documents open; its configuration names no corpus
    the app asks with, so a question asked after it starts a new conversation."""
    from ..session import Answer
    from ..trace.audits import span_timeline

    config = record.config
    run = config.get("run") or ""
    tcfg = RunConfig(provider=AUDITED, model=config.get("model"), retriever="-", mode=record.mode,
                     corpus=f"{AUDITED}:{run}", corpus_label=config.get("corpus_id") or "none",
                     db=(cfg.db if cfg is not None and cfg.db else db))
    turn = Turn(record.question, tcfg, note=note)
    if corpus is not None:
        turn.session = get_session(corpus[0], cfg.retriever if cfg is not None else DEFAULT_RETRIEVER, tcfg.db)
    turn.answer = Answer(record, payload, verification=verification, request={})
    turn.spans = tuple(span_timeline(db, payload.audit.trace_ids))
    return turn


def reopened(stored: Any, cfg: RunConfig, db: str) -> Turn:
    """A stored conversation's audited turn (`conversation.reopened_turn`), its documents opening when the sidebar's
    corpus is the one it was audited against."""
    hash_ = stored.record.config.get("corpus_hash")
    corpus = (cfg.corpus, cfg.corpus_label) if hash_ and _loads(cfg.corpus) == hash_ else None
    return from_store(stored.record, stored.payload, db=db, cfg=cfg, verification=stored.verification, corpus=corpus,
                      note="An audited turn: what another app did, read from its spans. A question asked now starts "
                           "a new conversation.")


def _loads(path: str) -> str | None:
    try:
        return app_corpus(path).content_hash
    except (WorkbenchError, OSError):
        return None


def caption(turn: Turn) -> bool:
    """The caption of an audited turn (the app, its model, the run, the rule; True), else nothing (False)."""
    if not is_audited(turn):
        return False
    audit, config = turn.payload.audit, turn.answer.record.config
    parts = [f"audited app {audit.service or '(no service.name)'}", f"model {config.get('model') or '?'}",
             f"run {config.get('run') or '?'}", f"rule {audit.rule}", f"{turn.recorded_ms:.0f} ms"]
    st.caption(":material/policy: " + escape_markdown(" · ".join(parts)))  # an icon of Streamlit's own font
    if turn.note:
        st.caption(escape_markdown(turn.note))
    return True


def status(payload: Payload | None) -> None:
    """An unauditable turn says why, and that it claims no set."""
    if payload is not None and payload.audit is not None and payload.audit.reason:
        st.warning(escape_markdown(f"This turn could not be audited: {payload.audit.reason}. It claims no "
                                   "retrieved, cited or consulted document (docs/audit.md)."), icon="🔒")


def no_sources(payload: Payload | None) -> str | None:
    """What the sources row says instead of chips for an unauditable turn (None: the usual)."""
    if payload is not None and payload.audit is not None and payload.audit.reason:
        return "No sources claimed: the turn is unauditable."
    return None


def details(payload: Payload) -> None:
    """In the Provenance expander: the `audit` object — where the turn came from, the documents returned yet never
    shown to a model, and the evidence for each shown one (its exposure, and which call and message showed it)."""
    audit = payload.audit
    if audit is None:
        return
    st.markdown("**Audit** (from the app's spans)")
    st.caption(escape_markdown(f"source {audit.source} · app {audit.service or '(no service.name)'} · rule "
                               f"{audit.rule} · traces {', '.join(audit.trace_ids)}"))
    if audit.reason:
        st.caption(escape_markdown(f"unauditable: {audit.reason}"))
        if audit.unjudged_citations:
            st.markdown(f"**Links not judged** ({len(audit.unjudged_citations)})")
            st.markdown("\n".join(f"- {escape_markdown(t)}" for t in audit.unjudged_citations))
            st.caption("What reached the model is hidden, so none of these is called a source or a fabrication.")
        return
    titles = {d.doc_id: d.title for d in payload.documents}
    st.markdown(f"**Never shown to the model** ({len(audit.not_shown)})")
    if audit.not_shown:
        st.markdown("\n".join(f"- {escape_markdown(d)}" for d in audit.not_shown))
        st.caption("A retriever, reranker or tool returned these, and no model input held them: not in the "
                   "allow-list.")
    else:
        st.caption("_none_: every document returned reached a model input.")
    if audit.evidence:
        st.markdown(f"**Evidence** ({len(audit.evidence)})")
        rows = [(d, titles.get(d) or "", e.exposure, e.where) for d, e in audit.evidence.items()]
        st.dataframe(shown(pd.DataFrame(rows, columns=["doc_id", "title", "exposure", "where"])), hide_index=True,
                     width="stretch", key=f"evidence-{payload.turn_id}")


def timeline_rows(turn: Turn) -> list[dict[str, Any]] | None:
    """An audited turn's timeline: its spans as received (model, tool, retriever and reranker calls); None for
    the workbench's own turns (their record gives it) and when no span was stored."""
    return list(turn.spans) if turn.spans else None
