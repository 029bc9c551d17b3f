"""Trace explorer: read-only SQL over the trace database, canned queries, chart and CSV (analysts only; everyone
else sees their own turns, docs/security.md)."""

import streamlit as st

st.set_page_config(page_title="Trace explorer · Provenance Workbench", page_icon="🔎", layout="wide")

from workbench.ui import identity  # noqa: E402
from workbench.ui.queries import canned, has_run_names  # noqa: E402
from workbench.ui.state import default_db, sidebar  # noqa: E402
from workbench.ui.tables import chart, on_submit, own_turns, table  # noqa: E402
from workbench.ui.usage import live_export_status  # noqa: E402

cfg = sidebar()
viewer = identity.current()
st.title("Trace explorer")


def _load_canned():
    st.session_state["sql"] = CANNED[st.session_state["canned"]]
    st.session_state["sql_chosen"] = True  # choosing a canned query runs it, like submitting it


if not viewer.analyst:
    st.caption("Your own turns, latest first. The SQL over the whole trace database is for analysts "
               "(`WORKBENCH_ANALYSTS`, docs/security.md).")
    mine = own_turns(cfg.db, viewer.owner)
    mine.show_message()
    if mine.df is not None:
        st.caption(f"{len(mine.df)} turns")
        table(mine.df, "turns", key="own-turns")
else:
    st.caption("Read-only SQL over the trace database (DuckDB). Tables and views: docs/traces.md. "
               "Anything but SELECT is refused." + ("" if viewer.signed_in else
                                                    " Without sign-in, other browsers' turns are not in it."))
    live_export_status()
    CANNED = canned(has_run_names(cfg.db or default_db()))
    st.session_state.setdefault("canned", next(iter(CANNED)))
    st.session_state.setdefault("sql", CANNED[st.session_state["canned"]])
    st.selectbox("Canned query", list(CANNED), key="canned", on_change=_load_canned)
    with st.form("sql-form"):
        sql = st.text_area("SQL", key="sql", height=180)
        submitted = st.form_submit_button("Run query", type="primary")
    result = on_submit(cfg.db, sql, submitted=submitted or st.session_state.pop("sql_chosen", False),
                       owner=viewer.sql_owner)
    result.show_message()
    df = result.df
    if df is not None:
        st.caption(f"{len(df)} rows")
        chart(df, key="sql-chart")
        table(df, "query", key="sql")
