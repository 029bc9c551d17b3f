"""The Doc gaps page: the doc-gap queue (`doc_gaps_for`), filtered by run, provider, corpus and kind of gap."""

from __future__ import annotations

import streamlit as st

from ..analysis.usage import as_frame
from ..corpus import GAP_KINDS
from ..errors import WorkbenchError
from ..render.escaping import display_text, escape_markdown
from . import identity
from .tables import QUERY_CACHE_SECONDS, chart, db_version, table
from .usage import run_labels, runs_of, trace_db


#: What each kind of gap means, as the page's filter explains it (docs/traces.md, "Doc gaps").
KIND_HELP = ("retrieved_unused: a relevant document was retrieved and the answer used none (fix retrieval or the "
             "model, not the docs) · not_found: nothing relevant was retrieved (an article to write) · off_topic: "
             "most of the question's words occur nowhere in the corpus (not this knowledge base's subject)")


def _filters(db) -> tuple[list[str], list[str], list[str], list[str]]:
    """Four multiselects (none picked: no restriction) over the kinds of gap and the database's runs, providers
    and corpora."""
    kinds = st.multiselect("Kinds of gap", list(GAP_KINDS), key="gaps_kinds", help=KIND_HELP)
    runs = runs_of(db)
    c1, c2, c3 = st.columns(3)
    providers = c1.multiselect("Providers", sorted({r["provider"] for r in runs if r["provider"]}),
                               key="gaps_providers", format_func=display_text)
    corpora = c2.multiselect("Corpora", sorted({r["corpus"] for r in runs if r["corpus"]}), key="gaps_corpora",
                             format_func=display_text)
    labels = run_labels(db)
    picked = c3.multiselect("Runs", list(labels), format_func=lambda r: display_text(labels[r]), key="gaps_runs")
    return picked, providers, corpora, kinds


@st.cache_data(show_spinner=False, ttl=QUERY_CACHE_SECONDS, max_entries=64)
def _gaps(path: str, run_ids: tuple, providers: tuple, corpora: tuple, kinds: tuple, version: tuple,
          owner: str | None = None):
    from ..trace import TraceReader

    return TraceReader(path).gaps(list(run_ids), list(providers), list(corpora), list(kinds), owner=owner)


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
        run_ids, providers, corpora, kinds = _filters(path)
        df = as_frame(_gaps(str(path), tuple(run_ids), tuple(providers), tuple(corpora), tuple(kinds),
                            db_version(path), viewer.sql_owner))
    except WorkbenchError as exc:
        st.error(escape_markdown(str(exc)), icon="⚠️")
        return
    if df.empty:
        st.success("No gaps: every substantive question consulted at least one document.")
        return
    st.metric("Questions without a source", len(df), help="distinct normalised questions per corpus")
    chart(df[["question", "asks"]].head(20), key="gaps-chart")
    table(df, "articles-to-write", key="gaps")
