"""The trace schema's history in one place, and what one database has (`Schema`), for every reader.

A reader never probes a database for tables to guess its age: it asks `Schema.has(name)` for the table,
view or macro it wants, and the answer comes from the database's applied migrations and `CREATED_BY`,
which is read from the migrations' own SQL (`schema.MIGRATIONS`, the only place the schema is
declared). An older database (readers never migrate one, `TraceReader`) is then read as it is.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .schema import MIGRATIONS, Migration

_CREATE = re.compile(r"^CREATE (?:OR REPLACE )?(?:TABLE|VIEW|MACRO) (\w+)", re.M)


def created_by(migrations: tuple[Migration, ...] = MIGRATIONS) -> dict[str, str]:
    """Every table, view and macro the migrations create → the first migration that creates it."""
    out: dict[str, str] = {}
    for m in migrations:
        for name in _CREATE.findall(m.sql):
            out.setdefault(name, m.name)
    return out


#: Table, view or macro name → the migration that brought it.
CREATED_BY: dict[str, str] = created_by()
#: The migration that records who asked each turn and whose it is (`turns.user_id`, `turns.owner`): a database
#: without it has ownerless turns only.
OWNERS = "m018_turn_user"


@dataclass(frozen=True)
class Schema:
    """The schema of one trace database: the migrations applied to it."""

    applied: frozenset[str]

    @classmethod
    def read(cls, con) -> "Schema":
        """The schema of the trace database open on `con` (one that has its `migrations` table)."""
        return cls(frozenset(name for (name,) in con.execute("SELECT name FROM migrations").fetchall()))

    def has(self, name: str) -> bool:
        """Whether the database has the table, view or macro `name` (a name no migration creates is an error)."""
        if name not in CREATED_BY:
            raise KeyError(f"no migration creates {name!r} (workbench/trace/schema_mNNN.py)")
        return CREATED_BY[name] in self.applied

    @property
    def missing(self) -> list[str]:
        """The migrations this database lacks, in order (readers read it as it is; the next writer adds them)."""
        return [m.name for m in MIGRATIONS if m.name not in self.applied]
