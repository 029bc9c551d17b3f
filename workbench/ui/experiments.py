"""The Experiments page: a leaderboard of eval runs (picked by name, filtered by tag) with 95 % intervals as error
bars and the settings that differ between them as columns, the runs paired question by question (exact McNemar
test), the questions whose result changed, and each question's turn (its three sets and citations) from the trace
store.

A thin shell: the scores come from `workbench.trace.scoring` (through `analysis.experiments`), the turn
from `trace.experiments.turn_provenance`. Untrusted text (run names, tags, questions, answers, titles, ids)
goes through `escape_markdown` into markdown and through `display_text` (`tables.shown` for a table's cells
and headers) into widgets that never parse markdown, so its control characters and bidi overrides are shown
as visible escapes. `?turn=` opens only a turn of an experiment run the page lists; audited runs (another app's
users' questions) are listed and opened for analysts only.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlencode

import pandas as pd
import streamlit as st

from ..analysis.experiments import (compare_runs, diff_table, flips_table, leaderboard_figure, leaderboard_table,
                                    paired_table, shared_text)
from ..config import default_db_path
from ..paths import DEFAULT_STORE
from ..errors import WorkbenchError
from ..render.escaping import display_text, escape_markdown
from ..trace.lake import store_exists, where
from . import audited, audited_runs
from .tables import shown, stored

TURN_PARAM = "turn"  # ?turn=<turn_id> shows that turn (a turn of an experiment run only)
#: How much of a refused `?turn=` value the refusal quotes (the value comes from the address bar).
SHOWN_TURN_CHARS = 80


def turn_link(store: str) -> str:
    """The prefix of an "open turn" link: this page in the trace store named `store` (its name, never its path), so
    the link opens the same turn in a new tab."""
    return "?" + urlencode({"store": store, TURN_PARAM: ""})


def show(db: str | None, store: str = DEFAULT_STORE) -> None:
    path = Path(db or default_db_path())
    if not store_exists(path):
        st.info(escape_markdown(f"The trace store {store!r} has no database yet ({where(path)}): run")
                + " `workbench eval QUESTIONS.jsonl --name NAME` (docs/experiments.md).")
        return
    try:
        turn = st.query_params.get(TURN_PARAM)
        if turn:
            show_turn(path, turn, store)
            st.divider()
        board(path, store)
        audited_runs.section(path)
    except WorkbenchError as exc:
        st.error(escape_markdown(str(exc)), icon="⚠️")


def board(path: Path, store: str = DEFAULT_STORE) -> None:
    from ..trace.experiments import list_runs, run_label

    # read again once the store changed; an audited run's questions are the audited app's users'
    runs = audited.visible_runs(stored(list_runs, path))
    if not runs:
        st.info("No experiment runs yet: `workbench eval QUESTIONS.jsonl --name NAME` records one (docs/experiments.md).")
        return
    runs = _tag_filter(runs)
    if not runs:
        st.info("No run has every tag picked.")
        return
    labels = {(r["name"] or r["run_id"]): run_label(r) for r in runs}
    named = [key for key, r in zip(labels, runs) if r["name"]]
    if st.session_state.setdefault("exp_runs_store", str(path)) != str(path):  # another store: its two newest
        st.session_state.pop("exp_runs", None)                                  # named runs, as at first
        st.session_state["exp_runs_store"] = str(path)
    st.session_state.setdefault("exp_runs", (named or list(labels))[:2][::-1])
    st.session_state["exp_runs"] = [run for run in st.session_state["exp_runs"] if run in labels]
    picked = st.multiselect("Runs", list(labels), format_func=lambda run: display_text(labels[run]), key="exp_runs")
    if not picked:
        st.caption("Pick one or more runs.")
        return
    result = stored(compare_runs, path, list(picked), frozen=True)  # computed again once the store changed
    st.subheader("Leaderboard")
    st.plotly_chart(leaderboard_figure(result), width="stretch", key="exp-chart")
    st.dataframe(shown(leaderboard_table(result)), hide_index=True, width="stretch")
    if result.shared:
        st.caption(escape_markdown(("Same in every run: " if len(picked) > 1 else "") + shared_text(result)))
    if len(picked) < 2:
        return
    st.subheader("Paired by question")
    st.caption(escape_markdown(f"Each run against {result.runs[0].name}, line by line: the questions that flipped, "
                               "and the exact McNemar p-value over the flips (docs/experiments.md)."))
    st.dataframe(shown(paired_table(result)), hide_index=True, width="stretch")
    flips = flips_table(result)
    if len(flips):
        st.dataframe(shown(flips), hide_index=True, width="stretch")
    st.subheader(f"Questions that changed ({len(result.diff)})")
    if not result.diff:
        st.success("Every question passed or failed alike and consulted the same documents in these runs.")
        return
    df = shown(diff_table(result, link=turn_link(store)))
    config = {c: st.column_config.LinkColumn(c, display_text="open turn", width="small")
              for c in df.columns if c.endswith(": turn")}
    config["question"] = st.column_config.TextColumn("question", width="medium")
    st.dataframe(df, hide_index=True, width="stretch", column_config=config)


def _tag_filter(runs: list[dict]) -> list[dict]:
    """The runs with every tag picked in the page's tag filter (all of them when none is picked, or no run has a
    tag)."""
    from ..trace.experiments import parse_tags, tagged, tags_text

    tags = sorted({tags_text({k: v}) for r in runs for k, v in (r["tags"] or {}).items()})
    if not tags:
        return runs
    wanted = st.multiselect("Tags", tags, format_func=display_text, key="exp_tags",
                            help="Only the runs with every tag picked")
    return [r for r in runs if tagged(r, parse_tags(wanted))] if wanted else runs


def _shown_id(turn_id: str) -> str:
    return turn_id if len(turn_id) <= SHOWN_TURN_CHARS else turn_id[:SHOWN_TURN_CHARS] + "…"


def show_turn(path: Path, turn_id: str, store: str = DEFAULT_STORE) -> None:
    from ..trace.experiments import turn_provenance

    from ..trace.audits import AUDIT_KIND

    turn = turn_provenance(path, turn_id)
    if turn is not None and turn["kind"] == AUDIT_KIND and not audited.may_see():
        st.warning(escape_markdown(f"This page does not open turn {_shown_id(turn_id)} for you: "
                                   f"{audited.FOR_ANALYSTS}"), icon=":material/lock:")
        return
    if turn is None:
        st.warning(escape_markdown(f"No turn {display_text(_shown_id(turn_id))} of an experiment run in the trace store "
                                   f"{store!r}: this page opens only the turns of the runs it lists")
                   + " (`workbench runs list`).", icon="⚠️")
        return
    st.subheader("Turn")
    st.markdown(escape_markdown(f"{turn['question']}"))
    st.caption(escape_markdown(f"run {turn['run_name'] or turn['run_id'][:8]} · {turn['provider']} · "
                               f"{turn['retriever']} · {turn['mode']} · k={turn['k']} · corpus {turn['corpus']} · "
                               f"status {turn['status']} · {turn['latency_ms'] or 0:.0f} ms"))
    if turn["error"]:
        st.error(escape_markdown(turn["error"]), icon="🚫")
    with st.expander("Answer (as the model wrote it)"):
        st.text(display_text(turn["answer"] or ""))
    columns, rows = turn["documents"]
    docs = pd.DataFrame(rows, columns=columns)
    st.markdown("**Documents** — retrieved, cited, consulted (the sources row is the consulted ones)")
    st.dataframe(shown(docs.sort_values(["consulted", "cited"], ascending=False, kind="stable")), hide_index=True,
                 width="stretch")
    columns, rows = turn["citations"]
    if rows:
        st.markdown("**Citations**")
        st.dataframe(shown(pd.DataFrame(rows, columns=columns)), hide_index=True, width="stretch")
