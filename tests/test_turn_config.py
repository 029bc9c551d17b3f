"""One typed configuration of a turn (issue 42 item 1): `types.TurnConfig` is `TurnRecord.config` and the payload's
`config`, frozen, refusing a key it does not know when a record is built or parsed (llm's `Options(extra="forbid")`),
not later when the payload is built; `Session.ask` takes one ask specification, which `eval` and the app wrap."""

from __future__ import annotations

import dataclasses

import pytest

from workbench.errors import TurnConfigError, TurnRecordError, WorkbenchError
from workbench.payload import Payload
from workbench.types import TurnConfig, TurnRecord, turn_record_from_dict


def test_the_record_and_the_payload_hold_one_type():
    record = TurnRecord("q", "a", config={"provider": "offline", "k": 3, "tool_protocol": None})
    assert isinstance(record.config, TurnConfig)
    assert Payload.__dataclass_fields__["config"].type in ("TurnConfig", TurnConfig)
    assert dict(record.config) == {"provider": "offline", "k": 3, "tool_protocol": None}, "keys as given, nulls kept"
    assert record.config["k"] == 3 and record.config.get("model") is None and "model" not in record.config
    assert record.to_dict()["config"] == {"provider": "offline", "k": 3, "tool_protocol": None}
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.config.k = 4  # type: ignore[misc]


def test_an_unknown_key_is_refused_when_the_record_is_built_or_parsed():
    with pytest.raises(TurnConfigError, match="no key 'temperature'"):
        TurnRecord("q", "a", config={"temperature": 0.2})
    with pytest.raises(TurnRecordError, match="config: a turn's configuration has no key 'temperature'"):
        turn_record_from_dict({"question": "q", "answer": "a", "tool_calls": [], "config": {"temperature": 0.2}})
    assert issubclass(TurnConfigError, WorkbenchError), "the CLI exits 2 on it"


def test_one_ask_specification_that_keywords_eval_and_the_app_give(demo_session):
    from workbench.batch import EvalSpec
    from workbench.session import AskSpec
    from workbench.ui.records import RunConfig

    question = "How do I configure SSO?"
    spec = AskSpec(mode="excerpts", k=3, judge=None, options={"faults": ["corrupt_id"]})
    by_spec = demo_session.ask(question, spec, log=False).payload.to_json()
    by_keywords = demo_session.ask(question, mode="excerpts", k=3, judge=None, faults=["corrupt_id"],
                                   log=False).payload.to_json()
    assert {**by_spec, "turn_id": None} == {**by_keywords, "turn_id": None}
    assert AskSpec.given(spec, k=4, seed=1) == AskSpec(mode="excerpts", k=4, judge=None,
                                                       options={"faults": ["corrupt_id"], "seed": 1})
    assert issubclass(EvalSpec, AskSpec) and not set(EvalSpec.__annotations__) & set(AskSpec.__annotations__), \
        "an eval's spec extends the ask specification, it does not restate it"
    assert EvalSpec(k=2, concurrency=3).asked() == AskSpec(k=2)
    assert RunConfig(mode="excerpts", tool_protocol="native", options=(("faults", ("corrupt_id",)),)).asked() == \
        AskSpec(mode="excerpts", options={"faults": ["corrupt_id"]})
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.k = 5  # type: ignore[misc]
