"""Migration m009: verification by ablation (docs/design.md §9) in the trace store.

Its own module because it is long: the `ablations` table, the `source_verdicts` and
`verification_summary` views, and usage accounting (m008's `doc_usage` macros and views) replaced
whole with the verdict counts. Like every migration, frozen once released: change the schema by
appending a new one (a new `schema_mNNN.py`, registered by `@migration`).
"""

from .migration import migration

# Verification by ablation (docs/design.md §9): one row per re-run of a verified turn, written with the
# turn or later (the app's "Verify sources"), never by rewriting the turn; and the views over it.
M009_ABLATIONS = """
CREATE TABLE ablations (
    turn_id VARCHAR NOT NULL,
    verification_id VARCHAR NOT NULL,
    seq INTEGER NOT NULL,
    role VARCHAR NOT NULL,
    doc_id VARCHAR,
    verdict VARCHAR,
    status VARCHAR NOT NULL,
    similarity DOUBLE,
    claims_lost INTEGER,
    claims_total INTEGER,
    extra_calls INTEGER,
    tokens_in BIGINT,
    tokens_out BIGINT,
    latency_ms DOUBLE,
    answer VARCHAR,
    reason VARCHAR,
    method VARCHAR NOT NULL,
    control_stable BOOLEAN NOT NULL,
    similarity_threshold DOUBLE,
    judge VARCHAR,
    judge_version VARCHAR,
    verified_at TIMESTAMPTZ NOT NULL
);
COMMENT ON TABLE ablations IS 'Verification by ablation (docs/design.md §9): one row per re-run of a verified turn — the control (nothing withheld) first, then one per candidate document withheld — plus a row per candidate that was not re-run (over the budget, or an unstable control). A turn verified twice has two verifications; the views read the latest.';
COMMENT ON COLUMN ablations.turn_id IS 'The verified turn; joins `turns`.';
COMMENT ON COLUMN ablations.verification_id IS 'One verification of the turn (uuid hex): its rows share it.';
COMMENT ON COLUMN ablations.seq IS 'Order within the verification: 0 = the control, then candidates in the order the budget covers them (consulted, then the top retrieved-but-unused, then cited links to titles).';
COMMENT ON COLUMN ablations.role IS '`control` (the turn re-run with nothing withheld) or `candidate` (re-run with `doc_id` withheld).';
COMMENT ON COLUMN ablations.doc_id IS 'The withheld document; NULL for the control. Joins `sources` (turn_id, doc_id).';
COMMENT ON COLUMN ablations.verdict IS '`load_bearing` (cited or consulted, and the answer changed without it), `decorative` (cited or consulted, the answer survived without it), `hidden_influence` (neither, yet the answer changed), `no_effect` (neither, and it did not), `unstable` (the control already differed: no verdict earned). NULL for the control, a candidate over the budget, and a re-run that failed.';
COMMENT ON COLUMN ablations.status IS 'The re-run''s status (`ok`, or the failure, e.g. `provider_error`); `over_budget` or `control_unstable` when the candidate was not re-run.';
COMMENT ON COLUMN ablations.similarity IS 'Similarity of the re-run''s answer to the original (the method''s metric: Dice coefficient of stemmed content words in `ablation-v1`), in [0, 1]; NULL when not re-run.';
COMMENT ON COLUMN ablations.claims_lost IS 'Claims at stake that the re-run''s answer no longer supports (judge `judge`).';
COMMENT ON COLUMN ablations.claims_total IS 'Claims at stake: for a candidate, the original claims that cite it or that what the model was shown of it supports; for the control, every claim.';
COMMENT ON COLUMN ablations.extra_calls IS 'Model calls the re-run made (its extra cost); 0 when not re-run.';
COMMENT ON COLUMN ablations.tokens_in IS 'Prompt tokens of the re-run''s model calls; NULL unless every call reported them.';
COMMENT ON COLUMN ablations.tokens_out IS 'Completion tokens of the re-run''s model calls; NULL unless every call reported them.';
COMMENT ON COLUMN ablations.latency_ms IS 'Wall time of the re-run in milliseconds; NULL when not re-run.';
COMMENT ON COLUMN ablations.answer IS 'The re-run''s answer (what the model said without the document).';
COMMENT ON COLUMN ablations.reason IS 'The verdict explained in words (claims lost, similarity and threshold, or why there is no verdict).';
COMMENT ON COLUMN ablations.method IS 'Method and version, e.g. `ablation-v1`: verdicts are comparable only within one.';
COMMENT ON COLUMN ablations.control_stable IS 'Whether this verification''s control reproduced the original answer (the same on every row of it).';
COMMENT ON COLUMN ablations.similarity_threshold IS 'Below this similarity an answer counts as changed (the method''s stated threshold).';
COMMENT ON COLUMN ablations.judge IS 'The faithfulness judge that decided which claims were lost.';
COMMENT ON COLUMN ablations.judge_version IS 'Version of that judge.';
COMMENT ON COLUMN ablations.verified_at IS 'When the verification finished (UTC); the latest verification of a turn wins in the views.';

CREATE VIEW source_verdicts AS
WITH latest AS (
    SELECT turn_id, arg_max(verification_id, verified_at) AS verification_id FROM ablations GROUP BY turn_id
)
SELECT s.turn_id, s.doc_id, s.title, s.url, s.retrieved, s.cited, s.consulted, s.exposure, s.reason, s.kind,
       s.position, s.shown_position, l.verification_id IS NOT NULL AS verified, a.verdict, a.status AS ablation_status,
       a.similarity, a.claims_lost, a.claims_total, a.reason AS verdict_reason, a.method, a.control_stable
FROM sources s
LEFT JOIN latest l USING (turn_id)
LEFT JOIN ablations a ON a.turn_id = s.turn_id AND a.verification_id = l.verification_id AND a.doc_id = s.doc_id;
COMMENT ON VIEW source_verdicts IS 'Each turn''s `sources` rows with the verdict of the turn''s latest verification by ablation: `verdict` is NULL when the turn was not verified (`verified` false), or the document was no candidate, over the budget, or its re-run failed (`ablation_status` says which).';
COMMENT ON COLUMN source_verdicts.turn_id IS 'The turn.';
COMMENT ON COLUMN source_verdicts.doc_id IS 'Document id.';
COMMENT ON COLUMN source_verdicts.title IS 'Document title.';
COMMENT ON COLUMN source_verdicts.url IS 'Document URL.';
COMMENT ON COLUMN source_verdicts.retrieved IS 'In the retrieved set (always true).';
COMMENT ON COLUMN source_verdicts.cited IS 'In the cited set.';
COMMENT ON COLUMN source_verdicts.consulted IS 'In the consulted set.';
COMMENT ON COLUMN source_verdicts.exposure IS 'Strongest exposure: `full`, `snippet` or `title`.';
COMMENT ON COLUMN source_verdicts.reason IS 'Why it is or is not consulted.';
COMMENT ON COLUMN source_verdicts.kind IS '`source` or `generated`.';
COMMENT ON COLUMN source_verdicts.position IS 'Order in the retrieved set, from 1.';
COMMENT ON COLUMN source_verdicts.shown_position IS 'Order in the payload''s `sources` array; NULL when not in it.';
COMMENT ON COLUMN source_verdicts.verified IS 'Whether the turn was verified by ablation at all.';
COMMENT ON COLUMN source_verdicts.verdict IS 'The document''s verdict in the latest verification (see `ablations.verdict`), else NULL.';
COMMENT ON COLUMN source_verdicts.ablation_status IS 'Status of its re-run (`ok`, a failure, `over_budget`, `control_unstable`); NULL when it was no candidate.';
COMMENT ON COLUMN source_verdicts.similarity IS 'Similarity of the answer without it to the original.';
COMMENT ON COLUMN source_verdicts.claims_lost IS 'Claims at stake lost without it.';
COMMENT ON COLUMN source_verdicts.claims_total IS 'Claims at stake for it.';
COMMENT ON COLUMN source_verdicts.verdict_reason IS 'The verdict explained in words.';
COMMENT ON COLUMN source_verdicts.method IS 'Verification method and version.';
COMMENT ON COLUMN source_verdicts.control_stable IS 'Whether the verification''s control reproduced the original answer.';

CREATE VIEW verification_summary AS
WITH latest AS (
    SELECT turn_id, arg_max(verification_id, verified_at) AS verification_id FROM ablations GROUP BY turn_id
), latest_rows AS (
    SELECT a.*, coalesce(s.consulted, false) AS consulted, coalesce(s.cited, false) AS cited
    FROM ablations a JOIN latest l USING (turn_id, verification_id)
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
COMMENT ON VIEW verification_summary IS 'Per provider and model, over each verified turn''s latest verification: how often the control was stable, the share of consulted documents that are load-bearing, the hidden-influence rate, and the cost. Group `source_verdicts` yourself for other cuts (retriever, mode).';
COMMENT ON COLUMN verification_summary.provider IS 'Provider name.';
COMMENT ON COLUMN verification_summary.model IS 'Model name.';
COMMENT ON COLUMN verification_summary.verified_turns IS 'Turns verified by ablation.';
COMMENT ON COLUMN verification_summary.stable_control_rate IS 'Share of verifications whose control reproduced the original answer (the rest gave every candidate `unstable`).';
COMMENT ON COLUMN verification_summary.consulted_verdicts IS 'Consulted documents with an earned verdict (`load_bearing` or `decorative`).';
COMMENT ON COLUMN verification_summary.consulted_load_bearing IS 'Of those, the load-bearing ones.';
COMMENT ON COLUMN verification_summary.load_bearing_share IS 'Share of consulted documents (with an earned verdict) that are load-bearing: how much of the sources row the answer really depends on.';
COMMENT ON COLUMN verification_summary.decorative IS 'Decorative verdicts (cited or consulted, the answer survived without them).';
COMMENT ON COLUMN verification_summary.hidden_influence IS 'Hidden-influence verdicts.';
COMMENT ON COLUMN verification_summary.hidden_influence_rate IS 'Share of verified documents that were neither cited nor consulted whose withholding changed the answer.';
COMMENT ON COLUMN verification_summary.unstable IS 'Candidates that got `unstable` (their verification''s control differed).';
COMMENT ON COLUMN verification_summary.over_budget IS 'Candidates left unverified by the budget.';
COMMENT ON COLUMN verification_summary.extra_calls_per_turn IS 'Extra model calls per verified turn (control included).';
COMMENT ON COLUMN verification_summary.rerun_ms_per_turn IS 'Re-run wall time per verified turn, in milliseconds.';

-- Usage accounting gains the verdicts (m008's macros and views, replaced whole: a view's columns are
-- fixed when it is created). A document-turn counts once, by the turn's latest verification.
CREATE OR REPLACE MACRO doc_usage_for(run_ids := NULL) AS TABLE
SELECT s.doc_id,
       arg_max(s.title, t.started_at) AS title,
       arg_max(s.kind, t.started_at) AS kind,
       arg_max(s.artifact_kind, t.started_at) AS artifact_kind,
       count(*) AS retrieved_turns,
       count(*) FILTER (WHERE s.cited) AS cited_turns,
       count(*) FILTER (WHERE s.consulted) AS consulted_turns,
       count(*) FILTER (WHERE v.verdict IS NOT NULL AND v.verdict <> 'unstable') AS verified_turns,
       count(*) FILTER (WHERE v.verdict = 'load_bearing') AS load_bearing_turns,
       count(*) FILTER (WHERE v.verdict = 'hidden_influence') AS hidden_influence_turns,
       count(DISTINCT t.run_id) AS runs,
       min(t.started_at) AS first_used,
       max(t.started_at) AS last_used,
       max(t.started_at) FILTER (WHERE s.consulted) AS last_consulted
FROM sources s JOIN turns t USING (turn_id)
LEFT JOIN (  -- each verified turn's latest verification: one verdict per (turn, document) at most
    SELECT a.turn_id, a.doc_id, a.verdict
    FROM ablations a
    JOIN (SELECT turn_id, arg_max(verification_id, verified_at) AS verification_id FROM ablations GROUP BY turn_id) l
        USING (turn_id, verification_id)
    WHERE a.doc_id IS NOT NULL
) v ON v.turn_id = s.turn_id AND v.doc_id = s.doc_id
WHERE run_ids IS NULL OR list_contains(run_ids, t.run_id)
GROUP BY s.doc_id
ORDER BY consulted_turns DESC, cited_turns DESC, retrieved_turns DESC, s.doc_id;

CREATE OR REPLACE MACRO doc_usage_totals_for(run_ids := NULL) AS TABLE
SELECT CASE WHEN kind = 'generated' THEN 'generated: ' || coalesce(artifact_kind, 'retrieval aid')
            ELSE coalesce(kind, 'source') END AS category,
       count(*) AS documents,
       sum(retrieved_turns)::BIGINT AS retrieved,
       sum(cited_turns)::BIGINT AS cited,
       sum(consulted_turns)::BIGINT AS consulted,
       sum(load_bearing_turns)::BIGINT AS load_bearing,
       count(*) FILTER (WHERE consulted_turns > 0) AS documents_consulted,
       count(*) FILTER (WHERE consulted_turns = 0) AS documents_never_consulted
FROM doc_usage_for(run_ids := run_ids)
GROUP BY ALL
ORDER BY consulted DESC, retrieved DESC, category;

CREATE OR REPLACE VIEW doc_usage AS FROM doc_usage_for();
COMMENT ON VIEW doc_usage IS 'Usage accounting: one row per document any turn retrieved, with the number of turns in which it was retrieved, cited and consulted (the honest basis for usage, billing and content decisions: consulted, not retrieved), and, for verified turns, in which the answer depended on it (load-bearing), most consulted first. Over all runs; for a chosen set of runs: `FROM doc_usage_for(run_ids := [''<run_id>'', …])` (also `workbench usage --run`).';
COMMENT ON COLUMN doc_usage.doc_id IS 'Document id.';
COMMENT ON COLUMN doc_usage.title IS 'Its title, as the latest turn saw it.';
COMMENT ON COLUMN doc_usage.kind IS '`source` or `generated` (a generated artifact).';
COMMENT ON COLUMN doc_usage.artifact_kind IS 'Kind of generated artifact, else NULL.';
COMMENT ON COLUMN doc_usage.retrieved_turns IS 'Turns whose retrieved set holds it (any tool returned it, even as a title).';
COMMENT ON COLUMN doc_usage.cited_turns IS 'Turns whose answer cites it (valid citations only).';
COMMENT ON COLUMN doc_usage.consulted_turns IS 'Turns in which the model read it (opened in full, or a cited snippet).';
COMMENT ON COLUMN doc_usage.verified_turns IS 'Turns whose latest verification by ablation gave it an earned verdict (not `unstable`, not over the budget).';
COMMENT ON COLUMN doc_usage.load_bearing_turns IS 'Of those, the turns whose answer changed without it (`load_bearing`): the usage the answer really depended on.';
COMMENT ON COLUMN doc_usage.hidden_influence_turns IS 'Of those, the turns it influenced without being cited or consulted (`hidden_influence`).';
COMMENT ON COLUMN doc_usage.runs IS 'Runs with at least one of those turns.';
COMMENT ON COLUMN doc_usage.first_used IS 'First turn that retrieved it (UTC).';
COMMENT ON COLUMN doc_usage.last_used IS 'Latest turn that retrieved it (UTC).';
COMMENT ON COLUMN doc_usage.last_consulted IS 'Latest turn that consulted it (UTC); NULL if never consulted.';

CREATE OR REPLACE VIEW doc_usage_totals AS FROM doc_usage_totals_for();
COMMENT ON VIEW doc_usage_totals IS 'Usage totals per category of document (`source`, or `generated: <artifact kind>`), over all runs; for chosen runs: `FROM doc_usage_totals_for(run_ids := [''<run_id>'', …])`.';
COMMENT ON COLUMN doc_usage_totals.category IS '`source`, or `generated: <artifact kind>` for generated artifacts.';
COMMENT ON COLUMN doc_usage_totals.documents IS 'Documents of the category that any turn retrieved.';
COMMENT ON COLUMN doc_usage_totals.retrieved IS 'Document-turns retrieved (sum of `doc_usage.retrieved_turns`).';
COMMENT ON COLUMN doc_usage_totals.cited IS 'Document-turns cited.';
COMMENT ON COLUMN doc_usage_totals.consulted IS 'Document-turns consulted.';
COMMENT ON COLUMN doc_usage_totals.load_bearing IS 'Document-turns load-bearing in the turn''s latest verification (verified turns only).';
COMMENT ON COLUMN doc_usage_totals.documents_consulted IS 'Documents consulted at least once.';
COMMENT ON COLUMN doc_usage_totals.documents_never_consulted IS 'Documents retrieved but never consulted.';
"""


@migration(M009_ABLATIONS)
def m009_ablations(con) -> None:
    """SQL only."""
