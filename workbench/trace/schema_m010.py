"""Migration m010: usage accounting per corpus, listed links apart from citations, and doc gaps per scope.

Its own module because it is long. It replaces (CREATE OR REPLACE) m009's usage macros and views and
m004's `doc_gaps` view:

- `doc_usage` is counted per corpus (`corpus_id`, the run's): the same document id in two knowledge
  bases is two documents.
- A citation of a document the model read (`cited_read_turns`) is counted apart from a link to a
  document it only saw as a title in a listing (`listed_link_turns`): a listing answer links every
  title, which is not use.
- One word per meaning: `category` is a corpus folder (the corpus's own field, known to the corpus,
  not to the trace); `kind` is `source` or `generated` (with `artifact_kind`). m009's
  `doc_usage_totals.category` (which held the kind) becomes `kind` and `artifact_kind`.
- `doc_gaps_for(run_ids, providers, corpus_ids)` scopes the gap queue, and a question that some `ok`
  turn on the same corpus consulted a document for is no gap: the knowledge base has an answer, the
  model that consulted nothing missed it.

Like every migration, frozen once released: change the schema by appending a new one (a new `schema_mNNN.py`, registered by `@migration`).
"""

from .migration import migration

# The gap key: the question lower-cased, whitespace collapsed (as m004's `doc_gaps`).
_KEY = r"lower(trim(regexp_replace(t.question, '\s+', ' ', 'g')))"

M010_USAGE_PER_CORPUS = r"""
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
    FROM ablations a
    JOIN (SELECT turn_id, arg_max(verification_id, verified_at) AS verification_id FROM ablations GROUP BY turn_id) l
        USING (turn_id, verification_id)
    WHERE a.doc_id IS NOT NULL
) v ON v.turn_id = s.turn_id AND v.doc_id = s.doc_id
WHERE (run_ids IS NULL OR list_contains(run_ids, t.run_id))
  AND (corpus_ids IS NULL OR list_contains(corpus_ids, r.corpus_id))
GROUP BY r.corpus_id, s.doc_id
ORDER BY consulted_turns DESC, cited_read_turns DESC, retrieved_turns DESC, r.corpus_id, s.doc_id;

CREATE OR REPLACE MACRO doc_usage_totals_for(run_ids := NULL, corpus_ids := NULL) AS TABLE
SELECT corpus_id,
       coalesce(kind, 'source') AS kind,
       CASE WHEN kind = 'generated' THEN coalesce(artifact_kind, 'retrieval aid') END AS artifact_kind,
       count(*) AS documents,
       sum(retrieved_turns)::BIGINT AS retrieved,
       sum(consulted_turns)::BIGINT AS consulted,
       sum(cited_read_turns)::BIGINT AS cited_read,
       sum(listed_link_turns)::BIGINT AS listed_links,
       sum(load_bearing_turns)::BIGINT AS load_bearing,
       count(*) FILTER (WHERE consulted_turns > 0) AS documents_consulted,
       count(*) FILTER (WHERE consulted_turns = 0) AS documents_never_consulted
FROM doc_usage_for(run_ids := run_ids, corpus_ids := corpus_ids)
GROUP BY ALL
ORDER BY consulted DESC, retrieved DESC, corpus_id, kind, artifact_kind;

CREATE OR REPLACE VIEW doc_usage AS FROM doc_usage_for();
COMMENT ON VIEW doc_usage IS 'Usage accounting: one row per document (per corpus) any turn retrieved, with the number of turns in which it was retrieved and consulted, cited after being read, linked from a title-only listing, and, for verified turns, in which the answer depended on it (load-bearing), most consulted first. Consulted, not retrieved nor linked, is the honest basis for usage, billing and content decisions. Over all runs; for chosen runs or corpora: `FROM doc_usage_for(run_ids := [''<run_id>'', …], corpus_ids := [''<corpus_id>'', …])` (also `workbench usage --run`).';
COMMENT ON COLUMN doc_usage.corpus_id IS 'The knowledge base (the run''s `corpus_id`): a document is counted per corpus, so the same id in two corpora is two rows.';
COMMENT ON COLUMN doc_usage.doc_id IS 'Document id.';
COMMENT ON COLUMN doc_usage.title IS 'Its title, as the latest turn saw it.';
COMMENT ON COLUMN doc_usage.kind IS '`source` or `generated` (a generated artifact). Not the corpus folder, which is the document''s `category` in the corpus.';
COMMENT ON COLUMN doc_usage.artifact_kind IS 'Kind of generated artifact, else NULL.';
COMMENT ON COLUMN doc_usage.retrieved_turns IS 'Turns whose retrieved set holds it (any tool returned it, even as a title).';
COMMENT ON COLUMN doc_usage.consulted_turns IS 'Turns in which the model read it (opened in full, or a cited snippet).';
COMMENT ON COLUMN doc_usage.cited_read_turns IS 'Turns whose answer cites it and in which the model read it (cited and consulted): a citation of a source.';
COMMENT ON COLUMN doc_usage.listed_link_turns IS 'Turns whose answer links it although the model saw only its title in a listing (cited, not consulted): a link in a list of articles, not a use. `cited_read_turns + listed_link_turns` = turns whose answer links it (valid citations).';
COMMENT ON COLUMN doc_usage.verified_turns IS 'Turns whose latest verification by ablation gave it an earned verdict (not `unstable`, not over the budget).';
COMMENT ON COLUMN doc_usage.load_bearing_turns IS 'Of those, the turns whose answer changed without it (`load_bearing`): the usage the answer really depended on.';
COMMENT ON COLUMN doc_usage.hidden_influence_turns IS 'Of those, the turns it influenced without being cited or consulted (`hidden_influence`).';
COMMENT ON COLUMN doc_usage.runs IS 'Runs with at least one of those turns.';
COMMENT ON COLUMN doc_usage.first_used IS 'First turn that retrieved it (UTC).';
COMMENT ON COLUMN doc_usage.last_used IS 'Latest turn that retrieved it (UTC).';
COMMENT ON COLUMN doc_usage.last_consulted IS 'Latest turn that consulted it (UTC); NULL if never consulted.';

CREATE OR REPLACE VIEW doc_usage_totals AS FROM doc_usage_totals_for();
COMMENT ON VIEW doc_usage_totals IS 'Usage totals per corpus and kind of document (`source`, or `generated` with its artifact kind), over all runs; for chosen runs or corpora: `FROM doc_usage_totals_for(run_ids := [''<run_id>'', …], corpus_ids := [''<corpus_id>'', …])`. Totals per corpus folder (`category`) need the corpus: `workbench usage --totals`.';
COMMENT ON COLUMN doc_usage_totals.corpus_id IS 'The knowledge base (the run''s `corpus_id`).';
COMMENT ON COLUMN doc_usage_totals.kind IS '`source` or `generated`.';
COMMENT ON COLUMN doc_usage_totals.artifact_kind IS 'For `generated`: the kind of artifact (`retrieval aid` when it has none); NULL for sources.';
COMMENT ON COLUMN doc_usage_totals.documents IS 'Documents of this corpus and kind that any turn retrieved.';
COMMENT ON COLUMN doc_usage_totals.retrieved IS 'Document-turns retrieved (sum of `doc_usage.retrieved_turns`).';
COMMENT ON COLUMN doc_usage_totals.consulted IS 'Document-turns consulted.';
COMMENT ON COLUMN doc_usage_totals.cited_read IS 'Document-turns cited after being read (sum of `doc_usage.cited_read_turns`).';
COMMENT ON COLUMN doc_usage_totals.listed_links IS 'Document-turns linked from a title-only listing (sum of `doc_usage.listed_link_turns`).';
COMMENT ON COLUMN doc_usage_totals.load_bearing IS 'Document-turns load-bearing in the turn''s latest verification (verified turns only).';
COMMENT ON COLUMN doc_usage_totals.documents_consulted IS 'Documents consulted at least once.';
COMMENT ON COLUMN doc_usage_totals.documents_never_consulted IS 'Documents retrieved but never consulted.';

CREATE OR REPLACE MACRO doc_gaps_for(run_ids := NULL, providers := NULL, corpus_ids := NULL) AS TABLE
WITH ok AS (  -- only turns that ended `ok` count, for the gaps and for what the knowledge base answers
    SELECT """ + _KEY + r""" AS question_key, t.turn_id, t.run_id, t.question, t.started_at, t.n_consulted,
           t.n_retrieved, r.provider, r.corpus_id
    FROM turns t JOIN runs r USING (run_id)
    WHERE t.status = 'ok' AND t.question_kind = 'substantive'
), answered AS (  -- questions some ok turn on the corpus consulted a document for, in any run
    SELECT DISTINCT question_key, corpus_id FROM ok WHERE n_consulted > 0
), per_run AS (
    SELECT g.question_key, g.corpus_id, g.run_id, arg_max(g.question, g.started_at) AS question, count(*) AS asks,
           min(g.started_at) AS first_seen, max(g.started_at) AS last_seen,
           arg_max(g.turn_id, g.started_at) AS last_turn_id, max(g.n_retrieved) AS max_retrieved
    FROM ok g ANTI JOIN answered a
        ON a.question_key = g.question_key AND a.corpus_id IS NOT DISTINCT FROM g.corpus_id
    WHERE g.n_consulted = 0
      AND (run_ids IS NULL OR list_contains(run_ids, g.run_id))
      AND (providers IS NULL OR list_contains(providers, g.provider))
      AND (corpus_ids IS NULL OR list_contains(corpus_ids, g.corpus_id))
    GROUP BY 1, 2, 3
)
SELECT question_key, corpus_id, arg_max(question, last_seen) AS question, sum(asks)::BIGINT AS asks, count(*) AS runs,
       min(first_seen) AS first_seen, max(last_seen) AS last_seen,
       arg_max(last_turn_id, last_seen) AS last_turn_id, max(max_retrieved) AS max_retrieved
FROM per_run
GROUP BY 1, 2
ORDER BY asks DESC, last_seen DESC, question_key, corpus_id;

CREATE OR REPLACE VIEW doc_gaps AS FROM doc_gaps_for();
COMMENT ON VIEW doc_gaps IS 'The doc-gap queue: substantive questions whose `ok` turns consulted nothing (the knowledge base had nothing the model read), grouped by normalised question and corpus, with counts and first/last seen. Not gaps: structural (listing) questions, turns that did not end `ok` (a failed model says nothing about the knowledge base), and questions that any `ok` turn on the same corpus, in any run, consulted a document for (the knowledge base answers them; the model that consulted nothing missed it: see `provider_summary.gap_rate`). For chosen runs, providers or corpora: `FROM doc_gaps_for(run_ids := [...], providers := [...], corpus_ids := [...])`.';
COMMENT ON COLUMN doc_gaps.question_key IS 'The question lower-cased with whitespace collapsed: the grouping key.';
COMMENT ON COLUMN doc_gaps.corpus_id IS 'The knowledge base the question was asked of (the run''s `corpus_id`): a gap belongs to a corpus.';
COMMENT ON COLUMN doc_gaps.question IS 'The most recent wording of the question.';
COMMENT ON COLUMN doc_gaps.asks IS 'How many `ok` turns asked it and consulted nothing.';
COMMENT ON COLUMN doc_gaps.runs IS 'In how many runs.';
COMMENT ON COLUMN doc_gaps.first_seen IS 'First such turn (UTC).';
COMMENT ON COLUMN doc_gaps.last_seen IS 'Latest such turn (UTC).';
COMMENT ON COLUMN doc_gaps.last_turn_id IS 'The latest such turn, to inspect it.';
COMMENT ON COLUMN doc_gaps.max_retrieved IS 'Most documents any of those turns retrieved (0: retrieval found nothing at all).';
"""


@migration(M010_USAGE_PER_CORPUS)
def m010_usage_per_corpus(con) -> None:
    """SQL only."""
