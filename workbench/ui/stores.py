"""The trace store a page opens: one of the operator's (`paths.trace_stores`), picked in the sidebar by name and
named in the address (`?store=NAME`), so a link opens the same store."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from ..config import default_db_path
from ..errors import PathNotAllowedError, WorkbenchError
from ..paths import DEFAULT_STORE, STORES_ENV, trace_stores
from ..render.escaping import display_text, escape_markdown
from ..trace.lake import check_name, is_team_store


def default_db() -> str:
    return str(default_db_path())


STORE_PARAM = "store"  # ?store=NAME: the trace store a page (and a link to it) opens, by its name


#: How much of a refused `?store=` value the refusal quotes (the value comes from the address bar).
SHOWN_STORE_CHARS = 80


def _checked(stores: dict[str, Path | str]) -> dict[str, Path | str]:
    """`stores`, each name that is not a path a team store's without a password (`lake.check_name`); else the
    operator's error, naming the store (never printing the name's password)."""
    for name, where in stores.items():
        if isinstance(where, Path):
            continue
        if not is_team_store(where):
            raise PathNotAllowedError(f"{STORES_ENV}: the store {name!r} is neither a file path nor a team store "
                                      "(ducklake:postgres:<libpq connection string>)")
        try:
            check_name(where)
        except WorkbenchError as exc:
            raise PathNotAllowedError(f"{STORES_ENV}: the store {name!r}: {exc}") from None
    return stores


def _stores() -> dict[str, Path | str]:
    """The operator's trace stores (`paths.trace_stores`); only the default one, with the operator's error on the
    page, when `$WORKBENCH_STORES` is malformed."""
    try:
        return _checked(trace_stores())
    except PathNotAllowedError as exc:
        st.error(escape_markdown(f"{exc}. Only the default trace store is offered."), icon="🚫")
        return {DEFAULT_STORE: Path(default_db())}


def _follow_store_param(stores: dict[str, Path]) -> None:
    """`?store=NAME` (a link, a new tab) chooses that store; a name the operator does not offer is refused on the
    page itself (not in the sidebar), and the store in use stays."""
    wanted = st.query_params.get(STORE_PARAM)
    if not wanted or wanted == st.session_state.get("cfg_store"):
        return
    if wanted in stores:
        st.session_state["cfg_store"] = wanted
        return
    shown = wanted if len(wanted) <= SHOWN_STORE_CHARS else wanted[:SHOWN_STORE_CHARS] + "…"
    st.error(escape_markdown(f"There is no trace store named {display_text(shown)!r} in this app: it opens only the "
                             f"stores its operator lists ({', '.join(stores)}), by name, never a path. Showing "
                             f"{st.session_state.get('cfg_store', DEFAULT_STORE)!r}."), icon="🚫")


def trace_store(sb) -> tuple[str, str | None]:
    """The trace store picked in the sidebar among the operator's (`paths.trace_stores`), by name: (its name, its
    path; None for the default). The address names it (`?store=NAME`), so a link opens the same store."""
    stores = _stores()
    _follow_store_param(stores)
    if st.session_state.get("cfg_store") not in stores:
        st.session_state["cfg_store"] = DEFAULT_STORE
    name = sb.selectbox("Trace store", list(stores), key="cfg_store", format_func=display_text,
                        help="The trace databases this app's operator offers (`default` and `$WORKBENCH_STORES`, "
                             "docs/security.md); a link to a page names the store it opens.")
    if name == DEFAULT_STORE and STORE_PARAM not in st.query_params:
        return name, None
    st.query_params[STORE_PARAM] = name
    return name, (None if name == DEFAULT_STORE else str(stores[name]))
