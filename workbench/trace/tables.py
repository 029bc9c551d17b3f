"""The columns of every trace table, derived from the migrations' DDL: one definition per table.

The migrations (`schema_mNNN.py`, listed by `schema.py`) are the only place a table or column is declared. The writer needs
each table's columns in order and their DuckDB types (its bulk inserts bind each column's values as
a list cast to `<type>[]`), so they are read here from the migrations' `CREATE TABLE` and
`ALTER TABLE … ADD COLUMN` statements, the only two shapes the migrations use (any other
`ALTER TABLE` is refused until this module learns it). Parsing the SQL takes ~0.25 ms at import;
asking DuckDB instead (migrating an in-memory database) took 82–163 ms per process here, more
than a traced turn (benchmarks/README.md). tests/test_trace_migrations.py checks the result
against DuckDB's own reading of a migrated database, so the two cannot disagree.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .schema import MIGRATIONS, Migration

_CREATE = re.compile(r"^CREATE TABLE (\w+) \((.*?)\n\);", re.S | re.M)
_ADD = re.compile(r"^ALTER TABLE (\w+) ADD COLUMN (\w+) ([\w\[\]]+)\s*;", re.M)
_ALTER = re.compile(r"^ALTER TABLE .*$", re.M)


def table_columns(migrations: tuple[Migration, ...] = MIGRATIONS) -> dict[str, list[tuple[str, str]]]:
    """Every table the migrations create, with its columns as (name, DuckDB type), in column order."""
    tables: dict[str, list[tuple[str, str]]] = {}
    for m in migrations:
        for name, body in _CREATE.findall(m.sql):
            tables[name] = [tuple(line.split()[:2]) for line in body.strip().split(",\n")]  # type: ignore[misc]
        for statement in _ALTER.findall(m.sql):
            added = _ADD.match(statement)
            if added is None:
                raise NotImplementedError(f"{m.name}: {statement!r} — tables.py reads only CREATE TABLE and "
                                          "ALTER TABLE … ADD COLUMN; teach it this statement")
            tables[added.group(1)].append((added.group(2), added.group(3)))
    return tables


@dataclass(frozen=True)
class Table:
    """One trace table as the writer sees it: its columns in order and their DuckDB types."""

    name: str
    names: tuple[str, ...]
    types: tuple[str, ...]


def table_schemas(migrations: tuple[Migration, ...] = MIGRATIONS) -> dict[str, Table]:
    return {name: Table(name, tuple(n for n, _ in cols), tuple(t for _, t in cols))
            for name, cols in table_columns(migrations).items()}


#: Table name → its columns and types, for every table the trace store writes.
SCHEMAS: dict[str, Table] = table_schemas()
