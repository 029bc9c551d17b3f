"""Streamlit's `/_stcore/metrics` (issue 40, item 7): Streamlit answers it to anyone who reaches the port, signed in
or not, and has no option to turn it off; `streamlit run serve.py` (the app behind the workbench's guard,
`workbench/ui/closed_paths.py`) closes it. Real `streamlit run` processes over HTTP on loopback, with sign-in
configured as the deployment docs/security.md describes."""

from __future__ import annotations

import secrets
import urllib.error
import urllib.request

import pytest

from streamlit_server import streamlit_app
from workbench.ui.closed_paths import closed


def _get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def _signin_secrets(tmp_path) -> list[str]:
    """`[auth]` secrets (the provider is never asked: nobody signs in here)."""
    f = tmp_path / "secrets.toml"
    f.write_text(f'[auth]\nredirect_uri = "http://127.0.0.1:9/oauth2callback"\ncookie_secret = "{secrets.token_hex(16)}"\n'
                 'client_id = "workbench-test"\nclient_secret = "x"\n'
                 'server_metadata_url = "http://127.0.0.1:9/.well-known/openid-configuration"\n')
    return ["--secrets.files", str(f)]


@pytest.fixture
def env(tmp_path):
    return {"WORKBENCH_HOME": str(tmp_path / "home"), "WORKBENCH_DB": str(tmp_path / "traces.duckdb")}


def test_serve_py_closes_the_metrics_endpoint_to_a_visitor_who_has_not_signed_in(tmp_path, env):
    with streamlit_app(tmp_path, env, *_signin_secrets(tmp_path), script="serve.py") as served:
        for path in ("/_stcore/metrics", "/_stcore/metrics/", "/_stcore/metrics?families=cache_memory_bytes"):
            status, body = _get(served.url + path)
            assert status == 404 and b"cache" not in body and b"session" not in body, (path, status, body[:200])
        assert _get(served.url + "/_stcore/health") == (200, b"ok")  # Streamlit's other endpoints are its own
        status, page = _get(served.url + "/")
        assert status == 200 and b"<html" in page.lower()  # the app itself is served


def test_app_py_alone_leaves_the_metrics_endpoint_open(tmp_path, env):
    """Why `serve.py`: `streamlit run app.py` answers the metrics to anyone (what docs/security.md states)."""
    with streamlit_app(tmp_path, env, *_signin_secrets(tmp_path)) as served:
        status, body = _get(served.url + "/_stcore/metrics")
    assert status == 200 and b"# TYPE" in body, (status, body[:200])


@pytest.mark.parametrize("path,shut", [("/_stcore/metrics", True), ("/base/_stcore/metrics/", True),
                                       ("//_stcore//metrics", True), ("/_stcore/health", False), ("/", False),
                                       ("/Experiments", False), ("/_stcore/metricsx", False)])
def test_closed_paths(path, shut):
    assert closed(path) is shut
