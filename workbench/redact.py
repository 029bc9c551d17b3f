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
  values lose their credential query parameters.

A leaf module: it imports nothing from the workbench but `config` (the environment's server URLs).
"""

from __future__ import annotations

import re
from typing import Any, Iterable, Mapping
from urllib.parse import unquote

from .config import environment

#: What a secret in text is replaced by.
REDACTED = "[redacted]"
# A URL query parameter (`?name=value`, `&name=value`, `;name=value`) and the words of a parameter name that
# make its value a credential (`?access_token=`, `&sig=`, `?X-Amz-Signature=`, `?api-key=`, `?client_secret=`).
_QUERY_PARAM = re.compile(r"([?&;])([^=&;#\s'\"<>?]{1,100})=([^&;#\s'\"<>]+)")
_CREDENTIAL_WORDS = frozenset({"key", "apikey", "token", "secret", "password", "passwd", "pwd", "pass", "sig",
                               "signature", "auth", "authorization", "credential", "credentials", "jwt", "session",
                               "sessionid", "accesstoken", "apitoken", "clientsecret", "bearer", "code"})
_BEARER = re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._~+/=-]{8,}")
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
    return [c for name, value in environment().items() if name.endswith(_URL_ENV_SUFFIXES) and "@" in value
            for c in url_credentials(value)]


def scrub_secrets(text: str, secrets: Iterable[str | None] = ()) -> str:
    """`text` with every secret, URL userinfo, credential of a configured server URL, credential query
    parameter and bearer token replaced by `[redacted]` (see the module docstring). Every provider failure goes
    through it (`providers.http.failure`), as does the agent's message for an unexpected provider exception."""
    for secret in sorted({s for s in (*secrets, *_env_credentials()) if s and len(s) >= 4}, key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    text = _USERINFO.sub(rf"\1{REDACTED}@", text)
    text = scrub_query_credentials(text)
    return _BEARER.sub(rf"\1{REDACTED}", text)


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
