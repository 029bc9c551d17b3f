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

Nothing is lost silently: a flush that fails (e.g. another process kept the file locked) keeps
its turns and retries them; turns still unwritten at the end count as failed (`unwritten`,
`trace_error`), and because they are not in the store the resume asks those questions again.
A batch stops asking once `MAX_UNWRITTEN` turns wait for a store that keeps refusing them (the
answers its workers are still computing are dropped: they were never written, so a resume asks them).
"""

from __future__ import annotations

import hashlib
import json
import sys
import threading
import time
from collections import Counter, deque
from contextlib import closing
from dataclasses import dataclass, field
from itertools import islice
from typing import Any, Callable, Iterator

from .errors import WorkbenchError
from .verify import DEFAULT_BUDGET


@dataclass
class EvalResult:
    run_id: str
    resumed: bool
    asked: int = 0
    skipped: int = 0
    failed: int = 0
    seconds: float = 0.0
    payloads: list[dict[str, Any]] = field(default_factory=list)
    concurrency: int = 1
    #: Turns a provider ended as `rate_limited` that were paused and asked again (not written).
    rate_limited: int = 0
    #: Turns asked but not written to the trace store (they count as failed; the resume asks them again).
    unwritten: int = 0
    #: The first trace-store failure of the batch (a flush that failed, even if a retry then succeeded).
    trace_error: str | None = None
    #: Why the batch stopped before its last question, if it did.
    stopped: str | None = None


RATE_LIMIT_RETRIES = 6  # a question is re-asked at most this often after rate limits, then written as failed
#: Queued turns a batch lets wait for a trace store that keeps refusing them before it stops asking.
MAX_UNWRITTEN = 1000
FINAL_FLUSH_TRIES = 3


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
        import random

        from .providers.base import backoff_delay

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
             verify_budget: int = DEFAULT_BUDGET) -> EvalResult:
    """Ask every question into one run of `session`'s trace store; skip those already answered in it.

    `options` are the provider's options (checked against its `options_schema` by `Session.ask`);
    `tool_protocol` is the agent's tool protocol (`native` or `json-steps`, default: the provider's);
    `concurrency` turns run at once (see the module docstring); `backoff` is the first rate-limit pause in
    seconds (default: `$WORKBENCH_PROVIDER_BACKOFF`, else 1 s). `verify` verifies every answer by
    ablation (`Session.verify`, at most `verify_budget` re-runs each, in the worker that asked it) over
    the session's one loaded index; a verifying batch is its own run."""
    options = dict(options or {})
    from .providers import declared
    from .providers.base import BACKOFF_ENV, DEFAULT_BACKOFF, NETWORK_OPTIONS, setting
    from .providers.options import recorded
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
    key = run_key(questions, settings, session.corpus.content_hash)
    reader = TraceReader(tracer.path, timeout=tracer.timeout)
    existing = None if new_run else reader.find_run(run_id=run_id, run_key=None if run_id else key)
    if run_id is not None and existing is None:
        raise WorkbenchError(f"no run {run_id!r} in {tracer.path}; omit --run-id to start a new run")
    if existing is not None:
        for name in ("provider", "retriever", "mode", "k") + (("model",) if model else ()) + \
                (("tool_protocol",) if tool_protocol and mode == "agent" else ()):
            if existing[name] != settings[name]:
                raise WorkbenchError(f"run {existing['run_id']} was made with {name}={existing[name]!r}, not "
                                     f"{settings[name]!r}; use the same settings to resume it, or --new-run")
        tracer.resume_run(existing["run_id"])
        result = EvalResult(existing["run_id"], True)
        done = Counter(reader.answered_counts(result.run_id))
    else:
        result = EvalResult(tracer.new_run(kind="eval", run_key=key), False)
        done = Counter()
    todo = []
    for q in questions:
        if done[q] > 0:
            done[q] -= 1
            result.skipped += 1
        else:
            todo.append(q)

    session.toolbox  # build or load the index before the clock starts
    bar = None
    if progress and todo:
        from tqdm import tqdm

        bar = tqdm(total=len(todo), desc="eval", unit="turn", file=sys.stderr, leave=False)
    # a provider that answers one turn at a time (an in-process model) gets at most that many workers
    limit = declared(provider, "max_concurrent_turns")
    concurrency = result.concurrency = min(concurrency, limit) if limit else concurrency
    pause = _Pause(setting(backoff, BACKOFF_ENV, DEFAULT_BACKOFF, NETWORK_OPTIONS["backoff"], "backoff"))
    counter = threading.Lock()

    def ask(q: str):
        """One question, asked again (after a shared pause) while the provider rate-limits it."""
        for attempt in range(RATE_LIMIT_RETRIES + 1):
            pause.wait()
            answer = session.ask(q, provider=provider, model=model, mode=mode, k=k, tool_protocol=tool_protocol,
                                 verify=verify, verify_budget=verify_budget, log=False, **options)
            if answer.payload["status"] != "rate_limited" or attempt == RATE_LIMIT_RETRIES:
                return answer
            pause.extend(attempt)
            with counter:
                result.rate_limited += 1

    t0 = time.perf_counter()
    failed: set[str] = set()
    try:
        with tracer.buffered(), closing(_in_order(ask, todo, concurrency)) as answers:
            for answer in answers:
                answer = session.log(answer, run_id=result.run_id)
                result.payloads.append(answer.payload)
                result.asked += 1
                if answer.payload["status"] != "ok":
                    failed.add(answer.payload["turn_id"])
                if answer.trace_error and result.trace_error is None:
                    result.trace_error = answer.trace_error
                if bar is not None:
                    bar.update(1)
                if len(tracer.pending_turn_ids()) >= MAX_UNWRITTEN:
                    result.stopped = (f"stopped after {result.asked} of {len(todo)} questions: "
                                      f"{MAX_UNWRITTEN} turns are waiting for the trace database")
                    break
            answers.close()  # no worker asks on while the last flush waits (an early stop drops their answers)
            unwritten = _final_flush(tracer, result)
    finally:
        if bar is not None:
            bar.close()
        result.seconds = time.perf_counter() - t0
    result.unwritten = len(unwritten)
    result.failed = len(failed | set(unwritten))
    return result


def _final_flush(tracer, result: EvalResult) -> list[str]:
    """Write what is still queued (a few tries, each waiting for the file lock); return the ids it could not."""
    from .errors import TraceStoreError

    for attempt in range(FINAL_FLUSH_TRIES):
        try:
            tracer.flush()
            return []
        except TraceStoreError as exc:
            result.trace_error = result.trace_error or str(exc)
            if attempt + 1 < FINAL_FLUSH_TRIES:
                time.sleep(0.5 * (attempt + 1))
    return tracer.take_unflushed()


def _in_order(ask: Callable[[str], Any], questions: list[str], concurrency: int) -> Iterator[Any]:
    """`ask(q)` for every question, `concurrency` at a time, yielded in question order.

    At most 2 × `concurrency` questions are in flight, so answers waiting behind a slow one stay few.
    On an early exit (an interruption, an error) queued questions are cancelled and the running ones
    finish in the background; their answers are dropped (a resumed run asks them again)."""
    if concurrency == 1:
        for q in questions:
            yield ask(q)
        return
    from concurrent.futures import ThreadPoolExecutor  # only batches with workers pay for the import

    pool = ThreadPoolExecutor(concurrency, thread_name_prefix="eval")
    pending = iter(questions)
    window = deque(pool.submit(ask, q) for q in islice(pending, 2 * concurrency))
    try:
        while window:
            answer = window.popleft().result()
            for q in pending:  # refill one
                window.append(pool.submit(ask, q))
                break
            yield answer
    finally:
        pool.shutdown(wait=not window, cancel_futures=True)
