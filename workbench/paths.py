"""Which files the app lets a visitor name: the operator model of docs/security.md.

Whoever can reach the app can type paths into its sidebar (a corpus folder or file, a trace
database). Those paths are confined to the roots the operator allows: `$WORKBENCH_ALLOWED_ROOTS`
(folders separated by `os.pathsep`), by default the bundled demo corpus and `WORKBENCH_HOME`
(which holds the uploads, the index cache and the default trace database). A path is resolved —
`~`, `..` and every symlink on the way — before it is checked, so no spelling leaves a root. The
uploads folder (`config.uploads_dir`) is never allowed, whatever the roots say: each browser session's
uploads are its own, reached only through that session's upload flow.
URLs (`file:`, `http:` …) are not paths.

Trace stores are never typed: the app offers, by name, the operator's list (`trace_stores`): `default` (the
operator's own trace database, `$WORKBENCH_DB`) and the ones named in `$WORKBENCH_STORES`, wherever they are.

Servers are confined the same way: a provider option that names a server (`"format": "uri"` in its
`options_schema`: Ollama's host, the base URL of Gemini or an OpenAI-compatible server) is the
operator's environment default unless a visitor names one listed in `$WORKBENCH_ALLOWED_SERVERS`.
Otherwise a visitor could send the operator's API key, which goes with every request, to a server
of their own, or make the app probe the operator's network. No HTTP client the project builds follows
a redirect (`NO_REDIRECTS`): an allowed server cannot forward a request to one that is not.

The CLI is the operator's own tool and reads any file its user can; it does not call this.
"""

from __future__ import annotations

import functools
import os
import posixpath
import re
from pathlib import Path
from urllib.parse import unquote, urlsplit

from .config import DEMO_CORPUS, default_db_path, env, uploads_dir, workbench_home
from .errors import PathNotAllowedError

ALLOWED_ROOTS_ENV = "WORKBENCH_ALLOWED_ROOTS"
ALLOWED_SERVERS_ENV = "WORKBENCH_ALLOWED_SERVERS"
#: The operator's trace stores beyond the default one, as `name=path` pairs separated by `os.pathsep`.
STORES_ENV = "WORKBENCH_STORES"
#: The name the app offers the operator's own trace database under (`$WORKBENCH_DB`, else the default path).
DEFAULT_STORE = "default"
#: The longest store name, and the characters it may hold (a name goes into links: `?store=NAME`).
MAX_STORE_NAME_CHARS = 40
_STORE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
#: Keyword arguments of every HTTP client the project builds for a model or embedding server (the `ollama`,
#: `openai` and `google-genai` clients): a redirect is never followed, so a request goes to the configured
#: or allowed server and nowhere else; a 3xx answer ends the request (docs/security.md, "Redirects").
NO_REDIRECTS = {"follow_redirects": False}
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]+:")  # a scheme of two letters or more (not a drive letter)


def httpx_options() -> dict:
    """Keyword arguments of the httpx clients the `ollama` and `openai` SDKs are built with: `NO_REDIRECTS`, and
    this process's one TLS context (`tls_context`) rather than one per client."""
    return {**NO_REDIRECTS, "verify": tls_context()}


def tls_context():
    """The TLS context httpx itself would build for a client — trusting `$SSL_CERT_FILE`, else `$SSL_CERT_DIR`,
    else certifi's bundle — built once per process for each value of those variables: reading the CA bundle is
    ~20 ms of CPU, nearly all of what building a client cost (0.15 ms with this one). Shared safely: the clients
    only ever set the same ALPN protocols on it (HTTP/1.1; none of them speaks HTTP/2)."""
    return _tls_context(env("SSL_CERT_FILE"), env("SSL_CERT_DIR"))


@functools.lru_cache(maxsize=4)
def _tls_context(cert_file: str | None, cert_dir: str | None):
    import httpx

    return httpx.create_ssl_context()  # reads the same two variables, as they are now


def allowed_roots() -> list[Path]:
    """The folders visitors may name, resolved: `$WORKBENCH_ALLOWED_ROOTS`, else demo corpus + WORKBENCH_HOME."""
    raw = env(ALLOWED_ROOTS_ENV, "")
    roots = [Path(p.strip()).expanduser() for p in raw.split(os.pathsep) if p.strip()]
    if not roots:
        roots = [DEMO_CORPUS, workbench_home()]
    return [r.resolve() for r in roots]


def _within(path: Path, root: Path) -> bool:
    return path == root or path.is_relative_to(root)


def confine(text: str, what: str, *, also: tuple[Path, ...] = ()) -> Path:
    """`text` as a resolved path inside an allowed root (or equal to one of `also`); else `PathNotAllowedError`."""
    text = (text or "").strip()
    roots = allowed_roots()
    hint = "allowed folders: " + ", ".join(str(r) for r in roots) + f" (the operator sets {ALLOWED_ROOTS_ENV})"
    if not text:
        raise PathNotAllowedError(f"{what}: give a path; {hint}")
    if "\0" in text or _URL.match(text):
        raise PathNotAllowedError(f"{what} {text!r} is not allowed: give a file or folder path, not a URL; {hint}")
    try:
        resolved = Path(text).expanduser().resolve()
    except (OSError, RuntimeError, ValueError):  # e.g. `~nosuchuser`, a symlink loop
        raise PathNotAllowedError(f"{what} {text!r} is not allowed: it cannot be resolved; {hint}") from None
    uploads = uploads_dir().resolve()
    if _within(resolved, uploads):
        raise PathNotAllowedError(f"{what} {text!r} is not allowed: {uploads} holds the uploads of this app's "
                                  "visitors, each visible only to the browser session that uploaded it; "
                                  "choose Upload to load a file of your own")
    if any(_within(resolved, r) for r in roots) or resolved in {p.resolve() for p in also}:
        return resolved
    raise PathNotAllowedError(f"{what} {text!r} is not allowed: it is outside the folders this app may use; {hint}")


_ENTRY_START = re.compile(r"^\s*[A-Za-z0-9][A-Za-z0-9_.-]*\s*=")  # `NAME=`: where an entry of the list begins


def _store_entries(raw: str) -> list[str]:
    """The entries of `$WORKBENCH_STORES`, split at `os.pathsep`, except inside a team store's name
    (`ducklake:postgres:<libpq>` holds colons): a piece that does not begin `NAME=` continues the entry before."""
    entries: list[str] = []
    for piece in raw.split(os.pathsep):
        team = entries and re.match(r"^[^=]*=\s*ducklake(:postgres(:|$)|$)", entries[-1])
        if team and (entries[-1].rstrip().endswith(("=ducklake", ":postgres")) or not _ENTRY_START.match(piece)):
            entries[-1] += os.pathsep + piece
        else:
            entries.append(piece)
    return entries


def _store(where: str) -> Path | str:
    """A listed store's file path (resolved), or a team store's name (`ducklake:postgres:<libpq>`: any name with a
    scheme) as given; the app checks the latter (`ui.stores`: a name carrying a password is the operator's error)."""
    return where if _URL.match(where) else Path(where).expanduser().resolve()


def trace_stores() -> dict[str, Path | str]:
    """The trace stores the app may open, by name: `default` (`$WORKBENCH_DB`, else `<WORKBENCH_HOME>/traces.duckdb`)
    first, then each `name=path` of `$WORKBENCH_STORES` in the order given (a relative path is taken from the
    directory the app was started in; a team store, `name=ducklake:postgres:<libpq>`, as given). A malformed list is
    the operator's error: `PathNotAllowedError` saying which entry and why."""
    stores: dict[str, Path | str] = {DEFAULT_STORE: default_db_path()}
    for entry in (e.strip() for e in _store_entries(env(STORES_ENV, ""))):
        if not entry:
            continue
        name, sep, path = (part.strip() for part in entry.partition("="))
        if not sep or not path:
            raise PathNotAllowedError(f"{STORES_ENV}: {entry!r} is not NAME=PATH")
        if len(name) > MAX_STORE_NAME_CHARS or not _STORE_NAME.match(name):
            raise PathNotAllowedError(f"{STORES_ENV}: the store name {name!r} must be 1 to {MAX_STORE_NAME_CHARS} "
                                      "letters, digits, '.', '_' or '-', starting with a letter or digit")
        if name in stores:
            raise PathNotAllowedError(f"{STORES_ENV}: the store name {name!r} is given twice"
                                      + (f" ({DEFAULT_STORE!r} is $WORKBENCH_DB)" if name == DEFAULT_STORE else ""))
        stores[name] = _store(path)
    return stores


def _server(url: str) -> tuple[str, str, int | None, str] | None:
    """(scheme, host, port, path) of an http(s) URL, without userinfo, lower-cased; None when not one."""

    if re.search(r"[\s\\\x00-\x1f\x7f]", url.strip()):  # parsers disagree on these: never a server here
        return None
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        return None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        return None
    default = 443 if parts.scheme.lower() == "https" else 80
    path = posixpath.normpath(unquote(parts.path)) if parts.path else ""  # no `/v1/../` out of an allowed path
    return parts.scheme.lower(), parts.hostname.lower(), port or default, path.rstrip("/")


def allowed_servers() -> list[str]:
    """The servers visitors may name: `$WORKBENCH_ALLOWED_SERVERS`, URLs separated by spaces or commas."""
    return [u for u in re.split(r"[\s,]+", env(ALLOWED_SERVERS_ENV, "")) if u]


def confine_server(text: str, what: str) -> str:
    """`text` if it is an http(s) URL on a server the operator allows (same scheme, host and port, and a
    path under the allowed one); else `PathNotAllowedError`."""
    allowed = allowed_servers()
    hint = (f"allowed servers: {', '.join(allowed)}" if allowed else "this app uses the servers its operator "
            "configured") + f" (the operator sets {ALLOWED_SERVERS_ENV})"
    wanted = _server(text)
    for url in allowed:
        ok = _server(url)
        if wanted and ok and wanted[:3] == ok[:3] and (wanted[3] + "/").startswith(ok[3] + "/"):
            return text.strip()
    raise PathNotAllowedError(f"{what} is not allowed: {hint}")
