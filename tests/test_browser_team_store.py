"""The app with sign-in on a team store, in a real browser (issue 39 item 3; docs/design.md §13): `streamlit run
serve.py` with `WORKBENCH_DB=ducklake:postgres:…` on the test session's PostgreSQL (tests/pgserver.py), a real
OpenID Connect provider on loopback (`oidc-provider-mock`) and Debian's chromium. An analyst and a member sign in and
ask; the member sees only their own turns, the analyst's SQL reads everyone's and is refused what is not the store's;
no page shows the store's connection string. The sign-in machinery is test_browser_signin.py's."""

from __future__ import annotations

import pytest

from streamlit_server import free_port, streamlit_app
from test_browser_signin import (ANALYST, CHROMIUM, MEMBER, _ask, _csv, _go, _settle, _sign_in,  # noqa: F401
                                 auth_secrets, browser, provider)
from workbench.trace import TraceReader

pytestmark = pytest.mark.skipif(not __import__("pathlib").Path(CHROMIUM).exists(),
                                reason=f"{CHROMIUM} is missing: install it with `apt-get install -y chromium`")


@pytest.fixture(scope="module")
def server(tmp_path_factory, provider, pg_server):  # noqa: F811 - `provider` is the imported fixture
    from pgserver import migrated_team_store

    tmp = tmp_path_factory.mktemp("signin-lake")
    store = migrated_team_store(pg_server, tmp / "lake-data")
    port = free_port()
    auth_secrets(tmp, port, provider)
    env = {"WORKBENCH_HOME": str(tmp / "home"), "WORKBENCH_DB": store, "WORKBENCH_DATA_PATH": str(tmp / "lake-data"),
           "WORKBENCH_ANALYSTS": ANALYST}
    with streamlit_app(tmp, env, "--secrets.files", str(tmp / "secrets.toml"), port=port, script="serve.py") as served:
        yield {"url": served.url, "db": store, "tmp": tmp, "port": str(pg_server.port)}


def _no_connection_string(page, server) -> None:
    body = page.locator("body").inner_text()
    assert "dbname" not in body and "ducklake:" not in body and server["port"] not in body, body[-2000:]


def test_signed_in_people_use_the_app_on_a_team_store(browser, server):  # noqa: F811
    ana_ctx, ana = _sign_in(browser, server, ANALYST)
    bo_ctx, bo = _sign_in(browser, server, MEMBER)
    try:
        answer = _ask(ana, "How do I configure SSO?")
        assert "Configure SAML single sign-on" in answer.inner_text()
        _ask(ana, "And with Okta?")  # a follow-up, in the same conversation
        assert "?conversation=c-" in ana.url
        ana_link = ana.url
        _no_connection_string(ana, server)

        _ask(bo, "How do I rotate an API key?")
        _go(bo, ana_link)  # Ana's conversation is hers, on a team store as on a file
        bo.get_by_text("is someone else's", exact=False).wait_for()
        _go(bo, server["url"] + "/Trace_explorer")
        bo.get_by_text("Your own turns", exact=False).wait_for()
        bo.get_by_text("1 turns", exact=True).wait_for()
        mine = _csv(bo)
        assert "How do I rotate an API key?" in mine and "How do I configure SSO?" not in mine, mine

        _go(ana, ana_link)  # a reload reopens the conversation from the team store
        ana.get_by_text("And with Okta?", exact=True).wait_for()
        _go(ana, server["url"] + "/Trace_explorer")
        ana.get_by_text("1 rows", exact=True).wait_for()  # the first canned query's result: the page is drawn
        _settle(ana)
        sql = ana.get_by_label("SQL")
        sql.fill("SELECT user_id, count(*) AS n FROM turns GROUP BY user_id")
        ana.get_by_role("button", name="Run query").click()
        ana.get_by_text("2 rows", exact=True).wait_for()  # an analyst reads everyone's turns
        sql.fill("SELECT content FROM read_text('/etc/hostname')")  # only the store is readable
        ana.get_by_role("button", name="Run query").click()
        _settle(ana)
        ana.get_by_test_id("stAlertContentError").first.wait_for()
        _no_connection_string(ana, server)
    finally:
        ana_ctx.close()
        bo_ctx.close()
    rows = TraceReader(server["db"]).rows("SELECT user_id, owner FROM turns ORDER BY started_at")[1]
    assert [r[0] for r in rows] == [ANALYST, ANALYST, MEMBER], rows
    assert [r[1] for r in rows] == [f"user:{ANALYST}"] * 2 + [f"user:{MEMBER}"], rows
