"""The typed sources payload (`workbench.payload`): `to_json()` is exactly the JSON every client has always
received, `from_json()` reads it back (and an older server's payload), and the schema is checked at the edge."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings

from test_provenance import turns
from test_provenance_conversation import GOLDEN, conversations, excerpt_conversation
from workbench.payload import Payload, Source, validate_json
from workbench.provenance import build_payload, sources_payload
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
    data = build_payload(record)
    assert text(Payload.from_json(data).to_json()) == text(data)
    assert Payload.from_json(data) == sources_payload(record)
    validate_json(data)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conversations())
def test_conversation_turns_round_trip(record):
    data = build_payload(record)
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
    data = build_payload(excerpt_conversation("full"))
    data["rejected_citations"][0]["reason"] = "made_up"
    with pytest.raises(ValueError, match="rejected_citations.0.reason"):
        validate_json(data)
