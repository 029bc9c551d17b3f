"""Plain-text and PDF ingestion: page numbers reach chunks, excerpts and citation records."""

from __future__ import annotations

import pytest

from workbench.corpus import load_corpus
from workbench.errors import CorpusError
from workbench.retrieval.chunking import chunk_documents
from workbench.session import Session


def minimal_pdf(pages: list[str], title: str | None = None) -> bytes:
    """A valid PDF with one Helvetica text line per page, written by hand (offsets computed)."""
    n = len(pages)
    objects: list[bytes] = [b"<< /Type /Catalog /Pages 2 0 R >>"]
    kids = " ".join(f"{4 + 2 * i} 0 R" for i in range(n))
    objects.append(f"<< /Type /Pages /Kids [{kids}] /Count {n} >>".encode())
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    for i, text in enumerate(pages):
        escaped = text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
        stream = f"BT /F1 12 Tf 72 720 Td ({escaped}) Tj ET".encode()
        objects.append(f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> "
                       f"/Contents {5 + 2 * i} 0 R >>".encode())
        objects.append(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
    if title:
        objects.append(f"<< /Title ({title}) >>".encode())
    return pdf_file(objects, info=len(objects) if title else None)


def pdf_file(objects: list[bytes], info: int | None = None) -> bytes:
    """Objects 1..n (1 the catalog) as a PDF file with its cross-reference table; `info`: the Info object."""
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for num, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % num + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % off for off in offsets)
    trailer = f" /Info {info} 0 R" if info else ""
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R{trailer} >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return bytes(out)


PAGES = [
    "Orbit handbook. Introduction to the field station and its staff.",
    "Calibrating the anemometer: hold the reset button for ten seconds, then rotate the cups twice.",
    "Safety: never climb the mast during thunderstorms.",
]


@pytest.fixture
def pdf_folder(tmp_path):
    root = tmp_path / "kb"
    (root / "manuals").mkdir(parents=True)
    (root / "manuals" / "handbook.pdf").write_bytes(minimal_pdf(PAGES, title="Field Station Handbook"))
    (root / "notes.txt").write_text("Radio check\n\nThe radio check happens every Monday at nine.\n", encoding="utf-8")
    (root / "paged.txt").write_text("First page words\fSecond page about gliders\n", encoding="utf-8")
    return root


def test_folder_reads_pdf_and_text_with_pages(pdf_folder):
    c = load_corpus(pdf_folder)
    assert sorted(c._by_id) == ["manuals/handbook", "notes", "paged"]
    pdf = c.get("manuals/handbook")
    assert pdf.title == "Field Station Handbook" and pdf.category == "manuals"
    assert pdf.pages is not None and len(pdf.pages) == 3 and "anemometer" in pdf.pages[1]
    assert pdf.file_name == "handbook.pdf"
    notes = c.get("notes")
    assert notes.title == "Radio check" and notes.pages is None and "every Monday" in notes.text
    assert c.get("paged").pages == ("First page words", "Second page about gliders")
    chunks = chunk_documents(c.documents)
    by_doc = {(ch.doc_id, ch.page) for ch in chunks}
    assert {("manuals/handbook", 1), ("manuals/handbook", 2), ("manuals/handbook", 3)} <= by_doc
    assert ("notes", None) in by_doc and ("paged", 2) in by_doc


def test_single_pdf_file_is_a_corpus(pdf_folder):
    c = load_corpus(pdf_folder / "manuals" / "handbook.pdf")
    assert [d.doc_id for d in c.documents] == ["handbook"]


def test_excerpt_citations_carry_the_pdf_page(pdf_folder):
    session = Session.open(pdf_folder)
    answer = session.ask("How do I calibrate the anemometer?", mode="excerpts", k=3)
    payload = answer.payload
    assert answer.record.excerpts[0].doc_id == "manuals/handbook" and answer.record.excerpts[0].page == 2
    valid = [c for c in payload.citations if c.valid]
    assert valid, payload.answer
    first = valid[0]
    assert first.doc_id == "manuals/handbook" and first.excerpt["page"] == 2
    assert first.excerpt["file_name"] == "handbook.pdf" and first.excerpt["label"] == "Source text"
    assert "manuals/handbook" in payload.sets.consulted


@pytest.mark.parametrize("name, content, message", [
    ("broken.pdf", b"%PDF-1.4\nthis is not really a pdf", "not a readable PDF"),
    ("blank.pdf", minimal_pdf([""]), "no text could be extracted"),
    ("latin1.txt", "caf\xe9".encode("latin-1"), "not valid UTF-8"),
    ("empty.txt", b"   \n", "file is empty"),
])
def test_bad_files_name_the_file(tmp_path, name, content, message):
    (tmp_path / name).write_bytes(content)
    with pytest.raises(CorpusError) as err:
        load_corpus(tmp_path)
    assert name in str(err.value) and message in str(err.value)


def test_unsupported_single_file_is_rejected(tmp_path):
    f = tmp_path / "sheet.csv"
    f.write_text("a,b\n", encoding="utf-8")
    with pytest.raises(CorpusError, match="sheet.csv.*expected a folder"):
        load_corpus(f)
