"""Migration m017: one turn per place of a conversation; the doc-gap queue tells a retrieval miss from a gap.

- A unique index on `turns (conversation_id, position)`: two turns of one conversation can no longer take one
  place (m016 renumbered the collisions written before; the index needs a transaction of its own, since
  DuckDB cannot create an index in the transaction that updated the table).

Like every migration, frozen once released: change the schema by appending a new one in `schema.py`.
"""

M017_UNIQUE_POSITIONS = r"""
CREATE UNIQUE INDEX turns_conversation_position ON turns (conversation_id, position);
"""

M017_DOC_GAP_KINDS = M017_UNIQUE_POSITIONS
