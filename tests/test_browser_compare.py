"""The Compare page in Debian's chromium (issue 41, item 8): at 1024 px with the sidebar open, three columns' source
chips are whole (wrapped, not cut to "Set up SSO wit…"), and the page keeps its configurations, question and results
when you go to Chat and back. The app is the test session's one (`app_server`, tests/browser_app.py), in a browser
session of this test's own."""

from __future__ import annotations

from browser_app import NEEDS_CHROMIUM
from streamlit_server import CHROMIUM, LAUNCH_ARGS, settle, watch_runs

pytestmark = NEEDS_CHROMIUM
#: Every source chip of the Compare columns whose text is cut (its content wider than its box).
CUT_CHIPS = """() => [...document.querySelectorAll("[class*='st-key-cmp-col-'] [class*='st-key-sources-'] .stMarkdownBadge")]
  .filter(e => e.scrollWidth > e.clientWidth + 1).map(e => e.textContent)"""


def test_compare_at_1024_px_keeps_chips_whole_and_its_state_across_pages(app_server):
    from playwright.sync_api import sync_playwright

    question = "How do I set up SSO with Microsoft Entra ID?"
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1024, "height": 900})
            watch_runs(page)
            page.goto(app_server["url"])
            page.get_by_test_id("stChatInputTextArea").wait_for(timeout=120_000)  # the app's first page builds the index
            settle(page)
            page.get_by_test_id("stSidebarNavLink").filter(has_text="Compare").click()
            page.get_by_role("button", name="Run all").wait_for()
            settle(page)
            assert page.get_by_test_id("stSidebar").is_visible(), "the sidebar is open"
            page.get_by_test_id("stButtonGroup").get_by_text("3", exact=True).click()
            page.get_by_text("Configuration C").wait_for()
            settle(page)
            mode = page.locator(".stRadio").filter(has_text="excerpts").nth(2)  # column C in excerpt mode
            mode.get_by_text("excerpts", exact=True).click()
            settle(page)
            page.get_by_label("Question", exact=True).fill(question)
            page.get_by_role("button", name="Run all").click()
            page.locator(".st-key-cmp-col-2").wait_for()
            settle(page)
            chips = page.locator("[class*='st-key-cmp-col-'] [class*='st-key-sources-'] .stMarkdownBadge")
            assert chips.count() >= 3 and page.locator(".st-key-cmp-col-0").bounding_box()["width"] < 260
            assert page.evaluate(CUT_CHIPS) == [], "a chip's title is cut"

            page.get_by_test_id("stSidebarNavLink").filter(has_text="Chat").click()
            page.get_by_test_id("stChatInputTextArea").wait_for()
            settle(page)
            page.get_by_test_id("stSidebarNavLink").filter(has_text="Compare").click()
            page.get_by_role("button", name="Run all").wait_for()
            settle(page)
            assert page.get_by_label("Question", exact=True).input_value() == question
            assert page.get_by_text("Configuration C").count() == 1, "three configurations still"
            column_c = page.locator(".stRadio").filter(has_text="excerpts").nth(2)
            assert column_c.get_by_role("radio", name="excerpts").is_checked(), "column C kept its mode"
            assert page.locator(".st-key-cmp-col-2").count() == 1, "the results are still shown"
        finally:
            browser.close()
