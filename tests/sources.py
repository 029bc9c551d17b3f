"""The package's source files parsed once per test process: the static checks (layering, lazy imports, function
length, one name, defaults stated once, …) each walk every module, and parsing the whole package took a second of
CPU each time. Trees are shared, so a check reads them and never changes them."""

from __future__ import annotations

import ast
from functools import lru_cache
from pathlib import Path


def parsed(path: Path) -> ast.Module:
    """The module at `path`, parsed (again whenever the file has changed since)."""
    st = Path(path).stat()
    return _parsed(str(Path(path).resolve()), st.st_mtime_ns, st.st_size)


@lru_cache(maxsize=None)
def _parsed(path: str, mtime_ns: int, size: int) -> ast.Module:
    return ast.parse(Path(path).read_text(encoding="utf-8"))
