"""The Claims expander: each claim's verdict worded as its judge earned it (the `lexical` judge measures word
overlap, so its "supported" reads "word overlap: high"), and the `llm` judge on offer when the sidebar's
provider is a real, configured model."""

from __future__ import annotations

import re
from typing import Any

import streamlit as st

from ..config import PROJECT_ROOT
from ..errors import WorkbenchError
from ..faithfulness import get_judge, judge_declares, verdict_label
from ..providers import declared, readiness
from ..render.escaping import display_value, escape_markdown
from .records import RunConfig, Turn


def llm_judge_provider(cfg: RunConfig) -> str | None:
    """The provider the `llm` judge can use: the turn's, when it is a real model (its calls are not free, unlike
    the model-free `offline`) and configured in this environment; else None."""
    try:
        if declared(cfg.provider, "free_calls") or not readiness(cfg.provider):
            return None
    except WorkbenchError:  # a provider that is no longer registered
        return None
    return cfg.provider


def _pct(v: float | None) -> str:
    return "—" if v is None else f"{v:.0%}"


def _table(faith: Any, prefix: str = "") -> list[dict[str, Any]]:
    signal = judge_declares(faith.judge, "signal")
    rows = []
    for c in faith.claims:
        row = {"claim": c.text, f"{prefix}verdict": verdict_label(faith.judge, c.verdict),
               f"{prefix}{signal + ' score' if signal else 'score'}": c.score,
               "cites": ", ".join(c.cited_doc_ids), "best span": c.best_span}
        rows.append(row)
    return rows


def _arrow(rows: list[dict[str, Any]]):
    """The claims table (`display_value`: safe to show) as an Arrow table, which `st.dataframe` sends as it is: from a
    list of rows it builds a pandas DataFrame first, about half of drawing the table on every rerun."""
    import pyarrow as pa

    return pa.Table.from_pylist(display_value(rows))


def judge_figures(judge: str) -> str | None:
    """The figures of docs/faithfulness.md on how far `judge` can be trusted (its section "How far the `lexical` judge
    can be trusted": what it measures and the figures, stated there once; links as their text); None without."""
    try:
        text = (PROJECT_ROOT / "docs" / "faithfulness.md").read_text(encoding="utf-8")
    except OSError:  # installed without the docs
        return None
    found = re.search(rf"^#+ How far the `{re.escape(judge)}` judge can be trusted\n(.*?)(?=^#)", text, re.M | re.S)
    if not found:
        return None
    figures = "\n\n".join(found.group(1).strip().split("\n\n")[:2])  # what it measures, then the figures
    return re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", figures)  # the app links nothing but http(s) citations


def show(turn: Turn) -> None:
    """Per-claim verdicts of the turn's judge (and of the `llm` judge once asked for)."""
    faith = turn.faithfulness
    if faith is None or not faith.claims:
        return
    with st.expander(f"Claims ({len(faith.claims)})", expanded=False):
        signal = judge_declares(faith.judge, "signal")
        measure = f" ({signal}, not support)" if signal else ""
        st.caption(escape_markdown(f"judge {faith.judge}{measure} · citation recall {_pct(faith.citation_recall)} · "
                                   f"citation precision {_pct(faith.citation_precision)}"))
        if faith.citation_recall is None and faith.citation_precision is None:  # claims always give a recall
            st.caption("As stored in the trace database (`claims`): citation recall and precision are not stored.")
        caveat = judge_declares(faith.judge, "caveat")
        if caveat:
            st.caption(escape_markdown(caveat))
        figures = judge_figures(faith.judge)
        if figures:
            with st.popover("How far to trust it: the figures"):
                st.markdown(figures)  # the project's own docs, not a visitor's or a model's text
        st.dataframe(_arrow(_table(faith)), hide_index=True, width="stretch")
        _llm_judge(turn)


def _llm_judge(turn: Turn) -> None:
    """A button to judge the claims with the `llm` judge over the turn's provider, and its verdicts once judged."""
    provider = llm_judge_provider(turn.config)
    if provider is None or turn.session is None or turn.answer is None:
        return
    label = turn.provider_label
    # a shared conversation's reader (`read_only`) runs nothing
    if not turn.read_only and st.button(f"Judge with the LLM ({label})", key=f"llm-judge-{turn.turn_id}",
                 help="The `llm` judge asks the model whether the cited text supports each claim (one call per "
                      "claim); its verdicts are stored beside the word-overlap ones."):
        options = {name: list(v) if isinstance(v, tuple) else v for name, v in turn.config.options}
        with st.spinner("Judging the claims with the LLM…"):
            try:
                turn.llm_faithfulness = turn.session.judge(
                    turn.answer, get_judge("llm", provider=provider, model=turn.config.model, **options))
            except WorkbenchError as exc:
                st.error(escape_markdown(f"The LLM judge could not run: {exc}"), icon="⚠️")
    llm = turn.llm_faithfulness
    if llm is not None:
        st.caption(escape_markdown(f"LLM judge ({label}, prompt {llm.judge_version}) · citation recall "
                                   f"{_pct(llm.citation_recall)} · citation precision {_pct(llm.citation_precision)}"))
        st.dataframe(_arrow(_table(llm, "LLM ")), hide_index=True, width="stretch")
