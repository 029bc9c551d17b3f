"""Batch runs: a list of questions into one resumable run of the trace store.

Resuming: the run is found by `run_id`, or by its run key (a hash of the questions and the
configuration), so re-running the same batch after an interruption continues the same run.
Questions that already have an `ok` turn in the run are skipped; failed turns are asked again.
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
the conversation is `RUN_ID/ID`, so two runs of one file never share a conversation. A turn that fails
(after its rate-limit re-asks) is written and keeps its position but is not history, and the
conversation's later questions are not asked in this batch (`EvalResult.not_asked`): they would follow a
turn the model never had. A resume loads each conversation's `ok` turns already written
(`trace.conversations.load_conversation`), skips that many of its first questions and asks the rest with
that history, at the positions after every turn written.
"""

from __future__ import annotations

import hashlib
import json
import random
import threading
import time
from collections import Counter, deque
from concurrent.futures import Future
from dataclasses import dataclass, field
from itertools import islice
from queue import SimpleQueue
from typing import Any, Callable, Iterator

from .agent import StepEvent
from .conversation import is_history
from .errors import TraceStoreError, WorkbenchError
from .payload import Payload
from .providers import declared
from .providers.http import BACKOFF_ENV, DEFAULT_BACKOFF, NETWORK_OPTIONS, backoff_delay
from .providers.options import setting
from .redact import recorded
from .types import ContextPolicy
from .terminal import StatusLine
from .verify import DEFAULT_BUDGET


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


class _Dropped(Exception):
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


def run_eval(session, questions: list[str], *, provider: str = "offline", model: str | None = None,
             mode: str = "agent", k: int = 5, options: dict[str, Any] | None = None, run_id: str | None = None,
             new_run: bool = False, progress: bool = True, tool_protocol: str | None = None,
             concurrency: int = 1, backoff: float | None = None, verify: bool = False,
             verify_budget: int = DEFAULT_BUDGET, stop: Stop | None = None,
             conversations: list[str | None] | None = None, context: ContextPolicy | None = None) -> EvalResult:
    """Ask every question into one run of `session`'s trace store; skip those already answered in it.

    `options` are the provider's options (checked against its `options_schema` by `Session.ask`);
    `tool_protocol` is the agent's tool protocol (`native` or `json-steps`, default: the provider's);
    `concurrency` turns run at once (see the module docstring); `backoff` is the first rate-limit pause in
    seconds (default: `$WORKBENCH_PROVIDER_BACKOFF`, else 1 s). `verify` verifies every answer by
    ablation (`Session.verify`, at most `verify_budget` re-runs each, in the worker that asked it) over
    the session's one loaded index; a verifying batch is its own run. `progress` shows each turn's steps on
    stderr; `stop` ends the batch early, keeping its finished turns (see the module docstring).

    `conversations` gives each question's conversation id (None: a question of its own; the questions file's
    `"conversation"`), `context` their context policy (see "Conversations" in the module docstring)."""
    options = dict(options or {})
    convs = list(conversations) if conversations is not None else [None] * len(questions)
    if len(convs) != len(questions):
        raise WorkbenchError(f"{len(convs)} conversation ids for {len(questions)} questions")
    context = context or ContextPolicy()
    from .trace import TraceReader

    if concurrency < 1:
        raise WorkbenchError(f"concurrency must be at least 1, not {concurrency}")

    tracer = session.tracer
    if tracer is None:
        raise WorkbenchError("eval needs a trace database: open the session with tracing on")
    settings = {"provider": provider, "model": model, "retriever": session.retriever_name, "mode": mode, "k": k,
                "options": recorded(declared(provider, "options_schema"), options)}  # never a secret
    if tool_protocol:  # only when named, so the run keys of batches started before it existed still match
        settings["tool_protocol"] = tool_protocol
    if verify:  # likewise; and an unverified run is never resumed as if its turns had been verified
        settings["verify"] = verify_budget
    if any(c is not None for c in convs):  # likewise: only a file with conversations has these
        settings["conversations"] = convs
        settings["context"] = context.to_dict()
    key = run_key(questions, settings, session.corpus.content_hash)
    reader = TraceReader(tracer.path, timeout=tracer.timeout)
    existing = None if new_run else reader.find_run(run_id=run_id, run_key=None if run_id else key)
    if run_id is not None and existing is None:
        raise WorkbenchError(f"no run {run_id!r} in {tracer.path}; give no run id to start a new run")
    if existing is not None:
        for name in ("provider", "retriever", "mode", "k") + (("model",) if model else ()) + \
                (("tool_protocol",) if tool_protocol and mode == "agent" else ()):
            if existing[name] != settings[name]:
                raise WorkbenchError(f"run {existing['run_id']} was made with {name}={existing[name]!r}, not "
                                     f"{settings[name]!r}; use the same settings to resume it, or start a new run")
        tracer.resume_run(existing["run_id"])
        result = EvalResult(existing["run_id"], True)
        done = Counter(reader.answered_counts(result.run_id))
    else:
        result = EvalResult(tracer.new_run(kind="eval", run_key=key), False)
        done = Counter()
    from .session import Conversations

    chat = Conversations(session, context)
    stored = {c: f"{result.run_id}/{c}" for c in convs if c is not None}  # a conversation of this run
    kept = {}  # how many of each conversation's first questions the run has answered
    for c, conversation in stored.items():
        if existing is None:
            chat.start(conversation)
        earlier = chat.turns(conversation)
        kept[c] = len(earlier)
        done.subtract(t.question for t in earlier)  # `done` counts single questions only
    todo: list[tuple[str, str | None]] = []
    for q, c in zip(questions, convs):
        if c is not None and kept[c] > 0:  # its first lines, answered before the interruption
            kept[c] -= 1
            result.skipped += 1
        elif c is None and done[q] > 0:
            done[q] -= 1
            result.skipped += 1
        else:
            todo.append((q, c))
    # the turns of one conversation run one after the other: each waits for the one before it
    before: dict[int, int] = {}
    latest: dict[str, int] = {}
    for n, (_, c) in enumerate(todo, start=1):
        if c is not None:
            if c in latest:
                before[n] = latest[c]
            latest[c] = n
    ended = {n: threading.Event() for n in before.values()}  # set when turn n is over, however it ended
    broken: set[str] = set()  # conversations whose turn failed in this batch: their later turns are not asked
    closing = threading.Event()

    session.toolbox  # build or load the index before the clock starts
    tracer.prepare()  # and create or migrate the store: a finished turn's flush is then only its write
    shown = _Progress(len(todo)) if progress and todo else None
    # a provider that answers one turn at a time (an in-process model) gets at most that many workers
    limit = declared(provider, "max_concurrent_turns")
    concurrency = result.concurrency = min(concurrency, limit) if limit else concurrency
    pause = _Pause(setting(backoff, BACKOFF_ENV, DEFAULT_BACKOFF, NETWORK_OPTIONS["backoff"], "backoff"))
    counter = threading.Lock()

    def ask(item: tuple[int, tuple[str, str | None]]):
        """One question (after the turn before it in its conversation), asked again (after a shared pause)
        while the provider rate-limits it."""
        n, (q, c) = item
        if n in before:
            while not ended[before[n]].wait(POLL_S):
                if closing.is_set():
                    raise _Dropped()
        answer = None
        try:
            if c in broken:
                return NotAsked(q, c)
            observe = shown.observer(n, q) if shown else None
            for attempt in range(RATE_LIMIT_RETRIES + 1):
                pause.wait()
                answer = chat.ask(q, stored.get(c), provider=provider, model=model, mode=mode, k=k,
                                  tool_protocol=tool_protocol, verify=verify, verify_budget=verify_budget, log=False,
                                  observe=observe, **options)
                if answer.payload.status != "rate_limited" or attempt == RATE_LIMIT_RETRIES:
                    return answer
                pause.extend(attempt)
                with counter:
                    result.rate_limited += 1
        finally:
            if c is not None and (answer is None or not is_history(answer.record)):
                broken.add(c)
            if n in ended:
                ended[n].set()

    t0 = time.perf_counter()
    failed: set[str] = set()
    unwritten: list[str] = []

    def write(n: int, answer) -> None:
        if isinstance(answer, NotAsked):
            result.not_asked += 1
            return
        answer = session.log(answer, run_id=result.run_id)
        result.payloads.append(answer.payload)
        result.asked += 1
        if answer.payload.status != "ok":
            failed.add(answer.payload.turn_id)
        if answer.trace_error and result.trace_error is None:
            result.trace_error = answer.trace_error
        if shown is not None:
            shown.done(n, answer.record, answer.payload.status)

    def idle() -> bool:
        """While a turn has run `POLL_S` seconds and more: write the finished ones; True when asked to stop."""
        try:
            tracer.flush_if_due(0)
        except Exception as exc:  # noqa: BLE001 - kept queued and retried; reported like a failed flush
            result.trace_error = result.trace_error or str(exc)
        return stop is not None and stop.requested

    runner = _InOrder(ask, list(enumerate(todo, start=1)), concurrency)
    try:
        with tracer.buffered():
            try:
                for (n, _), answer in runner.answers(idle):
                    write(n, answer)
                    if stop is not None and stop.requested:
                        break
                    if len(tracer.pending_turn_ids()) >= MAX_UNWRITTEN:
                        result.stopped = (f"stopped after {result.asked} of {len(todo)} questions: "
                                          f"{MAX_UNWRITTEN} turns are waiting for the trace database")
                        break
                if stop is not None and stop.requested and result.asked < len(todo):
                    result.interrupted = stop.reason
                    for (n, _), answer in runner.finished():  # finished behind a turn still running (N workers)
                        write(n, answer)
            except KeyboardInterrupt:
                result.interrupted = "SIGINT"
                for (n, _), answer in runner.finished():
                    write(n, answer)
                raise
            finally:
                closing.set()
                runner.close()  # no worker asks on (their turns in progress are dropped, a resume asks them)
                unwritten = _final_flush(tracer, result)
    finally:
        if shown is not None:
            shown.close()
        result.seconds = time.perf_counter() - t0
        result.unwritten = len(unwritten)
        result.failed = len(failed | set(unwritten))
    return result


def _final_flush(tracer, result: EvalResult) -> list[str]:
    """Write what is still queued (a few tries, each waiting for the file lock); return the ids it could not."""

    for attempt in range(FINAL_FLUSH_TRIES):
        try:
            tracer.flush()
            return []
        except TraceStoreError as exc:
            result.trace_error = result.trace_error or str(exc)
            if attempt + 1 < FINAL_FLUSH_TRIES:
                time.sleep(0.5 * (attempt + 1))
    return tracer.take_unflushed()


class _InOrder:
    """`ask(item)` for every item on `concurrency` worker threads, the answers taken in item order.

    At most 2 × `concurrency` items are queued or running, so answers waiting behind a slow one stay few.
    The workers are daemon threads: a batch that stops (an interruption, an error) cancels the queued
    items and does not wait for the running ones — their answers are dropped (a resumed run asks them
    again), and a process that exits is not held up by a model call still in progress."""

    def __init__(self, ask: Callable[[Any], Any], items: list[Any], concurrency: int):
        self._ask = ask
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
