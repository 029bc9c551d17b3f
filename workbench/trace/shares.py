"""Read-only shares of a conversation, kept in the trace store (`conversation_shares`, migration m024).

The owner of a conversation shares it by a link carrying a secret token (`?share=<token>`); the link opens the
conversation read-only — its turns, answers, sources and provenance, nothing can be asked in it — for the share's
audience: with sign-in, anyone signed in to the app (`signed_in`); without, anyone who can reach the app and has
the link (`link`). Revoking ends it: the link opens nothing any more. docs/security.md, "Shared conversations".
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from ..errors import WorkbenchError
from .lake import store_exists
from .reader import TraceReader
from .writer import TraceWriter

SIGNED_IN, LINK = "signed_in", "link"
#: The longest `?share=` value looked up (a token has 22 characters; the value comes from the address bar).
MAX_SHARE_TOKEN_CHARS = 64
_COLUMNS = "token, conversation_id, shared_by, audience, created_at, revoked_at"


@dataclass(frozen=True)
class Share:
    token: str
    conversation_id: str
    shared_by: str
    audience: str
    created_at: datetime
    revoked_at: datetime | None = None


def may_read(share: Share | None, *, signed_in: bool) -> bool:
    """Whether a viewer may open `share`: it exists and is not revoked, and a `signed_in` share only for someone
    signed in (an app whose sign-in was turned off since does not open it to everyone)."""
    return share is not None and share.revoked_at is None and (share.audience == LINK or signed_in)


def _shares(db: str | Path, where: str, value: str) -> Share | None:
    """The latest share `where` (`… = ?`) holds for `value`; None without one, or without the table: no store yet (a
    file that is not there, a team store never migrated), or one from before m024. One connection: checked and read."""
    if not store_exists(db):
        return None
    got = TraceReader(db).rows_with(lambda schema: f"SELECT {_COLUMNS} FROM conversation_shares WHERE {where} ORDER BY "
                                    "created_at DESC LIMIT 1" if schema.has("conversation_shares") else None, [value])
    return Share(*got[1][0]) if got and got[1] else None


def active_share(db: str | Path, conversation_id: str) -> Share | None:
    """The conversation's share that is not revoked (the latest), else None."""
    return _shares(db, "conversation_id = ? AND revoked_at IS NULL", conversation_id)


def find_share(db: str | Path, token: str) -> Share | None:
    """The share a link's token names, revoked or not; None for a token no share has (or an over-long one)."""
    if not token or len(token) > MAX_SHARE_TOKEN_CHARS:
        return None
    return _shares(db, "token = ?", token)


def share(db: str | Path, conversation_id: str, *, by: str, audience: str) -> Share:
    """Share `conversation_id` read-only with `audience`: its share that is still active, else a new one."""
    if audience not in (SIGNED_IN, LINK):
        raise WorkbenchError(f"a share's audience is {SIGNED_IN!r} or {LINK!r}, not {audience!r}")
    current = active_share(db, conversation_id)
    if current is not None and current.audience == audience:
        return current
    revoke(db, conversation_id, by=by)
    made = Share(secrets.token_urlsafe(16), conversation_id, by, audience, datetime.now(timezone.utc))
    with TraceWriter(db).connect() as con:
        con.execute(f"INSERT INTO conversation_shares ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, NULL)",
                    [made.token, made.conversation_id, made.shared_by, made.audience, made.created_at])
    return made


def revoke(db: str | Path, conversation_id: str, *, by: str) -> int:
    """Revoke every active share of `conversation_id` made by `by`; how many were revoked."""
    with TraceWriter(db).connect() as con:
        # the count DuckDB reports, not `RETURNING`: DuckLake (a team store) has no RETURNING on an update
        return con.execute("UPDATE conversation_shares SET revoked_at = ? WHERE conversation_id = ? AND shared_by = ? "
                           "AND revoked_at IS NULL", [datetime.now(timezone.utc), conversation_id, by]).fetchone()[0]
