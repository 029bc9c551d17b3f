"""Migration m004: the first views: `turn_sets`, `doc_gaps`, `provider_summary`, `retriever_summary`.

Like every migration, frozen once released: change the schema by appending a new one (a new
`schema_mNNN.py`, registered by `@migration`).
"""

from .migration import migration

SQL = r"""
CREATE VIEW turn_sets AS
SELECT t.turn_id, t.run_id, r.provider, r.model, r.retriever, r.mode, t.started_at, t.question,
       t.question_kind, t.status, t.n_retrieved, t.n_cited, t.n_consulted, t.n_rejected, t.n_tool_calls
FROM turns t JOIN runs r USING (run_id);
COMMENT ON VIEW turn_sets IS 'Per turn: the sizes of the three sets and the number of rejected citations, with the run''s configuration.';
COMMENT ON COLUMN turn_sets.turn_id IS 'The turn.';
COMMENT ON COLUMN turn_sets.run_id IS 'Its run.';
COMMENT ON COLUMN turn_sets.provider IS 'Provider of the run.';
COMMENT ON COLUMN turn_sets.model IS 'Model of the run.';
COMMENT ON COLUMN turn_sets.retriever IS 'Retriever of the run.';
COMMENT ON COLUMN turn_sets.mode IS 'Mode of the run (`agent` or `excerpts`).';
COMMENT ON COLUMN turn_sets.started_at IS 'When the turn started (UTC).';
COMMENT ON COLUMN turn_sets.question IS 'The question.';
COMMENT ON COLUMN turn_sets.question_kind IS '`structural` or `substantive`.';
COMMENT ON COLUMN turn_sets.status IS '`ok` or the error status.';
COMMENT ON COLUMN turn_sets.n_retrieved IS 'Size of the retrieved set.';
COMMENT ON COLUMN turn_sets.n_cited IS 'Size of the cited set.';
COMMENT ON COLUMN turn_sets.n_consulted IS 'Size of the consulted set.';
COMMENT ON COLUMN turn_sets.n_rejected IS 'Distinct rejected citation targets.';
COMMENT ON COLUMN turn_sets.n_tool_calls IS 'Number of tool calls.';

CREATE VIEW doc_gaps AS
-- grouped per (question, run) first, so "runs" needs no count(DISTINCT …): 3x faster on 1M turns
WITH per_run AS (
    SELECT lower(trim(regexp_replace(t.question, '\s+', ' ', 'g'))) AS question_key, t.run_id,
           arg_max(t.question, t.started_at) AS question, count(*) AS asks,
           min(t.started_at) AS first_seen, max(t.started_at) AS last_seen,
           arg_max(t.turn_id, t.started_at) AS last_turn_id, max(t.n_retrieved) AS max_retrieved
    FROM turns t
    WHERE t.status = 'ok' AND t.question_kind = 'substantive' AND t.n_consulted = 0
    GROUP BY 1, 2
)
SELECT question_key, arg_max(question, last_seen) AS question, sum(asks)::BIGINT AS asks, count(*) AS runs,
       min(first_seen) AS first_seen, max(last_seen) AS last_seen,
       arg_max(last_turn_id, last_seen) AS last_turn_id, max(max_retrieved) AS max_retrieved
FROM per_run
GROUP BY 1
ORDER BY asks DESC, last_seen DESC;
COMMENT ON VIEW doc_gaps IS 'The doc-gap queue: substantive questions whose turn consulted nothing (the knowledge base had nothing the model read), grouped by normalised question, with counts and first/last seen. Structural (listing) questions and failed turns are not gaps.';
COMMENT ON COLUMN doc_gaps.question_key IS 'The question lower-cased with whitespace collapsed: the grouping key.';
COMMENT ON COLUMN doc_gaps.question IS 'The most recent wording of the question.';
COMMENT ON COLUMN doc_gaps.asks IS 'How many turns asked it and consulted nothing.';
COMMENT ON COLUMN doc_gaps.runs IS 'In how many runs.';
COMMENT ON COLUMN doc_gaps.first_seen IS 'First such turn (UTC).';
COMMENT ON COLUMN doc_gaps.last_seen IS 'Latest such turn (UTC).';
COMMENT ON COLUMN doc_gaps.last_turn_id IS 'The latest such turn, to inspect it.';
COMMENT ON COLUMN doc_gaps.max_retrieved IS 'Most documents any of those turns retrieved (0: retrieval found nothing at all).';

CREATE VIEW provider_summary AS
SELECT r.provider, r.model,
       count(DISTINCT t.run_id) AS runs,
       count(*) AS turns,
       avg((t.status <> 'ok')::INTEGER) AS error_rate,
       median(t.latency_ms) AS median_latency_ms,
       quantile_cont(t.latency_ms, 0.95) AS p95_latency_ms,
       avg(t.tokens_in) AS avg_tokens_in,
       avg(t.tokens_out) AS avg_tokens_out,
       avg(t.n_retrieved) AS avg_retrieved,
       avg(t.n_cited) AS avg_cited,
       avg(t.n_consulted) AS avg_consulted,
       avg((t.n_rejected > 0)::INTEGER) AS rejected_turn_rate,
       sum(t.n_rejected) AS rejected_citations,
       avg((t.n_consulted = 0)::INTEGER) FILTER (WHERE t.question_kind = 'substantive' AND t.status = 'ok') AS gap_rate
FROM turns t JOIN runs r USING (run_id)
GROUP BY r.provider, r.model
ORDER BY turns DESC;
COMMENT ON VIEW provider_summary IS 'Per provider and model: turns, error rate, latency, tokens, average set sizes, how often citations were rejected, and the share of substantive turns that consulted nothing (gap_rate).';
COMMENT ON COLUMN provider_summary.provider IS 'Provider name.';
COMMENT ON COLUMN provider_summary.model IS 'Model name.';
COMMENT ON COLUMN provider_summary.runs IS 'Runs with this provider and model.';
COMMENT ON COLUMN provider_summary.turns IS 'Turns.';
COMMENT ON COLUMN provider_summary.error_rate IS 'Share of turns whose status is not `ok`.';
COMMENT ON COLUMN provider_summary.median_latency_ms IS 'Median turn latency (ms).';
COMMENT ON COLUMN provider_summary.p95_latency_ms IS '95th percentile turn latency (ms).';
COMMENT ON COLUMN provider_summary.avg_tokens_in IS 'Mean prompt tokens per turn (turns that reported them).';
COMMENT ON COLUMN provider_summary.avg_tokens_out IS 'Mean completion tokens per turn (turns that reported them).';
COMMENT ON COLUMN provider_summary.avg_retrieved IS 'Mean retrieved-set size.';
COMMENT ON COLUMN provider_summary.avg_cited IS 'Mean cited-set size.';
COMMENT ON COLUMN provider_summary.avg_consulted IS 'Mean consulted-set size.';
COMMENT ON COLUMN provider_summary.rejected_turn_rate IS 'Share of turns with at least one rejected citation.';
COMMENT ON COLUMN provider_summary.rejected_citations IS 'Distinct rejected citation targets, summed over turns.';
COMMENT ON COLUMN provider_summary.gap_rate IS 'Share of substantive `ok` turns that consulted nothing.';

CREATE VIEW retriever_summary AS
SELECT r.retriever, r.mode, r.k,
       count(DISTINCT t.run_id) AS runs,
       count(*) AS turns,
       avg(t.n_retrieved) AS avg_retrieved,
       avg(t.n_cited) AS avg_cited,
       avg(t.n_consulted) AS avg_consulted,
       sum(t.n_consulted) / nullif(sum(t.n_retrieved), 0) AS consulted_share,
       avg((t.n_consulted = 0)::INTEGER) FILTER (WHERE t.question_kind = 'substantive' AND t.status = 'ok') AS gap_rate,
       median(t.latency_ms) AS median_latency_ms
FROM turns t JOIN runs r USING (run_id)
GROUP BY r.retriever, r.mode, r.k
ORDER BY turns DESC;
COMMENT ON VIEW retriever_summary IS 'Per retriever, mode and k: average set sizes, the share of retrieved documents that were consulted, and the share of substantive turns that consulted nothing (gap_rate).';
COMMENT ON COLUMN retriever_summary.retriever IS 'Retriever name.';
COMMENT ON COLUMN retriever_summary.mode IS '`agent` or `excerpts`.';
COMMENT ON COLUMN retriever_summary.k IS 'Results per search or excerpts.';
COMMENT ON COLUMN retriever_summary.runs IS 'Runs with this retriever, mode and k.';
COMMENT ON COLUMN retriever_summary.turns IS 'Turns.';
COMMENT ON COLUMN retriever_summary.avg_retrieved IS 'Mean retrieved-set size.';
COMMENT ON COLUMN retriever_summary.avg_cited IS 'Mean cited-set size.';
COMMENT ON COLUMN retriever_summary.avg_consulted IS 'Mean consulted-set size.';
COMMENT ON COLUMN retriever_summary.consulted_share IS 'Consulted documents / retrieved documents over all turns: how much of what was retrieved was read and used.';
COMMENT ON COLUMN retriever_summary.gap_rate IS 'Share of substantive `ok` turns that consulted nothing.';
COMMENT ON COLUMN retriever_summary.median_latency_ms IS 'Median turn latency (ms).';
"""


@migration(SQL)
def m004_views(con) -> None:
    """SQL only."""
