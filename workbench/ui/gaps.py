"""The Doc gaps page: the doc-gap queue (`doc_gaps_for`), filtered by run, provider and corpus."""

from __future__ import annotations

import streamlit as st

from ..analysis.usage import as_frame
from ..errors import WorkbenchError
from ..render import display_text, escape_markdown
from .tables import chart, table
from .usage import run_label, trace_db


def _filters(runs) -> tuple[list[str], list[str], list[str]]:
    """Three multiselects (none picked: no restriction) over the database's runs, providers and corpora."""
    c1, c2, c3 = st.columns(3)
    providers = c1.multiselect("Providers", sorted(set(runs["provider"].dropna())), key="gaps_providers",
                               format_func=display_text)
    corpora = c2.multiselect("Corpora", sorted(set(runs["corpus_id"].dropna())), key="gaps_corpora",
                             format_func=display_text)
    labels = {r.run_id: run_label(r) for r in runs.itertuples(index=False)}
    picked = c3.multiselect("Runs", list(labels), format_func=lambda r: display_text(labels[r]), key="gaps_runs")
    return picked, providers, corpora


def show(db: str | None) -> None:
    from ..trace import TraceReader
    from ..trace.usage import runs_overview

    path = trace_db(db)
    if path is None:
        return
    try:
        run_ids, providers, corpora = _filters(as_frame(runs_overview(path)))
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
