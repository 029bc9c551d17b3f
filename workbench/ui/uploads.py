"""Turn an uploaded file (.jsonl, a document such as .md, or a .zip of documents) into a corpus path on disk.

No streamlit here: the app hands over the name and bytes. Files land under
`WORKBENCH_HOME/uploads/<session>/<content hash>/`: an upload belongs to the browser session that made it
(the app passes that session's folder, `session_uploads`), and within it the same upload maps to the same
corpus (and cached index). The uploads folder is never a path a visitor may type (`paths.confine`), so
no other session can load it as a corpus or put a trace database in it.

Uploads come from anyone who can reach the app, so every size is bounded (docs/security.md):
`WORKBENCH_MAX_UPLOAD_MB` (default 50; `.streamlit/config.toml` sets Streamlit's own limit to the
same figure) bounds the upload and what a zip may expand to, `WORKBENCH_MAX_DOCUMENTS` (default
20,000) the documents of any corpus the app loads, `WORKBENCH_MAX_PDF_MB` (default 32) the page
content of its PDFs, which pypdf parses at ~2 MB a second. A zip is never trusted: the sizes it declares
are checked against what its members really inflate to, their CRCs are checked, and a zip that
fails any check is refused as a whole — nothing of it is left as a corpus.
"""

from __future__ import annotations

import hashlib
import io
import re
import shutil
import uuid
import zipfile
import zlib
from pathlib import Path, PurePosixPath

from ..config import env, uploads_dir
from ..corpus import FOLDER_SUFFIXES
from ..errors import CorpusError

DEFAULT_MAX_UPLOAD_MB = 50
DEFAULT_MAX_DOCUMENTS = 20_000
DEFAULT_MAX_PDF_MB = 32
_CHUNK = 1 << 20


def _env_int(name: str, default: int) -> int:
    raw = env(name)
    try:
        value = int(raw) if raw else default
    except ValueError:
        raise CorpusError(f"{name}={raw!r} is not a whole number") from None
    return value if value > 0 else default


def max_upload_bytes() -> int:
    """The largest upload, and the most a zip may expand to: `$WORKBENCH_MAX_UPLOAD_MB` MB."""
    return _env_int("WORKBENCH_MAX_UPLOAD_MB", DEFAULT_MAX_UPLOAD_MB) * 2**20


def max_documents() -> int:
    """The most documents a corpus loaded by the app may hold: `$WORKBENCH_MAX_DOCUMENTS`."""
    return _env_int("WORKBENCH_MAX_DOCUMENTS", DEFAULT_MAX_DOCUMENTS)


def max_pdf_content_bytes() -> int:
    """Decoded page content of all PDFs of a corpus the app loads: `$WORKBENCH_MAX_PDF_MB` MB (default 32,
    ~15 s of pypdf at its ~2 MB/s; a text page holds 5-50 KB)."""
    return _env_int("WORKBENCH_MAX_PDF_MB", DEFAULT_MAX_PDF_MB) * 2**20


def session_uploads(token: str) -> Path:
    """The uploads folder of one browser session, named by its random, unguessable `token`."""
    if not re.fullmatch(r"[0-9a-f]{32}", token):
        raise CorpusError(f"not an upload session token: {token!r}")
    return uploads_dir() / token


def save_upload(name: str, data: bytes, root: Path | None = None) -> Path:
    """Write the upload where `load_corpus` can read it and return that path (a file or a folder)."""
    try:
        return _save(name, data, root)
    except OSError as exc:  # a name too long, a full disk …: a message, never a broken page
        raise CorpusError(f"the upload cannot be stored: {exc.strerror or exc}", name) from None


def _save(name: str, data: bytes, root: Path | None) -> Path:
    limit = max_upload_bytes()
    if len(data) > limit:
        raise CorpusError(f"upload is larger than {limit // 2**20} MB", name)
    suffix = PurePosixPath(name).suffix.lower()
    # The browser sends any name it likes: keep its last part only, without control characters (NUL …).
    safe_name = re.sub(r"[\x00-\x1f\x7f]", "_", PurePosixPath(name.replace("\\", "/")).name) or "upload"
    # Name and bytes: one document uploaded under two names must not make one folder with a duplicate id.
    digest = hashlib.sha256(safe_name.encode("utf-8", "surrogatepass") + b"\0" + data).hexdigest()[:16]
    base = (root or uploads_dir()) / digest
    if suffix == ".zip":
        target = base / "corpus"
        if not target.is_dir():  # the same bytes were extracted (and checked) before
            _extract_zip(name, data, target, limit)
        return target
    if suffix == ".jsonl":
        target = file = base / safe_name
    elif suffix in FOLDER_SUFFIXES:
        target = base / "corpus"
        file = target / safe_name
    else:
        raise CorpusError(f"upload a .jsonl corpus, a document ({', '.join(FOLDER_SUFFIXES)}) or a .zip of them", name)
    # Stored once: the folder is named by name and bytes, so a file already there holds exactly these bytes.
    # Rewriting it on every rerun would change its mtime and with it the app's cached session (`_fingerprint`).
    if not file.is_file():
        file.parent.mkdir(parents=True, exist_ok=True)
        scratch = file.with_name(f".partial-{uuid.uuid4().hex}")  # never a half-written file under the real name
        try:
            scratch.write_bytes(data)
            scratch.replace(file)
        finally:
            scratch.unlink(missing_ok=True)
    return target


def _extract_zip(name: str, data: bytes, target: Path, limit: int) -> None:
    """Extract only corpus documents (the suffixes a corpus folder reads), refusing absolute paths and `..`
    (zip slip), into a scratch folder that becomes `target` only when every member checked out."""
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, zlib.error, EOFError, ValueError, OSError):
        raise CorpusError("not a valid .zip file", name) from None
    members = []
    for m in zf.infolist():
        rel = PurePosixPath(m.filename.replace("\\", "/"))
        if m.is_dir() or rel.is_absolute() or ".." in rel.parts or rel.suffix.lower() not in FOLDER_SUFFIXES:
            continue
        members.append((m, rel))
    docs = max_documents()
    if len(members) > docs:
        raise CorpusError(f"zip has more than {docs:,} documents", name)
    declared = sum(m.file_size for m, _ in members)
    if declared > limit:
        raise CorpusError(f"zip expands to more than {limit // 2**20} MB", name)
    if not members:
        raise CorpusError(f"zip contains no corpus files ({', '.join(FOLDER_SUFFIXES)})", name)
    scratch = target.parent / f".partial-{uuid.uuid4().hex}"
    try:
        budget = limit
        for m, rel in members:
            body = _read_member(zf, m, len(data), budget, name)
            budget -= len(body)
            out = scratch.joinpath(*rel.parts)
            try:
                out.parent.mkdir(parents=True, exist_ok=True)
                out.write_bytes(body)
            except OSError as exc:  # a name too long, a file where a folder must be, a full disk …
                raise CorpusError(f"member {m.filename!r} cannot be written: {exc.strerror or exc}", name) from None
        try:
            scratch.rename(target)
        except OSError:  # another session extracted the same upload meanwhile
            if not target.is_dir():
                raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _read_member(zf: zipfile.ZipFile, m: zipfile.ZipInfo, archive_size: int, budget: int, name: str) -> bytes:
    """The member's bytes, read in chunks; its declared sizes and CRC must match what it holds."""
    where = f"{name}: member {m.filename!r}"
    if m.flag_bits & 0x1:
        raise CorpusError(f"{where} is encrypted; upload an unencrypted zip")
    if m.compress_size > archive_size:
        raise CorpusError(f"{where} declares {m.compress_size:,} compressed bytes, more than the whole zip (damaged or forged)")
    out = bytearray()
    try:
        with zf.open(m) as fh:  # zipfile stops at the declared size and checks the CRC at the end
            while chunk := fh.read(_CHUNK):
                out += chunk
                if len(out) > budget:
                    raise CorpusError(f"zip expands to more than {max_upload_bytes() // 2**20} MB", name)
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError, NotImplementedError, RuntimeError) as exc:
        raise CorpusError(f"{where} is damaged ({exc})") from None
    if len(out) != m.file_size:
        raise CorpusError(f"{where} declares {m.file_size:,} bytes but holds {len(out):,} (damaged or forged)")
    return bytes(out)
