"""Migration m024: read-only shares of a conversation (`conversation_shares`).

Like every migration, frozen once released: change the schema by appending a new one (a new `schema_mNNN.py`, registered by `@migration`).
"""

from .migration import migration

M024_CONVERSATION_SHARES = """
CREATE TABLE conversation_shares (
    token VARCHAR PRIMARY KEY,
    conversation_id VARCHAR NOT NULL,
    shared_by VARCHAR NOT NULL,
    audience VARCHAR NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    revoked_at TIMESTAMPTZ
);
COMMENT ON TABLE conversation_shares IS 'Read-only shares of a conversation made in the app: a link (`?share=<token>`) that opens the conversation, without asking in it, for its audience until revoked (docs/security.md, "Shared conversations").';
COMMENT ON COLUMN conversation_shares.token IS 'The secret the link carries (22 URL-safe characters, 128 random bits).';
COMMENT ON COLUMN conversation_shares.conversation_id IS 'The conversation shared; joins `turns.conversation_id`.';
COMMENT ON COLUMN conversation_shares.shared_by IS 'Who shared it: the owner (`turns.owner`) of the conversation, `user:<id>` or `browser:<token>`.';
COMMENT ON COLUMN conversation_shares.audience IS '`signed_in`: anyone signed in to the app who has the link; `link`: anyone who can reach the app and has the link (an app without sign-in).';
COMMENT ON COLUMN conversation_shares.created_at IS 'When it was shared (UTC).';
COMMENT ON COLUMN conversation_shares.revoked_at IS 'When its owner revoked it (UTC); NULL while the link opens the conversation.';
"""


@migration(M024_CONVERSATION_SHARES)
def m024_conversation_shares(con) -> None:
    """SQL only."""
