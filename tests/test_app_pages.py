"""Compare, trace explorer and doc-gap pages under AppTest, over a real trace database."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def db(tmp_path, monkeypatch):
    path = tmp_path / "traces.duckdb"
    monkeypatch.setenv("WORKBENCH_DB", str(path))
    return path


def page(name: str) -> AppTest:
    at = AppTest.from_file(str(ROOT / "pages" / name), default_timeout=60).run()
    assert not at.exception, at.exception
    return at


def test_compare_runs_two_configurations_side_by_side_and_marks_differences(db):
    at = page("1_Compare.py")
    at.selectbox(key="cmp_provider_0").set_value("offline")
    at.radio(key="cmp_mode_0").set_value("agent")
    at.radio(key="cmp_mode_1").set_value("excerpts")
    at.text_input(key="cmp_question").set_value("How do I configure SSO?")
    at.button[0].click().run()
    assert not at.exception, at.exception
    turns = at.session_state["cmp_turns"]
    assert [t.payload["mode"] for t in turns] == ["agent", "excerpts"]
    md = "\n".join(m.value for m in at.markdown)
    assert md.count("**Consulted** (") == 2
    retrieved = [set(t.payload["sets"]["retrieved"]) for t in turns]
    if retrieved[0] != retrieved[1]:
        assert ":violet-badge[differs]" in md


def test_trace_explorer_runs_canned_and_typed_queries_and_refuses_writes(db):
    chat = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60).run()
    chat.chat_input[0].set_value("How do I configure SSO?").run()
    chat.chat_input[0].set_value("How do I bake a sourdough loaf?").run()
    assert db.exists(), "every chat turn is traced"

    at = page("2_Trace_explorer.py")
    df = at.dataframe[0].value
    assert list(df.columns[:3]) == ["provider", "model", "turns"] and int(df["turns"].sum()) == 2
    assert at.get("plotly_chart"), "results are charted"
    at.selectbox(key="canned").set_value("Tool usage").run()
    assert "tool_calls" in at.text_area(key="sql").value
    at.button[0].click().run()
    assert "search" in set(at.dataframe[0].value["name"])

    at.text_area(key="sql").set_value("SELECT count(*) AS n FROM turns")
    at.button[0].click().run()
    assert int(at.dataframe[0].value["n"][0]) == 2

    at.text_area(key="sql").set_value("DELETE FROM turns")
    at.button[0].click().run()
    assert not at.exception
    assert any("refused" in e.value and "DELETE" in e.value for e in at.error)
    at.text_area(key="sql").set_value("SELECT count(*) AS n FROM turns")
    at.button[0].click().run()
    assert int(at.dataframe[0].value["n"][0]) == 2, "the refused write changed nothing"


def test_doc_gap_queue_lists_questions_that_consulted_nothing(db):
    chat = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60).run()
    for q in ("How do I bake a sourdough loaf?", "how do I bake a  sourdough loaf?", "How do I configure SSO?",
              "Which articles do you have?"):
        chat.chat_input[0].set_value(q).run()
    at = page("3_Doc_gaps.py")
    df = at.dataframe[0].value
    assert [" ".join(q.lower().split()) for q in df["question"]] == ["how do i bake a sourdough loaf?"]
    assert int(df["asks"][0]) == 2
    assert any(b.label == "Download CSV" for b in at.get("download_button"))


def test_pages_without_a_trace_database_say_so(db):
    for name in ("2_Trace_explorer.py", "3_Doc_gaps.py"):
        at = page(name)
        assert any("No trace database" in i.value for i in at.info)


def test_trace_explorer_queries_on_submit_not_on_every_rerun(db):
    from workbench.session import Session

    session = Session.open(trace_db=db)
    session.ask("How do I configure SSO?")
    at = page("2_Trace_explorer.py")
    at.text_area(key="sql").set_value("SELECT count(*) AS n FROM turns")
    at.button[0].click().run()
    assert int(at.dataframe[0].value["n"][0]) == 1
    session.ask("How do I rotate an API key?")  # the database changes behind the page's back
    at.sidebar.slider(key="cfg_k").set_value(7).run()  # a rerun for another widget: no new query
    assert not at.exception and int(at.dataframe[0].value["n"][0]) == 1
    at.button[0].click().run()  # submitted: the query runs again
    assert int(at.dataframe[0].value["n"][0]) == 2
    at.selectbox(key="canned").set_value("Tool usage").run()  # choosing a canned query runs it
    assert "calls" in at.dataframe[0].value.columns


def test_every_page_is_in_the_apps_navigation():
    """`app.py`'s `st.navigation` lists the pages (the folder is not auto-discovered): a page file without
    its line there is unreachable."""
    app = (ROOT / "app.py").read_text(encoding="utf-8")
    missing = [p.name for p in sorted((ROOT / "pages").glob("*.py")) if f'"pages/{p.name}"' not in app]
    assert not missing, missing
