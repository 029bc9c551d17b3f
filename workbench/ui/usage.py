"""The Document usage page: most-used sources, retrieved-but-never-consulted, never retrieved, totals."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from .. import analysis as A
from ..analysis.usage import as_frame
from ..config import default_db_path
from ..corpus import Corpus
from ..errors import WorkbenchError
from ..render.escaping import display_text, escape_markdown
from ..trace.usage import Rows, category_totals, doc_usage, not_retrieved, unconsulted
from .audited import may_see, visible_runs
from .caches import app_corpus
from .tables import stored, table
from ..trace.lake import store_exists, where


def runs_of(db: Path | str) -> list[dict]:
    """`trace.experiments.all_runs` of the database, reused while it is unchanged (`tables.stored`)."""
    from ..trace.experiments import all_runs

    return stored(all_runs, db)


def run_labels(db: Path | str, corpus_id: str | None = None) -> dict[str, str]:
    """run_id → a run picker's label (name, corpus, dataset: `trace.experiments.run_label`, then kind and turns),
    newest first; only the runs on `corpus_id` when given; audited runs for analysts only (`audited.visible_runs`)."""
    from ..trace.experiments import run_label

    return {r["run_id"]: f"{run_label(r)} · {r['kind']} · {r['turns']} turns" for r in visible_runs(runs_of(db))
            if corpus_id is None or r["corpus"] == corpus_id}


def pick_runs(db: Path, corpus_id: str) -> list[str] | None:
    """A multiselect over the database's runs on corpus `corpus_id` the viewer may see; when nothing is picked, None
    (= every such run) for an analyst, else every run offered (audited runs left out: `audited.visible_runs`)."""
    labels = run_labels(db, corpus_id)
    picked = st.multiselect("Runs on this corpus (none picked: every run)", list(labels), key="usage_runs",
                            format_func=lambda r: display_text(labels[r]))
    return picked or (None if may_see() else list(labels))


def trace_db(db: str | None) -> Path | None:
    """The trace database's path, or None (and a message saying how to make one) when there is none yet."""

    path = Path(db or default_db_path())
    if store_exists(path):
        return path
    st.info(escape_markdown(f"No trace database at {where(path)} yet: ask a question on the chat page "
                            "(every turn is traced) or run `workbench eval …`."))
    return None


def show(db: str | None, corpus: str, corpus_label: str) -> None:
    path = trace_db(db)
    if path is None:
        return

    try:
        kb = app_corpus(corpus)
        runs = pick_runs(path, kb.corpus_id)
        if runs == []:  # nothing this viewer may count (an empty list would count every run)
            st.info("No run on this corpus yet.")
            return
        # usage is counted per corpus: only turns on the sidebar's corpus; read once per rerun, every section
        # below is computed from it
        usage = stored(doc_usage, path, runs, [kb.corpus_id])  # read again once the store changed
        _sections(usage, kb, corpus_label)
    except WorkbenchError as exc:
        st.error(escape_markdown(str(exc)), icon="⚠️")


def _sections(rows: Rows, corpus: Corpus, corpus_label: str) -> None:
    usage = as_frame(rows)
    consulted = usage[usage["consulted_turns"] > 0]
    c1, c2, c3 = st.columns(3)
    c1.metric("Documents retrieved", len(usage))
    c2.metric("Consulted at least once", len(consulted))
    c3.metric("Retrieved, never consulted", len(usage) - len(consulted))

    st.subheader("Most-used sources")
    st.caption("Ranked by the turns that consulted them (read in full, or a cited snippet): what answers "
               "really came from. Beside them: turns that retrieved them, that cited them after reading them "
               "(cited_read_turns), and that only linked them from a title-only listing (listed_link_turns, "
               "not a use).")
    if consulted.empty:
        st.info("No document was consulted in these runs.")
    else:
        st.plotly_chart(A.usage_figure(consulted), width="stretch", key="usage-top")
        table(consulted, "most-used-sources", key="usage-top")

    st.subheader("Retrieved often, never consulted")
    min_turns = st.number_input("Retrieved in at least this many turns", 1, 1000, 2, key="usage_min_turns")
    noisy = as_frame(unconsulted(rows, int(min_turns)))
    st.caption("Tools keep returning these, and the model never reads them: misleading titles or snippets, or "
               "retrieval noise. A listing answer may still link them (listed_link_turns).")
    table(noisy, "retrieved-never-consulted", key="usage-noisy")

    st.subheader("Never retrieved")
    st.caption(escape_markdown(f"Documents of the corpus chosen in the sidebar ({corpus_label}, "
                               f"{len(corpus)} documents) that no turn of these runs retrieved."))
    table(as_frame(not_retrieved(rows, corpus)), "never-retrieved", key="usage-never")

    st.subheader("Totals per category")
    st.caption(escape_markdown(f"Categories (folders) of {corpus_label}, over turns on this corpus only; counts "
                               "are document-turns. Documents the corpus no longer holds are grouped as "
                               "“(no longer in the corpus)”."))
    table(as_frame(category_totals(rows, corpus)), "usage-per-category", key="usage-totals")


def live_export_status() -> None:
    """One line per live OTLP exporter of this process ($WORKBENCH_OTLP_ENDPOINT): counts and the last error."""
    from ..trace import live

    for s in live.status():
        line = (f"Live OTLP export to {s['endpoint']} (project {s['project']}): {s['exported']} turns exported, "
                f"{s['failed']} failed, {s['dropped']} dropped, {s['pending']} pending")
        if s["last_error"]:
            line += f" · last error: {s['last_error']}"
        (st.warning if s["failed"] or s["dropped"] else st.caption)(escape_markdown(line))
