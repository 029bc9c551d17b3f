"""Canned read-only queries for the trace explorer, over the tables and documented views of docs/traces.md.

The comparisons group by every field of a run's configuration (provider, model, retriever, mode, k, tool
protocol, and the provider options, `faults` included), so two providers with the same retriever, one
retriever at two values of k, or a run with a fault beside a clean one, are two rows;
the run comparison groups by run, named by its experiment name (`eval --name`, table `experiments` of
migration m011) where the trace database has one.
"""

from __future__ import annotations

import streamlit as st

from ..errors import WorkbenchError

#: A run's configuration, as (expression, column): what a comparison groups by. The provider options come from
#: the run's recorded configuration (secrets are never recorded), as compact JSON text.
_CONFIG_FIELDS = (("r.provider", "provider"), ("r.model", "model"), ("r.retriever", "retriever"), ("r.mode", "mode"),
                  ("r.k", "k"), ("r.tool_protocol", "tool_protocol"),
                  ("coalesce(json_extract(r.config_json, '$.options'), '{}')::VARCHAR", "options"))
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
    run = "coalesce(e.name, r.run_id)" if run_names else "r.run_id"
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
    from ..trace.experiments import has_experiments

    try:
        return has_experiments(TraceReader(db))
    except WorkbenchError:  # a damaged file: the page says so when it queries it
        return False
