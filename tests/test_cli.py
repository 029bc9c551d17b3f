"""The command line: exit codes, JSON contracts, messages. In-process (tests/clirun.py) but for the
end-to-end tests, which run `python -m workbench` as a user does (the README's command, an exit code)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from clirun import cli
from conftest import ROOT, schema_validator


def run(*args, stdin=None):
    return cli(*args, input=stdin)


def run_process(*args, stdin=None):
    """End to end: a real `python -m workbench` process."""
    return subprocess.run([sys.executable, "-m", "workbench", *args], capture_output=True, text=True,
                          cwd=ROOT, input=stdin, timeout=120)


@pytest.fixture(scope="module")
def validator():
    return schema_validator("payload.schema.json")


def test_ask_prints_answer_sources_row_and_summary():
    """End to end: the README's first command, as a user runs it."""
    r = run_process("ask", "How do I configure SSO?", "--no-trace")
    assert r.returncode == 0, r.stderr
    assert "Sources: Configure SAML single sign-on (SSO)" in r.stdout
    assert "retrieved 5 · cited" in r.stdout and "offline (no LLM)" in r.stdout
    assert r.stderr == ""


def test_ask_questions_file_json_in_input_order(tmp_path, validator):
    qs = ["What articles do you have?", "How do I configure SSO?", "Who won the World Cup in 2010?"]
    f = tmp_path / "q.jsonl"
    f.write_text("\n".join(json.dumps({"question": q}) for q in qs) + "\n")
    r = run("ask", "--questions", str(f), "--json", "--no-trace")
    assert r.returncode == 0, r.stderr
    payloads = [json.loads(line) for line in r.stdout.splitlines()]
    assert [p["question"] for p in payloads] == qs
    for p in payloads:
        validator.validate(p)
    assert payloads[0]["sets"]["consulted"] == [] and payloads[0]["sets"]["cited"]
    assert 1 <= len(payloads[1]["sets"]["consulted"]) <= 2


@pytest.mark.parametrize("args,needle", [
    (["ask", "--provider", "nope", "hi"], "unknown provider 'nope'"),
    (["ask", "--retriever", "nope", "hi"], "unknown retriever 'nope'"),
    (["ask", "--corpus", "/no/such/dir", "hi"], "does not exist"),
    (["ask", "--fault", "nope", "hi"], "option 'faults': 'nope' is not one of"),
    (["ask"], "exactly one of QUESTION or --questions"),
    (["ask", "--questions", "/no/such.jsonl"], "cannot read questions file"),
    (["provenance", "/no/such.json"], "cannot read"),
])
def test_bad_input_exits_2_with_clear_message(args, needle):
    r = run(*args, "--no-trace") if args[0] == "ask" else run(*args)
    assert r.returncode == 2
    assert needle in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize("args,stdin", [
    (["provenance", "-"], "{not json"),  # a WorkbenchError: exit 2 and its message
    (["ask", "--no-trace", "--k", "many", "hi"], None),  # argparse: SystemExit(2) and usage on stderr
    (["--version"], None),  # argparse: SystemExit(0) and the version on stdout
    (["sql", "SELECT 1"], None),  # another command's error path
])
def test_the_in_process_cli_gives_what_a_real_process_gives(args, stdin, tmp_path):
    """tests/clirun.py against `python -m workbench`: the same exit code, stdout and stderr."""
    args = [*args, "--db", str(tmp_path / "none.duckdb")] if args[0] == "sql" else args
    real, here = run_process(*args, stdin=stdin), run(*args, stdin=stdin)
    assert (here.returncode, here.stdout, here.stderr) == (real.returncode, real.stdout, real.stderr)
    assert real.returncode in (0, 2) and (real.stdout or real.stderr)


def test_bad_questions_line_names_the_line(tmp_path):
    f = tmp_path / "q.jsonl"
    f.write_text('{"question": "ok"}\n{"q": "missing"}\n')
    r = run("ask", "--questions", str(f), "--no-trace")
    assert r.returncode == 2 and f"{f}:2:" in r.stderr


def test_provenance_command_reads_stdin_and_files(tmp_path, validator):
    record = {
        "question": "How do I configure SSO?",
        "mode": "agent",
        "tool_calls": [
            {"name": "search", "exposure": "snippet", "args": {"query": "sso"},
             "results": [{"doc_id": "sso-setup", "title": "Configure SSO", "url": "https://h.example/a/sso-setup"},
                         {"doc_id": "scim", "title": "SCIM", "url": "https://h.example/a/scim"}]},
            {"name": "fetch_document", "exposure": "full", "args": {"doc_id": "sso-setup"},
             "results": [{"doc_id": "sso-setup", "title": "Configure SSO", "url": "https://h.example/a/sso-setup"}]},
        ],
        "answer": "Go to Settings ([Configure SSO](https://h.example/a/sso-setup/)); see [x](https://h.example/a/scin).",
    }
    r = run("provenance", "-", stdin=json.dumps(record))
    assert r.returncode == 0, r.stderr
    p = json.loads(r.stdout)
    validator.validate(p)
    assert p["sets"] == {"retrieved": ["sso-setup", "scim"], "cited": ["sso-setup"], "consulted": ["sso-setup"]}
    assert p["rejected_citations"][0]["nearest_doc_id"] == "scim"
    f = tmp_path / "turn.json"
    f.write_text(json.dumps(record))
    assert json.loads(run("provenance", str(f)).stdout)["sets"] == p["sets"]


@pytest.mark.parametrize("stdin,needle", [
    ("{not json", "invalid JSON"),
    ("[1]", "must be a JSON object"),
    ('{"question": "q", "answer": "a", "tool_calls": [{"name": "x", "exposure": "everything", "results": []}]}',
     "not a valid turn record"),
    ('{"question":"q","answer":"a","tool_calls":[],"config":{"temperature":0.2}}',  # issue 42 item 1: at parse time
     "config: a turn's configuration has no key 'temperature'"),
])
def test_provenance_rejects_bad_records(stdin, needle):
    r = run("provenance", "-", stdin=stdin)
    assert r.returncode == 2 and needle in r.stderr and "Traceback" not in r.stderr


def test_every_command_is_documented():
    """Each command has a one-line help, a row in the README's command table (and the table lists no
    command that does not exist), and a worked example in docs/ (`workbench COMMAND …`)."""
    import re

    from workbench.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    helps = {c.dest: c.help for c in sub._choices_actions}
    assert {"ask", "provenance", "retrieve", "judge", "sql", "gaps", "export", "eval", "docs-traces"} <= set(helps)
    assert all(h and h.endswith(".") for h in helps.values()), helps
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    table = readme[readme.index("| command | what it does |"):]
    table = table[:table.index("\n\n")]
    in_table = set(re.findall(r"^\| `([a-z-]+)", table, re.M))
    assert in_table == set(helps), (in_table ^ set(helps))
    docs = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "docs").glob("*.md"))
    undocumented = [c for c in helps if not re.search(rf"workbench {re.escape(c)}\b", docs)]
    assert not undocumented, f"no example in docs/ for: {undocumented}"
