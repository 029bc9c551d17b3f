"""Migration m006: the tool protocol an agent run used.

Like every migration, frozen once released: change the schema by appending a new one (a new
`schema_mNNN.py`, registered by `@migration`).
"""

from .migration import migration

SQL = """
ALTER TABLE runs ADD COLUMN tool_protocol VARCHAR;
UPDATE runs SET tool_protocol = 'native' WHERE mode = 'agent';
COMMENT ON COLUMN runs.tool_protocol IS 'Agent mode: how the model called tools, `native` (the provider''s tool calling) or `json-steps` (each model output forced by a JSON schema to be one action). Tool calls, citations and sources are recorded the same way under both. NULL in excerpt mode (no tools). Runs written before this column existed were `native`.';
"""


@migration(SQL)
def m006_tool_protocol(con) -> None:
    """SQL only."""
