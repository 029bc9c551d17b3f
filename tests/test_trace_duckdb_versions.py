"""A trace file written by DuckDB 2.x, opened by the workbench's DuckDB 1.5 (docs/design.md §13, "Versions"): a
clear error naming the way back, and the file left as it was.

The file is built here: a DuckDB main header block (4096 bytes) as DuckDB 2.0.1 writes it — its checksum, "DUCK",
storage version 999 and the library version "v2.0.1" at byte 52 — with DuckDB's checksum (bytes 8–4095 read as
little-endian uint64 words x, folded as `r ^= x * 0xbf58476d1ce4e5b9` from r = 5381: checked against a real 2.0.1
file), so DuckDB 1.5 reads it as far as its version check, as it does a real one. A real file is used too when
WORKBENCH_TEST_DUCKDB2_PYTHON names a Python with DuckDB 2.x installed (a binary file is not kept in the repo)."""

from __future__ import annotations

import os
import struct
import subprocess

import pytest
from clirun import cli

_BLOCK = 4096


def _checksum(block: bytes) -> int:
    r = 5381
    for (x,) in struct.iter_unpack("<Q", block):
        r ^= (x * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    return r


def _duckdb2_file(path, version: bytes = b"v2.0.1", storage: int = 999) -> bytes:
    body = b"DUCK" + struct.pack("<Q", storage) + bytes(32) + version.ljust(32, b"\0")
    body = body.ljust(_BLOCK - 8, b"\0")
    data = struct.pack("<Q", _checksum(body)) + body + bytes(2 * _BLOCK)  # then the two database headers
    path.write_bytes(data)
    return data


def _real_duckdb2_file(path) -> bytes:
    python = os.environ.get("WORKBENCH_TEST_DUCKDB2_PYTHON")
    if not python:
        pytest.skip("WORKBENCH_TEST_DUCKDB2_PYTHON names no Python with DuckDB 2.x (the built header is tested)")
    subprocess.run([python, "-c", f"import duckdb; duckdb.connect({str(path)!r}).execute('CREATE TABLE t (a INT)')"],
                   check=True, timeout=120)
    return path.read_bytes()


@pytest.mark.parametrize("make", [_duckdb2_file, _real_duckdb2_file], ids=["built-header", "real-2.x-file"])
def test_a_trace_file_from_duckdb_2_names_the_way_back(tmp_path, make):
    db = tmp_path / "t.duckdb"
    before = make(db)
    for args in (["runs", "list"], ["sql", "SELECT count(*) FROM turns"], ["usage"]):
        r = cli(*args, "--db", str(db))
        assert r.returncode != 0 and "Traceback" not in r.stderr, (args, r.stderr)
        assert "written by DuckDB 2.0.1" in r.stderr and "cannot read it" in r.stderr, r.stderr
        assert "EXPORT DATABASE" in r.stderr and "workbench store import" in r.stderr, r.stderr
    r = cli("ask", "How do I configure SSO?", "--db", str(db))
    assert "this turn was not traced" in r.stderr and "written by DuckDB 2.0.1" in r.stderr
    assert db.read_bytes() == before  # left as it was



def test_store_import_brings_an_export_back_into_a_new_file(tmp_path):
    """The way back's second step, on an export made with EXPORT DATABASE (FORMAT parquet), here by this DuckDB:
    the importer reads the same Parquet files whichever DuckDB wrote them (checked by hand with a 2.0.1 export,
    whose views DuckDB 1.5's own IMPORT DATABASE refuses: docs/traces.md)."""
    import duckdb

    old, export, new = tmp_path / "old.duckdb", tmp_path / "export", tmp_path / "new.duckdb"
    r = cli("ask", "How do I configure SSO?", "--db", str(old))
    assert r.returncode == 0, r.stderr
    with duckdb.connect(str(old), read_only=True) as con:
        con.execute(f"EXPORT DATABASE '{export}' (FORMAT parquet)")
        turns = con.execute("SELECT turn_id, question, started_at FROM turns").fetchall()
    r = cli("store", "import", str(export), "--db", str(new))
    assert r.returncode == 0 and "imported" in r.stdout, r.stderr
    with duckdb.connect(str(new), read_only=True) as con:
        assert con.execute("SELECT turn_id, question, started_at FROM turns").fetchall() == turns
        assert con.execute("SELECT count(*) FROM turn_sets").fetchone() == (1,)  # the views are there
    r = cli("store", "import", str(export), "--db", str(new))
    assert r.returncode != 0 and "already exists" in r.stderr  # never over an existing file
    r = cli("store", "import", str(tmp_path), "--db", str(tmp_path / "other.duckdb"))
    assert r.returncode != 0 and "no exported trace database" in r.stderr
    assert not (tmp_path / "other.duckdb").exists()
