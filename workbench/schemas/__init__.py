"""The JSON Schemas of the project's two contracts, shipped with the package.

`payload.schema.json` is the sources payload every turn returns (docs/design.md), and
`turn-record.schema.json` the turn record `provenance` reads. Tests validate what the library reads
and writes against these files; `load(name)` returns one as a dict.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

SCHEMA_DIR = Path(__file__).resolve().parent
PAYLOAD = "payload.schema.json"
TURN_RECORD = "turn-record.schema.json"


@lru_cache(maxsize=None)
def load(name: str) -> dict[str, Any]:
    """The schema `name` (e.g. `payload.schema.json`) as a dict."""
    return json.loads((SCHEMA_DIR / name).read_text(encoding="utf-8"))
