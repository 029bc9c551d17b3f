"""The side panel: the cited document opened from a citation's pill or inline link, with what the model saw or quoted
highlighted; which citation is open (`OPEN_DOC`) and the page's script component that opens it from a link."""

from __future__ import annotations

from functools import partial

import streamlit as st

from ..render.answer_links import citation_entries
from ..render.document import document_markdown
from ..render.escaping import escape_markdown, safe_url
from ..render.highlight import evidence_passages, highlight_spans
from .assets import LINK_PREFIX, LINKS_JS, LINKS_KEY, PANEL_CSS, SKELETON_CSS
from .records import Turn

OPEN_DOC = "open_doc"  # session_state key: (turn_id, citation key) shown in the side panel


_links_component = None


def page_style() -> None:
    """The chat page's own style, first thing on the page (see `inline_citation_links`): a constant, no
    visitor's text. Markdown, because `st.html` and a component's CSS reach the page later than the pills'
    skeletons of a reopened conversation."""
    with st.container(key="page-style"):  # hidden by its own style: it takes no room
        st.markdown(SKELETON_CSS, unsafe_allow_html=True)


def inline_citation_links(turns: list[Turn]) -> None:
    """Mount the component that makes the answers' inline citations open the side panel (once per page), and
    load the pills' widget before any answer needs it.

    Streamlit loads a pills widget's code the first time one is drawn and shows a grey skeleton bar until
    then (16 of them, for seconds, on a reopened conversation). A hidden pills widget drawn with the page
    loads that code before the first answer, and the CSS hides a skeleton where pills belong, so an answer's
    pills are drawn with it or not at all until they are ready."""
    global _links_component
    if _links_component is None:  # registered once per process: a second registration only warns
        _links_component = st.components.v2.component("workbench.inline_citations", js=LINKS_JS, css=PANEL_CSS,
                                                      isolate_styles=False)  # the CSS is for the page
    _links_component(key=LINKS_KEY, on_open_change=partial(_on_inline_citation, turns), height=0)
    with st.container(key="pills-preload"):
        st.pills("preload", ["·"], key="pills-preload-widget", label_visibility="collapsed", disabled=True)


def panel_targets(turn: Turn) -> dict[str, str]:
    """Citation key → the `#` link that opens it in the side panel."""
    entries = citation_entries(turn.payload) if turn.payload is not None else []
    return {e["key"]: f"#{LINK_PREFIX}{turn.turn_id}-{i}" for i, e in enumerate(entries)}


def _on_inline_citation(turns: list[Turn]) -> None:
    state = st.session_state.get(LINKS_KEY)
    target = (state.get("open") if isinstance(state, dict) else getattr(state, "open", None)) or ""
    for turn in turns:
        for key, href in panel_targets(turn).items():
            if href == f"#{target}":
                open_citation(turn, key)
                return


def open_citation(turn: Turn, key: str) -> None:
    """Show citation `key` of `turn` in the side panel, its pill selected and every other turn's cleared."""
    widget = open_key(turn)
    st.session_state[widget] = key
    on_cite(widget, turn.turn_id)


def open_key(turn: Turn) -> str:
    return f"cite-{turn.turn_id}"


def on_cite(widget_key: str, turn_id: str) -> None:
    value = st.session_state.get(widget_key)
    current = st.session_state.get(OPEN_DOC)
    if value:
        st.session_state[OPEN_DOC] = (turn_id, value)
        for key in list(st.session_state):  # one document open at a time: clear the other turns' pills
            if isinstance(key, str) and key.startswith("cite-") and key != widget_key:
                st.session_state[key] = None
    elif current and current[0] == turn_id:
        st.session_state[OPEN_DOC] = None


def _close(widget_key: str) -> None:
    st.session_state[OPEN_DOC] = None
    st.session_state[widget_key] = None


def document_panel(turns: list[Turn]) -> None:
    """The cited document opened from a citation pill, with what the model saw or quoted highlighted."""
    opened = st.session_state.get(OPEN_DOC)
    turn = next((t for t in turns if opened and t.turn_id == opened[0]), None)
    entry = None
    if turn is not None and turn.payload is not None:
        entry = next((e for e in citation_entries(turn.payload) if e["key"] == opened[1]), None)
    if entry is None or turn.session is None:
        st.caption("Click a citation under an answer to open the document here.")
        return
    doc = turn.session.corpus.get(entry["doc_id"])
    with st.container(key="doc-panel", border=True):
        with st.container(horizontal=True, vertical_alignment="top"):  # ✕ keeps its width in a narrow panel
            st.markdown(f"#### {escape_markdown(entry['title'])}", width="stretch")
            # no tooltip: at 1024 px the button can open under the pointer that clicked the pill, and a tooltip
            # then covered the title; its label says what it does
            st.button("Close", icon=":material/close:", key="close-doc", on_click=_close, args=(open_key(turn),),
                      width="content")
        meta = [f"id {entry['doc_id']}", entry.get("label") or "Source text"]
        if entry.get("n") is not None:
            meta.append(f"excerpt [{entry['n']}]")
        st.caption(escape_markdown(" · ".join(meta)))
        url = safe_url(entry.get("url"))
        if url:
            st.link_button("Open original", url)
        if doc is None:
            st.warning("This document is not in the loaded corpus any more.")
            return
        passages = evidence_passages(turn.answer.record, doc.doc_id)
        if entry.get("n") is not None:  # the cited excerpt, not every excerpt of the document
            cited = [e.text for e in turn.answer.record.excerpts if e.n == entry["n"]]
            passages = [("excerpt", t) for t in cited] + [p for p in passages if p[0] == "quoted"]
        spans = highlight_spans(doc.text, passages)
        st.caption(":orange-background[quoted in the answer] · :blue-background[passage the model was shown]")
        with st.container(height=560, key="doc-text"):
            st.markdown(document_markdown(doc.text, spans))
