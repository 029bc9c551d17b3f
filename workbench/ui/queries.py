"""Canned read-only queries for the trace explorer, over the documented views of docs/traces.md."""

from __future__ import annotations

CANNED: dict[str, str] = {
    "Set sizes by provider": """SELECT provider, model, count(*) AS turns,
       round(avg(n_retrieved), 2) AS retrieved, round(avg(n_cited), 2) AS cited,
       round(avg(n_consulted), 2) AS consulted
FROM turn_sets
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
    "Retriever comparison": "SELECT * FROM retriever_summary",
    "Provider summary": "SELECT * FROM provider_summary",
    "Latest turns": """SELECT started_at, provider, retriever, mode, question, status,
       n_retrieved, n_cited, n_consulted, n_rejected
FROM turn_sets
ORDER BY started_at DESC
LIMIT 50""",
}
