"""Trace explorer: read-only SQL over the trace database, canned and saved queries, chart and CSV (analysts
only; everyone else sees their own turns, docs/security.md)."""

import streamlit as st

st.set_page_config(page_title="Trace explorer · Provenance Workbench", page_icon="🔎", layout="wide")

from workbench.render.escaping import display_text, escape_markdown  # noqa: E402
from workbench.ui import identity  # noqa: E402
from workbench.ui.queries import choices, linked_choice, save_fields, save_or_delete, show_choice  # noqa: E402
from workbench.ui.stores import default_db  # noqa: E402
from workbench.ui.sidebar import sidebar
from workbench.ui.tables import chart, on_submit, own_turns, table  # noqa: E402
from workbench.ui.usage import live_export_status  # noqa: E402

cfg = sidebar()
viewer = identity.current()
st.title("Trace explorer")


def own() -> None:
    """What someone who is not an analyst gets: their own turns, no SQL."""
    st.caption("Your own turns, latest first. The SQL over the whole trace database is for analysts "
               "(`WORKBENCH_ANALYSTS`, docs/security.md).")
    mine = own_turns(cfg.db, viewer.owner)
    mine.show_message()
    if mine.df is not None:
        st.caption(f"{len(mine.df)} turns")
        table(mine.df, "turns", key="own-turns")


def explorer() -> None:
    st.caption("Read-only SQL over the trace database (DuckDB). Tables and views: docs/traces.md. "
               "Anything but SELECT is refused." + ("" if viewer.signed_in else
                                                    " Without sign-in, other browsers' turns are not in it."))
    live_export_status()
    db = cfg.db or default_db()
    queries = choices(db)
    if flash := st.session_state.pop("query_flash", None):
        st.success(escape_markdown(flash), icon="💾")

    picked = st.session_state.pop("query_next", None) or linked_choice(queries)
    if picked in queries:
        show_choice(picked, queries)
    elif st.session_state.get("canned") not in queries:
        show_choice(next(iter(queries)), queries)
        st.session_state["sql_chosen"] = False
    st.selectbox("Query", list(queries), key="canned", format_func=display_text,
                 on_change=lambda: show_choice(st.session_state["canned"], queries),
                 help="The canned queries, then the ones saved in this trace database (Saved · …)")
    with st.form("sql-form"):
        sql = st.text_area("SQL", key="sql", height=180)
        submitted = st.form_submit_button("Run query", type="primary")
        save_name, save = save_fields()
    result = on_submit(cfg.db, sql, submitted=submitted or st.session_state.pop("sql_chosen", False),
                       owner=viewer.sql_owner)
    result.show_message()
    df = result.df
    if df is not None:
        st.caption(f"{len(df)} rows")
        chart(df, key="sql-chart")
        table(df, "query", key="sql")
    if (shown_next := save_or_delete(db, sql, st.session_state["canned"], save_name, save,
                                                 by=viewer.user_id)) is not None:
        st.session_state["query_next"] = shown_next
        st.rerun()


if viewer.analyst:
    explorer()
else:
    own()
