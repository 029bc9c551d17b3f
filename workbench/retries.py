"""Retries with exponential back-off within a time budget, for every HTTP client of the workbench: the network
providers (`providers/http.py`) and the network embeddings (`retrieval/embeddings.py`).

`with_retries` retries 429 and 5xx (`transient`) with `backoff * 2**n` between attempts, honours a server's
`Retry-After` up to `MAX_RETRY_AFTER`, and stops when the budget (from the turn's first model request, `turn_clock`)
is spent.
"""

from __future__ import annotations

import contextlib
import contextvars
import email.utils
import time
from typing import Callable, TypeVar

from .errors import ProviderError

T = TypeVar("T")

DEFAULT_RETRIES = 3  # after the first attempt, for 429 and 5xx only
DEFAULT_BACKOFF = 1.0  # seconds; attempt n waits backoff * 2**n (1, 2, 4 s by default)
MAX_BACKOFF = 30.0  # seconds: the longest wait between two attempts, and the largest `backoff`
#: A server's Retry-After is honoured up to this many seconds; asking for longer ends the turn instead.
MAX_RETRY_AFTER = 60.0
#: Seconds one turn may spend in a network provider's requests and waits (`budget`): by default, and at most.
DEFAULT_BUDGET, MAX_BUDGET = 900.0, 3600.0
BUDGET_ENV = "WORKBENCH_TURN_BUDGET"


def backoff_delay(backoff: float, attempt: int) -> float:
    """Seconds to wait before retry `attempt` (from 0): `backoff` doubled each time, at most `MAX_BACKOFF`."""
    return min(MAX_BACKOFF, backoff * 2 ** attempt)


def transient(code: int | None) -> bool:
    """Whether a request that failed with HTTP status `code` is worth retrying: 429 and 5xx."""
    return code is not None and (code == 429 or code >= 500)


def retry_after(exc: BaseException) -> float | None:
    """The wait a 429/5xx asked for: `Retry-After` in seconds or as an HTTP date (`retry-after-ms` first)."""
    headers = getattr(getattr(exc, "response", None), "headers", None)
    if headers is None:
        return None
    ms = headers.get("retry-after-ms")
    try:
        if ms is not None:
            return max(0.0, float(ms) / 1000)
        value = headers.get("retry-after")
        if value is None:
            return None
        try:
            return max(0.0, float(value))
        except ValueError:
            when = email.utils.parsedate_to_datetime(value)
            return max(0.0, when.timestamp() - time.time())
    except (TypeError, ValueError):
        return None


class Failed(Exception):
    """`with_retries` gave up: `error` is the provider's last exception, `retries` how many retries it took."""

    def __init__(self, error: BaseException, retries: int):
        super().__init__(str(error))
        self.error = error
        self.retries = retries


#: Inside `turn_clock`: [when the turn's first model request started, or None before it].
_TURN_STARTED: contextvars.ContextVar[list[float | None] | None] = contextvars.ContextVar("turn_started", default=None)


@contextlib.contextmanager
def turn_clock():
    """One turn (the agent opens one per turn): the time budget of every provider call inside counts from the
    turn's first model request, so building a retrieval index before it costs no budget."""
    token = _TURN_STARTED.set([None])
    try:
        yield
    finally:
        _TURN_STARTED.reset(token)


def with_retries(fn: Callable[[], T], retries: int, backoff: float, transient: Callable[[BaseException], bool],
                 sleep: Callable[[float], None] = time.sleep,
                 retry_after: Callable[[BaseException], float | None] | None = None,
                 budget: float | None = None) -> tuple[T, int]:
    """Call `fn`; while it raises a `transient` error (429, 5xx), wait `backoff * 2**n` and retry, at most
    `retries` times. Returns the result and the number of retries; any failure raises `Failed`.

    `retry_after(exc)` may return the wait the server asked for (HTTP Retry-After): it replaces the
    backoff, and a wait longer than `MAX_RETRY_AFTER` gives up at once rather than hang the turn.

    `budget` (seconds) bounds the whole turn (from its first model request, see `turn_clock`; outside a
    turn, from this call): no attempt starts once it is spent, and no wait runs past it; either ends the
    turn with status `over_budget`. A turn's requests therefore end within its budget plus at most one
    request's timeout.
    """
    turn = _TURN_STARTED.get()
    if turn is not None and turn[0] is None:
        turn[0] = time.perf_counter()
    started = turn[0] if turn is not None else time.perf_counter()
    deadline = None if budget is None else started + budget
    attempt = 0
    while True:
        if deadline is not None and time.perf_counter() >= deadline:
            raise Failed(_over_budget(budget, attempt, None), attempt)
        try:
            return fn(), attempt
        except Exception as exc:
            if attempt >= retries or not transient(exc):
                raise Failed(exc, attempt) from None
            asked = retry_after(exc) if retry_after is not None else None
            if asked is not None and asked > MAX_RETRY_AFTER:
                raise Failed(exc, attempt) from None
            wait = asked if asked is not None else backoff_delay(backoff, attempt)
            if deadline is not None and time.perf_counter() + wait >= deadline:
                raise Failed(_over_budget(budget, attempt + 1, exc), attempt) from None
            sleep(wait)
            attempt += 1


def _over_budget(budget: float, attempts: int, last: BaseException | None) -> ProviderError:
    tried = f" after {attempts} attempt{'s' if attempts != 1 else ''}" if attempts else " before the next model call"
    why = f" (the last answer: {type(last).__name__}: {str(last)[:200]})" if last is not None else ""
    return ProviderError(f"the turn used up its time budget of {budget:g} s{tried}{why}; retry later, or raise "
                         f"the budget option or ${BUDGET_ENV} (at most {MAX_BUDGET:g} s)", status="over_budget")
