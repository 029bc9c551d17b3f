"""The DuckDB trace store (docs/design.md §8): schema by named migrations, writer, read-only queries.

    from workbench.trace import TraceReader
    TraceReader(default_db_path()).df("SELECT * FROM turn_sets")

Tables and views are documented in docs/traces.md, generated from the schema by `docs.py`.
"""

from .reader import TraceReader, check_read_only, query_df

__all__ = ["TraceReader", "TraceWriter", "check_read_only", "query_df"]


def __getattr__(name: str):
    if name == "TraceWriter":  # lazily: readers (`workbench sql`) do not load the writer
        from .writer import TraceWriter

        return TraceWriter
    raise AttributeError(name)
