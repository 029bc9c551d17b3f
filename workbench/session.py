"""One entry point for asking questions, shared by the CLI, the app and the notebooks.

A `Session` holds a corpus and its retriever (built or loaded once) and runs turns through the
agent loop, then computes provenance. No logic lives in the shells that call it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .agent import run_turn
from .config import DEMO_CORPUS, MAX_K, default_db_path
from .corpus import Corpus, load_corpus
from .provenance import build_payload
from .providers import get_provider
from .providers.options import recorded
from .retrieval import get_retriever, retriever_names
from .errors import TraceStoreError, UnknownNameError, WorkbenchError
from .faithfulness import assess_turn
from .tools import Toolbox
from .types import TurnRecord


@dataclass(frozen=True)
class Answer:
    record: TurnRecord
    payload: dict[str, Any]
    #: Claim-level verdicts (`faithfulness.TurnFaithfulness`), None when not judged.
    faithfulness: Any = None
    #: Why the turn could not be written to the trace store (the answer itself is still returned).
    trace_error: str | None = None


class Session:
    """A corpus plus one retriever over it; `ask()` runs a turn with any provider and mode."""

    def __init__(self, corpus: Corpus, retriever: str = "bm25", cache_dir: Path | None = None, *,
                 trace_db: str | Path | None = None, trace: bool = True):
        if retriever not in retriever_names():
            raise UnknownNameError("retriever", retriever, retriever_names())
        self.corpus = corpus
        self.retriever_name = retriever
        self._cache_dir = cache_dir
        self._toolbox: Toolbox | None = None
        # Every ask is traced unless opted out (trace=False / --no-trace); docs/traces.md.
        self.tracer = None
        if trace:
            from .trace.writer import TraceWriter  # duckdb and pyarrow load only when tracing

            self.tracer = TraceWriter(trace_db or default_db_path())

    @classmethod
    def open(cls, corpus: str | Path | Corpus | None = None, retriever: str = "bm25", **kwargs) -> "Session":
        """Load `corpus` (a path, a loaded corpus, or None for the bundled demo corpus)."""
        if not isinstance(corpus, Corpus):
            corpus = load_corpus(corpus or DEMO_CORPUS)
        return cls(corpus, retriever, **kwargs)

    @property
    def toolbox(self) -> Toolbox:
        if self._toolbox is None:
            retriever = get_retriever(self.retriever_name, self.corpus, cache_dir=self._cache_dir)
            self._toolbox = Toolbox(self.corpus, retriever)
        return self._toolbox

    def ask(self, question: str, *, provider: str = "offline", model: str | None = None, mode: str = "agent",
            k: int = 5, run_id: str | None = None, judge: str | None = "lexical",
            tool_protocol: str | None = None, **provider_options: Any) -> Answer:
        """Run one turn, judge its claims, log it to the trace store (unless tracing is off) and return it.

        `provider_options` go to the provider, checked against its `options_schema` (e.g. the offline
        provider's `faults=["corrupt_id"]`); those not secret are recorded with the turn's
        configuration. `tool_protocol` is `native` or `json-steps` (default: the provider's own, see
        `agent.run_turn`): a run parameter like `mode`, not a provider option. `judge` names the
        faithfulness judge whose per-claim verdicts are stored with the turn (the fast offline
        `lexical` by default; None skips judging).
        """
        _check_inputs(question, k)
        p = get_provider(provider, model=model, **provider_options)
        if mode == "agent" and not (p.supports_tools or p.supports_json_schema):
            raise WorkbenchError(f"provider {provider!r} can neither call tools nor answer in a JSON schema, so it "
                                 "cannot run agent mode: use excerpt mode (--mode excerpts)")
        record = run_turn(question, p, self.toolbox, mode=mode, k=k, tool_protocol=tool_protocol,
                          config={"provider_label": p.label, "model_label": p.model_label,
                                  "options": recorded(p.options_schema, provider_options)})
        payload = build_payload(record)
        faith = None
        if judge and record.status == "ok" and record.answer:
            faith = assess_turn(record, payload, self.corpus, judge=judge)
        trace_error = None
        if self.tracer is not None:
            try:
                self.tracer.log_turn(record, payload, run_id=run_id, claims=faith.claims if faith else None)
            except TraceStoreError as exc:  # a broken trace database must not cost the user the answer
                trace_error = str(exc)
            except Exception as exc:  # noqa: BLE001 - nor may anything else the store raises
                trace_error = f"{type(exc).__name__}: {exc}"
        return Answer(record, payload, faith, trace_error)


def _check_inputs(question: Any, k: Any) -> None:
    """Refuse, before the turn runs, what the trace store could not hold (the answer would be lost after)."""
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
        raise WorkbenchError(f"k must be a whole number from 1 to {MAX_K}, not {k!r}")
    if not isinstance(question, str):
        raise WorkbenchError(f"the question must be text, not {type(question).__name__}")
    try:
        question.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise WorkbenchError(f"the question is not valid UTF-8 text (undecodable byte or unpaired surrogate "
                             f"at position {exc.start}); check the terminal's or file's encoding") from None
