"""Stored payloads (`turn_payloads`, m020): every turn's sources payload as it was returned, audited or native."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

from .reader import TraceReader, as_reader

_QUERY = """
SELECT p.payload_json
FROM turn_payloads p JOIN turns t USING (turn_id) JOIN runs r USING (run_id)
WHERE (? IS NULL OR r.run_id = ? OR json_extract_string(r.config_json, '$.run') = ?
       OR r.run_id IN (SELECT run_id FROM experiments WHERE name = ?))
  AND (? IS NULL OR t.conversation_id = ?)
ORDER BY t.conversation_id NULLS FIRST, t.position, t.started_at, t.turn_id
"""


def stored_payloads(db: str | Path | TraceReader, *, run: str | None = None,
                    conversation: str | None = None) -> Iterator[str]:
    """The payload JSON of every stored turn (of run `run`, by id or name; of conversation `conversation`), in
    conversation order, then start order. Turns written before m020 stored no payload and are not listed."""
    reader = as_reader(db)
    _, rows = reader.rows(_QUERY, [run, run, run, run, conversation, conversation])
    for (text,) in rows:
        yield text
