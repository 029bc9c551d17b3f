"""The columns of every trace table, derived from the migrations' DDL: one definition per table.

The migrations in `schema.py` are the only place a table or column is declared. The writer needs
each table's columns in order and their Arrow types (its bulk inserts are Arrow tables), so they
are read here from the migrations' `CREATE TABLE` and `ALTER TABLE … ADD COLUMN` statements, the
only two shapes the migrations use (any other `ALTER TABLE` is refused until this module learns
it). Parsing the SQL takes ~0.25 ms at import; asking DuckDB instead (migrating an in-memory
database) took 82–163 ms per process here, more than a traced turn (benchmarks/README.md). tests/test_trace_migrations.py
checks the result against DuckDB's own reading of a migrated database, so the two cannot disagree.
"""

from __future__ import annotations

import re

import pyarrow as pa

from .schema import MIGRATIONS, Migration

#: DuckDB type (as the migrations spell it) → the Arrow type DuckDB reads into that column losslessly.
ARROW_TYPES: dict[str, pa.DataType] = {
    "VARCHAR": pa.string(),
    "INTEGER": pa.int32(),
    "BIGINT": pa.int64(),
    "DOUBLE": pa.float64(),
    "BOOLEAN": pa.bool_(),
    "TIMESTAMPTZ": pa.timestamp("us", tz="UTC"),
    "VARCHAR[]": pa.list_(pa.string()),
}

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


def arrow_schemas(migrations: tuple[Migration, ...] = MIGRATIONS) -> dict[str, pa.Schema]:
    """The Arrow schema of every table (column order and types as the migrations leave them)."""
    out = {}
    for table, columns in table_columns(migrations).items():
        unknown = [t for _, t in columns if t not in ARROW_TYPES]
        if unknown:
            raise NotImplementedError(f"table {table}: no Arrow type for {unknown}; add it to ARROW_TYPES")
        out[table] = pa.schema([(name, ARROW_TYPES[t]) for name, t in columns])
    return out


#: Table name → Arrow schema, for every table the trace store writes.
SCHEMAS: dict[str, pa.Schema] = arrow_schemas()
