"""Migration m013: conversation views, and the doc-gap queue in a conversation (docs/design.md §11).

- `conversation_turns`: one row per turn of a conversation, in order, with its three sets, what it carried
  from earlier turns, which of those it cited (each with the turn that gave it), and the context state the
  model had each earlier turn in.
- `conversations`: one row per conversation: its turns, questions, sets and carried citations.
- `doc_gaps_for` (and so `doc_gaps`) no longer counts a follow-up that cites carried documents: the model
  answered from a document an earlier turn read (design §11.6). Such a follow-up can consult nothing (a
  document carried only as a link in an earlier answer is never consulted, §11 rule 3d), yet the
  knowledge base answered it. m010's macro is replaced whole (its SQL written out here); the `doc_gaps` view reads
  it at query time.

Like every migration, frozen once released: change the schema by appending a new one (a new `schema_mNNN.py`, registered by `@migration`).
"""

from .migration import migration


# m010's `doc_gaps_for` with the carried citations (a turn citing a carried document answers its question, and
# is no gap), written out whole: a migration that replaces a view or macro states its SQL itself, never by
# editing another migration's text.
_GAPS = r"""CREATE OR REPLACE MACRO doc_gaps_for(run_ids := NULL, providers := NULL, corpus_ids := NULL) AS TABLE
WITH ok AS (  -- only turns that ended `ok` count, for the gaps and for what the knowledge base answers
    SELECT lower(trim(regexp_replace(t.question, '\s+', ' ', 'g'))) AS question_key, t.turn_id, t.run_id, t.question, t.started_at, t.n_consulted,
           t.n_retrieved, r.provider, r.corpus_id,
           EXISTS (SELECT 1 FROM sources s WHERE s.turn_id = t.turn_id AND s.cited AND s.carried_from IS NOT NULL)
               AS cites_carried
    FROM turns t JOIN runs r USING (run_id)
    WHERE t.status = 'ok' AND t.question_kind = 'substantive'
), answered AS (  -- questions some ok turn on the corpus consulted a document for, in any run
    SELECT DISTINCT question_key, corpus_id FROM ok WHERE n_consulted > 0 OR cites_carried
), per_run AS (
    SELECT g.question_key, g.corpus_id, g.run_id, arg_max(g.question, g.started_at) AS question, count(*) AS asks,
           min(g.started_at) AS first_seen, max(g.started_at) AS last_seen,
           arg_max(g.turn_id, g.started_at) AS last_turn_id, max(g.n_retrieved) AS max_retrieved
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
       arg_max(last_turn_id, last_seen) AS last_turn_id, max(max_retrieved) AS max_retrieved
FROM per_run
GROUP BY 1, 2
ORDER BY asks DESC, last_seen DESC, question_key, corpus_id;

"""

M013_CONVERSATION_VIEWS = r"""
CREATE VIEW conversation_turns AS
WITH sets AS (
    SELECT s.turn_id,
           list(s.doc_id ORDER BY s.position) AS retrieved,
           coalesce(list(s.doc_id ORDER BY s.position) FILTER (WHERE s.cited), []) AS cited,
           coalesce(list(s.doc_id ORDER BY s.position) FILTER (WHERE s.consulted), []) AS consulted,
           coalesce(list(s.doc_id ORDER BY s.position) FILTER (WHERE s.carried_from IS NOT NULL), []) AS carried,
           coalesce(list(struct_pack(doc_id := s.doc_id, carried_from := s.carried_from,
                                     carried_position := e.position, consulted := s.consulted)
                         ORDER BY s.position) FILTER (WHERE s.cited AND s.carried_from IS NOT NULL), [])
               AS carried_cited
    FROM sources s LEFT JOIN turns e ON e.turn_id = s.carried_from
    GROUP BY s.turn_id
), context AS (
    SELECT turn_id, list(struct_pack("position" := earlier_position, turn_id := earlier_turn_id, context := context)
                         ORDER BY earlier_position) AS context
    FROM turn_context GROUP BY turn_id
)
SELECT t.conversation_id, t.position, t.turn_id, t.run_id, t.started_at, t.question, t.status,
       coalesce(s.retrieved, []) AS retrieved, coalesce(s.cited, []) AS cited,
       coalesce(s.consulted, []) AS consulted, coalesce(s.carried, []) AS carried,
       coalesce(s.carried_cited, []) AS carried_cited,
       len(coalesce(s.carried_cited, [])) > 0 AS cites_carried,
       coalesce(c.context, []) AS context, r.context_turns, r.context_token_budget
FROM turns t JOIN runs r USING (run_id)
LEFT JOIN sets s USING (turn_id)
LEFT JOIN context c USING (turn_id)
WHERE t.conversation_id IS NOT NULL;
COMMENT ON VIEW conversation_turns IS 'One row per turn of a conversation (docs/design.md §11), in `position` order within each: its three sets, the documents it carried from earlier turns, the carried documents its answer cites (each with the earlier turn that gave it), and the context state of each earlier turn. Single turns are not in it. `conversations` sums it up per conversation.';
COMMENT ON COLUMN conversation_turns.conversation_id IS 'The conversation (`turns.conversation_id`).';
COMMENT ON COLUMN conversation_turns.position IS 'The turn''s 1-based place in it; above 1 is a follow-up.';
COMMENT ON COLUMN conversation_turns.turn_id IS 'The turn.';
COMMENT ON COLUMN conversation_turns.run_id IS 'Its run (configuration).';
COMMENT ON COLUMN conversation_turns.started_at IS 'When the turn started (UTC).';
COMMENT ON COLUMN conversation_turns.question IS 'The question as asked (a follow-up''s may only make sense after the earlier ones).';
COMMENT ON COLUMN conversation_turns.status IS '`ok` or the error status.';
COMMENT ON COLUMN conversation_turns.retrieved IS 'The retrieved set (this turn''s tool results and excerpts plus what it carried), in retrieved order.';
COMMENT ON COLUMN conversation_turns.cited IS 'The cited set.';
COMMENT ON COLUMN conversation_turns.consulted IS 'The consulted set.';
COMMENT ON COLUMN conversation_turns.carried IS 'Retrieved documents this turn did not expose itself: carried in the context from an earlier turn (`sources.carried_from`).';
COMMENT ON COLUMN conversation_turns.carried_cited IS 'The carried documents the answer cites, in retrieved order: `doc_id`, `carried_from` (the earlier turn''s id), `carried_position` (its position) and `consulted` (false for a document carried only as a title or link, §11 rule 3d).';
COMMENT ON COLUMN conversation_turns.cites_carried IS 'True when the answer cites at least one carried document.';
COMMENT ON COLUMN conversation_turns.context IS 'For a follow-up: each earlier turn''s `position`, `turn_id` and `context` state (`full`, `answer`, `dropped`) when it was asked (`turn_context`); empty for the first turn.';
COMMENT ON COLUMN conversation_turns.context_turns IS 'The context policy of its run: how many of the latest earlier turns kept their tool results.';
COMMENT ON COLUMN conversation_turns.context_token_budget IS 'The context policy''s token budget, when one was set.';

CREATE VIEW conversations AS
SELECT conversation_id,
       count(*) AS turns,
       count(*) FILTER (WHERE position > 1) AS follow_ups,
       count(*) FILTER (WHERE position > 1 AND cites_carried) AS follow_ups_citing_carried,
       list(turn_id ORDER BY position, started_at) AS turn_ids,
       list(question ORDER BY position, started_at) AS questions,
       list(status ORDER BY position, started_at) AS statuses,
       list(struct_pack("position" := position, retrieved := retrieved, cited := cited, consulted := consulted)
            ORDER BY position, started_at) AS sets,
       flatten(list(list_transform(carried_cited, lambda c: struct_pack("position" := position, doc_id := c.doc_id,
                                                                        carried_from := c.carried_from,
                                                                        carried_position := c.carried_position))
               ORDER BY position, started_at)) AS carried_citations,
       count(DISTINCT run_id) AS runs,
       min(started_at) AS started_at,
       max(started_at) AS last_at
FROM conversation_turns
GROUP BY conversation_id
ORDER BY last_at DESC NULLS LAST, conversation_id;
COMMENT ON VIEW conversations IS 'One row per conversation (docs/design.md §11): its turns in order with their questions and statuses, each turn''s three sets, and every citation of a carried document (a follow-up citing what an earlier turn read), latest conversation first. Per turn: `conversation_turns`.';
COMMENT ON COLUMN conversations.conversation_id IS 'The conversation.';
COMMENT ON COLUMN conversations.turns IS 'Its turns (failed ones included: their positions count).';
COMMENT ON COLUMN conversations.follow_ups IS 'Turns after the first.';
COMMENT ON COLUMN conversations.follow_ups_citing_carried IS 'Follow-ups whose answer cites at least one carried document.';
COMMENT ON COLUMN conversations.turn_ids IS 'Its turns'' ids, in position order.';
COMMENT ON COLUMN conversations.questions IS 'Its questions, in position order.';
COMMENT ON COLUMN conversations.statuses IS 'Each turn''s status, in position order.';
COMMENT ON COLUMN conversations.sets IS 'Each turn''s `position` and its `retrieved`, `cited` and `consulted` sets, in position order.';
COMMENT ON COLUMN conversations.carried_citations IS 'Every citation of a carried document, in order: the citing turn''s `position`, the `doc_id`, and the earlier turn that gave it (`carried_from`, `carried_position`).';
COMMENT ON COLUMN conversations.runs IS 'Runs (configurations) its turns were asked under.';
COMMENT ON COLUMN conversations.started_at IS 'When its first turn started (UTC).';
COMMENT ON COLUMN conversations.last_at IS 'When its latest turn started (UTC).';

""" + _GAPS + r"""
COMMENT ON VIEW doc_gaps IS 'The doc-gap queue: substantive questions whose `ok` turns consulted nothing (the knowledge base had nothing the model read), grouped by normalised question and corpus, with counts and first/last seen. Not gaps: structural (listing) questions, turns that did not end `ok` (a failed model says nothing about the knowledge base), follow-ups whose answer cites a document carried from an earlier turn of the conversation (answered from what that turn read, docs/design.md §11), and questions that any `ok` turn on the same corpus, in any run, consulted a document for (the knowledge base answers them; the model that consulted nothing missed it: see `provider_summary.gap_rate`). For chosen runs, providers or corpora: `FROM doc_gaps_for(run_ids := [...], providers := [...], corpus_ids := [...])`.';
"""


@migration(M013_CONVERSATION_VIEWS)
def m013_conversation_views(con) -> None:
    """SQL only."""
