"""Whose conversation an audited turn is (docs/design.md §12, "Whose conversation"): the one place a span's
`session.id` becomes a stored conversation id, and back. Imports nothing heavy (the CLI's scoring reads it)."""

from __future__ import annotations

import hashlib
from urllib.parse import quote

from ..config import MAX_CONVERSATION_ID_CHARS

#: How an audited conversation's id starts (`conversation_key`); no id of the workbench's own starts so.
AUDITED_PREFIX = "otel/"
_SERVICE_CHARS = 60
_SESSION_CHARS = MAX_CONVERSATION_ID_CHARS - len(AUDITED_PREFIX) - _SERVICE_CHARS - 1


def conversation_key(service: str | None, session: str) -> str:
    """An audited conversation's id: `otel/SERVICE/SESSION` (docs/design.md §12, "Whose conversation"), the
    service percent-encoded so it holds no `/`. Keyed by the audited service (or the Phoenix project) and its
    session, it never equals a conversation of the workbench's own (the chat's `c-…`, `chat-…`, an eval's
    `RUN_ID/…`), so a span cannot add a turn to a person's conversation. At most `MAX_CONVERSATION_ID_CHARS`
    characters: a longer service or session keeps its first characters and ends in `~` and a hash."""
    return f"{AUDITED_PREFIX}{_within(quote(service or '', safe=''), _SERVICE_CHARS)}/{audited_session(session)}"


def audited_session(session: str) -> str:
    """`session` as an audited conversation id holds it (cut with a hash beyond `_SESSION_CHARS`)."""
    return _within(session, _SESSION_CHARS)


def session_in(conversation_id: str | None) -> str | None:
    """The session part of an audited conversation id (`conversation_key`); any other id as it is."""
    if conversation_id is None or not conversation_id.startswith(AUDITED_PREFIX):
        return conversation_id
    return conversation_id[len(AUDITED_PREFIX):].split("/", 1)[-1]


def _within(text: str, n: int) -> str:
    if len(text) <= n:
        return text
    tag = "~" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return text[:n - len(tag)] + tag
