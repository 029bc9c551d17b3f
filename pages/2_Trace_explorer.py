"""Trace explorer: read-only SQL over the trace database, canned queries, chart and CSV."""

import streamlit as st

st.set_page_config(page_title="Trace explorer · Provenance Workbench", page_icon="🔎", layout="wide")

from workbench.ui.queries import canned, has_run_names  # noqa: E402
from workbench.ui.state import default_db, sidebar  # noqa: E402
from workbench.ui.tables import chart, on_submit, table  # noqa: E402
from workbench.ui.usage import live_export_status  # noqa: E402

cfg = sidebar()
st.title("Trace explorer")
st.caption("Read-only SQL over the trace database (DuckDB). Tables and views: docs/traces.md. "
           "Anything but SELECT is refused.")
live_export_status()
CANNED = canned(has_run_names(cfg.db or default_db()))


def _load_canned():
    st.session_state["sql"] = CANNED[st.session_state["canned"]]
    st.session_state["sql_chosen"] = True  # choosing a canned query runs it, like submitting it


st.session_state.setdefault("canned", next(iter(CANNED)))
st.session_state.setdefault("sql", CANNED[st.session_state["canned"]])
st.selectbox("Canned query", list(CANNED), key="canned", on_change=_load_canned)
with st.form("sql-form"):
    sql = st.text_area("SQL", key="sql", height=180)
    submitted = st.form_submit_button("Run query", type="primary")
result = on_submit(cfg.db, sql, submitted=submitted or st.session_state.pop("sql_chosen", False))
result.show_message()
df = result.df
if df is not None:
    st.caption(f"{len(df)} rows")
    chart(df, key="sql-chart")
    table(df, "query", key="sql")
