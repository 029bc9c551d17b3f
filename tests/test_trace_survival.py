"""The answer survives the trace store (issue 17, item 5): a damaged trace database is a warning
beside the answer (exit 1), never a traceback instead of it; inputs the store cannot hold are refused
before the turn runs (exit 2)."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from conftest import ROOT
from bounded import workbench
from damage import KINDS, damage, traced_db
from workbench.errors import WorkbenchError
from workbench.session import Session


@pytest.fixture(scope="module")
def good(tmp_path_factory):
    return traced_db(tmp_path_factory.mktemp("good") / "good.duckdb")


def _ask(*args):
    return workbench("ask", *args, text=False)


@pytest.mark.parametrize("kind", KINDS)
def test_ask_prints_the_answer_and_a_warning_on_a_damaged_trace_database(good, tmp_path, kind):
    """Before the fix a tail or middle block overwritten made `ask` print a traceback and no answer."""
    bad = damage(good, kind, tmp_path / "bad.duckdb")
    r = _ask("How do I configure SSO?", "--db", str(bad))
    out, err = r.stdout.decode(), r.stderr.decode()
    assert "Traceback" not in err, err[-3000:]
    assert "Sources: Configure SAML" in out
    assert (r.returncode == 1) == ("warning: this turn was not traced" in err), (r.returncode, err)
    if kind not in ("middle overwritten", "turns blocks overwritten"):  # DuckDB may append past those intact
        assert r.returncode == 1


def test_the_app_shows_the_answer_and_a_warning_on_a_damaged_trace_database(good, tmp_path, monkeypatch):
    bad = damage(good, "tail overwritten", tmp_path / "bad.duckdb")
    monkeypatch.setenv("WORKBENCH_DB", str(bad))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60).run()
    at.chat_input[0].set_value("How do I configure SSO?").run()
    assert not at.exception, at.exception
    turn = at.session_state["turns"][-1]
    assert turn.error is None and turn.payload.sets.consulted
    # the answer is shown: its text, and its inline citation that opens the side panel (`#wb-cite-…`)
    assert any("Configure SAML single sign" in m.value and "#wb-cite-" in m.value for m in at.markdown), \
        "the answer is shown"
    warnings = [w.value for w in at.warning]
    assert any(w.startswith("This turn was not traced") for w in warnings), warnings
    assert not any("_duckdb" in w for w in warnings)


@pytest.mark.parametrize("k", ["2147483648", "1001", "99999999999999999999"])
def test_a_k_the_store_cannot_hold_is_refused_before_the_turn(tmp_path, k):
    """Before the fix `-k 2147483648` ran the turn and then raised a DuckDB conversion traceback."""
    db = tmp_path / "t.duckdb"
    r = _ask("How do I configure SSO?", "-k", k, "--db", str(db))
    assert r.returncode == 2 and b"Traceback" not in r.stderr
    assert b"-k" in r.stderr and b"at most 1000" in r.stderr
    assert not db.exists()


def test_the_library_refuses_out_of_range_k_and_text_that_is_not_utf8(tmp_path):
    session = Session.open(trace_db=tmp_path / "t.duckdb")
    for k in (0, 2**31, 1001, True, 2.0):
        with pytest.raises(WorkbenchError, match="k must be"):
            session.ask("How do I configure SSO?", k=k)
    with pytest.raises(WorkbenchError, match="not valid UTF-8"):
        session.ask("How \udcff do I configure SSO?")
    assert not (tmp_path / "t.duckdb").exists()
    assert session.ask("How do I configure SSO?", k=1000).trace_error is None


def test_a_question_that_is_not_utf8_is_refused_up_front(tmp_path):
    """Before the fix invalid UTF-8 in argv ran the turn and then raised a DuckDB encoding traceback."""
    db = tmp_path / "t.duckdb"
    r = workbench("ask", b"How \xff do I configure SSO?", "--db", str(db), text=False)
    assert r.returncode == 2 and b"Traceback" not in r.stderr and b"not valid UTF-8" in r.stderr
    assert not Path(db).exists()
