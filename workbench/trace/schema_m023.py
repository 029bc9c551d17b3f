"""Migration m023: an audited run's turns are scored only by the lines they were matched to.

m021's `expectation_results` matches a turn without a `turn_lines` row to a line by its question's text (a turn
written before m021). An audited run scored against a questions file (`collect --questions`, docs/audit.md)
records the line of every turn it matched; a turn it did not match (reported as such) has no row and must stay
unscored, even when its question's text is a line's (a follow-up "And with Okta?" of another session). So that
fallback now leaves out the turns of audit runs (`runs.kind = 'audit'`); the view is otherwise m021's.
Like every migration, frozen once released: change the schema by appending a new one (a new `schema_mNNN.py`, registered by `@migration`).
"""

from .migration import migration
from .schema_m014 import replace_keeping_comments

#: m021's view, written out whole (a frozen migration's SQL is not derived from another's), with its fallback by
#: question text restricted to runs that are not audits.
M023_VIEW = r"""
DROP VIEW expectation_results;
CREATE VIEW expectation_results AS
WITH lined AS (  -- each experiment turn with the dataset line it answered
    SELECT l.run_id, l.line, l.turn_id FROM turn_lines l JOIN experiments e USING (run_id)
    UNION ALL  -- a turn written before m021 has no line: matched by its question's text, as it was then scored
    SELECT t.run_id, x.line, t.turn_id FROM turns t JOIN experiments e USING (run_id)
    JOIN expectations x ON x.dataset_id = e.dataset_id AND x.question = t.question
    WHERE NOT EXISTS (SELECT 1 FROM turn_lines l WHERE l.turn_id = t.turn_id)
      AND t.run_id NOT IN (SELECT run_id FROM runs WHERE kind = 'audit')
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


@migration("")
def m023_audited_lines(con) -> None:
    """Replace `expectation_results` (`M023_VIEW`), keeping every comment it had."""
    replace_keeping_comments(con, ["expectation_results"], M023_VIEW)
