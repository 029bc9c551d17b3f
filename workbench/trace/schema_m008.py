"""Migration m008: document usage: the `doc_usage` and `doc_usage_totals` views and their macros.

Like every migration, frozen once released: change the schema by appending a new one (a new
`schema_mNNN.py`, registered by `@migration`).
"""

from .migration import migration

# Verification by ablation (m009) adds the verdict counts: it replaces the two macros and the two
# views below whole (CREATE OR REPLACE).
SQL = """
CREATE MACRO doc_usage_for(run_ids := NULL) AS TABLE
SELECT s.doc_id,
       arg_max(s.title, t.started_at) AS title,
       arg_max(s.kind, t.started_at) AS kind,
       arg_max(s.artifact_kind, t.started_at) AS artifact_kind,
       count(*) AS retrieved_turns,
       count(*) FILTER (WHERE s.cited) AS cited_turns,
       count(*) FILTER (WHERE s.consulted) AS consulted_turns,
       count(DISTINCT t.run_id) AS runs,
       min(t.started_at) AS first_used,
       max(t.started_at) AS last_used,
       max(t.started_at) FILTER (WHERE s.consulted) AS last_consulted
FROM sources s JOIN turns t USING (turn_id)
WHERE run_ids IS NULL OR list_contains(run_ids, t.run_id)
GROUP BY s.doc_id
ORDER BY consulted_turns DESC, cited_turns DESC, retrieved_turns DESC, s.doc_id;

CREATE MACRO doc_usage_totals_for(run_ids := NULL) AS TABLE
SELECT CASE WHEN kind = 'generated' THEN 'generated: ' || coalesce(artifact_kind, 'retrieval aid')
            ELSE coalesce(kind, 'source') END AS category,
       count(*) AS documents,
       sum(retrieved_turns)::BIGINT AS retrieved,
       sum(cited_turns)::BIGINT AS cited,
       sum(consulted_turns)::BIGINT AS consulted,
       count(*) FILTER (WHERE consulted_turns > 0) AS documents_consulted,
       count(*) FILTER (WHERE consulted_turns = 0) AS documents_never_consulted
FROM doc_usage_for(run_ids := run_ids)
GROUP BY ALL
ORDER BY consulted DESC, retrieved DESC, category;

CREATE VIEW doc_usage AS FROM doc_usage_for();
COMMENT ON VIEW doc_usage IS 'Usage accounting: one row per document any turn retrieved, with the number of turns in which it was retrieved, cited and consulted (the honest basis for usage, billing and content decisions: consulted, not retrieved), most consulted first. Over all runs; for a chosen set of runs: `FROM doc_usage_for(run_ids := [''<run_id>'', …])` (also `workbench usage --run`).';
COMMENT ON COLUMN doc_usage.doc_id IS 'Document id.';
COMMENT ON COLUMN doc_usage.title IS 'Its title, as the latest turn saw it.';
COMMENT ON COLUMN doc_usage.kind IS '`source` or `generated` (a generated artifact).';
COMMENT ON COLUMN doc_usage.artifact_kind IS 'Kind of generated artifact, else NULL.';
COMMENT ON COLUMN doc_usage.retrieved_turns IS 'Turns whose retrieved set holds it (any tool returned it, even as a title).';
COMMENT ON COLUMN doc_usage.cited_turns IS 'Turns whose answer cites it (valid citations only).';
COMMENT ON COLUMN doc_usage.consulted_turns IS 'Turns in which the model read it (opened in full, or a cited snippet).';
COMMENT ON COLUMN doc_usage.runs IS 'Runs with at least one of those turns.';
COMMENT ON COLUMN doc_usage.first_used IS 'First turn that retrieved it (UTC).';
COMMENT ON COLUMN doc_usage.last_used IS 'Latest turn that retrieved it (UTC).';
COMMENT ON COLUMN doc_usage.last_consulted IS 'Latest turn that consulted it (UTC); NULL if never consulted.';

CREATE VIEW doc_usage_totals AS FROM doc_usage_totals_for();
COMMENT ON VIEW doc_usage_totals IS 'Usage totals per category of document (`source`, or `generated: <artifact kind>`), over all runs; for chosen runs: `FROM doc_usage_totals_for(run_ids := [''<run_id>'', …])`.';
COMMENT ON COLUMN doc_usage_totals.category IS '`source`, or `generated: <artifact kind>` for generated artifacts.';
COMMENT ON COLUMN doc_usage_totals.documents IS 'Documents of the category that any turn retrieved.';
COMMENT ON COLUMN doc_usage_totals.retrieved IS 'Document-turns retrieved (sum of `doc_usage.retrieved_turns`).';
COMMENT ON COLUMN doc_usage_totals.cited IS 'Document-turns cited.';
COMMENT ON COLUMN doc_usage_totals.consulted IS 'Document-turns consulted.';
COMMENT ON COLUMN doc_usage_totals.documents_consulted IS 'Documents consulted at least once.';
COMMENT ON COLUMN doc_usage_totals.documents_never_consulted IS 'Documents retrieved but never consulted.';
"""


@migration(SQL)
def m008_doc_usage(con) -> None:
    """SQL only."""
