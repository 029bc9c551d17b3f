"""`ask --verify`, `eval --verify` and the verification in the payload contract (docs/design.md §2, §9).

The CLI runs in-process (tests/clirun.py), but for the plugin provider's test, which runs as a user runs it
(a real subprocess: a plugin module, once imported, stays registered for the process); the payload's `verification` is optional, and clients
that ignore it, or servers that never send it, keep working — tested both ways, as for `consulted`.
"""

from __future__ import annotations

import copy
import json
import os

import jsonschema
import pytest

from conftest import ROOT, schema_validator
from bounded import workbench
from workbench.payload import Payload
from clirun import cli
from workbench.render.sources import link_table, source_chips, sources_row, verdicts, verification_lines


def run(*args, env=None):
    return workbench(*args, env=env) if env else cli(*args)


@pytest.fixture(scope="module")
def validator():
    return schema_validator("payload.schema.json")


@pytest.fixture(scope="module")
def verified(validator):
    """One verified and one unverified payload of the same question, from the real CLI."""
    r = run("ask", "How do I configure SSO?", "--verify", "--json", "--no-trace")
    assert r.returncode == 0, r.stderr
    plain = run("ask", "How do I configure SSO?", "--json", "--no-trace")
    return json.loads(r.stdout), json.loads(plain.stdout)


def test_ask_verify_json_prints_a_verification_that_validates(verified, validator):
    payload, _ = verified
    validator.validate(payload)
    v = payload["verification"]
    assert v["method"] == "ablation-v1" and v["control_stable"] is True and v["extra_calls"] > 0
    assert v["verdicts"]["sso-saml-setup"] == "load_bearing" and v["verdicts"]["sso-azure-ad"] == "decorative"
    assert set(v["details"]) == set(v["verdicts"]) and v["skipped"] == [] and v["failed"] == []


def test_human_ask_shows_the_verdicts_next_to_the_sources():
    r = run("ask", "How do I configure SSO?", "--verify", "--no-trace")
    assert r.returncode == 0, r.stderr
    sources = next(line for line in r.stdout.splitlines() if line.startswith("Sources: "))
    assert "sso-saml-setup> (load-bearing)" in sources and "sso-azure-ad> (decorative)" in sources
    assert "Verified by ablation-v1 (control stable; 6 re-runs, " in r.stdout
    assert "  no effect: Set up SSO with Okta · " in r.stdout


def test_a_plugin_provider_is_verified_like_a_built_in(validator):
    """The scripted providers load as a WORKBENCH_PLUGINS module, the way any plug-in does."""
    r = run("ask", "How do I configure SSO?", "--provider", "scripted-copier", "--verify", "--verify-budget", "4",
            "--json", "--no-trace",
            env={"WORKBENCH_PLUGINS": "scripted", "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")])})
    assert r.returncode == 0, r.stderr
    payload = json.loads(r.stdout)
    validator.validate(payload)
    assert payload["verification"]["verdicts"]["sso-okta"] == "hidden_influence"
    assert payload["verification"]["extra_turns"] == 4 and len(payload["verification"]["skipped"]) == 1


def test_eval_verify_summarises_the_verdicts(tmp_path):
    questions = tmp_path / "q.jsonl"
    asked = ["How do I configure SSO?", "How do I reset my password?", "What articles do you have?"]
    questions.write_text("\n".join(json.dumps({"question": q}) for q in asked))
    db = tmp_path / "t.duckdb"
    r = run("eval", str(questions), "--verify", "--db", str(db), "--no-progress")
    assert r.returncode == 0, r.stderr
    rows = dict(line.split("  ", 1) for line in r.stdout.splitlines() if "  " in line)
    assert rows["verified turns (control stable)"].strip() == "3 (3)"
    assert int(rows["verdict: load-bearing"]) >= 2 and int(rows["extra model calls for verification"]) > 0
    q = run("sql", "SELECT count(DISTINCT turn_id) FROM ablations", "--json", "--db", str(db))
    assert json.loads(q.stdout.splitlines()[0]) == {"count(DISTINCT turn_id)": 3}


def test_a_budget_below_one_is_an_error_not_a_traceback():
    r = run("ask", "How do I configure SSO?", "--verify", "--verify-budget", "0", "--no-trace")
    assert r.returncode == 2 and "must be at least 1" in r.stderr and "Traceback" not in r.stderr


# --- compatibility, both ways (docs/design.md §2) ---------------------------------------------------


def test_old_client_ignoring_verification_sees_exactly_the_unverified_payload(verified):
    payload, plain = verified
    assert set(payload) - set(plain) == {"verification"}  # purely additive
    assert payload["sources"] == plain["sources"] and payload["sets"] == plain["sets"]
    read, read_plain = Payload.from_json(payload), Payload.from_json(plain)  # what a client does with the JSON
    assert [s.doc_id for s in source_chips(read)] == [s.doc_id for s in source_chips(read_plain)]
    assert link_table(read) == link_table(read_plain)  # every inline link still resolves
    assert all(s.consulted is not False for s in source_chips(read))


def test_new_client_with_an_old_server_treats_the_turn_as_unverified(verified):
    _, data = verified
    assert "verification" not in data
    plain = Payload.from_json(data)  # what a client does with the JSON
    assert verdicts(plain) == {} and verification_lines(plain) == []
    assert "(load-bearing)" not in sources_row(plain) and sources_row(plain).startswith("Sources: Configure SAML")
    broken = Payload.from_json({**data, "verification": "garbage from a buggy server"})
    assert broken.verification is None and verdicts(broken) == {} and verification_lines(broken) == []


def test_the_schema_checks_the_verdicts_and_allows_no_verification(verified, validator):
    payload, plain = verified
    validator.validate(plain)
    wrong = copy.deepcopy(payload)
    wrong["verification"]["verdicts"]["sso-okta"] = "probably_fine"
    with pytest.raises(jsonschema.ValidationError):
        validator.validate(wrong)
    missing = copy.deepcopy(payload)
    del missing["verification"]["control_stable"]
    with pytest.raises(jsonschema.ValidationError):
        validator.validate(missing)
