"""Apply the schema's pending migrations, each in one transaction with its `migrations` row."""

from __future__ import annotations

from .schema import MIGRATIONS, Migration

_MIGRATIONS_TABLE = """
CREATE TABLE IF NOT EXISTS migrations (name VARCHAR PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL);
COMMENT ON TABLE migrations IS 'The schema migrations applied to this database, by name, in order.';
COMMENT ON COLUMN migrations.name IS 'Migration name (`m001_initial`, …), in workbench/trace/schema.py.';
COMMENT ON COLUMN migrations.applied_at IS 'When it was applied (UTC).';
"""


def applied(con) -> list[str]:
    try:
        return [n for (n,) in con.execute("SELECT name FROM migrations ORDER BY name").fetchall()]
    except Exception:  # no migrations table yet
        return []


def pending(con, migrations: tuple[Migration, ...] = MIGRATIONS) -> list[Migration]:
    done = set(applied(con))
    return [m for m in migrations if m.name not in done]


def migrate(con, migrations: tuple[Migration, ...] = MIGRATIONS) -> list[str]:
    """Apply every pending migration in order on a read-write connection; return their names."""
    todo = pending(con, migrations)
    if not todo:
        return []
    con.execute(_MIGRATIONS_TABLE)
    for m in todo:
        con.execute("BEGIN")
        try:
            con.execute(m.sql)
            if m.python is not None:
                m.python(con)
            con.execute("INSERT INTO migrations VALUES (?, now())", [m.name])
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
    return [m.name for m in todo]
