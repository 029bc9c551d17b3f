"""Provenance Workbench: ask the knowledge base and see which documents an answer really came from.

Run with `streamlit run app.py`. With Streamlit's `[auth]` secrets configured, every visitor signs in first
(`workbench.ui.identity`, docs/security.md). Thin by design: the library (`workbench.session`, `workbench.render`)
does the work; `workbench.ui` lays it out. This file is the navigation (the chat page first, named
"Chat" rather than after this file) and the chat page itself.
"""

import streamlit as st

st.set_page_config(page_title="Provenance Workbench", page_icon="🔎", layout="wide")

from workbench.render.escaping import display_text, escape_markdown  # noqa: E402
from workbench.config import MAX_QUESTION_CHARS  # noqa: E402
from workbench.ui.asking import example_question, warm  # noqa: E402  (after set_page_config)
from workbench.ui.sidebar import sidebar  # noqa: E402
from workbench.ui import identity, open_conversation, shared_view  # noqa: E402
from workbench.ui.panel import document_panel, inline_citation_links, page_style  # noqa: E402
from workbench.ui.turn import render_turn  # noqa: E402


def chat() -> None:
    page_style()
    cfg = sidebar()
    problem = warm(cfg)  # load the corpus and index now, so the first question is fast
    if problem:
        st.error(problem, icon="🚫")
    if shared_view.shared_view(cfg):  # ?share=TOKEN: a conversation shared with this viewer, read-only
        return
    open_conversation.follow_address(cfg)  # ?conversation=ID (a reload, a link) reopens it from the trace database
    turns = open_conversation.turns()

    st.title("Provenance Workbench")
    st.caption("Which documents did an answer really come from? Retrieved, cited and consulted — side by side.")
    controls = st.container()  # drawn once the question is asked: "New conversation" is on offer from the first turn

    # The side panel takes room only while a cited document is open. The chat is the first column either
    # way: the same place in the page, so opening or closing the panel keeps its expanders and scroll.
    opened = bool(st.session_state.get("open_doc"))
    columns = st.columns([3, 2] if opened else [1], gap="medium")
    chat_area, panel = columns[0], (columns[1] if opened else None)
    example = example_question(cfg)  # from the loaded corpus's titles
    # the example is made from a document's title: plain text in the placeholder (its aria-label too), literal
    # markdown in the hint below
    question = st.chat_input(f"Ask the knowledge base, e.g. “{display_text(example)}”" if example
                             else "Ask the knowledge base",
                             key="question", max_chars=MAX_QUESTION_CHARS)  # one input, whichever corpus names its placeholder
    if question:
        with st.spinner("Answering…"):
            open_conversation.ask(question, cfg)  # a follow-up: the earlier turns go with it as history
    with controls:
        open_conversation.controls(cfg)  # "New conversation", "Open a past conversation"
    inline_citation_links(turns)

    with chat_area:
        if not turns:
            st.info((f"Try “{escape_markdown(example)}” (an answer with sources) or " if example else "Try ")
                    + "“Which articles do you have?” (a listing: working links, no sources row).")
        for turn in turns:
            with st.chat_message("user"):
                st.text(display_text(turn.question))
            with st.chat_message("assistant"):
                render_turn(turn)

    if panel is not None:
        with panel:
            document_panel(turns)


identity.gate()  # with `[auth]` configured: sign in first; no page, chat or trace data before (docs/security.md)
st.navigation([
    # Material icons ship with Streamlit's own font (emoji need a system font a headless box may lack).
    st.Page(chat, title="Chat", icon=":material/chat:", default=True),
    st.Page("pages/1_Compare.py", title="Compare", icon=":material/compare_arrows:", url_path="Compare"),
    st.Page("pages/2_Trace_explorer.py", title="Trace explorer", icon=":material/database:", url_path="Trace_explorer"),
    st.Page("pages/3_Doc_gaps.py", title="Doc gaps", icon=":material/edit_note:", url_path="Doc_gaps"),
    st.Page("pages/4_Document_usage.py", title="Document usage", icon=":material/bar_chart:",
            url_path="Document_usage"),
    st.Page("pages/5_Experiments.py", title="Experiments", icon=":material/leaderboard:", url_path="Experiments"),
]).run()
