"""Migration m007: the `model_calls` and `passages` tables.

Like every migration, frozen once released: change the schema by appending a new one (a new
`schema_mNNN.py`, registered by `@migration`).
"""

from .migration import migration

SQL = """
CREATE TABLE model_calls (
    turn_id VARCHAR NOT NULL,
    seq INTEGER NOT NULL,
    provider VARCHAR,
    model VARCHAR,
    model_version VARCHAR,
    latency_ms DOUBLE,
    tokens_in BIGINT,
    tokens_out BIGINT,
    finish_reason VARCHAR,
    retries INTEGER,
    n_tool_calls INTEGER
);
COMMENT ON TABLE model_calls IS 'One row per provider call of a turn, in call order; turns written before this table existed have none (their totals are on `turns`). The agent loop runs the tool calls a model call asked for right after it, so a turn reads: call 0, its `n_tool_calls` tool calls (in `tool_calls.seq` order), call 1, … — the order `workbench export --openinference` lays spans out in.';
COMMENT ON COLUMN model_calls.turn_id IS 'The turn; joins `turns`.';
COMMENT ON COLUMN model_calls.seq IS 'Call order within the turn, from 0.';
COMMENT ON COLUMN model_calls.provider IS 'Provider that answered, e.g. `offline`, `ollama`, `gemini`.';
COMMENT ON COLUMN model_calls.model IS 'Model requested.';
COMMENT ON COLUMN model_calls.model_version IS 'Model the server says answered (e.g. `gemini-2.5-flash-001`), when it says.';
COMMENT ON COLUMN model_calls.latency_ms IS 'Wall time of the call, retries included, in milliseconds.';
COMMENT ON COLUMN model_calls.tokens_in IS 'Prompt tokens the provider reported; NULL when it reported none.';
COMMENT ON COLUMN model_calls.tokens_out IS 'Completion tokens the provider reported; NULL when it reported none.';
COMMENT ON COLUMN model_calls.finish_reason IS 'Why the model stopped (`stop`, `tool_calls`, `error`, …), as the provider said.';
COMMENT ON COLUMN model_calls.retries IS 'Rate-limit or server-error retries before the call succeeded (or gave up).';
COMMENT ON COLUMN model_calls.n_tool_calls IS 'Tool calls this step asked for (run right after it); 0 for the final answer.';

CREATE TABLE passages (
    passage_id VARCHAR PRIMARY KEY,
    text VARCHAR NOT NULL
);
COMMENT ON TABLE passages IS 'Every distinct passage a tool showed the model (a search snippet, an excerpt), stored once: the same chunk comes back in many turns, so `retrieved_items` keeps only its `passage_id`. Not per turn, so not partitioned in exports.';
COMMENT ON COLUMN passages.passage_id IS 'sha256 of the text, first 32 hex digits: the same text always has the same id.';
COMMENT ON COLUMN passages.text IS 'The passage exactly as the model was shown it.';

ALTER TABLE retrieved_items ADD COLUMN passage_id VARCHAR;
COMMENT ON COLUMN retrieved_items.passage_id IS 'The passage the model was shown for this item (joins `passages`): the search snippet or the excerpt. NULL for title-only listings, for whole-document fetches (the text is the document''s own) and for items written before this column existed.';
"""


@migration(SQL)
def m007_model_calls_passages(con) -> None:
    """SQL only."""
