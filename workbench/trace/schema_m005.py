"""Migration m005: the judge's version with each claim.

Like every migration, frozen once released: change the schema by appending a new one (a new
`schema_mNNN.py`, registered by `@migration`).
"""

from .migration import migration

# The judge's version with each claim; and, while a comment is being written, the `sources` comment
# points at docs/design.md (which ships with the project) instead of a design file outside it.
SQL = """
ALTER TABLE claims ADD COLUMN judge_version VARCHAR;
COMMENT ON COLUMN claims.judge_version IS 'Version of the judge that scored the claim (its `version`, e.g. `lexical-v1`): verdicts are comparable only within one version. NULL for claims written before this column existed, or added without one.';
COMMENT ON TABLE sources IS 'One row per document the turn retrieved, with its membership in the three sets (docs/design.md §1). The payload''s `sets` are exactly: retrieved = all rows, cited = rows with `cited`, consulted = rows with `consulted`.';
"""


@migration(SQL)
def m005_claims_judge_version(con) -> None:
    """SQL only."""
