"""Turn an uploaded file (.jsonl, a document such as .md, or a .zip of documents) into a corpus path on disk.

No streamlit here: the app hands over the name and bytes. Files land under
`WORKBENCH_HOME/uploads/<content hash>/`, so the same upload maps to the same corpus (and cached index).
"""

from __future__ import annotations

import hashlib
import io
import zipfile
from pathlib import Path, PurePosixPath

from ..config import workbench_home
from ..corpus import FOLDER_SUFFIXES
from ..errors import CorpusError

MAX_UPLOAD_BYTES = 200 * 1024 * 1024  # also Streamlit's default upload limit
MAX_ZIP_MEMBERS = 20_000


def save_upload(name: str, data: bytes, root: Path | None = None) -> Path:
    """Write the upload where `load_corpus` can read it and return that path (a file or a folder)."""
    if len(data) > MAX_UPLOAD_BYTES:
        raise CorpusError(f"upload is larger than {MAX_UPLOAD_BYTES // 2**20} MB", name)
    digest = hashlib.sha256(data).hexdigest()[:16]
    base = (root or workbench_home() / "uploads") / digest
    suffix = PurePosixPath(name).suffix.lower()
    safe_name = PurePosixPath(name).name.replace("\\", "_") or "upload"
    if suffix == ".jsonl":
        target = base / safe_name
    elif suffix in FOLDER_SUFFIXES:
        target = base / "corpus"
        (target).mkdir(parents=True, exist_ok=True)
        (target / safe_name).write_bytes(data)
        return target
    elif suffix == ".zip":
        target = base / "corpus"
        _extract_markdown(name, data, target)
        return target
    else:
        raise CorpusError(f"upload a .jsonl corpus, a document ({', '.join(FOLDER_SUFFIXES)}) or a .zip of them", name)
    base.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)
    return target


def _extract_markdown(name: str, data: bytes, target: Path) -> None:
    """Extract only corpus documents (the suffixes a corpus folder reads), refusing absolute paths and `..` (zip slip)."""
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile:
        raise CorpusError("not a valid .zip file", name) from None
    members = [m for m in zf.infolist() if not m.is_dir()]
    if len(members) > MAX_ZIP_MEMBERS:
        raise CorpusError(f"zip has more than {MAX_ZIP_MEMBERS} files", name)
    written = 0
    total = 0
    for m in members:
        rel = PurePosixPath(m.filename.replace("\\", "/"))
        if rel.is_absolute() or ".." in rel.parts or rel.suffix.lower() not in FOLDER_SUFFIXES:
            continue
        total += m.file_size
        if total > MAX_UPLOAD_BYTES:
            raise CorpusError(f"zip expands to more than {MAX_UPLOAD_BYTES // 2**20} MB", name)
        out = target.joinpath(*rel.parts)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(zf.read(m))
        written += 1
    if not written:
        raise CorpusError(f"zip contains no corpus files ({', '.join(FOLDER_SUFFIXES)})", name)
