"""Migration m019: what a tool result left out to fit the model's context (`tool_calls.cut_json`).

A listing too long for the context is returned one page at a time, a long document one part at a time
(docs/design.md, "Results that fit"); the call's `Cut` says which page or part the model received, of how many,
and why. Kept with the call so that the trace explorer shows it and a conversation's carried tool call gives the
model the same page again. Like every migration, frozen once released: change the schema by appending a new one
(a new `schema_mNNN.py`, registered by `@migration`).
"""

from .migration import migration

M019_TOOL_CALL_CUTS = r"""
ALTER TABLE tool_calls ADD COLUMN cut_json VARCHAR;
COMMENT ON COLUMN tool_calls.cut_json IS 'What the result left out to fit the model''s context, as JSON: `kind` (`page` of a listing or search, `part` of a document), `page` of `pages`, the `total` items (characters), the range `start`–`end` shown, the page `size` in tokens, and the `reason` in words; NULL when the result was whole (and for turns written before m019).';
"""


@migration(M019_TOOL_CALL_CUTS)
def m019_tool_call_cuts(con) -> None:
    """SQL only."""
