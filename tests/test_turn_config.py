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
