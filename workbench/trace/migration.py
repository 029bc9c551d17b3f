"""How a migration of the trace schema is registered: once, by decorating a function named for it.

As llm's `@migration` and sqlite-utils' `Migrations`: each `schema_mNNN.py` module decorates one function, whose
name is the migration's (`m001_initial`, …: written once, there), with the migration's SQL; the function is its
Python step, run after the SQL in the same transaction (most do nothing). A name registered twice, or one that is
not `mNNN_words`, is refused when the module is imported. `schema.MIGRATIONS` is the registry in name order.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable

#: A migration's name: `m`, three digits, and words; the digits order the migrations.
NAME = re.compile(r"m\d{3}_[a-z0-9_]+")


@dataclass(frozen=True)
class Migration:
    name: str
    sql: str
    python: Callable[[Any], None] | None = None


class Migrations:
    """Named migrations, each registered once (`migration(sql)` decorates the function named for it)."""

    def __init__(self) -> None:
        self._by_name: dict[str, Migration] = {}

    def __call__(self, sql: str = "") -> Callable[[Callable[[Any], None]], Callable[[Any], None]]:
        def register(step: Callable[[Any], None]) -> Callable[[Any], None]:
            self.add(Migration(step.__name__, sql, step))
            return step

        return register

    def add(self, m: Migration) -> None:
        if not NAME.fullmatch(m.name):
            raise ValueError(f"a migration is named m, three digits and words (m024_team_store), not {m.name!r}")
        if m.name in self._by_name:
            raise ValueError(f"migration {m.name} is registered twice")
        number = m.name[:4]
        clash = [n for n in self._by_name if n[:4] == number]
        if clash:
            raise ValueError(f"migrations {clash[0]} and {m.name} share the number {number}")
        self._by_name[m.name] = m

    def ordered(self) -> tuple[Migration, ...]:
        return tuple(self._by_name[n] for n in sorted(self._by_name))


#: The trace schema's migrations; `@migration(SQL)` registers one (`schema_mNNN.py`).
migration = Migrations()
