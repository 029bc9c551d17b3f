"""Experiments (docs/experiments.md): expectations in questions files, named runs, the leaderboard and
per-question diff, and the regression gate — checked against figures computed here, independently,
from the raw trace tables (turns, sources, citations) by the definitions in docs/experiments.md."""

from __future__ import annotations

import json
import re

import duckdb
import pytest

from tracedb import empty_trace_db
from workbench.cli import main
from workbench.errors import CorpusError
from workbench.questions import read_dataset

# Written here (not data/demo_gold.jsonl): every kind of expectation, one that the clean offline agent
# fails (a must_not_cite it consults), and an unknown field that must be kept.
LINES = [
    {"question": "How do I configure SSO?", "expected": ["sso-saml-setup"], "tags": ["sso"]},
    {"question": "Our identity team uses Okta. Where do I paste the Okta metadata URL so people can log in from "
                 "their Okta dashboard?", "expected": ["sso-okta"], "must_cite": ["sso-okta"]},
    {"question": "Our card was declined and now the workspace is read-only. How do we fix this?",
     "expected": ["billing-failed-payments"], "owner": "billing team"},
    {"question": "We paid for a year ten days ago and changed our minds. Can we get our money back?",
     "expected": ["billing-refunds"]},
    {"question": "How do I stop our paid subscription from renewing at the end of the month?",
     "expected": ["billing-cancel-subscription"]},
    {"question": "The API keeps answering with status 429. How many calls per minute am I allowed to make?",
     "expected": ["api-rate-limits"]},
    {"question": "The tasks endpoint only returns 50 items. How do I fetch the following results?",
     "expected": ["api-pagination"]},
    {"question": "How do I check that an incoming webhook request really came from Orbitly?",
     "expected": ["webhooks-setup"]},
    {"question": "I need a spreadsheet of all the tasks in one project so I can open it in Excel.",
     "expected": ["csv-export"]},
    {"question": "How long do deleted items stay in the trash, and how long are backups kept?",
     "expected": ["data-retention", "workspace-export"]},
    {"question": "Entra ID shows error AADSTS50105 when a colleague tries to log in to Orbitly. What does that mean?",
     "expected": ["sso-azure-ad"], "must_not_cite": ["sso-azure-ad"]},
    {"question": "What articles do you have?", "expect_no_sources": True, "tags": ["listing"]},
    {"question": "Give me a list of all the help categories.", "expect_no_sources": True},
]


def _write(path, lines):
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


@pytest.fixture
def questions(tmp_path):
    return _write(tmp_path / "sso_billing.jsonl", LINES)


def _cli(capsys, *argv):
    code = main([str(a) for a in argv])
    out = capsys.readouterr()
    return code, out.out, out.err


# --- the questions file ---------------------------------------------------------------------------------------

def test_expectations_are_read_per_line_and_unknown_fields_kept(questions):
    ds = read_dataset(questions)
    assert ds.name == "sso_billing" and len(ds.content_hash) == 64 and len(ds.questions) == len(LINES)
    sso, okta, card = ds.questions[:3]
    assert sso.expected == ("sso-saml-setup",) and sso.tags == ("sso",) and sso.line == 1
    assert okta.must_cite == ("sso-okta",) and not okta.expect_no_sources
    assert card.extra == {"owner": "billing team"}
    assert ds.questions[10].must_not_cite == ("sso-azure-ad",)
    assert ds.questions[11].expect_no_sources is True and ds.questions[11].tags == ("listing",)


@pytest.mark.parametrize("bad, message", [
    ({"expected": "sso-okta"}, '"expected" must be a list of document ids'),
    ({"must_cite": [1]}, '"must_cite" must be a list of document ids'),
    ({"must_not_cite": {"a": 1}}, '"must_not_cite" must be a list of document ids'),
    ({"expect_no_sources": "yes"}, '"expect_no_sources" must be true or false'),
    ({"tags": "sso"}, '"tags" must be a list of strings'),
    ({"expect_no_sources": True, "expected": ["sso-okta"]}, '"expect_no_sources" is true but'),
    ({"must_cite": ["sso-okta"], "must_not_cite": ["sso-okta"]}, 'sso-okta is in both "must_cite" and "must_not_cite"'),
])
def test_a_malformed_expectation_is_an_error_naming_the_line(tmp_path, capsys, bad, message):
    path = _write(tmp_path / "bad.jsonl", [{"question": "How do I configure SSO?"}, {"question": "Where is Okta?", **bad}])
    with pytest.raises(CorpusError, match=f"bad.jsonl:2: {message}".replace("(", r"\(").replace("[", r"\[")):
        read_dataset(path)
    db = tmp_path / "t.duckdb"
    code, _, err = _cli(capsys, "eval", path, "--db", db, "--name", "x", "--no-progress")
    assert code == 2 and "bad.jsonl:2:" in err and message in err
    assert not db.exists()  # refused before anything was asked


# --- two named runs, checked against the raw trace tables -------------------------------------------------------

def _independent(db, run_id, lines):
    """Per question and per run, from `turns`, `sources` and `citations` only (not the view, not scoring.py)."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        latest = {}
        for turn_id, question, status in con.execute(
                "SELECT turn_id, question, status FROM turns WHERE run_id = ? ORDER BY started_at, turn_id",
                [run_id]).fetchall():
            latest[question] = (turn_id, status)
        out = []
        for line in lines:
            turn_id, status = latest[line["question"]]
            docs = con.execute("SELECT doc_id, consulted, cited FROM sources WHERE turn_id = ?", [turn_id]).fetchall()
            consulted = {d for d, c, _ in docs if c}
            cited = {d for d, _, c in docs if c}
            rejected = con.execute("SELECT count(DISTINCT target) FROM citations WHERE turn_id = ? AND NOT valid",
                                   [turn_id]).fetchone()[0]
            expected = set(line.get("expected", []))
            passed = (expected <= consulted and not (line.get("expect_no_sources") and consulted)
                      and set(line.get("must_cite", [])) <= cited
                      and not set(line.get("must_not_cite", [])) & (cited | consulted)
                      and rejected == 0 and status == "ok")
            out.append({"question": line["question"], "passed": passed, "consulted": consulted, "rejected": rejected,
                        "precision": len(consulted & expected) / len(consulted) if expected and consulted else None,
                        "recall": len(consulted & expected) / len(expected) if expected else None})
        return out
    finally:
        con.close()


def _mean(values):
    values = [v for v in values if v is not None]
    return sum(values) / len(values)


def test_two_named_runs_give_a_leaderboard_and_diff_equal_to_the_raw_tables(tmp_path, capsys, questions):
    db = empty_trace_db(tmp_path / "t.duckdb")
    code, said, _ = _cli(capsys, "eval", questions, "--db", db, "--name", "clean", "--tag", "branch=main",
                         "--no-progress")
    assert code == 0
    assert _cli(capsys, "eval", questions, "--db", db, "--name", "small-k", "-k", "1", "--fault", "corrupt_id",
                "--no-progress")[0] == 0
    code, out, _ = _cli(capsys, "runs", "compare", "clean", "small-k", "--db", db, "--json")
    assert code == 0
    result = json.loads(out)
    assert [r["name"] for r in result["runs"]] == ["clean", "small-k"]
    mine = {}
    for run in result["runs"]:
        truth = _independent(db, run["run_id"], LINES)
        mine[run["name"]] = {t["question"]: t for t in truth}
        assert run["questions"] == len(LINES)
        if run["name"] == "clean":  # eval itself says how the run did
            assert f"expectations (sso_billing): {sum(t['passed'] for t in truth)} of {len(LINES)} questions " \
                   f"passed; pass rate {run['pass_rate']:.3f}" in said
        assert run["pass_rate"] == pytest.approx(sum(t["passed"] for t in truth) / len(LINES))
        assert run["consulted_precision"] == pytest.approx(_mean(t["precision"] for t in truth))
        assert run["consulted_recall"] == pytest.approx(_mean(t["recall"] for t in truth))
        assert run["rejected"] == pytest.approx(_mean(t["rejected"] for t in truth))
        for figure in ("pass_rate", "consulted_precision", "consulted_recall", "rejected"):
            lo, hi = run["ci"][figure]
            assert lo <= run[figure] <= hi
    # the clean run fails the line whose must_not_cite it consults; the faulty one has rejected citations
    assert 0 < result["runs"][0]["pass_rate"] < 1 and result["runs"][1]["rejected"] > 0
    assert result["runs"][1]["pass_rate"] < result["runs"][0]["pass_rate"]
    changed = {q for q in mine["clean"] if mine["clean"][q]["passed"] != mine["small-k"][q]["passed"]
               or mine["clean"][q]["consulted"] != mine["small-k"][q]["consulted"]}
    assert changed and {d["question"] for d in result["diff"]} == changed
    for d in result["diff"]:
        for name in ("clean", "small-k"):
            assert d["passed"][name] == mine[name][d["question"]]["passed"]
            assert set(d["consulted"][name]) == mine[name][d["question"]]["consulted"]
    # the same rows give the same intervals (a fixed seed)
    again = json.loads(_cli(capsys, "runs", "compare", "clean", "small-k", "--db", db, "--json")[1])
    assert again["runs"][0]["ci"] == result["runs"][0]["ci"]
    # the text form shows both runs and the changed questions
    code, text, _ = _cli(capsys, "runs", "compare", "clean", "small-k", "--db", db)
    assert code == 0 and "small-k" in text and f"questions that changed ({len(changed)})" in text


def test_runs_list_and_show_record_corpus_dataset_and_configuration(tmp_path, capsys, questions):
    db = empty_trace_db(tmp_path / "t.duckdb")
    assert _cli(capsys, "eval", questions, "--db", db, "--name", "base", "--tag", "branch=main", "--tag", "pr=12",
                "--no-progress")[0] == 0
    code, out, _ = _cli(capsys, "runs", "list", "--db", db, "--json")
    (row,) = [json.loads(line) for line in out.splitlines()]
    assert row["name"] == "base" and row["corpus"] == "demo" and len(row["corpus_hash"]) == 64
    assert row["dataset"] == "sso_billing" and row["questions"] == len(LINES)
    assert row["tags"] == {"branch": "main", "pr": "12"}
    assert row["config"]["provider"] == "offline" and row["config"]["k"] == 5
    code, out, _ = _cli(capsys, "runs", "show", "base", "--db", db, "--json")
    shown = json.loads(out)
    assert shown["name"] == "base" and len(shown["question_rows"]) == len(LINES)
    con = duckdb.connect(str(db), read_only=True)
    stored = con.execute("SELECT extra_json, tags FROM expectations ORDER BY line").fetchall()
    con.close()
    assert json.loads(stored[2][0]) == {"owner": "billing team"} and stored[0][1] == ["sso"]
    code, text, _ = _cli(capsys, "runs", "show", "base", "--db", db)
    assert code == 0 and "sso_billing" in text and "branch=main" in text
    # a name is unique: reusing it is a clear error, and nothing is asked
    con = duckdb.connect(str(db), read_only=True)
    turns = con.execute("SELECT count(*) FROM turns").fetchone()
    con.close()
    code, _, err = _cli(capsys, "eval", questions, "--db", db, "--name", "base", "--no-progress")
    assert code == 2 and "'base' is already taken" in err
    con = duckdb.connect(str(db), read_only=True)
    assert con.execute("SELECT count(*) FROM turns").fetchone() == turns
    con.close()
    # a named run stays as it ended: an unnamed eval of the same batch is a new run, not a resume of it
    code, out, _ = _cli(capsys, "eval", questions, "--db", db, "--no-progress")
    assert code == 0 and re.search(r"^resumed +no$", out, re.M)
    assert len(_cli(capsys, "runs", "list", "--db", db, "--json")[1].splitlines()) == 2
    code, _, err = _cli(capsys, "runs", "show", "nope", "--db", db)
    assert code == 2 and "no run named 'nope'" in err and "base" in err


def test_secrets_in_the_configuration_are_never_stored(tmp_path):
    from workbench.trace.experiments import record_experiment
    from workbench.trace.writer import TraceWriter

    db = empty_trace_db(tmp_path / "t.duckdb")
    writer = TraceWriter(db)
    ds = read_dataset(_write(tmp_path / "q.jsonl", LINES[:1]))
    record_experiment(writer, "r1", ds, name="n", config={"provider": "openai",
                                                          "options": {"api_key": "sk-live-123", "timeout": 5}})
    con = duckdb.connect(str(db), read_only=True)
    (config,) = con.execute("SELECT config_json FROM experiments").fetchone()
    con.close()
    assert "sk-live-123" not in config and json.loads(config)["options"] == {"api_key": "[redacted]", "timeout": 5}


# --- the regression gate ---------------------------------------------------------------------------------------

def test_the_gate_fails_a_degraded_run_naming_its_questions_and_passes_a_same_quality_one(tmp_path, capsys,
                                                                                          questions):
    db = empty_trace_db(tmp_path / "t.duckdb")
    assert _cli(capsys, "eval", questions, "--db", db, "--name", "main", "--no-progress")[0] == 0
    code, out, _ = _cli(capsys, "eval", questions, "--db", db, "--name", "same", "--baseline", "main",
                        "--fail-on-regression", "--no-progress")
    assert code == 0 and "no regression against main" in out
    code, out, _ = _cli(capsys, "eval", questions, "--db", db, "--name", "degraded", "--fault", "corrupt_id",
                        "--baseline", "main", "--fail-on-regression", "--no-progress")
    assert code == 1 and "REGRESSION: pass rate" in out
    runs = {r["name"]: r["run_id"] for r in
            (json.loads(line) for line in _cli(capsys, "runs", "list", "--db", db, "--json")[1].splitlines())}
    before = {t["question"]: t for t in _independent(db, runs["main"], LINES)}
    after = _independent(db, runs["degraded"], LINES)
    regressed = [t["question"] for t in after if before[t["question"]]["passed"] and not t["passed"]]
    assert regressed
    listed = out.split("regressed questions")[1]
    assert f"({len(regressed)})" in listed.splitlines()[0]
    for q in regressed:
        assert f"  - {q}  [no rejected citation]" in listed
    # without --fail-on-regression the gate reports and the exit code is the run's own
    code, out, _ = _cli(capsys, "eval", questions, "--db", db, "--name", "degraded-2", "--fault", "corrupt_id",
                        "--baseline", "main", "--no-progress")
    assert code == 0 and "REGRESSION" in out


def test_the_gate_refuses_an_unknown_baseline_before_asking(tmp_path, capsys, questions):
    db = tmp_path / "t.duckdb"
    code, _, err = _cli(capsys, "eval", questions, "--db", db, "--name", "new", "--baseline", "old",
                        "--fail-on-regression", "--no-progress")
    assert code == 2 and "no run named 'old'" in err and not db.exists()
    code, _, err = _cli(capsys, "eval", questions, "--db", db, "--fail-on-regression", "--no-progress")
    assert code == 2 and "needs --baseline" in err


def test_an_empty_expected_without_expect_no_sources_is_named_with_a_warning(tmp_path, capsys):
    qs = tmp_path / "qs.jsonl"
    qs.write_text('{"question": "How do I configure SSO?", "expected": ["sso-saml"]}\n'
                  '{"question": "How do I install Orbitly on Kubernetes?", "expected": []}\n'
                  '{"question": "What articles do you have?", "expected": [], "expect_no_sources": true}\n')
    assert [w.split(": ")[0] for w in read_dataset(qs).warnings] == [f"{qs}:2"]
    code, _, err = _cli(capsys, "eval", qs, "--db", empty_trace_db(tmp_path / "t.duckdb"), "--no-progress")
    assert code == 0
    assert f"{qs}:2: warning:" in err and "asserts nothing" in err and f"{qs}:3" not in err and f"{qs}:1" not in err


def test_the_demo_gold_set_asserts_something_on_every_line():
    from conftest import ROOT

    gold = read_dataset(ROOT / "data" / "demo_gold.jsonl")
    assert gold.warnings == ()
    assert all(q.expected or q.expect_no_sources for q in gold.questions)
