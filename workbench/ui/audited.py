"""Audited turns in the app (docs/design.md §12, docs/audit.md): turns assembled from another app's OpenInference
spans by `workbench collect` or `ingest`, shown by the same turn view as the workbench's own turns, from what the
trace store holds — the stored payload (the three sets, chips, rejections and the `audit` object), the record, and
the timeline of the spans the turn was assembled from. No corpus is needed.

`ui/turn.py` calls in here where an audited turn differs: its caption (the audited app and model), its status (an
unauditable turn says why and claims no set), the `audit` object in the Provenance expander, and the timeline.
The Experiments page lists the audited runs and opens any of their turns (`section`), for analysts only: the
questions are the audited app's users'. Every text from the spans (questions, answers, titles, ids, span names,
the app's name) goes through `render.escaping.escape_markdown` into markdown, or into widgets that never parse it
(`tables.shown` for a table).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st

from ..errors import WorkbenchError
from ..payload import AUDITED, Payload
from ..render.escaping import display_text, escape_markdown
from .state import RunConfig, Turn, app_corpus, get_session
from .tables import shown

#: Turns offered in an audited run's turn picker (the earliest first).
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
                     db=(cfg.db if cfg is not None else db))
    turn = Turn(record.question, tcfg, elapsed_ms=float(record.latency_ms or 0.0), note=note)
    if corpus is not None:
        turn.session = get_session(corpus[0], cfg.retriever if cfg is not None else "bm25", tcfg.db)
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


# --- the Experiments page's section ------------------------------------------------------------


def section(path: Path) -> None:
    """Audited runs (the app, model, corpus, turns, unauditable ones, the experiment they were scored as) and any
    turn of one, opened whole. Analysts only (docs/security.md, "Who sees what")."""
    from ..trace.audits import audited_runs

    runs = audited_runs(path)
    if not runs:
        return
    st.subheader("Audited assistants")
    if not may_see():
        st.info(FOR_ANALYSTS, icon=":material/lock:")
        return
    st.caption("Runs of `workbench collect` and `workbench ingest` (docs/audit.md): each turn assembled from an "
               "OpenInference-instrumented app's spans. Scored ones (`--questions`) are in the leaderboard too.")
    df = pd.DataFrame([{"run": r["name"], "app": r["app"], "model": r["model"], "corpus": r["corpus"] or "none",
                        "turns": r["turns"], "unauditable": r["unauditable"], "conversations": r["conversations"],
                        "avg cited": round(r["avg_cited"] or 0, 2), "rejected citations": r["rejected_citations"],
                        "scored as": r["experiment"] or "not scored (no --questions)", "created_at": r["created_at"]}
                       for r in runs])
    st.dataframe(shown(df), hide_index=True, width="stretch", key="audited-runs")
    for r in runs:
        if not r["avg_cited"] and r["rejected_citations"]:
            st.warning(escape_markdown(
                f"{r['name'] or r['run_id'][:8]}: the app cites — {r['rejected_citations']} citation(s) — but every "
                "one was rejected (a document its model was never shown), so no document counts as cited. Open a "
                "turn: its Provenance expander says why each was rejected."), icon="⚠️")
    by_id = {r["run_id"]: r for r in runs}
    run_id = st.selectbox("Audited run", list(by_id), key="audited-run", format_func=lambda r: display_text(
        f"{by_id[r]['name'] or r[:8]} · {by_id[r]['app'] or '?'} · {by_id[r]['model'] or '?'} · "
        f"{by_id[r]['turns']} turns", " "))
    if run_id is not None:
        _open_turn(path, run_id)


def _turn_label(t: dict[str, Any]) -> str:
    where = f"{t['conversation_id']} #{t['position']} · " if t["conversation_id"] else ""
    question = display_text(t["question"] or "", " ")
    question = question if len(question) <= 70 else question[:69] + "…"
    return f"{display_text(where, ' ')}{question} · {t['status']}"


def _open_turn(path: Path, run_id: str) -> None:
    from ..trace.audits import audited_payload, audited_turns
    from ..trace.conversation_reader import read_turn
    from .turn import render_turn

    listed = audited_turns(path, run_id)[:MAX_LISTED_TURNS]
    if not listed:
        st.caption("This run has no turn.")
        return
    by_id = {t["turn_id"]: t for t in listed}
    turn_id = st.selectbox("Turn", list(by_id), key=f"audited-turn-{run_id}", format_func=lambda t: _turn_label(by_id[t]))
    stored, payload = read_turn(path, turn_id), audited_payload(path, turn_id)
    if stored is None or payload is None:
        st.warning("This turn is not in the trace database any more.", icon="⚠️")
        return
    turn = from_store(stored.record, payload, db=str(path), verification=stored.verification)
    with st.container(border=True, key="audited-turn"):
        with st.chat_message("user"):
            st.text(display_text(turn.question))
        with st.chat_message("assistant"):
            render_turn(turn, viewer=False)
