"""The compare page's layout: 2–4 configurations answering one question, side by side."""

from __future__ import annotations

from dataclasses import replace

import streamlit as st

from ..providers import provider_names
from ..render import SET_COLORS, SETS, display_text, escape_markdown
from ..retrieval import retriever_names
from .state import RunConfig, Turn, modes_for, protocol_picker, provider_display, provider_info, run
from .turn import render_turn


def pick_configs(base: RunConfig, count: int) -> list[RunConfig]:
    """One row of provider × retriever × mode (× tool protocol) per column; corpus and k come from the
    sidebar, and so do the sidebar provider's options, for the columns that use that provider."""
    names, rnames = provider_names(), retriever_names()
    configs = []
    cols = st.columns(count)
    for i, col in enumerate(cols):
        with col:
            st.markdown(f"**Configuration {chr(65 + i)}**")
            st.session_state.setdefault(f"cmp_provider_{i}", base.provider)
            st.session_state.setdefault(f"cmp_retriever_{i}", base.retriever)
            provider = st.selectbox("Provider", names, key=f"cmp_provider_{i}", format_func=provider_display)
            modes = modes_for(provider)
            if st.session_state.get(f"cmp_mode_{i}") not in modes:
                st.session_state[f"cmp_mode_{i}"] = modes[i % len(modes)]
            models = provider_info(provider)["models"]
            model = st.selectbox("Model", models, key=f"cmp_model_{i}_{provider}",
                                 format_func=display_text) if len(models) > 1 else None
            retriever = st.selectbox("Retriever", rnames, key=f"cmp_retriever_{i}")
            mode = st.radio("Mode", modes, key=f"cmp_mode_{i}", horizontal=True)
            protocol = protocol_picker(st, provider, f"cmp_protocol_{i}_{provider}") if mode == "agent" else None
            options = base.options if provider == base.provider else ()  # chosen for the sidebar's provider
            configs.append(replace(base, provider=provider, model=model, retriever=retriever, mode=mode,
                                   options=options, tool_protocol=protocol))
    return configs


def run_all(question: str, configs: list[RunConfig]) -> list[Turn]:
    return [run(question, cfg) for cfg in configs]


def differences(turns: list[Turn]) -> dict[str, dict[str, set[str]]]:
    """Per set, the doc ids each column has that not every other column has (what to highlight)."""
    out: dict[str, dict[str, set[str]]] = {}
    for name in SETS:
        per = [set(t.payload.get("sets", {}).get(name, [])) for t in turns]
        common = set.intersection(*per) if per else set()
        out[name] = {t.turn_id: s - common for t, s in zip(turns, per)}
    return out


def show(turns: list[Turn]) -> None:
    import plotly.graph_objects as go

    diff = differences(turns)
    fig = go.Figure()
    labels = [f"{chr(65 + i)}" for i in range(len(turns))]
    for name in SETS:
        fig.add_bar(name=name, x=labels, y=[len(t.payload.get("sets", {}).get(name, [])) for t in turns],
                    marker_color=SET_COLORS[name])
    fig.update_layout(barmode="group", height=220, margin=dict(l=0, r=0, t=10, b=0), yaxis=dict(dtick=1))
    st.plotly_chart(fig, width="stretch", config={"displayModeBar": False}, key="cmp-sizes")
    # One row per block, so answers and each of the three sets line up across the columns.
    for i, (col, turn) in enumerate(zip(st.columns(len(turns)), turns)):
        with col, st.container(key=f"cmp-col-{i}", border=True):
            st.markdown(f"### {chr(65 + i)}")
            render_turn(turn, viewer=False, details=False)
    for name in SETS:
        for turn, col in zip(turns, st.columns(len(turns))):
            docs = {d["doc_id"]: d for d in turn.payload.get("documents", [])}
            ids = turn.payload.get("sets", {}).get(name, [])
            only = diff[name].get(turn.turn_id, set())
            lines = []
            for doc_id in ids:
                title = escape_markdown(docs.get(doc_id, {}).get("title") or doc_id)
                lines.append(f"- :violet-background[{title}] :violet-badge[differs]" if doc_id in only
                             else f"- {title}")
            col.markdown(f"**{name.capitalize()}** ({len(ids)})  \n" + ("\n".join(lines) or "_none_"))
