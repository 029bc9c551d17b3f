"""A turn record without an id is named by a versioned digest of content fields `workbench/turn_ids.py` names, not
by `repr` (issue 42 item 5): the ids derived before (pinned here as computed on main, and in the golden payloads)
stay what they were, and a field added to a record changes none of them."""

from __future__ import annotations

import json
from dataclasses import dataclass, fields, replace
from pathlib import Path

import pytest

from test_provenance_conversation import excerpt_conversation
from workbench.provenance import turn_id_of
from workbench.turn_ids import RECORD_FIELDS, TURN_ID_VERSION, content_id
from workbench.types import Cut, ModelCall, ResultItem, ToolCall, TurnRecord, turn_record_from_dict

PINNED = Path(__file__).parent / "data" / "turn_ids.json"


def test_ids_derived_on_main_are_unchanged():
    cases = json.loads(PINNED.read_text(encoding="utf-8"))
    assert len(cases) == 52
    for case in cases:
        assert turn_id_of(turn_record_from_dict(case["record"])) == case["turn_id"]


@pytest.mark.parametrize("states, turn_id", [(("answer", "full"), "t-9c4835fcde617486"),
                                             (("full", "dropped"), "t-cf6c70a8b1f013af"),
                                             (("dropped", "answer"), "t-98018887fe5f39ce")])
def test_a_conversation_turn_keeps_its_id(states, turn_id):
    assert turn_id_of(replace(excerpt_conversation(*states), turn_id=None)) == turn_id


def _record(**changes) -> TurnRecord:
    call = ToolCall("search", "snippet", {"query": "q"}, (ResultItem("d", "D", score=1.5, rank=1),), latency_ms=2.0,
                    call_id="c1", cut=Cut("page", 1, 2, 10, 0, 5, 100))
    return replace(TurnRecord(question="q", answer="a [x](doc:d)", tool_calls=(call,),
                              model_calls=(ModelCall("offline", "m", 1.0, 3, 4, "stop", n_tool_calls=1),),
                              config={"provider": "offline", "k": 5}, user_id="u", owner="o"), **changes)


def test_a_record_built_in_code_keeps_its_id_and_who_asked_is_no_content():
    assert turn_id_of(_record()) == "t-24b59df14dc57cb2"
    assert turn_id_of(_record(user_id=None, owner="someone else")) == "t-24b59df14dc57cb2"
    assert turn_id_of(_record(answer="another")) != "t-24b59df14dc57cb2"
    assert turn_id_of(_record(turn_id="given")) == "given"


def test_a_new_field_changes_no_id():
    """A record type grown by a field (here a subclass) is named as before: only the named fields count."""

    @dataclass(frozen=True)
    class Grown(TurnRecord):
        later: str = "a field added after version 1"

    base = _record()
    grown = Grown(**{f.name: getattr(base, f.name) for f in fields(TurnRecord)})
    assert content_id(grown) == content_id(base) and TURN_ID_VERSION == 1
    assert "later" not in RECORD_FIELDS
