"""Batch runs: a list of questions into one resumable run of the trace store.

Resuming: the run is found by `run_id`, or by its run key (a hash of the questions and the
configuration), so re-running the same batch after an interruption continues the same run. A run is
resumed only with the configuration it was asked with (`runs.eval_settings_json`: provider, model,
options, retriever, mode, k, tool protocol, verification, context policy; and its questions and corpus):
any difference is refused, naming it, unless `new_run` starts a new run (`check_same_configuration`).
Each turn is stored with the line of the questions file it answered (`turn_lines`), and a resume goes by
what is stored, line by line (`plan_resume`): lines with an `ok` turn are skipped, failed or missing ones
asked again. The parts: `EvalSpec` (how to ask), `open_run` and `plan_resume` (which run, what is left),
`_Schedule` (conversation order), `_Asker` (a turn with its rate-limit pauses, on a worker), `_InOrder`
(the workers), `_Writer` (writes in order, counts, flushes) and `_drive` (the loop over the answers).
Turns are buffered and flushed together (whole turns per transaction), so an interruption loses at
most the last half second of turns, never part of one. Used by `workbench eval`, the notebooks
and the benchmarks.

Concurrency (`concurrency=N`, `eval --concurrency N`): real providers spend a turn waiting on the
network, so N worker threads answer N questions at once (`Session.ask(log=False)`, safe from several
threads) while this thread writes the answers in question order, still buffered: the database holds
the same turns in the same order as with one worker, a resumed run skips exactly what it skipped
before, and an interruption loses the answers not yet written (at most about 2N turns, asked again on
resume). Rate limits: a turn the provider ended as `rate_limited` (after the provider's own retries)
is not written; every worker pauses (`backoff * 2**n` seconds, jittered, at most 30 s, shared, so
the batch as a whole slows down) and the question is asked again, up to `RATE_LIMIT_RETRIES` times —
only then is it written as a failed turn, and the run goes on either way. A provider that declares
`max_concurrent_turns` (the in-process `llamacpp` model: 1) gets at most that many workers, and
`EvalResult.concurrency` says how many ran.

Slow providers (a local model: minutes a turn): every turn runs in a worker thread (one with
`concurrency=1`), so this thread stays free to write and to listen. A finished turn reaches the trace
store within about `POLL_S` seconds and its write (`TraceWriter.flush_if_due` while the next turn runs), not
at the next flush (with N workers, once the turns before it in question order are done). `progress` shows each
turn's steps as the agent loop reports them (`agent.StepEvent`: the question, model call n or the tool
called, the tokens so far) on stderr: one line rewritten on a terminal, one line per event in a log. A `Stop` (the CLI's SIGTERM and Ctrl-C handlers request one)
ends the batch at once: the finished turns are written (with N workers also those finished behind a
turn still running), the turns in progress are dropped (their workers are daemon threads: nobody
waits for a slow model call), and `EvalResult.interrupted` says why. A plain `KeyboardInterrupt` does the
same and is raised again after the write. A resume asks the dropped turns again.

Nothing is lost silently: a flush that fails (e.g. another process kept the file locked) keeps
its turns and retries them; turns still unwritten at the end count as failed (`unwritten`,
`trace_error`), and because they are not in the store the resume asks those questions again.
A batch stops asking once `MAX_UNWRITTEN` turns wait for a store that keeps refusing them (the
answers its workers are still computing are dropped: they were never written, so a resume asks them).

Conversations (docs/design.md §11): questions with the same conversation id (a questions file's
`"conversation"`) are one conversation, in their order, under one context policy. Its turns run one after
the other, each with the answers before it as history (`session.Conversations`), while other
conversations and single questions run beside them; writing stays in question order. In the trace store
the conversation is `RUN_ID/ID` (`stored_conversation_id`: at most 200 characters, like every conversation
id), so two runs of one file never share a conversation. A turn that fails (after its rate-limit re-asks)
is written and keeps its position but is not history, and the conversation's later questions are not
asked in this batch (`EvalResult.not_asked`): they would follow a turn the model never had. A resume skips
a conversation's lines up to the first one without a stored `ok` turn and asks the rest, with the stored
turns of the skipped lines as history (`trace.conversation_reader.load_conversation`), at the positions after
every turn written.
"""

from __future__ import annotations

import hashlib
import json
import random
import threading
import time
from collections import Counter, deque
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from itertools import islice
from queue import SimpleQueue
from typing import Any, Callable, Iterator, Sequence

from .agent import StepEvent
from .config import MAX_CONVERSATION_ID_CHARS
from .context_policy import is_history
from .errors import TraceStoreError, WorkbenchError
from .payload import Payload
from .providers import declared
from .providers.http import BACKOFF_ENV, NETWORK_OPTIONS
from .retries import DEFAULT_BACKOFF, backoff_delay
from .providers.options import setting
from .questions import Question
from .redact import recorded
from .session import AskSpec, Conversations
from .types import ContextPolicy
from .terminal import StatusLine


@dataclass
class EvalResult:
    run_id: str
    resumed: bool
    asked: int = 0
    skipped: int = 0
    failed: int = 0
    seconds: float = 0.0
    payloads: list[Payload] = field(default_factory=list)
    concurrency: int = 1
    #: Turns a provider ended as `rate_limited` that were paused and asked again (not written).
    rate_limited: int = 0
    #: Turns asked but not written to the trace store (they count as failed; the resume asks them again).
    unwritten: int = 0
    #: The first trace-store failure of the batch (a flush that failed, even if a retry then succeeded).
    trace_error: str | None = None
    #: Why the batch stopped before its last question, if it did.
    stopped: str | None = None
    #: Questions not asked because an earlier turn of their conversation failed in this batch (a resume asks
    #: them, from the failed one on).
    not_asked: int = 0
    #: What interrupted the batch (`Stop.reason`: "SIGTERM", "SIGINT"), if anything did; its finished turns
    #: were written, the turns in progress dropped.
    interrupted: str | None = None

    @property
    def kept(self) -> int:
        """Turns this batch asked and wrote to the trace store."""
        return self.asked - self.unwritten


RATE_LIMIT_RETRIES = 6  # a question is re-asked at most this often after rate limits, then written as failed
#: Queued turns a batch lets wait for a trace store that keeps refusing them before it stops asking.
MAX_UNWRITTEN = 1000
FINAL_FLUSH_TRIES = 3
#: Seconds between looks at the trace store's queue (and at a `Stop`) while a turn runs.
POLL_S = 0.2


@dataclass(frozen=True)
class NotAsked:
    """A question of a conversation whose earlier turn failed in this batch: it would follow a turn that
    never joined the conversation, so it is not asked (nor written); a resume asks it."""

    question: str
    conversation: str


class ResumeError(WorkbenchError):
    """A run asked to be resumed with a configuration other than its own (`EvalSpec.new_run` starts a new one)."""


class _ClosedWhileWaiting(Exception):
    """A turn that waited for the one before it in its conversation while the batch stopped."""


class Stop:
    """A request to stop a running batch, safe to make from a signal handler: it only sets attributes
    (no lock a handler could deadlock on), and the batch looks at it every `POLL_S` seconds."""

    def __init__(self):
        self.reason: str | None = None

    def request(self, reason: str) -> None:
        if self.reason is None:
            self.reason = reason

    @property
    def requested(self) -> bool:
        return self.reason is not None


class _Progress:
    """Each turn's steps as the agent loop reports them, on a `terminal.StatusLine` (stderr)."""

    QUESTION_CHARS = 60

    def __init__(self, total: int, line: StatusLine | None = None):
        self.total = total
        self.line = line or StatusLine()
        self.kept = 0

    def _head(self, n: int, question: str) -> str:
        q = question if len(question) <= self.QUESTION_CHARS else question[: self.QUESTION_CHARS - 1] + "…"
        return f"eval {n}/{self.total} {q!r}"

    def observer(self, n: int, question: str) -> Callable[[StepEvent], None]:
        head = self._head(n, question)

        def observe(event: StepEvent) -> None:
            if event.kind == "model_call":
                step = f"model call {event.step}"
            elif event.kind == "tool_call":
                step = f"tool call {event.tool}"
            else:
                step = f"model call {event.step} done"
            self.line.show(f"{head} · {step} · {event.tokens_in + event.tokens_out:,} tokens so far")
        return observe

    def done(self, n: int, record, status: str) -> None:
        self.kept += 1
        tokens = sum((c.tokens_in or 0) + (c.tokens_out or 0) for c in record.model_calls)
        self.line.show(f"{self._head(n, record.question)} · {status} in {record.latency_ms / 1000:.1f} s · "
                       f"{len(record.model_calls)} model call(s) · {tokens:,} tokens · {self.kept} of {self.total} done")

    def close(self) -> None:
        self.line.clear()


class _Pause:
    """A pause every worker honours before starting a turn: rate limits slow the whole batch down."""

    def __init__(self, backoff: float):
        self.backoff = backoff
        self._until = 0.0
        self._lock = threading.Lock()

    def wait(self) -> None:
        while (left := self._until - time.monotonic()) > 0:
            time.sleep(left)

    def extend(self, attempt: int) -> None:
        delay = backoff_delay(self.backoff, attempt) * random.uniform(0.8, 1.2)
        with self._lock:
            self._until = max(self._until, time.monotonic() + delay)


def run_key(questions: list[str], settings: dict[str, Any], corpus_hash: str) -> str:
    blob = json.dumps({"questions": questions, "settings": settings, "corpus": corpus_hash}, sort_keys=True)
    return "eval-" + hashlib.sha256(blob.encode()).hexdigest()[:24]


def stored_conversation_id(run_id: str, conversation: str) -> str:
    """The trace store's id of a questions file's conversation in one run: `RUN_ID/ID`, so two runs of one file
    never share a conversation. Kept within `MAX_CONVERSATION_ID_CHARS`, the bound `ask --conversation`, `chat`
    and the app hold: an `ID` too long for that keeps its first characters and ends in `~` and 12 hex digits
    of its sha256, so the id stays unique and can still be followed up (docs/experiments.md)."""
    whole = f"{run_id}/{conversation}"
    if len(whole) <= MAX_CONVERSATION_ID_CHARS:
        return whole
    tag = "~" + hashlib.sha256(conversation.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return f"{run_id}/{conversation[:MAX_CONVERSATION_ID_CHARS - len(run_id) - 1 - len(tag)]}{tag}"


@dataclass(frozen=True)
class EvalSpec(AskSpec):
    """How a batch asks its questions (`run_eval`): how each turn is asked (the `session.AskSpec` it extends:
    provider, model, mode, k, judge, tool protocol, verification, the provider's options — secrets never
    recorded), which run it goes into, and how it runs. Frozen; `run_eval(session, questions, **fields)` builds
    one, refusing unknown fields."""

    #: Each question's conversation id (None: a question of its own), when the questions are plain text.
    conversations: tuple[str | None, ...] | None = None
    context: ContextPolicy = field(default_factory=ContextPolicy)
    #: Resume this run (it must have been asked with this configuration); None: the run of the same run key.
    run_id: str | None = None
    #: Start a new run whatever exists.
    new_run: bool = False
    concurrency: int = 1
    #: First rate-limit pause in seconds (default `$WORKBENCH_PROVIDER_BACKOFF`, else 1 s).
    backoff: float | None = None
    #: Show each turn's steps on stderr.
    progress: bool = True

    def __post_init__(self):
        object.__setattr__(self, "options", dict(self.options or {}))  # None (as run_eval always took) is none
        if isinstance(self.concurrency, bool) or not isinstance(self.concurrency, int) or self.concurrency < 1:
            raise WorkbenchError(f"concurrency must be at least 1, not {self.concurrency!r}")
        if not isinstance(self.context, ContextPolicy):
            raise WorkbenchError(f"context must be a ContextPolicy, not {type(self.context).__name__}")

    def settings(self, session, items: list["EvalItem"]) -> dict[str, Any]:
        """What the run key hashes and a resume compares (only what changes the turns; never a secret)."""
        out = {"provider": self.provider, "model": self.model, "retriever": session.retriever_name,
               "mode": self.mode, "k": self.k,
               "options": recorded(declared(self.provider, "options_schema"), dict(self.options))}
        if self.tool_protocol:  # only when named, so the run keys of batches started before it existed still match
            out["tool_protocol"] = self.tool_protocol
        if self.verify:  # likewise; and an unverified run is never resumed as if its turns had been verified
            out["verify"] = self.verify_budget
        if any(i.conversation is not None for i in items):  # likewise: only a file with conversations has these
            out["conversations"] = [i.conversation for i in items]
            out["context"] = self.context.to_dict()
        return out

    def asked(self) -> AskSpec:
        """How each of its turns is asked: the `AskSpec` it extends."""
        return AskSpec.given(self)


@dataclass(frozen=True)
class EvalItem:
    """One question of a batch: its place among the questions the batch asks (from 1), the line of the questions file it is (what the
    trace store records with its turn, `turn_lines`), its text and its conversation (None: on its own)."""

    n: int
    line: int
    question: str
    conversation: str | None = None


def eval_items(questions: Sequence[str | Question], conversations: Sequence[str | None] | None = None
               ) -> list[EvalItem]:
    """The batch's items: `questions` as text (line = place in the list; `conversations` beside them) or as a
    questions file's `Question`s (their own lines and conversations)."""
    if conversations is not None and len(conversations) != len(questions):
        raise WorkbenchError(f"{len(conversations)} conversation ids for {len(questions)} questions")
    items = []
    for n, q in enumerate(questions, start=1):
        conv = conversations[n - 1] if conversations is not None else None
        if isinstance(q, Question):
            items.append(EvalItem(n=n, line=q.line, question=q.text,
                                  conversation=q.conversation if conversations is None else conv))
        else:
            items.append(EvalItem(n=n, line=n, question=q, conversation=conv))
    return items


def run_eval(session, questions: Sequence[str | Question], spec: EvalSpec | None = None, *,
             stop: Stop | None = None, **fields: Any) -> EvalResult:
    """Ask every question into one run of `session`'s trace store; skip the lines already answered in it.

    `questions` are text or a questions file's `Question`s; `spec` (or its `fields` as keywords, over `spec`) says
    how (`EvalSpec`); `stop` ends the batch early, keeping its finished turns (see the module docstring)."""
    try:
        spec = replace(spec or EvalSpec(), **fields)
    except TypeError as exc:
        raise WorkbenchError(f"run_eval: {exc}") from None
    if session.tracer is None:
        raise WorkbenchError("eval needs a trace database: open the session with tracing on")
    items = eval_items(questions, spec.conversations)
    run = open_run(session, spec, items)
    chat = _conversations(session, spec, run, items)
    result = EvalResult(run.run_id, run.resumed, skipped=len(items) - len(run.plan.todo))
    todo = [replace(item, n=n) for n, item in enumerate(run.plan.todo, start=1)]  # numbered as this batch asks them
    session.toolbox  # build or load the index before the clock starts
    session.tracer.prepare()  # and create or migrate the store: a finished turn's flush is then only its write
    limit = declared(spec.provider, "max_concurrent_turns")  # an in-process model answers one turn at a time
    result.concurrency = min(spec.concurrency, limit) if limit else spec.concurrency
    writer = _Writer(session, result, _Progress(len(todo)) if spec.progress and todo else None)
    asker = _Asker(chat, spec, run, _Schedule(todo), result, writer.shown)
    t0 = time.perf_counter()
    try:
        _drive(_InOrder(asker, todo, result.concurrency), asker.schedule, writer, stop)
    finally:
        writer.close(time.perf_counter() - t0)
    return result


# --- which run, and what of it is left: the resume planner ------------------------------------------------------

@dataclass(frozen=True)
class ResumePlan:
    """What a batch asks of its run: the items left (`todo`), and per stored conversation id the turn ids of the
    lines already answered before the first one that is not (its history; None: every `ok` turn it has)."""

    todo: list[EvalItem]
    history: dict[str, list[str] | None] = field(default_factory=dict)


@dataclass(frozen=True)
class EvalRun:
    run_id: str
    resumed: bool
    plan: ResumePlan


#: The settings a resume compares, in the order a refusal names them.
COMPARED = ("provider", "model", "retriever", "mode", "k", "tool_protocol", "options", "verify", "context")


def open_run(session, spec: EvalSpec, items: list[EvalItem]) -> EvalRun:
    """The run the batch goes into — a new one, or the one it resumes (refused when that run was asked with
    another configuration, naming the difference) — and its `ResumePlan`."""
    from .trace import TraceReader

    tracer = session.tracer
    settings = spec.settings(session, items)
    key = run_key([i.question for i in items], settings, session.corpus.content_hash)
    reader = TraceReader(tracer.path, timeout=tracer.timeout)
    existing = None if spec.new_run else reader.find_run(run_id=spec.run_id, run_key=None if spec.run_id else key)
    if spec.run_id is not None and existing is None and not spec.new_run:
        raise WorkbenchError(f"no run {spec.run_id!r} in {tracer.path}; give no run id to start a new run")
    if existing is None:
        kept = {k: v for k, v in settings.items() if k != "conversations"}  # the run key holds those
        return EvalRun(tracer.new_run(kind="eval", run_key=key, settings=kept), False, ResumePlan(items))
    check_same_configuration(existing, settings, key, spec)
    tracer.resume_run(existing["run_id"])
    return EvalRun(existing["run_id"], True, plan_resume(reader, existing["run_id"], items))


def check_same_configuration(run: dict[str, Any], settings: dict[str, Any], key: str, spec: EvalSpec) -> None:
    """Refuse to resume `run` with settings other than those it was asked with (`runs.eval_settings_json`; a run
    from before m021: what its row holds), or with another questions file or corpus (its run key)."""
    if run.get("eval_settings_json"):
        stored, names = json.loads(run["eval_settings_json"]), COMPARED
    else:
        stored = {"provider": run["provider"], "retriever": run["retriever"], "mode": run["mode"], "k": run["k"],
                  "model": run["model"], "tool_protocol": run["tool_protocol"]}
        names = ("provider", "retriever", "mode", "k") + (("model",) if spec.model else ()) + \
            (("tool_protocol",) if spec.tool_protocol and spec.mode == "agent" else ())
    differ = [f"{name}={stored.get(name)!r}, not {settings.get(name)!r}" for name in names
              if stored.get(name) != settings.get(name)]
    if not differ and run.get("eval_settings_json") and (run.get("run_key") or "").split(" @")[0] != key:
        differ = ["another questions file or corpus (its run key differs)"]
    if differ:
        raise ResumeError(f"run {run['run_id']} was made with " + "; ".join(differ) + ": use the same settings "
                          "to resume it, or start a new run with these")


def plan_resume(reader, run_id: str, items: list[EvalItem]) -> ResumePlan:
    """What is left of `run_id`, by what is stored, line by line (`turn_lines`): a question of its own is skipped
    when its line has an `ok` turn; a conversation's lines are skipped up to the first without one, and asked
    from there with the stored turns before it as history (the turns after such a gap followed a turn the store
    does not hold, so they are asked again; scoring takes each line's latest turn). A run from before m021
    stored no lines: its lines are matched as they were then (`_plan_by_text`)."""
    stored = reader.stored_lines(run_id)
    if not stored and reader.answered_counts(run_id):
        return _plan_by_text(reader, run_id, items)
    ok: dict[int, str] = {}
    for line, turn_id, status in stored:
        if status == "ok":
            ok[line] = turn_id  # the latest ok turn of the line
    todo, history, gap = [], {}, set()
    for item in items:
        sid = None if item.conversation is None else stored_conversation_id(run_id, item.conversation)
        if sid is not None:
            history.setdefault(sid, [])
        if item.line in ok and sid not in gap:
            if sid is not None:
                history[sid].append(ok[item.line])
            continue
        if sid is not None:
            gap.add(sid)
        todo.append(item)
    return ResumePlan(todo, history)


def _plan_by_text(reader, run_id: str, items: list[EvalItem]) -> ResumePlan:
    """A run from before m021: a question of its own is skipped as often as it has `ok` turns of its own; a
    conversation skips as many of its first lines as it has `ok` turns, with all of them as history."""
    done = Counter(reader.answered_counts(run_id))  # every ok turn's question, conversations' included
    sids = {i.conversation: stored_conversation_id(run_id, i.conversation) for i in items if i.conversation}
    kept = {}
    for c, sid in sids.items():
        _, rows = reader.rows("SELECT question FROM turns WHERE conversation_id = ? AND status = 'ok'", [sid])
        kept[c] = len(rows)
        done.subtract(q for (q,) in rows)  # `done` counts single questions only
    todo = []
    for item in items:
        if item.conversation is not None and kept[item.conversation] > 0:
            kept[item.conversation] -= 1
        elif item.conversation is None and done[item.question] > 0:
            done[item.question] -= 1
        else:
            todo.append(item)
    return ResumePlan(todo, {sid: None for sid in sids.values()})


def _conversations(session, spec: EvalSpec, run: EvalRun, items: list[EvalItem]):
    """The batch's conversations (`session.Conversations`), each starting from what its `ResumePlan` kept."""
    chat = Conversations(session, spec.context)
    for c in dict.fromkeys(i.conversation for i in items if i.conversation is not None):
        sid = stored_conversation_id(run.run_id, c)
        if not run.resumed:
            chat.start(sid)
        elif run.plan.history.get(sid) is not None:
            chat.keep_only(sid, run.plan.history[sid])
    return chat


# --- asking: conversation order and rate-limit pauses ------------------------------------------------------------

class _Schedule:
    """The turns of one conversation run one after the other: each waits for the one before it (however that
    ended); once one fails, the conversation's later turns are not asked in this batch."""

    def __init__(self, todo: list[EvalItem]):
        self._before: dict[int, int] = {}
        latest: dict[str, int] = {}
        for item in todo:
            if item.conversation is not None:
                if item.conversation in latest:
                    self._before[item.n] = latest[item.conversation]
                latest[item.conversation] = item.n
        self._ended = {n: threading.Event() for n in self._before.values()}  # set when turn n is over
        self._broken: set[str] = set()
        self.closing = threading.Event()

    def wait_for_turn(self, item: EvalItem) -> bool:
        """Wait until the turn before `item` in its conversation is over; False when the conversation broke
        (`item` is not asked). Raises `_ClosedWhileWaiting` when the batch closes meanwhile."""
        if item.n in self._before:
            while not self._ended[self._before[item.n]].wait(POLL_S):
                if self.closing.is_set():
                    raise _ClosedWhileWaiting()
        return item.conversation not in self._broken

    def over(self, item: EvalItem, ok: bool) -> None:
        if item.conversation is not None and not ok:
            self._broken.add(item.conversation)
        if item.n in self._ended:
            self._ended[item.n].set()


class _Asker:
    """One question (after the turn before it in its conversation), asked again after a shared pause while the
    provider rate-limits it; called on the worker threads."""

    def __init__(self, chat, spec: EvalSpec, run: EvalRun, schedule: _Schedule, result: EvalResult, shown):
        self.chat, self.schedule, self.result, self.shown = chat, schedule, result, shown
        self.run_id = run.run_id
        self.asked = spec.asked()
        self.pause = _Pause(setting(spec.backoff, BACKOFF_ENV, DEFAULT_BACKOFF, NETWORK_OPTIONS["backoff"], "backoff"))
        self._count = threading.Lock()

    def __call__(self, item: EvalItem):
        answer = None
        try:
            if not self.schedule.wait_for_turn(item):
                return NotAsked(item.question, item.conversation)
            observe = self.shown.observer(item.n, item.question) if self.shown else None
            sid = None if item.conversation is None else stored_conversation_id(self.run_id, item.conversation)
            for attempt in range(RATE_LIMIT_RETRIES + 1):
                self.pause.wait()
                answer = self.chat.ask(item.question, sid, spec=self.asked, log=False, observe=observe)
                if answer.payload.status != "rate_limited" or attempt == RATE_LIMIT_RETRIES:
                    return answer
                self.pause.extend(attempt)
                with self._count:
                    self.result.rate_limited += 1
        finally:
            self.schedule.over(item, answer is not None and is_history(answer.record))


# --- writing: in question order, buffered, nothing lost silently -------------------------------------------------

class _Writer:
    """Writes the answers into the run in question order (buffered by the trace writer), counts them, shows them;
    `close` writes what is still queued and settles the counts."""

    def __init__(self, session, result: EvalResult, shown: _Progress | None):
        self.session, self.tracer, self.result, self.shown = session, session.tracer, result, shown
        self._failed: set[str] = set()
        self._unwritten: list[str] = []

    def write(self, item: EvalItem, answer) -> None:
        if isinstance(answer, NotAsked):
            self.result.not_asked += 1
            return
        answer = self.session.log(answer, run_id=self.result.run_id, line=item.line)
        self.result.payloads.append(answer.payload)
        self.result.asked += 1
        if answer.payload.status != "ok":
            self._failed.add(answer.payload.turn_id)
        if answer.trace_error:  # a flush that failed keeps the turn queued; a turn never queued is lost
            self.result.trace_error = self.result.trace_error or answer.trace_error
            if answer.payload.turn_id not in self.tracer.pending_turn_ids():
                self._unwritten.append(answer.payload.turn_id)  # counts as failed; a resume asks its line again
        if self.shown is not None:
            self.shown.done(item.n, answer.record, answer.payload.status)

    def idle(self) -> None:
        """While a turn has run `POLL_S` seconds and more: write the finished ones."""
        try:
            self.tracer.flush_if_due(0)
        except Exception as exc:  # noqa: BLE001 - kept queued and retried; reported like a failed flush
            self.result.trace_error = self.result.trace_error or str(exc)

    def too_many_waiting(self) -> bool:
        return len(self.tracer.pending_turn_ids()) >= MAX_UNWRITTEN

    def final_flush(self) -> None:
        self._unwritten += _final_flush(self.tracer, self.result)

    def close(self, seconds: float) -> None:
        if self.shown is not None:
            self.shown.close()
        self.result.seconds = seconds
        self.result.unwritten = len(self._unwritten)
        self.result.failed = len(self._failed | set(self._unwritten))


def _drive(runner: "_InOrder", schedule: _Schedule, writer: _Writer, stop: Stop | None) -> None:
    """Take the answers in question order and write them, until the last, a `Stop`, a Ctrl-C or a store that
    keeps refusing them; then write what finished and what is queued."""
    result = writer.result
    stopping = lambda: stop is not None and stop.requested  # noqa: E731
    total = runner.total
    with writer.tracer.buffered():
        try:
            for item, answer in runner.answers(lambda: writer.idle() or stopping()):
                writer.write(item, answer)
                if stopping():
                    break
                if writer.too_many_waiting():
                    result.stopped = (f"stopped after {result.asked} of {total} questions: "
                                      f"{MAX_UNWRITTEN} turns are waiting for the trace database")
                    break
            if stopping() and result.asked < total:
                result.interrupted = stop.reason
                for item, answer in runner.finished():  # finished behind a turn still running (N workers)
                    writer.write(item, answer)
        except KeyboardInterrupt:
            result.interrupted = "SIGINT"
            for item, answer in runner.finished():
                writer.write(item, answer)
            raise
        finally:
            schedule.closing.set()
            runner.close()  # no worker asks on (their turns in progress are dropped, a resume asks them)
            writer.final_flush()


def _final_flush(tracer, result: EvalResult) -> list[str]:
    """Write what is still queued (a few tries, each waiting for the file lock, with a pause between them no longer
    than that wait: `WORKBENCH_LOCK_TIMEOUT`); return the ids it could not."""

    for attempt in range(FINAL_FLUSH_TRIES):
        try:
            tracer.flush()
            return []
        except TraceStoreError as exc:
            result.trace_error = result.trace_error or str(exc)
            if attempt + 1 < FINAL_FLUSH_TRIES:
                time.sleep(min(0.5 * (attempt + 1), tracer.timeout))
    return tracer.take_unflushed()


class _InOrder:
    """`ask(item)` for every item on `concurrency` worker threads, the answers taken in item order.

    At most 2 × `concurrency` items are queued or running, so answers waiting behind a slow one stay few.
    The workers are daemon threads: a batch that stops (an interruption, an error) cancels the queued
    items and does not wait for the running ones — their answers are dropped (a resumed run asks them
    again), and a process that exits is not held up by a model call still in progress."""

    def __init__(self, ask: Callable[[Any], Any], items: list[Any], concurrency: int):
        self._ask = ask
        self.total = len(items)
        self._pending = iter(items)
        self._jobs: SimpleQueue = SimpleQueue()
        self._window: deque[tuple[Any, Future]] = deque()
        self._workers = concurrency
        for _ in range(concurrency):
            threading.Thread(target=self._work, name="eval", daemon=True).start()
        for item in islice(self._pending, 2 * concurrency):
            self._submit(item)

    def _submit(self, item: Any) -> None:
        future: Future = Future()
        self._window.append((item, future))
        self._jobs.put((item, future))

    def _work(self) -> None:
        while (job := self._jobs.get()) is not None:
            item, future = job
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(self._ask(item))
            except BaseException as exc:  # noqa: BLE001 - raised again in the thread that takes the answer
                future.set_exception(exc)

    def answers(self, idle: Callable[[], bool]) -> Iterator[tuple[Any, Any]]:
        """(item, answer) in item order; while the next answer is not ready, `idle()` every `POLL_S`
        seconds, and the iteration ends when it returns True."""
        while self._window:
            item, future = self._window[0]
            while True:
                try:
                    answer = future.result(timeout=POLL_S)
                    break
                except TimeoutError:
                    if idle():
                        return
            self._window.popleft()
            for nxt in self._pending:  # refill one
                self._submit(nxt)
                break
            yield item, answer

    def finished(self) -> list[tuple[Any, Any]]:
        """(item, answer) of every answer ready but not yet taken (behind one still running), in order."""
        return [(item, f.result()) for item, f in self._window
                if f.done() and not f.cancelled() and f.exception() is None]

    def close(self) -> None:
        for _, future in self._window:
            future.cancel()
        self._window.clear()
        for _ in range(self._workers):
            self._jobs.put(None)
