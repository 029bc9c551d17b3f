"""Server paths the app does not answer, whoever asks: Streamlit's `/_stcore/metrics` (docs/security.md, "Streamlit's
own endpoints").

Streamlit serves `/_stcore/metrics` to anyone who can reach the port, signed in or not — the cached functions' names,
their hit counts and sizes, the sessions — and has no option to turn it off (streamlit 1.67: the route is added
unconditionally by `create_metrics_routes` in `streamlit/web/server/starlette/starlette_app.py`). `serve.py` serves
the app through `st.App` with `ClosedPaths` in front: an ASGI middleware that answers 404 for those paths before
Streamlit sees the request. It holds no state and reads nothing but the request's path.
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable

#: Paths (under any `server.baseUrlPath`) answered 404 for everyone.
CLOSED = ("/_stcore/metrics",)
_BODY = b"not served: this endpoint is closed (docs/security.md)"


class ClosedPaths:
    """ASGI middleware: a request for a `CLOSED` path is answered 404; every other request goes to `app`."""

    def __init__(self, app: Callable[..., Awaitable[None]]):
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Callable, send: Callable) -> None:
        if scope.get("type") == "http" and closed(scope.get("path") or ""):
            await send({"type": "http.response.start", "status": 404,
                        "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                                    (b"content-length", str(len(_BODY)).encode())]})
            await send({"type": "http.response.body", "body": _BODY})
            return
        await self.app(scope, receive, send)


def closed(path: str) -> bool:
    """Whether `path` is one of `CLOSED` (after any base URL path; a trailing slash or repeated slashes alike)."""
    normal = "/" + "/".join(p for p in path.split("/") if p)
    return any(normal == c or normal.endswith(c) for c in CLOSED)
