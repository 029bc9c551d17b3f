"""Migration m012: conversations (docs/design.md §11) in the trace store.

A turn belongs to a conversation (`turns.conversation_id`, `turns.position`); a source it carried from an
earlier turn names that turn (`sources.carried_from`); the run configuration holds the context policy
(`runs.context_turns`, `runs.context_token_budget`); and `turn_context` records, per turn, the state each
earlier turn of its conversation was in (what the model still had). Like every migration, frozen once
released: change the schema by appending a new one (a new `schema_mNNN.py`, registered by `@migration`).
"""

from .migration import migration

M012_CONVERSATIONS = r"""
ALTER TABLE turns ADD COLUMN conversation_id VARCHAR;
ALTER TABLE turns ADD COLUMN position INTEGER;
COMMENT ON COLUMN turns.conversation_id IS 'The conversation the turn belongs to (docs/design.md §11); NULL for a single turn.';
COMMENT ON COLUMN turns.position IS '1-based place of the turn in its conversation; NULL for a single turn.';

ALTER TABLE sources ADD COLUMN carried_from VARCHAR;
COMMENT ON COLUMN sources.carried_from IS 'The earlier turn (`turns.turn_id`) whose context gave this document its exposure, when this turn itself did not expose it (a carried document); else NULL.';

ALTER TABLE runs ADD COLUMN context_turns INTEGER;
ALTER TABLE runs ADD COLUMN context_token_budget INTEGER;
COMMENT ON COLUMN runs.context_turns IS 'Context policy of a conversation: how many of the latest earlier turns keep their tool results (older ones keep question and answer); NULL for single turns.';
COMMENT ON COLUMN runs.context_token_budget IS 'Context policy: the token budget the history had to fit (oldest turns dropped first); NULL when derived from the model''s context or for single turns.';

CREATE TABLE turn_context (
    turn_id VARCHAR NOT NULL,
    earlier_turn_id VARCHAR,
    earlier_position INTEGER,
    context VARCHAR NOT NULL
);
COMMENT ON TABLE turn_context IS 'One row per earlier turn of a follow-up''s conversation: how much of it the model still had when the follow-up was asked (docs/design.md §11).';
COMMENT ON COLUMN turn_context.turn_id IS 'The follow-up turn; joins `turns`.';
COMMENT ON COLUMN turn_context.earlier_turn_id IS 'The earlier turn (`turns.turn_id`).';
COMMENT ON COLUMN turn_context.earlier_position IS 'Its 1-based position in the conversation.';
COMMENT ON COLUMN turn_context.context IS '`full` (question, answer and tool results kept), `answer` (question and answer only) or `dropped` (nothing).';
"""


@migration(M012_CONVERSATIONS)
def m012_conversations(con) -> None:
    """SQL only."""
