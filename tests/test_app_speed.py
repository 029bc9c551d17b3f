"""What a rerun of the chat page recomputes (issue 25 item 10): every click reruns the script, which redraws
every turn, so what a turn draws from its payload alone is computed once, not on every click. The timings
are in benchmarks/app_speed.py; this checks the work, not the clock."""

from __future__ import annotations

import pytest

from apptest import ask


@pytest.fixture
def counted(monkeypatch):
    """Calls of the markdown escaper's worker and of plotly figure construction, from now on."""
    import plotly.graph_objects as go

    from workbench.render import escaping

    calls = {"escape": 0, "figure": 0}
    inner, figure = escaping.literal_markdown, go.Figure

    def escaped(*args, **kwargs):
        calls["escape"] += 1
        return inner(*args, **kwargs)

    class Counted(figure):
        def __init__(self, *args, **kwargs):
            calls["figure"] += 1
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(escaping, "literal_markdown", escaped)
    monkeypatch.setattr(go, "Figure", Counted)
    return calls


def test_a_click_redraws_the_turns_without_escaping_or_building_their_charts_again(app, counted):
    for q in ("How do I configure SSO?", "Which articles do you have?", "How do I rotate an API key?"):
        ask(app, q)
    app.run()  # drawn once more with every turn: whatever is cached is cached now
    before = dict(counted)
    turn = app.session_state["turns"][0]
    pill = app.button_group(key=f"cite-{turn.turn_id}")
    pill.set_value(pill.options[0].content if hasattr(pill.options[0], "content") else pill.options[0]).run()
    assert not app.exception, app.exception
    assert app.session_state["open_doc"], "the click opened the side panel"
    assert counted["figure"] == before["figure"], "a click rebuilt the turns' set-size charts"
    escaped = counted["escape"] - before["escape"]
    # the side panel escapes its own document (title, text); the three turns' lists must not be redone
    assert escaped < 10, f"a click escaped {escaped} strings of the three turns again"


def test_a_page_opened_again_reads_an_unchanged_trace_database_once(tmp_path, monkeypatch):
    from streamlit.testing.v1 import AppTest

    from conftest import ROOT
    from workbench.session import Session
    from workbench.trace import TraceReader

    db = tmp_path / "traces.duckdb"
    monkeypatch.setenv("WORKBENCH_DB", str(db))
    session = Session.open(trace_db=db)
    session.ask("How do I bake a sourdough loaf?")
    queries = []
    run = TraceReader._run
    monkeypatch.setattr(TraceReader, "_run", lambda self, sql, *a, **kw: queries.append(sql) or run(self, sql, *a, **kw))

    def open_gaps():  # again by the same browser: each browser's queue is its own (docs/security.md)
        at = AppTest.from_file(str(ROOT / "pages" / "3_Doc_gaps.py"), default_timeout=60)
        at.session_state["viewer_token"] = "0" * 32
        at.run()
        assert not at.exception, at.exception
        return at.dataframe[0].value

    assert len(open_gaps()) == 1 and queries
    queries.clear()
    assert len(open_gaps()) == 1
    assert not queries, "opened again, unchanged: no query"
    session.ask("How do I knit a scarf?")  # the database changes
    assert len(open_gaps()) == 2 and queries
