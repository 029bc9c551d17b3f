"""Stored turns as OpenInference spans: layout, ids, times and the three sets; OTLP replay to a loopback
collector; live export that never blocks a turn (refusing, hanging and working collectors).

The real Phoenix round trip is in test_phoenix.py.
"""

from __future__ import annotations

import json
import logging
import shutil
import time

import duckdb
import pytest

from loopback import OLLAMA, OPENAI, ScriptedServer, refused_url
from otlp_collector import Collector
from workbench.cli import main
from workbench.session import Session
from workbench.trace import live
from workbench.trace.rows import run_row, turn_rows
from workbench.trace.spans import (TurnRows, span_id_of, stored_turns, to_ns, trace_id_of, turn_spans)

URL = "https://help.orbitly.example/articles/sso-saml-setup"


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    """A real trace database: offline turns of every shape, a turn through the Ollama client with token
    counts, and one whose provider could not be reached."""
    db = tmp_path_factory.mktemp("oi") / "t.duckdb"
    s = Session.open(trace_db=db)
    answers = {
        "agent": s.ask("How do I configure SSO?"),
        "listing": s.ask("What articles do you have?"),
        "excerpts": s.ask("How do I configure SSO?", mode="excerpts"),
        "corrupt": s.ask("How do I configure SSO?", faults=["corrupt_id"]),
    }
    script = [OLLAMA.reply("", [("search", {"query": "configure SSO"})]),
              OLLAMA.reply("", [("fetch_document", {"doc_id": "sso-saml-setup"})]),
              OLLAMA.reply(f"Paste the IdP metadata ([SAML setup]({URL})).")]
    with ScriptedServer(script) as srv:
        answers["ollama"] = s.ask("How do I configure SSO?", provider="ollama", **OLLAMA.options(srv.url))
    answers["refused"] = s.ask("How do I configure SSO?", provider="ollama", **OLLAMA.options(refused_url()))
    assert answers["refused"].payload.status == "connection_error"
    return db, answers


def spans_by_turn(db, project: str = "workbench") -> dict[str, list]:
    return {t.turn["turn_id"]: turn_spans(t, project) for t in stored_turns(db)}


def row(db, sql, params=()):
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute(sql, list(params)).fetchone()


def docs_of(span) -> list[dict]:
    out, i = [], 0
    while (doc_id := span.attributes.get(f"retrieval.documents.{i}.document.id")) is not None:
        p = f"retrieval.documents.{i}.document."
        out.append({"id": doc_id, "score": span.attributes.get(p + "score"), "content": span.attributes.get(p + "content"),
                    "metadata": json.loads(span.attributes[p + "metadata"])})
        i += 1
    return out


def test_agent_turn_is_a_tree_in_loop_order_with_stored_times_and_ids(traced):
    db, answers = traced
    a = answers["agent"]
    tid = a.payload.turn_id
    spans = spans_by_turn(db)[tid]
    assert [(s.kind, s.name) for s in spans] == [
        ("CHAIN", "turn"), ("LLM", "offline call"), ("TOOL", "search"), ("RETRIEVER", "retrieve"),
        ("LLM", "offline call"), ("TOOL", "fetch_document"), ("RETRIEVER", "retrieve"), ("LLM", "offline call")]
    root = spans[0]
    assert all(s.trace_id == root.trace_id == trace_id_of(tid, "workbench") for s in spans)
    assert root.parent_id is None and root.span_id == span_id_of(tid, "turn", "workbench")
    assert len({s.span_id for s in spans}) == len(spans)
    assert [s.span_id for s in spans] == [s.span_id for s in spans_by_turn(db)[tid]], "ids are deterministic"
    other = spans_by_turn(db, "another project")[tid]  # Phoenix keys ids across projects: a copy needs new ids
    assert not {s.span_id for s in other} & {s.span_id for s in spans} and other[0].trace_id != root.trace_id
    by_id = {s.span_id: s for s in spans}
    for s in spans[1:]:
        expected_parent = "TOOL" if s.kind == "RETRIEVER" else "CHAIN"
        assert by_id[s.parent_id].kind == expected_parent

    # times are the stored ones: the turn's start, then each call as long as its stored latency, end to end
    started, latency = row(db, "SELECT started_at, latency_ms FROM turns WHERE turn_id = ?", [tid])
    assert root.start_ns == to_ns(started) and root.end_ns >= root.start_ns + int(latency * 1e6) - 1
    steps = [s for s in spans if s.kind in ("LLM", "TOOL")]
    assert steps[0].start_ns == root.start_ns
    assert all(b.start_ns == a_.end_ns for a_, b in zip(steps, steps[1:]))
    stored = [r for r in duckdb.connect(str(db), read_only=True).execute(
        "SELECT 'LLM', latency_ms FROM model_calls WHERE turn_id = ? ORDER BY seq", [tid]).fetchall()]
    llm = [s for s in steps if s.kind == "LLM"]
    assert [s.end_ns - s.start_ns for s in llm] == [round(ms * 1e6) for _, ms in stored]
    tools = [s for s in steps if s.kind == "TOOL"]
    assert [s.end_ns - s.start_ns for s in tools] == [round(c.latency_ms * 1e6) for c in a.record.tool_calls]
    assert max(s.end_ns for s in spans) <= root.end_ns

    attrs = root.attributes
    assert attrs["input.value"] == a.payload.question and attrs["output.value"] == a.payload.answer
    assert attrs["session.id"] == row(db, "SELECT run_id FROM turns WHERE turn_id = ?", [tid])[0]
    meta = json.loads(attrs["metadata"])
    assert meta["sets"] == a.payload.sets.to_json() and meta["rejected_citations"] == []
    assert meta["run"]["provider"] == "offline" and meta["run"]["retriever"] == "bm25"
    search = spans[2].attributes
    assert search["tool.name"] == "search" and json.loads(search["tool.parameters"])["query"]
    assert search["input.value"] == search["tool.parameters"]
    assert [d["doc_id"] for d in json.loads(search["output.value"])] == [r.doc_id for r in a.record.tool_calls[0].results]


def test_a_json_steps_turn_lays_out_each_tool_call_after_the_step_that_asked_for_it(tmp_path):
    """Under json-steps each schema-forced step is one model call asking for at most one tool: the spans read
    exactly as a native turn's (LLM, its TOOL and RETRIEVER, LLM, …), from the stored `n_tool_calls`."""
    db = tmp_path / "steps.duckdb"
    actions = [{"action": "search", "query": "configure SSO"}, {"action": "fetch_document", "doc_id": "sso-saml-setup"},
               {"action": "answer", "answer": f"Paste the IdP metadata ([SAML setup]({URL}))."}]
    script = [OPENAI.reply(json.dumps(action)) for action in actions]
    with ScriptedServer(script) as srv:
        a = Session.open(trace_db=db).ask("How do I configure SSO?", provider="openai", tool_protocol="json-steps",
                                          **OPENAI.options(srv.url))
    assert a.record.status == "ok", a.record.error
    assert [c.n_tool_calls for c in a.record.model_calls] == [1, 1, 0]
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT list(n_tool_calls ORDER BY seq) FROM model_calls").fetchone()[0] == [1, 1, 0]
    spans = spans_by_turn(db)[a.payload.turn_id]
    assert [(s.kind, s.name) for s in spans] == [
        ("CHAIN", "turn"), ("LLM", "openai call"), ("TOOL", "search"), ("RETRIEVER", "retrieve"),
        ("LLM", "openai call"), ("TOOL", "fetch_document"), ("RETRIEVER", "retrieve"), ("LLM", "openai call")]
    steps = [s for s in spans if s.kind in ("LLM", "TOOL")]
    assert all(b.start_ns == a_.end_ns for a_, b in zip(steps, steps[1:]))
    meta = json.loads(spans[0].attributes["metadata"])
    assert meta["run"]["tool_protocol"] == "json-steps" and meta["sets"] == a.payload.sets.to_json()


def test_retrieved_documents_carry_content_score_and_the_three_sets(traced):
    db, answers = traced
    a = answers["agent"]
    spans = spans_by_turn(db)[a.payload.turn_id]
    flags = {d.doc_id: d for d in a.payload.documents}
    search_docs = docs_of(spans[3])
    results = a.record.tool_calls[0].results
    assert [d["id"] for d in search_docs] == [r.doc_id for r in results]
    for d, r in zip(search_docs, results):
        assert d["content"] == r.snippet and d["score"] == r.score
        assert d["metadata"]["exposure"] == "snippet" and d["metadata"]["turn_exposure"] == flags[r.doc_id].exposure
        assert d["metadata"]["cited"] == flags[r.doc_id].cited
        assert d["metadata"]["consulted"] == flags[r.doc_id].consulted
        assert "verdict" not in d["metadata"]  # no `ablations` table: not verified
    assert any(d["metadata"]["consulted"] for d in search_docs) and not all(d["metadata"]["consulted"] for d in search_docs)
    (fetched,) = docs_of(spans[6])
    assert fetched["metadata"]["exposure"] == "full" and fetched["metadata"]["consulted"] is True
    assert fetched["content"] is None  # whole-document text is not copied into the trace

    listing = spans_by_turn(db)[answers["listing"].payload.turn_id]
    docs = [d for s in listing if s.kind == "RETRIEVER" for d in docs_of(s)]
    assert len(docs) > 20 and all(d["metadata"]["exposure"] == "title" for d in docs)
    assert all(d["content"] == d["metadata"]["title"] for d in docs) and not any(d["metadata"]["consulted"] for d in docs)


def test_passages_are_stored_once_and_join_back(traced):
    db, answers = traced
    with duckdb.connect(str(db), read_only=True) as con:
        items = con.execute("SELECT count(*), count(DISTINCT passage_id) FROM retrieved_items "
                            "WHERE passage_id IS NOT NULL").fetchone()
        texts = con.execute("SELECT passage_id, text FROM passages").fetchall()
    assert items[0] > items[1] == len(texts), "the same snippet, asked again, is stored once"
    from workbench.trace.rows import passage_id

    assert all(pid == passage_id(text) for pid, text in texts)


def test_excerpt_mode_is_one_retrieval_then_one_model_call(traced):
    db, answers = traced
    a = answers["excerpts"]
    spans = spans_by_turn(db)[a.payload.turn_id]
    assert [(s.kind, s.name) for s in spans] == [("CHAIN", "turn"), ("RETRIEVER", "excerpts"), ("LLM", "offline call")]
    docs = docs_of(spans[1])
    assert [d["content"] for d in docs] == [e.text for e in a.record.excerpts]
    assert spans[1].end_ns == spans[2].start_ns and spans[1].attributes["input.value"] == a.payload.question


def test_rejected_citations_and_failed_calls(traced):
    db, answers = traced
    by_turn = spans_by_turn(db)
    corrupt = answers["corrupt"].payload
    meta = json.loads(by_turn[corrupt.turn_id][0].attributes["metadata"])
    assert corrupt.rejected_citations and meta["rejected_citations"] == [
        {"target": r.target, "reason": r.reason, "nearest_doc_id": r.nearest_doc_id, "edit_distance": r.edit_distance}
        for r in corrupt.rejected_citations]

    refused = by_turn[answers["refused"].payload.turn_id]
    assert refused[0].error and "connect" in refused[0].error
    (llm,) = [s for s in refused if s.kind == "LLM"]
    assert llm.error and llm.attributes["llm.model_name"] == "llama3.1"


def test_llm_spans_carry_model_name_and_token_counts(traced):
    db, answers = traced
    a = answers["ollama"]
    llm = [s for s in spans_by_turn(db)[a.payload.turn_id] if s.kind == "LLM"]
    assert len(llm) == len(a.record.model_calls) == 3
    for s, call in zip(llm, a.record.model_calls):
        assert s.attributes["llm.model_name"] == call.model == "llama3.1"
        assert s.attributes["llm.token_count.prompt"] == call.tokens_in == 120
        assert s.attributes["llm.token_count.completion"] == call.tokens_out == 30
        assert s.attributes["llm.token_count.total"] == 150
        assert json.loads(s.attributes["metadata"])["model_version"] == call.model_version


def test_turns_stored_before_model_calls_still_lay_out_their_tools(traced, tmp_path):
    db, answers = traced
    old = tmp_path / "old.duckdb"
    shutil.copy(db, old)
    tid = answers["agent"].payload.turn_id
    with duckdb.connect(str(old)) as con:
        con.execute("DELETE FROM model_calls WHERE turn_id = ?", [tid])
    spans = spans_by_turn(old)[tid]
    assert [s.kind for s in spans] == ["CHAIN", "TOOL", "RETRIEVER", "TOOL", "RETRIEVER"]
    assert spans[1].start_ns == spans[0].start_ns and spans[3].start_ns == spans[1].end_ns


def test_verdicts_of_the_latest_verification_reach_document_metadata(traced, tmp_path):
    """A turn verified by ablation (docs/design.md §9): each document's verdict in its RETRIEVER spans is
    the verdict of the turn's latest verification; unverified turns carry no verdict key."""
    db, answers = traced
    verified = tmp_path / "verified.duckdb"
    shutil.copy(db, verified)
    s = Session.open(trace_db=verified)
    answer = s.ask("How do I configure SSO?", verify=True)
    expected = answer.payload.verification.verdicts
    assert "load_bearing" in expected.values() and "no_effect" in expected.values()
    spans = spans_by_turn(verified)
    docs = [d for sp in spans[answer.payload.turn_id] if sp.kind == "RETRIEVER" for d in docs_of(sp)]
    assert {d["id"]: d["metadata"]["verdict"] for d in docs if "verdict" in d["metadata"]} == expected
    assert {d["id"] for d in docs if "verdict" not in d["metadata"]} == {d["id"] for d in docs} - set(expected)
    # a later verification wins: rewrite the first one's verdicts to an older, different verification
    again = s.verify(answer)
    with duckdb.connect(str(verified)) as con:
        con.execute("UPDATE ablations SET verdict = 'unstable' WHERE verification_id <> ?",
                    [again.verification.verification_id])
    docs = [d for sp in spans_by_turn(verified)[answer.payload.turn_id] if sp.kind == "RETRIEVER"
            for d in docs_of(sp)]
    assert {d["id"]: d["metadata"]["verdict"] for d in docs if "verdict" in d["metadata"]} == expected
    untouched = answers["listing"].payload.turn_id
    assert not any("verdict" in d["metadata"] for sp in spans[untouched] if sp.kind == "RETRIEVER" for d in docs_of(sp))


def test_live_rows_give_exactly_the_spans_a_replay_gives(tmp_path):
    """Live export builds spans from the rows the writer just committed; a replay reads them back."""
    db = tmp_path / "live.duckdb"
    s = Session.open(trace_db=db)
    seen = []
    s.tracer.listeners.append(seen.append)
    answers = [s.ask("How do I configure SSO?"), s.ask("How do I configure SSO?", mode="excerpts"),
               s.ask("How do I configure SSO?", verify=True)]  # verified with the turn: its verdicts go live too
    assert answers[2].payload.verification.verdicts
    with s.tracer.buffered():  # batches notify after each flush
        answers.append(s.ask("What articles do you have?"))
        assert len(seen) == 3, "nothing is announced before it is committed"
    assert len(seen) == 4
    replay = spans_by_turn(db)
    runs = {}
    for rows, a in zip(seen, answers):
        if "runs" in rows:  # the writer announces a run's row with its first turn; live export reads it otherwise
            runs[rows["runs"][0]["run_id"]] = rows["runs"][0]
        (turn,) = rows["turns"]
        assert turn_spans(TurnRows.from_rows(rows, runs[turn["run_id"]])) == replay[a.payload.turn_id]


def test_a_conversations_turns_share_its_session_and_a_single_turn_keeps_its_run(tmp_path):
    """session.id is the conversation id for a conversation's turns (live and replayed alike), else the run id."""
    db = tmp_path / "conv.duckdb"
    s = Session.open(trace_db=db)
    seen = []
    s.tracer.listeners.append(seen.append)
    first = s.ask("How do I configure SSO?", conversation_id="c-9")
    second = s.ask("And with Okta?", history=[first.record], conversation_id="c-9")
    single = s.ask("How do I configure SSO?")
    replay = spans_by_turn(db)
    for rows, answer in zip(seen, (first, second, single)):
        (turn,) = rows["turns"]
        live_root = turn_spans(TurnRows.from_rows(rows))[0]
        root = replay[answer.payload.turn_id][0]
        assert root.attributes["session.id"] == live_root.attributes["session.id"]
        meta = json.loads(root.attributes["metadata"])
        if answer is single:
            assert root.attributes["session.id"] == turn["run_id"] and "conversation_id" not in meta  # its run id
        else:
            assert root.attributes["session.id"] == "c-9"
            assert (meta["conversation_id"], meta["position"]) == ("c-9", answer.record.position)
    assert [a.record.position for a in (first, second)] == [1, 2]


# --- OTLP over loopback -------------------------------------------------------------------------


def run_cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_replays_every_turn_over_otlp_with_ids_times_and_attributes(traced, capsys):
    db, _ = traced
    expected = [s for spans in spans_by_turn(db, "demo-replay").values() for s in spans]
    with Collector() as col:
        code, out, err = run_cli(capsys, "export", "--openinference", "--endpoint", col.url, "--project", "demo-replay",
                                 "--db", str(db))
        assert code == 0, err
        assert f"exported {len(spans_by_turn(db))} turns ({len(expected)} spans)" in out
        got = {s.span_id: s for s in col.spans}
        assert len(got) == len(expected)
        for spec in expected:
            r = got[spec.span_id]
            assert (r.trace_id, r.parent_id, r.name, r.start_ns, r.end_ns) == (
                spec.trace_id, spec.parent_id, spec.name, spec.start_ns, spec.end_ns)
            assert r.attributes == spec.attributes
            assert r.status_code == (2 if spec.error else 1) and (r.status_message or None) == spec.error
            assert r.resource["openinference.project.name"] == "demo-replay"
        # the same turns again carry the same ids; a bare host:port gets the OTLP default path
        run_cli(capsys, "export", "--openinference", "--endpoint", col.url, "--project", "demo-replay", "--db", str(db))
        assert len(col.spans) == 2 * len(expected) and {s.span_id for s in col.spans} == set(got)
        run_cli(capsys, "export", "--openinference", "--endpoint", col.url.removesuffix("/v1/traces"), "--db", str(db))
        default = {s.span_id for spans in spans_by_turn(db).values() for s in spans}
        assert {s.span_id for s in col.spans} == set(got) | default
        run_id = row(db, "SELECT run_id FROM turns LIMIT 1")[0]
        code, out, _ = run_cli(capsys, "export", "--openinference", "--endpoint", col.url, "--run", run_id, "--db", str(db))
        assert code == 0 and "project 'workbench'" in out


def test_standard_otel_headers_reach_the_collector(traced, capsys, monkeypatch):
    """Authenticated collectors (Langfuse: Basic auth) are configured the OpenTelemetry way."""
    db, _ = traced
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "Authorization=Basic cGs6c2s=,x-langfuse-ingestion-version=4")
    with Collector() as col:
        code, _, err = run_cli(capsys, "export", "--openinference", "--endpoint", col.url, "--db", str(db))
    assert code == 0, err
    assert col.headers[0]["authorization"] == "Basic cGs6c2s=" and col.headers[0]["x-langfuse-ingestion-version"] == "4"


@pytest.mark.parametrize("argv, message", [
    (["--openinference"], "--openinference needs --endpoint"),
    (["--openinference", "--endpoint", "ftp://x/v1/traces"], "must be an http(s) URL"),
    (["--parquet", "out", "--endpoint", "http://127.0.0.1:1"], "go with --openinference"),
    (["--openinference", "--endpoint", "http://127.0.0.1:1", "--run", "nope"], "no turns of run 'nope'"),
])
def test_cli_export_errors_are_messages(traced, capsys, argv, message):
    db, _ = traced
    code, out, err = run_cli(capsys, "export", *argv, "--db", str(db))
    assert code == 2 and err.startswith("error: ") and message in err and "Traceback" not in err


@pytest.mark.parametrize("value", ["nan", "0", "-1", "soon"])
def test_cli_export_timeout_must_be_seconds_above_zero(traced, capsys, value):
    """Checked by the same argparse type as `sql --timeout`: `nan` slipped past `<= 0` into a traceback."""
    db, _ = traced
    with pytest.raises(SystemExit) as exit_:
        main(["export", "--openinference", "--endpoint", refused_url(), "--timeout", value, "--db", str(db)])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "argument --timeout:" in err and "Traceback" not in err


def test_cli_export_to_a_refusing_collector_fails_with_the_cause(traced, capsys):
    db, _ = traced
    code, _, err = run_cli(capsys, "export", "--openinference", "--endpoint", refused_url(), "--timeout", "1",
                           "--db", str(db))
    assert code == 2 and err.startswith("error: OTLP export to http://127.0.0.1:") and "0 turns exported" in err
    assert "Connection refused" in err
    with Collector(mode="error") as col:
        code, _, err = run_cli(capsys, "export", "--openinference", "--endpoint", col.url, "--timeout", "1",
                               "--db", str(db))
    assert code == 2 and "failed" in err and "500" in err


# --- live export --------------------------------------------------------------------------------


@pytest.fixture
def live_env(monkeypatch):
    def set_endpoint(url: str, timeout: float = 5.0, project: str = "live"):
        monkeypatch.setenv(live.ENDPOINT_ENV, url)
        monkeypatch.setenv(live.TIMEOUT_ENV, str(timeout))
        monkeypatch.setenv(live.PROJECT_ENV, project)
        return live.from_env()
    return set_endpoint


def test_live_export_sends_each_written_turn(live_env, tmp_path):
    with Collector() as col:
        exporter = live_env(col.url, project="live-ok")
        s = Session.open(trace_db=tmp_path / "t.duckdb")
        answers = [s.ask("How do I configure SSO?"), s.ask("What articles do you have?")]
        assert exporter.wait(30)
        assert exporter.status()["exported"] == 2 and exporter.status()["failed"] == 0
        replay = spans_by_turn(tmp_path / "t.duckdb", "live-ok")
        got = {x.span_id: x for x in col.spans}
        for a in answers:
            for spec in replay[a.payload.turn_id]:
                assert got[spec.span_id].attributes == spec.attributes
                assert got[spec.span_id].resource["openinference.project.name"] == "live-ok"
        assert {st["endpoint"] for st in live.status()} >= {col.url}


def test_live_export_to_a_refusing_collector_costs_nothing_but_a_warning_and_a_count(live_env, tmp_path, caplog):
    exporter = live_env(refused_url(), timeout=1)
    caplog.set_level(logging.WARNING, logger="workbench.otlp")
    s = Session.open(trace_db=tmp_path / "t.duckdb")
    answer = s.ask("How do I configure SSO?")
    assert answer.payload.status == "ok" and answer.trace_error is None
    assert exporter.wait(30)
    status = exporter.status()
    assert status["failed"] == 1 and status["exported"] == 0 and status["last_error"]
    warnings = [r.getMessage() for r in caplog.records if r.name == "workbench.otlp"]
    assert len(warnings) == 1 and "live OTLP export failed" in warnings[0] and "export --openinference" in warnings[0]
    assert row(tmp_path / "t.duckdb", "SELECT count(*) FROM turns") == (1,), "the trace store has the turn"


def test_live_export_to_a_hanging_collector_never_blocks_the_turn(live_env, tmp_path):
    with Collector(mode="hang") as col:
        exporter = live_env(col.url, timeout=1)
        s = Session.open(trace_db=tmp_path / "t.duckdb")
        answer = s.ask("How do I configure SSO?")
        # the answer is back while its export is still waiting on the collector
        assert answer.payload.status == "ok" and exporter.pending() == 1
        deadline = time.monotonic() + 30
        while exporter.status()["failed"] == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert exporter.status()["failed"] == 1 and exporter.pending() == 0 and col.requests >= 1


def test_bad_live_export_settings_are_errors_at_start_up(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv(live.ENDPOINT_ENV, "collector.internal:4318")
    assert main(["ask", "How do I configure SSO?", "--db", str(tmp_path / "t.duckdb")]) == 2
    assert f"error: {live.ENDPOINT_ENV} must be an http(s) URL" in capsys.readouterr().err
    monkeypatch.setenv(live.ENDPOINT_ENV, "http://127.0.0.1:9/v1/traces")
    monkeypatch.setenv(live.TIMEOUT_ENV, "soon")
    assert main(["ask", "How do I configure SSO?", "--db", str(tmp_path / "t.duckdb")]) == 2
    assert f"{live.TIMEOUT_ENV}='soon' is not a number" in capsys.readouterr().err


def test_a_full_queue_drops_turns_instead_of_waiting(monkeypatch, caplog):
    monkeypatch.setattr(live, "QUEUE_TURNS", 2)
    a = Session.open(trace=False).ask("How do I configure SSO?")
    rows = {**turn_rows(a.record, a.payload, "r" * 32), "runs": [run_row("r" * 32, a.record.config, "interactive")]}
    with Collector(mode="hang") as col:
        exporter = live.LiveExporter(col.url, "drop", timeout=1)
        for _ in range(6):  # the first is stuck on the collector, two wait, the rest cannot
            exporter.submit("unused.duckdb", rows)
        assert exporter.status()["dropped"] >= 2
        assert any("dropping new turns" in r.getMessage() for r in caplog.records)
        col.release()
        assert exporter.wait(30)


def test_who_asked_is_stored_and_exported_as_user_id(tmp_path):
    """Issue 31 item 2: `turns.user_id` (and `turns.owner`) are written with the turn, and OpenInference `user.id`
    carries it, live and replayed; a turn asked without a person (sign-in off, the CLI) has neither."""
    db = tmp_path / "who.duckdb"
    s = Session.open(trace_db=db)
    seen = []
    s.tracer.listeners.append(seen.append)
    signed = s.ask("How do I configure SSO?", user_id="ana@example.com", owner="user:ana@example.com")
    anonymous = s.ask("How do I configure SSO?")
    assert row(db, "SELECT user_id, owner FROM turns WHERE turn_id = ?", [signed.payload.turn_id]) == \
        ("ana@example.com", "user:ana@example.com")
    assert row(db, "SELECT user_id, owner FROM turns WHERE turn_id = ?", [anonymous.payload.turn_id]) == (None, None)
    replay = spans_by_turn(db)
    live_roots = [turn_spans(TurnRows.from_rows(rows))[0] for rows in seen]
    assert replay[signed.payload.turn_id][0].attributes["user.id"] == "ana@example.com"
    assert live_roots[0].attributes["user.id"] == "ana@example.com"
    assert "user.id" not in replay[anonymous.payload.turn_id][0].attributes
    assert "user.id" not in live_roots[1].attributes
