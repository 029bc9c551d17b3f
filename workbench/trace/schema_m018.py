"""Migration m018: who asked each turn, and whose it is (docs/security.md, "Who sees what").

`turns.user_id` is the signed-in person who asked the turn (the identity provider's `email`, else its
`sub`); NULL when the app runs without sign-in, and for the CLI, `eval` and notebooks. `turns.owner` is what
the app checks a conversation and an upload against: `user:<user_id>` for a signed-in person,
`browser:<token>` (a random or hashed token, never a secret itself) for a browser without sign-in, NULL for
turns asked outside the app (the operator's: `ask`, `eval`, notebooks). Like every migration, frozen once
released: change the schema by appending a new one (a new `schema_mNNN.py`, registered by `@migration`).
"""

from .migration import migration

M018_TURN_USER = r"""
ALTER TABLE turns ADD COLUMN user_id VARCHAR;
ALTER TABLE turns ADD COLUMN owner VARCHAR;
COMMENT ON COLUMN turns.user_id IS 'Who asked the turn when the app has sign-in: the identity provider''s `email`, else its `sub` (exported as OpenInference `user.id`); NULL without sign-in and for turns asked from the CLI, `eval` or a notebook.';
COMMENT ON COLUMN turns.owner IS 'Whose turn it is, what the app checks a conversation and its uploads against: `user:` + `user_id` for a signed-in person, `browser:` + a token of the browser for the app without sign-in, NULL for turns asked outside the app (the operator''s own).';
"""


@migration(M018_TURN_USER)
def m018_turn_user(con) -> None:
    """SQL only."""
