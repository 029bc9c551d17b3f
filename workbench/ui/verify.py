"""An answer's "Verify sources" action, its verdict chips and the verdicts explained (docs/design.md §9).

The work is `Session.verify`; this module only asks, runs it under a spinner and shows the result.
For a provider whose calls cost something (every provider but one declaring `free_calls`), the
action first says how many re-runs and about how many model calls it will make, and runs only once
confirmed. Every text from the corpus or a model goes through `escape_markdown`.
"""

from __future__ import annotations

import shlex
from typing import Any

import streamlit as st

from ..errors import WorkbenchError
from ..payload import Payload, RerunSummary
from ..providers import declared
from ..render.escaping import escape_markdown
from ..render.sources import VERDICT_LABELS, VERDICT_MEANINGS, by_verdict, doc_titles, or_unknown, verdicts
from ..verify import DEFAULT_BUDGET, pinned_options, plan, unpinned
from .records import Turn

#: Badge colour per verdict (Streamlit's named colours).
VERDICT_COLORS = {"load_bearing": "green", "decorative": "gray", "hidden_influence": "orange", "no_effect": "gray",
                  "unstable": "violet"}
MAX_BUDGET = 50


def _keys(turn: Turn) -> dict[str, str]:
    tid = turn.turn_id
    return {name: f"verify-{name}-{tid}" for name in ("ask", "pending", "budget", "error", "go", "run", "cancel")}


def can_verify(turn: Turn) -> bool:
    """An answered turn with what its re-runs need (its session, and the provider and options it was asked with:
    a reopened turn has them when its corpus is loaded and its provider configured, `open_conversation.rerun_request`)
    that consulted something, not verified yet (an answer that read nothing, a listing or "I could not find …",
    has no source to verify)."""
    p = turn.payload
    return (turn.session is not None and bool(getattr(turn.answer, "request", None))
            and turn.error is None and p is not None and p.status == "ok"
            and bool((p.answer or "").strip()) and bool(p.sets.consulted) and p.verification is None)


def run_pending(turn: Turn) -> None:
    """Verify the turn now if the user asked for it (before its chips are drawn, so they carry the verdicts)."""
    keys = _keys(turn)
    budget = st.session_state.pop(keys["pending"], None)
    if budget is None or not can_verify(turn):
        return
    label = turn.provider_label
    with st.spinner(f"Verifying by ablation: up to {budget} re-runs with {label}…"):
        try:
            turn.answer = turn.session.verify(turn.answer, budget=budget)
        except WorkbenchError as exc:
            st.session_state[keys["error"]] = str(exc)


def _request(keys: dict[str, str], budget: int) -> None:
    st.session_state[keys["pending"]] = budget
    st.session_state[keys["ask"]] = False


def _confirm(keys: dict[str, str]) -> None:
    _request(keys, int(st.session_state.get(keys["budget"], DEFAULT_BUDGET)))


def _set(key: str, value: Any) -> None:
    st.session_state[key] = value


def verify_action(turn: Turn) -> None:
    """The "Verify sources" button, and for a provider whose calls cost, the cost and a confirmation first."""
    keys = _keys(turn)
    error = st.session_state.pop(keys["error"], None)
    if error:
        st.error(escape_markdown(f"Verification failed: {error}"), icon="🚫")
    if not can_verify(turn):
        return
    free = declared(turn.config.provider, "free_calls")
    helptext = "Re-run this turn without each source and say which ones the answer depended on (docs/design.md §9)."
    if free:
        st.button("Verify sources", key=keys["go"], help=helptext, on_click=_request, args=(keys, DEFAULT_BUDGET))
        return
    if not st.session_state.get(keys["ask"]):
        st.button("Verify sources", key=keys["go"], help=helptext, on_click=_set, args=(keys["ask"], True))
        return
    with st.container(border=True, key=f"verify-confirm-{turn.turn_id}"):
        budget = st.number_input("Re-runs at most (the control included)", min_value=1, max_value=MAX_BUDGET,
                                 value=DEFAULT_BUDGET, step=1, key=keys["budget"])
        to_run, skipped = plan(turn.payload, int(budget))
        reruns = 1 + len(to_run)
        per_turn = max(1, len(turn.answer.record.model_calls))
        label = turn.provider_label
        over = f"; {len(skipped)} more candidates are over the budget and get no verdict" if skipped else ""
        st.warning(escape_markdown(
            f"This costs real model calls. Verifying re-runs this turn {reruns} times with {label}: once with "
            f"nothing withheld (the control), then once without each of {len(to_run)} documents{over}. The "
            f"original turn made {per_turn} model call{'s' if per_turn != 1 else ''}, so expect about "
            f"{reruns * per_turn} extra calls."), icon="💸")
        schema, asked = declared(turn.config.provider, "options_schema"), turn.answer.request.get("options", {})
        differs = unpinned(schema, asked)
        if differs:
            pinned = pinned_options(schema, asked)[1]
            st.info(escape_markdown(
                "The re-runs use " + ", ".join(f"{k} {v}" for k, v in pinned.items()) + " so that they are "
                "reproducible, but this turn was asked with " + ", ".join(
                    f"{k} {'(unset)' if v is None else v}" for k, v in differs.items()) + ": the control may not "
                "reproduce it, and then every verdict is unstable. To verify reliably, set those options in the "
                "sidebar and ask again."), icon="ℹ️")
        go, cancel = st.columns(2)
        go.button(f"Run {reruns} re-runs", key=keys["run"], type="primary", on_click=_confirm, args=(keys,))
        cancel.button("Cancel", key=keys["cancel"], on_click=_set, args=(keys["ask"], False))


def verdict_badge(verdict: str, text: str | None = None) -> str:
    """A badge in the verdict's colour reading `text` (default: the verdict's label)."""
    return f":{VERDICT_COLORS[verdict]}-badge[{escape_markdown(text or VERDICT_LABELS[verdict])}]"


def badge(doc_id: str, text: str, judged: dict[str, str]) -> str:
    """A source chip: green, or when verified its verdict appended and the verdict's colour."""
    verdict = judged.get(doc_id)
    if verdict is None:
        return f":green-badge[{escape_markdown(text)}]"
    return verdict_badge(verdict, f"{text} · {VERDICT_LABELS[verdict]}")


def hidden_influence(payload: Payload) -> None:
    """Documents that were not sources yet changed the answer: shown beside the sources row."""
    judged = verdicts(payload)
    titles = doc_titles(payload)
    hidden = [d for d, v in judged.items() if v == "hidden_influence"]
    if hidden:
        st.markdown("**Hidden influence** " + " ".join(badge(d, titles.get(d, d), judged) for d in hidden))


def explain(turn: Turn) -> None:
    """The Provenance expander's verification part: the method, the control, the cost and every verdict
    with what it means and why this document got it; unverified, how it can be verified (`unverified`)."""
    payload = turn.payload
    v = payload.verification
    st.markdown("**Verification by ablation**")
    if v is None:
        unverified(turn)
        return
    control = v.control or RerunSummary()
    tokens = v.tokens_in, v.tokens_out
    cost = (f"{or_unknown(v.extra_turns)} re-runs · {or_unknown(v.extra_calls)} extra model calls"
            + (f" · {tokens[0]} + {tokens[1]} tokens" if None not in tokens else "")
            + (f" · {v.latency_ms:.0f} ms" if v.latency_ms is not None else ""))
    st.caption(escape_markdown(f"{v.method} · judge {v.judge} · similarity threshold "
                               f"{v.similarity_threshold} · {cost}"))
    st.markdown(escape_markdown(control.reason or ("control stable" if v.control_stable else "control unstable")))
    titles = doc_titles(payload)
    details = v.details or {}
    lines = []
    for verdict, _, docs in by_verdict(payload):
        lines.append(f"- {verdict_badge(verdict)} {escape_markdown(VERDICT_MEANINGS[verdict])}")
        for d in docs:
            why = details.get(d, RerunSummary()).reason or ""
            lines.append(f"    - **{escape_markdown(titles.get(d, d))}**: {escape_markdown(why)}")
    unjudged = [*(v.skipped or ()), *(v.failed or ())]
    if unjudged:
        lines.append(f"- :gray-badge[no verdict] {len(unjudged)} candidate(s): "
                     + escape_markdown(" · ".join(f"{titles.get(d, d)} ({details.get(d, RerunSummary()).status})"
                                                  for d in unjudged)))
    st.markdown("\n".join(lines) if lines else "_no candidates_")


def unverified(turn: Turn) -> None:
    """Not verified: what "Verify sources" would do when the turn offers it; for an audited turn (its model is another
    app's) the exact `workbench verify` command that replays it; otherwise why it cannot be verified here."""
    payload = turn.payload
    if can_verify(turn):
        st.caption("Not verified: “Verify sources” re-runs the turn without each source and says which ones the "
                   "answer really depended on (docs/design.md §9).")
    elif payload.audit is not None:
        st.caption("Not verified. An audited turn's model is the audited app's, so it is verified by replaying its "
                   "final model call at a server that runs the same model (docs/audit.md), from a terminal:")
        st.code(verify_command(turn.turn_id, turn.config.db), language="bash")
    elif not payload.sets.consulted:
        st.caption("Nothing to verify: the answer read no source.")
    else:
        st.caption("Not verified, and it cannot be verified here: its corpus is not loaded or its provider is not "
                   "configured in this app (docs/app.md, “Verifying a reopened turn”).")


#: The command that verifies an audited turn by replay (a whole command, so it keeps its flags: tests/test_library_words.py).
VERIFY_COMMAND = "`.venv/bin/python -m workbench verify --turn {turn} --endpoint URL`"
IN_STORE = "` --db {db}`"


def verify_command(turn_id: str, db: str | None) -> str:
    """The command that verifies an audited turn by replay; the endpoint is the reader's to fill in."""
    command = VERIFY_COMMAND.format(turn=shlex.quote(turn_id)).strip("`")
    return command + (IN_STORE.format(db=shlex.quote(str(db))).strip("`") if db else "")
