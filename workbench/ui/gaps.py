"""The Doc gaps page: the doc-gap queue (`doc_gaps_for`), filtered by run, provider and corpus."""

from __future__ import annotations

import streamlit as st

from ..analysis.usage import as_frame
from ..errors import WorkbenchError
from ..render import display_text, escape_markdown
from . import identity
from .tables import QUERY_CACHE_SECONDS, chart, db_version, table
from .usage import run_labels, runs_of, trace_db


def _filters(db) -> tuple[list[str], list[str], list[str]]:
    """Three multiselects (none picked: no restriction) over the database's runs, providers and corpora."""
    runs = runs_of(db)
    c1, c2, c3 = st.columns(3)
    providers = c1.multiselect("Providers", sorted({r["provider"] for r in runs if r["provider"]}),
                               key="gaps_providers", format_func=display_text)
    corpora = c2.multiselect("Corpora", sorted({r["corpus"] for r in runs if r["corpus"]}), key="gaps_corpora",
                             format_func=display_text)
    labels = run_labels(db)
    picked = c3.multiselect("Runs", list(labels), format_func=lambda r: display_text(labels[r]), key="gaps_runs")
    return picked, providers, corpora


@st.cache_data(show_spinner=False, ttl=QUERY_CACHE_SECONDS, max_entries=64)
def _gaps(path: str, run_ids: tuple, providers: tuple, corpora: tuple, version: tuple, owner: str | None = None):
    from ..trace import TraceReader

    return TraceReader(path).gaps(list(run_ids), list(providers), list(corpora), owner=owner)


def show(db: str | None) -> None:
    """The queue for an analyst (without sign-in: over this browser's turns and the operator's); the questions
    of other people are not shown to anyone else (docs/security.md, "Who sees what")."""
    viewer = identity.current()
    if not viewer.analyst:
        st.info("The doc-gap queue lists other people's questions: it is for analysts (`WORKBENCH_ANALYSTS`, "
                "docs/security.md).", icon=":material/lock:")
        return
    path = trace_db(db)
    if path is None:
        return
    try:
        run_ids, providers, corpora = _filters(path)
        df = as_frame(_gaps(str(path), tuple(run_ids), tuple(providers), tuple(corpora), db_version(path),
                            viewer.sql_owner))
    except WorkbenchError as exc:
        st.error(escape_markdown(str(exc)), icon="⚠️")
        return
    if df.empty:
        st.success("No gaps: every substantive question consulted at least one document.")
        return
    st.metric("Questions without a source", len(df), help="distinct normalised questions per corpus")
    chart(df[["question", "asks"]].head(20), key="gaps-chart")
    table(df, "articles-to-write", key="gaps")
