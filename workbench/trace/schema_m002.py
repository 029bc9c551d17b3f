"""Migration m002: the `claims` table: per-claim faithfulness verdicts.

Like every migration, frozen once released: change the schema by appending a new one (a new
`schema_mNNN.py`, registered by `@migration`).
"""

from .migration import migration

SQL = """
CREATE TABLE claims (
    turn_id VARCHAR NOT NULL,
    claim_idx INTEGER NOT NULL,
    text VARCHAR NOT NULL,
    cited_doc_ids VARCHAR[],
    judge VARCHAR,
    score DOUBLE,
    verdict VARCHAR,
    best_span VARCHAR,
    wrong_excerpt BOOLEAN,
    generated_only BOOLEAN,
    extra_json VARCHAR,
    added_at TIMESTAMPTZ
);
COMMENT ON TABLE claims IS 'Claims of an answer with their faithfulness verdicts (one row per claim and judge). Written with the turn, or later by `add_claims`.';
COMMENT ON COLUMN claims.turn_id IS 'The turn; joins `turns`.';
COMMENT ON COLUMN claims.claim_idx IS 'Order of the claim in the answer, from 0.';
COMMENT ON COLUMN claims.text IS 'The claim text.';
COMMENT ON COLUMN claims.cited_doc_ids IS 'Documents the claim cites.';
COMMENT ON COLUMN claims.judge IS 'The judge that scored the claim.';
COMMENT ON COLUMN claims.score IS 'Support score given by the judge.';
COMMENT ON COLUMN claims.verdict IS 'The judge''s verdict, e.g. supported / partial / unsupported.';
COMMENT ON COLUMN claims.best_span IS 'The evidence span that best supports the claim.';
COMMENT ON COLUMN claims.wrong_excerpt IS 'An uncited retrieved excerpt supports the claim clearly better than the cited one.';
COMMENT ON COLUMN claims.generated_only IS 'The claim''s only support is a generated artifact.';
COMMENT ON COLUMN claims.extra_json IS 'Any further fields the judge reported, as JSON.';
COMMENT ON COLUMN claims.added_at IS 'When the claim rows were written (UTC).';
"""


@migration(SQL)
def m002_claims(con) -> None:
    """SQL only."""
