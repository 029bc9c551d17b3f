"""Migration m016: a conversation's positions are unique, and each turn records the history it was asked with.

Two turns of one conversation asked at once (two `ask --conversation ID` processes, two app sessions) both
read the same history and, before m016, both wrote the next position. Since m016 the writer gives a turn its
position inside the write transaction (the next free one, `workbench/trace/writer.py`), a unique index on
(`conversation_id`, `position`) refuses a second turn at one place, and `turns.history_through` keeps the
place the turn was asked after: when another turn landed while it ran, its position is later than
`history_through + 1` (docs/design.md, "Concurrent turns of one conversation").

Databases written before m016 may hold such collisions: each conversation that has one is renumbered in the
order the turns were written (position, then start time, then turn id), so it is gapless again, and
`turn_context.earlier_position` follows its turns. `history_through` of those turns is what they were asked
after (their old position - 1), so a renumbered turn shows that it did not see the turn it collided with.
Like every migration, frozen once released: change the schema by appending a new one (a new `schema_mNNN.py`, registered by `@migration`).
"""

from .migration import migration

M016_CONVERSATION_POSITIONS = r"""
ALTER TABLE turns ADD COLUMN history_through INTEGER;
COMMENT ON COLUMN turns.history_through IS 'For a conversation turn: the position of the conversation''s last turn when this turn read its history (it was asked after that turn; 0 for a first turn). Equal to `position - 1` unless another turn of the conversation landed while this one ran (docs/design.md, "Concurrent turns of one conversation"); NULL for a single turn.';

UPDATE turns SET history_through = position - 1 WHERE conversation_id IS NOT NULL AND position IS NOT NULL;

UPDATE turns SET position = r.renumbered
FROM (SELECT turn_id, row_number() OVER (PARTITION BY conversation_id ORDER BY position, started_at, turn_id)
             AS renumbered
      FROM turns
      WHERE conversation_id IN (SELECT conversation_id FROM turns WHERE conversation_id IS NOT NULL
                                GROUP BY conversation_id, position HAVING count(*) > 1)) r
WHERE turns.turn_id = r.turn_id AND turns.position IS DISTINCT FROM r.renumbered;

UPDATE turn_context SET earlier_position = t.position
FROM turns t
WHERE t.turn_id = turn_context.earlier_turn_id AND turn_context.earlier_position IS DISTINCT FROM t.position;
"""


@migration(M016_CONVERSATION_POSITIONS)
def m016_conversation_positions(con) -> None:
    """SQL only."""
