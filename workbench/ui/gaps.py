"""The Doc gaps page: the doc-gap queue (`doc_gaps_for`), filtered by run, provider and corpus."""

from __future__ import annotations

import streamlit as st

from ..analysis.usage import as_frame
from ..errors import WorkbenchError
from ..render import display_text, escape_markdown
from .tables import chart, table
from .usage import run_labels, trace_db


def _filters(db) -> tuple[list[str], list[str], list[str]]:
    """Three multiselects (none picked: no restriction) over the database's runs, providers and corpora."""
    from ..trace.experiments import all_runs

    runs = all_runs(db)
    c1, c2, c3 = st.columns(3)
    providers = c1.multiselect("Providers", sorted({r["provider"] for r in runs if r["provider"]}),
                               key="gaps_providers", format_func=display_text)
    corpora = c2.multiselect("Corpora", sorted({r["corpus"] for r in runs if r["corpus"]}), key="gaps_corpora",
                             format_func=display_text)
    labels = run_labels(db)
    picked = c3.multiselect("Runs", list(labels), format_func=lambda r: display_text(labels[r]), key="gaps_runs")
    return picked, providers, corpora


def show(db: str | None) -> None:
    from ..trace import TraceReader

    path = trace_db(db)
    if path is None:
        return
    try:
        run_ids, providers, corpora = _filters(path)
        df = as_frame(TraceReader(path).gaps(run_ids, providers, corpora))
    except WorkbenchError as exc:
        st.error(escape_markdown(str(exc)), icon="⚠️")
        return
    if df.empty:
        st.success("No gaps: every substantive question consulted at least one document.")
        return
    st.metric("Questions without a source", len(df), help="distinct normalised questions per corpus")
    chart(df[["question", "asks"]].head(20), key="gaps-chart")
    table(df, "articles-to-write", key="gaps")
