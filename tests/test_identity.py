"""Who is looking (issue 31 items 1 and 4, `workbench/ui/identity.py`): the id a signed-in person is known by,
the analysts of `WORKBENCH_ANALYSTS`, a browser's token without sign-in, and the warning of an app without
sign-in on a network address (AppTest, the real app)."""

from __future__ import annotations

import binascii
import os
from pathlib import Path

import pytest
from streamlit import config as st_config
from streamlit.testing.v1 import AppTest

from workbench.config import analysts
from workbench.ui.identity import TRUST_WARNING, Viewer, _xsrf_token, user_id_of

PAGES = ["app.py", "pages/2_Trace_explorer.py", "pages/5_Experiments.py"]


def test_a_person_is_their_email_else_their_subject():
    assert user_id_of({"email": "ana@example.com", "sub": "123"}) == "ana@example.com"
    assert user_id_of({"email": "  ", "sub": "123"}) == "123"
    assert user_id_of({"name": "Ana"}) is None


def test_analysts_are_a_comma_separated_list(monkeypatch):
    monkeypatch.setenv("WORKBENCH_ANALYSTS", " ana@example.com ,, 42 ,")
    assert analysts() == {"ana@example.com", "42"}
    monkeypatch.delenv("WORKBENCH_ANALYSTS")
    assert analysts() == frozenset()


def test_a_browser_is_known_by_its_xsrf_token_whatever_its_mask():
    """Streamlit masks its XSRF token anew on every response: the token, not the cookie value, names the browser."""
    token = os.urandom(16)

    def masked() -> str:
        mask = os.urandom(4)
        body = bytes(b ^ mask[i % 4] for i, b in enumerate(token))
        return f"2|{binascii.b2a_hex(mask).decode()}|{binascii.b2a_hex(body).decode()}|1700000000"

    first, second = masked(), masked()
    assert first != second and _xsrf_token(first) == _xsrf_token(second) == token
    assert _xsrf_token("2|zz|not-hex|1") is None


def test_uploads_folders_differ_per_viewer_and_stay_put_for_one():
    ana = Viewer(user_id="ana@example.com", owner="user:ana@example.com", analyst=False)
    assert ana.uploads_token == Viewer(user_id="ana@example.com", owner="user:ana@example.com", analyst=True).uploads_token
    assert ana.uploads_token != Viewer(user_id=None, owner="browser:ab", analyst=True).uploads_token
    assert len(ana.uploads_token) == 32 and ana.sql_owner is None


@pytest.fixture
def network_address(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_DB", str(tmp_path / "traces.duckdb"))
    before = st_config.get_option("server.address")
    st_config.set_option("server.address", "0.0.0.0")
    yield
    st_config.set_option("server.address", before)


@pytest.mark.parametrize("page", PAGES)
def test_without_sign_in_on_a_network_address_every_page_says_anyone_is_trusted(network_address, page):
    from conftest import ROOT

    at = AppTest.from_file(str(ROOT / page), default_timeout=60).run()
    assert not at.exception, at.exception
    assert any("anyone who can reach it is trusted" in w.value for w in at.warning), [w.value for w in at.warning]


def test_on_loopback_without_sign_in_there_is_no_warning(app):
    assert not [w.value for w in app.warning if "anyone who can reach" in w.value]
    assert TRUST_WARNING.startswith("This app has no sign-in")


AUTH = {"redirect_uri": "http://127.0.0.1:8501/oauth2callback", "cookie_secret": "x" * 32, "client_id": "c",
        "client_secret": "s", "server_metadata_url": "http://127.0.0.1:9/.well-known/openid-configuration"}


@pytest.mark.parametrize("page", ["app.py", *(f"pages/{p.name}" for p in sorted((Path(__file__).parent.parent
                                                                                 / "pages").glob("*.py")))])
def test_with_auth_every_page_run_on_its_own_shows_only_the_sign_in_page(page, tmp_path, monkeypatch):
    """Each page file, run directly (not through app.py's navigation), stops at the sign-in page too."""
    from conftest import ROOT

    monkeypatch.setenv("WORKBENCH_DB", str(tmp_path / "traces.duckdb"))
    at = AppTest.from_file(str(ROOT / page), default_timeout=60)
    at.secrets["auth"] = AUTH
    at.run()
    assert not at.exception, at.exception
    assert [b.label for b in at.button] == ["Sign in"], [b.label for b in at.button]
    assert not at.chat_input and not at.sidebar.children and not at.dataframe and not at.text_area
    assert not (tmp_path / "traces.duckdb").exists(), "no trace data is touched before sign-in"
