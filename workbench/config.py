"""Configuration read from the environment once, at the edge (CLI, app), then passed in.

This is the one module that reads the process environment: every other module asks `env(NAME)` (or
`environment()` for the whole mapping), so `tests/test_config_edge.py` can hold that no other module
touches `os.environ`. Each variable is named by a constant in the module that uses it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping

from .errors import WorkbenchError

PROJECT_ROOT = Path(__file__).resolve().parent.parent
DEMO_CORPUS = PROJECT_ROOT / "data" / "demo"
#: Optional third-party benchmark data (not part of the project) is looked for here when set.
BENCHMARK_DATA_ENV = "WORKBENCH_BENCHMARK_DATA"
#: The provider a turn asks when nobody says (`Session.ask`, a batch, the CLI, the app's sidebar): the one that
#: needs no model, no server and no key.
DEFAULT_PROVIDER = "offline"
#: Results per search / excerpts when nobody says (`Session.ask`, a batch, the CLI, the app's sidebar, the search tool).
DEFAULT_K = 5
#: Largest k (results per search / excerpts) a turn accepts: far above any useful value, far below
#: what the trace store's INTEGER columns hold, and refused before a turn runs (never after).
MAX_K = 1000
#: Longest question a turn accepts, in characters (the app's chat box, `ask`, question files, `Session.ask`):
#: a question is sent to the model, searched, judged and stored whole with every turn, so it is bounded
#: before anything runs (a 10 MB question took 18 s and 468 MB per ask).
MAX_QUESTION_CHARS = 8000
#: Longest conversation id (`ask --conversation`, `chat`, a questions file's `"conversation"`), in characters.
MAX_CONVERSATION_ID_CHARS = 200
#: Most earlier turns a follow-up may keep with their tool results (`--context-turns`, `ContextPolicy.turns`).
MAX_CONTEXT_TURNS = 50
#: How many earlier turns keep their tool results when nobody says (`ContextPolicy.turns`, `--context-turns`).
DEFAULT_CONTEXT_TURNS = 2
#: Largest token budget a context policy may state (`ContextPolicy.token_budget`): above any model's context
#: (the largest are 2 million tokens), far below what the trace store's INTEGER column holds.
MAX_CONTEXT_TOKENS = 10_000_000


def env(name: str, default: str | None = None) -> str | None:
    """The value of the environment variable `name` with surrounding blanks removed; `default` when it is
    unset or blank."""
    value = os.environ.get(name, "").strip()
    return value or default


def environment() -> Mapping[str, str]:
    """The whole process environment (read it, never write it): for readiness checks of every provider at once
    and for the credentials of every configured server URL (`redact.scrub_secrets`)."""
    return os.environ


def set_process_default(name: str, value: str) -> None:
    """Set `$name` for this process (and the libraries it loads) unless the user set it: how the workbench
    keeps an SDK offline (`HF_HUB_OFFLINE`) or its threads quiet (`OMP_WAIT_POLICY`)."""
    os.environ.setdefault(name, value)


def child_environment(**extra: str) -> dict[str, str]:
    """The environment of a child process this one starts: this one's, plus `extra`."""
    return {**os.environ, **extra}


#: Who may use the app's Trace explorer SQL and read other people's turns, tool calls and passages when the app
#: has sign-in: emails or subjects, comma-separated (docs/security.md, "Who sees what").
ANALYSTS_ENV = "WORKBENCH_ANALYSTS"


def analysts() -> frozenset[str]:
    """The analysts named in `$WORKBENCH_ANALYSTS` (emails or OIDC subjects, comma-separated, blanks ignored);
    compared exactly, as the identity provider sends them."""
    return frozenset(name.strip() for name in (env(ANALYSTS_ENV) or "").split(",") if name.strip())


def workbench_home() -> Path:
    """Where caches (indexes) and the default trace database live: `$WORKBENCH_HOME`."""
    home = env("WORKBENCH_HOME")
    return Path(home).expanduser() if home else Path.home() / ".cache" / "provenance-workbench"


def benchmark_data_dir() -> Path:
    """Where optional third-party benchmark data (Arduino Help Center, ExpertQA, SciFact) is looked for:
    `$WORKBENCH_BENCHMARK_DATA`, else `shared/data` beside the project folder (the development layout).
    Whatever needs it says so and skips when it is absent."""
    data = env(BENCHMARK_DATA_ENV)
    return Path(data).expanduser() if data else PROJECT_ROOT.parent / "shared" / "data"


def index_cache_dir() -> Path:
    return workbench_home() / "indexes"


def uploads_dir() -> Path:
    """Where the app stores uploads, one folder per browser session: never a path a visitor may type
    (`paths.confine`)."""
    return workbench_home() / "uploads"


#: Where a Gemini key is read from, in order: the Gemini provider and the Gemini embedding alike.
GEMINI_KEY_ENVS = ("GEMINI_API_KEY", "GOOGLE_API_KEY")


def gemini_api_key() -> str | None:
    """The Gemini API key of the environment (`GEMINI_KEY_ENVS`, the first one set), else None."""
    return next((env(v) for v in GEMINI_KEY_ENVS if env(v)), None)


def default_db_path() -> Path:
    """The trace database: `$WORKBENCH_DB`, else `<WORKBENCH_HOME>/traces.duckdb`."""
    db = env("WORKBENCH_DB")
    return Path(db).expanduser() if db else workbench_home() / "traces.duckdb"


#: The longest wait any duration setting may ask for (a lock, a query, an export request), docs/security.md:
#: `inf` or `1e300` would reach `time` and DuckDB as an overflow, and nobody waits an hour on purpose.
MAX_WAIT_SECONDS = 3600.0


def check_wait_seconds(value: float, what: str) -> float:
    """`value` if it is a finite number of seconds of at most `MAX_WAIT_SECONDS`; else a `WorkbenchError`
    naming `what` and the range (NaN and infinities included)."""
    if not value <= MAX_WAIT_SECONDS:
        raise WorkbenchError(f"{what} is too long: a wait may be at most {MAX_WAIT_SECONDS:g} seconds (one hour)")
    return value


def seconds_setting(name: str, default: float) -> float:
    """The number of seconds in `$name` (`default` when unset, empty or not above 0); not a number, or over
    `MAX_WAIT_SECONDS`: an error."""
    raw = env(name)
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise WorkbenchError(f"{name}={raw!r} is not a number of seconds") from None
    if value != value:  # NaN
        raise WorkbenchError(f"{name}={raw!r} is not a number of seconds")
    return check_wait_seconds(value, f"{name}={raw}") if value > 0 else default


#: Where live OTLP export sends each written turn (`trace/live.py`); unset: no live export.
OTLP_ENDPOINT_ENV = "WORKBENCH_OTLP_ENDPOINT"


def lock_timeout() -> float:
    """How long a trace writer or reader waits for another process's lock: `$WORKBENCH_LOCK_TIMEOUT` (30 s)."""
    return seconds_setting("WORKBENCH_LOCK_TIMEOUT", 30.0)


def query_timeout() -> float:
    """How long one read query may run before it is stopped: `$WORKBENCH_QUERY_TIMEOUT` (20 s).

    Shorter than `lock_timeout()`, so a writer waiting for a reader's query always gets in."""
    return seconds_setting("WORKBENCH_QUERY_TIMEOUT", 20.0)
