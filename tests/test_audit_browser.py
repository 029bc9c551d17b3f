"""An audited turn in a real browser (chromium, `streamlit run app.py`): the question and the span names are the
audited app's text — an `<img onerror>` in them is shown as text in the turn, the evidence table and the spans'
timeline, never run as HTML."""

from __future__ import annotations

from browser_app import NEEDS_CHROMIUM
from streamlit_server import CHROMIUM, LAUNCH_ARGS, streamlit_app
from test_audit_app import HOSTILE, db, ingested  # noqa: F401  (the fixtures: an ingested audit run, copied per test)

pytestmark = NEEDS_CHROMIUM


def test_span_text_of_an_audited_turn_is_shown_as_text(db, tmp_path):  # noqa: F811 - `db` is the fixture
    from playwright.sync_api import sync_playwright

    with streamlit_app(tmp_path, {"WORKBENCH_DB": str(db)}) as served, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1300, "height": 1600})
            dialogs = []
            page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
            page.goto(served.url + "/Experiments")
            page.get_by_text("Provenance", exact=True).first.click(timeout=60_000)
            page.get_by_text("Tool calls (1)").first.click()
            page.get_by_text("Never shown to the model").first.wait_for(timeout=30_000)
            label = page.locator(".js-plotly-plot text", has_text="2. llm ChatCompletion").first
            label.wait_for(timeout=30_000)  # the timeline's span row, drawn by plotly
            assert HOSTILE in label.text_content()  # its name as the app wrote it: text
            assert page.get_by_text(f"How do I cancel our plan? {HOSTILE}").first.is_visible()
            assert page.locator('img[src="x"]').count() == 0
            assert page.evaluate("window.__pwned") is None and not dialogs
        finally:
            browser.close()
