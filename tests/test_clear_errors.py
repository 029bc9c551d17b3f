"""Clear errors instead of tracebacks (issue 17, item 9): every bad input is `error: …` and exit 2."""

from __future__ import annotations

import json

import pytest

from clirun import cli as run_cli
from workbench.session import Session


def cli(*args, stdin: str | None = None):
    return run_cli(*args, input=stdin)


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


# --- integers beyond Python's 4,300-digit limit, in every JSON input ----------------------------

BIG = "1" * 5000


def _jsonl(path, line: str):
    path.write_text(line + "\n")
    return str(path)


@pytest.mark.parametrize("where", ["corpus", "questions", "eval", "judge", "retrieve", "provenance"])
def test_a_huge_integer_in_any_json_input_is_a_clear_error(tmp_path, where):
    """Before the fix `json.loads` raised ValueError('Exceeds the limit (4300 digits)…') as a traceback."""
    if where == "corpus":
        r = cli("ask", "q", "--no-trace", "--corpus", _jsonl(tmp_path / "c.jsonl", f'{{"id": {BIG}, "text": "x"}}'))
    elif where == "questions":
        r = cli("ask", "--no-trace", "--questions", _jsonl(tmp_path / "q.jsonl", f'{{"question": "q", "n": {BIG}}}'))
    elif where == "eval":
        r = cli("eval", _jsonl(tmp_path / "q.jsonl", f'{{"question": "q", "n": {BIG}}}'), "--db", str(tmp_path / "t.duckdb"))
    elif where == "judge":
        r = cli("judge", _jsonl(tmp_path / "j.jsonl", f'{{"id": {BIG}, "claim": "a", "evidence": ["a"]}}'))
    elif where == "retrieve":
        r = cli("retrieve", "--queries", _jsonl(tmp_path / "q.jsonl", f'{{"id": {BIG}, "question": "q"}}'))
    else:
        r = cli("provenance", "-", stdin=f'{{"question": "q", "answer": "a", "tool_calls": [], "x": {BIG}}}')
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert r.stderr.startswith("error:") and "4,300 digits" in r.stderr
    if where != "provenance":
        assert ":1:" in r.stderr, "the file and line are named"


def test_a_judge_model_reply_with_a_huge_integer_is_not_a_crash():
    from workbench.faithfulness.judges import parse_verdict

    score, verdict, _, reason = parse_verdict(f'{{"verdict": "supported", "score": {BIG}}}')
    # The reply's JSON cannot be read (an integer past Python's 4,300-digit limit), so the verdict word
    # the model wrote is taken, with that verdict's own score: never the absurd number, never a crash.
    assert (score, verdict) == (1.0, "supported") and "keywords" in reason


# --- judge --method llm fails with the reason -------------------------------------------------------


def test_judge_llm_with_an_unknown_provider_fails_with_the_reason(tmp_path):
    """Before the fix it exited 0 with every verdict "unknown"."""
    f = _jsonl(tmp_path / "j.jsonl", '{"id": 1, "claim": "a b", "evidence": ["a b"]}')
    r = cli("judge", f, "--method", "llm", "--provider", "no-such-provider")
    assert r.returncode == 2 and "unknown provider 'no-such-provider'" in r.stderr and "Traceback" not in r.stderr
    assert r.stdout == ""


def test_judge_llm_with_an_unreachable_provider_fails_with_the_reason(tmp_path):
    from loopback import refused_url

    f = _jsonl(tmp_path / "j.jsonl", '{"id": 1, "claim": "a b", "evidence": ["a b"]}')
    r = run_cli("judge", f, "--method", "llm", "--provider", "ollama", env={"OLLAMA_HOST": refused_url()})
    assert r.returncode == 2 and "cannot connect to Ollama" in r.stderr and "Traceback" not in r.stderr
    assert r.stdout == ""


def test_llm_judge_in_a_turn_still_records_unknown_instead_of_failing_the_turn():
    from workbench.faithfulness import get_judge

    j = get_judge("llm", provider="ollama", host="http://127.0.0.1:9", retries=0, timeout=1)
    out = j.judge("a claim", ["some evidence"])
    assert out.verdict == "unknown" and "cannot connect" in out.reason


# --- provenance validates its input against the turn-record schema ---------------------------------


def _record(excerpts, answer="See [1] and [0].", extra=None):
    rec = {"question": "q", "mode": "excerpts", "answer": answer, "tool_calls": [], "excerpts": excerpts}
    return json.dumps({**rec, **(extra or {})})


EX = {"n": 1, "doc_id": "a", "text": "alpha"}


@pytest.mark.parametrize("bad,needle", [
    ([{**EX, "n": 0}], "excerpts.0.n"), ([{**EX, "n": -1}], "excerpts.0.n"), ([{**EX, "n": True}], "excerpts.0.n"),
    ([{**EX, "n": "1"}], "excerpts.0.n"), ([{**EX, "n": 2.0}], "excerpts.0.n"),
    ([EX, {**EX, "doc_id": "b"}], "duplicate excerpt number 1"),
    ([{**EX, "chunk_type": "weird"}], "excerpts.0.chunk_type"),
])
def test_provenance_rejects_records_the_schema_rejects(bad, needle):
    """Before the fix these were accepted and `[0]` became a valid citation."""
    r = cli("provenance", "-", stdin=_record(bad))
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert "not a valid turn record" in r.stderr and needle in r.stderr


def test_provenance_rejects_unknown_result_kinds_and_exposures():
    call = {"name": "search", "exposure": "snippet", "results": [{"doc_id": "a", "kind": "weird"}]}
    r = cli("provenance", "-", stdin=json.dumps({"question": "q", "answer": "a", "tool_calls": [call]}))
    assert r.returncode == 2 and "tool_calls.0.results.0.kind" in r.stderr


def test_the_provenance_core_never_validates_an_excerpt_number_outside_1_to_k():
    from workbench.provenance import sources_payload
    from workbench.types import Excerpt, TurnRecord

    rec = TurnRecord("q", "Zero [0], one [1], two [2], minus [3].", mode="excerpts",
                     excerpts=(Excerpt(0, "z", text="z"), Excerpt(1, "a", text="a"), Excerpt(1, "b", text="b")))
    by_target = {c.target: c for c in sources_payload(rec).citations}
    assert not by_target["[0]"].valid and by_target["[0]"].reason == "out_of_range"
    assert not by_target["[1]"].valid, "an ambiguous number (two excerpts [1]) names no excerpt"
    assert not by_target["[3]"].valid
    # a number that names no single excerpt carries no excerpt's details either (it showed [0]'s and the
    # first [1]'s snippet and title beside "out_of_range")
    assert by_target["[0]"].excerpt is None and by_target["[1]"].excerpt is None
