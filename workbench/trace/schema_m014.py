"""Migration m014: each turn's latest verification by ablation is one view, `latest_verifications`.

m009 wrote "the turn's latest verification" as the same subquery three times (in `source_verdicts`,
`verification_summary` and the usage macro `doc_usage_for`, which m010 replaced); this migration states
it once and writes the three again, reading the view. Their columns and results are unchanged, and so are their comments:
DuckDB drops a view's comments when the view is replaced, so the migration's Python step carries them
over (`reuse_latest_verification`) rather than restating them here.
Like every migration, frozen once released: change the schema by appending a new one (a new `schema_mNNN.py`, registered by `@migration`).
"""

from .connect import sql_string
from .migration import migration

M014_LATEST_VERIFICATION = """
CREATE VIEW latest_verifications AS
SELECT turn_id, arg_max(verification_id, verified_at) AS verification_id, max(verified_at) AS verified_at
FROM ablations
GROUP BY turn_id;
COMMENT ON VIEW latest_verifications IS 'Each verified turn''s latest verification by ablation: the one every verdict view (`source_verdicts`, `verification_summary`, `doc_usage`) reads, so a turn verified twice is judged by the later verification.';
COMMENT ON COLUMN latest_verifications.turn_id IS 'The verified turn.';
COMMENT ON COLUMN latest_verifications.verification_id IS 'Its latest verification (`ablations.verification_id`).';
COMMENT ON COLUMN latest_verifications.verified_at IS 'When that verification finished (UTC).';
"""

#: m009's and m010's readers of the latest verification, written here once more as statements of their own that read
#: the view. Their columns and results are those of m009 and m010 (tests/test_trace_migrations.py compares them).
M014_READERS = """
CREATE OR REPLACE VIEW source_verdicts AS
SELECT s.turn_id, s.doc_id, s.title, s.url, s.retrieved, s.cited, s.consulted, s.exposure, s.reason, s.kind,
       s.position, s.shown_position, l.verification_id IS NOT NULL AS verified, a.verdict, a.status AS ablation_status,
       a.similarity, a.claims_lost, a.claims_total, a.reason AS verdict_reason, a.method, a.control_stable
FROM sources s
LEFT JOIN latest_verifications l USING (turn_id)
LEFT JOIN ablations a ON a.turn_id = s.turn_id AND a.verification_id = l.verification_id AND a.doc_id = s.doc_id;

CREATE OR REPLACE VIEW verification_summary AS
WITH latest_rows AS (
    SELECT a.*, coalesce(s.consulted, false) AS consulted, coalesce(s.cited, false) AS cited
    FROM ablations a JOIN latest_verifications l USING (turn_id, verification_id)
    LEFT JOIN sources s ON s.turn_id = a.turn_id AND s.doc_id = a.doc_id
)
SELECT r.provider, r.model,
       count(DISTINCT x.turn_id) AS verified_turns,
       avg(x.control_stable::INTEGER) FILTER (WHERE x.role = 'control') AS stable_control_rate,
       count(*) FILTER (WHERE x.consulted AND x.verdict IN ('load_bearing', 'decorative')) AS consulted_verdicts,
       count(*) FILTER (WHERE x.consulted AND x.verdict = 'load_bearing') AS consulted_load_bearing,
       count(*) FILTER (WHERE x.consulted AND x.verdict = 'load_bearing')
           / nullif(count(*) FILTER (WHERE x.consulted AND x.verdict IN ('load_bearing', 'decorative')), 0)
           AS load_bearing_share,
       count(*) FILTER (WHERE x.verdict = 'decorative') AS decorative,
       count(*) FILTER (WHERE x.verdict = 'hidden_influence') AS hidden_influence,
       count(*) FILTER (WHERE x.verdict = 'hidden_influence')
           / nullif(count(*) FILTER (WHERE x.verdict IN ('hidden_influence', 'no_effect')), 0) AS hidden_influence_rate,
       count(*) FILTER (WHERE x.verdict = 'unstable') AS unstable,
       count(*) FILTER (WHERE x.status = 'over_budget') AS over_budget,
       sum(x.extra_calls) / count(DISTINCT x.turn_id) AS extra_calls_per_turn,
       sum(x.latency_ms) / count(DISTINCT x.turn_id) AS rerun_ms_per_turn
FROM latest_rows x JOIN turns t USING (turn_id) JOIN runs r USING (run_id)
GROUP BY r.provider, r.model
ORDER BY verified_turns DESC;

CREATE OR REPLACE MACRO doc_usage_for(run_ids := NULL, corpus_ids := NULL) AS TABLE
SELECT r.corpus_id,
       s.doc_id,
       arg_max(s.title, t.started_at) AS title,
       arg_max(s.kind, t.started_at) AS kind,
       arg_max(s.artifact_kind, t.started_at) AS artifact_kind,
       count(*) AS retrieved_turns,
       count(*) FILTER (WHERE s.consulted) AS consulted_turns,
       count(*) FILTER (WHERE s.cited AND s.consulted) AS cited_read_turns,
       count(*) FILTER (WHERE s.cited AND NOT s.consulted) AS listed_link_turns,
       count(*) FILTER (WHERE v.verdict IS NOT NULL AND v.verdict <> 'unstable') AS verified_turns,
       count(*) FILTER (WHERE v.verdict = 'load_bearing') AS load_bearing_turns,
       count(*) FILTER (WHERE v.verdict = 'hidden_influence') AS hidden_influence_turns,
       count(DISTINCT t.run_id) AS runs,
       min(t.started_at) AS first_used,
       max(t.started_at) AS last_used,
       max(t.started_at) FILTER (WHERE s.consulted) AS last_consulted
FROM sources s JOIN turns t USING (turn_id) JOIN runs r USING (run_id)
LEFT JOIN (  -- each verified turn's latest verification: one verdict per (turn, document) at most
    SELECT a.turn_id, a.doc_id, a.verdict
    FROM ablations a JOIN latest_verifications l USING (turn_id, verification_id)
    WHERE a.doc_id IS NOT NULL
) v ON v.turn_id = s.turn_id AND v.doc_id = s.doc_id
WHERE (run_ids IS NULL OR list_contains(run_ids, t.run_id))
  AND (corpus_ids IS NULL OR list_contains(corpus_ids, r.corpus_id))
GROUP BY r.corpus_id, s.doc_id
ORDER BY consulted_turns DESC, cited_read_turns DESC, retrieved_turns DESC, r.corpus_id, s.doc_id;
"""
#: The views replaced above, whose comments `reuse_latest_verification` keeps.
_REPLACED_VIEWS = ("source_verdicts", "verification_summary")
_COMMENTS = """
SELECT view_name, NULL, comment FROM duckdb_views()
WHERE database_name = current_database() AND list_contains({names}, view_name) AND comment IS NOT NULL
UNION ALL
SELECT table_name, column_name, comment FROM duckdb_columns()
WHERE database_name = current_database() AND list_contains({names}, table_name) AND comment IS NOT NULL
"""


def replace_keeping_comments(con, views, sql: str) -> None:
    """Run `sql`, which replaces `views`, keeping every comment those views and their columns had: DuckDB drops
    a view's comments when the view is replaced. m017 and m021 replace views the same way."""
    names = "[" + ", ".join(sql_string(v) for v in views) + "]"  # literals: a parameter imports pandas on DuckDB 1.5
    kept = con.execute(_COMMENTS.format(names=names)).fetchall()
    con.execute(sql)
    for view, column, comment in kept:
        target = f"COLUMN {view}.{column}" if column else f"VIEW {view}"
        con.execute(f"COMMENT ON {target} IS {sql_string(comment)}")


@migration(M014_LATEST_VERIFICATION)
def m014_latest_verification(con) -> None:
    """Replace the readers (`M014_READERS`), keeping every comment their views had."""
    replace_keeping_comments(con, _REPLACED_VIEWS, M014_READERS)
