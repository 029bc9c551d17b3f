"""Draw one turn: the configuration it ran with, the answer with clickable citations, and its expanders (provenance,
tool calls, claims). Its pills, headline and sources row are `ui/chips.py`'s, its charts `ui/charts.py`'s, the side
panel `ui/panel.py`'s.

All text from the corpus or the model goes through `render.escaping.escape_markdown` / `render.answer_links.answer_markdown`
(or a widget that never parses markdown, such as `st.json` and `st.dataframe`).
"""

from __future__ import annotations

import streamlit as st

from ..payload import DocumentEntry, Payload, TurnConfig
from ..types import TRUNCATED, HistoryTurn
from ..render.answer_links import answer_markdown, rejection_text
from ..render.escaping import display_text, display_value, escape_markdown
from ..render.sources import SETS
from ..render.timeline import call_signature
from . import audited, verify as verification
from .charts import call_timeline, sizes_figure
from .chips import carried_text, citation_buttons, sources_row, trust_headline
from .panel import OPEN_DOC, panel_targets
from .records import Turn


def config_caption(turn: Turn) -> None:
    if audited.caption(turn):  # an audited turn: the app it audited, not a configuration of ours
        return
    cfg = turn.config
    ran = turn.payload.config if turn.payload is not None else TurnConfig()
    described = cfg.describe(turn.provider_label, ran.model_label, ran.tool_protocol)
    st.caption(escape_markdown(f"⚙ {described} · {turn.recorded_ms:.0f} ms"))
    if turn.note:
        st.warning(escape_markdown(turn.note), icon="⚠️")


def render_turn(turn: Turn, *, viewer: bool = True, details: bool = True) -> None:
    """The assistant side of a turn (answer, citations, sources, expanders)."""
    config_caption(turn)
    if details:
        verification.run_pending(turn)  # before the chips are drawn, so they carry the verdicts
    payload = turn.payload
    if turn.error:
        st.error(escape_markdown(f"The turn failed: {turn.error}"), icon="🚫")
    elif payload is not None and payload.status == TRUNCATED:
        st.warning(escape_markdown(f"This answer is incomplete: {payload.error}"), icon="✂️")
    audited.status(payload)
    trace_error = getattr(turn.answer, "trace_error", None)
    if trace_error:
        st.warning(escape_markdown(f"This turn was not traced: {trace_error}"), icon="⚠️")
    if payload is not None and payload.answer:
        st.markdown(answer_markdown(payload, panel_targets(turn) if viewer else None))
    elif not turn.error:
        st.info("The provider returned an empty answer.")
    if payload is None:
        return
    if viewer:
        citation_buttons(turn)
    trust_headline(turn)
    sources_row(turn)
    if details:
        verification.hidden_influence(payload)
        verification.verify_action(turn)
        with st.expander("Provenance", expanded=False):
            provenance_sets(payload)
            carried_list(turn)
            verification.explain(turn)
            audited.details(payload)
        with st.expander(f"Tool calls ({len(payload.tool_calls)})", expanded=False):
            tool_calls(payload)
            if turn.answer is not None:
                call_timeline(turn)
        claims(turn)


def carried_documents(turn: Turn) -> list[tuple[DocumentEntry, HistoryTurn | None]]:
    """The turn's carried documents (docs/design.md §11), each with the earlier turn (`HistoryTurn`) that read
    it, or None when the record does not hold that turn, in the order of the turns."""
    record = getattr(turn.answer, "record", None)
    earlier = {h.record.turn_id: h for h in getattr(record, "history", ())}
    documents = turn.payload.documents if turn.payload is not None else ()
    carried = [d for d in documents if d.carried_from]
    carried.sort(key=lambda d: d.carried_position or 0)
    return [(d, earlier.get(d.carried_from)) for d in carried]


def carried_list(turn: Turn) -> None:
    """In the Provenance expander: each document this turn had from an earlier one, with that turn."""
    carried = carried_documents(turn)
    if not carried:
        return
    lines = []
    for d, h in carried:
        asked = f" (“{display_text(h.record.question, ' ')}”)" if h is not None else ""
        lines.append(f"- **{escape_markdown(d.title or d.doc_id)}** · "
                     f"{escape_markdown(carried_text(d) + asked)} · `{d.exposure}`")
    st.markdown(f"**Carried from earlier turns** ({len(carried)})  \n" + "\n".join(lines))


def _call_name(payload: Payload, idx: int | None) -> str:
    calls = payload.tool_calls
    if idx is None:
        return "excerpt"
    if 0 <= idx < len(calls):
        return f"#{idx + 1} {calls[idx].name}"
    return f"#{idx + 1}"


def provenance_sets(payload: Payload) -> None:
    """Retrieved | cited | consulted side by side, each document with why it is (not) consulted."""
    if audited.no_sources(payload):  # unauditable: it claims no set (the audit part of the expander says why)
        return
    docs = {d.doc_id: d for d in payload.documents}
    # Beside an open side panel the chat is too narrow for three columns (at 1024 px a column is ~70 px and
    # words break mid-word): the sets then stand one under another.
    cols = [st.container() for _ in SETS] if st.session_state.get(OPEN_DOC) else st.columns(3)
    for col, name in zip(cols, SETS):
        ids = getattr(payload.sets, name)
        with col:
            st.markdown(f"**{name.capitalize()}** ({len(ids)})")
            lines = []
            for doc_id in ids:
                d = docs.get(doc_id)
                if d is None:  # a set member without its document entry: only the id is known
                    lines.append(f"- **{escape_markdown(doc_id)}**  \n  `?` · excerpt · ")
                    continue
                via = _call_name(payload, d.tool_call)
                if d.excerpts:
                    via = "excerpt " + ", ".join(f"[{n}]" for n in d.excerpts)
                if d.carried_from:  # its tool call or excerpt is the earlier turn's (the reason names it)
                    via = "carried"
                gen = f" · {d.label}" if d.label and d.label != "Source text" else ""
                lines.append(f"- **{escape_markdown(d.title or doc_id)}**{escape_markdown(gen)}  \n"
                             f"  `{d.exposure}` · {escape_markdown(via)} · "
                             f"{escape_markdown(d.reason or '')}")
            if name == "cited":
                for r in payload.rejected_citations:
                    lines.append(f"- :orange-badge[⚠ rejected] {escape_markdown(str(r.target))}  \n"
                                 f"  {escape_markdown(rejection_text(r))}")
            st.markdown("\n".join(lines) if lines else "_none_")
    sizes = tuple(len(getattr(payload.sets, n)) for n in SETS) + (len(payload.rejected_citations),)
    st.plotly_chart(sizes_figure(sizes), width="stretch", config={"displayModeBar": False},
                    key=f"sets-{payload.turn_id}")


def tool_calls(payload: Payload) -> None:
    calls = payload.tool_calls
    if not calls:
        st.caption("No tool calls (excerpt mode hands the model numbered excerpts instead).")
        return
    for i, c in enumerate(calls):
        latency = f"{c.latency_ms:.1f} ms" if c.latency_ms is not None else "—"
        st.markdown(f"**{i + 1}.** {escape_markdown(call_signature(c.name, c.args))} · "
                    f"`{c.exposure}` · {latency} · {len(c.doc_ids)} documents")
        st.json(display_value({"args": dict(c.args), "returned": list(c.doc_ids)}), expanded=False)
        if c.error:
            st.warning(escape_markdown(f"error: {c.error}"), icon="⚠️")
        if c.cut:
            st.caption(escape_markdown(f"✂ cut to fit the model's context: {c.cut.get('reason', '')}"))


def claims(turn: Turn) -> None:
    """Per-claim faithfulness verdicts, worded as the judge earned them (`ui/claims.py`)."""
    from .claims import show

    show(turn)
