"""A trace database built once per test module and copied for each test that may write to it: copying a DuckDB file
costs milliseconds, building it again costs the eval or ingest run that filled it."""

from __future__ import annotations

import shutil
from pathlib import Path


def copy_db(src: Path, dst: Path) -> Path:
    """`src` (and its write-ahead log, if one was left) copied to `dst`; returns `dst`."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, dst)
    wal = src.with_name(src.name + ".wal")
    if wal.exists():
        shutil.copyfile(wal, dst.with_name(dst.name + ".wal"))
    return dst
