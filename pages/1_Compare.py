"""Compare: one question or a whole conversation, 2–4 configurations (provider × retriever × mode) side by side."""

import streamlit as st

st.set_page_config(page_title="Compare · Provenance Workbench", page_icon="🔎", layout="wide")

from workbench.config import MAX_QUESTION_CHARS  # noqa: E402
from workbench.errors import WorkbenchError  # noqa: E402
from workbench.render.escaping import escape_markdown  # noqa: E402
from workbench.ui.compare import MAX_FOLLOWUPS, advance, followup_lines, pick_configs, show_conversations, start  # noqa: E402
from workbench.ui.sidebar import sidebar  # noqa: E402

base = sidebar()
st.title("Compare configurations")
st.caption("Every column starts from the sidebar's provider, retriever and mode. Corpus and k come from the sidebar, "
           "and so do the sidebar provider's options (e.g. fault toggles) for the columns that use it. Columns run one "
           "at a time, each with its progress; Cancel stops after the running one. Documents that not every column "
           "has are highlighted as :violet-badge[differs].")
count = st.segmented_control("Configurations", [2, 3, 4], default=2, key="cmp_count")
configs = pick_configs(base, count or 2)
with st.form("compare"):
    question = st.text_input("Question", value="How do I configure SSO?", key="cmp_question", max_chars=MAX_QUESTION_CHARS)
    followups = st.text_area(f"Follow-ups (optional, one question per line, at most {MAX_FOLLOWUPS})", key="cmp_followups",
                             placeholder="And with Okta?\nHow long does that take?", height=90,
                             max_chars=(MAX_QUESTION_CHARS + 1) * MAX_FOLLOWUPS,
                             help="Each column asks the question, then these in order as one conversation: every "
                                  "follow-up goes with that column's earlier turns as history.")
    submitted = st.form_submit_button("Run all", type="primary")
if submitted and question.strip():
    try:
        start(question.strip(), configs, followup_lines(followups))
    except WorkbenchError as exc:
        st.error(escape_markdown(str(exc)), icon="🚫")
advance()
if st.session_state.get("cmp_conversations"):
    show_conversations(st.session_state["cmp_conversations"])
