"""Canned read-only queries for the trace explorer, over the tables and documented views of docs/traces.md.

The comparisons group by every field of a run's configuration (provider, model, retriever, mode, k, tool
protocol, and the provider options, `faults` included), so two providers with the same retriever, one
retriever at two values of k, or a run with a fault beside a clean one, are two rows;
the run comparison groups by run, named by its experiment name (`eval --name`, table `experiments` of
migration m011) where the trace database has one.
"""

from __future__ import annotations

from urllib.parse import quote

import streamlit as st

from ..errors import WorkbenchError
from ..render.escaping import display_text, escape_markdown
from ..trace.experiments import RUN_OPTIONS_SQL, has_experiments

#: A run's configuration, as (expression, column): what a comparison groups by. The provider options come from
#: the run's recorded configuration (secrets are never recorded), as compact JSON text.
_CONFIG_FIELDS = (("r.provider", "provider"), ("r.model", "model"), ("r.retriever", "retriever"), ("r.mode", "mode"),
                  ("r.k", "k"), ("r.tool_protocol", "tool_protocol"),
                  (RUN_OPTIONS_SQL, "options"))
CONFIG = ", ".join(expr if expr.endswith(f".{name}") else f"{expr} AS {name}" for expr, name in _CONFIG_FIELDS)
_CONFIG_GROUP = ", ".join(expr for expr, _ in _CONFIG_FIELDS)

_MEASURES = """count(*) AS turns,
       round(avg((t.status <> 'ok')::INTEGER), 3) AS error_rate,
       round(median(t.latency_ms), 1) AS median_latency_ms,
       round(avg(t.n_retrieved), 2) AS avg_retrieved, round(avg(t.n_cited), 2) AS avg_cited,
       round(avg(t.n_consulted), 2) AS avg_consulted,
       round(sum(t.n_consulted) / nullif(sum(t.n_retrieved), 0), 3) AS consulted_share,
       round(avg((t.n_rejected > 0)::INTEGER), 3) AS rejected_turn_rate,
       round(avg((t.n_consulted = 0)::INTEGER) FILTER (WHERE t.question_kind = 'substantive' AND t.status = 'ok'), 3)
           AS gap_rate"""


def canned(run_names: bool = False) -> dict[str, str]:
    """The canned queries; `run_names` when the database has the `experiments` table (run names)."""
    # a run's name: its experiment name, else (an audit run) the name `collect`/`ingest` gave it, else its id
    run = ("coalesce(e.name, json_extract_string(r.config_json, '$.run'), r.run_id)" if run_names
           else "coalesce(json_extract_string(r.config_json, '$.run'), r.run_id)")
    names = "\nLEFT JOIN experiments e USING (run_id)" if run_names else ""
    return {
        "Set sizes by configuration": f"""SELECT {CONFIG}, count(*) AS turns,
       round(avg(t.n_retrieved), 2) AS retrieved, round(avg(t.n_cited), 2) AS cited,
       round(avg(t.n_consulted), 2) AS consulted
FROM turns t JOIN runs r USING (run_id)
GROUP BY ALL
ORDER BY turns DESC""",
        "Rejected citations over time": """SELECT date_trunc('hour', t.started_at) AS hour,
       count(*) FILTER (WHERE NOT c.valid AND c.reason = 'not_retrieved') AS not_retrieved,
       count(*) FILTER (WHERE NOT c.valid AND c.reason = 'out_of_range') AS out_of_range,
       count(*) FILTER (WHERE c.valid) AS valid
FROM citations c JOIN turns t USING (turn_id)
GROUP BY 1
ORDER BY 1""",
        "Tool usage": """SELECT name, exposure, count(*) AS calls, round(median(latency_ms), 3) AS median_ms,
       round(avg(n_results), 2) AS avg_results, count(error) AS errors
FROM tool_calls
GROUP BY ALL
ORDER BY calls DESC""",
        "Configuration comparison": f"""SELECT {CONFIG}, count(DISTINCT t.run_id) AS runs,
       {_MEASURES}
FROM turns t JOIN runs r USING (run_id)
GROUP BY ALL
ORDER BY turns DESC""",
        "Run comparison": f"""SELECT {run} AS run, {CONFIG},
       {_MEASURES}
FROM turns t JOIN runs r USING (run_id){names}
GROUP BY r.run_id, {run}, {_CONFIG_GROUP}
ORDER BY min(t.started_at)""",
        "Latest turns": """SELECT started_at, provider, retriever, mode, question, status,
       n_retrieved, n_cited, n_consulted, n_rejected
FROM turn_sets
ORDER BY started_at DESC
LIMIT 50""",
        "Audited assistants": f"""SELECT {run} AS run, json_extract_string(r.config_json, '$.app') AS app, r.model,
       count(*) AS turns, count(*) FILTER (WHERE t.status = 'unauditable') AS unauditable,
       round(avg(t.n_retrieved), 2) AS avg_retrieved, round(avg(t.n_cited), 2) AS avg_cited,
       sum(t.n_rejected) AS rejected_citations, round(avg(t.n_consulted), 2) AS avg_consulted,
       sum(json_array_length(json_extract(p.payload_json, '$.audit.not_shown'))) AS never_shown,
       round(avg((t.n_rejected > 0)::INTEGER), 3) AS rejected_turn_rate
FROM turns t JOIN runs r USING (run_id) LEFT JOIN turn_payloads p USING (turn_id){names}
WHERE r.kind = 'audit'
GROUP BY r.run_id, {run}, app, r.model
ORDER BY min(t.started_at)""",
    }


#: The canned queries of a database without run names.
CANNED = canned()


def has_run_names(db: str) -> bool:
    """Whether the trace database at `db` has run names (the `experiments` table); False when there is none yet."""
    from .tables import db_version

    return _has_run_names(db, db_version(db))


@st.cache_data(show_spinner=False, max_entries=16)
def _has_run_names(db: str, version: tuple) -> bool:
    from ..trace import TraceReader

    try:
        return has_experiments(TraceReader(db))
    except WorkbenchError:  # a damaged file: the page says so when it queries it
        return False


# --- saved queries (trace/saved_queries.py): listed beside the canned ones, opened by `?query=<name>` ------

#: How a saved query is listed among the canned ones (a canned name never starts so).
SAVED_PREFIX = "Saved · "


def choices(db: str) -> dict[str, str]:
    """The queries to pick from: the canned ones, then the saved ones (`SAVED_PREFIX` + name) by name."""
    from .tables import db_version

    return {**canned(has_run_names(db)), **{SAVED_PREFIX + name: sql for name, sql in _saved(db, db_version(db))}}


@st.cache_data(show_spinner=False, max_entries=16)
def _saved(db: str, version: tuple) -> tuple[tuple[str, str], ...]:
    from ..trace.saved_queries import saved_queries

    try:
        return tuple((q.name, q.sql) for q in saved_queries(db))
    except WorkbenchError:  # a damaged file: the page says so when it queries it
        return ()


def saved_name(choice: str) -> str | None:
    """The saved query's name of a choice, else None (a canned query)."""
    return choice[len(SAVED_PREFIX):] if choice.startswith(SAVED_PREFIX) else None


def linked_choice(options: dict[str, str]) -> str | None:
    """The choice a link names (`?query=<name>`), once per browser session and link; an unknown name is
    said, and the page opens as usual."""
    name = st.query_params.get("query")
    if not name or st.session_state.get("query_link_done") == name:
        return None
    st.session_state["query_link_done"] = name
    if SAVED_PREFIX + name in options:
        return SAVED_PREFIX + name
    st.warning(escape_markdown(f"No saved query is named {display_text(name)!r} in this trace database."), icon="🔗")
    return None


def show_choice(choice: str, options: dict[str, str]) -> None:
    """Put `choice`'s SQL in the box, to run at once, and its link in the address (a saved query's name)."""
    st.session_state["canned"] = choice
    st.session_state["sql"] = options[choice]
    st.session_state["sql_chosen"] = True  # choosing a query runs it, like submitting it
    name = saved_name(choice)
    if name is None:
        st.query_params.pop("query", None)
    else:
        st.query_params["query"] = name


def save_fields() -> tuple[str, bool]:
    """Inside the query's form: a name and a "Save query" button, so what is saved is the SQL in the box as
    typed (a form's text reaches the page only when one of its buttons is pressed)."""
    from ..trace.saved_queries import MAX_QUERY_NAME_CHARS

    c1, c2 = st.columns([3, 1], vertical_alignment="bottom")
    name = c1.text_input("Save as", key="save_query_name", max_chars=MAX_QUERY_NAME_CHARS,
                         placeholder="a name, e.g. Rejected citations by provider")
    return name, c2.form_submit_button("Save query", key="save_query")


def save_or_delete(db: str, sql: str, choice: str, name: str, save: bool, *, by: str | None = None) -> str | None:
    """Save the SQL under `name` when `save`; offer to delete the saved query shown, with its link. The choice
    to show next, if any (the page reruns to list it; `query_flash` says what was done)."""
    from ..trace.saved_queries import delete_query, save_query

    current = saved_name(choice)
    try:
        if save:
            saved = save_query(db, name, sql, by=by)
            st.session_state["query_flash"] = f"Saved as {display_text(saved.name)!r}."
            return SAVED_PREFIX + saved.name
        if current is None:
            return None
        with st.expander(f"Saved query: {display_text(current)}"):
            st.caption("A link to it: this page's address with")
            st.code(f"?query={quote(current)}", language=None)
            if st.button("Delete this saved query", key="delete_query"):
                delete_query(db, current)
                st.session_state["query_flash"] = f"Deleted {display_text(current)!r}."
                return next(iter(CANNED))
    except WorkbenchError as exc:
        st.error(escape_markdown(str(exc)), icon="⚠️")
    return None
