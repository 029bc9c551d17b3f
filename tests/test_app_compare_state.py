"""The Compare page keeps its configurations, question and results when you go to Chat and back (issue 41, item 8),
under AppTest: one session switching pages as the navigation does. The browser test (tests/test_browser_compare.py)
checks the same in chromium, with the chips at 1024 px."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

from apptest import APP


def test_compare_keeps_its_configurations_and_results_across_pages(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_DB", str(tmp_path / "traces.duckdb"))
    at = AppTest.from_file(APP, default_timeout=60).run()
    at.switch_page("pages/1_Compare.py").run()
    at.segmented_control(key="cmp_count").set_value(3).run()
    at.radio(key="cmp_mode_2").set_value("excerpts").run()
    at.text_input(key="cmp_question").set_value("How do I reset my password?")
    next(b for b in at.button if b.label == "Run all").click().run()
    assert not at.exception, at.exception
    assert len(at.session_state["cmp_conversations"]) == 3

    at.switch_page("app.py").run()
    assert [t.value for t in at.title] == ["Provenance Workbench"], "on the chat page"
    at.switch_page("pages/1_Compare.py").run()
    assert not at.exception, at.exception
    assert at.segmented_control(key="cmp_count").value == 3
    assert at.radio(key="cmp_mode_2").value == "excerpts"
    assert at.text_input(key="cmp_question").value == "How do I reset my password?"
    assert len(at.session_state["cmp_conversations"]) == 3 and at.get("plotly_chart"), "the results are shown"
