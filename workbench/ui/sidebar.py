"""The sidebar of every page: who is signed in, the provider, model, retriever, mode, k, corpus, the provider's
options, the conversation's context and the trace store, as one `RunConfig`; the choices kept across pages."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from ..config import DEFAULT_CONTEXT_TURNS, DEFAULT_K, DEFAULT_MODE, DEFAULT_PROVIDER, DEFAULT_RETRIEVER, DEMO_CORPUS, MAX_CONTEXT_TOKENS, MAX_CONTEXT_TURNS
from ..corpus import FOLDER_SUFFIXES
from ..errors import PathNotAllowedError, WorkbenchError
from ..paths import confine
from ..providers import declared, provider_names, readiness
from ..render.escaping import display_text, escape_markdown
from ..retrieval import retriever_names
from ..types import ContextPolicy
from . import identity
from .caches import provider_caps, provider_display, provider_info
from .provider_inputs import modes_for, option_inputs, protocol_picker, typed_model
from .records import RunConfig
from .stores import trace_store
from .uploads import save_upload, session_uploads


CORPUS_SOURCES = ("Demo corpus", "Folder or JSONL path", "Upload")


#: Widget keys whose values every page keeps (Streamlit drops the state of a widget its page did not draw): the
#: sidebar's, and the Compare page's configurations, question and follow-ups (its results are session state).
KEPT = ("cfg_", "cmp_")


#: Buttons among them: a button's state cannot be set, and is no choice to keep.
_NOT_KEPT = frozenset({"cmp_cancel"})


def keep_config() -> None:
    """Keep the sidebar's and the Compare page's choices when switching pages (`KEPT`)."""
    for key in list(st.session_state):
        if isinstance(key, str) and key.startswith(KEPT) and key not in _NOT_KEPT:
            st.session_state[key] = st.session_state[key]


def sidebar() -> RunConfig:
    """The sidebar of every page (who is signed in first); returns the active configuration."""
    viewer = identity.current()
    identity.signed_in_box(viewer)
    keep_config()
    names, rnames = provider_names(), retriever_names()
    defaults = {"cfg_provider": DEFAULT_PROVIDER if DEFAULT_PROVIDER in names else names[0],
                "cfg_retriever": DEFAULT_RETRIEVER if DEFAULT_RETRIEVER in rnames else rnames[0], "cfg_mode": DEFAULT_MODE,
                "cfg_k": DEFAULT_K, "cfg_corpus_source": CORPUS_SOURCES[0]}
    for key, value in defaults.items():  # defaults through session state: no widget default clashes
        st.session_state.setdefault(key, value)
    sb = st.sidebar
    sb.header("Configuration")
    provider = sb.selectbox("Provider", names, format_func=provider_display, key="cfg_provider")
    ready = readiness(provider)
    if not ready:
        sb.warning(f"{provider_display(provider)} is not configured: {ready.hint}", icon="⚠️")
    info = provider_info(provider)
    if info["error"]:
        sb.warning(escape_markdown(info["error"]), icon="⚠️")
    if info["models"]:
        model = sb.selectbox("Model", info["models"], key=f"cfg_model_{provider}", format_func=display_text)
    else:
        default = provider_caps(provider)["model_label"]
        model = typed_model(sb, provider, sb.text_input("Model (optional)", key=f"cfg_model_{provider}",
                                                   placeholder=f"default: {default}" if default else "").strip())
    retriever = sb.selectbox("Retriever", rnames, key="cfg_retriever")
    modes = modes_for(provider)
    if st.session_state.get("cfg_mode") not in modes:
        st.session_state["cfg_mode"] = modes[0]
    mode = sb.radio("Mode", modes, horizontal=True, key="cfg_mode",
                    help="agent: tool calling with markdown links · excerpts: numbered excerpts cited as [n]")
    protocol = protocol_picker(sb, provider, f"cfg_protocol_{provider}") if mode == "agent" else None
    note = declared(provider, "agent_mode_note")
    if mode == "agent" and note and not model:
        sb.warning(escape_markdown(note), icon="⚠️")
    k = sb.slider("k (results per search / excerpts)", 1, 20, key="cfg_k")
    corpus, corpus_label = _corpus_picker(sb)
    options = option_inputs(sb, provider)
    context = _context_policy(sb)
    store, db = trace_store(sb)
    return RunConfig(provider=provider, model=model, retriever=retriever, mode=mode, k=int(k), corpus=corpus,
                     corpus_label=corpus_label, options=options, db=db, store=store, tool_protocol=protocol,
                     user_id=viewer.user_id, owner=viewer.owner, context=context)


def _context_policy(sb) -> ContextPolicy:
    """The conversation's context policy (docs/design.md §11), as `ask --context-turns` sets it, and the history's
    token budget (0: derived from the model's context); within the bounds `ContextPolicy` holds."""
    with sb.expander("Conversation context"):
        turns = st.number_input("Earlier turns kept whole (with their tool results)", min_value=0,
                                max_value=MAX_CONTEXT_TURNS, value=DEFAULT_CONTEXT_TURNS, step=1, key="cfg_context_turns",
                                help="Older turns keep only their question and answer, as on the command line")
        budget = st.number_input("History token budget (0: half the model's context)", min_value=0,
                                 max_value=MAX_CONTEXT_TOKENS, value=0, step=1000, key="cfg_context_budget",
                                 help="Within it the oldest turns are dropped first")
    return ContextPolicy(turns=int(turns), token_budget=int(budget) or None)


def _my_uploads() -> Path:
    """This viewer's uploads folder (`identity.Viewer.uploads_token`: the signed-in person's, else this
    browser's), referenced by nothing else (no other viewer can type it: `paths.confine` refuses the uploads
    folder)."""
    return session_uploads(identity.current().uploads_token)


def _corpus_picker(sb) -> tuple[str, str]:
    source = sb.radio("Corpus", CORPUS_SOURCES, key="cfg_corpus_source")
    if source == "Folder or JSONL path":
        path = sb.text_input("Corpus path", key="cfg_corpus_path", placeholder="/path/to/folder or corpus.jsonl")
        if path.strip():
            try:
                p = confine(path, "corpus path")
            except PathNotAllowedError as exc:
                sb.error(escape_markdown(str(exc)))
            else:
                if p.exists():
                    return str(p), p.name
                sb.error(escape_markdown(f"{path.strip()} does not exist; give a folder of Markdown files or a .jsonl file"))
    elif source == "Upload":
        up = sb.file_uploader("Corpus file", type=["jsonl", "zip", *(x.lstrip(".") for x in FOLDER_SUFFIXES)], key="corpus_upload")
        if up is not None:
            try:
                return str(save_upload(up.name, up.getvalue(), _my_uploads())), up.name
            except WorkbenchError as exc:
                sb.error(escape_markdown(str(exc)))
    return str(DEMO_CORPUS), "demo"
