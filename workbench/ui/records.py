"""What the app's pages pass around: the configuration a turn runs with (`RunConfig`) and a turn as the chat shows it
(`Turn`, around the library's `Answer`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..config import DEFAULT_K, DEFAULT_MODE, DEFAULT_PROVIDER, DEFAULT_RETRIEVER, DEMO_CORPUS
from ..paths import DEFAULT_STORE
from ..payload import Payload, TurnConfig
from ..providers import declared
from ..providers.options import properties
from ..redact import recorded
from ..session import Answer, AskSpec
from ..types import ContextPolicy
from .caches import provider_display


@dataclass(frozen=True)
class RunConfig:
    """One configuration a turn runs with (what the sidebar or a compare column selects)."""

    provider: str = DEFAULT_PROVIDER
    model: str | None = None
    retriever: str = DEFAULT_RETRIEVER
    mode: str = DEFAULT_MODE
    k: int = DEFAULT_K
    corpus: str = str(DEMO_CORPUS)
    corpus_label: str = "demo"
    #: The provider's options as (name, value) pairs, drawn from its `options_schema`; lists as tuples.
    options: tuple[tuple[str, Any], ...] = ()
    db: str | None = None
    #: The name the trace store `db` is offered under (`paths.trace_stores`): what links carry, never its path.
    store: str = DEFAULT_STORE
    tool_protocol: str | None = None  # agent mode: native | json-steps; None = the provider's default
    #: Who asks (the signed-in person, `turns.user_id`) and whose the turns are (`turns.owner`): `identity.Viewer`.
    user_id: str | None = None
    owner: str | None = None
    #: What of a conversation's earlier turns the model still has (docs/design.md §11), recorded with each turn.
    context: ContextPolicy = field(default_factory=ContextPolicy)

    def asked(self) -> AskSpec:
        """How a turn of this configuration is asked (`Session.ask`'s `AskSpec`): the tool protocol in agent mode only."""
        return AskSpec(provider=self.provider, model=self.model, mode=self.mode, k=self.k,
                       tool_protocol=self.tool_protocol if self.mode == "agent" else None,
                       options={name: list(v) if isinstance(v, tuple) else v for name, v in self.options})

    def describe(self, provider_label: str | None = None, model_label: str | None = None,
                 tool_protocol: str | None = None) -> str:
        """One line; the labels and protocol a turn actually ran with (its payload's config) win."""
        parts = [provider_label or provider_display(self.provider)]
        if model_label or self.model:
            parts.append(f"model {model_label or self.model}")
        parts += [f"retriever {self.retriever}", f"mode {self.mode}"]
        if self.mode == "agent" and (tool_protocol or self.tool_protocol):
            parts.append(f"tools {tool_protocol or self.tool_protocol}")
        parts += [f"k {self.k}", f"corpus {self.corpus_label}"]
        schema = declared(self.provider, "options_schema")
        props = properties(schema)
        for name, value in recorded(schema, dict(self.options)).items():  # a secret is never shown
            shown = ", ".join(map(str, value)) if isinstance(value, list) else value
            parts.append(f"{props.get(name, {}).get('title', name).lower()} {shown}")
        return " · ".join(parts)


@dataclass
class Turn:
    """One question as the app shows it: the config, the library's `Answer` (or an error).

    It wraps the `Answer` (llama-index's `NodeWithScore` way), never copies it: the payload, verdicts, time and id
    are read through it. Its own fields are the app's (configuration, error, session, note, spans, read-only) and
    the question, which a turn that failed before it had an answer (and so a record) still shows."""

    question: str
    config: RunConfig
    answer: Answer | None = None
    error: str | None = None
    elapsed_ms: float = 0.0
    session: Any = field(default=None, repr=False)
    llm_faithfulness: Any = None  # the answer's claims judged by the `llm` judge, when asked for (ui/claims.py)
    #: What the chat says beside the answer about how it is shown (a reopened turn asked with another corpus).
    note: str | None = None
    #: An audited turn's timeline: the spans it was assembled from (`trace.audits.span_timeline`); empty otherwise.
    spans: tuple = ()
    #: Shown to a reader of a shared conversation (`ui/shares.py`): nothing is re-run or judged for them.
    read_only: bool = False

    @property
    def faithfulness(self) -> Any:
        """The answer's own claim verdicts (`Answer.faithfulness`, judged and traced by Session.ask), not a copy."""
        return self.answer.faithfulness if self.answer is not None else None

    @property
    def payload(self) -> Payload | None:
        """The answer's sources payload; None for a turn that raised before it had one."""
        return self.answer.payload if self.answer is not None else None

    @property
    def recorded_ms(self) -> float:
        """The turn's time as its record (and the trace) has it, model calls and tools: the same when the turn
        is reopened; for a turn that raised before it had a record, the wall time of the ask."""
        latency = self.answer.record.latency_ms if self.answer is not None else None
        return float(latency) if latency is not None else self.elapsed_ms

    @property
    def turn_id(self) -> str:
        return (self.payload is not None and self.payload.turn_id) or f"err-{id(self)}"

    @property
    def provider_label(self) -> str:
        """The provider as the turn ran it (its payload's label), else as configured."""
        ran = self.payload.config if self.payload is not None else TurnConfig()
        return ran.provider_label or provider_display(self.config.provider)
