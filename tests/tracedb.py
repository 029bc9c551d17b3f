"""A new, empty trace database for a test, as a copy of one this process created once.

Creating a trace database applies every migration, each in its own transaction: some 25 commits, each synced
to disk, then a checkpoint. That costs little CPU but a third of a second on a quiet machine and seconds on a
busy disk — per test that only needs somewhere to write. `empty_trace_db(path)` copies a file the product
itself created (`TraceWriter`'s first connection, the path every writer takes) instead: the same bytes a new
`--db` file holds after its first write, minus its rows. Tests about creating or migrating a database
(test_trace_migrations.py, test_trace_readonly.py's old database) keep making their own.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path

_TEMPLATE: list[Path] = []


def _template() -> Path:
    if not _TEMPLATE:
        from workbench.trace.writer import TraceWriter

        folder = Path(tempfile.mkdtemp(prefix="empty-trace-db-"))
        atexit.register(shutil.rmtree, folder, True)
        path = folder / "empty.duckdb"
        with TraceWriter(path).connect():  # creates and migrates it, then detaches (a checkpoint: no WAL left)
            pass
        assert not path.with_name(path.name + ".wal").exists()
        _TEMPLATE.append(path)
    return _TEMPLATE[0]


def empty_trace_db(path: str | Path) -> Path:
    """`path` (a new file; its folder is created) made an empty trace database with every migration applied."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        raise FileExistsError(f"{path} exists: empty_trace_db makes a new database")
    shutil.copyfile(_template(), path)
    return path
