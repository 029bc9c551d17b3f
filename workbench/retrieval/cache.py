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
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from ..types import Chunk


@contextmanager
def atomic_dir(target: Path, chunks: list[Chunk], meta: dict[str, Any]) -> Iterator[Path]:
    """Yield a temporary folder to write an index into; on success add chunks and meta, then rename
    it to `target` (replacing a stale or corrupt one). A failed write leaves nothing behind: the
    index is still returned to the caller, just not cached."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=".tmp-"))
    try:
        yield tmp
        (tmp / "chunks.json").write_text(json.dumps([c.__dict__ for c in chunks]), encoding="utf-8")
        (tmp / "meta.json").write_text(json.dumps(meta), encoding="utf-8")
        if target.exists():
            shutil.rmtree(target, ignore_errors=True)
        os.replace(tmp, target)
    except OSError:  # a read-only or full disk costs the cache, not the answer
        pass
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def read_chunks(target: Path) -> tuple[list[Chunk], dict[str, Any]] | None:
    """(chunks, meta) of the index folder `target`, or None when it is absent or unreadable."""
    try:
        meta = json.loads((target / "meta.json").read_text(encoding="utf-8"))
        rows = json.loads((target / "chunks.json").read_text(encoding="utf-8"))
        if not isinstance(meta, dict) or not isinstance(rows, list):
            return None
        return [Chunk(**c) for c in rows], meta
    except (OSError, ValueError, TypeError):  # absent, truncated or garbage: rebuild
        return None
