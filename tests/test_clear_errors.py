"""Clear errors instead of tracebacks (issue 17, item 9): every bad input is `error: …` and exit 2."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import ROOT
from workbench.session import Session


def cli(*args, stdin: str | None = None):
    return subprocess.run([sys.executable, "-m", "workbench", *args], capture_output=True, text=True, cwd=ROOT,
                          input=stdin)


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    path = tmp_path_factory.mktemp("db") / "t.duckdb"
    Session.open(trace_db=path).ask("How do I configure SSO?")
    return path


@pytest.mark.parametrize("target", ["file", "file inside", "unwritable"])
def test_export_parquet_onto_a_file_is_a_clear_error(db, tmp_path, target):
    """Before the fix `export --parquet` onto an existing file raised FileExistsError."""
    existing = tmp_path / "out.parquet"
    existing.write_text("keep me")
    out = {"file": existing, "file inside": existing / "sub", "unwritable": "/proc/no-such-dir/out"}[target]
    r = cli("export", "--parquet", str(out), "--db", str(db))
    assert r.returncode == 2 and r.stderr.startswith("error:") and "Traceback" not in r.stderr
    assert existing.read_text() == "keep me"
