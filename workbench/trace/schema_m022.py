"""Migration m022: the Trace explorer's saved, named queries (`saved_queries`).

Like every migration, frozen once released: change the schema by appending a new one (a new `schema_mNNN.py`, registered by `@migration`).
"""

from .migration import migration

M022_SAVED_QUERIES = """
CREATE TABLE saved_queries (
    name VARCHAR PRIMARY KEY,
    sql VARCHAR NOT NULL,
    saved_at TIMESTAMPTZ NOT NULL,
    saved_by VARCHAR
);
COMMENT ON TABLE saved_queries IS 'The Trace explorer''s saved queries: listed beside its canned ones, each opened by a link (`?query=<name>`). Saved only when read-only; run, like any typed query, read-only and bounded.';
COMMENT ON COLUMN saved_queries.name IS 'Its name (unique; 1 to 80 characters, no control characters).';
COMMENT ON COLUMN saved_queries.sql IS 'The SQL (read-only; at most 20,000 characters).';
COMMENT ON COLUMN saved_queries.saved_at IS 'When it was last saved (UTC).';
COMMENT ON COLUMN saved_queries.saved_by IS 'Who saved it (the signed-in user), else NULL.';
"""


@migration(M022_SAVED_QUERIES)
def m022_saved_queries(con) -> None:
    """SQL only."""
