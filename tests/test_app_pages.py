"""Compare, trace explorer and doc-gap pages under AppTest, over a real trace database."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
from streamlit.testing.v1 import AppTest

from apptest import unescape

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def db(tmp_path, monkeypatch):
    path = tmp_path / "traces.duckdb"
    monkeypatch.setenv("WORKBENCH_DB", str(path))
    return path


def page(name: str, browser: AppTest | None = None) -> AppTest:
    """Page `name` in a session of its own: of the same browser as `browser` when given (without sign-in a
    browser sees only its own turns and the operator's, docs/security.md), else of another."""
    at = AppTest.from_file(str(ROOT / "pages" / name), default_timeout=60)
    if browser is not None:
        at.session_state["viewer_token"] = browser.session_state["viewer_token"]
    at.run()
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
    assert [t.payload.mode for t in turns] == ["agent", "excerpts"]
    md = "\n".join(m.value for m in at.markdown)
    assert md.count("**Consulted** (") == 2
    retrieved = [set(t.payload.sets.retrieved) for t in turns]
    if retrieved[0] != retrieved[1]:
        assert ":violet-badge[differs]" in md


def test_trace_explorer_runs_canned_and_typed_queries_and_refuses_writes(db):
    chat = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60).run()
    chat.chat_input[0].set_value("How do I configure SSO?").run()
    chat.chat_input[0].set_value("How do I bake a sourdough loaf?").run()
    assert db.exists(), "every chat turn is traced"

    at = page("2_Trace_explorer.py", chat)
    df = at.dataframe[0].value
    assert list(df.columns[:8]) == ["provider", "model", "retriever", "mode", "k", "tool_protocol", "options", "turns"]
    assert int(df["turns"].sum()) == 2
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
    at = page("3_Doc_gaps.py", chat)
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


# --- compare: readable at 59 documents, columns from the sidebar, progress (issue 25 item 4, issue 23 item 6) ---


@pytest.fixture
def scripted_providers():
    import scripted

    scripted.register()
    yield scripted
    scripted.unregister()


@pytest.mark.parametrize("mode", ["agent", "excerpts"])
def test_compare_columns_start_from_the_sidebars_mode(db, mode):
    at = AppTest.from_file(str(ROOT / "pages" / "1_Compare.py"), default_timeout=60)
    at.session_state["cfg_mode"] = mode
    at.run()
    assert not at.exception, at.exception
    at.segmented_control(key="cmp_count").set_value(4).run()
    assert [at.radio(key=f"cmp_mode_{i}").value for i in range(4)] == [mode] * 4


def _run_compare(db, question: str, modes: list[str]) -> AppTest:
    at = page("1_Compare.py")
    for i, mode in enumerate(modes):
        at.radio(key=f"cmp_mode_{i}").set_value(mode)
    at.text_input(key="cmp_question").set_value(question)
    at.button[0].click().run()
    assert not at.exception, at.exception
    return at


def test_compare_lists_cited_and_consulted_first_and_ten_documents_before_show_all(db):
    at = _run_compare(db, "Which articles do you have?", ["agent", "excerpts"])
    listing = at.session_state["cmp_turns"][0].payload
    assert len(listing.sets.retrieved) == 59, "the listing retrieves every title"
    lists = [m.value for m in at.markdown if m.value.startswith(("**Retrieved**", "**Cited**", "**Consulted**"))]
    heads = [v.split("**")[1] for v in lists]
    assert heads == ["Cited", "Cited", "Consulted", "Consulted", "Retrieved", "Retrieved"], heads
    retrieved = lists[4]
    assert retrieved.startswith("**Retrieved** (59)")
    shown = [line for line in retrieved.splitlines() if line.startswith("- ")]
    assert len(shown) == 10, "the first ten, the rest behind Show all"
    more = [e for e in at.expander if e.label == "Show all 59 retrieved"]
    assert len(more) == 1
    rest = [line for m in more[0].markdown for line in m.value.splitlines() if line.startswith("- ")]
    titles = {d.doc_id: d.title for d in listing.documents}
    assert len(shown) + len(rest) == 59
    assert {unescape(x[2:].split(" :violet-badge")[0].removeprefix(":violet-background[").rstrip("]"))
            for x in shown + rest} == {titles[d] for d in listing.sets.retrieved}
    assert not any(e.label.startswith("Show all") and "retrieved" in e.label and e.label != more[0].label
                   for e in at.expander), "the 5 retrieved of column B need no Show all"
    heights = [b.proto.height_config.pixel_height for b in _blocks(at) if "-cmp-col-" in b.proto.id]
    assert heights and all(0 < h <= 600 for h in heights), \
        f"the 59-title listing answer scrolls in a box instead of pushing the lists down: {heights}"


def _blocks(at: AppTest):
    """Every block of the page (containers, columns, expanders), depth first."""
    todo = list(at._tree.children.values())
    while todo:
        node = todo.pop()
        if hasattr(node, "proto") and hasattr(node.proto, "height_config"):
            yield node
        todo.extend(getattr(node, "children", {}).values())


def test_compare_chart_names_each_configuration_and_stays_readable_at_59_documents(db):
    import json

    at = _run_compare(db, "Which articles do you have?", ["agent", "excerpts"])
    fig = json.loads(at.get("plotly_chart")[0].proto.spec)
    bars = fig["data"]
    assert {b["name"] for b in bars} == {"retrieved", "cited", "consulted"}
    names = bars[0]["y"] if bars[0].get("orientation") == "h" else bars[0]["x"]
    assert len(names) == 2 and names[0].startswith("A") and names[1].startswith("B")
    assert "mode agent" in names[0] and "mode excerpts" in names[1], names
    for b in bars:  # every bar carries its count: 59 and 2 both readable
        counts = b["x"] if b.get("orientation") == "h" else b["y"]
        assert [int(t) for t in b["text"]] == list(counts)
    axis = fig["layout"]["xaxis" if bars[0].get("orientation") == "h" else "yaxis"]
    most = max(max(b["x"] if b.get("orientation") == "h" else b["y"]) for b in bars)
    assert most == 59
    if "dtick" in axis:
        assert most / float(axis["dtick"]) <= 12, f"{most / float(axis['dtick']):.0f} ticks on the count axis"


def test_compare_shows_each_columns_progress(db, scripted_providers):
    at = page("1_Compare.py")
    at.segmented_control(key="cmp_count").set_value(3).run()
    at.selectbox(key="cmp_provider_2").set_value("scripted-slow").run()
    at.button[0].click().run()
    assert not at.exception, at.exception
    boxes = at.status
    assert len(boxes) == 3, "one progress box per column"
    assert [b.state for b in boxes] == ["complete"] * 3
    assert unescape(boxes[2].label).startswith("C · scripted slow (test)") and "done in" in boxes[2].label
    assert len(at.session_state["cmp_turns"]) == 3


# --- trace explorer: comparisons by every configuration field, one measure per chart (issue 23 item 7,
# issue 25 item 5) ---


def _figure(at: AppTest, i: int = 0) -> dict:
    import json

    return json.loads(at.get("plotly_chart")[i].proto.spec)


def test_trace_explorer_compares_every_configuration_field_and_charts_one_measure(db, scripted_providers):
    from workbench.session import Session

    session = Session.open(trace_db=db)
    session.ask("How do I configure SSO?", provider="offline", k=5)
    session.ask("How do I configure SSO?", provider="scripted-only-from", k=5)  # same retriever, mode and k
    session.ask("How do I configure SSO?", provider="offline", k=7)  # same retriever and mode, another k
    at = page("2_Trace_explorer.py")
    at.selectbox(key="canned").set_value("Configuration comparison").run()
    assert not at.exception, at.exception
    df = at.dataframe[0].value
    rows = sorted(zip(df["provider"], df["k"], df["turns"]))
    assert rows == [("offline", 5, 1), ("offline", 7, 1), ("scripted-only-from", 5, 1)], rows
    fig = _figure(at)
    assert len(fig["data"]) == 1, "one measure per chart"
    measure = at.selectbox(key="sql-chart-measure")
    assert "k" not in measure.options and "runs" in measure.options and "turns" in measure.options
    names = _bar_names(fig["data"][0])
    assert sorted(names) == ["offline · k 5", "offline · k 7", "scripted-only-from · k 5"], names
    assert "retriever bm25" not in " ".join(names) and "bm25" in fig["layout"]["title"]["text"]
    measure.set_value("avg_retrieved").run()
    fig = _figure(at)
    bars = fig["data"][0]
    axis = "xaxis" if bars.get("orientation") == "h" else "yaxis"
    assert len(fig["data"]) == 1 and fig["layout"][axis]["title"]["text"] == "avg_retrieved"
    assert sorted(bars["x" if axis == "xaxis" else "y"]) == sorted(df["avg_retrieved"])


def _bar_names(bars: dict) -> list[str]:
    return bars["y"] if bars.get("orientation") == "h" else bars["x"]


def test_trace_explorer_charts_label_runs_and_models_shortly_with_the_whole_value_on_hover(db):
    """Issue 34, items 5 and 6: a GGUF path and 32-character run ids no longer squeeze the plot under
    diagonal labels, and a run with a fault is its own configuration, never merged into the clean one."""
    from workbench.session import Session
    from workbench.trace import TraceReader

    session = Session.open(trace_db=db)
    session.ask("How do I configure SSO?")
    session.ask("How do I configure SSO?", faults=["corrupt_id"])
    gguf = "/home/someone/models/very/deep/folder/SmolLM2-135M-Instruct-Q8_0.gguf"
    with duckdb.connect(str(db)) as con:  # as a llamacpp run records its model: the file's whole path
        con.execute("UPDATE runs SET model = ? WHERE config_json NOT LIKE '%corrupt_id%'", [gguf])
    at = page("2_Trace_explorer.py")  # "Set sizes by configuration"
    df = at.dataframe[0].value
    assert len(df) == 2 and sorted(df["options"]) == ['{"faults":["corrupt_id"]}', "{}"], df
    bars = _figure(at)["data"][0]
    names = _bar_names(bars)
    assert bars.get("orientation") == "h", "long labels read beside their bars, not diagonally under them"
    assert any(n.startswith("SmolLM2-135M-Instruct-Q8_0.gguf") for n in names), names
    assert all("/home/someone" not in n and len(n) <= 60 for n in names), names
    assert any(gguf in h for h in bars["hovertext"]), "the whole value is on hover"

    at.selectbox(key="canned").set_value("Run comparison").run()
    _, runs = TraceReader(db).rows("SELECT run_id FROM runs ORDER BY created_at")
    bars = _figure(at)["data"][0]
    names = _bar_names(bars)
    assert sorted(n.split(" · ")[0] for n in names) == sorted(f"{r[0][:8]}…" for r in runs), names
    assert sorted(h.split(" · ")[0] for h in bars["hovertext"]) == sorted(r[0] for r in runs)


def test_doc_gap_chart_labels_are_not_cut(db):
    from workbench.session import Session

    session = Session.open(trace_db=db)
    long_question = "How do I bake a sourdough loaf with a crisp crust in a small electric oven at home?"
    session.ask(long_question)
    session.ask("What is the capital of Mongolia?")
    at = page("3_Doc_gaps.py")
    bars = _figure(at)["data"][0]
    assert bars.get("orientation") == "h" and at.get("plotly_chart")
    assert long_question in bars["hovertext"] and all(len(n) <= 32 for n in _bar_names(bars))
    layout = _figure(at)["layout"]
    assert layout["yaxis"].get("automargin") is True


def test_trace_explorer_compares_runs(db):
    from workbench.session import Session

    from workbench.trace import TraceReader

    session = Session.open(trace_db=db)
    session.ask("How do I configure SSO?")
    session.ask("How do I rotate an API key?", mode="excerpts")
    at = page("2_Trace_explorer.py")
    at.selectbox(key="canned").set_value("Run comparison").run()
    df = at.dataframe[0].value
    _, runs = TraceReader(db).rows("SELECT run_id, mode FROM runs ORDER BY created_at")
    assert [tuple(r) for r in df[["run", "mode"]].itertuples(index=False)] == [tuple(r) for r in runs]


def test_trace_explorer_compares_runs_by_name_where_the_database_has_run_names(db, tmp_path, capsys):
    """A run named by `eval --name` (table `experiments`, m011) is shown by its name; an unnamed run by its id."""
    from workbench.trace import TraceReader
    from workbench.cli import main
    from workbench.session import Session

    questions = tmp_path / "q.jsonl"
    questions.write_text('{"question": "How do I configure SSO?", "expected": ["sso-saml-setup"]}\n')
    assert main(["eval", str(questions), "--name", "baseline", "--db", str(db)]) == 0, capsys.readouterr().err
    Session.open(trace_db=db).ask("How do I rotate an API key?", mode="excerpts")
    _, runs = TraceReader(db).rows("SELECT run_id, mode FROM runs ORDER BY created_at")
    assert [mode for _, mode in runs] == ["agent", "excerpts"]
    at = page("2_Trace_explorer.py")
    at.selectbox(key="canned").set_value("Run comparison").run()
    assert list(at.dataframe[0].value["run"]) == ["baseline", runs[1][0]]


def test_trace_explorer_time_chart_of_one_bucket_has_one_tick(db):
    from workbench.session import Session

    session = Session.open(trace_db=db)
    session.ask("How do I configure SSO?", faults=["corrupt_id"])
    at = page("2_Trace_explorer.py")
    at.selectbox(key="canned").set_value("Rejected citations over time").run()
    df = at.dataframe[0].value
    assert len(df) == 1, "one hour bucket"
    axis = _figure(at)["layout"]["xaxis"]
    assert len(axis["tickvals"]) == 1 and axis["ticktext"] == [df["hour"][0].strftime("%Y-%m-%d %H:%M")]
    low, high = (pd_ts(v) for v in axis["range"])
    assert (high - low).total_seconds() == 2 * 3600, "one bucket either side"
    assert _figure(at)["layout"]["yaxis"]["rangemode"] == "tozero", "one point's count reads from zero"


def pd_ts(value):
    import pandas as pd

    return pd.Timestamp(value)


# --- saved, named queries (issue 34, item 10) ---

def test_a_saved_query_is_listed_beside_the_canned_ones_and_opened_by_its_link(db):
    from workbench.session import Session
    from workbench.trace.saved_queries import saved_queries

    Session.open(trace_db=db).ask("How do I configure SSO?")
    at = page("2_Trace_explorer.py")
    sql = "SELECT question, n_consulted FROM turn_sets ORDER BY started_at"
    at.text_area(key="sql").set_value(sql)
    at.text_input(key="save_query_name").set_value("Consulted per question")
    at.button(key="save_query").click().run()
    assert not at.exception, at.exception
    assert [(q.name, q.sql) for q in saved_queries(db)] == [("Consulted per question", sql)]
    options = at.selectbox(key="canned").options
    assert "Saved · Consulted per question" in options and options.index("Saved · Consulted per question") > 0
    assert at.selectbox(key="canned").value == "Saved · Consulted per question"
    assert at.query_params["query"] == ["Consulted per question"] or at.query_params["query"] == "Consulted per question"
    assert any("Saved as" in s.value for s in at.success)

    # a link to it, in another browser session: the query is loaded and run
    linked = AppTest.from_file(str(ROOT / "pages" / "2_Trace_explorer.py"), default_timeout=60)
    linked.query_params["query"] = "Consulted per question"
    linked.run()
    assert not linked.exception, linked.exception
    assert linked.text_area(key="sql").value == sql
    assert list(linked.dataframe[0].value.columns) == ["question", "n_consulted"]

    # deleting it takes it off the list and the store
    linked.button(key="delete_query").click().run()
    assert saved_queries(db) == [] and "Saved · Consulted per question" not in linked.selectbox(key="canned").options


@pytest.mark.parametrize("name, sql, said", [
    ("", "SELECT 1", "give the query a name"),
    ("evil\u202ename", "SELECT 1", "control or bidi"),
    ("wipe", "DROP TABLE turns", "DROP statements are not allowed"),
    ("big", "SELECT 1 -- " + "x" * 20_000, "at most 20,000 characters"),
])
def test_a_query_that_cannot_be_saved_says_why_and_nothing_is_saved(db, name, sql, said):
    from workbench.session import Session
    from workbench.trace.saved_queries import saved_queries

    Session.open(trace_db=db).ask("How do I configure SSO?")
    at = page("2_Trace_explorer.py")
    at.text_area(key="sql").set_value(sql)
    at.text_input(key="save_query_name").set_value(name)
    at.button(key="save_query").click().run()
    assert not at.exception, at.exception
    assert any(said in unescape(e.value) for e in at.error), [e.value for e in at.error]
    assert saved_queries(db) == []


def test_a_link_to_a_query_that_is_not_saved_says_so(db):
    from workbench.session import Session

    Session.open(trace_db=db).ask("How do I configure SSO?")
    at = AppTest.from_file(str(ROOT / "pages" / "2_Trace_explorer.py"), default_timeout=60)
    at.query_params["query"] = "Nobody saved this"
    at.run()
    assert not at.exception, at.exception
    assert any("No saved query is named" in w.value for w in at.warning)
    assert at.dataframe[0].value is not None  # the page still opens with its first canned query
