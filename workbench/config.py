"""Configuration read from the environment once, at the edge, then passed in.

This is the one module that reads the process environment (`tests/test_config_edge.py` holds that no other module
touches `os.environ`). Each variable is named by one constant, here when several modules read it.

`Settings` (frozen) is the environment read once: `Settings.from_env()` at the edge, passed down. Where it is built
and what takes it:

- the CLI: `cli.main` reads it once (`args.settings`); the trace database (`commands/_options.db_path`), the
  sessions of `ask`, `chat` and `eval`, and every provider those sessions build take it from there;
- a library `Session` (a notebook, a script) opened without `settings`: it reads them when it opens (its trace
  database, lock timeout, live export), and its providers read the environment when each is built — a long-lived
  session sees a changed environment, as SDKs that read their own variables (`OLLAMA_API_KEY`) do;
- the providers (`providers.get_provider(..., settings=)`: model, server, key and API version defaults, and the
  key their failure messages scrub); a network embedding takes `settings` among its options, else reads them when
  it is built; the notebooks' trace databases (`analysis.inputs.notebook_db`, `analysis_db`).

Still read with `env()` when needed, and why:

- the app (`ui/`): `default_db_path()`, `analysts()` and the upload limits on each rerun, which is the app's edge
  (a Streamlit script runs top to bottom per interaction);
- option defaults of the network providers (`providers/options.setting`, `http.network_settings`: timeout,
  retries, back-off, budget, context tokens) and llama.cpp's model loader (`n_ctx`, threads, GGUF path): read
  when a provider is built, from the same environment its `settings` snapshot has;
- process-wide switches read where they act, once per use: plugins (`registry`), the folders and servers a
  visitor may name (`paths`), live OTLP export (`trace/live.from_env`, one exporter per endpoint), a trace
  reader's or writer's timeouts when none is passed (`lock_timeout()`, `query_timeout()`), and the credentials of
  configured server URLs that `redact.scrub_secrets` removes from every message (it must see what the SDKs see).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Mapping

from .errors import WorkbenchError

PROJECT_ROOT = Path(__file__).resolve().parent.parent
DEMO_CORPUS = PROJECT_ROOT / "data" / "demo"
#: Optional third-party benchmark data (not part of the project) is looked for here when set.
BENCHMARK_DATA_ENV = "WORKBENCH_BENCHMARK_DATA"
#: The provider a turn asks when nobody says (`Session.ask`, a batch, the CLI, the app's sidebar): the one that
#: needs no model, no server and no key.
DEFAULT_PROVIDER = "offline"
#: The retriever a session searches with when nobody says (`Session`, a batch, the CLI, the app's sidebar).
DEFAULT_RETRIEVER = "bm25"
#: How a turn asks when nobody says (`Session.ask`, a batch, the CLI, the app's sidebar): the agent with tools
#: (the other way is `excerpts`; `types.Mode` lists both).
DEFAULT_MODE = "agent"
#: The faithfulness judge whose verdicts are stored with a turn when nobody says (`Session.ask`, verification,
#: `workbench judge`): the fast offline one.
DEFAULT_JUDGE = "lexical"
#: Results per search / excerpts when nobody says (`Session.ask`, a batch, the CLI, the app's sidebar, the search tool).
DEFAULT_K = 5
#: Largest k (results per search / excerpts) a turn accepts: far above any useful value, far below
#: what the trace store's INTEGER columns hold, and refused before a turn runs (never after).
MAX_K = 1000
#: Longest question a turn accepts, in characters (the app's chat box, `ask`, question files, `Session.ask`):
#: a question is sent to the model, searched, judged and stored whole with every turn, so it is bounded
#: before anything runs (a 10 MB question took 18 s and 468 MB per ask).
MAX_QUESTION_CHARS = 8000
#: Seconds `collect` gives a request to arrive whole, request line to last body byte (`--read-timeout`, docs/security.md).
COLLECT_READ_TIMEOUT_S = 30.0
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
    return _stripped(os.environ, name, default)


def usable_cores() -> int:
    """The CPU cores this process may run on (its affinity where the OS says, else the machine's count)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def set_env(name: str, value: str) -> None:
    """Set the environment variable `name` for this process and the processes it starts (a setting given on the
    command line that a child process reads, e.g. `--data-path`)."""
    os.environ[name] = value


def _stripped(environ: Mapping[str, str], name: str, default: str | None) -> str | None:
    value = (environ.get(name) or "").strip()
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
    return _names(env(ANALYSTS_ENV))


def _names(value: str | None) -> frozenset[str]:
    return frozenset(name.strip() for name in (value or "").split(",") if name.strip())


#: Where caches (indexes, uploads, logs) and the default trace database live; the trace database itself.
HOME_ENV, DB_ENV = "WORKBENCH_HOME", "WORKBENCH_DB"
#: How long a trace writer or reader waits for another process's lock, and one read query may run.
LOCK_TIMEOUT_ENV, QUERY_TIMEOUT_ENV = "WORKBENCH_LOCK_TIMEOUT", "WORKBENCH_QUERY_TIMEOUT"
#: Where Ollama listens, and a Gemini-compatible server: the providers and the embeddings alike.
OLLAMA_HOST_ENV, GEMINI_BASE_URL_ENV = "OLLAMA_HOST", "GEMINI_BASE_URL"


def workbench_home() -> Path:
    """Where caches (indexes) and the default trace database live: `$WORKBENCH_HOME`."""
    return _home(os.environ)


def _home(environ: Mapping[str, str]) -> Path:
    home = _stripped(environ, HOME_ENV, None)
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


def gemini_api_key(settings: "Settings | None" = None) -> str | None:
    """The Gemini API key of `settings` (default: the environment now; `GEMINI_KEY_ENVS`, the first one set), else
    None."""
    read = settings.get if settings is not None else env
    return next((read(v) for v in GEMINI_KEY_ENVS if read(v)), None)


def default_db_path() -> Path:
    """The trace database: `$WORKBENCH_DB`, else `<WORKBENCH_HOME>/traces.duckdb`."""
    return Settings.from_env().trace_db


#: The longest wait any duration setting may ask for (a lock, a query, an export request), docs/security.md:
#: `inf` or `1e300` would reach `time` and DuckDB as an overflow, and nobody waits an hour on purpose.
MAX_WAIT_SECONDS = 3600.0


def check_wait_seconds(value: float, what: str) -> float:
    """`value` if it is a finite number of seconds of at most `MAX_WAIT_SECONDS`; else a `WorkbenchError`
    naming `what` and the range (NaN and infinities included)."""
    if not value <= MAX_WAIT_SECONDS:
        raise WorkbenchError(f"{what} is too long: a wait may be at most {MAX_WAIT_SECONDS:g} seconds (one hour)")
    return value


def seconds_setting(name: str, default: float, environ: Mapping[str, str] | None = None) -> float:
    """The number of seconds in `$name` (`default` when unset, empty or not above 0); not a number, or over
    `MAX_WAIT_SECONDS`: an error."""
    raw = _stripped(os.environ if environ is None else environ, name, None)
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


#: Seconds a trace writer or reader waits for another process's lock, and one read query may run, when the
#: environment does not say: a query's is shorter, so a writer waiting for a reader's query always gets in.
DEFAULT_LOCK_TIMEOUT, DEFAULT_QUERY_TIMEOUT = 30.0, 20.0


def lock_timeout() -> float:
    """How long a trace writer or reader waits for another process's lock: `$WORKBENCH_LOCK_TIMEOUT` (30 s)."""
    return seconds_setting(LOCK_TIMEOUT_ENV, DEFAULT_LOCK_TIMEOUT)


def query_timeout() -> float:
    """How long one read query may run before it is stopped: `$WORKBENCH_QUERY_TIMEOUT` (20 s)."""
    return seconds_setting(QUERY_TIMEOUT_ENV, DEFAULT_QUERY_TIMEOUT)


@dataclass(frozen=True)
class Settings:
    """The environment, read once at the edge (`from_env`: the CLI's `main`, or a `Session`, provider or notebook
    helper called without settings) and passed down: the workbench's own settings typed (a bad one is an error
    there and then), and a read-only snapshot of the whole environment for the variables a provider names (`get`)."""

    home: Path
    trace_db: Path
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT
    query_timeout: float = DEFAULT_QUERY_TIMEOUT
    analysts: frozenset[str] = frozenset()
    otlp_endpoint: str | None = None
    environ: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}), repr=False, compare=False)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> "Settings":
        """The settings of `environ` (default: this process's environment, copied now); a bad duration is a
        `WorkbenchError` naming the variable."""
        snapshot = MappingProxyType(dict(os.environ if environ is None else environ))
        home = _home(snapshot)
        db = _stripped(snapshot, DB_ENV, None)
        return cls(home=home, trace_db=Path(db).expanduser() if db else home / "traces.duckdb",
                   lock_timeout=seconds_setting(LOCK_TIMEOUT_ENV, DEFAULT_LOCK_TIMEOUT, snapshot),
                   query_timeout=seconds_setting(QUERY_TIMEOUT_ENV, DEFAULT_QUERY_TIMEOUT, snapshot),
                   analysts=_names(_stripped(snapshot, ANALYSTS_ENV, None)),
                   otlp_endpoint=_stripped(snapshot, OTLP_ENDPOINT_ENV, None), environ=snapshot)

    @classmethod
    def given(cls, settings: "Settings | None") -> "Settings":
        """`settings`, else the environment's now: a library entry called without settings is an edge too."""
        return settings if settings is not None else cls.from_env()

    def get(self, name: str, default: str | None = None) -> str | None:
        """`$name` as it was when the settings were read, as `env` gives it (blanks stripped; blank is unset)."""
        return _stripped(self.environ, name, default)

    def notebook_db(self, name: str) -> Path:
        """Notebook `name`'s own trace database, `<WORKBENCH_HOME>/notebooks/<name>.duckdb` (its demo data stays
        out of the app's)."""
        return self.home / "notebooks" / f"{name}.duckdb"
