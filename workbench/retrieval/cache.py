"""On-disk index folders: written whole or not at all, read back with the standard library.

Every cached index is one folder under the index cache: the index's own files (bm25s arrays,
`embeddings.npy`), `chunks.json` (the chunks, in row order) and `meta.json`, written last, which
records what the files should hold. A folder is built in a temporary sibling and renamed into
place, so a reader never sees half an index; a folder that cannot be read back (missing file,
garbage, shapes that disagree with `meta.json`) is treated as absent and rebuilt, never fatal.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable

from ..types import Chunk


def persist(target: Path, chunks: list[Chunk], meta: dict[str, Any], write: Callable[[Path], Any]) -> bool:
    """Cache an index folder: `write(tmp)` writes the index's own files into a temporary sibling of
    `target`, then chunks and meta are added and the folder is renamed to `target` (replacing a stale
    or corrupt one). A read-only or full disk costs the cache, not the answer: the index is still
    returned to the caller, just not cached, and nothing is left behind. Whether it was cached."""
    tmp = None
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=".tmp-"))
        write(tmp)
        (tmp / "chunks.json").write_text(chunks_json(chunks), encoding="utf-8")
        (tmp / "meta.json").write_text(json.dumps(meta), encoding="utf-8")
        if target.exists():
            shutil.rmtree(target, ignore_errors=True)
        os.replace(tmp, target)
        return True
    except OSError:
        return False
    finally:
        if tmp is not None and tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def write_file(path: Path, text: str) -> bool:
    """Cache one file, written whole or not at all (a scratch sibling renamed into place); like
    `persist`, a disk that refuses costs the cache, not the answer. Whether it was cached."""
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        tmp = Path(name)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
        return True
    except OSError:
        return False
    finally:
        if tmp is not None:
            tmp.unlink(missing_ok=True)


def chunks_json(chunks: list[Chunk]) -> str:
    return json.dumps([c.__dict__ for c in chunks])


def load_chunks(path: Path) -> list[Chunk] | None:
    """The chunks stored in the JSON file `path` (`chunks_json`), or None when absent or unreadable."""
    try:
        rows = json.loads(path.read_text(encoding="utf-8"))
        return [Chunk(**c) for c in rows] if isinstance(rows, list) else None
    except (OSError, ValueError, TypeError):  # absent, truncated or garbage: rebuild
        return None


def read_chunks(target: Path) -> tuple[list[Chunk], dict[str, Any]] | None:
    """(chunks, meta) of the index folder `target`, or None when it is absent or unreadable."""
    try:
        meta = json.loads((target / "meta.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):  # absent, truncated or garbage: rebuild
        return None
    chunks = load_chunks(target / "chunks.json")
    return (chunks, meta) if isinstance(meta, dict) and chunks is not None else None
