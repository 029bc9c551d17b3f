"""The trace schema: append-only named migrations, recorded in the `migrations` table.

Each migration lives in its own module, `schema_m001.py` to the latest, and registers itself there by
decorating the function named for it (`@migration(SQL)`, `migration.py`: a name written once, a duplicate
refused). Never edit a migration that has shipped: add a new module at the end. A migration that replaces a view
or macro writes its SQL out whole (never derived from another migration's text), and one that computes values
(a backfill) carries the code it computes them with, frozen as it shipped. Every table, view and column carries a
`COMMENT ON`, which `docs.py` turns into docs/traces.md (so the docs cannot drift). A migration is SQL plus a
Python step (most do nothing); each runs in its own transaction together with its row in `migrations`.
"""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

from .migration import Migration, migration

__all__ = ["MIGRATIONS", "Migration"]

for _module in sorted(m.name for m in pkgutil.iter_modules([str(Path(__file__).parent)])
                      if m.name.startswith("schema_m")):
    importlib.import_module(f"{__package__}.{_module}")

#: Every migration, in name order.
MIGRATIONS: tuple[Migration, ...] = migration.ordered()
