"""The app's Experiments page under AppTest, over a real trace database holding two named eval runs."""

from __future__ import annotations

import json

import pytest
from streamlit.testing.v1 import AppTest

from apptest import unescape
from conftest import ROOT
from workbench.cli import main

LINES = [
    {"question": "How do I configure SSO?", "expected": ["sso-saml-setup"]},
    {"question": "How do I stop our paid subscription from renewing at the end of the month?",
     "expected": ["billing-cancel-subscription"]},
    {"question": "What articles do you have?", "expect_no_sources": True},
    # expects the wrong article, so it fails in every run: the pass rates lie strictly between 0 and 1 and their
    # intervals are not degenerate, so the error bars' two sides differ (a swap of upper and lower shows)
    {"question": "How do I reset my password?", "expected": ["billing-cancel-subscription"]},
]


@pytest.fixture
def db(tmp_path, monkeypatch, capsys):
    path = tmp_path / "traces.duckdb"
    monkeypatch.setenv("WORKBENCH_DB", str(path))
    questions = tmp_path / "exp.jsonl"
    questions.write_text("".join(json.dumps(line) + "\n" for line in LINES), encoding="utf-8")
    assert main(["eval", str(questions), "--name", "clean", "--no-progress"]) == 0
    assert main(["eval", str(questions), "--name", "faulty", "--fault", "corrupt_id", "--no-progress"]) == 0
    capsys.readouterr()
    return path


def _page() -> AppTest:
    return AppTest.from_file(str(ROOT / "pages" / "5_Experiments.py"), default_timeout=60)


def test_the_page_shows_the_leaderboard_with_error_bars_and_links_changed_questions_to_their_turns(db):
    from workbench.trace.scoring import compare

    at = _page().run()
    assert not at.exception, at.exception
    assert at.multiselect(key="exp_runs").value == ["clean", "faulty"]
    expected = compare(db, ["clean", "faulty"])
    board = at.dataframe[0].value
    assert list(board["run"]) == ["clean", "faulty"]
    assert list(board["pass rate"]) == [round(r["pass_rate"], 3) for r in expected["runs"]]
    chart = json.loads(at.get("plotly_chart")[0].proto.spec)
    bars = {t["name"]: t for t in chart["data"]}
    error_y = bars["pass rate"]["error_y"]
    assert error_y["symmetric"] is False
    for i, run in enumerate(expected["runs"]):
        lo, hi = run["ci"]["pass_rate"]
        value = run["pass_rate"]
        # not degenerate, and lopsided: the bar above (hi - value) and the bar below (value - lo) differ
        assert 0 < value < 1 and lo < value < hi and hi - value != pytest.approx(value - lo), run
        assert error_y["array"][i] == pytest.approx(hi - value)  # the bar above the value reaches the upper end
        assert error_y["arrayminus"][i] == pytest.approx(value - lo)  # the bar below reaches the lower end
    diff = at.dataframe[1].value
    assert list(diff["question"]) == [d["question"] for d in expected["diff"]] and len(diff)
    first = expected["diff"][0]
    assert diff["faulty: turn"][0] == f"?turn={first['turn_id']['faulty']}"

    # the link's target: the turn's documents and citations, from the trace store
    at = _page()
    at.query_params["turn"] = first["turn_id"]["faulty"]
    at.run()
    assert not at.exception, at.exception
    docs = at.dataframe[0].value
    consulted = set(docs[docs["consulted"]]["doc_id"])
    assert consulted == set(first["consulted"]["faulty"])
    citations = at.dataframe[1].value
    assert not citations["valid"].all()  # the corrupt_id fault's rejected citation is there


def test_the_page_without_runs_says_how_to_make_one(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_DB", str(tmp_path / "none.duckdb"))
    at = _page().run()
    assert not at.exception and "--name NAME" in unescape(at.info[0].value)


def test_the_usage_pages_run_picker_names_each_runs_name_corpus_and_dataset(db):
    at = AppTest.from_file(str(ROOT / "pages" / "4_Document_usage.py"), default_timeout=60).run()
    assert not at.exception, at.exception
    options = at.multiselect(key="usage_runs").options
    assert len(options) == 2
    for name in ("clean", "faulty"):
        (label,) = [o for o in options if o.startswith(f"{name} · ")]
        assert "corpus demo" in label and "dataset exp" in label and "4 turns" in label
