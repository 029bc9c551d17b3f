"""Damaged copies of a real trace database, for tests that a damaged file is handled (never a traceback)."""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb

KINDS = ["truncated", "truncated at the migrations table", "tail overwritten", "middle overwritten",
         "turns blocks overwritten", "header zeroed"]


def blocks_of(path: Path, table: str) -> tuple[list[int], int]:
    """(file offsets of the data blocks of `table`, block size); DuckDB: 3 header pages, then blocks."""
    con = duckdb.connect(str(path), read_only=True)
    try:
        size = con.execute("SELECT block_size FROM pragma_database_size()").fetchone()[0]
        ids = [b for (b,) in con.execute(f"SELECT DISTINCT block_id FROM pragma_storage_info('{table}') "
                                         "WHERE block_id >= 0 ORDER BY 1").fetchall()]
    finally:
        con.close()
    return [3 * 4096 + b * size for b in ids], size


def block_of(path: Path, table: str) -> int:
    """Where the first data block of `table` starts in the file."""
    return blocks_of(path, table)[0][0]


def damage(src: Path, kind: str, dst: Path) -> Path:
    """A copy of `src` at `dst` damaged the way `kind` says (one of KINDS)."""
    shutil.copy(src, dst)
    size = dst.stat().st_size
    with open(dst, "r+b") as f:
        if kind == "truncated":
            f.truncate(size // 3)
        elif kind == "truncated at the migrations table":
            f.truncate(block_of(src, "migrations"))
        elif kind == "tail overwritten":
            f.seek(size - 262144)
            f.write(b"\xab" * 262144)
        elif kind == "middle overwritten":
            f.seek(size // 2)
            f.write(b"\xcd" * 262144)
        elif kind == "turns blocks overwritten":
            offsets, block = blocks_of(src, "turns")
            for at in offsets:
                f.seek(at)
                f.write(b"\xef" * block)
        elif kind == "header zeroed":
            f.write(b"\0" * 4096)
        else:
            raise ValueError(kind)
    return dst


def traced_db(path: Path) -> Path:
    """A real trace database with 60 turns (a few MB: damage lands in data and in metadata blocks), written as
    `eval` writes, ten turns a flush: six checkpoints lay the file out like sixty single writes (8.4 MB against
    8.9 MB) in a fifth of the time."""
    from workbench.session import Session

    s = Session.open(trace_db=path)
    with s.tracer.buffered(max_turns=10, max_age_s=3600):
        for q in ("How do I configure SSO?", "What is the capital of Mongolia?", "How do I rotate an API key?") * 20:
            s.ask(q)
    return path
