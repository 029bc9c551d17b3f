"""Doc-gap queue: substantive questions whose turns consulted nothing — articles to write."""

import streamlit as st

st.set_page_config(page_title="Doc gaps · Provenance Workbench", page_icon="🔎", layout="wide")

from workbench.ui.state import sidebar  # noqa: E402
from workbench.ui.tables import chart, read, table  # noqa: E402

cfg = sidebar()
st.title("Doc-gap queue")
st.caption("Substantive questions whose turn consulted nothing, grouped by normalised question, most asked "
           "first. Listing questions and failed turns are not gaps (view `doc_gaps`, docs/traces.md).")
df = read(cfg.db, "SELECT question, asks, runs, first_seen, last_seen, max_retrieved, last_turn_id "
                  "FROM doc_gaps", user=False)
if df is not None:
    if df.empty:
        st.success("No gaps: every substantive question consulted at least one document.")
    else:
        st.metric("Questions without a source", len(df), help="distinct normalised questions")
        chart(df[["question", "asks"]].head(20), key="gaps-chart")
        table(df, "articles-to-write", key="gaps")
