"""A conversation shared read-only between two browsers (issue 41, item 3), in Debian's chromium: two browser contexts
are two browsers (each its own cookies, so its own owner token). The owner shares, the other opens the link read-only,
the owner revokes, the other's reload shows nothing of it. The app is the test session's one (`app_server`,
tests/browser_app.py)."""

from __future__ import annotations

from browser_app import NEEDS_CHROMIUM
from streamlit_server import CHROMIUM, LAUNCH_ARGS, ask, settle, watch_runs

pytestmark = NEEDS_CHROMIUM
QUESTION = "How do I configure SSO?"


def test_a_share_link_opens_read_only_in_another_browser_until_revoked(app_server):
    from playwright.sync_api import sync_playwright

    url = app_server["url"]
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
        try:
            owner = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
            watch_runs(owner)
            owner.goto(url)
            owner.get_by_test_id("stChatInputTextArea").wait_for(timeout=120_000)  # the app's first page builds the index
            settle(owner)
            ask(owner, QUESTION, settle)
            conversation_url = owner.url

            other = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
            watch_runs(other)
            other.goto(conversation_url)  # the conversation's own address: still its owner's
            other.get_by_text("is someone else's").wait_for()
            settle(other)

            owner.get_by_role("button", name="Share").click()
            owner.get_by_text("anyone who can reach this app and has the link").wait_for()
            owner.get_by_role("button", name="Create a read-only link").click()
            code = owner.get_by_test_id("stCode").filter(has_text="share=")
            code.wait_for()
            link = code.inner_text().strip()
            assert link.startswith(url) and "store=default" in link, link

            other.goto(link)
            other.get_by_text("A shared conversation, read-only").wait_for()
            settle(other)
            messages = other.get_by_test_id("stChatMessage")
            assert messages.count() == 2 and QUESTION in messages.first.inner_text(), "the question and its answer"
            assert other.get_by_test_id("stChatInputTextArea").count() == 0, "nothing can be asked in it"
            assert other.get_by_role("button", name="Verify sources").count() == 0

            settle(owner)
            owner.get_by_role("button", name="Revoke the link").click()
            owner.get_by_text("Link revoked").wait_for()
            other.reload()
            other.get_by_text("This share link was revoked by its owner").wait_for()
            settle(other)
            assert other.get_by_test_id("stChatMessage").count() == 0
        finally:
            browser.close()
