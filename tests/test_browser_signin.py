"""Sign-in in a real browser (issue 31), on a team store (issue 39 item 3; docs/design.md §13): `streamlit run serve.py`
with `[auth]` secrets pointing at a real OpenID Connect provider on loopback (`oidc-provider-mock`) and
`WORKBENCH_DB=ducklake:postgres:…` on the test session's PostgreSQL (tests/pgserver.py), two people in two browser
contexts signing in through the provider's own page, and a visitor who has not signed in. What each sees is the
table "Who sees what" of docs/security.md, and no page shows the store's connection string: one app server (served
as docs/security.md says to serve it on a network) and one provider for the whole module, and the two people signed
in once for the module's tests (`ana`, `bo`), who go from page to page by the sidebar's links (a page load only
where opening a link or a reload is the point), so this stays a few page loads."""

from __future__ import annotations

import json
import secrets
from pathlib import Path

import pytest

from browser_app import NEEDS_CHROMIUM, shared_indexes
from streamlit_server import CHROMIUM, LAUNCH_ARGS, ask, free_port, settle, streamlit_app, watch_runs

ANALYST, MEMBER = "ana@example.com", "bo@example.com"
SECRET = "payroll-rotation-key-7Q4Z"
FOLLOW_UP = "How often, and who can see it?"
UPLOAD = f"---\nid: payroll\ntitle: Payroll key rotation\n---\nRotate the payroll key with the code {SECRET} monthly.\n"

pytestmark = NEEDS_CHROMIUM


@pytest.fixture(scope="module")
def provider():
    """A real OpenID Connect provider on loopback: its authorize page asks for a subject (also the email)."""
    from oidc_provider_mock import run_server_in_thread

    with run_server_in_thread(port=0) as srv:
        yield f"http://127.0.0.1:{srv.server_port}"


def auth_secrets(tmp: Path, port: int, provider: str) -> Path:
    """`tmp/secrets.toml`: Streamlit's `[auth]` for the app on `port`, signing in through `provider`."""
    url = f"http://127.0.0.1:{port}"
    (tmp / "secrets.toml").write_text(
        f'[auth]\nredirect_uri = "{url}/oauth2callback"\ncookie_secret = "{secrets.token_hex(16)}"\n'
        f'client_id = "workbench-test"\nclient_secret = "{secrets.token_hex(8)}"\n'
        f'server_metadata_url = "{provider}/.well-known/openid-configuration"\n')
    return tmp / "secrets.toml"


@pytest.fixture(scope="module")
def server(tmp_path_factory, provider, pg_server):
    """`streamlit run serve.py` with sign-in, on a new team store: its URL, store, data path, folder and the
    PostgreSQL server's port (which no page may show)."""
    from pgserver import migrated_team_store

    tmp = tmp_path_factory.mktemp("signin")
    data = tmp / "lake-data"
    store = migrated_team_store(pg_server, data)
    port = free_port()
    auth_secrets(tmp, port, provider)
    env = {"WORKBENCH_HOME": str(shared_indexes(tmp_path_factory, tmp / "home")), "WORKBENCH_DB": store,
           "WORKBENCH_DATA_PATH": str(data), "WORKBENCH_ANALYSTS": f" {ANALYST} , someone-else"}
    # served as docs/security.md says to serve it on a network: `serve.py`, the app behind the workbench's guard
    with streamlit_app(tmp, env, "--secrets.files", str(tmp / "secrets.toml"), port=port, script="serve.py") as served:
        yield {"url": served.url, "db": store, "data": data, "tmp": tmp, "port": str(pg_server.port)}


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
        yield chromium
        chromium.close()


def _settle(page) -> None:
    """Wait until the app is drawn and its script run is over."""
    page.get_by_test_id("stApp").wait_for()
    settle(page)


def _new_page(browser):
    """A page in a fresh browser context (nobody signed in), watched by `settle`; the reader prefers reduced motion
    (Streamlit's animations, drawn frame by frame while a run goes on, cost the renderer ~10 % of a page load)."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000}, reduced_motion="reduce")
    watch_runs(context)
    page = context.new_page()
    page.set_default_timeout(60_000)
    return page


def _sign_in(page, server, subject: str):
    """`page` signed in as `subject` through the app's "Sign in" and the provider's own authorize page (from the
    sign-in page it shows, else from the app's address)."""
    if not page.url.startswith(server["url"]):
        page.goto(server["url"])
    page.get_by_role("button", name="Sign in").click()
    page.locator("input[name=sub]").fill(subject)  # the provider's page, not the app's
    page.get_by_role("button", name="Authorize").click()
    page.wait_for_url(f"{server['url']}/**")
    page.get_by_test_id("stChatInputTextArea").wait_for(timeout=120_000)  # a first start builds the index
    _settle(page)
    return page


@pytest.fixture(scope="module")
def visitor(browser):
    """A browser that has not signed in (a page of its own); Bo signs in on it after its test."""
    page = _new_page(browser)
    yield page
    page.context.close()


@pytest.fixture(scope="module")
def ana(browser, server):
    """The analyst, signed in once for the module's tests (the last one signs her out)."""
    page = _sign_in(_new_page(browser), server, ANALYST)
    yield page
    page.context.close()


@pytest.fixture(scope="module")
def bo(visitor, server):
    """A member, signed in once for the module's tests: the visitor signing in from the sign-in page they were shown
    (a browser's first page load costs the most: one fewer)."""
    return _sign_in(visitor, server, MEMBER)


def _ask(page, question: str):
    return ask(page, question, _settle)


def _text(locator) -> str:
    """What a person reads: the word joiners the app puts into e-mail addresses (no auto-link) taken out."""
    return locator.inner_text().replace("\u2060", "")


def _csv(page) -> str:
    """The table's "Download CSV", as the browser downloads it (the table itself is drawn on a canvas)."""
    with page.expect_download() as download:
        page.get_by_role("button", name="Download CSV").click()
    return Path(download.value.path()).read_text()


def _go(page, url: str):
    """Open `url` in `page`: a page load, where opening a link or a reload is the point."""
    page.goto(url)
    _settle(page)
    page.get_by_test_id("stSidebar").wait_for()


def _open(page, server, title: str, path: str = ""):
    """Go to the app's page `title` (at `/path`) by its link in the sidebar, as a person does: no page load."""
    page.get_by_test_id("stSidebarNavLink").filter(has_text=title).click()
    page.wait_for_url(lambda url: url.split("?")[0] == f"{server['url']}/{path}")
    _settle(page)


def _no_connection_string(page, server) -> None:
    """No part of the team store's connection string (its database, its port) is on the page."""
    body = page.locator("body").inner_text()
    assert "dbname" not in body and "ducklake:" not in body and server["port"] not in body, body[-2000:]


def _rows(server, sql: str) -> list[tuple]:
    """What the team store holds, read by the test itself."""
    from workbench.trace import TraceReader

    return TraceReader(server["db"]).rows(sql)[1]


def test_a_visitor_who_has_not_signed_in_sees_only_the_sign_in_page(visitor, server):
    page = visitor
    for path in ("", "/Trace_explorer", "/Doc_gaps", "/Experiments", "/?conversation=c-anything"):
        page.goto(server["url"] + path)
        page.get_by_role("button", name="Sign in").wait_for(timeout=60_000)
        _settle(page)
        text = page.get_by_test_id("stMain").inner_text()
        assert "Sign in to use the workbench" in text, (path, text)
        assert page.get_by_test_id("stChatInputTextArea").count() == 0, path
        assert page.get_by_test_id("stSidebar").count() == 0, f"{path}: no sidebar, no pages, no configuration"
        assert page.get_by_test_id("stDataFrame").count() == 0 and page.locator("textarea").count() == 0, path


def test_two_people_see_what_the_security_table_says(ana, bo, server):
    sidebar = ana.get_by_test_id("stSidebar")
    assert f"Signed in as {ANALYST} (analyst)" in _text(sidebar)
    assert f"Signed in as {MEMBER} (member)" in _text(bo.get_by_test_id("stSidebar"))

    # Ana uploads a document with a secret and asks about it, then a follow-up: her conversation, her upload
    sidebar.get_by_text("Upload", exact=True).click()
    _settle(ana)
    upload = server["tmp"] / "payroll.md"
    upload.write_text(UPLOAD)
    sidebar.locator("input[type=file]").set_input_files(str(upload))
    _settle(ana)
    answer = _ask(ana, "How do I rotate the payroll key?")
    assert "Payroll key rotation" in answer.inner_text()
    ana_link = ana.url
    assert "?conversation=c-" in ana_link
    _ask(ana, FOLLOW_UP)
    assert ana.url == ana_link, "the follow-up went on with the same conversation"
    _no_connection_string(ana, server)

    # Bo: the chat and his own turns; Ana's conversation is neither listed nor opened nor continued
    _ask(bo, "How do I configure SSO?")
    bo.get_by_role("button", name="Open a past conversation").click()
    bo.get_by_test_id("stPopoverBody").get_by_test_id("stSelectbox").click()
    bo.get_by_role("option").first.wait_for()
    listed = bo.get_by_role("option").all_inner_texts()
    assert [o.split(" · ")[:2] for o in listed] == [["How do I configure SSO?", "1 turn"]], listed
    bo.keyboard.press("Escape")
    _go(bo, ana_link)  # Ana's link, opened by Bo
    bo.get_by_text("is someone else's", exact=False).wait_for()
    assert "payroll" not in bo.locator("body").inner_text().lower()
    _ask(bo, "And with Okta?")
    assert ana_link.split("?")[1] not in bo.url, "Bo's question went to a conversation of his own"

    # Bo's Trace explorer: his own turns, no SQL; the doc-gap queue is for analysts
    _open(bo, server, "Trace explorer", "Trace_explorer")
    bo.get_by_text("Your own turns", exact=False).wait_for()
    assert bo.get_by_label("SQL").count() == 0, "no SQL for a member"
    bo.get_by_text("2 turns", exact=True).wait_for()
    turns = _csv(bo)
    assert "How do I configure SSO?" in turns and "And with Okta?" in turns, turns
    assert "payroll" not in turns.lower() and FOLLOW_UP not in turns, turns
    _no_connection_string(bo, server)
    _open(bo, server, "Doc gaps", "Doc_gaps")
    bo.get_by_text("it is for analysts", exact=False).wait_for()

    # Ana: a reload reopens her conversation from the team store
    _go(ana, ana_link)
    ana.get_by_text(FOLLOW_UP, exact=True).wait_for()
    _analysts_sql(ana, server)
    rows = _rows(server, "SELECT user_id, owner, question FROM turns ORDER BY started_at")
    assert [r[0] for r in rows] == [ANALYST, ANALYST, MEMBER, MEMBER], rows
    assert [r[1] for r in rows] == [f"user:{ANALYST}"] * 2 + [f"user:{MEMBER}"] * 2, rows
    assert _rows(server, "SELECT name, saved_by FROM saved_queries") == [("Bo's questions", ANALYST)]


def _analysts_sql(ana, server) -> None:
    """Ana, the analyst, in the Trace explorer: the SQL, over everyone's turns (passages included), saved as hers;
    only the store is readable, and its connection string is on no page, an error's included."""
    _open(ana, server, "Trace explorer", "Trace_explorer")
    ana.get_by_text("1 rows", exact=True).wait_for()  # the first canned query's result: the page is drawn
    _settle(ana)
    sql = ana.get_by_label("SQL")
    sql.fill("SELECT user_id, count(*) AS n FROM turns GROUP BY user_id")
    ana.get_by_role("button", name="Run query").click()
    ana.get_by_text("2 rows", exact=True).wait_for()  # an analyst reads everyone's turns: two people's
    sql.fill("SELECT content FROM read_text('/etc/hostname')")  # only the store is readable
    ana.get_by_role("button", name="Run query").click()
    _settle(ana)
    ana.get_by_test_id("stAlertContentError").first.wait_for()
    _no_connection_string(ana, server)
    sql.fill(f"SELECT question FROM turns WHERE user_id = '{MEMBER}'")
    ana.get_by_role("button", name="Run query").click()
    _settle(ana)
    ana.get_by_text("2 rows", exact=True).wait_for()  # Bo's two
    ana.get_by_label("Save as").fill("Bo's questions")  # a saved query records who saved it
    ana.get_by_role("button", name="Save query").click()
    ana.get_by_text("Saved as", exact=False).wait_for()
    _no_connection_string(ana, server)


def test_an_audited_turn_link_opens_for_the_analyst_and_is_refused_to_a_member(ana, bo, server):
    """Issue 40, item 4: `/Experiments?turn=ID` of an audited turn (an `ingest --questions` run: an experiment the
    page lists) shows the audited app's user's question to the analyst, and a refusal to a member."""
    from clirun import cli

    question = "Where do I change the payroll bank account?"
    trace = "4" * 32
    attrs = {"openinference.span.kind": "LLM", "llm.model_name": "kb-model",
             "llm.input_messages.0.message.role": "user", "llm.input_messages.0.message.content": question,
             "llm.output_messages.0.message.role": "assistant",
             "llm.output_messages.0.message.content": "In Payroll settings."}
    spans = server["tmp"] / "audited.jsonl"
    spans.write_text(json.dumps({"resourceSpans": [{"resource": {"attributes": [
        {"key": "service.name", "value": {"stringValue": "hr-bot"}}]}, "scopeSpans": [{"spans": [{
            "traceId": trace, "spanId": trace[:16], "name": "ChatCompletion",
            "startTimeUnixNano": "1767225600000000000", "endTimeUnixNano": "1767225601000000000",
            "attributes": [{"key": k, "value": {"stringValue": v}} for k, v in attrs.items()]}]}]}]}) + "\n")
    questions = server["tmp"] / "hr.jsonl"
    questions.write_text(json.dumps({"question": question, "expected": []}) + "\n")
    r = cli("ingest", spans, "--db", server["db"], "--name", "hr-audit", "--questions", questions,
            env={"WORKBENCH_DATA_PATH": str(server["data"])})
    assert "1 turns written" in r.stderr, r.stderr
    link = f"{server['url']}/Experiments?turn=otel-{trace}"
    _go(bo, link)
    bo.get_by_text("does not open turn", exact=False).wait_for()
    assert "for analysts" in _text(bo.get_by_test_id("stMain"))
    assert question not in bo.locator("body").inner_text()
    _go(ana, link)
    ana.get_by_text(question, exact=True).first.wait_for()
    assert "does not open turn" not in ana.locator("body").inner_text()


def test_signing_out_ends_the_session(ana, server):
    """The sidebar's sign-out ends Ana's session, at the provider too: back to the sign-in page."""
    _open(ana, server, "Chat")
    ana.get_by_test_id("stChatInputTextArea").wait_for()
    ana.get_by_test_id("stSidebar").get_by_role("button", name="Sign out").click()
    ana.get_by_role("button", name="End session").click()  # the provider's own page ends its session too
    ana.get_by_role("button", name="Sign in").wait_for()
    assert ana.get_by_test_id("stChatInputTextArea").count() == 0
