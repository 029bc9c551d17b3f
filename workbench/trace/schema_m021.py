"""Migration m021: an experiment scores each line of its dataset by the turn that answered that line.

m011's `expectation_results` matched a line to the run's turns by question text, so two conversations sharing
a follow-up ("And with Okta?") had one turn applied to both lines (masking one failure, inventing another).
`eval` now records, with each turn, the dataset line it answered (`turn_lines`), and the view joins on it.
Turns written before this migration have no line: they are matched by their question's text, as they were
scored when they were written. `runs.eval_settings_json` keeps the whole configuration an `eval` run was asked
with, so a resume with any other configuration is refused, naming the difference (docs/experiments.md).
Like every migration, frozen once released: change the schema by appending a new one (a new `schema_mNNN.py`, registered by `@migration`).
"""

from .migration import migration
from .schema_m014 import replace_keeping_comments

M021_TURN_LINES = r"""
CREATE TABLE turn_lines (
    turn_id VARCHAR PRIMARY KEY,
    run_id VARCHAR NOT NULL,
    line INTEGER NOT NULL
);
COMMENT ON TABLE turn_lines IS 'One row per turn of an `eval` run: the line of the questions file it answered, so each line is scored by its own turn (`expectation_results`) and a resume skips exactly the lines stored.';
COMMENT ON COLUMN turn_lines.turn_id IS 'The turn; joins `turns`.';
COMMENT ON COLUMN turn_lines.run_id IS 'Its run; joins `runs`.';
COMMENT ON COLUMN turn_lines.line IS 'The line of the questions file (from 1) the turn answered; joins `expectations.line` through `experiments`.';

ALTER TABLE runs ADD COLUMN eval_settings_json VARCHAR;
COMMENT ON COLUMN runs.eval_settings_json IS 'Eval runs: the configuration the batch was asked with (provider, model, options, retriever, mode, k, tool protocol, verification, context policy) as JSON, compared on resume; NULL for interactive runs and runs from before m021. Never holds secrets.';
"""

#: The view, now joining each line to the turn recorded for it (m011's otherwise, as it was written).
M021_VIEW = r"""
DROP VIEW expectation_results;
CREATE VIEW expectation_results AS
WITH lined AS (  -- each experiment turn with the dataset line it answered
    SELECT l.run_id, l.line, l.turn_id FROM turn_lines l JOIN experiments e USING (run_id)
    UNION ALL  -- a turn written before m021 has no line: matched by its question's text, as it was then scored
    SELECT t.run_id, x.line, t.turn_id FROM turns t JOIN experiments e USING (run_id)
    JOIN expectations x ON x.dataset_id = e.dataset_id AND x.question = t.question
    WHERE NOT EXISTS (SELECT 1 FROM turn_lines l WHERE l.turn_id = t.turn_id)
), asked AS (  -- each line's latest turn in each experiment run (a resumed run asked failed ones again)
    SELECT * FROM (
        SELECT l.line, t.*,
               row_number() OVER (PARTITION BY l.run_id, l.line ORDER BY t.started_at DESC, t.turn_id DESC) AS nth
        FROM lined l JOIN turns t USING (turn_id)
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
    SELECT e.run_id, e.name, x.dataset_id, x.line, x.question_id, x.question,
           json_extract_string(x.extra_json, '$.conversation') AS conversation, x.tags, a.turn_id, a.status,
           a.latency_ms, a.tokens_in, a.tokens_out, a.n_rejected AS rejected,
           x.expected, x.expect_no_sources, x.must_cite, x.must_not_cite,
           coalesce(s.retrieved, []) AS retrieved, coalesce(s.consulted, []) AS consulted, coalesce(s.cited, []) AS cited,
           coalesce(s.load_bearing, []) AS load_bearing, coalesce(s.verified, false) AS verified,
           a.turn_id IS NOT NULL AS answered
    FROM experiments e JOIN expectations x USING (dataset_id)
    LEFT JOIN asked a ON a.run_id = e.run_id AND a.line = x.line
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
"""
#: What the view says anew; its other comments are m011's, carried over (`score_by_line`).
M021_VIEW_COMMENTS = r"""
COMMENT ON VIEW expectation_results IS 'Per experiment run and line of its dataset: the run''s latest turn for the line (by the line it answered, `turn_lines`; never by question text, which two conversations may share), its consulted, cited and load-bearing sets, each assertion (docs/experiments.md) and the per-turn figures. A line without a turn (an interrupted run) fails every assertion. `trace/scoring.py` averages these rows per run, with bootstrap intervals.';
COMMENT ON COLUMN expectation_results.conversation IS 'The line''s conversation (its `"conversation"` in the file); NULL for a question asked on its own.';
COMMENT ON COLUMN expectation_results.turn_id IS 'The run''s latest turn for the line; NULL when it was never asked.';
COMMENT ON COLUMN expectation_results.answered IS 'Whether the run has a turn for the line.';
"""
@migration(M021_TURN_LINES)
def m021_turn_lines(con) -> None:
    """Replace `expectation_results` (`M021_VIEW`): DuckDB drops a replaced view's comments, so m011's are
    carried over rather than restated here, and the new ones (`M021_VIEW_COMMENTS`) set after them."""
    replace_keeping_comments(con, ["expectation_results"], M021_VIEW)
    con.execute(M021_VIEW_COMMENTS)
