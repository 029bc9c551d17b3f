"""One entry point for asking questions, shared by the CLI, the app and the notebooks.

A `Session` holds a corpus and its retriever (built or loaded once) and runs turns through the
agent loop, then computes provenance. No logic lives in the shells that call it.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Mapping, Sequence

from .agent import Observer, run_turn
from .answer import Answer
from .config import DEFAULT_JUDGE, DEFAULT_K, DEFAULT_MODE, DEFAULT_PROVIDER, DEFAULT_RETRIEVER, DEMO_CORPUS, MAX_K, Settings
from .questions import check_conversation_id, check_question_length
from .corpus import Corpus, load_corpus, topic
from .payload import Payload
from .provenance import sources_payload
from .providers import declared, get_provider
from .redact import recorded
from .retrieval import get_retriever, retriever_names
from .errors import ConversationMoved, TraceStoreError, UnknownNameError, VerificationError, WorkbenchError
from .faithfulness import assess_turn
from .tools import Toolbox
from .context_policy import MAX_REASKS, history_for, is_history, next_position, reask_when_moved
from .types import ANSWERED, ContextPolicy, TurnRecord
from .verify import DEFAULT_BUDGET, Verification, check_budget, pinned_options
from .verify import verify as verify_turn


@dataclass(frozen=True)
class AskSpec:
    """How a turn is asked (docs/design.md §3): the one specification `Session.ask` takes, which an eval's
    `batch.EvalSpec` extends and the app's `ui.records.RunConfig` builds (`RunConfig.asked`). Frozen; what the turn
    ran with is recorded in its `TurnRecord.config` (`types.TurnConfig`).

    `options` go to the provider, checked against its `options_schema` (e.g. the offline provider's
    `faults=["corrupt_id"]`); those not secret are recorded with the turn's configuration. `tool_protocol` is
    `native` or `json-steps` (None: the provider's own, `agent.run_turn`). `judge` names the faithfulness judge
    whose per-claim verdicts are stored with the turn (None skips judging). `verify` also verifies the answer by
    ablation, with at most `verify_budget` re-runs."""

    provider: str = DEFAULT_PROVIDER
    model: str | None = None
    mode: str = DEFAULT_MODE
    k: int = DEFAULT_K
    judge: str | None = DEFAULT_JUDGE
    tool_protocol: str | None = None
    verify: bool = False
    verify_budget: int = DEFAULT_BUDGET
    options: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def given(cls, spec: "AskSpec | None" = None, **keywords: Any) -> "AskSpec":
        """`spec` (only its own fields: an `EvalSpec` is asked as the `AskSpec` it extends), with `keywords` over it:
        the spec's field names, any other keyword a provider option (the keyword calls `Session.ask` always took)."""
        base = {f.name: getattr(spec, f.name) for f in fields(cls)} if spec is not None else {}
        names = {f.name for f in fields(cls)}
        options = {**dict(base.get("options") or {}), **dict(keywords.get("options") or {}),
                   **{k: v for k, v in keywords.items() if k not in names}}
        return cls(**{**base, **{k: v for k, v in keywords.items() if k in names}, "options": options})


class Session:
    """A corpus plus one retriever over it; `ask()` runs a turn with any provider and mode."""

    def __init__(self, corpus: Corpus, retriever: str = DEFAULT_RETRIEVER, cache_dir: Path | None = None, *,
                 trace_db: str | Path | None = None, trace: bool = True, settings: Settings | None = None):
        if retriever not in retriever_names():
            raise UnknownNameError("retriever", retriever, retriever_names())
        self.corpus = corpus
        self.retriever_name = retriever
        #: The environment as the edge read it (`config.Settings`), passed to every provider the session builds;
        #: None: each provider reads it when it is built (a long-lived library session sees a changed environment).
        self.settings = settings
        opened = Settings.given(settings)  # the trace database, its lock timeout, live export
        self._cache_dir = cache_dir
        self._toolbox: Toolbox | None = None
        # Every ask is traced unless opted out (trace=False / --no-trace); docs/traces.md.
        self.tracer = None
        if trace:
            from .trace.writer import TraceWriter  # duckdb loads only when tracing

            self.tracer = TraceWriter(trace_db or opened.trace_db, timeout=opened.lock_timeout)
            if opened.otlp_endpoint:  # live OTLP export of each written turn (trace/live.py)
                from .trace.live import from_env

                self.tracer.listeners.append(from_env().listener(self.tracer.path))

    @classmethod
    def open(cls, corpus: str | Path | Corpus | None = None, retriever: str = DEFAULT_RETRIEVER, **kwargs) -> "Session":
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

    def ask(self, question: str, spec: AskSpec | None = None, *, run_id: str | None = None, log: bool = True,
            observe: Observer | None = None, history: Sequence[TurnRecord] = (), conversation_id: str | None = None,
            context: ContextPolicy | None = None, position: int | None = None, if_moved: str = "append",
            user_id: str | None = None, owner: str | None = None, **asked: Any) -> Answer:
        """Run one turn, judge its claims, log it to the trace store (unless tracing is off) and return it.

        `spec` (`AskSpec`) says how it is asked: provider, model, mode, k, judge, tool protocol, verification and
        the provider's options. Its fields may be given as keywords instead, or over it (`AskSpec.given`: a
        keyword that is no field of it is a provider option, e.g. `faults=["corrupt_id"]`), as callers always
        have. `verify` also verifies the answer by ablation
        (`Session.verify`, at most `verify_budget` re-runs) before the turn is written, so its
        `ablations` rows go in with it; a turn that failed is not verified. The turn is then asked with the
        options that make the provider reproducible (`verify.pinned_options`: temperature 0, a fixed seed,
        …), as its re-runs are, so that its control can reproduce it. `log=False` returns the answer
        unwritten, for `log()` to write later: a concurrent batch answers in several threads and writes in
        question order. `observe` gets the agent loop's `StepEvent`s as the turn goes (progress displays,
        `agent.run_turn`). Safe to call from several threads at once.

        A follow-up (docs/design.md §11) passes the conversation's earlier turns' records, oldest first, as
        `history`, with its `conversation_id`; `context` is the policy that decides what of them the model
        still has (default `ContextPolicy()`: the turns, then the token budget, `agent.run_turn`), recorded in
        the turn's configuration with the budget and context it worked with. `position` is the place it is asked
        as (default: after `history`; pass it when failed turns, which are not history, came before); the
        trace store writes it at the next free place, and `if_moved` says what happens when another turn took
        this one first (`TraceWriter.log_turn`).
        `user_id` (who asked: the signed-in person) and `owner` (whose turn it is) are recorded with it
        (`turns.user_id`, `turns.owner`; the app sets them, docs/security.md).
        """
        spec = AskSpec.given(spec, **asked)
        provider, model, mode, k, judge = spec.provider, spec.model, spec.mode, spec.k, spec.judge
        provider_options = dict(spec.options)
        _check_inputs(question, k)
        _check_conversation(conversation_id, context, position)
        if spec.verify:
            check_budget(spec.verify_budget)
            provider_options, _ = pinned_options(declared(provider, "options_schema"), provider_options)
        p = get_provider(provider, model=model, settings=self.settings, **provider_options)
        config = {"provider_label": p.label, "model_label": p.model_label,
                  "options": recorded(p.options_schema, provider_options)}
        turns: tuple = ()
        policy = None
        if conversation_id is not None or history:
            policy = context or ContextPolicy()
            position = position or next_position(h.position or i for i, h in enumerate(history, start=1))
            turns = history_for(history, policy)
        else:
            position = None
        record = run_turn(question, p, self.toolbox, mode=mode, k=k, tool_protocol=spec.tool_protocol, config=config,
                          observe=observe, history=turns, conversation_id=conversation_id, position=position,
                          context=policy)
        if user_id is not None or owner is not None:
            record = replace(record, user_id=user_id, owner=owner)
        payload = sources_payload(record)
        faith = None
        if judge and record.status in ANSWERED and record.answer:
            faith = assess_turn(record, payload, self.corpus, judge=judge)
        request = {"provider": provider, "model": model, "options": dict(provider_options)}
        checked = None
        if spec.verify and record.status in ANSWERED and record.answer.strip():
            checked = self._verify(record, payload, request, spec.verify_budget, judge or DEFAULT_JUDGE)
            payload = replace(payload, verification=checked.to_payload())
        answer = Answer(record, payload, faith, None, checked, request,
                        topic=topic(question, self.corpus, payload.sets.retrieved))
        return self.log(answer, run_id=run_id, if_moved=if_moved) if log else answer

    def verify(self, answer: Answer, *, budget: int = DEFAULT_BUDGET, judge: str = DEFAULT_JUDGE) -> Answer:
        """`answer` verified by ablation (docs/design.md §9, `workbench/verify.py`): re-run with the provider,
        model and options it was asked with, this session's retriever, its mode, k and tool protocol, at
        most `budget` times. The verification goes into the returned answer's payload and, for a traced
        turn, into the trace store's `ablations` table (the turn itself is not rewritten)."""
        check_budget(budget)
        cfg = answer.record.config
        if not answer.request or cfg.get("retriever") != self.retriever_name or \
                cfg.get("corpus_hash") != self.corpus.content_hash:
            raise VerificationError("verify a turn with the session that asked it: the re-runs need its provider "
                                    "options, corpus and retriever")
        checked = self._verify(answer.record, answer.payload, answer.request, budget, judge)
        trace_error = answer.trace_error
        if self.tracer is not None and trace_error is None:
            try:
                self.tracer.add_ablations(checked.turn_id, checked.rows())
            except TraceStoreError as exc:  # the verification is still returned, like an answer
                trace_error = str(exc)
            except Exception as exc:  # noqa: BLE001 - nor may anything else the store raises
                trace_error = f"{type(exc).__name__}: {exc}"
        return replace(answer, payload=replace(answer.payload, verification=checked.to_payload()),
                       verification=checked, trace_error=trace_error)

    def judge(self, answer: Answer, judge: Any) -> Any:
        """`answer`'s claims judged again by `judge` (a name or a `Judge`, e.g. the `llm` judge over a real
        provider), returned as a `TurnFaithfulness`; for a traced turn also added to the trace store's `claims`
        table beside the verdicts it was written with (one row per claim and judge). The answer is unchanged."""
        faith = assess_turn(answer.record, answer.payload, self.corpus, judge=judge)
        if self.tracer is not None and answer.trace_error is None and faith.claims:
            self.tracer.add_claims(faith.turn_id, faith.claims)
        return faith

    def _verify(self, record: TurnRecord, payload: Payload, request: dict[str, Any], budget: int,
                judge: str) -> Verification:
        options, pinned = pinned_options(declared(request["provider"], "options_schema"), request["options"])
        p = get_provider(request["provider"], model=request["model"], settings=self.settings, **options)
        return verify_turn(record, self.toolbox, p, payload=payload, judge=judge, budget=budget, sampling=pinned)

    def log(self, answer: Answer, *, run_id: str | None = None, line: int | None = None,
            if_moved: str = "append") -> Answer:
        """Write `answer` (and its verification's `ablations` rows) to the trace store (unless tracing is
        off); a failure is kept in `trace_error`. `line` is the line of an eval's questions file it answers. A
        conversation turn comes back with the position it was written at; `if_moved="raise"` raises
        `ConversationMoved` instead of writing one another turn overtook."""
        if self.tracer is None:
            return answer
        try:
            self.tracer.log_turn(answer.record, answer.payload, run_id=run_id,
                                 claims=answer.faithfulness.claims if answer.faithfulness else None,
                                 ablations=answer.verification.rows() if answer.verification else None,
                                 line=line, if_moved=if_moved, topic=answer.topic)
        except ConversationMoved:
            raise  # not a store failure: the caller asks the turn again with the new history
        except TraceStoreError as exc:  # a broken trace database must not cost the user the answer
            return replace(answer, trace_error=str(exc))
        except Exception as exc:  # noqa: BLE001 - nor may anything else the store raises
            return replace(answer, trace_error=f"{type(exc).__name__}: {exc}")
        placed = self.tracer.placed(answer.payload.turn_id)
        if placed is None or placed == answer.record.position:
            return answer
        return replace(answer, record=replace(answer.record, position=placed),
                       payload=replace(answer.payload, position=placed))


@dataclass
class Conversation:
    """One conversation as `Conversations` keeps it: its `ok` turns so far, oldest first (the history of its
    next turn), and the position its next turn takes (failed turns are not history but keep their positions)."""

    conversation_id: str
    turns: list[TurnRecord] = field(default_factory=list)
    next_position: int = 1


class Conversations:
    """Conversations asked through one session (`ask`, `chat`, `eval`): each id's turns so far, loaded from the
    trace store the first time the id is asked (`trace.conversation_reader`: a conversation goes on where it
    stopped) and kept in memory after, so every turn is asked with its conversation's history under one
    context policy. A failed turn takes its position but is not history (the model never had an answer from
    it). Different conversations may be asked from several threads at once; the turns of one conversation
    must be asked one after the other."""

    def __init__(self, session: Session, context: ContextPolicy | None = None):
        self.session = session
        self.context = context or ContextPolicy()
        self._known: dict[str, Conversation] = {}
        self._lock = threading.Lock()

    def get(self, conversation_id: str) -> Conversation:
        """`conversation_id` so far (from the session's trace store the first time; empty when untraced)."""
        with self._lock:
            if conversation_id not in self._known:
                self._known[conversation_id] = self._load(conversation_id)
            return self._known[conversation_id]

    def turns(self, conversation_id: str) -> list[TurnRecord]:
        """The `ok` turns of `conversation_id` so far, oldest first."""
        return list(self.get(conversation_id).turns)

    def _load(self, conversation_id: str) -> Conversation:
        tracer = self.session.tracer
        if tracer is None:
            return Conversation(conversation_id)
        from .trace.conversation_reader import conversation_so_far

        turns, last = conversation_so_far(tracer.path, conversation_id, self.session.corpus)
        return Conversation(conversation_id, turns, next_position([last]))

    def keep_only(self, conversation_id: str, turn_ids: Sequence[str]) -> None:
        """Go on with only these stored turns of `conversation_id` as its history (a resumed eval: the turns of
        the lines before the first one the store lacks); its next position stays after every stored turn."""
        c = self.get(conversation_id)
        wanted = set(turn_ids)
        with self._lock:
            c.turns = [t for t in c.turns if t.turn_id in wanted]

    def start(self, conversation_id: str) -> None:
        """Begin `conversation_id` with no earlier turn, without looking in the trace store (an id known to be
        new: a new eval run's, a fresh chat's)."""
        with self._lock:
            self._known[conversation_id] = Conversation(conversation_id)

    def forget(self, conversation_id: str) -> None:
        """Read `conversation_id` from the trace store again at its next turn (another process added to it)."""
        with self._lock:
            self._known.pop(conversation_id, None)

    def ask(self, question: str, conversation_id: str | None, **kwargs: Any) -> Answer:
        """`Session.ask` as the next turn of `conversation_id` (None: a question of its own).

        When another turn of the conversation (another process, another app session) was written while this
        one ran, the turn is written after it (its `history_through` says what it saw) or, where that would
        break the conversation's numbering (`reask_when_moved`), asked again with the conversation read anew,
        at most `MAX_REASKS` times; either way the next turn reads the conversation from the store again."""
        if conversation_id is None:
            return self.session.ask(question, **kwargs)
        reask = reask_when_moved(AskSpec.given(kwargs.get("spec"), **{k: v for k, v in kwargs.items() if k in _ASKED}).mode) \
            and kwargs.get("log", True)
        for attempt in range(MAX_REASKS + 1):
            c = self.get(conversation_id)
            try:
                answer = self.session.ask(question, history=tuple(c.turns), conversation_id=conversation_id,
                                          context=self.context, position=c.next_position,
                                          if_moved="raise" if reask and attempt < MAX_REASKS else "append", **kwargs)
                break
            except ConversationMoved:
                self.forget(conversation_id)
        if answer.record.position != c.next_position:
            self.forget(conversation_id)
            return answer
        c.next_position = next_position([answer.record.position])
        if is_history(answer.record):
            c.turns.append(answer.record)
        return answer


#: The keywords of `Session.ask` that say how a turn is asked (`AskSpec`'s fields), not where it goes.
_ASKED = ("provider", "model", "mode", "k", "judge", "tool_protocol", "verify", "verify_budget", "options")


def _check_conversation(conversation_id: Any, context: Any, position: Any) -> None:
    """The bounds `ask --conversation`, `chat`, `eval` and the app check, held here for library callers too: a
    conversation id as `questions.check_conversation_id` takes it, a `ContextPolicy` (which bounds its own
    turns and budget), a position of at least 1."""
    if conversation_id is not None:
        check_conversation_id(conversation_id)
    if context is not None and not isinstance(context, ContextPolicy):
        raise WorkbenchError(f"context must be a ContextPolicy, not {type(context).__name__}")
    if position is not None and (isinstance(position, bool) or not isinstance(position, int) or position < 1):
        raise WorkbenchError(f"a position in a conversation is a whole number from 1, not {position!r}")


def _check_inputs(question: Any, k: Any) -> None:
    """Refuse, before the turn runs, what the trace store could not hold (the answer would be lost after)."""
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
        raise WorkbenchError(f"k must be a whole number from 1 to {MAX_K}, not {k!r}")
    if not isinstance(question, str):
        raise WorkbenchError(f"the question must be text, not {type(question).__name__}")
    check_question_length(question)
    try:
        question.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise WorkbenchError(f"the question is not valid UTF-8 text (undecodable byte or unpaired surrogate "
                             f"at position {exc.start}); check the terminal's or file's encoding") from None
