"""Doc-gap queue: substantive questions whose turns consulted nothing — articles to write."""

import streamlit as st

st.set_page_config(page_title="Doc gaps · Provenance Workbench", page_icon="🔎", layout="wide")

from workbench.ui.gaps import show  # noqa: E402
from workbench.ui.sidebar import sidebar  # noqa: E402

cfg = sidebar()
st.title("Doc-gap queue")
st.caption("Substantive questions whose `ok` turns consulted nothing, grouped by normalised question and corpus, "
           "most asked first. Not gaps: listing questions, failed turns, and questions another `ok` turn on the "
           "same corpus consulted a document for (the knowledge base answers them; that model missed it). "
           "View `doc_gaps`, docs/traces.md.")
show(cfg.db)
