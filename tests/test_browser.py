"""The app in a real browser: Debian's chromium driven by playwright against `streamlit run app.py`.

Checks what AppTest cannot: the click on a citation really opens the side panel, a listing shows
links and no source chips, and corpus text with <script>/onerror/javascript: executes nothing.
With BROWSER_SHOTS=1 in the environment, screenshots go to tests/artifacts/ (gitignored), to look at when a test
fails; the committed `docs/img/` ones are made by `docs/screenshots.py`. The app is the test session's one
(`app_server`, tests/browser_app.py); a test that needs a fresh chat opens a page (a browser session) of its own.
"""

from __future__ import annotations

import os
import re
import signal
import time

import pytest

from browser_app import NEEDS_CHROMIUM
from streamlit_server import CHROMIUM, LAUNCH_ARGS, ROOT, ask, settle, watch_runs

ARTIFACTS = ROOT / "tests" / "artifacts"
#: Screenshots only when asked for (they cost the browser a PNG each, and nothing reads them unless a test fails).
SHOTS = os.environ.get("BROWSER_SHOTS") == "1"

pytestmark = NEEDS_CHROMIUM

EVIL_DOC = """---
id: widget-calibration
title: Calibrate the flux widget <img src=x onerror="window.__pwned='title';alert('title')">
url: javascript:alert('url')
---
# Calibrate the flux widget

To calibrate the flux widget, open the widget panel and press calibrate twice.
<script>window.__pwned = 'script'; alert('script')</script>
<img src=x onerror="window.__pwned='img'; alert('img')">
The flux widget calibration takes two minutes. [click me](javascript:alert('link'))
![tracker](http://127.0.0.1:9/tracker.png) :red[directive] $x^2$ <a href="javascript:alert('a')">a</a>
"""

SAFE_DOC = """---
id: widget-reset
title: Reset the flux widget
url: https://help.example.test/widget-reset
---
To reset the flux widget, hold the reset button for ten seconds until the light blinks.
"""


@pytest.fixture(scope="module")
def server(app_server):
    """The session's app (with the scripted test providers: a slow one for the compare page's Cancel), and a corpus
    of hostile text in its WORKBENCH_HOME (an allowed root, docs/security.md)."""
    corpus = app_server["home"] / "evil-corpus"
    corpus.mkdir(exist_ok=True)
    (corpus / "widget-calibration.md").write_text(EVIL_DOC)
    (corpus / "widget-reset.md").write_text(SAFE_DOC)
    return {**app_server, "corpus": corpus}


@pytest.fixture(scope="module")
def playwright():
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as pw:
        yield pw


@pytest.fixture(scope="module")
def browser(playwright):
    chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
    yield chromium
    chromium.close()


def _chat_page(browser, server, height: int = 1000, timeout: float = 45_000, script: str = ""):
    """A new page (a new browser session: a fresh chat) on the chat page, 1400 px wide, watched by `settle`; with
    `script` run in every document it loads, from its first paint."""
    pg = browser.new_page(viewport={"width": 1400, "height": height})
    pg.set_default_timeout(timeout)  # a loaded machine (2 cores, many users) takes seconds per rerun
    watch_runs(pg)
    if script:
        pg.add_init_script(script)
    pg.goto(server["url"])
    pg.get_by_test_id("stChatInputTextArea").wait_for(timeout=120_000)  # a first start builds the index
    return pg


@pytest.fixture(scope="module")
def page(server, browser):
    pg = _chat_page(browser, server)
    pg.dialogs = []
    pg.on("dialog", lambda d: (pg.dialogs.append(d.message), d.dismiss()))
    yield pg
    pg.close()


def _ask(page, question: str):
    return ask(page, question, _settle)


def _settle(page):
    settle(page, timeout=45_000)


def _new_conversation(page):
    """Start a new conversation (issue 22: every question after the first is a follow-up of the earlier ones), for
    a test whose question stands on its own; a chat with no turn yet is one already."""
    button = page.get_by_role("button", name="New conversation")
    if button.is_enabled():
        button.click()
        page.wait_for_function("document.querySelectorAll('[data-testid=stChatMessage]').length === 0")
        _settle(page)


def _center(locator):
    """`locator` scrolled to the middle of the screen (at an edge, Streamlit's header or the chat input covers it)."""
    locator.evaluate("e => e.scrollIntoView({block: 'center'})")
    return locator


def _open_with_corpus(page, server, corpus):
    """Load the chat page afresh and type `corpus` as its corpus path; returns the path field."""
    page.goto(server["url"])
    page.get_by_test_id("stChatInputTextArea").wait_for()
    page.get_by_text("Folder or JSONL path").click()
    _settle(page)
    path = page.get_by_label("Corpus path")
    path.fill(str(corpus))
    path.press("Enter")
    _settle(page)
    return path


def _shot(page, name: str, locator=None, **options):
    """tests/artifacts/NAME.png of `locator` (default: the page), when BROWSER_SHOTS=1 asks for screenshots."""
    if SHOTS:
        (locator or page).screenshot(path=str(ARTIFACTS / f"{name}.png"), **options)


def test_navigation_names_the_chat_page_chat(page):
    nav = page.get_by_test_id("stSidebarNav")
    nav.wait_for()
    links = [t.strip().splitlines()[-1].strip() for t in nav.get_by_role("link").all_inner_texts()]  # icon, title
    assert links == ["Chat", "Compare", "Trace explorer", "Doc gaps", "Document usage", "Experiments"], links


def test_citation_click_opens_the_side_panel(page):
    msg = _ask(page, "How do I configure SSO?")
    assert msg.locator("a[href^='#wb-cite-']").count() == 2, "both inline citations open the side panel"
    assert msg.locator("a[href^='https://']").count() == 0, "no inline citation leaves for a new tab"
    assert msg.locator("[class*='st-key-sources-']").count() == 1, "a substantive answer has source chips"
    assert page.locator(".st-key-doc-panel").count() == 0
    msg.locator("[class*='st-key-citations-'] button").first.click()
    panel = page.locator(".st-key-doc-panel")
    panel.wait_for()
    _settle(page)
    assert "Configure SAML single sign-on (SSO)" in panel.inner_text()
    # the passage quoted in the answer is highlighted in the document's text (not only named in the legend)
    assert panel.locator(".st-key-doc-text").locator("mark, span[class*='ackground'], [style*='background']").count() > 0
    _shot(page, "chat")
    page.locator(".st-key-close-doc button").first.click()
    page.locator(".st-key-doc-panel").wait_for(state="detached")
    _settle(page)
    page.set_viewport_size({"width": 1400, "height": 1500})
    page.get_by_text("Provenance", exact=True).last.click()
    expander = page.get_by_test_id("stExpander").filter(has_text="Retrieved").last
    expander.locator(".js-plotly-plot .bars").first.wait_for()  # the chart is drawn
    _shot(page, "provenance", expander)
    page.set_viewport_size({"width": 1400, "height": 1000})


def test_inline_citation_opens_the_side_panel_in_this_tab(page):
    """Issue 25, item 1: the inline link opened the document's URL in a new tab (an error page on the demo
    corpus); it opens the side panel, here, with the original one click away and the markdown formatted."""
    msg = page.get_by_test_id("stChatMessage").nth(1)  # the answer to "How do I configure SSO?"
    assert page.locator(".st-key-doc-panel").count() == 0
    tabs, url = len(page.context.pages), page.url
    msg.locator("a[href^='#wb-cite-']").filter(has_text="Configure SAML single sign-on (SSO)").click()
    panel = page.locator(".st-key-doc-panel").filter(has_text="Configure SAML single sign-on (SSO)")
    panel.wait_for()
    _settle(page)
    assert len(page.context.pages) == tabs and page.url == url, "the chat stays where it was"
    original = panel.get_by_role("link", name="Open original")
    assert original.get_attribute("href") == "https://help.orbitly.example/articles/sso-saml-setup"
    text = panel.locator(".st-key-doc-text")
    text.get_by_text("Copy the two values shown").wait_for()  # the document is drawn
    assert text.locator("strong").filter(has_text="SAML 2.0").count() >= 1, "**SAML 2.0** is bold"
    assert text.locator("li").filter(has_text="Copy the two values shown").count() == 1, "lists are lists"
    assert "**" not in text.inner_text() and "](" not in text.inner_text(), "no raw markdown"
    assert msg.locator("[class*='st-key-citations-'] [aria-checked='true']").inner_text().startswith("1 ·")
    page.locator(".st-key-close-doc button").first.click()
    page.locator(".st-key-doc-panel").wait_for(state="detached")
    _settle(page)


def test_opening_a_document_keeps_the_open_expanders(page):
    """Issue 25, item 2: the click that opened the panel re-laid the chat out, collapsing every expander."""
    msg = _ask(page, "How do I rotate API keys?")
    msg.get_by_text("Provenance", exact=True).click()
    _settle(page)
    retrieved = msg.get_by_text("Retrieved (", exact=False).first
    retrieved.wait_for()
    pill = msg.locator("[class*='st-key-citations-'] button").first
    _center(pill)
    # the expander's chart draws after the run is over, and the chat's scrolling follows the page's growth: click
    # once the pill is still (a click while the page reflows lands beside the pill, and no panel ever opens)
    pill.evaluate(_STILL)
    assert page.get_by_test_id("stAppScrollToBottomContainer").evaluate("e => e.scrollTop") > 0, "scrolled down"
    pill.click()
    page.locator(".st-key-doc-panel").filter(has_text="Rotate and revoke API keys").wait_for()
    _settle(page)
    assert retrieved.is_visible(), "the Provenance expander is still open"
    # (the pill's place on screen: test_opening_a_document_under_load_keeps_the_scroll_position)
    _center(page.locator(".st-key-close-doc button").first).click()
    page.locator(".st-key-doc-panel").wait_for(state="detached")
    _settle(page)
    assert retrieved.is_visible(), "closing the panel keeps it open too"


#: Resolves once the element's top has not moved for 60 frames in a row (about a second): the reflow is over.
_STILL = """(el) => new Promise((resolve) => {
  let last = null, still = 0;
  const frame = () => {
    const top = el.getBoundingClientRect().top;
    still = last !== null && Math.abs(top - last) < 0.5 ? still + 1 : 0;
    last = top;
    if (still >= 60) resolve(top); else requestAnimationFrame(frame);
  };
  requestAnimationFrame(frame);
})"""


#: Records where the next clicked button was on screen when it was clicked (before any rerun).
_CLICKED_TOP = """() => document.addEventListener('click', (e) => {
  window.__clickedTop = e.target.closest('button').getBoundingClientRect().top; }, {capture: true, once: true})"""


def test_opening_a_document_under_load_keeps_the_scroll_position(page, server):
    """Issue 25, item 2: under load the clicked pill did not stay where it was. The server is frozen for the
    click (a loaded machine starts the rerun late) while the reader moves the pointer toward the panel; when
    the rerun narrows the chat, the pill must still be where it was clicked, and the panel in sight."""
    msg = page.get_by_test_id("stChatMessage").last  # the answer to "How do I rotate API keys?", Provenance open
    pill = _center(msg.locator("[class*='st-key-citations-'] button").first)
    pill.evaluate(_STILL)  # Streamlit's own scrolling is over
    width = msg.bounding_box()["width"]
    os.kill(server["pid"], signal.SIGSTOP)
    try:
        page.evaluate(_CLICKED_TOP)
        pill.click()
        page.mouse.move(1200, 300, steps=5)  # toward where the panel will be
    finally:
        os.kill(server["pid"], signal.SIGCONT)
    clicked = page.evaluate("window.__clickedTop")
    panel = page.locator(".st-key-doc-panel").filter(has_text="Rotate and revoke API keys")
    panel.wait_for()
    _settle(page)
    page.wait_for_function("([el, w]) => el.getBoundingClientRect().width < w - 50", arg=[msg.element_handle(), width])
    assert abs(pill.evaluate(_STILL) - clicked) <= 2, "the clicked pill stays where it was on screen"
    box = panel.bounding_box()
    assert box["y"] < 1000 and box["y"] + box["height"] > 0, f"the panel opened out of sight: {box}"
    page.evaluate(_CLICKED_TOP)
    pill.click()  # clicked again: the panel closes, and the chat widens back around the pill
    panel.wait_for(state="detached")
    _settle(page)
    assert abs(pill.evaluate(_STILL) - page.evaluate("window.__clickedTop")) <= 2, "closing keeps the pill in place"


def test_verify_sources_puts_each_verdict_on_its_chip(page):
    msg = page.get_by_test_id("stChatMessage").nth(1)  # the answer to "How do I configure SSO?"
    msg.get_by_role("button", name="Verify sources").click()
    msg.locator("[class*='st-key-sources-']").filter(has_text="load-bearing").wait_for()
    _settle(page)
    chips = msg.locator("[class*='st-key-sources-']").inner_text()
    assert "Configure SAML single sign-on (SSO) · load-bearing" in chips
    assert "Set up SSO with Microsoft Entra ID (Azure AD) · decorative" in chips
    headline = msg.locator("[class*='st-key-headline-']").inner_text()
    assert "2 sources · 1 load-bearing · 0 rejected" in headline, "the headline counts what the chips show"
    msg.get_by_role("button", name="Verify sources").wait_for(state="detached")  # gone once verified (the rerun may lag)
    _shot(page, "verified", msg)


def test_a_verified_turn_keeps_its_verdicts_claims_and_time_after_a_reload(page):
    """Issue 33 item 2: a turn verified before a reload shows the stored verdicts on its chips, its Claims
    expander and the time it was recorded with afterwards, and offers no second verification. The turn is the one
    the test above verified (asked and verified here when this test runs on its own)."""
    msg = page.get_by_test_id("stChatMessage").nth(1)  # the answer to "How do I configure SSO?"
    if not msg.count() or msg.get_by_role("button", name="Verify sources").count():
        _new_conversation(page)
        msg = _ask(page, "How do I configure SSO?")
        msg.get_by_role("button", name="Verify sources").click()
    chips = msg.locator("[class*='st-key-sources-']")
    chips.filter(has_text="load-bearing").wait_for()
    msg.get_by_role("button", name="Verify sources").wait_for(state="detached")
    _settle(page)
    text, caption = chips.inner_text(), msg.get_by_text("⚙", exact=False).inner_text()
    assert msg.get_by_text("Claims (", exact=False).count() == 1, "the fresh turn has its Claims expander"
    assert "?conversation=c-" in page.url, page.url
    page.reload()
    page.get_by_test_id("stChatInputTextArea").wait_for()
    page.wait_for_function("document.querySelectorAll('[data-testid=stChatMessage]').length >= 2")
    _settle(page)
    msg = page.get_by_test_id("stChatMessage").nth(1)
    chips = msg.locator("[class*='st-key-sources-']")
    chips.filter(has_text="load-bearing").wait_for()
    assert chips.inner_text() == text, "the stored verdicts on the same chips"
    assert msg.get_by_text("⚙", exact=False).inner_text() == caption, "the recorded time, not another"
    # the page draws a turn's parts one after the other, and the status widget can be gone between two
    # of them: wait for the expander drawn after the chips rather than count what has arrived so far
    msg.get_by_text("Claims (", exact=False).wait_for(timeout=30_000)
    assert msg.get_by_text("Claims (", exact=False).count() == 1, "its claims, as stored"
    assert msg.get_by_role("button", name="Verify sources").count() == 0, "verified already"


def test_the_chat_is_usable_at_1024_px(page):
    """Issue 25, item 9: at 1024 px, with the side panel open, the three sets squeezed into ~70 px columns
    broke their names mid-word ("Consulte|d")."""
    page.set_viewport_size({"width": 1024, "height": 900})
    try:
        if page.locator(".st-key-doc-panel").count():
            _center(page.locator(".st-key-close-doc button").first).click()
            page.locator(".st-key-doc-panel").wait_for(state="detached")
            _settle(page)
        msg = page.get_by_test_id("stChatMessage").last
        _center(msg.locator("[class*='st-key-citations-'] button").first).click()
        panel = page.locator(".st-key-doc-panel")
        panel.wait_for()
        _settle(page)
        provenance = msg.get_by_test_id("stExpander").filter(has_text="Retrieved (")
        if not msg.get_by_text("Retrieved (", exact=False).first.is_visible():
            msg.get_by_text("Provenance", exact=True).click()
            _settle(page)
        names = provenance.locator("strong").filter(has_text="Consulted")
        names.first.wait_for()
        for name in ("Retrieved", "Cited", "Consulted"):  # one line box each: no word broken
            strong = provenance.locator("strong").filter(has_text=name).first
            strong.wait_for(state="visible")  # laid out (a rerun under load may be redrawing it)
            rects = strong.evaluate("e => e.getClientRects().length")
            assert rects == 1, f"{name} is broken over {rects} lines"
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth"), "nothing sticks out"
        chat, side = msg.bounding_box(), panel.bounding_box()
        # Issue 34, item 1: the chat keeps at least 480 px (it was ~270 px beside the panel); the panel opens
        # over its right side, whole and within the window
        assert chat["width"] >= 480, f"the chat is squeezed to {chat['width']:.0f} px"
        assert side["x"] >= 0 and side["x"] + side["width"] <= 1024 and side["width"] >= 300, f"the panel: {side}"
        title = panel.locator("h4").first
        assert title.evaluate("e => e.getClientRects().length") <= 3, "the panel's title is one word a line"
        cut = msg.locator("[class*='st-key-sources-']").first.evaluate("""box => [...box.querySelectorAll('*')]
            .filter(e => getComputedStyle(e).textOverflow === 'ellipsis' && e.scrollWidth > e.clientWidth + 1)
            .map(e => e.textContent)""")
        assert not cut, f"source chips cut with an ellipsis: {cut}"  # every chip's title and verdict whole
        close = page.locator(".st-key-close-doc button").first
        assert close.evaluate("e => e.scrollWidth <= e.clientWidth && e.clientWidth >= 32"), "the ✕ is cut"
        _shot(page, "chat-1024")
        _center(close).click()
        page.locator(".st-key-doc-panel").wait_for(state="detached")
        _settle(page)
    finally:
        page.set_viewport_size({"width": 1400, "height": 1000})


def test_listing_answer_shows_links_and_no_source_chips(page):
    _new_conversation(page)  # after earlier turns, a listing links documents they read: carried, so consulted (§11)
    msg = _ask(page, "Which articles do you have?")
    links = msg.locator("a[href^='#wb-cite-']")
    links.nth(20).wait_for()  # a loaded machine may still be drawing the answer when the run ends
    _settle(page)
    assert links.count() > 20
    assert msg.locator("[class*='st-key-sources-']").count() == 0
    assert "No sources: nothing was read" in msg.inner_text()
    _shot(page, "listing")


#: Resolves once an image that fails to load, added after everything the app drew, has fired its `onerror` (and is
#: taken away again): an `<img onerror>` the app drew earlier would have fired before it.
FAILED_IMAGE = """() => new Promise((done) => { const img = document.createElement('img');
  img.onerror = () => { img.remove(); done(); }; img.src = 'x'; document.body.append(img); })"""


def test_untrusted_corpus_text_executes_nothing(page, server):
    page.get_by_text("Folder or JSONL path").click()
    _settle(page)
    path = page.get_by_label("Corpus path")
    path.fill(str(server["corpus"]))
    path.press("Enter")
    _settle(page)
    _new_conversation(page)  # another corpus: the demo corpus's turns are no history for it
    msg = _ask(page, "How do I calibrate the flux widget?")
    assert "corpus evil-corpus" in msg.inner_text()
    msg.locator("[class*='st-key-citations-'] button").first.click()
    page.locator(".st-key-doc-panel").filter(has_text="press calibrate twice").wait_for()
    _settle(page)
    page.evaluate(FAILED_IMAGE)  # an <img onerror> drawn by the app would have fired by now
    body = page.inner_text("body")
    assert "<script>window.__pwned" in body, "the script is shown as text"
    assert "onerror" in body
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert page.dialogs == []
    assert page.locator("a[href^='javascript:' i], a[href^='data:' i]").count() == 0
    assert page.locator("img[src='x'], img[src*='tracker']").count() == 0
    assert page.locator("script:not([src])").filter(has_text="__pwned").count() == 0
    _shot(page, "untrusted")
    # verified: the evil title is in a verdict chip and the Provenance expander, still as text
    msg.get_by_role("button", name="Verify sources").click()
    msg.locator("[class*='st-key-sources-']").filter(has_text="load-bearing").wait_for()
    _settle(page)
    assert "onerror" in msg.locator("[class*='st-key-sources-']").inner_text()
    assert page.evaluate("typeof window.__pwned") == "undefined" and page.dialogs == []
    assert page.locator("a[href^='javascript:' i], img[src='x']").count() == 0


def test_compare_page_runs_two_configurations(page, server):
    page.goto(server["url"] + "/Compare")
    page.get_by_role("button", name="Run all").wait_for()
    page.get_by_role("button", name="Run all").click()
    page.locator(".st-key-cmp-col-1").wait_for()
    _settle(page)
    assert page.locator(".st-key-cmp-col-0").count() == 1
    page.set_viewport_size({"width": 1400, "height": 1700})
    if SHOTS:
        page.get_by_test_id("stMain").evaluate("el => el.scrollTo(0, 560)")
        page.wait_for_function("document.querySelector('[data-testid=stMain]').scrollTop > 0")
        _shot(page, "compare", page.get_by_test_id("stMain"))


def test_compare_shows_a_slow_columns_progress_and_cancel_keeps_the_finished_columns(page, server, tmp_path):
    """Columns C and D use a slow provider (the sidebar's, which new columns start from: it waits for the file
    `gate` before each model call, created once Cancel is taken); Cancel while C runs stops the job after C: A, B
    and C are shown, D never runs (issue 23 item 6)."""
    gate = tmp_path / "gate"
    question = "How do I configure SSO? (cancel test)"
    if not page.url.endswith("/Compare"):  # the test above leaves its Compare page (2 offline columns) to go on with
        page.goto(server["url"] + "/Compare")
    page.get_by_role("button", name="Run all").wait_for()
    _settle(page)
    page.get_by_test_id("stSidebar").get_by_test_id("stSelectbox").first.click()
    page.keyboard.type("scripted slow")
    page.keyboard.press("Enter")
    _settle(page)
    held = page.get_by_test_id("stSidebar").get_by_label("Wait for this file before each call")
    held.fill(str(gate))
    held.press("Enter")
    _settle(page)
    from playwright.sync_api import expect

    expect(held).to_have_value(str(gate))  # the gate is the columns' option before they run (a rerun kept it)
    page.get_by_test_id("stButtonGroup").get_by_text("4", exact=True).click()
    page.get_by_text("Configuration D").wait_for()
    _settle(page)
    page.get_by_label("Question", exact=True).fill(question)
    page.get_by_role("button", name="Run all").click()
    running = page.get_by_test_id("stExpander").filter(has_text="C · scripted slow (test)").filter(
        has_text="running (3 of 4)")
    running.wait_for(timeout=60_000)
    assert page.get_by_test_id("stExpander").filter(has_text="A · offline").filter(has_text="done in").count() == 1
    assert page.get_by_test_id("stExpander").filter(has_text="D · scripted slow (test)").filter(
        has_text="waiting").count() == 1
    page.get_by_role("button", name="Cancel").click()
    page.get_by_text("Cancelling: column C finishes first.").wait_for()
    gate.touch()  # C may finish now
    page.get_by_text("Cancelled: 3 of 4 columns ran; not run: D.").wait_for(timeout=60_000)
    _settle(page)
    for i in range(3):
        assert page.locator(f".st-key-cmp-col-{i}").count() == 1
    assert page.locator(".st-key-cmp-col-3").count() == 0
    import duckdb

    with duckdb.connect(str(server["db"]), read_only=True) as con:
        asked = con.execute("SELECT r.provider, count(*) FROM turns t JOIN runs r USING (run_id) "
                            "WHERE t.question = ? GROUP BY ALL ORDER BY 1", [question]).fetchall()
    assert asked == [("offline", 2), ("scripted-slow", 1)], asked


# --- a conversation: follow-ups, carried chips, a reload (issue 22, item 6) ----------------------------

CONVERSATION = ("How do I configure SSO with Okta?", "And with SAML?", "How long does that take?")


#: Records every skeleton Streamlit shows where citation pills belong (issue 34, item 2: an empty grey bar
#: after an answer, 16 of them for seconds on a reopened conversation), from the page's first paint.
SKELETON_WATCH = """
window.__pillSkeletons = [];
new MutationObserver((changes) => {
  for (const change of changes) for (const node of change.addedNodes) {
    if (node.nodeType !== 1) continue;
    for (const e of [node, ...node.querySelectorAll('[data-testid=stSkeleton]')]) {
      if (e.getAttribute('data-testid') !== 'stSkeleton' || !e.closest('[class*=st-key-citations-]')) continue;
      if (getComputedStyle(e).display !== 'none' && e.getClientRects().length) window.__pillSkeletons.push(e.outerHTML.slice(0, 80));
    }
  }
}).observe(document, {childList: true, subtree: true});
"""


def test_a_three_turn_conversation_shows_carried_chips_that_survive_a_reload(browser, server):
    """Issue 22, item 6: follow-ups carry the earlier turns; the third answer cites documents that only the first
    and second turns' tool results put in its context, and says so on its chips; a reload reopens the
    conversation from the trace database (`?conversation=ID`) with the same chips."""
    pg = _chat_page(browser, server, timeout=60_000, script=SKELETON_WATCH)
    try:
        pg.get_by_test_id("stSidebar").get_by_test_id("stSelectbox").first.click()
        pg.keyboard.type("scripted follow-up")
        pg.keyboard.press("Enter")
        pg.get_by_test_id("stSidebar").get_by_label("Model (optional)").wait_for()  # offline's is a select box
        _settle(pg)
        for question in CONVERSATION:
            msg = _ask(pg, question)
            assert "scripted follow-up (test)" in msg.inner_text(), "asked with the scripted provider"
        chips = msg.locator("[class*='st-key-sources-']")
        chips.filter(has_text="read in turn 2").wait_for()
        text = chips.inner_text()
        assert pg.evaluate("window.__pillSkeletons") == [], "a grey bar stood where an answer's pills belong"
        assert "Set up SSO with Okta · read in turn 1" in text, text
        assert "Configure SAML single sign-on (SSO) · read in turn 2" in text, text
        second = pg.get_by_test_id("stChatMessage").nth(3).locator("[class*='st-key-sources-']").inner_text()
        assert "Set up SSO with Okta · read in turn 1" in second and "SAML single sign-on (SSO) · read" not in second
        assert "read in turn" not in pg.get_by_test_id("stChatMessage").nth(1).inner_text(), "turn 1 read its own"
        assert "?conversation=c-" in pg.url, pg.url
        # the follow-up as the README shows it: its question, its answer and its chips, in one picture
        if SHOTS:
            question = pg.get_by_test_id("stChatMessage").nth(4)
            _center(msg)
            top, bottom = question.bounding_box(), chips.bounding_box()
            _shot(pg, "conversation", clip={"x": top["x"] - 8, "y": top["y"] - 8, "width": top["width"] + 16,
                                            "height": bottom["y"] + bottom["height"] - top["y"] + 16})
        _center(msg.get_by_text("Provenance", exact=True)).click()
        msg.get_by_text("Carried from earlier turns (", exact=False).wait_for()
        for line in ("Set up SSO with Okta · read in turn 1 (“How do I configure SSO with Okta?”)",
                     "Configure SAML single sign-on (SSO) · read in turn 2 (“And with SAML?”)"):
            assert msg.get_by_text(line, exact=False).count() == 1, line
        _settle(pg)
        url = pg.url
        pg.reload()
        pg.get_by_test_id("stChatInputTextArea").wait_for()
        pg.wait_for_function("document.querySelectorAll('[data-testid=stChatMessage]').length >= 6")
        _settle(pg)
        assert pg.url == url, "the reload keeps the conversation in the address"
        msg = pg.get_by_test_id("stChatMessage").nth(5)
        chips = msg.locator("[class*='st-key-sources-']")
        chips.filter(has_text="read in turn 2").wait_for()
        assert chips.inner_text() == text, "the same chips after the reload"
        msg.locator("[class*='st-key-citations-'] button").first.wait_for()
        assert pg.evaluate("window.__pillSkeletons") == [], "grey bars stood where the reopened turns' pills belong"
        asked = pg.get_by_test_id("stChatMessage").filter(has=pg.get_by_test_id("stChatMessageAvatarUser"))
        shown = [t.strip().splitlines()[-1] for t in asked.all_inner_texts()]  # the avatar's icon name, the question
        assert shown == list(CONVERSATION), f"the questions, in order: {shown}"
    finally:
        pg.close()


# --- no outside request, no unvalidated link (issue 17, item 7) ----------------------------------


@pytest.fixture(scope="module")
def beacon():
    """An HTTP server on loopback that records every request: hostile text must make none reach it."""
    import http.server
    import threading

    hits: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            hits.append(self.path)
            self.send_response(204)
            self.end_headers()

        do_POST = do_HEAD = do_GET  # noqa: N815

        def log_message(self, *args):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield {"url": f"http://127.0.0.1:{srv.server_address[1]}", "host": f"127.0.0.1:{srv.server_address[1]}",
           "hits": hits}
    srv.shutdown()


def _hostile_doc(b: str) -> str:
    """Every way we know for markdown, HTML, maths or auto-linking to make a browser fetch `b` or link it."""
    return f"""---
id: beacon-widget
title: "Beacon widget ![t]({b}/title-img.png) <img src={b}/title-html.png> {b}/title-bare www.title-beacon.example ops@title-beacon.example"
url: https://help.example.test/beacon-widget
---
To calibrate the beacon widget, open the beacon panel and press calibrate twice.
![body]({b}/body-img.png) <img src="{b}/body-html.png"> <link rel="prefetch" href="{b}/body-prefetch">
Calibration guide: {b}/body-bare and <{b}/body-angle> and www.body-beacon.example and ops@body-beacon.example.
Also mailto:ops@body-beacon.example and [a link]({b}/body-link) and [ref link][r] and ![ref image][i].
Maths $\\href{{{b}/katex-href}}{{x}}$ and $$\\url{{{b}/katex-url}}$$ and <style>@import url({b}/css);</style>
The beacon widget calibration takes two minutes: http\\:\\/\\/www\\.escaped-beacon\\.example

[r]: {b}/ref-link
[i]: {b}/ref-img.png
"""


#: Fetches the beacon's /control-* the ways hostile text would make the page fetch it (an image, a prefetch, a
#: stylesheet's import), from an element added now and removed by `_control_fetches`.
CONTROL = """(b) => { const box = document.createElement('div'); box.id = 'wb-control';
  box.innerHTML = `<img src="${b}/control-img.png"><link rel="prefetch" href="${b}/control-prefetch">`
    + `<style>@import url(${b}/control-css);</style>`;
  document.body.append(box); }"""


def _control_fetches(page, beacon, bound: float = 30.0) -> None:
    """Wait until the beacon has had the control fetches (`CONTROL`), then take them out of its record: a fetch
    of the same kind the page started earlier has arrived by then (in place of a fixed wait for stray loads)."""
    page.evaluate(CONTROL, beacon["url"])
    wanted, deadline = {"/control-img.png", "/control-prefetch", "/control-css"}, time.monotonic() + bound
    while not wanted <= set(beacon["hits"]):
        assert time.monotonic() < deadline, f"the control fetches did not arrive: {beacon['hits']}"
        time.sleep(0.02)  # polling the beacon's record: the condition is the control fetches' arrival
    page.evaluate("document.getElementById('wb-control').remove()")
    beacon["hits"][:] = [h for h in beacon["hits"] if h not in wanted]


def _links(page) -> list[str]:
    """Every link target on the page but Streamlit's own (page navigation, skip link, heading anchors)."""
    return page.locator("a[href]:not([data-testid=stSidebarNavLink]):not([href^='#'])").evaluate_all(
        "els => els.map(e => e.getAttribute('href'))")


def test_hostile_text_makes_no_outside_request_and_no_unvalidated_link(page, server, beacon):
    b = beacon["url"]
    corpus = server["corpus"].parent / "beacon-corpus"
    corpus.mkdir(exist_ok=True)
    (corpus / "beacon-widget.md").write_text(_hostile_doc(b))
    (corpus / "beacon-reset.md").write_text(SAFE_DOC.replace("widget-reset", "beacon-reset")
                                            .replace("flux widget", "beacon widget"))
    path = _open_with_corpus(page, server, corpus)
    msg = _ask(page, f"How do I calibrate the beacon widget? ![q]({b}/question.png) www.question-beacon.example")
    msg.locator("[class*='st-key-citations-'] button").first.click()
    page.locator(".st-key-doc-panel").filter(has_text="press calibrate twice").wait_for()
    _settle(page)
    page.get_by_text("Provenance", exact=True).last.click()
    page.get_by_text("Claims", exact=False).last.click()
    page.get_by_text("Tool calls", exact=False).last.click()
    _settle(page)
    # the compare page lays the same titles out again (same session: the sidebar keeps the corpus)
    page.get_by_test_id("stSidebarNavLink").filter(has_text="Compare").click()
    page.get_by_role("button", name="Run all").wait_for()
    page.get_by_label("Question", exact=True).fill(f"calibrate the beacon widget ![c]({b}/compare.png)")
    page.get_by_role("button", name="Run all").click()
    page.locator(".st-key-cmp-col-1").wait_for()
    _settle(page)
    assert "![t]" in page.inner_text("body")
    validated = {"https://help.example.test/beacon-widget", "https://help.example.test/beacon-reset"}
    assert set(_links(page)) <= validated, f"links not built from validated citations: {set(_links(page)) - validated}"
    page.get_by_test_id("stSidebarNavLink").filter(has_text="Chat").click()
    page.get_by_test_id("stChatInputTextArea").wait_for()
    _settle(page)
    # a typed path is shown back in an error: it must stay text too
    path.fill(f"![s]({b}/sidebar.png) {b}/sidebar-bare")
    path.press("Enter")
    _settle(page)
    _control_fetches(page, beacon)  # any image, prefetch or stylesheet the page asked for earlier has arrived
    _shot(page, "hostile")
    assert beacon["hits"] == [], f"the browser fetched {beacon['hits']}"
    assert page.locator(f"img[src*='{beacon['host']}'], link[href*='{beacon['host']}']").count() == 0
    body = page.inner_text("body")
    assert "![t]" in body and "title-bare" in body, "hostile titles are shown as text"
    hrefs = _links(page)
    assert set(hrefs) <= validated, f"links not built from validated citations: {set(hrefs) - validated}"
    assert "https://help.example.test/beacon-widget" in hrefs, "the validated citation is still a link"


# --- a document cannot freeze the viewer's tab (issue 24, item 6) --------------------------------

RLO = "\u202e"


def _long_line_doc() -> str:
    """~200 KB: a bidi override (a file name spoofed as "gpj.exe" → shown "exe.jpg") and one 200,000-character
    line of right-to-left script, which the browser shapes and reorders as one paragraph."""
    line = RLO + ("مرحبا بالعالم " * 14_300)[:200_000 - 1]
    return ("---\nid: overflow-widget\ntitle: \"Overflow widget invoice" + RLO + "gpj.exe\"\n---\n"
            "To calibrate the overflow widget, open the overflow panel and press calibrate twice.\n"
            f"{line}\nThe overflow widget calibration ends here: endmarker-overflow.\n")


def test_a_document_with_a_200000_character_line_and_a_bidi_override_renders_in_the_side_panel(browser, server):
    from workbench.render.escaping import MAX_LINE_CHARS

    corpus = server["corpus"].parent / "overflow-corpus"
    corpus.mkdir(exist_ok=True)
    (corpus / "overflow-widget.md").write_text(_long_line_doc(), encoding="utf-8")
    (corpus / "overflow-reset.md").write_text(SAFE_DOC.replace("widget-reset", "overflow-reset")
                                              .replace("flux widget", "overflow widget"))
    pg = browser.new_page(viewport={"width": 1400, "height": 1000})  # its own tab: a frozen one stops no other test
    try:
        pg.set_default_timeout(60_000)  # setting up may be slow on a loaded machine; the bound below is 30 s
        watch_runs(pg)
        _open_with_corpus(pg, server, corpus)
        msg = _ask(pg, "How do I calibrate the overflow widget?")
        pill = msg.locator("[class*='st-key-citations-'] button").filter(has_text="Overflow widget invoice")
        start = time.monotonic()
        pill.first.click()
        # the whole document, to its last line, is drawn in the panel within a generous bound (it took 294 s)
        pg.locator(".st-key-doc-panel").filter(has_text="endmarker-overflow").wait_for(timeout=30_000)
        elapsed = time.monotonic() - start
        assert elapsed < 30, elapsed
        body = pg.inner_text("body")
        assert RLO not in body, "no bidi control reaches the page"
        assert "invoice\\u202egpj.exe" in pg.locator(".st-key-doc-panel").inner_text(), "the override is visible"
        # no line the browser lays out in the panel is longer than the cut (highlight markup aside)
        lines = pg.locator(".st-key-doc-text").evaluate(
            "el => el.innerText.split('\\n').map(l => l.length)")
        assert max(lines) <= MAX_LINE_CHARS + 10, max(lines)
    finally:
        pg.close()


def test_a_new_answer_scrolls_into_view_after_reading_an_earlier_expander(page):
    """Issue 41 item 5: scrolled up to read an earlier answer's expander, the reader asked again and the new answer
    landed below the fold (y = 1758 in an 800 px window) while the screen still showed the old expander."""
    page.set_viewport_size({"width": 1400, "height": 800})
    try:
        _new_conversation(page)
        _ask(page, "How do I configure SSO?")
        _ask(page, "How do I rotate an API key?")
        first = page.get_by_test_id("stChatMessage").nth(1)
        expander = first.get_by_text("Tool calls (", exact=False).first
        _center(expander).click()  # the reader scrolls up and opens an earlier answer's expander
        _settle(page)
        assert page.evaluate("window.innerHeight") == 800
        msg = _ask(page, "How do I cancel my subscription?")
        page.wait_for_function("""() => { const m = [...document.querySelectorAll('[data-testid=stChatMessage]')];
            const top = m[m.length - 1].getBoundingClientRect().top; return top >= 0 && top < window.innerHeight; }""",
                               timeout=15_000)
        top = msg.bounding_box()["y"]
        assert 0 <= top < 800, f"the new answer's top is at y = {top:.0f}"
        _shot(page, "new-answer-in-view")
    finally:
        page.set_viewport_size({"width": 1400, "height": 1000})


#: The scrolled chat's scrollbar thumb: its centre, from the scroller's box and scroll position.
THUMB = """() => { const s = document.querySelector('[data-testid=stAppScrollToBottomContainer]');
  const r = s.getBoundingClientRect(), bar = r.right - (s.offsetWidth - s.clientWidth) / 2;
  const thumb = s.clientHeight * s.clientHeight / s.scrollHeight;
  return {x: bar, y: r.top + s.scrollTop / s.scrollHeight * s.clientHeight + thumb / 2, top: r.top,
          width: s.offsetWidth - s.clientWidth}; }"""


def _choose_provider(pg, typed: str) -> None:
    """Choose the sidebar's provider by typing its name into the picker."""
    pg.get_by_test_id("stSidebar").get_by_test_id("stSelectbox").filter(has=pg.get_by_text("Provider", exact=True)).click()
    pg.keyboard.type(typed)
    pg.keyboard.press("Enter")
    _settle(pg)


def _drag_during_a_slow_answer(pg, drag, gate) -> None:
    """In a chat with two answers or more (asked here when it has fewer), a held answer: once its question is followed
    into view, `drag(pg)` takes the chat to its top while the answer is still being written (the scripted model waits
    for the file `gate`, created after the drag); the reader must stay there after the answer is drawn."""
    while pg.get_by_test_id("stChatMessage").count() < 4:
        _ask(pg, ("How do I configure SSO?", "How do I rotate an API key?")[pg.get_by_test_id("stChatMessage").count() // 2])
    asked = pg.get_by_test_id("stChatMessage").count()
    _choose_provider(pg, "scripted slow")
    held = pg.get_by_test_id("stSidebar").get_by_label("Wait for this file before each call")
    held.fill(str(gate))
    held.press("Enter")
    _settle(pg)
    from playwright.sync_api import expect

    expect(held).to_have_value(str(gate))
    box = pg.get_by_test_id("stChatInputTextArea")
    box.fill("How do I cancel my subscription?")
    box.press("Enter")
    # the new question is drawn and followed into view while its answer is still being written
    pg.wait_for_function("""(n) => { const m = document.querySelectorAll('[data-testid=stChatMessage]');
        const top = m.length > n && m[n].getBoundingClientRect().top;
        return top >= 0 && top < window.innerHeight / 2; }""", arg=asked)
    deadline = time.monotonic() + 120
    while not gate.with_name(gate.name + ".held").exists():  # the answer's first model call is held at the gate
        assert time.monotonic() < deadline, "the scripted model never held the answer's first call"
        time.sleep(0.02)
    drag(pg)
    assert pg.evaluate("document.querySelector('[data-testid=stApp]').dataset.testScriptState") == "running"
    dragged = pg.get_by_test_id("stAppScrollToBottomContainer").evaluate("e => e.scrollTop")
    assert dragged < 40, f"the drag did not scroll the chat to its top: scrollTop {dragged}"
    gate.touch()  # the answer may come now
    pg.get_by_test_id("stChatMessage").nth(asked + 1).wait_for(timeout=60_000)
    _settle(pg)
    # two frames: the follow, if it were still on, would have scrolled by then
    pg.evaluate("() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)))")
    after = pg.get_by_test_id("stAppScrollToBottomContainer").evaluate("e => e.scrollTop")
    _shot(pg, "scrollbar-drag")
    assert after < 40, f"the chat pulled the reader from the top they dragged to, to scrollTop {after}"


def _drag_the_thumb(pg) -> None:
    thumb = pg.evaluate(THUMB)
    assert thumb["width"] >= 6, f"no scrollbar to drag: {thumb}"
    pg.mouse.move(thumb["x"], thumb["y"])
    pg.mouse.down()
    pg.mouse.move(thumb["x"], thumb["top"] + 2, steps=8)
    pg.mouse.up()


def test_dragging_the_scrollbar_while_an_answer_comes_leaves_the_reader_where_they_dragged(playwright, server,
                                                                                          tmp_path):
    """Issue 41 item 5: the chat follows a question asked into view until its run is over, unless the reader scrolls;
    a drag of the scrollbar (no wheel, no key, no touch) was not taken for the reader's scroll, so the chat pulled
    them back to the new question. Chromium with its scrollbars shown (playwright hides them by default)."""
    shown = playwright.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS,
                                       ignore_default_args=["--hide-scrollbars"])
    try:
        pg = shown.new_page(viewport={"width": 1400, "height": 800})
        watch_runs(pg)
        pg.goto(server["url"])
        pg.get_by_test_id("stChatInputTextArea").wait_for(timeout=120_000)
        _drag_during_a_slow_answer(pg, _drag_the_thumb, tmp_path / "gate")
    finally:
        (tmp_path / "gate").touch()  # nothing stays held in the session's app, whatever happened
        shown.close()


def _drag_an_overlay_scrollbar(pg) -> None:
    """A scrollbar drawn over the content (phones, macOS): the press lands on the content, not outside the scrolled
    element's client area, and the chat scrolls while the pointer is held (no wheel, no key, no touch)."""
    scroller = pg.get_by_test_id("stAppScrollToBottomContainer")
    edge = scroller.bounding_box()
    pg.mouse.move(edge["x"] + edge["width"] - 3, edge["y"] + edge["height"] / 2)
    pg.mouse.down()
    for _ in range(8):
        scroller.evaluate("e => { e.scrollTop = Math.max(0, e.scrollTop - e.scrollHeight / 6); }")
    pg.mouse.up()


def test_an_overlay_scrollbar_drag_while_an_answer_comes_leaves_the_reader_where_they_dragged(page, tmp_path):
    """Issue 41 item 5, with the scrollbars playwright's chromium draws by default: none taking room of their own. In
    the module's page, 800 px high, whose chat (the test above's, three answers) the held answer follows."""
    page.set_viewport_size({"width": 1400, "height": 800})
    try:
        _drag_during_a_slow_answer(page, _drag_an_overlay_scrollbar, tmp_path / "gate")
    finally:
        (tmp_path / "gate").touch()  # nothing stays held, whatever happened
        _choose_provider(page, "offline")  # the tests after this one ask the sidebar's default provider
        page.set_viewport_size({"width": 1400, "height": 1000})


def test_at_1024_px_the_pill_clicked_is_not_red_and_no_tooltip_covers_the_panels_title(page):
    """Issue 41 item 12: the selected pill was Streamlit's default red (it read as an error), and the panel's ✕ opened
    under the pointer that clicked the pill, its "Close the document" tooltip over the title."""
    page.set_viewport_size({"width": 1024, "height": 900})
    try:
        _new_conversation(page)
        msg = _ask(page, "How do I configure SSO?")
        pill = _center(msg.locator("[class*='st-key-citations-'] button").first)
        box = pill.bounding_box()
        page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        panel = page.locator(".st-key-doc-panel")
        panel.wait_for()
        _settle(page)
        chosen = msg.locator("[class*='st-key-citations-'] button[kind*='Active'], "
                             "[class*='st-key-citations-'] button[aria-checked='true']").first
        chosen.wait_for()
        rgb = chosen.evaluate("""e => [getComputedStyle(e).borderColor, getComputedStyle(e).color,
                                       getComputedStyle(e).backgroundColor].join(' ')""")
        reds = [tuple(map(int, m)) for m in re.findall(r"rgba?\((\d+), (\d+), (\d+)", rgb)]
        assert not [c for c in reds if c[0] > 180 and c[1] < 120 and c[2] < 120], f"a red selected pill: {rgb}"
        close = panel.locator(".st-key-close-doc")
        assert close.get_by_test_id("stTooltipHoverTarget").count() == 0, "no tooltip on the close button"
        close.locator("button").hover()
        assert page.get_by_test_id("stTooltipContent").count() == 0
        _shot(page, "pill-1024")
        _center(close.locator("button")).click()
        panel.wait_for(state="detached")
        _settle(page)
    finally:
        page.set_viewport_size({"width": 1400, "height": 1000})


def test_at_1024_px_the_panels_close_button_never_opens_under_the_pointer_that_clicked(page):
    """Issue 41 item 12: at 1024 px the panel opens over the chat, and its ✕ could open right under the pointer that
    clicked a citation pill: hovered at once, and a second click there (a double click) closed what had just opened.
    The test puts a pill where the ✕ opens (scrolled there, and moved along its row as a longer title would be)."""
    page.set_viewport_size({"width": 1024, "height": 900})
    try:
        asked = page.get_by_test_id("stChatMessage")
        if asked.count() != 2 or "How do I configure SSO?" not in asked.first.inner_text():  # not the test above's chat
            _new_conversation(page)
            _ask(page, "How do I configure SSO?")
        _ask(page, "How do I rotate an API key?")
        pill = page.get_by_test_id("stChatMessage").nth(1).locator("[class*='st-key-citations-'] button").first
        _center(pill).click()  # where does the ✕ open?
        close = page.locator(".st-key-close-doc button")
        close.wait_for()
        _settle(page)
        _shot(page, "close-spot-1024")
        spot = close.bounding_box()
        x, y = spot["x"] + spot["width"] / 2, spot["y"] + spot["height"] / 2
        close.click()
        close.wait_for(state="detached")
        _settle(page)
        box = pill.bounding_box()  # the reader scrolls the pill to the ✕'s height (the wheel: the pin lets go)
        page.mouse.move(box["x"] - 40, y)
        page.mouse.wheel(0, box["y"] + box["height"] / 2 - y)
        pill.evaluate("""(e, y) => new Promise((done) => { const on = () => { const r = e.getBoundingClientRect();
            if (Math.abs(r.top + r.height / 2 - y) < 3) done(); else requestAnimationFrame(on); }; on(); })""", y)
        box = pill.bounding_box()
        if not box["x"] + 4 < x < box["x"] + box["width"] - 4:  # further along its row, as a longer title's would be
            pill.evaluate("(e, dx) => { e.style.transform = `translateX(${dx}px)`; }", x - box["x"] - box["width"] / 2)
        assert pill.evaluate("(e, p) => e.contains(document.elementFromPoint(p[0], p[1]))", [x, y]), \
            "the pill is not where the ✕ opens"
        page.mouse.click(x, y)
        close.wait_for()
        _settle(page)
        under = page.evaluate("p => document.elementFromPoint(p[0], p[1])?.closest('.st-key-close-doc') !== null",
                              [x, y])
        assert not under, "the ✕ opened under the pointer that clicked the pill"
        page.mouse.click(x, y)  # the second click of a double click
        _settle(page)
        assert page.locator(".st-key-doc-panel").count() == 1, "a second click where the pill was closed the panel"
        page.mouse.move(x - 20, y + 20, steps=4)  # once the pointer moves, the ✕ is a button like any other
        close.click()
        close.wait_for(state="detached")
        _settle(page)
    finally:
        page.set_viewport_size({"width": 1400, "height": 1000})


def test_open_a_past_conversation_closes_its_popover(page):
    """Issue 41 item 12: after "Open" the popover stayed open over the conversation it had just opened."""
    _new_conversation(page)
    _ask(page, "How do I rotate an API key?")
    _new_conversation(page)
    _ask(page, "How do I configure SSO?")
    page.get_by_role("button", name="Open a past conversation").click()
    picker = page.get_by_test_id("stPopoverBody")
    picker.wait_for()
    picker.get_by_test_id("stSelectbox").click()
    page.get_by_role("option").filter(has_text="How do I rotate an API key?").first.click()
    _settle(page)
    page.locator(".st-key-open-conversation button").click()
    page.get_by_test_id("stChatMessage").filter(has_text="rotate an API key").first.wait_for()
    _settle(page)
    picker.wait_for(state="hidden", timeout=10_000)
    assert "conversation=" in page.url
