"""The app's Experiments page under AppTest, over a real trace database holding two named eval runs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from apptest import unescape
from clirun import cli
from conftest import ROOT

LINES = [
    {"question": "How do I configure SSO?", "expected": ["sso-saml-setup"]},
    {"question": "How do I stop our paid subscription from renewing at the end of the month?",
     "expected": ["billing-cancel-subscription"]},
    {"question": "What articles do you have?", "expect_no_sources": True},
    # expects the wrong article, so it fails in every run: the pass rates lie strictly between 0 and 1 and their
    # intervals are not degenerate, so the error bars' two sides differ (a swap of upper and lower shows)
    {"question": "How do I reset my password?", "expected": ["billing-cancel-subscription"]},
]


def _copied(built: Path, tmp_path: Path, monkeypatch) -> Path:
    """The module's database copied for one test (whatever its app session writes stays its own), as WORKBENCH_DB."""
    path = tmp_path / "traces.duckdb"
    shutil.copyfile(built, path)
    monkeypatch.setenv("WORKBENCH_DB", str(path))
    return path


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    """Two named eval runs, evaluated once for the module."""
    folder = tmp_path_factory.mktemp("two-runs")
    path, questions = folder / "traces.duckdb", folder / "exp.jsonl"
    questions.write_text("".join(json.dumps(line) + "\n" for line in LINES), encoding="utf-8")
    assert cli("eval", questions, "--db", path, "--name", "clean", "--no-progress").returncode == 0
    assert cli("eval", questions, "--db", path, "--name", "faulty", "--fault", "corrupt_id",
               "--no-progress").returncode == 0
    return path


@pytest.fixture
def db(two_runs, tmp_path, monkeypatch):
    return _copied(two_runs, tmp_path, monkeypatch)


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
    assert list(board["pass rate"]) == [round(r.value("pass_rate"), 3) for r in expected.runs]
    chart = json.loads(at.get("plotly_chart")[0].proto.spec)
    bars = {t["name"]: t for t in chart["data"]}
    error_y = bars["pass rate"]["error_y"]
    assert error_y["symmetric"] is False
    for i, run in enumerate(expected.runs):
        lo, hi = run.interval("pass_rate")
        value = run.value("pass_rate")
        # not degenerate, and lopsided: the bar above (hi - value) and the bar below (value - lo) differ
        assert 0 < value < 1 and lo < value < hi and hi - value != pytest.approx(value - lo), run
        assert error_y["array"][i] == pytest.approx(hi - value)  # the bar above the value reaches the upper end
        assert error_y["arrayminus"][i] == pytest.approx(value - lo)  # the bar below reaches the lower end
    diff = at.dataframe[-1].value
    assert list(diff["question"]) == [d.line.question for d in expected.diff] and len(diff)
    first = expected.diff[0]
    assert diff["faulty: turn"][0] == f"?store=default&turn={first.turn_id['faulty']}"

    # the link's target: the turn's documents and citations, from the trace store
    at = _page()
    at.query_params["turn"] = first.turn_id["faulty"]
    at.run()
    assert not at.exception, at.exception
    docs = at.dataframe[0].value
    consulted = set(docs[docs["consulted"]]["doc_id"])
    assert consulted == set(first.consulted["faulty"])
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


# --- hostile names, tags and text; ?turn= opens only experiment turns (issue 31, item 5) ---------

RLO, ESC = "\u202e", "\x1b"
#: Bidi overrides and isolates, and the terminal escapes a run name, tag, question or title can carry.
HOSTILE_CHARS = ("\u202a", "\u202b", "\u202d", RLO, "\u2066", "\u2067", "\u2068", "\u200f", ESC, "\x07", "\x9b")
WIDGET = ("widget-reset", "Reset the widget" + RLO + "gpj.exe" + ESC + "[31m", "To reset the widget, hold its "
          "button for ten seconds; the widget restarts on its own.")
EXPORT = ("data-export", "Export your data" + ESC + "]52;c;owned" + "\x07", "An export of your data takes about ten "
          "minutes; you get an email when the export is ready.")
HOSTILE_RUNS = ("clean" + RLO + "gpj.exe", "faulty" + ESC + "[2J\u2066x")
HOSTILE_TAG = "bra" + RLO + "nch=ma" + ESC + "[31min"


def _hostile(value) -> list[str]:
    return [c for c in HOSTILE_CHARS if isinstance(value, str) and c in value]


def _page_strings(at) -> list[str]:
    """Every string the page sends: markdown, captions, warnings, multiselect options, table headers and cells,
    the chart's spec."""
    kinds = ("markdown", "caption", "warning", "info", "error", "subheader")
    out = [m.value for kind in kinds for m in getattr(at, kind)]
    out += [o for m in at.multiselect for o in m.options]
    for frame in at.dataframe:
        df = frame.value
        out += [str(c) for c in df.columns] + [v for col in df.columns for v in df[col] if isinstance(v, str)]
    out += [c.proto.spec for c in at.get("plotly_chart")]
    return out


@pytest.fixture(scope="module")
def hostile_runs(tmp_path_factory):
    """Two eval runs and a chat turn over a corpus of hostile titles, made once for the module."""
    folder = tmp_path_factory.mktemp("hostile-runs")
    path = folder / "traces.duckdb"
    corpus = folder / "kb.jsonl"
    corpus.write_text("".join(json.dumps({"id": i, "title": t, "url": f"https://help.example.test/{i}", "text": x})
                              + "\n" for i, t, x in (WIDGET, EXPORT)), encoding="utf-8")
    questions = folder / "exp.jsonl"
    questions.write_text("".join(json.dumps(line) + "\n" for line in [
        {"question": "How do I reset the widget" + RLO + "?", "expected": ["widget-reset"]},
        {"question": "How long does a data export take" + ESC + "[31m?", "expected": ["widget-reset"]}]),
        encoding="utf-8")
    for name, fault in zip(HOSTILE_RUNS, ([], ["--fault", "corrupt_id"])):
        assert cli("eval", questions, "--db", path, "--corpus", corpus, "--name", name, "--tag", HOSTILE_TAG,
                   "--no-progress", *fault).returncode == 0
    asked = cli("ask", "--db", path, "--corpus", corpus, "--json", "How do I reset the widget?")  # not an eval turn
    assert asked.returncode == 0, asked.stderr
    return path, json.loads(asked.stdout)["turn_id"]


@pytest.fixture
def hostile_db(hostile_runs, tmp_path, monkeypatch):
    built, chat_turn = hostile_runs
    return _copied(built, tmp_path, monkeypatch), chat_turn


def test_the_page_shows_hostile_run_names_tags_cells_and_headers_as_visible_escapes(hostile_db):
    from workbench.trace.scoring import compare

    path, _ = hostile_db
    at = _page().run()
    assert not at.exception, at.exception
    assert at.multiselect(key="exp_runs").value == list(HOSTILE_RUNS)
    board, diff = at.dataframe[0].value, at.dataframe[-1].value
    assert list(board["run"]) == ["clean\\u202egpj.exe", "faulty\\x1b[2J\\u2066x"]
    # the one tag both runs carry is no column but the caption of what every run shares
    assert "tags.bra\\u202ench" not in board.columns
    assert any("tags.bra\\u202ench ma\\x1b[31min" in unescape(c.value) for c in at.caption), [c.value for c in at.caption]
    assert "faulty\\x1b[2J\\u2066x: consulted" in diff.columns
    assert "How do I reset the widget\\u202e?" in set(diff["question"])
    found = {s[:80]: _hostile(s) for s in _page_strings(at) if _hostile(s)}
    assert not found, found

    changed = compare(path, list(HOSTILE_RUNS)).diff[0]
    at = _page()
    at.query_params["turn"] = changed.turn_id[HOSTILE_RUNS[1]]
    at.run()
    assert not at.exception, at.exception
    assert "Reset the widget\\u202egpj.exe\\x1b[31m" in set(at.dataframe[0].value["title"])
    found = {s[:80]: _hostile(s) for s in _page_strings(at) if _hostile(s)}
    assert not found, found


def test_a_turn_link_opens_only_a_turn_of_an_experiment_run(hostile_db):
    _, chat_turn = hostile_db
    for asked in (chat_turn, "no-such-turn" + RLO):
        at = _page()
        at.query_params["turn"] = asked
        at.run()
        assert not at.exception, at.exception
        (warning,) = [unescape(w.value) for w in at.warning]
        assert "of an experiment run" in warning and "opens only the turns of the runs it lists" in warning, warning
        assert "Turn" not in [s.value for s in at.subheader], "nothing of the turn is shown"
        assert "How do I reset the widget?" not in "\n".join(_page_strings(at))
        assert len(at.dataframe) == 4, "the leaderboard, the paired comparison, its flips and the changed questions"
