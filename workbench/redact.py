"""Secrets, in one place: what is a secret and how it is kept out of every message, payload and trace.

Three paths lead out of the workbench, and each goes through one function here:
- text (an error message, a model's or SDK's exception) through `scrub_secrets`: the given secrets,
  URL userinfo (`http://user:pass@…`), the credentials of a configured server URL (`$OLLAMA_HOST`, any
  `*_HOST` / `*_URL` / `*_ENDPOINT`), credential-looking URL query parameters (`?key=`, `?access_token=`,
  `&sig=` …) and bearer tokens become `[redacted]`;
- a provider's options, recorded with a turn or a run, through `recorded`: an option the provider's
  `options_schema` marks `writeOnly` is never recorded, and text values are scrubbed;
- a configuration stored in the trace (`runs.config`, `experiments.config`) through `redact_config`:
  a value whose key names a secret (key, token, password …) becomes `[redacted]`, at any depth, and text
  values lose their credential query parameters;
- what an audited app sends (every span attribute `collect` and `ingest` read, before anything is stored or
  assembled, and every message a replay sends) through `redact_attributes` / `redact_value`: a value whose name
  is a secret's (`is_secret_name`: api_key, *_api_key, x-api-key, *_token, secret, password, authorization,
  cookie, access_key …, the last part of a dotted attribute name such as `http.request.header.x-api-key`)
  becomes `[redacted]`, and text loses every secret by its shape (`scrub_shapes`: sk-… keys, AWS key ids,
  bearer and basic credentials, JWTs, URL credentials, `?api_key=`, `name: value` pairs whose name is a
  secret's), at any depth and inside JSON text (`llm.invocation_parameters`, `metadata`).

A leaf module: it imports nothing from the workbench but `config` (the environment's server URLs).
"""

from __future__ import annotations

import base64
import functools
import json
import re
import threading
from contextlib import contextmanager
from typing import Any, Iterable, Iterator, Mapping
from urllib.parse import unquote

from .config import environment

#: What a secret in text is replaced by.
REDACTED = "[redacted]"
# A URL query parameter (`?name=value`, `&name=value`, `;name=value`) and the words of a parameter name that
# make its value a credential (`?access_token=`, `&sig=`, `?X-Amz-Signature=`, `?api-key=`, `?client_secret=`).
_QUERY_PARAM = re.compile(r"([?&;])([^=&;#\s'\"<>?]{1,100})=([^&;#\s'\"<>\\]+)")
_CREDENTIAL_WORDS = frozenset({"key", "apikey", "token", "secret", "password", "passwd", "pwd", "pass", "sig",
                               "signature", "auth", "authorization", "credential", "credentials", "jwt", "session",
                               "sessionid", "accesstoken", "apitoken", "clientsecret", "bearer", "code"})
_BEARER = re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._~+/=-]{8,}")
# `Basic <base64 of user:password>` (checked by decoding it: "basic understanding" is no credential).
_BASIC = re.compile(r"(?i)\b(basic\s+)([A-Za-z0-9+/]{4,}={0,2})(?![A-Za-z0-9+/=])")
# Secrets known by their shape alone: OpenAI and Anthropic keys (sk-…, sk-proj-…, sk-ant-…: 20 characters or more
# after `sk-`, a digit among them, so a slug like `sk-learn-tutorial-for-beginners` is text), AWS access key ids,
# GitHub, Google API and Slack tokens, and JWTs (three base64url parts, the first two JSON objects: "eyJ").
_SHAPES = re.compile(r"\bsk-(?=[A-Za-z0-9_-]*[0-9])[A-Za-z0-9][A-Za-z0-9_-]{19,}|\b(?:AKIA|ASIA)[A-Z0-9]{16}\b"
                     r"|\bgh[pousr]_[A-Za-z0-9]{30,}|\bAIza[0-9A-Za-z_-]{30,}|\bxox[abprs]-[A-Za-z0-9-]{10,}"
                     r"|\beyJ[A-Za-z0-9_-]{4,}\.eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*")
# `name: value` / `name=value` / `"name": "value"` in text (a header line, JSON or a config inside a message): the
# value (8 or more characters up to a blank, quote, separator or backslash) is redacted when `name` is a secret's.
_NAMED = re.compile(r"""(["']?)\b([A-Za-z][A-Za-z0-9_.-]{1,80})\1\s*[:=]\s*["']?""")
_NAMED_VALUE = re.compile(r"""(?!\[redacted\])[^\s"',;&}\]\\]{8,}""")
# A part every secret name holds (lower case), and every marker a shape of `scrub_shapes` needs: a text holding none
# holds no secret it would find (with `=`, a credential query parameter's words too).
_SECRET_WORDS = ("key", "token", "secret", "passw", "pwd", "auth", "cookie", "credential", "bearer", "jwt",
                 "passphrase")
_SHAPE_MARKERS = ("sk-", "akia", "asia", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "aiza", "xox", "eyj")  # `_SHAPES`
_MARKERS = (*_SECRET_WORDS, "basic", "://", *_SHAPE_MARKERS)
_QUERY_MARKERS = ("sig", "session", "code", "pass")
#: Names of secrets (`is_secret_name`), their words joined: whole names, last words, and last two words.
_SECRET_NAMES = frozenset({"apikey", "xapikey", "token", "secret", "password", "passwd", "pwd", "authorization",
                           "proxyauthorization", "cookie", "setcookie", "accesskey", "secretaccesskey", "secretkey",
                           "privatekey", "clientsecret", "credential", "credentials", "auth", "xauthtoken",
                           "sessiontoken", "accesstoken", "refreshtoken", "idtoken", "bearer", "jwt", "apitoken",
                           "xgoogapikey", "ocpapimsubscriptionkey", "subscriptionkey", "passphrase"})
_SECRET_LAST_WORDS = frozenset({"token", "secret", "password", "passwd", "pwd", "apikey", "cookie", "authorization",
                                "credential", "credentials", "passphrase"})
_SECRET_KEY_PAIRS = frozenset({("api", "key"), ("access", "key"), ("secret", "key"), ("private", "key"),
                               ("subscription", "key"), ("signing", "key"), ("encryption", "key")})
# scheme://userinfo@ — userinfo runs to the *last* @ before the host (an unencoded @ in a password).
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/?#\s@]*(?:@[^/?#\s@]*)*@")
# The same at the start of a configured URL that may lack its scheme (OLLAMA_HOST=user:pass@host:11434).
_CONFIGURED_USERINFO = re.compile(r"^(?:[A-Za-z][A-Za-z0-9+.-]*://)?([^/?#\s]*)@")
#: Environment variables that name a server; credentials in their userinfo are secrets everywhere.
_URL_ENV_SUFFIXES = ("_HOST", "_URL", "_ENDPOINT")
#: Attributes of a provider that hold a server's URL (`provider_credentials`).
_URL_ATTRIBUTES = ("url", "host", "endpoint", "server")
#: A configuration key naming a secret (`redact_config`).
# "token" names a secret (`token`, `access_token`, `x-auth-token`) but not a count or a size (`max_tokens`,
# `tokens_in`, the context policy's `token_budget`), which are configuration worth keeping.
_SECRET_KEY = re.compile(r"key|token(?![s_a-z])|secret|password|credential|authorization", re.IGNORECASE)


def split_userinfo(url: str | None) -> tuple[str | None, tuple[str, str] | None]:
    """(`url` without its `user:password@`, (user, password) percent-decoded, or None). SDKs get the bare URL
    and the credentials as HTTP basic auth, so no client, log line or exception ever shows them."""
    if not url:
        return url, None
    m = _CONFIGURED_USERINFO.match(url.strip())
    if not m or not m.group(1):
        return url, None
    user, _, password = m.group(1).partition(":")
    return url.strip()[:m.start(1)] + url.strip()[m.end():], (unquote(user), unquote(password))


def url_credentials(url: str | None) -> list[str]:
    """The secret parts of a configured URL: its userinfo, password and user name, raw and decoded."""
    bare, creds = split_userinfo(url)
    if creds is None:
        return []
    raw = _CONFIGURED_USERINFO.match(url.strip()).group(1)
    user, password = creds
    if password:  # a user name beside a password is not a secret; alone it often is a token
        return [raw, raw.partition(":")[2], password]
    return [raw, user]


def provider_credentials(provider: object) -> list[str]:
    """Credentials in any URL-like attribute of `provider` (host, base_url, endpoint …), whatever the provider."""
    out: list[str] = []
    for name, value in vars(provider).items():
        if isinstance(value, str) and any(word in name.lower() for word in _URL_ATTRIBUTES):
            out += url_credentials(value)
    return out


def _env_credentials() -> list[str]:
    frozen = getattr(_READ_ONCE, "credentials", None)
    return frozen if frozen is not None else _read_env_credentials()


def _read_env_credentials() -> list[str]:
    env = environment()
    return [c for name in env if name.endswith(_URL_ENV_SUFFIXES) and "@" in (value := env.get(name) or "")
            for c in url_credentials(value)]


_READ_ONCE = threading.local()


@contextmanager
def environment_read_once() -> Iterator[None]:
    """Inside (on this thread), `scrub_secrets` takes the environment's server credentials as they were on entry
    instead of listing the environment again at every call: for code that scrubs many texts at once (`collect`, a
    request's turns: the listing was a fifth of auditing a turn)."""
    outer = getattr(_READ_ONCE, "credentials", None)
    _READ_ONCE.credentials = _read_env_credentials()
    try:
        yield
    finally:
        _READ_ONCE.credentials = outer


def scrub_secrets(text: str, secrets: Iterable[str | None] = ()) -> str:
    """`text` with every secret, credential of a configured server URL and secret of a known shape
    (`scrub_shapes`) replaced by `[redacted]` (see the module docstring). Every provider failure goes through it
    (`providers.http.failure`), as does the agent's message for an unexpected provider exception."""
    for secret in sorted({s for s in (*secrets, *_env_credentials()) if s and len(s) >= 4}, key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    return scrub_shapes(text)


def scrub_shapes(text: str) -> str:
    """`text` with every secret known by its shape replaced by `[redacted]`: URL userinfo, credential query
    parameters (`scrub_query_credentials`), bearer and basic credentials, OpenAI / Anthropic `sk-…` keys, AWS
    access key ids (`AKIA…`, `ASIA…`), GitHub, Google and Slack tokens, JWTs, and the value of a `name: value` or
    `name=value` pair whose name is a secret's (`is_secret_name`: `x-api-key: …`, `"password": "…"`). No value
    it replaces holds a backslash, so a JSON text stays JSON."""
    low = text.lower()  # most text holds none of the shapes' markers: substring scans, not eight regular expressions
    if not (_holds(low, _MARKERS) or ("=" in text and _holds(low, _QUERY_MARKERS))):
        return text
    # Each expression only where its own marker is (a long text, a request's spans, pays for the ones it needs:
    # ~10 ms each on 250 kB); what one replaces holds no other's marker, so the original text's markers decide.
    if "://" in text and "@" in text:
        text = _USERINFO.sub(rf"\1{REDACTED}@", text)
    text = scrub_query_credentials(text)
    if "bearer" in low:
        text = _BEARER.sub(rf"\1{REDACTED}", text)
    if "basic" in low:
        text = _BASIC.sub(_basic, text)
    if _holds(low, _SHAPE_MARKERS):
        text = _SHAPES.sub(REDACTED, text)
    return _scrub_named_values(text) if _holds(low, _SECRET_WORDS) else text


def _holds(low: str, markers: tuple[str, ...]) -> bool:
    """Whether `low` holds one of `markers`: `any(m in low for m in markers)` without a generator's frame per marker
    (a span's attributes are mostly short texts: twice as fast, a tenth of collect's parse)."""
    for m in markers:
        if m in low:
            return True
    return False


def _basic(m: re.Match) -> str:
    """A `Basic <base64>` credential (its base64 decodes to `user:password`) redacted; other text kept."""
    try:
        decoded = base64.b64decode(m[2], validate=True).decode("utf-8")
    except (ValueError, UnicodeDecodeError):
        return m[0]
    return f"{m[1]}{REDACTED}" if ":" in decoded else m[0]


def _scrub_named_values(text: str) -> str:
    """`text` with the value after each `name:` / `name=` whose name is a secret's (`_NAMED`) redacted."""
    out, last = [], 0
    for m in _NAMED.finditer(text):
        if is_secret_name(m[2]) and (value := _NAMED_VALUE.match(text, m.end())):
            out += [text[last:m.end()], REDACTED]
            last = value.end()
    return "".join(out) + text[last:] if out else text


@functools.lru_cache(maxsize=4096)  # attribute names repeat in every span
def is_secret_name(name: str) -> bool:
    """Whether an attribute, header, JSON key or parameter `name` names a secret, case-insensitively: api_key,
    apikey, *_api_key, x-api-key, token, *_token, secret, *_secret, password, passwd, authorization,
    proxy-authorization, cookie, set-cookie, access_key, secret_access_key, private_key, credentials … . Only the
    last part of a dotted name counts (`http.request.header.x-api-key`, `openai.api_key`; a trailing index such
    as `.0` skipped), and a count or size is not a secret (`max_tokens`, `llm.token_count.prompt`)."""
    parts = [p for p in str(name).split(".") if p and not p.isdigit()]
    if not parts:
        return False
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", parts[-1])
    words = [w.lower() for w in re.split(r"[\s_\-]+", spaced) if w]
    if not words:
        return False
    return ("".join(words) in _SECRET_NAMES or words[-1] in _SECRET_LAST_WORDS
            or tuple(words[-2:]) in _SECRET_KEY_PAIRS)


def redact_value(value: Any, name: str | None = None) -> Any:
    """`value` with every secret taken out (the module docstring): under a secret's `name` (`is_secret_name`) the
    whole value becomes `[redacted]`; a mapping's values are redacted by their keys, at any depth; text loses its
    secrets by shape (`scrub_shapes`), and JSON text is redacted as the JSON it holds (written again only when
    something in it was redacted, so text without a secret is kept byte for byte)."""
    if name is not None and value not in (None, "") and not isinstance(value, bool) and is_secret_name(name):
        return [REDACTED] * len(value) if isinstance(value, (list, tuple)) else REDACTED
    if isinstance(value, str):
        return _redact_text(value)
    if isinstance(value, dict):
        return {k: redact_value(v, str(k)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_value(v) for v in value]
    return value


def redact_attributes(attributes: Mapping[str, Any]) -> dict[str, Any]:
    """A span's attributes with every secret taken out (`redact_value`, each by its attribute name): what
    `collect` and `ingest` apply to each span before anything is stored or assembled."""
    return {k: redact_value(v, k) for k, v in attributes.items()}


def _redact_text(text: str) -> str:
    if text[:1] in "{[" and text[-1:] in "}]":
        try:
            parsed = json.loads(text)
        except (ValueError, RecursionError):
            parsed = None
        if isinstance(parsed, (dict, list)):
            try:
                cleaned = redact_value(parsed)
            except RecursionError:  # deeper than Python recurses: kept as text, its secrets found by shape
                return scrub_shapes(text)
            return text if cleaned == parsed else json.dumps(cleaned, ensure_ascii=False)
    return scrub_shapes(text)


def is_credential_parameter(name: str) -> bool:
    """A query parameter whose name looks like a credential's: one of its words (split at `_`, `-`, `.` and
    case changes) is key, token, secret, password, sig(nature), auth … (`_CREDENTIAL_WORDS`)."""
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", unquote(name))
    words = [w.lower() for w in re.split(r"[\s_.\-\[\]]+", spaced) if w]
    return any(w in _CREDENTIAL_WORDS for w in words) or "".join(words) in _CREDENTIAL_WORDS


def scrub_query_credentials(text: str) -> str:
    """`text` with the value of every credential-looking URL query parameter (`is_credential_parameter`)
    replaced by `[redacted]`, the parameter's name kept so the message still says what was sent."""
    if "=" not in text:
        return text
    return _QUERY_PARAM.sub(lambda m: f"{m[1]}{m[2]}={REDACTED}" if is_credential_parameter(m[2]) else m[0], text)


def recorded(schema: Mapping[str, Any], options: Mapping[str, Any]) -> dict[str, Any]:
    """The options worth recording with a turn: given (not None) and not secret (`writeOnly` in the
    provider's `options_schema`). Text goes through `scrub_secrets`, so a server option's `user:password@`
    never reaches a payload or a trace."""

    def clean(value: Any) -> Any:
        if isinstance(value, (list, tuple)):
            return [clean(v) for v in value]
        return scrub_secrets(value) if isinstance(value, str) else value

    props = dict(schema.get("properties") or {})
    return {k: clean(v) for k, v in sorted(options.items()) if v is not None and not props.get(k, {}).get("writeOnly")}


def redact_config(config: Any) -> Any:
    """Drop values whose key names a secret, at any depth, and the credential query parameters of any URL in
    a text value: secrets never reach traces."""
    if isinstance(config, dict):
        return {k: (REDACTED if _SECRET_KEY.search(str(k)) else redact_config(v)) for k, v in config.items()}
    if isinstance(config, (list, tuple)):
        return [redact_config(v) for v in config]
    if isinstance(config, str):  # a server URL's `?access_token=` is as secret as a `token` key
        return scrub_query_credentials(config)
    return config
