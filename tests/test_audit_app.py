"""Audited turns in the app (issue 29, item 7), under AppTest over a real trace database written by `workbench ingest`
from an app's OpenInference spans: the Experiments page lists the audited run (its app and model) and opens its turns
whole — the three sets, the chips, the `audit` object, the spans' timeline; an unauditable turn says why and claims
nothing; an audited conversation reopens in the chat; the usage, doc-gap and run pickers include the run."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from apptest import APP, unescape
from clirun import cli
from conftest import ROOT
from workbench.audit.sessions import conversation_key
from workbench.config import DEMO_CORPUS
from workbench.corpus import load_corpus

SHOWN, DROPPED = "billing-cancel-subscription", "sso-saml-setup"
HOSTILE = '<img src=x onerror="window.__pwned=1"> **bold**'  # in the question and a span name
QUESTION = f"How do I cancel our plan? {HOSTILE}"
APP_NAME = "kb-bot <img src=x>"  # the resource service.name: the app's text too
T0 = 1_767_225_600
CONVERSATION = conversation_key(APP_NAME, "chat-7")  # the app's session, never a chat conversation (§12)


def _span(trace: int, span: int, name: str, kind: str, start_ms: int, end_ms: int, parent: int | None = None,
          **attrs: str) -> dict:
    out = {"traceId": f"{trace:032x}", "spanId": f"{trace:08x}{span:08x}", "name": name,
           "startTimeUnixNano": str(T0 * 10**9 + start_ms * 10**6), "endTimeUnixNano": str(T0 * 10**9 + end_ms * 10**6),
           "attributes": [{"key": k.replace("__", "."), "value": {"stringValue": v}}
                          for k, v in {"openinference.span.kind": kind, **attrs}.items()]}
    if parent is not None:
        out["parentSpanId"] = f"{trace:08x}{parent:08x}"
    return out


def _llm(trace: int, span: int, start_ms: int, user: str, answer: str, parent: int | None = 1) -> dict:
    return _span(trace, span, f"ChatCompletion {HOSTILE}", "LLM", start_ms, start_ms + 800, parent, **{
        "llm.model_name": "kb-model", "llm.input_messages.0.message.role": "system",
        "llm.input_messages.0.message.content": "Answer from the context.",
        "llm.input_messages.1.message.role": "user", "llm.input_messages.1.message.content": user,
        "llm.output_messages.0.message.role": "assistant", "llm.output_messages.0.message.content": answer})


def _request(spans: list[dict]) -> str:
    return json.dumps({"resourceSpans": [{"resource": {"attributes": [
        {"key": "service.name", "value": {"stringValue": APP_NAME}}]}, "scopeSpans": [{"spans": spans}]}]})


@pytest.fixture(scope="module")
def ingested(tmp_path_factory) -> Path:
    """A folder with an ingested run (`traces.duckdb`, from `spans.jsonl`), made once: a chat turn whose retriever
    returned two documents of which the model saw one (session chat-7), an unauditable turn (inputs hidden) and a turn
    that consulted nothing (a doc gap)."""
    tmp_path = tmp_path_factory.mktemp("audited")
    corpus = load_corpus(str(DEMO_CORPUS))
    shown, dropped = corpus.get(SHOWN), corpus.get(DROPPED)
    snippet = shown.text[200:400]
    chat = [_span(1, 1, "query", "CHAIN", 0, 1200, None, **{"input.value": QUESTION, "session.id": "chat-7"}),
            _span(1, 2, "retrieve", "RETRIEVER", 50, 150, 1, **{
                "retrieval.documents.0.document.id": SHOWN, "retrieval.documents.0.document.content": snippet,
                "retrieval.documents.1.document.id": DROPPED,
                "retrieval.documents.1.document.content": dropped.text[100:300]}),
            _llm(1, 3, 200, f"Context:\n{snippet}\n\nQuestion: {QUESTION}",
                 f"Cancel it in Billing: [{shown.title}]({shown.url}).")]
    hidden = [_span(2, 1, "query", "CHAIN", 2000, 3000, None, **{"input.value": "Where is my invoice?"}),
              _llm(2, 2, 2100, "__REDACTED__", "In Billing ([Invoices](https://help.example/invoices)).")]
    gap = [_span(3, 1, "query", "CHAIN", 4000, 5000, None, **{"input.value": "How do I export invoices as CSV files?"}),
           _llm(3, 2, 4100, "How do I export invoices as CSV files?", "I could not find that.")]
    f = tmp_path / "spans.jsonl"
    f.write_text("\n".join(_request(s) for s in (chat, hidden, gap)) + "\n", encoding="utf-8")
    path = tmp_path / "traces.duckdb"
    r = cli("ingest", str(f), "--db", str(path), "--name", "kb-audit", "--corpus", str(DEMO_CORPUS))
    assert r.returncode == 0 and "3 turns written" in r.stderr, r.stderr
    return tmp_path


def copied(folder: Path, name: str, to: Path) -> Path:
    """A copy of the trace database `folder/name` in `to` (each test its own file: a test may change it, and the
    app's caches are per path)."""
    for f in folder.glob(f"{name}*"):  # with its write-ahead log, if one was left
        shutil.copy(f, to / f.name)
    return to / name


@pytest.fixture
def db(ingested, tmp_path, monkeypatch):
    """A copy of the `ingested` run's database, the app's WORKBENCH_DB."""
    path = copied(ingested, "traces.duckdb", tmp_path)
    monkeypatch.setenv("WORKBENCH_DB", str(path))
    return path


def _experiments() -> AppTest:
    return AppTest.from_file(str(ROOT / "pages" / "5_Experiments.py"), default_timeout=60)


def _turn_picker(at: AppTest):
    return next(s for s in at.selectbox if s.label == "Turn")


def _frame(at: AppTest, column: str):
    """The first table on the page with `column`."""
    return next(d.value for d in at.dataframe if column in d.value.columns)


def _all_text(at: AppTest) -> str:
    return "\n".join([m.value for m in at.markdown] + [c.value for c in at.caption] + [w.value for w in at.warning])


def test_the_experiments_page_lists_the_audited_run_and_opens_a_turn_whole(db):
    at = _experiments().run()
    assert not at.exception, at.exception
    runs = _frame(at, "unauditable")
    assert list(runs["run"]) == ["kb-audit"] and list(runs["app"]) == [APP_NAME] and list(runs["model"]) == ["kb-model"]
    assert list(runs["unauditable"]) == [1] and list(runs["turns"]) == [3] and list(runs["corpus"]) == ["demo"]
    picker = _turn_picker(at)
    assert picker.options[0].startswith(f"{CONVERSATION} #1 · How do I cancel our plan?")
    text = _all_text(at)
    assert f"audited app {APP_NAME}" in unescape(text) and "rule corpus" in unescape(text)
    assert "**Retrieved** (1)" in text and "**Consulted** (1)" in text  # the dropped document is no set's
    assert "**Never shown to the model** (1)" in text and unescape(f"- {DROPPED}") in unescape(text)
    evidence = _frame(at, "exposure")
    assert list(evidence["doc_id"]) == [SHOWN] and list(evidence["exposure"]) == ["snippet"]
    timeline = [c for c in at.get("plotly_chart") if "Timeline" in c.proto.spec]
    spec = json.loads(timeline[0].proto.spec)
    labels = spec["data"][0]["y"]
    assert [label.split(" ", 2)[1] for label in labels] == ["retriever", "llm"]  # the spans, in start order
    assert spec["data"][0]["x"] == [pytest.approx(100.0), pytest.approx(800.0)]  # their durations (ms)
    assert spec["data"][0]["base"] == [pytest.approx(50.0), pytest.approx(200.0)]  # from the root span's start
    assert "<img" not in "".join(labels)  # span names are the app's text: shown as text, never HTML
    assert "<img" not in text.replace("\\<img", "")  # questions and span text escaped wherever markdown shows them


def test_an_unauditable_turn_says_why_and_claims_no_set(db):
    at = _experiments().run()
    picker = _turn_picker(at)
    hidden = next(o for o in picker.options if o.startswith("Where is my invoice?"))
    picker.select(hidden).run()
    assert not at.exception, at.exception
    [warning] = [w.value for w in at.warning if "could not be audited" in w.value]
    assert "__REDACTED__" in unescape(warning)
    text = _all_text(at)
    assert "No sources claimed: the turn is unauditable." in text
    assert "**Consulted**" not in text  # no consulted set is shown
    assert "unauditable:" in unescape(text)
    assert "**Links not judged** (1)" in text and "help.example/invoices" in unescape(text)  # listed, not rejected


def test_a_non_analyst_sees_no_audited_turn(db, monkeypatch):
    from workbench.ui import identity

    monkeypatch.setattr(identity, "current", lambda: identity.Viewer(user_id="u", owner="user:u", analyst=False))
    at = _experiments().run()
    assert not at.exception, at.exception
    assert any("for analysts" in i.value for i in at.info)
    assert not [s for s in at.selectbox if s.label == "Turn"]


def test_an_audited_conversation_reopens_in_the_chat_as_stored(db):
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params["conversation"] = CONVERSATION
    at.run()
    assert not at.exception, at.exception
    text = _all_text(at)
    assert f"audited app {APP_NAME}" in unescape(text)
    assert "**Never shown to the model** (1)" in text
    assert any("Timeline" in c.proto.spec for c in at.get("plotly_chart"))
    sources = [m.value for m in at.markdown if "**Sources**" in m.value]
    assert sources and "Cancel your subscription" in unescape(sources[0])
    # issue 41 item 6: no "Verify sources" button, so no promise of one: the exact command that replays it
    assert not [b for b in at.button if b.label == "Verify sources"]
    assert "“Verify sources” re-runs" not in unescape(text)
    (command,) = [c.value for c in at.code if "workbench verify" in c.value]
    turn_id = at.session_state["turns"][0].turn_id
    assert command == f".venv/bin/python -m workbench verify --turn {turn_id} --endpoint URL --db {db}"


def test_the_usage_gap_and_explorer_views_include_the_audited_run(db):
    at = AppTest.from_file(str(ROOT / "pages" / "4_Document_usage.py"), default_timeout=60).run()
    assert not at.exception, at.exception
    [label] = at.multiselect(key="usage_runs").options
    assert label.startswith(f"kb-audit · audited {APP_NAME} · kb-model")
    usage = at.dataframe[0].value
    assert SHOWN in set(usage["doc_id"])

    at = AppTest.from_file(str(ROOT / "pages" / "3_Doc_gaps.py"), default_timeout=60).run()
    assert not at.exception, at.exception
    assert f"audited {APP_NAME}" in at.multiselect(key="gaps_runs").options[0]
    gaps = at.dataframe[0].value
    assert list(gaps["question"]) == ["How do I export invoices as CSV files?"]
    assert list(gaps["kind"]) == ["not_found"]  # measured against the corpus the run was audited with

    at = AppTest.from_file(str(ROOT / "pages" / "2_Trace_explorer.py"), default_timeout=60).run()
    at.selectbox(key="canned").select("Audited assistants").run()
    assert not at.exception, at.exception
    result = at.dataframe[0].value
    assert list(result["run"]) == ["kb-audit"] and list(result["app"]) == [APP_NAME]
    assert list(result["unauditable"]) == [1] and list(result["never_shown"]) == [1]


def test_the_turn_picker_and_a_timeline_hold_at_most_their_bounds_the_earliest_first(db, monkeypatch):
    """docs/security.md: an audited run's picker offers at most `MAX_LISTED_TURNS` turns and a turn's timeline at
    most `MAX_TIMELINE_SPANS` spans, the earliest of each (here both bounds lowered below what the run holds)."""
    from workbench.trace import audits
    from workbench.ui import audited

    at = _experiments().run()
    everything = _turn_picker(at).options
    assert len(everything) == 3
    monkeypatch.setattr(audited, "MAX_LISTED_TURNS", 2)
    at = _experiments().run()
    assert not at.exception, at.exception
    assert _turn_picker(at).options == everything[:2]

    import duckdb
    con = duckdb.connect(str(db), read_only=True)
    [trace] = con.execute("SELECT DISTINCT trace_id FROM audit_spans WHERE span_json LIKE '%retrieve%'").fetchone()
    con.close()
    assert [r["kind"] for r in audits.span_timeline(db, [trace])] == ["retrieval", "model"]
    monkeypatch.setattr(audits, "MAX_TIMELINE_SPANS", 1)
    assert [r["kind"] for r in audits.span_timeline(db, [trace])] == ["retrieval"]


# --- issue 40, item 4: audited turns are opened by analysts only, everywhere ---------------------------------------

MEMBER = ("bo@example.com", False)
ANALYST = ("ana@example.com", True)


def _as(monkeypatch, who: tuple[str, bool]) -> None:
    """The app's viewer is a signed-in person (`who`: id, analyst?), as the sign-in gate would make them."""
    from workbench.ui import identity

    uid, analyst = who
    monkeypatch.setattr(identity, "current", lambda: identity.Viewer(user_id=uid, owner=f"user:{uid}", analyst=analyst))


@pytest.fixture(scope="module")
def scored_once(ingested, tmp_path_factory) -> tuple[Path, str]:
    """`ingested`'s spans ingested again into a database of their own and scored against a questions file (`ingest
    --questions`): an experiment run, so the Experiments page's leaderboard lists it and `?turn=` links to its turns.
    Made once; (its folder, the chat turn's id)."""
    tmp_path = tmp_path_factory.mktemp("scored")
    q = tmp_path / "kb.jsonl"
    q.write_text(json.dumps({"question": QUESTION, "conversation": "chat-7", "expected": [SHOWN]}) + "\n",
                 encoding="utf-8")
    db = tmp_path / "scored.duckdb"
    r = cli("ingest", str(ingested / "spans.jsonl"), "--db", str(db), "--name", "kb-scored", "--corpus",
            str(DEMO_CORPUS), "--questions", str(q))
    assert r.returncode in (0, 1) and "3 turns written" in r.stderr, r.stderr  # 1: the file's line failed
    import duckdb
    with duckdb.connect(str(db), read_only=True) as con:
        [(turn_id,)] = con.execute("SELECT turn_id FROM turns JOIN experiments USING (run_id) "
                                   "WHERE conversation_id = ?", [CONVERSATION]).fetchall()
    return tmp_path, turn_id


@pytest.fixture
def scored(scored_once, tmp_path, monkeypatch):
    """A copy of `scored_once`'s database, the app's WORKBENCH_DB; (its path, the chat turn's id)."""
    folder, turn_id = scored_once
    db = copied(folder, "scored.duckdb", tmp_path)
    monkeypatch.setenv("WORKBENCH_DB", str(db))
    return db, turn_id


def _page_text(at: AppTest) -> str:
    return unescape(_all_text(at) + "\n".join(i.value for i in at.info))


@pytest.mark.parametrize("who", [MEMBER, ANALYST])
def test_a_turn_link_opens_an_audited_turn_for_an_analyst_only(scored, monkeypatch, who):
    db, turn_id = scored
    _as(monkeypatch, who)
    at = _experiments()
    at.query_params["turn"] = turn_id
    at.run()
    assert not at.exception, at.exception
    text = _page_text(at)
    runs = [o for m in at.multiselect if m.label == "Runs" for o in m.options]
    if who[1]:
        assert "How do I cancel our plan?" in text and "does not open" not in text
        assert any("kb-scored" in r for r in runs)
    else:
        [refusal] = [w.value for w in at.warning if "does not open" in w.value]
        assert turn_id in unescape(refusal) and "for analysts" in refusal
        assert "How do I cancel our plan?" not in text and "Cancel it in Billing" not in text
        assert not any("kb-scored" in r for r in runs), "the audited experiment is not on a member's leaderboard"


def test_a_member_never_sees_an_audited_turn_in_the_chat(db, monkeypatch):
    """Even in a conversation of the member's own (an exporter that wrote a member's conversation id as its
    `session.id`, issue 40 item 3): the chat drops the audited turns, and says so when nothing else is left."""
    import duckdb
    with duckdb.connect(str(db)) as con:
        con.execute("UPDATE turns SET owner = ? WHERE conversation_id = ?", [f"user:{MEMBER[0]}", CONVERSATION])
    _as(monkeypatch, MEMBER)
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params["conversation"] = CONVERSATION
    at.run()
    assert not at.exception, at.exception
    assert any("is not shown to you" in w.value and "for analysts" in w.value for w in at.warning)
    assert "How do I cancel our plan?" not in _page_text(at) and not at.chat_message


def test_document_usage_counts_no_audited_run_for_a_member(db, monkeypatch):
    _as(monkeypatch, MEMBER)
    at = AppTest.from_file(str(ROOT / "pages" / "4_Document_usage.py"), default_timeout=60).run()
    assert not at.exception, at.exception
    assert at.multiselect(key="usage_runs").options == []
    assert not at.dataframe and any("No run on this corpus" in i.value for i in at.info)
    _as(monkeypatch, ANALYST)
    at = AppTest.from_file(str(ROOT / "pages" / "4_Document_usage.py"), default_timeout=60).run()
    assert SHOWN in set(at.dataframe[0].value["doc_id"])
