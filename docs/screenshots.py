"""Refresh the app's screenshots in docs/img/ (chat.png, provenance.png, conversation.png, compare.png).

    .venv/bin/python docs/screenshots.py            # writes docs/img/*.png
    .venv/bin/python docs/screenshots.py --out DIR  # somewhere else

It starts `streamlit run app.py` on a free loopback port (`tests/streamlit_server.py`, as the browser tests do)
with a fresh WORKBENCH_HOME and trace database in a temporary folder, on the demo corpus with the offline
provider (no model, no network), and drives Debian's /usr/bin/chromium through playwright: it asks "How do I
configure SSO?", verifies it (the headline and the chips carry the verdicts), opens a citation (chat.png) and the
Provenance expander (provenance.png), asks a few more conversations (one with the offline `corrupt_id` fault, so
a citation is rejected) and a Compare run, and opens "Open a past conversation" (conversation.png: the Compare
columns are not in it). Every step waits for the page, never for a fixed time. The PNGs are quantised to 128
colours to stay small.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from streamlit_server import (  # noqa: E402  (tests/ is not a package)
    CHROMIUM, LAUNCH_ARGS, ask, settle, streamlit_app, watch_runs)

VIEWPORT = {"width": 1400, "height": 1000}
#: The conversations asked before the picker is shown: (questions, offline faults), oldest first.
CONVERSATIONS = ((("Which articles do you have?",), ()),
                 (("How do I set up SSO with Okta?", "And with Microsoft Entra ID?"), ()),
                 (("How do I turn on two-factor authentication?",), ("corrupt_id",)))


def save(image: Path, out: Path) -> None:
    from PIL import Image

    with Image.open(image) as img:
        img.convert("RGB").quantize(colors=128).save(out, optimize=True)
    print(f"wrote {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}")


def set_faults(page, faults: tuple[str, ...]) -> None:
    """The sidebar's "Offline fault simulation" set to `faults` (cleared first)."""
    box = page.get_by_test_id("stSidebar").get_by_test_id("stMultiSelect")
    clear = box.get_by_role("button", name="Clear all")
    if clear.count():
        clear.first.click()
        settle(page)
    for fault in faults:
        box.click()
        page.get_by_role("option", name=fault, exact=True).click()
        page.keyboard.press("Escape")
        settle(page)


def new_conversation(page) -> None:
    page.get_by_role("button", name="New conversation").click()
    page.wait_for_function("document.querySelectorAll('[data-testid=stChatMessage]').length === 0")
    settle(page)


def chat_and_provenance(page, shots: Path) -> None:
    msg = ask(page, "How do I configure SSO?", settle)
    msg.get_by_role("button", name="Verify sources").click()
    msg.locator("[class*='st-key-headline-']").filter(has_text="load-bearing").wait_for()
    msg.get_by_role("button", name="Verify sources").wait_for(state="detached")  # the rerun drew the whole turn
    settle(page)
    msg.locator("[class*='st-key-citations-'] button").first.click()
    page.locator(".st-key-doc-panel").wait_for()
    page.wait_for_function("(document.querySelector('.st-key-doc-text')?.innerText || '').trim().length > 200")  # drawn
    settle(page)
    msg.locator("[class*='st-key-headline-']").evaluate("e => e.scrollIntoView({block: 'center'})")
    page.screenshot(path=str(shots / "chat.png"))
    page.locator(".st-key-close-doc button").first.click()
    page.locator(".st-key-doc-panel").wait_for(state="detached")
    settle(page)
    page.set_viewport_size({"width": 1400, "height": 2200})  # the whole expander above the chat input
    msg.get_by_text("Provenance", exact=True).click()
    expander = msg.get_by_test_id("stExpander").filter(has_text="Retrieved")
    expander.locator(".js-plotly-plot").wait_for()
    expander.locator(".js-plotly-plot .bars").first.wait_for()
    settle(page)
    expander.evaluate("e => e.scrollIntoView({block: 'center'})")  # clear of Streamlit's header and the chat input
    expander.screenshot(path=str(shots / "provenance.png"))
    page.set_viewport_size(VIEWPORT)


def compare(page, url: str, shots: Path) -> None:
    """Two configurations (the second in excerpt mode), the question and a follow-up: each column a conversation."""
    page.goto(url + "/Compare")
    page.get_by_role("button", name="Run all").wait_for()
    settle(page)
    modes = page.get_by_test_id("stMain").get_by_test_id("stRadio").filter(has_text="excerpts")
    modes.nth(1).get_by_text("excerpts", exact=True).click()  # configuration B's mode
    settle(page)
    page.get_by_test_id("stMain").get_by_test_id("stTextArea").locator("textarea").fill("And with Okta?")
    page.get_by_role("button", name="Run all").click()
    page.locator(".st-key-cmp-col-1").first.wait_for(timeout=120_000)
    settle(page)
    page.set_viewport_size({"width": 1400, "height": 1700})
    page.get_by_test_id("stMain").evaluate("el => el.scrollTo(0, 560)")
    page.wait_for_function("document.querySelector('[data-testid=stMain]').scrollTop > 0")
    page.get_by_test_id("stMain").screenshot(path=str(shots / "compare.png"))
    page.set_viewport_size(VIEWPORT)


def past_conversations(page, url: str, shots: Path) -> None:
    page.goto(url)
    page.get_by_test_id("stChatInputTextArea").wait_for()
    settle(page)
    for questions, faults in CONVERSATIONS:
        if page.get_by_test_id("stChatMessage").count():
            new_conversation(page)
        set_faults(page, faults)
        for q in questions:
            ask(page, q, settle)
    set_faults(page, ())
    page.get_by_role("button", name="Open a past conversation").click()
    page.get_by_test_id("stPopoverBody").get_by_test_id("stSelectbox").click()
    options = page.get_by_role("option")
    options.nth(len(CONVERSATIONS)).wait_for()  # the chat's own conversations: the Compare columns are not listed
    boxes = [page.get_by_role("listbox").bounding_box(), page.get_by_test_id("stPopoverBody").bounding_box(),
             page.locator(".st-key-conversation-controls").bounding_box()]
    left, top = min(b["x"] for b in boxes), min(b["y"] for b in boxes)
    right, bottom = max(b["x"] + b["width"] for b in boxes), max(b["y"] + b["height"] for b in boxes)
    page.screenshot(path=str(shots / "conversation.png"), clip={
        "x": max(0, left - 16), "y": max(0, top - 16), "width": right - left + 32, "height": bottom - top + 32})
    page.keyboard.press("Escape")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "img", help="where the PNGs go")
    args = parser.parse_args(argv)
    if not Path(CHROMIUM).exists():
        print(f"{CHROMIUM} is missing: install it with `apt-get install -y chromium`", file=sys.stderr)
        return 2
    from playwright.sync_api import sync_playwright

    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="wb-screens-") as tmp_name:
        tmp = Path(tmp_name)
        shots = tmp / "shots"
        shots.mkdir()
        env = {"WORKBENCH_HOME": str(tmp / "home"), "WORKBENCH_DB": str(tmp / "traces.duckdb")}
        with streamlit_app(tmp, env) as served, sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
            try:
                page = browser.new_page(viewport=VIEWPORT)
                page.set_default_timeout(60_000)
                watch_runs(page)  # `settle` waits for the runs the clicks ask for, not a fixed time
                page.goto(served.url)
                page.get_by_test_id("stChatInputTextArea").wait_for(timeout=120_000)  # a first start builds the index
                settle(page)
                chat_and_provenance(page, shots)
                compare(page, served.url, shots)
                past_conversations(page, served.url, shots)
            finally:
                browser.close()
        for name in ("chat", "provenance", "conversation", "compare"):
            save(shots / f"{name}.png", args.out / f"{name}.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
