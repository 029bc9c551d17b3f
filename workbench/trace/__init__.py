"""The DuckDB trace store (docs/design.md §8): schema by named migrations, writer, read-only queries.

    from workbench.trace import TraceReader
    TraceReader(default_db_path()).df("SELECT * FROM turn_sets")

Tables and views are documented in docs/traces.md, generated from the schema by `docs.py`.
"""

__all__ = ["TraceReader", "TraceWriter", "check_read_only", "query_df"]


def __getattr__(name: str):
    # Lazily: a traced `ask` loads only the writer, `workbench sql` only the reader (each a process start).
    if name == "TraceWriter":
        from .writer import TraceWriter

        return TraceWriter
    if name in ("TraceReader", "check_read_only", "query_df"):
        from . import reader

        return getattr(reader, name)
    raise AttributeError(name)
