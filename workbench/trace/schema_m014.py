"""Migration m014: each turn's latest verification by ablation is one view, `latest_verifications`.

m009 wrote "the turn's latest verification" as the same subquery three times (in `source_verdicts`,
`verification_summary` and the usage macro `doc_usage_for`, which m010 replaced); this migration states
it once and points the three at it (their SQL as written then, with the subquery reading the view). Their columns and results are unchanged, and so are their comments:
DuckDB drops a view's comments when the view is replaced, so the migration's Python step carries them
over (`reuse_latest_verification`) rather than restating them here.
Like every migration, frozen once released: change the schema by appending a new one in `schema.py`.
"""

from .schema_m009 import M009_ABLATIONS
from .schema_m010 import M010_USAGE_PER_CORPUS

M014_LATEST_VERIFICATION = """
CREATE VIEW latest_verifications AS
SELECT turn_id, arg_max(verification_id, verified_at) AS verification_id, max(verified_at) AS verified_at
FROM ablations
GROUP BY turn_id;
COMMENT ON VIEW latest_verifications IS 'Each verified turn''s latest verification by ablation: the one every verdict view (`source_verdicts`, `verification_summary`, `doc_usage`) reads, so a turn verified twice is judged by the later verification.';
COMMENT ON COLUMN latest_verifications.turn_id IS 'The verified turn.';
COMMENT ON COLUMN latest_verifications.verification_id IS 'Its latest verification (`ablations.verification_id`).';
COMMENT ON COLUMN latest_verifications.verified_at IS 'When that verification finished (UTC).';
"""

#: The subquery m009 wrote three times, and what it becomes.
_SUBQUERY = "SELECT turn_id, arg_max(verification_id, verified_at) AS verification_id FROM ablations GROUP BY turn_id"
_VIEW = "SELECT turn_id, verification_id FROM latest_verifications"


def _reading_the_view(sql: str, head: str) -> str:
    """The statement of `sql` that starts with `head`, replacing what it created and reading the view."""
    start = sql.index(head)
    statement = sql[start:sql.index(";\n", start) + 1]
    if statement.count(_SUBQUERY) != 1:
        raise RuntimeError(f"m014: {head!r} no longer reads the latest verification as m009 wrote it")
    return statement.replace(_SUBQUERY, _VIEW).replace("CREATE VIEW", "CREATE OR REPLACE VIEW", 1)


#: m009's and m010's readers of the latest verification, as they were written (frozen), now reading the view:
#: derived from their SQL rather than restated, so their columns and logic cannot drift.
M014_READERS = "\n\n".join([_reading_the_view(M009_ABLATIONS, "CREATE VIEW source_verdicts AS"),
                             _reading_the_view(M009_ABLATIONS, "CREATE VIEW verification_summary AS"),
                             _reading_the_view(M010_USAGE_PER_CORPUS, "CREATE OR REPLACE MACRO doc_usage_for(")])
#: The views replaced above, whose comments `reuse_latest_verification` keeps.
_REPLACED_VIEWS = ("source_verdicts", "verification_summary")
_COMMENTS = """
SELECT view_name, NULL, comment FROM duckdb_views()
WHERE database_name = current_database() AND list_contains(?, view_name) AND comment IS NOT NULL
UNION ALL
SELECT table_name, column_name, comment FROM duckdb_columns()
WHERE database_name = current_database() AND list_contains(?, table_name) AND comment IS NOT NULL
"""


def reuse_latest_verification(con) -> None:
    """Replace the readers (`M014_READERS`), keeping every comment their views had."""
    views = list(_REPLACED_VIEWS)
    kept = con.execute(_COMMENTS, [views, views]).fetchall()
    con.execute(M014_READERS)
    for view, column, comment in kept:
        target = f"COLUMN {view}.{column}" if column else f"VIEW {view}"
        quoted = comment.replace("'", "''")
        con.execute(f"COMMENT ON {target} IS '{quoted}'")
