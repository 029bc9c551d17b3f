"""Batch runs: a list of questions into one resumable run of the trace store.

Resuming: the run is found by `run_id`, or by its run key (a hash of the questions and the
configuration), so re-running the same batch after an interruption continues the same run.
Questions that already have an `ok` turn in the run are skipped; failed turns are asked again.
Turns are buffered and flushed together (whole turns per transaction), so an interruption loses at
most the last half second of turns, never part of one. Used by `workbench eval`, the notebooks
and the benchmarks.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

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


def run_key(questions: list[str], settings: dict[str, Any], corpus_hash: str) -> str:
    blob = json.dumps({"questions": questions, "settings": settings, "corpus": corpus_hash}, sort_keys=True)
    return "eval-" + hashlib.sha256(blob.encode()).hexdigest()[:24]


def run_eval(session, questions: list[str], *, provider: str = "offline", model: str | None = None,
             mode: str = "agent", k: int = 5, options: dict[str, Any] | None = None, run_id: str | None = None,
             new_run: bool = False, progress: bool = True, tool_protocol: str | None = None, verify: bool = False,
             verify_budget: int = DEFAULT_BUDGET) -> EvalResult:
    """Ask every question into one run of `session`'s trace store; skip those already answered in it.

    `options` are the provider's options (checked against its `options_schema` by `Session.ask`);
    `tool_protocol` is the agent's tool protocol (`native` or `json-steps`, default: the provider's).
    `verify` verifies every answer by ablation (`Session.verify`, at most `verify_budget` re-runs each) over
    the session's one loaded index; a verifying batch is its own run."""
    options = dict(options or {})
    from .providers import declared
    from .providers.options import recorded
    from .trace import TraceReader

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
    t0 = time.perf_counter()
    try:
        with tracer.buffered():
            for q in todo:
                answer = session.ask(q, provider=provider, model=model, mode=mode, k=k, run_id=result.run_id,
                                     tool_protocol=tool_protocol, verify=verify, verify_budget=verify_budget,
                                     **options)
                result.payloads.append(answer.payload)
                result.asked += 1
                result.failed += answer.payload["status"] != "ok"
                if bar is not None:
                    bar.update(1)
    finally:
        if bar is not None:
            bar.close()
        result.seconds = time.perf_counter() - t0
    return result
