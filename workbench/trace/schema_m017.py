"""Migration m017: one turn per place of a conversation; the doc-gap queue tells a retrieval miss from a gap.

- A unique index on `turns (conversation_id, position)`: two turns of one conversation can no longer take one
  place (m016 renumbered the collisions written before; the index needs a transaction of its own, since
  DuckDB cannot create an index in the transaction that updated the table).
- Each turn records how its question met the corpus when it was asked (`turns.question_terms`,
  `corpus_terms`, `relevant_retrieved`) and the kind of doc gap that makes it (`turns.gap_kind`, computed by
  `workbench/corpus.py`'s `topic`, where the thresholds live; docs/traces.md, "Doc gaps").
- `doc_gaps_for` (and so `doc_gaps`) gets a `kind` column: `retrieved_unused`, `not_found`, `off_topic`, or
  NULL for a question whose turns were all written before m017. Its SQL is m013's, stated here whole as its
  own statement (not derived from the frozen text), with the kind added; the rules of what is a gap are
  unchanged. The view is made again (its columns changed); DuckDB drops a replaced view's comments, so the
  Python step (`keep_gap_comments`) carries its column comments over, as m014 does, and adds the new ones.

Like every migration, frozen once released: change the schema by appending a new one (a new `schema_mNNN.py`, registered by `@migration`).
"""

from .migration import migration
from .schema_m014 import replace_keeping_comments

M017_DOC_GAP_KINDS = r"""
CREATE UNIQUE INDEX turns_conversation_position ON turns (conversation_id, position);

ALTER TABLE turns ADD COLUMN question_terms INTEGER;
ALTER TABLE turns ADD COLUMN corpus_terms INTEGER;
ALTER TABLE turns ADD COLUMN relevant_retrieved INTEGER;
ALTER TABLE turns ADD COLUMN gap_kind VARCHAR;
COMMENT ON COLUMN turns.question_terms IS 'Distinct terms of the question (stemmed words without stop words); NULL for turns written before m017.';
COMMENT ON COLUMN turns.corpus_terms IS 'How many of them occur in some document of the corpus asked.';
COMMENT ON COLUMN turns.relevant_retrieved IS 'Retrieved documents relevant to the question: each holds at least half of the question''s terms that occur in the corpus (docs/traces.md, "Doc gaps").';
COMMENT ON COLUMN turns.gap_kind IS 'The kind of doc gap the turn is when it consults nothing (`doc_gaps.kind`): `off_topic` (fewer than half of its terms occur in the corpus), `retrieved_unused` (a relevant document was retrieved), else `not_found`. Set for every turn; only `doc_gaps` says whether it is a gap.';
"""

#: The gap queue with its kind: the macro, and the view over it made again (its columns changed).
M017_GAP_QUEUE = r"""
CREATE OR REPLACE MACRO doc_gaps_for(run_ids := NULL, providers := NULL, corpus_ids := NULL) AS TABLE
WITH ok AS (  -- only turns that ended `ok` count, for the gaps and for what the knowledge base answers
    SELECT lower(trim(regexp_replace(t.question, '\s+', ' ', 'g'))) AS question_key, t.turn_id, t.run_id,
           t.question, t.started_at, t.n_consulted, t.n_retrieved, r.provider, r.corpus_id,
           CASE t.gap_kind WHEN 'retrieved_unused' THEN 3 WHEN 'not_found' THEN 2 WHEN 'off_topic' THEN 1 END
               AS kind_rank,
           EXISTS (SELECT 1 FROM sources s WHERE s.turn_id = t.turn_id AND s.cited AND s.carried_from IS NOT NULL)
               AS cites_carried
    FROM turns t JOIN runs r USING (run_id)
    WHERE t.status = 'ok' AND t.question_kind = 'substantive'
), answered AS (  -- questions some ok turn on the corpus consulted a document for, in any run
    SELECT DISTINCT question_key, corpus_id FROM ok WHERE n_consulted > 0 OR cites_carried
), per_run AS (
    SELECT g.question_key, g.corpus_id, g.run_id, arg_max(g.question, g.started_at) AS question, count(*) AS asks,
           min(g.started_at) AS first_seen, max(g.started_at) AS last_seen,
           arg_max(g.turn_id, g.started_at) AS last_turn_id, max(g.n_retrieved) AS max_retrieved,
           max(g.kind_rank) AS kind_rank
    FROM ok g ANTI JOIN answered a
        ON a.question_key = g.question_key AND a.corpus_id IS NOT DISTINCT FROM g.corpus_id
    WHERE g.n_consulted = 0 AND NOT g.cites_carried
      AND (run_ids IS NULL OR list_contains(run_ids, g.run_id))
      AND (providers IS NULL OR list_contains(providers, g.provider))
      AND (corpus_ids IS NULL OR list_contains(corpus_ids, g.corpus_id))
    GROUP BY 1, 2, 3
)
SELECT question_key, corpus_id, arg_max(question, last_seen) AS question, sum(asks)::BIGINT AS asks, count(*) AS runs,
       min(first_seen) AS first_seen, max(last_seen) AS last_seen,
       arg_max(last_turn_id, last_seen) AS last_turn_id, max(max_retrieved) AS max_retrieved,
       CASE max(kind_rank) WHEN 3 THEN 'retrieved_unused' WHEN 2 THEN 'not_found' WHEN 1 THEN 'off_topic' END AS kind
FROM per_run
GROUP BY 1, 2
ORDER BY asks DESC, last_seen DESC, question_key, corpus_id;

CREATE OR REPLACE VIEW doc_gaps AS FROM doc_gaps_for();
"""

#: What m017 says anew: the view (it now has a kind) and its new column.
M017_GAP_COMMENTS = r"""
COMMENT ON VIEW doc_gaps IS 'The doc-gap queue: substantive questions whose `ok` turns consulted nothing, grouped by normalised question and corpus, with counts, first/last seen and the `kind` of gap (an article to write is `not_found`; `retrieved_unused` is a retrieval or model miss; `off_topic` is outside the knowledge base). Not gaps: structural (listing) questions, turns that did not end `ok` (a failed model says nothing about the knowledge base), follow-ups whose answer cites a document carried from an earlier turn of the conversation (answered from what that turn read, docs/design.md §11), and questions that any `ok` turn on the same corpus, in any run, consulted a document for (the knowledge base answers them; the model that consulted nothing missed it: see `provider_summary.gap_rate`). For chosen runs, providers or corpora: `FROM doc_gaps_for(run_ids := [...], providers := [...], corpus_ids := [...])`.';
COMMENT ON COLUMN doc_gaps.kind IS 'What kind of gap (from its turns'' `turns.gap_kind`, the strongest of them): `retrieved_unused` (some turn retrieved a relevant document and none used it: fix retrieval or the model, not the docs), `not_found` (nothing relevant was retrieved: an article to write), `off_topic` (fewer than half of the question''s terms occur in the corpus: not this knowledge base''s subject); NULL when every turn was written before m017.';
"""


@migration(M017_DOC_GAP_KINDS)
def m017_doc_gap_kinds(con) -> None:
    """Replace the gap queue (`M017_GAP_QUEUE`), keeping the comments `doc_gaps` and its columns had, then
    comment the view anew and its new `kind` column (`M017_GAP_COMMENTS`)."""
    replace_keeping_comments(con, ["doc_gaps"], M017_GAP_QUEUE)
    con.execute(M017_GAP_COMMENTS)
