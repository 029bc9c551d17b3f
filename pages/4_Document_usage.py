"""Document usage: per document, the turns that retrieved, cited and consulted it."""

import streamlit as st

st.set_page_config(page_title="Document usage · Provenance Workbench", page_icon="🔎", layout="wide")

from workbench.ui.sidebar import sidebar  # noqa: E402
from workbench.ui.usage import show  # noqa: E402

cfg = sidebar()
st.title("Document usage")
st.caption("Usage accounting from the trace database (view `doc_usage`, also `workbench usage`), for the corpus "
           "chosen in the sidebar. Consulted — not retrieved, nor linked from a listing — is the honest basis for "
           "usage, billing and content decisions.")
show(cfg.db, cfg.corpus, cfg.corpus_label)
