"""Migration m011: experiments (docs/experiments.md) in the trace store.

Datasets (a questions file, by name and content hash), their expectations (one row per line), the
experiments (an `eval` run with its dataset, its optional unique name, tags and whole configuration),
and the `expectation_results` view that scores every line of a run's dataset against the run's turn
for it: the one definition of the per-turn assertions and figures that `trace/scoring.py`, the CLI's
`runs` commands, the app's Experiments page and notebook 02 all read. Like every migration, frozen once
released: change the schema by appending a new one (a new `schema_mNNN.py`, registered by `@migration`).
"""

from .migration import migration

M011_EXPERIMENTS = r"""
CREATE TABLE datasets (
    dataset_id VARCHAR PRIMARY KEY,
    name VARCHAR NOT NULL,
    content_hash VARCHAR NOT NULL,
    questions INTEGER NOT NULL,
    created_at TIMESTAMPTZ NOT NULL
);
COMMENT ON TABLE datasets IS 'One row per questions file an `eval` ran (docs/experiments.md), by name and content: the same file edited is a new dataset.';
COMMENT ON COLUMN datasets.dataset_id IS 'sha256 of the name and the content hash, 32 hex digits.';
COMMENT ON COLUMN datasets.name IS 'The file''s name without its extension, e.g. `demo_gold`.';
COMMENT ON COLUMN datasets.content_hash IS 'sha256 of the file''s bytes (64 hex digits).';
COMMENT ON COLUMN datasets.questions IS 'Number of question lines.';
COMMENT ON COLUMN datasets.created_at IS 'When the dataset was first stored (UTC).';

CREATE TABLE expectations (
    dataset_id VARCHAR NOT NULL,
    line INTEGER NOT NULL,
    question_id VARCHAR,
    question VARCHAR NOT NULL,
    kind VARCHAR,
    expected VARCHAR[] NOT NULL,
    expect_no_sources BOOLEAN NOT NULL,
    must_cite VARCHAR[] NOT NULL,
    must_not_cite VARCHAR[] NOT NULL,
    tags VARCHAR[] NOT NULL,
    extra_json VARCHAR
);
COMMENT ON TABLE expectations IS 'One row per line of a dataset: the question and what its turn must do (docs/experiments.md). Empty lists when the line names nothing.';
COMMENT ON COLUMN expectations.dataset_id IS 'The dataset; joins `datasets`.';
COMMENT ON COLUMN expectations.line IS 'Line number in the file, from 1.';
COMMENT ON COLUMN expectations.question_id IS 'The line''s `id`, as text (JSON for a non-string id); NULL when absent.';
COMMENT ON COLUMN expectations.question IS 'The question; joins `turns.question` within a run.';
COMMENT ON COLUMN expectations.kind IS 'The line''s own `kind` label (e.g. `substantive`, `listing`), else NULL.';
COMMENT ON COLUMN expectations.expected IS 'Documents the turn must consult.';
COMMENT ON COLUMN expectations.expect_no_sources IS 'True when the turn must consult nothing (listings, chit-chat).';
COMMENT ON COLUMN expectations.must_cite IS 'Documents the answer must cite.';
COMMENT ON COLUMN expectations.must_not_cite IS 'Documents the turn must neither cite nor consult.';
COMMENT ON COLUMN expectations.tags IS 'The line''s tags.';
COMMENT ON COLUMN expectations.extra_json IS 'The line''s other fields as JSON (kept, never read), else NULL.';

CREATE TABLE experiments (
    run_id VARCHAR PRIMARY KEY,
    name VARCHAR UNIQUE,
    dataset_id VARCHAR NOT NULL,
    tags_json VARCHAR,
    config_json VARCHAR,
    recorded_at TIMESTAMPTZ NOT NULL
);
COMMENT ON TABLE experiments IS 'One row per `eval` run of a dataset: its name (unique; `eval --name`), tags and configuration. The run''s corpus name and hash are on `runs`.';
COMMENT ON COLUMN experiments.run_id IS 'The run; joins `runs` and `turns`.';
COMMENT ON COLUMN experiments.name IS 'The run''s name (`eval --name`), unique in the database; NULL for an unnamed run.';
COMMENT ON COLUMN experiments.dataset_id IS 'The dataset it asked; joins `datasets` and `expectations`.';
COMMENT ON COLUMN experiments.tags_json IS 'Its tags (`eval --tag k=v`) as a JSON object.';
COMMENT ON COLUMN experiments.config_json IS 'The whole eval configuration as JSON (provider, model, options, retriever, mode, k, tool protocol, verification, concurrency, files). Secrets are never stored.';
COMMENT ON COLUMN experiments.recorded_at IS 'When the row was written (UTC): when the run ended.';

CREATE VIEW expectation_results AS
WITH asked AS (  -- each question's latest turn in each experiment run (a resumed run retried failed ones)
    SELECT * FROM (
        SELECT t.*, row_number() OVER (PARTITION BY t.run_id, t.question ORDER BY t.started_at DESC, t.turn_id DESC) AS nth
        FROM turns t JOIN experiments e USING (run_id)
    ) WHERE nth = 1
), sets AS (
    SELECT s.turn_id,
           list(s.doc_id ORDER BY s.position) AS retrieved,
           coalesce(list(s.doc_id ORDER BY s.position) FILTER (WHERE s.consulted), []) AS consulted,
           coalesce(list(s.doc_id ORDER BY s.position) FILTER (WHERE s.cited), []) AS cited,
           coalesce(list(s.doc_id ORDER BY s.position) FILTER (WHERE s.verdict = 'load_bearing'), []) AS load_bearing,
           bool_or(s.verified) AS verified
    FROM source_verdicts s JOIN asked a USING (turn_id)
    GROUP BY s.turn_id
), joined AS (
    SELECT e.run_id, e.name, x.dataset_id, x.line, x.question_id, x.question, x.tags, a.turn_id, a.status,
           a.latency_ms, a.tokens_in, a.tokens_out, a.n_rejected AS rejected,
           x.expected, x.expect_no_sources, x.must_cite, x.must_not_cite,
           coalesce(s.retrieved, []) AS retrieved, coalesce(s.consulted, []) AS consulted, coalesce(s.cited, []) AS cited,
           coalesce(s.load_bearing, []) AS load_bearing, coalesce(s.verified, false) AS verified,
           a.turn_id IS NOT NULL AS answered
    FROM experiments e JOIN expectations x USING (dataset_id)
    LEFT JOIN asked a ON a.run_id = e.run_id AND a.question = x.question
    LEFT JOIN sets s ON s.turn_id = a.turn_id
), checked AS (
    SELECT *,
           answered AND list_has_all(consulted, expected) AS expected_consulted,
           answered AND (NOT expect_no_sources OR len(consulted) = 0) AS no_sources_ok,
           answered AND list_has_all(cited, must_cite) AS must_cite_ok,
           answered AND NOT list_has_any(list_concat(cited, consulted), must_not_cite) AS must_not_cite_ok,
           answered AND coalesce(rejected, 0) = 0 AS no_rejected,
           answered AND status = 'ok' AS status_ok
    FROM joined
)
SELECT *,
       expected_consulted AND no_sources_ok AND must_cite_ok AND must_not_cite_ok AND no_rejected AND status_ok
           AS passed,
       CASE WHEN answered AND len(expected) > 0 AND len(consulted) > 0
            THEN len(list_intersect(consulted, expected)) / len(consulted) END AS consulted_precision,
       CASE WHEN answered AND len(expected) > 0
            THEN len(list_intersect(consulted, expected)) / len(expected) END AS consulted_recall,
       CASE WHEN answered AND len(expected) > 0 AND len(retrieved) > 0
            THEN len(list_intersect(retrieved, expected)) / len(retrieved) END AS retrieved_precision,
       CASE WHEN answered AND len(expected) > 0
            THEN len(list_intersect(retrieved, expected)) / len(expected) END AS retrieved_recall,
       CASE WHEN verified AND len(expected) > 0 AND len(load_bearing) > 0
            THEN len(list_intersect(load_bearing, expected)) / len(load_bearing) END AS load_bearing_precision,
       CASE WHEN verified AND len(expected) > 0
            THEN len(list_intersect(load_bearing, expected)) / len(expected) END AS load_bearing_recall
FROM checked;
COMMENT ON VIEW expectation_results IS 'Per experiment run and line of its dataset: the run''s latest turn for the question, its consulted, cited and load-bearing sets, each assertion (docs/experiments.md) and the per-turn figures. A line without a turn (an interrupted run) fails every assertion. `trace/scoring.py` averages these rows per run, with bootstrap intervals.';
COMMENT ON COLUMN expectation_results.run_id IS 'The run.';
COMMENT ON COLUMN expectation_results.name IS 'The run''s name; NULL when unnamed.';
COMMENT ON COLUMN expectation_results.dataset_id IS 'Its dataset.';
COMMENT ON COLUMN expectation_results.line IS 'Line of the dataset.';
COMMENT ON COLUMN expectation_results.question_id IS 'The line''s `id`.';
COMMENT ON COLUMN expectation_results.question IS 'The question.';
COMMENT ON COLUMN expectation_results.tags IS 'The line''s tags.';
COMMENT ON COLUMN expectation_results.turn_id IS 'The run''s latest turn for the question; NULL when it was never asked.';
COMMENT ON COLUMN expectation_results.status IS 'That turn''s status.';
COMMENT ON COLUMN expectation_results.latency_ms IS 'That turn''s latency (ms).';
COMMENT ON COLUMN expectation_results.tokens_in IS 'That turn''s prompt tokens.';
COMMENT ON COLUMN expectation_results.tokens_out IS 'That turn''s completion tokens.';
COMMENT ON COLUMN expectation_results.rejected IS 'That turn''s rejected citations (distinct targets).';
COMMENT ON COLUMN expectation_results.expected IS 'Documents that must be consulted.';
COMMENT ON COLUMN expectation_results.expect_no_sources IS 'Whether the turn must consult nothing.';
COMMENT ON COLUMN expectation_results.must_cite IS 'Documents that must be cited.';
COMMENT ON COLUMN expectation_results.must_not_cite IS 'Documents that must be neither cited nor consulted.';
COMMENT ON COLUMN expectation_results.retrieved IS 'The turn''s retrieved set (the naive sources row), in retrieved order.';
COMMENT ON COLUMN expectation_results.consulted IS 'The turn''s consulted set, in retrieved order.';
COMMENT ON COLUMN expectation_results.cited IS 'The turn''s cited set.';
COMMENT ON COLUMN expectation_results.load_bearing IS 'Documents its latest verification found load-bearing (empty when unverified).';
COMMENT ON COLUMN expectation_results.verified IS 'Whether the turn was verified by ablation.';
COMMENT ON COLUMN expectation_results.answered IS 'Whether the run has a turn for the question.';
COMMENT ON COLUMN expectation_results.expected_consulted IS 'Assertion: every `expected` document was consulted.';
COMMENT ON COLUMN expectation_results.no_sources_ok IS 'Assertion: `expect_no_sources` implies an empty consulted set.';
COMMENT ON COLUMN expectation_results.must_cite_ok IS 'Assertion: every `must_cite` document was cited.';
COMMENT ON COLUMN expectation_results.must_not_cite_ok IS 'Assertion: no `must_not_cite` document was cited or consulted.';
COMMENT ON COLUMN expectation_results.no_rejected IS 'Assertion: no citation was rejected.';
COMMENT ON COLUMN expectation_results.status_ok IS 'Assertion: the turn ended `ok`.';
COMMENT ON COLUMN expectation_results.passed IS 'Every assertion passed.';
COMMENT ON COLUMN expectation_results.consulted_precision IS '|consulted ∩ expected| / |consulted|, for a turn with `expected` and a non-empty consulted set; else NULL.';
COMMENT ON COLUMN expectation_results.consulted_recall IS '|consulted ∩ expected| / |expected|, for a turn with `expected`; else NULL.';
COMMENT ON COLUMN expectation_results.retrieved_precision IS 'The same as consulted_precision for the retrieved set (the naive row, for contrast).';
COMMENT ON COLUMN expectation_results.retrieved_recall IS 'The same as consulted_recall for the retrieved set.';
COMMENT ON COLUMN expectation_results.load_bearing_precision IS 'The same as consulted_precision for the load-bearing row, for a verified turn; else NULL.';
COMMENT ON COLUMN expectation_results.load_bearing_recall IS 'The same as consulted_recall for the load-bearing row, for a verified turn; else NULL.';
"""


@migration(M011_EXPERIMENTS)
def m011_experiments(con) -> None:
    """SQL only."""
