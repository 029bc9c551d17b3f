"""The typed sources payload (`workbench.payload`): `to_json()` is exactly the JSON every client has always
received, `from_json()` reads it back (and an older server's payload), and the schema is checked at the edge."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings

from conftest import schema_validator
from test_provenance import turns
from test_provenance_conversation import GOLDEN, conversations, excerpt_conversation
from workbench.errors import PayloadError
from workbench.payload import Payload, Source, validate_json
from workbench.provenance import sources_payload
from workbench.types import turn_record_from_dict


def text(data) -> str:
    return json.dumps(data, ensure_ascii=False)


def test_golden_payloads_round_trip_byte_for_byte():
    for case in json.loads(GOLDEN.read_text(encoding="utf-8")):
        assert text(Payload.from_json(json.loads(case["payload"])).to_json()) == case["payload"]
        assert text(sources_payload(turn_record_from_dict(case["record"])).to_json()) == case["payload"]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(turns())
def test_single_turns_round_trip(record):
    data = sources_payload(record).to_json()
    assert text(Payload.from_json(data).to_json()) == text(data)
    assert Payload.from_json(data) == sources_payload(record)
    validate_json(data)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conversations())
def test_conversation_turns_round_trip(record):
    data = sources_payload(record).to_json()
    assert text(Payload.from_json(data).to_json()) == text(data)
    validate_json(data)


def test_attributes_read_what_the_json_says():
    p = sources_payload(excerpt_conversation("answer"))
    assert p.sets.cited == ("d", "e") and p.position == 3 and p.conversation_id == "c-1"
    [rej] = [r for r in p.rejected_citations if r.target == "[2]"]
    assert (rej.reason, rej.turn_id, rej.position) == ("not_in_context", "t-1", 1)
    d = next(x for x in p.documents if x.doc_id == "d")
    assert (d.carried_from, d.carried_position, d.exposure) == ("t-2", 2, "snippet")


def test_an_old_servers_payload_reads_with_its_flags_absent():
    old = {"schema_version": 1, "answer": "x", "sets": {"retrieved": ["a"], "cited": ["a"], "consulted": []},
           "rejected_citations": [], "sources": [{"doc_id": "a", "cited": True, "title": "A", "url": None}]}
    p = Payload.from_json(old)
    assert p.sources == (Source("a", True, "A"),) and p.sources[0].consulted is None
    assert "consulted" not in p.to_json()["sources"][0] and "verification" not in p.to_json()
    validate_json(p.to_json())


def test_the_edge_rejects_a_payload_that_breaks_the_schema():
    data = sources_payload(excerpt_conversation("full")).to_json()
    data["rejected_citations"][0]["reason"] = "made_up"
    with pytest.raises(PayloadError, match="rejected_citations.0.reason"):
        validate_json(data)


@pytest.mark.parametrize("data, says", [
    ({}, "the key 'answer' is missing"), ({"answer": "a", "sources": [{}]}, "the key 'doc_id' is missing"),
    ({"answer": "a", "sources": 5}, "not of the kind"), ({"answer": "a", "sets": [1]}, "not of the kind"),
    ([], "not of the kind"), ({"answer": "a", "audit": {}}, "the key 'source' is missing"),
    ({"answer": "a", "config": {"temperature": 1}}, "no key 'temperature'")])
def test_data_that_is_no_payload_is_a_payload_error_saying_what_is_wrong(data, says):
    """Issue 42 item 7: no bare KeyError, TypeError or AttributeError escapes `Payload.from_json`."""
    with pytest.raises(PayloadError, match=says):
        Payload.from_json(data)


# --- typed end to end: the library hands out a Payload, JSON only where it leaves the program -------------


def test_an_answer_carries_the_typed_payload_and_ask_json_prints_exactly_its_json(capsys):
    from workbench.cli import main
    from workbench.session import Session

    session = Session.open(trace=False)
    answer = session.ask("How do I configure SSO?")
    assert isinstance(answer.payload, Payload) and answer.payload.sets.consulted
    verified = session.verify(answer, budget=2)
    assert isinstance(verified.payload, Payload)
    assert verified.payload.verification == verified.verification.to_payload()
    assert answer.payload.verification is None, "the answer verified is a new one; the first stays as it was"
    assert main(["ask", "How do I configure SSO?", "--json", "--no-trace"]) == 0
    out = capsys.readouterr().out.rstrip("\n")
    printed = Payload.from_json(json.loads(out))
    assert text(printed.to_json()) == out  # the CLI prints `to_json()`, byte for byte
    assert (printed.answer, printed.sets, printed.sources, printed.citations, printed.documents) == (
        answer.payload.answer, answer.payload.sets, answer.payload.sources, answer.payload.citations,
        answer.payload.documents)


def test_ask_json_checks_the_payload_against_the_schema_before_printing(monkeypatch, capsys):
    from dataclasses import replace

    from workbench import session as session_module
    from workbench.cli import main

    made = session_module.sources_payload
    monkeypatch.setattr(session_module, "sources_payload", lambda record: replace(made(record), schema_version=2))
    assert main(["ask", "How do I configure SSO?", "--json", "--no-trace"]) == 2, "the project's error, no traceback"
    out, err = capsys.readouterr()
    assert out == "", "nothing invalid leaves the program"
    assert "not a valid sources payload: schema_version" in err


# --- the config and the verification are typed records (issue 32, item 4), their JSON unchanged -----------

#: The keys of a verification's JSON, in the order clients have always received them (docs/design.md §9).
VERIFICATION_KEYS = ["method", "control_stable", "extra_calls", "verdicts", "extra_turns", "budget",
                     "similarity_threshold", "judge", "judge_version", "sampling", "tokens_in", "tokens_out",
                     "latency_ms", "control", "details", "skipped", "failed"]
RERUN_KEYS = ["status", "similarity", "claims_lost", "claims_total", "extra_calls", "reason"]


def test_a_verified_payload_reads_by_attribute_and_writes_the_same_json():
    from workbench.payload import RerunSummary, TurnConfig, VerificationSummary
    from workbench.session import Session

    verified = Session.open(trace=False).ask("How do I configure SSO?", verify=True, verify_budget=3)
    v, cfg = verified.payload.verification, verified.payload.config
    assert isinstance(v, VerificationSummary) and isinstance(v.control, RerunSummary) and isinstance(cfg, TurnConfig)
    assert v.verdicts == verified.verification.verdicts and v.extra_calls == verified.verification.extra_calls
    assert (cfg.provider, cfg.k, cfg.mode, cfg.retriever) == ("offline", 5, "agent", "bm25")
    data = verified.payload.to_json()
    schema_validator("payload.schema.json").validate(data)
    assert list(data["verification"]) == VERIFICATION_KEYS
    assert list(data["verification"]["control"]) == RERUN_KEYS
    assert all(list(d) == ["cited", "consulted", "verdict", *RERUN_KEYS] for d in data["verification"]["details"].values())
    assert list(data["config"]) == list(verified.record.config), "the config's keys in the order the turn gave them"
    assert text(Payload.from_json(json.loads(text(data))).to_json()) == text(data)


def test_the_config_keeps_the_keys_it_was_given_and_refuses_others():
    from workbench.payload import TurnConfig

    given = {"k": 0, "provider": "offline", "tool_protocol": None}  # a null key stays, the order given stays
    assert TurnConfig.from_json(given).to_json() == given and list(TurnConfig.from_json(given).to_json()) == list(given)
    assert TurnConfig(provider="x", model=None).to_json() == {"provider": "x"}, "built in code: the keys it set"
    with pytest.raises(PayloadError, match="'colour'"):
        TurnConfig.from_json({"provider": "offline", "colour": "blue"})
