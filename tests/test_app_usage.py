"""The Document usage page under AppTest, over a real trace database; untrusted titles stay text."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from workbench.batch import run_eval
from workbench.session import Session
from workbench.trace import usage

ROOT = Path(__file__).resolve().parent.parent
EVIL = '<img src=x onerror=alert(1)> Widget [setup](javascript:alert(2)) guide'


@pytest.fixture
def db(tmp_path, monkeypatch):
    path = tmp_path / "traces.duckdb"
    monkeypatch.setenv("WORKBENCH_DB", str(path))
    return path


def page(**state) -> AppTest:
    at = AppTest.from_file(str(ROOT / "pages" / "4_Document_usage.py"), default_timeout=60)
    for key, value in state.items():
        at.session_state[key] = value
    at.run()
    assert not at.exception, at.exception
    return at


def test_usage_page_shows_most_used_unconsulted_and_never_retrieved(db):
    s = Session.open(trace_db=db)
    s.ask("How do I configure SSO?")
    s.ask("How do I configure SSO?", mode="excerpts")
    s.ask("What articles do you have?")
    result = run_eval(s, ["How do I rotate an API key?", "How do I cancel my subscription?"], progress=False)

    at = page()
    columns, rows = usage.doc_usage(db)
    consulted = [r for r in rows if r[columns.index("consulted_turns")] > 0]
    assert [m.value for m in at.metric] == [str(len(rows)), str(len(consulted)), str(len(rows) - len(consulted))]
    assert [h.value for h in at.subheader] == ["Most-used sources", "Retrieved often, never consulted",
                                               "Never retrieved", "Totals per category"]
    top, noisy, never, totals = (d.value for d in at.dataframe)
    assert list(top["doc_id"]) == [r[columns.index("doc_id")] for r in consulted]
    expected_noisy = [r[1] for r in usage.retrieved_not_consulted(db, min_turns=2)[1]]
    assert list(noisy["doc_id"]) == expected_noisy and expected_noisy
    assert never.empty, "the listing question retrieved every document"
    assert int(totals["documents"].sum()) == 59
    assert at.get("plotly_chart") and sum(b.label == "Download CSV" for b in at.get("download_button")) == 4
    assert any("demo" in c.value and "59 documents" in c.value for c in at.caption)

    # one run chosen: only its turns count, and documents it did not retrieve are "never retrieved"
    at.multiselect(key="usage_runs").set_value([result.run_id]).run()
    assert not at.exception
    only = usage.doc_usage(db, [result.run_id])[1]
    assert at.metric[0].value == str(len(only))
    assert len(at.dataframe[2].value) == 59 - len(only)


def test_untrusted_titles_are_never_html_or_links(db, tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_ALLOWED_ROOTS", str(tmp_path))  # a typed corpus path must lie in a root
    kb = tmp_path / "kb"
    kb.mkdir()
    (kb / "widget.md").write_text(f"---\nid: widget-setup\ntitle: {json.dumps(EVIL)}\n---\n"
                                  "To set up the widget, open Settings and choose Widget setup. The widget setup "
                                  "guide explains every widget option.\n")
    (kb / "other.md").write_text("---\nid: other\ntitle: Other\n---\nSomething else entirely.\n")
    answer = Session.open(kb, trace_db=db).ask("How do I set up the widget?")
    assert "widget-setup" in answer.payload.sets.consulted

    at = page(cfg_corpus_source="Folder or JSONL path", cfg_corpus_path=str(kb))
    assert EVIL in set(at.dataframe[0].value["title"])  # data cells are text, shown as text
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    labels = json.dumps(spec["data"])
    assert "&lt;img src=x onerror=alert(1)&gt;" in labels and "<img" not in labels
    rendered = "\n".join([*(m.value for m in at.markdown), *(c.value for c in at.caption)])
    assert "<img" not in rendered and "javascript:" not in rendered
    assert any("kb" in c.value and "2 documents" in c.value for c in at.caption)


def test_trace_explorer_shows_live_export_counts(db, monkeypatch):
    from otlp_collector import Collector
    from workbench.trace import live

    with Collector() as col:
        monkeypatch.setenv(live.ENDPOINT_ENV, col.url)
        monkeypatch.setenv(live.PROJECT_ENV, "app")
        chat = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60).run()
        chat.chat_input[0].set_value("How do I configure SSO?").run()
        assert not chat.exception
        assert live.from_env().wait(30) and col.spans
        at = AppTest.from_file(str(ROOT / "pages" / "2_Trace_explorer.py"), default_timeout=60).run()
        assert not at.exception
        lines = [c.value for c in at.caption if "Live OTLP export" in c.value]
        assert any("1 turns exported" in line and "0 failed" in line for line in lines), lines


def test_the_usage_page_loads_the_corpus_within_the_app_limits(db, monkeypatch):
    """It loaded the sidebar's corpus without the app's bounds (the 59-document demo under a limit of 5)."""
    Session.open(trace_db=db).ask("How do I configure SSO?")
    monkeypatch.setenv("WORKBENCH_MAX_DOCUMENTS", "5")
    at = page()
    assert any("more than 5 documents" in e.value for e in at.error), [e.value for e in at.error]
    assert not any("59 documents" in c.value for c in at.caption)


def test_the_usage_page_counts_the_sidebars_corpus_only_and_listed_links_apart(db, tmp_path, demo):
    """Turns on another corpus were "(not in this corpus)" noise in the totals, and a listing answer's 59 links
    counted as citations (the chart's cited bar)."""
    import duckdb
    from test_usage import other_corpus

    from workbench.corpus import load_corpus

    on_demo = Session.open(demo, trace_db=db)
    on_demo.ask("What articles do you have?")
    sso = on_demo.ask("How do I configure SSO?").payload
    Session.open(load_corpus(other_corpus(tmp_path)), trace_db=db).ask("How do I set up Okta single sign-on?")
    with duckdb.connect(str(db), read_only=True) as con:  # the demo's rows, by the definitions, from the raw tables
        raw = con.execute("SELECT s.doc_id, count(*) FILTER (WHERE s.consulted), "
                          "count(*) FILTER (WHERE s.cited AND s.consulted), count(*) FILTER (WHERE s.cited AND NOT s.consulted) "
                          "FROM sources s JOIN turns t USING (turn_id) JOIN runs r USING (run_id) "
                          "WHERE r.corpus_id = 'demo' GROUP BY 1").fetchall()
    want = {d: (n, c, li) for d, n, c, li in raw}

    at = page()
    consulted = {d for d, (n, _, _) in want.items() if n}
    assert [m.value for m in at.metric] == [str(len(want)), str(len(consulted)), str(len(want) - len(consulted))]
    top, noisy, never, totals = (d.value for d in at.dataframe)
    assert set(top["doc_id"]) == consulted == set(sso.sets.consulted)
    assert {r.doc_id: (r.consulted_turns, r.cited_read_turns, r.listed_link_turns)
            for r in top.itertuples()} == {d: want[d] for d in consulted}
    assert "(not in this corpus)" not in set(totals["category"])
    assert set(totals["category"]) == {d.category for d in demo.documents}
    assert int(totals["documents_retrieved"].sum()) == len(want) == 59
    assert int(totals["listed_links"].sum()) == sum(li for _, _, li in want.values()) > 0
    assert int(totals["cited_read"].sum()) == sum(c for _, c, _ in want.values())
    # the chart: a listing's links are their own bar, never the cited one
    bars = {b["name"]: dict(zip(b["y"], b["x"])) for b in json.loads(at.get("plotly_chart")[0].proto.spec)["data"]}
    cited = {label.rsplit("(", 1)[1].rstrip(")"): x for label, x in bars["cited (read)"].items()}
    assert cited == {d: want[d][1] for d in consulted}
    assert any(x for x in bars["linked from a listing"].values())
