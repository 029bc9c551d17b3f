"""Experiments score and resume each line of a questions file by the turn that answered that line
(docs/experiments.md): two conversations may share a follow-up; a resume goes by what is stored, line by
line, and only with the run's own configuration; eval conversation ids stay within the bound every other
command holds; and the library holds the bounds the CLI checks. The CLI runs in-process (`clirun.cli`)
with the offline provider over the demo corpus, or a corpus written here."""

from __future__ import annotations

import json
import re
import unicodedata

import duckdb
import pytest

from clirun import cli
from conftest import ROOT
from workbench.config import MAX_CONTEXT_TOKENS, MAX_CONTEXT_TURNS, MAX_CONVERSATION_ID_CHARS
from workbench.errors import TraceStoreError, WorkbenchError

OKTA = "And with Okta?"
# Two conversations share their follow-up: each line is its own conversation's turn, with its own expectation.
SHARED = [
    {"question": "How do I configure SSO?", "conversation": "sso", "expected": ["sso-saml-setup"]},
    {"question": OKTA, "conversation": "sso", "expected": ["sso-okta"]},
    {"question": "How do I cancel my subscription?", "conversation": "billing",
     "expected": ["billing-cancel-subscription"]},
    {"question": OKTA, "conversation": "billing", "expected": ["billing-cancel-subscription"]},
    {"question": OKTA, "expected": ["sso-okta"]},
]


def _write(path, lines):
    path.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines), encoding="utf-8")
    return path


def _rows(db, sql, params=()):
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute(sql, list(params)).fetchall()


def _turns_by_line(db, run_id, lines):
    """Independently of the scoring view: each line's turn, found by its conversation and its place in it (the
    n-th line of conversation c is the n-th turn of `RUN_ID/c`, by position) or, on its own, the single turn
    with its question."""
    out, seen = {}, {}
    for i, line in enumerate(lines, start=1):
        c = line.get("conversation")
        if c is None:
            [(tid,)] = _rows(db, "SELECT turn_id FROM turns WHERE run_id = ? AND conversation_id IS NULL AND "
                                 "question = ?", [run_id, line["question"]])
        else:
            nth = seen[c] = seen.get(c, 0) + 1
            tid, = _rows(db, "SELECT turn_id FROM turns WHERE conversation_id = ? ORDER BY position",
                         [f"{run_id}/{c}"])[nth - 1]
        out[i] = tid
    return out


def test_two_conversations_sharing_a_follow_up_are_scored_each_by_its_own_turn(tmp_path):
    """Three lines ask "And with Okta?" (two conversations and on its own): a named run takes the file, and each
    line's row in `expectation_results` is the turn of its own conversation, its figures that turn's."""
    db, f = tmp_path / "t.duckdb", _write(tmp_path / "shared.jsonl", SHARED)
    r = cli("eval", f, "--db", db, "--name", "shared", "--no-progress")
    assert r.returncode in (0, 1), r.stderr
    assert "repeats" not in r.stderr
    [(run_id,)] = _rows(db, "SELECT run_id FROM experiments WHERE name = 'shared'")
    truth = _turns_by_line(db, run_id, SHARED)
    scored = _rows(db, "SELECT line, conversation, turn_id, consulted, passed FROM expectation_results "
                       "WHERE run_id = ? ORDER BY line", [run_id])
    assert [(line, conv) for line, conv, *_ in scored] == [(i, x.get("conversation")) for i, x in
                                                           enumerate(SHARED, start=1)]
    assert {line: tid for line, _, tid, *_ in scored} == truth
    assert len({truth[2], truth[4], truth[5]}) == 3, "three different turns asked the shared follow-up"
    for line, _, tid, consulted, passed in scored:
        own = {d for (d,) in _rows(db, "SELECT doc_id FROM sources WHERE turn_id = ? AND consulted", [tid])}
        assert set(consulted) == own
        assert passed == (set(SHARED[line - 1]["expected"]) <= own and
                          _rows(db, "SELECT status, n_rejected FROM turns WHERE turn_id = ?", [tid])[0] == ("ok", 0))
    # the per-line diff of two runs of the file keys each line by its conversation, never by the text alone
    assert cli("eval", f, "--db", db, "--name", "faulty", "--fault", "corrupt_id", "--no-progress").returncode in (0, 1)
    compared = json.loads(cli("runs", "compare", "shared", "faulty", "--db", db, "--json").stdout)
    keys = [(d["conversation"], d["question"]) for d in compared["diff"]]
    assert len(keys) == len(set(keys))


def test_expected_ids_compare_in_nfc(tmp_path):
    """`café` in the file in its decomposed form (NFD) is the corpus's `café` (ids are NFC): the line passes,
    and the same id typed both ways is one id."""
    from workbench.questions import read_dataset

    nfc, nfd = "caf\u00e9", unicodedata.normalize("NFD", "caf\u00e9")
    assert nfc != nfd
    corpus = _write(tmp_path / "c.jsonl", [
        {"id": nfc, "title": "Café opening hours", "text": "The café opens at 8 am and closes at 6 pm every day."},
        {"id": "parking", "title": "Parking", "text": "Parking is free behind the building after 6 pm."}])
    f = _write(tmp_path / "q.jsonl", [{"question": "When does the café open?", "expected": [nfd, nfc],
                                       "must_not_cite": ["parking"]}])
    assert read_dataset(f).questions[0].expected == (nfc,)
    db = tmp_path / "t.duckdb"
    r = cli("eval", f, "--db", db, "--corpus", corpus, "--name", "nfc", "--no-progress")
    assert r.returncode == 0, r.stderr
    assert "1 of 1 questions passed" in r.stdout, r.stdout
    assert _rows(db, "SELECT expected, consulted, passed FROM expectation_results") == [([nfc], [nfc], True)]


# --- resuming -------------------------------------------------------------------------------------------------

GOLD = ROOT / "data" / "demo_gold.jsonl"


def test_a_resume_with_another_configuration_is_refused_naming_the_difference(tmp_path):
    """Resuming the clean baseline's run with a fault (or --verify) passed the gate by skipping every line: it is
    refused (exit 2, naming the setting) before anything is asked; --new-run asks the faulty run, which the gate
    then fails."""
    db, f = tmp_path / "t.duckdb", GOLD
    lines = len(GOLD.read_text(encoding="utf-8").splitlines())
    assert cli("eval", f, "--db", db, "--name", "main", "--no-progress").returncode == 0
    assert cli("eval", f, "--db", db, "--no-progress").returncode == 0  # a clean run, then resumed
    [(run_id,)] = _rows(db, "SELECT run_id FROM runs WHERE run_id NOT IN (SELECT run_id FROM experiments "
                            "WHERE name = 'main')")
    gate = ("--baseline", "main", "--fail-on-regression", "--no-progress")
    r = cli("eval", f, "--db", db, "--run-id", run_id, "--fault", "corrupt_id", *gate)
    assert r.returncode == 2, r.stdout + r.stderr
    assert re.search(r"options=\{.*\}, not \{'faults': \['corrupt_id'\]\}", r.stderr), r.stderr
    assert "--new-run" in r.stderr
    r = cli("eval", f, "--db", db, "--run-id", run_id, "--verify", "--no-progress")
    assert r.returncode == 2 and "verify=None, not 8" in r.stderr, r.stderr
    assert _rows(db, "SELECT count(*) FROM turns") == [(2 * lines,)], "nothing was asked"
    r = cli("eval", f, "--db", db, "--run-id", run_id, "--fault", "corrupt_id", "--new-run", *gate)
    assert r.returncode == 1 and "REGRESSION" in r.stdout, r.stdout + r.stderr
    assert _rows(db, "SELECT count(DISTINCT run_id), count(*) FROM turns") == [(3, 3 * lines)]
    # the same configuration still resumes (and skips what is stored)
    r = cli("eval", f, "--db", db, "--run-id", run_id, "--no-progress")
    assert r.returncode == 0 and re.search(rf"^skipped \(already answered\) +{lines}$", r.stdout, re.M), r.stdout


def test_a_resume_with_other_context_turns_is_refused(tmp_path):
    db = tmp_path / "t.duckdb"
    f = _write(tmp_path / "conv.jsonl", SHARED[:2])
    assert cli("eval", f, "--db", db, "--no-progress").returncode in (0, 1)
    [(run_id,)] = _rows(db, "SELECT run_id FROM runs")
    r = cli("eval", f, "--db", db, "--run-id", run_id, "--context-turns", "1", "--no-progress")
    assert r.returncode == 2 and re.search(r"context=\{[^}]*'turns': 2[^}]*\}, not \{[^}]*'turns': 1", r.stderr), \
        r.stderr


LINES = [{"question": "How do I configure SSO?", "conversation": "c"},
         {"question": OKTA, "conversation": "c"},
         {"question": "What about Entra ID?", "conversation": "c"},
         {"question": "How do I rotate an API key?"}]


def test_a_turn_that_could_not_be_written_before_one_that_was_is_asked_again_by_line(tmp_path, monkeypatch):
    """Line 1 answers but its write fails; lines 2 and 3 are written. The run counts it as not written, and the
    resume asks line 1 again and the conversation from there (lines 2 and 3 followed a turn the store lacks),
    with the new turns as history: every line ends with a turn of its own question."""
    from workbench.trace.writer import TraceWriter

    db, f = tmp_path / "t.duckdb", _write(tmp_path / "q.jsonl", LINES)
    real = TraceWriter.log_turn
    failed = []

    def log_turn(self, record, payload, **kwargs):
        if record.question == LINES[0]["question"] and not failed:
            failed.append(payload.turn_id)
            raise TraceStoreError("disk full (simulated)")
        return real(self, record, payload, **kwargs)

    monkeypatch.setattr(TraceWriter, "log_turn", log_turn)
    r = cli("eval", f, "--db", db, "--no-progress")
    assert failed and r.returncode == 1, r.stdout + r.stderr
    assert re.search(r"^not written to the trace store +1$", r.stdout, re.M), r.stdout
    assert [q for (q,) in _rows(db, "SELECT question FROM turns ORDER BY rowid")] == [x["question"] for x in LINES[1:]]

    r = cli("eval", f, "--db", db, "--no-progress")
    assert r.returncode == 0, r.stdout + r.stderr
    assert re.search(r"^skipped \(already answered\) +1$", r.stdout, re.M), r.stdout  # only the single question
    [(run_id,)] = _rows(db, "SELECT run_id FROM runs")
    latest = dict(_rows(db, "SELECT l.line, arg_max(l.turn_id, t.rowid) FROM turn_lines l JOIN turns t "
                            "USING (turn_id) GROUP BY l.line"))
    assert sorted(latest) == [1, 2, 3, 4]
    for line, tid in latest.items():
        assert _rows(db, "SELECT question, status FROM turns WHERE turn_id = ?", [tid]) == \
            [(LINES[line - 1]["question"], "ok")]
    history = [t for (t,) in _rows(db, "SELECT earlier_turn_id FROM turn_context WHERE turn_id = ? "
                                       "ORDER BY earlier_position", [latest[3]])]
    assert history == [latest[1], latest[2]], "line 3 was asked after the new turns of lines 1 and 2"
    assert not _rows(db, "SELECT 1 FROM turn_context WHERE turn_id = ?", [latest[1]])


# --- eval conversation ids ------------------------------------------------------------------------------------

def test_eval_conversation_ids_stay_within_the_bound_and_can_be_followed_up(tmp_path):
    """A conversation id of the longest length a file may give: stored within the bound (not `RUN_ID/ID`, 233
    characters), distinct from another with the same beginning, and `ask --conversation` goes on with it."""
    long_a, long_b = "a" * MAX_CONVERSATION_ID_CHARS, "a" * (MAX_CONVERSATION_ID_CHARS - 1) + "b"
    db = tmp_path / "t.duckdb"
    f = _write(tmp_path / "q.jsonl", [{"question": "How do I configure SSO?", "conversation": long_a},
                                      {"question": OKTA, "conversation": long_a},
                                      {"question": "How do I rotate an API key?", "conversation": long_b}])
    assert cli("eval", f, "--db", db, "--no-progress").returncode == 0
    [(run_id,)] = _rows(db, "SELECT run_id FROM runs")
    [(sid,)] = _rows(db, "SELECT conversation_id FROM turns WHERE question = ?", [OKTA])
    r = cli("ask", "What about Entra ID?", "--conversation", sid, "--db", db, "--json")
    assert r.returncode == 0, r.stderr
    payload = json.loads(r.stdout)
    assert (payload["conversation_id"], payload["position"]) == (sid, 3)
    ids = [c for (c,) in _rows(db, "SELECT DISTINCT conversation_id FROM turns ORDER BY 1")]
    assert len(ids) == 2 and all(len(c) <= MAX_CONVERSATION_ID_CHARS and c.startswith(f"{run_id}/") for c in ids)
    from workbench.batch import stored_conversation_id

    assert set(ids) == {stored_conversation_id(run_id, long_a), stored_conversation_id(run_id, long_b)}
    assert sid == stored_conversation_id(run_id, long_a)
    assert stored_conversation_id(run_id, "short") == f"{run_id}/short"


# --- the library's edge holds the bounds the CLI and the app check ---------------------------------------------

@pytest.mark.parametrize("kwargs", [{"turns": MAX_CONTEXT_TURNS + 1}, {"turns": -1}, {"turns": True},
                                    {"turns": 2.5}, {"token_budget": 0}, {"token_budget": MAX_CONTEXT_TOKENS + 1},
                                    {"token_budget": "1000"}])
def test_a_context_policy_out_of_bounds_is_refused(kwargs):
    from workbench.types import ContextPolicy

    with pytest.raises(WorkbenchError, match="from"):
        ContextPolicy(**kwargs)


@pytest.mark.parametrize("kwargs, message", [
    ({"conversation_id": "x" * (MAX_CONVERSATION_ID_CHARS + 1)}, "at most 200 characters"),
    ({"conversation_id": "a\nb"}, "control characters"),
    ({"conversation_id": ""}, "non-empty"),
    ({"conversation_id": "c", "position": 0}, "from 1"),
    ({"conversation_id": "c", "context": {"turns": 99}}, "ContextPolicy"),
])
def test_session_ask_refuses_what_the_cli_refuses_before_the_turn_runs(tmp_path, kwargs, message):
    from workbench.session import Session

    db = tmp_path / "t.duckdb"
    session = Session.open(trace_db=db)
    with pytest.raises(WorkbenchError, match=message):
        session.ask("How do I configure SSO?", **kwargs)
    assert not db.exists(), "nothing ran, nothing was written"


def test_a_run_from_before_turn_lines_still_resumes_as_it_did(tmp_path):
    """A run written before m021 has no `turn_lines` and no recorded configuration: its resume matches the
    stored turns as then (a conversation's ok turns skip its first lines, a single question its own), and its
    lines are scored by question text, as they were."""
    db, f = tmp_path / "t.duckdb", _write(tmp_path / "q.jsonl", LINES)
    assert cli("eval", f, "--db", db, "--no-progress").returncode == 0
    with duckdb.connect(str(db)) as con:  # the run as an older version left it, one line short
        con.execute("DELETE FROM turn_lines")
        con.execute("UPDATE runs SET eval_settings_json = NULL")
        con.execute("DELETE FROM turns WHERE question = ?", [LINES[2]["question"]])
    r = cli("eval", f, "--db", db, "--no-progress")
    assert r.returncode == 0, r.stdout + r.stderr
    assert re.search(r"^skipped \(already answered\) +3$", r.stdout, re.M), r.stdout
    assert [q for (q,) in _rows(db, "SELECT question FROM turns ORDER BY rowid")][-1] == LINES[2]["question"]
    assert _rows(db, "SELECT count(*) FILTER (WHERE answered) FROM expectation_results") == [(len(LINES),)]


def test_the_batch_is_small_functions_with_one_job_each():
    """`run_eval` was 186 lines with 17 parameters: no function of batch.py is over 80 lines, and `run_eval`
    takes a frozen `EvalSpec` (its fields as keywords) instead of one parameter per setting."""
    import ast
    import dataclasses
    import inspect

    from workbench import batch

    tree = ast.parse(inspect.getsource(batch))
    long = [(n.name, n.end_lineno - n.lineno + 1) for n in ast.walk(tree)
            if isinstance(n, ast.FunctionDef) and n.end_lineno - n.lineno + 1 > 80]
    assert not long
    params = inspect.signature(batch.run_eval).parameters
    assert len(params) <= 5 and dataclasses.fields(batch.EvalSpec)
    with pytest.raises(dataclasses.FrozenInstanceError):
        batch.EvalSpec().k = 3  # type: ignore[misc]
    with pytest.raises(WorkbenchError, match="unexpected keyword"):
        batch.run_eval(None, ["q"], colour="red")
