"""A turn with what was computed from it: the value the session returns and the trace store gives back."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .corpus import Topic
from .faithfulness import TurnFaithfulness
from .payload import Payload
from .types import TurnRecord
from .verify import Verification


@dataclass(frozen=True)
class Answer:
    """One turn as the library returns it (`Session.ask`) and as the trace store gives it back
    (`trace.conversation_reader.read_conversation`, `read_turn`): it wraps the record, it does not copy it, with
    what was computed from it — as llm's `Response` wraps its `Prompt`."""

    record: TurnRecord
    #: The sources payload (docs/design.md §2); `payload.to_json()` is its JSON at the edges (CLI, HTTP, store).
    payload: Payload
    #: Claim-level verdicts of the judge it was asked with, None when not judged.
    faithfulness: TurnFaithfulness | None = None
    #: Why the turn could not be written to the trace store (the answer itself is still returned).
    trace_error: str | None = None
    #: Its verification by ablation (`verify.Verification`, also in `payload.verification`); None: unverified.
    verification: Verification | None = None
    #: The provider, model and options it was asked with (secrets included, so never shown or recorded):
    #: what `Session.verify` re-runs it with; mode, k and tool protocol come from its record.
    request: dict[str, Any] = field(default_factory=dict, repr=False)
    #: How its question meets the corpus and what it retrieved (`corpus.topic`), recorded with the turn: the kind
    #: of doc gap it is when it consults nothing.
    topic: Topic | None = None
    #: The verdicts of the judges added after it was written (`Session.judge`), in the order they were written: a
    #: turn read back from the trace store has them; a fresh answer has none.
    other_judges: tuple[TurnFaithfulness, ...] = ()
