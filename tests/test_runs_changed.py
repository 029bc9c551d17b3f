"""The questions that changed between runs (issue 41, item 9): why each failed, in the CLI and on the Experiments
page, turn links where a wide table cannot hide them, and `runs compare` as wide as the terminal at most."""

from __future__ import annotations

import json

import pytest
from streamlit.testing.v1 import AppTest

from clirun import cli
from conftest import ROOT

LINES = [{"question": "How do I configure SSO with our company identity provider for every member?",
          "expected": ["sso-saml-setup"], "tags": ["sso"]},
         {"question": "How do I stop our paid subscription from renewing at the end of the month?",
          "expected": ["billing-cancel-subscription"]},
         {"question": "What articles do you have?", "expect_no_sources": True}]


@pytest.fixture
def db(tmp_path, monkeypatch):
    questions = tmp_path / "questions-with-a-long-file-name.jsonl"
    questions.write_text("".join(json.dumps(line) + "\n" for line in LINES), encoding="utf-8")
    path = tmp_path / "traces.duckdb"
    for name, *args in (("baseline-with-a-long-name",), ("candidate-with-a-long-name", "--fault", "corrupt_id")):
        r = cli("eval", str(questions), "--name", name, "--db", str(path), "--no-progress", *args)
        assert r.returncode == 0, r.stderr
    monkeypatch.setenv("WORKBENCH_DB", str(path))
    return path


def _compare(db, columns: int):
    r = cli("runs", "compare", "baseline-with-a-long-name", "candidate-with-a-long-name", "--db", str(db),
            env={"COLUMNS": str(columns)})
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_runs_compare_fits_the_terminal_and_says_why_a_question_failed(db):
    narrow = _compare(db, 80)
    assert max(len(line) for line in narrow.splitlines()) <= 80, narrow
    assert "candidate-with-a-long-name" in narrow  # the table is there, wrapped rather than cut
    wide = _compare(db, 400)
    assert "no rejected citation" in wide, wide  # the failed assertion, as `runs show` prints it
    assert "failed because" in wide


def test_the_json_diff_says_why(db):
    r = cli("runs", "compare", "baseline-with-a-long-name", "candidate-with-a-long-name", "--db", str(db), "--json")
    diff = json.loads(r.stdout)["diff"]
    assert any("no rejected citation" in d["failed"]["candidate-with-a-long-name"] for d in diff), diff


def test_the_page_says_why_and_shows_turn_links_first(db):
    at = AppTest.from_file(str(ROOT / "pages" / "5_Experiments.py"), default_timeout=60).run()
    assert not at.exception, at.exception
    diff = at.dataframe[-1].value
    columns = list(diff.columns)
    assert any("no rejected citation" in why for why in diff["candidate-with-a-long-name: failed because"])
    links = [columns.index(c) for c in columns if c.endswith(": turn")]
    assert links and max(links) < columns.index("baseline-with-a-long-name: passed") < columns.index("expected"), \
        columns
