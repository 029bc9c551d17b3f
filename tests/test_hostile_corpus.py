"""Hostile corpora and uploads cost neither memory nor a traceback: YAML alias bombs, oversized or
deeply nested front matter, zips whose sizes or CRCs lie, too many documents (issue 17, item 2).

Bombs run in a child process with a memory ceiling (tests/bounded.py), so a regression fails the
test instead of taking the machine down.
"""

from __future__ import annotations

import io
import json
import struct
import textwrap
import zipfile
import zlib

import pytest

from bounded import python, run
from test_ingest import pdf_file
from workbench import corpus
from workbench.corpus import load_corpus
from workbench.errors import CorpusError
from workbench.ui.uploads import save_upload


def _nest(shape: str, depth: int = 12, width: int = 10) -> str:
    """A billion-laughs front matter: `width`**`depth` leaves reachable through aliases."""
    lines = []
    if shape == "sequence":
        lines.append("a0: &a0 [" + ", ".join(["lol"] * width) + "]")
        for i in range(1, depth):
            lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * width) + "]")
        lines.append(f"derived_from: *a{depth - 1}")
    elif shape == "mapping":
        lines.append("b0: &b0 {" + ", ".join(f"k{j}: lol" for j in range(width)) + "}")
        for i in range(1, depth):
            lines.append(f"b{i}: &b{i} {{" + ", ".join(f"k{j}: *b{i - 1}" for j in range(width)) + "}")
        lines.append(f"derived_from: [*b{depth - 1}, *b{depth - 1}]")
    elif shape == "block":  # block style, aliases one per line
        lines.append("c0: &c0\n" + "\n".join(["  - lol"] * width))
        for i in range(1, depth):
            lines.append(f"c{i}: &c{i}\n" + "\n".join([f"  - *c{i - 1}"] * width))
        lines.append("derived_from:\n" + "\n".join([f"  - *c{depth - 1}"] * 3))
    elif shape == "unused":  # aliases in a field nobody reads: still refused (aliases are never needed)
        lines.append("a0: &a0 [lol, lol]")
        lines.append("extra: *a0")
    return "---\nid: bomb\ntitle: Bomb\n" + "\n".join(lines) + "\n---\nBody.\n"


SHAPES = ["sequence", "mapping", "block", "unused"]


@pytest.mark.parametrize("shape", SHAPES)
def test_yaml_alias_bombs_are_refused_by_the_cli(tmp_path, shape):
    """Before the fix the sequence bomb drove `ask` to gigabytes (MemoryError under the ceiling)."""
    (tmp_path / "bomb.md").write_text(_nest(shape))
    r = run(["-m", "workbench", "ask", "--no-trace", "--corpus", str(tmp_path), "hello"], mem_gb=3)
    assert r.returncode == 2, r.stderr[-2000:]
    assert "Traceback" not in r.stderr
    assert "bomb.md" in r.stderr and "alias" in r.stderr


@pytest.mark.parametrize("shape", ["sequence", "mapping"])
def test_yaml_alias_bombs_in_an_app_upload_are_refused(tmp_path, shape):
    """The app's upload path (save_upload, then the app's corpus loader) refuses the bomb."""
    code = textwrap.dedent(f"""
        import io, sys, zipfile
        from pathlib import Path
        from workbench.errors import CorpusError
        from workbench.ui.uploads import save_upload
        from workbench.ui.caches import load_app_corpus
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w") as zf:
            zf.writestr("kb/bomb.md", {_nest(shape)!r})
        path = save_upload("kb.zip", buf.getvalue(), Path({str(tmp_path)!r}))
        try:
            load_app_corpus(str(path))
        except CorpusError as exc:
            print("refused:", exc)
            sys.exit(0)
        sys.exit("loaded a bomb")
    """)
    r = python(code, mem_gb=3, env={"WORKBENCH_HOME": str(tmp_path / "home")})
    assert r.returncode == 0, r.stderr[-2000:]
    assert "refused:" in r.stdout and "alias" in r.stdout


def test_front_matter_size_and_nesting_are_capped(tmp_path):
    big = "---\nid: big\ntitle: " + "x" * (corpus.MAX_FRONT_MATTER_BYTES + 10) + "\n---\nBody.\n"
    (tmp_path / "big.md").write_text(big)
    with pytest.raises(CorpusError, match="front matter is larger than") as exc:
        load_corpus(tmp_path)
    assert exc.value.path.endswith("big.md")
    (tmp_path / "big.md").unlink()
    deep = "---\nid: deep\nx:\n" + "".join("  " * i + "-\n" for i in range(1, 200)) + "---\nBody.\n"
    (tmp_path / "deep.md").write_text(deep)
    with pytest.raises(CorpusError, match="nested deeper than"):
        load_corpus(tmp_path)


def test_anchors_without_aliases_and_ordinary_front_matter_still_load(tmp_path):
    (tmp_path / "a.md").write_text("---\nid: a\ntitle: &t Plain title\nderived_from: [b, c]\n---\nBody.\n")
    assert load_corpus(tmp_path).get("a").title == "Plain title"


# --- zips that lie ----------------------------------------------------------------------------

DOC = "---\nid: a\ntitle: A\n---\n" + "Alpha text. " * 200 + "\n"


def _zip(files: dict[str, str | bytes], compression=zipfile.ZIP_DEFLATED) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=compression) as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    return buf.getvalue()


def _patch(data: bytes, *, crc: int | None = None, size: int | None = None, csize: int | None = None) -> bytes:
    """Rewrite the CRC / sizes of every member, in both the local headers and the central directory."""
    out = bytearray(data)
    for sig, crc_at in ((b"PK\x03\x04", 14), (b"PK\x01\x02", 16)):
        at = out.find(sig)
        while at != -1:
            if crc is not None:
                out[at + crc_at:at + crc_at + 4] = struct.pack("<I", crc)
            if csize is not None:
                out[at + crc_at + 4:at + crc_at + 8] = struct.pack("<I", csize)
            if size is not None:
                out[at + crc_at + 8:at + crc_at + 12] = struct.pack("<I", size)
            at = out.find(sig, at + 4)
    return bytes(out)


def _lying_zips() -> dict[str, bytes]:
    good = _zip({"kb/a.md": DOC})
    real = zipfile.ZipFile(io.BytesIO(good)).infolist()[0]
    stored = _zip({"kb/a.md": DOC}, zipfile.ZIP_STORED)
    # A member declared as 100 bytes that inflates to 50 MB of zeros (a classic zip bomb that lies).
    bomb = _patch(_zip({"kb/a.md": b"---\nid: z\n---\n" + b"\0" * 50_000_000}), size=100)
    return {
        "bad crc": _patch(good, crc=real.CRC ^ 0xFFFF),
        "size smaller than the data": _patch(good, size=real.file_size // 2),
        "size larger than the data": _patch(good, size=real.file_size * 4),
        "compressed size larger than the file": _patch(good, csize=10**6),
        "stored member with a lying size": _patch(stored, size=len(DOC) + 5000),
        "bomb with a lying size": bomb,
    }


@pytest.mark.parametrize("case", list(_lying_zips()))
def test_zip_members_whose_sizes_or_crcs_lie_are_clear_errors(tmp_path, case):
    """Before the fix these raised `BadZipFile` (or zlib/EOF errors) that replaced the app's page."""
    with pytest.raises(CorpusError) as exc:
        save_upload("kb.zip", _lying_zips()[case], tmp_path)
    assert "kb.zip" in str(exc.value)
    assert not list(tmp_path.rglob("*.md")), "nothing of a damaged zip is left as a corpus"


def test_a_zip_that_inflates_past_the_limit_is_refused_before_it_is_read(tmp_path, monkeypatch):
    from workbench.ui import uploads

    monkeypatch.setattr(uploads, "max_upload_bytes", lambda: 1_000_000)
    honest = _zip({"kb/a.md": b"---\nid: z\n---\n" + b"\0" * 5_000_000})
    assert len(honest) < 1_000_000
    with pytest.raises(CorpusError, match="expands to more than"):
        save_upload("kb.zip", honest, tmp_path)


def test_upload_size_and_document_count_are_bounded(tmp_path, monkeypatch):
    from workbench.ui import caches, uploads

    monkeypatch.setenv("WORKBENCH_MAX_UPLOAD_MB", "1")
    with pytest.raises(CorpusError, match="larger than 1 MB"):
        save_upload("c.jsonl", b"x" * (2**20 + 1), tmp_path)
    monkeypatch.setenv("WORKBENCH_MAX_DOCUMENTS", "50")
    lines = "\n".join(json.dumps({"id": str(i), "text": "t"}) for i in range(51))
    path = save_upload("c.jsonl", lines.encode(), tmp_path)
    with pytest.raises(CorpusError, match="more than 50 documents"):
        caches.load_app_corpus(str(path))
    z = _zip({f"kb/{i}.md": f"---\nid: d{i}\n---\nx\n" for i in range(51)})
    with pytest.raises(CorpusError, match="more than 50"):
        caches.load_app_corpus(str(save_upload("kb.zip", z, tmp_path)))
    assert uploads.max_documents() == 50


def test_load_corpus_max_documents_is_exact(tmp_path):
    lines = "\n".join(json.dumps({"id": str(i), "text": "t"}) for i in range(10))
    (tmp_path / "c.jsonl").write_text(lines)
    assert len(load_corpus(tmp_path / "c.jsonl", max_documents=10)) == 10
    with pytest.raises(CorpusError, match="more than 9 documents"):
        load_corpus(tmp_path / "c.jsonl", max_documents=9)


def test_crc_checked_zip_still_loads(tmp_path):
    z = _zip({"kb/a.md": DOC, "kb/b.md": DOC.replace("id: a", "id: b")})
    assert sorted(d.doc_id for d in load_corpus(save_upload("kb.zip", z, tmp_path)).documents) == ["a", "b"]
    assert zlib.crc32(DOC.encode()) == zipfile.ZipFile(io.BytesIO(z)).infolist()[0].CRC


def test_upload_names_with_control_characters_are_saved_not_crashed_on(tmp_path):
    """Before the fix a name with NUL (the browser sends whatever name it likes) raised ValueError."""
    for name in ("a\x00.md", "x\x00y.jsonl", "b\n\x1b[2J.md", "..\\..\\c.jsonl", "a/../../d.md"):
        body = b'{"id": "a", "text": "t"}\n' if name.endswith(".jsonl") else b"---\nid: a\n---\nx\n"
        path = save_upload(name, body, tmp_path)
        assert path.resolve().is_relative_to(tmp_path.resolve())
        assert not any(ord(c) < 32 for c in str(path))
        assert [d.doc_id for d in load_corpus(path).documents] == ["a"]


# --- PDFs whose text costs more than their bytes ---------------------------------------------------


def _deflated(data: bytes, extra: bytes = b"") -> bytes:
    z = zlib.compress(data, 9)
    return b"<< " + extra + b" /Length %d /Filter /FlateDecode >>\nstream\n" % len(z) + z + b"\nendstream"


def content_bomb_pdf(pages: int = 8, ops: int = 900_000) -> bytes:
    """A few KB per page that inflate to ~900,000 text operators each."""
    head = [b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [%s] /Count %d >>" % (b" ".join(b"%d 0 R" % (4 + 2 * i) for i in range(pages)), pages),
            b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"]
    body = _deflated(b"BT /F1 12 Tf 72 720 Td " + b"(a) Tj " * ops + b"ET")
    for i in range(pages):
        head.append(b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> "
                    b"/Contents %d 0 R >>" % (5 + 2 * i))
        head.append(body)
    return pdf_file(head)


def form_bomb_pdf(depth: int = 9, width: int = 10) -> bytes:
    """Form XObjects drawing the one below ten times each: 10^8 'lol's from one page (billion laughs)."""
    objs = [b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [4 0 R] /Count 1 >>",
            b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> "
            b"/XObject << /X %d 0 R >> >> /Contents 5 0 R >>" % (5 + depth),
            _deflated(b"/X Do")]
    for i in range(depth):  # objects 6 .. 5+depth: form i draws form i-1 (object 5+i) ten times
        content = b"BT /F1 12 Tf 72 720 Td (lol) Tj ET" if i == 0 else b"/Y Do " * width
        res = b"<< /Font << /F1 3 0 R >> >>" if i == 0 else b"<< /XObject << /Y %d 0 R >> >>" % (5 + i)
        objs.append(_deflated(content, b"/Type /XObject /Subtype /Form /BBox [0 0 612 792] /Resources " + res))
    return pdf_file(objs)


def test_a_pdf_whose_page_inflates_past_the_bound_is_refused_before_it_is_parsed(tmp_path):
    """Before the fix this 30 KB PDF (one page inflating to 21 MB of operators) ended, after seconds of
    parsing, in pypdf's LimitReachedError as a traceback."""
    data = content_bomb_pdf(pages=1, ops=3_000_000)
    assert len(data) < 100_000
    (tmp_path / "bomb.pdf").write_bytes(data)
    r = run(["-m", "workbench", "ask", "--no-trace", "--corpus", str(tmp_path), "what does it say?"],
            mem_gb=3, timeout=120)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert "bomb.pdf" in r.stderr and "more than 16 MB of page content" in r.stderr


def test_the_app_bounds_the_pdf_work_of_a_whole_corpus(tmp_path):
    """Pages under every per-file bound, but more of them than the app parses: refused at the bound (before
    the fix all eight pages were parsed, seconds each, and the document loaded)."""
    kb = tmp_path / "kb"
    kb.mkdir()
    # ~0.55 MB of content a page, 4.4 MB in all (under the 16 MB a file may hold): the first page is parsed, the
    # second goes past the app's 1 MB and is refused before it is parsed
    (kb / "a.pdf").write_bytes(content_bomb_pdf(pages=8, ops=80_000))
    code = textwrap.dedent(f"""
        from workbench.errors import CorpusError
        from workbench.ui.caches import load_app_corpus
        try:
            load_app_corpus({str(kb)!r})
        except CorpusError as exc:
            print("refused:", exc)
    """)
    r = python(code, mem_gb=3, timeout=120, env={"WORKBENCH_MAX_PDF_MB": "1"})
    assert r.returncode == 0 and "refused:" in r.stdout and "WORKBENCH_MAX_PDF_MB" in r.stdout, r.stderr[-2000:]


def test_a_pdf_of_forms_drawing_forms_stays_bounded(tmp_path):
    """10^8 expansions from one page: pypdf stops expanding forms (5,000 invocations) and our operator budget
    counts what runs inside them; either way the load ends quickly with a document or a clear error."""
    (tmp_path / "bomb.pdf").write_bytes(form_bomb_pdf())
    r = run(["-m", "workbench", "ask", "--no-trace", "--corpus", str(tmp_path), "what does it say?"],
            mem_gb=3, timeout=120)
    assert r.returncode in (0, 2) and "Traceback" not in r.stderr, r.stderr[-2000:]


def test_zip_members_the_file_system_cannot_hold_are_clear_errors(tmp_path):
    """Before the fix a member name longer than the file system allows raised OSError (the page broke)."""
    z = _zip({"kb/" + "n" * 300 + ".md": DOC, "kb/ok.md": DOC})
    with pytest.raises(CorpusError, match="cannot be written"):
        save_upload("kb.zip", z, tmp_path)
    assert not list(tmp_path.rglob("*.md"))
    with pytest.raises(CorpusError, match="cannot be stored"):
        save_upload("d" * 300 + ".md", DOC.encode(), tmp_path)
