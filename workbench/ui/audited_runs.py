"""The Experiments page's audited runs (docs/audit.md): the runs of `workbench collect` and `ingest` and any turn
of one, opened whole by the chat's turn view. Apart from `ui/audited.py` because it renders with `ui/turn.py`,
which calls into `ui/audited.py`: three rooms, imports one way (tests/test_import_circles.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st

from ..render.escaping import display_text, escape_markdown
from . import audited
from .tables import shown, stored
from .turn import render_turn


def section(path: Path) -> None:
    """Audited runs (the app, model, corpus, turns, unauditable ones, the experiment they were scored as) and any
    turn of one, opened whole. Analysts only (docs/security.md, "Who sees what")."""
    from ..trace.audits import audited_runs

    runs = stored(audited_runs, path)  # read again once the store changed
    if not runs:
        return
    st.subheader("Audited assistants")
    if not audited.may_see():
        st.info(audited.FOR_ANALYSTS, icon=":material/lock:")
        return
    st.caption("Runs of `workbench collect` and `workbench ingest` (docs/audit.md): each turn assembled from an "
               "OpenInference-instrumented app's spans. Scored ones (`--questions`) are in the leaderboard too.")
    df = pd.DataFrame([{"run": r["name"], "app": r["app"], "model": r["model"], "corpus": r["corpus"] or "none",
                        "turns": r["turns"], "unauditable": r["unauditable"], "conversations": r["conversations"],
                        "avg cited": round(r["avg_cited"] or 0, 2), "rejected citations": r["rejected_citations"],
                        "scored as": r["experiment"] or "not scored (no `--questions`)", "created_at": r["created_at"]}
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

    listed = audited_turns(path, run_id)[:audited.MAX_LISTED_TURNS]
    if not listed:
        st.caption("This run has no turn.")
        return
    by_id = {t["turn_id"]: t for t in listed}
    turn_id = st.selectbox("Turn", list(by_id), key=f"audited-turn-{run_id}", format_func=lambda t: _turn_label(by_id[t]))
    stored, payload = read_turn(path, turn_id), audited_payload(path, turn_id)
    if stored is None or payload is None:
        st.warning("This turn is not in the trace database any more.", icon="⚠️")
        return
    turn = audited.from_store(stored.record, payload, db=str(path), verification=stored.verification)
    with st.container(border=True, key="audited-turn"):
        with st.chat_message("user"):
            st.text(display_text(turn.question))
        with st.chat_message("assistant"):
            render_turn(turn, viewer=False)
