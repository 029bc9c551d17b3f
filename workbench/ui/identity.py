"""Who is looking: sign-in through the team's identity provider, the viewer's identity and role (docs/security.md).

When Streamlit's own `[auth]` secrets are configured (`.streamlit/secrets.toml`, or `--secrets.files`), every
visitor signs in (`st.login`, OpenID Connect through Authlib) before the app draws anything else: `gate`
stops the script until then. The signed-in person's id is the provider's `email` claim, else its `sub`; an
analyst is one named in `WORKBENCH_ANALYSTS` (`config.analysts`).

Without `[auth]` there is nobody to name: the viewer is a browser, known by a token (`Viewer.owner`) that
keeps its conversations and uploads its own, and the one operator the app serves is the analyst. Started on an
address that is not loopback without `[auth]`, the app says on every page (and once in its log) that anyone
who can reach it is trusted.
"""

from __future__ import annotations

import binascii
import hashlib
import ipaddress
import logging
import uuid
from collections.abc import Mapping
from dataclasses import dataclass

import streamlit as st

from ..config import analysts
from ..render.escaping import escape_markdown

log = logging.getLogger(__name__)

#: Session-state key of the viewer of this browser session (set by `gate`).
VIEWER = "viewer"
#: Session-state key of this browser session's own token, when the browser sends no XSRF cookie to key it by.
_SESSION_TOKEN = "viewer_token"
#: Streamlit's XSRF cookie: set once per browser and kept across reloads, sent with every app connection.
_XSRF_COOKIE = "_streamlit_xsrf"
TRUST_WARNING = ("This app has no sign-in and listens on a network address: anyone who can reach it is trusted. "
                 "They can ask questions, upload corpora and read the trace database through the Trace explorer. "
                 "Configure `[auth]` in `.streamlit/secrets.toml` (docs/security.md) or bind it to 127.0.0.1.")


@dataclass(frozen=True)
class Viewer:
    """The person (or, without sign-in, the browser) a page is drawn for."""

    #: The signed-in person's email (else subject); None without sign-in.
    user_id: str | None
    #: Whose turns, conversations and uploads are this viewer's own (`turns.owner`): `user:<id>` or `browser:<token>`.
    owner: str
    #: May use the Trace explorer's SQL and read other people's turns, tool calls and passages.
    analyst: bool

    @property
    def signed_in(self) -> bool:
        return self.user_id is not None

    @property
    def sql_owner(self) -> str | None:
        """Whose turns the Trace explorer's SQL is limited to: None (everything) for a signed-in analyst; this
        browser's own (and nobody's) without sign-in, so one browser never reads another's uploads."""
        return None if self.signed_in else self.owner

    @property
    def uploads_token(self) -> str:
        """The name of this viewer's uploads folder: 32 hex digits derived from `owner`, so a signed-in person
        finds their uploads again in every session, and nobody can name another's."""
        return hashlib.sha256(self.owner.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def auth_settings() -> Mapping | None:
    """Streamlit's `[auth]` secrets; None when there are none (no secrets file, or no `[auth]` in it)."""
    try:
        auth = st.secrets.get("auth")
    except (FileNotFoundError, st.errors.StreamlitSecretNotFoundError):  # no secrets at all: sign-in is off
        return None
    return auth if isinstance(auth, Mapping) and auth else None


def loopback() -> bool:
    """Whether the server listens on a loopback address only (`server.address`; unset means every interface)."""
    address = (st.get_option("server.address") or "").strip().strip("[]")
    if address == "localhost":
        return True
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


def user_id_of(claims: Mapping) -> str | None:
    """The id a signed-in person is recorded and known by: the provider's `email`, else its `sub`."""
    for name in ("email", "sub"):
        value = claims.get(name)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def browser_token() -> str:
    """A token for this browser without sign-in: a hash of Streamlit's XSRF token (one per browser, kept across
    reloads and never sent to another browser), else a random token of this session (a reload is then a new
    browser session)."""
    raw = (st.context.cookies or {}).get(_XSRF_COOKIE) if _has_context() else None
    secret = _xsrf_token(raw) if raw else None
    if secret:
        return hashlib.sha256(b"workbench-browser\0" + secret).hexdigest()[:32]
    return st.session_state.setdefault(_SESSION_TOKEN, uuid.uuid4().hex)


def _has_context() -> bool:
    try:
        return st.context.cookies is not None
    except Exception:  # noqa: BLE001 - no request behind this run (AppTest): no cookies
        return False


def _xsrf_token(value: str) -> bytes | None:
    """The token inside an XSRF cookie value (version 2 is masked anew on every response: unmask it)."""
    value = value.strip("\"'")
    try:
        if value.startswith("2|"):
            _, mask_hex, masked_hex, _ = value.split("|")
            mask, masked = binascii.a2b_hex(mask_hex), binascii.a2b_hex(masked_hex)
            return bytes(b ^ mask[i % len(mask)] for i, b in enumerate(masked)) or None
        return value.encode() or None
    except (ValueError, binascii.Error):
        return None


@st.cache_resource(show_spinner=False)
def _warned_at_start() -> bool:
    """Say once, in the server's log, that an open app trusts everyone (the page says it on every run)."""
    log.warning(TRUST_WARNING)
    return True


def _sign_in_page(auth: Mapping) -> None:
    """What a visitor who has not signed in sees: the title and one button per configured provider, nothing else."""
    st.title("Provenance Workbench")
    st.info("Sign in to use the workbench: your conversations and uploads are your own.", icon=":material/lock:")
    providers = [name for name, value in auth.items() if isinstance(value, Mapping)]
    if not providers or "client_id" in auth:
        if st.button("Sign in", key="sign-in", type="primary", icon=":material/login:"):
            st.login()
    for name in providers:
        if st.button(f"Sign in with {name}", key=f"sign-in-{name}", type="primary", icon=":material/login:"):
            st.login(name)


def _viewer() -> Viewer | None:
    """The viewer of this run, or None: `[auth]` is configured and nobody has signed in."""
    auth = auth_settings()
    if auth is None:
        return Viewer(user_id=None, owner=f"browser:{browser_token()}", analyst=True)
    uid = user_id_of(st.user) if st.user.get("is_logged_in", False) else None
    return None if uid is None else Viewer(user_id=uid, owner=f"user:{uid}", analyst=uid in analysts())


def gate() -> Viewer:
    """The viewer of this run. With `[auth]` configured, a visitor who has not signed in gets the sign-in page
    as the app's only page (so no URL reaches another page, `pages/` included) and the script stops there: no
    chat, no page, no trace data. Without `[auth]` on an address that is not loopback, the page says that
    anyone who can reach it is trusted."""
    viewer = _viewer()
    if viewer is None:
        st.session_state.pop(VIEWER, None)
        auth = auth_settings() or {}
        st.navigation([st.Page(lambda: _sign_in_page(auth), title="Sign in", url_path="sign-in", default=True)],
                      position="hidden").run()
        st.stop()
    if not viewer.signed_in and not loopback():
        _warned_at_start()
        st.warning(TRUST_WARNING, icon=":material/public:")
    st.session_state[VIEWER] = viewer
    return viewer


def current() -> Viewer:
    """The viewer of this run, checked again (a page run on its own, as under AppTest, passes the gate here)."""
    viewer = _viewer()
    if viewer is None or st.session_state.get(VIEWER) != viewer:
        return gate()
    return viewer


def signed_in_box(viewer: Viewer) -> None:
    """The sidebar's line naming who is signed in, with sign-out; nothing without sign-in."""
    if not viewer.signed_in:
        return
    role = "analyst" if viewer.analyst else "member"
    st.sidebar.caption(f"Signed in as **{escape_markdown(viewer.user_id)}** ({role})")
    if st.sidebar.button("Sign out", key="sign-out", icon=":material/logout:"):
        st.session_state.pop(VIEWER, None)
        st.logout()


def may_open(owner: str | None, viewer: Viewer) -> bool:
    """Whether `viewer` may open and continue a conversation whose first turn is `owner`'s: their own, or an
    ownerless one (asked outside the app, the operator's) for an analyst (docs/security.md, "Who sees what")."""
    return owner == viewer.owner or (owner is None and viewer.analyst)
