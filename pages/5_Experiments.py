"""Experiments: named eval runs scored against their questions' expectations, side by side."""

import streamlit as st

st.set_page_config(page_title="Experiments · Provenance Workbench", page_icon="🔎", layout="wide")

from workbench.ui.experiments import show  # noqa: E402
from workbench.ui.sidebar import sidebar  # noqa: E402

cfg = sidebar()
st.title("Experiments")
st.caption("Eval runs scored against the expectations of their questions file (`workbench eval FILE --name NAME`, "
           "docs/experiments.md): pass rate, consulted precision and recall, recall@k and MRR with 95% bootstrap "
           "intervals, the settings that differ between the runs, a paired comparison question by question (exact "
           "McNemar test) and the questions whose result changed. Also `workbench runs compare A B`.")
show(cfg.db, cfg.store)
