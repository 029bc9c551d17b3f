"""The export arrives intact in a REAL Arize Phoenix (DESIGN.md §10), and `ingest --phoenix` audits the spans
instrumented apps sent to it (docs/design.md §12).

One `phoenix serve` per test session (this file owns it; with `--dist loadfile` its tests share one
worker), started before the trace database is built so the two overlap. Spans are read back over
Phoenix's REST API with plain httpx (never `import phoenix`); Phoenix parses JSON-string attributes
(`metadata`, `tool.parameters`, `document.metadata`) into keys, so parsed values are compared. The
consulted flags go in as document annotations and come back through GraphQL `documentEvaluations`.
"""

from __future__ import annotations

import json
import subprocess
import time
from datetime import datetime

import duckdb
import httpx
import pytest

import phoenix_server
from loopback import OLLAMA, ScriptedServer
from workbench.cli import main
from workbench.session import Session
from workbench.trace import live
from workbench.trace.spans import SpanSpec, stored_turns, trace_id_of, turn_spans

URL = "https://help.orbitly.example/articles/sso-saml-setup"
JSON_ATTRIBUTES = ("metadata", "tool.parameters")  # and every `….document.metadata`


@pytest.fixture(scope="session")
def phoenix_started(tmp_path_factory):
    if phoenix_server.executable() is None:
        pytest.skip(f"Arize Phoenix is not installed: `.ci/run` installs it into .venv-phoenix "
                    f"(or set {phoenix_server.EXECUTABLE_ENV} to a `phoenix` executable)")
    server = phoenix_server.PhoenixServer(tmp_path_factory.mktemp("phoenix"))
    yield server
    server.stop()


@pytest.fixture(scope="session")
def traced(phoenix_started, tmp_path_factory):
    """Built while Phoenix boots: turns of every shape, token counts from the Ollama client, a verdict."""
    db = tmp_path_factory.mktemp("phoenix-db") / "t.duckdb"
    s = Session.open(trace_db=db)
    s.ask("How do I configure SSO?")
    s.ask("What articles do you have?")
    s.ask("How do I configure SSO?", mode="excerpts")
    s.ask("How do I configure SSO?", faults=["corrupt_id"], verify=True)  # verified: verdicts in its spans
    script = [OLLAMA.reply("", [("search", {"query": "configure SSO"})]),
              OLLAMA.reply("", [("fetch_document", {"doc_id": "sso-saml-setup"})]),
              OLLAMA.reply(f"Paste the IdP metadata ([SAML setup]({URL})).")]
    with ScriptedServer(script) as srv:
        s.ask("How do I configure SSO?", provider="ollama", **OLLAMA.options(srv.url))
    return db


@pytest.fixture(scope="session")
def phoenix(phoenix_started, traced) -> str:
    return phoenix_started.wait_ready()


def flatten(prefix: str, value, out: dict) -> None:
    """Phoenix's nesting of a parsed JSON object: one key per leaf (list items of objects by index), none for
    an empty object; lists of plain values stay lists."""
    if isinstance(value, dict):
        for k, v in value.items():
            flatten(f"{prefix}.{k}", v, out)
    elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        for i, v in enumerate(value):
            flatten(f"{prefix}.{i}", v, out)
    else:
        out[prefix] = value


def as_phoenix_stores(spec: SpanSpec) -> dict:
    """What Phoenix should hold for `spec`: JSON-string attributes parsed and flattened into keys."""
    out: dict = {}
    for key, value in spec.attributes.items():
        if key == "openinference.span.kind":
            continue  # Phoenix keeps it as the span's `span_kind`
        if key in JSON_ATTRIBUTES or key.endswith(".document.metadata"):
            flatten(key, json.loads(value), out)
        else:
            out[key] = value
    return out


def spans_of(base: str, project: str, expect: int, timeout: float = 60.0) -> list[dict]:
    """Every span of `project`, once at least `expect` have been stored (Phoenix inserts asynchronously)."""
    deadline = time.monotonic() + timeout
    while True:
        spans, cursor = [], None
        while True:
            r = httpx.get(f"{base}/v1/projects/{project}/spans", params={"limit": 1000, **({"cursor": cursor} if cursor else {})},
                          timeout=10)
            if r.status_code == 404:  # the project appears with its first span
                break
            r.raise_for_status()
            body = r.json()
            spans += body["data"]
            cursor = body.get("next_cursor")
            if not cursor:
                break
        if len(spans) >= expect or time.monotonic() > deadline:
            return spans
        time.sleep(0.25)


def us(iso: str) -> int:
    t = datetime.fromisoformat(iso)
    return int(t.timestamp()) * 1_000_000 + t.microsecond


def export(db, base: str, project: str, *extra: str) -> None:
    assert main(["export", "--openinference", "--endpoint", f"{base}/v1/traces", "--project", project,
                 "--db", str(db), *extra]) == 0


def expected_spans(db, project: str) -> list[SpanSpec]:
    return [s for t in stored_turns(db) for s in turn_spans(t, project)]


def test_export_arrives_intact_in_phoenix(phoenix, traced, capsys):
    expected = expected_spans(traced, "intact")
    export(traced, phoenix, "intact")
    assert "exported 5 turns" in capsys.readouterr().out
    got = {s["context"]["span_id"]: s for s in spans_of(phoenix, "intact", len(expected))}
    assert len(got) == len(expected)
    kinds = set()
    for spec in expected:
        s = got[f"{spec.span_id:016x}"]
        kinds.add(s["span_kind"])
        assert s["context"]["trace_id"] == f"{spec.trace_id:032x}" and s["name"] == spec.name
        assert s["span_kind"] == spec.kind
        assert s["parent_id"] == (f"{spec.parent_id:016x}" if spec.parent_id is not None else None)
        assert abs(us(s["start_time"]) * 1000 - spec.start_ns) < 1000  # Phoenix stores microseconds
        assert abs(us(s["end_time"]) * 1000 - spec.end_ns) < 1000
        assert s["status_code"] == ("ERROR" if spec.error else "OK")
        assert s["attributes"] == as_phoenix_stores(spec), spec.name
    assert kinds == {"CHAIN", "LLM", "TOOL", "RETRIEVER"}
    roots = [s for s in got.values() if s["parent_id"] is None]
    assert sorted(r["attributes"]["metadata.turn_id"] for r in roots) == sorted(t.turn["turn_id"] for t in stored_turns(traced))
    assert {r["attributes"]["session.id"] for r in roots} == {t.turn["run_id"] for t in stored_turns(traced)}
    verdicts = [v for s in got.values() for k, v in s["attributes"].items() if k.endswith(".document.metadata.verdict")]
    with duckdb.connect(str(traced), read_only=True) as con:  # the verified turn's verdicts, as stored
        stored = {v for (v,) in con.execute("SELECT verdict FROM ablations WHERE verdict IS NOT NULL").fetchall()}
    assert "load_bearing" in stored and set(verdicts) == stored
    tokens = [s["attributes"]["llm.token_count.total"] for s in got.values() if "llm.token_count.total" in s["attributes"]]
    assert tokens == [150, 150, 150]


def test_exporting_again_adds_nothing_and_another_project_gets_a_copy(phoenix, traced):
    n = len(expected_spans(traced, "twice"))
    export(traced, phoenix, "twice")
    assert len(spans_of(phoenix, "twice", n)) == n
    export(traced, phoenix, "twice")
    marker = Session.open(trace_db=traced.with_name("marker.duckdb"))
    marker.ask("What is the capital of Mongolia?")
    export(traced.with_name("marker.duckdb"), phoenix, "twice")  # stored after the repeat, so once it is there…
    extra = len(expected_spans(traced.with_name("marker.duckdb"), "twice"))
    spans = spans_of(phoenix, "twice", n + extra)
    assert len(spans) == n + extra  # …the repeated spans were not added
    export(traced, phoenix, "twice-copy")
    assert len(spans_of(phoenix, "twice-copy", n)) == n


def test_consulted_flags_as_document_annotations_read_back_through_graphql(phoenix, traced, capsys):
    export(traced, phoenix, "annotated", "--annotate")
    out = capsys.readouterr().out
    retrievers = [s for s in expected_spans(traced, "annotated") if s.kind == "RETRIEVER"]
    flags = {}
    for spec in retrievers:
        i = 0
        while f"retrieval.documents.{i}.document.id" in spec.attributes:
            meta = json.loads(spec.attributes[f"retrieval.documents.{i}.document.metadata"])
            flags[(f"{spec.span_id:016x}", i)] = meta["consulted"]
            i += 1
    assert f"{len(flags)} document annotations" in out and True in flags.values() and False in flags.values()
    stored = {s["context"]["span_id"]: s["id"]
              for s in spans_of(phoenix, "annotated", len(expected_spans(traced, "annotated")))}
    query = ("query ($id: ID!) { node(id: $id) { ... on Span { spanId "
             "documentEvaluations { name score label documentPosition } } } }")
    deadline = time.monotonic() + 60
    for span_id in {k[0] for k in flags}:
        want = {pos: consulted for (sid, pos), consulted in flags.items() if sid == span_id}
        while True:
            r = httpx.post(f"{phoenix}/graphql", json={"query": query, "variables": {"id": stored[span_id]}}, timeout=10)
            r.raise_for_status()
            evals = r.json()["data"]["node"]["documentEvaluations"]
            if len(evals) >= len(want) or time.monotonic() > deadline:
                break
            time.sleep(0.25)
        got = {e["documentPosition"]: e for e in evals if e["name"] == "consulted"}
        assert {p: e["score"] == 1.0 for p, e in got.items()} == want
        assert all(e["label"] == ("consulted" if want[p] else "not consulted") for p, e in got.items())


def test_live_export_reaches_phoenix_as_the_replay_would(phoenix, tmp_path, monkeypatch):
    monkeypatch.setenv(live.ENDPOINT_ENV, phoenix)  # a bare base URL gets /v1/traces
    monkeypatch.setenv(live.PROJECT_ENV, "live")
    db = tmp_path / "live.duckdb"
    s = Session.open(trace_db=db)
    s.ask("How do I configure SSO?")
    s.ask("What articles do you have?")
    exporter = live.from_env()
    assert exporter.wait(60) and exporter.status()["exported"] == 2
    expected = expected_spans(db, "live")
    got = {s["context"]["span_id"]: s for s in spans_of(phoenix, "live", len(expected))}
    assert {f"{x.span_id:016x}" for x in expected} == set(got)
    for spec in expected:
        assert got[f"{spec.span_id:016x}"]["attributes"] == as_phoenix_stores(spec)


SESSIONS_QUERY = """query ($name: String!) { projects(filter: {col: name, value: $name}) { edges { node { name
  sessions(first: 20) { edges { node { sessionId numTraces
    traces(first: 20) { edges { node { traceId rootSpan { input { value } output { value } } } } } } } } } } } }"""


def sessions_of(base: str, project: str, expect: int, timeout: float = 60.0) -> dict[str, list[dict]]:
    """Phoenix's sessions of `project` through its GraphQL API (what its Sessions view shows): session id → its
    traces in time order, once at least `expect` traces are in sessions (Phoenix inserts asynchronously)."""
    deadline = time.monotonic() + timeout
    while True:
        r = httpx.post(f"{base}/graphql", json={"query": SESSIONS_QUERY, "variables": {"name": project}}, timeout=10)
        r.raise_for_status()
        body = r.json()
        assert "errors" not in body, body["errors"]
        projects = [e["node"] for e in body["data"]["projects"]["edges"] if e["node"]["name"] == project]
        got = {e["node"]["sessionId"]: [t["node"] for t in e["node"]["traces"]["edges"]]
               for p in projects for e in p["sessions"]["edges"]}
        if sum(map(len, got.values())) >= expect or time.monotonic() > deadline:
            return got
        time.sleep(0.25)


def test_a_conversation_is_one_session_in_phoenix_with_its_turns_in_order(phoenix, tmp_path):
    """Issue 22, item 5: `session.id` is the conversation id, so Phoenix's Sessions view shows the conversation;
    a single turn's session stays its run."""
    db = tmp_path / "conversation.duckdb"
    s = Session.open(trace_db=db)
    asked = []
    for q in ("How do I configure SSO?", "And with Okta?", "How do I rotate API keys?"):
        asked.append(s.ask(q, history=asked, conversation_id="conv-7").record)
    single = s.ask("Which articles do you have?")
    export(db, phoenix, "sessions")
    got = sessions_of(phoenix, "sessions", 4)
    conversation = got["conv-7"]
    assert [t["traceId"] for t in conversation] == [f"{trace_id_of(r.turn_id, 'sessions'):032x}" for r in asked]
    assert [t["rootSpan"]["input"]["value"] for t in conversation] == [r.question for r in asked]
    assert [t["rootSpan"]["output"]["value"] for t in conversation] == [r.answer for r in asked]
    with duckdb.connect(str(db), read_only=True) as con:
        (run_id,) = con.execute("SELECT run_id FROM turns WHERE turn_id = ?", [single.payload.turn_id]).fetchone()
    assert set(got) == {"conv-7", run_id}
    assert [t["traceId"] for t in got[run_id]] == [f"{trace_id_of(single.payload.turn_id, 'sessions'):032x}"]


def test_attribute_names_are_openinference_semantic_conventions(traced):
    """Every key we emit is a constant of the official `openinference-semantic-conventions` package (read in
    Phoenix's venv, so the workbench does not depend on it)."""
    python = phoenix_server.venv_python()
    if python is None:
        pytest.skip("Phoenix's venv (with openinference-semantic-conventions) is not installed")
    code = ("import json; from openinference.semconv.trace import SpanAttributes, DocumentAttributes, "
            "OpenInferenceSpanKindValues; from openinference.semconv.resource import ResourceAttributes; "
            "names = {v for c in (SpanAttributes, DocumentAttributes, ResourceAttributes) for k, v in vars(c).items() "
            "if k.isupper() and isinstance(v, str)}; "
            "print(json.dumps({'names': sorted(names), 'kinds': [k.value for k in OpenInferenceSpanKindValues]}))")
    official = json.loads(subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True).stdout)
    names = set(official["names"])
    from workbench.trace.spans import PROJECT_NAME, RETRIEVAL_DOCUMENTS

    assert PROJECT_NAME in names and RETRIEVAL_DOCUMENTS in names
    used = set()
    for spec in expected_spans(traced, "workbench"):
        assert spec.kind in official["kinds"]
        for key in spec.attributes:
            if key.startswith(RETRIEVAL_DOCUMENTS + "."):
                key = key.split(".", 3)[3]  # retrieval.documents.{i}.<document attribute>
            used.add(key)
    assert used - names == set()
    assert {"llm.model_name", "llm.token_count.prompt", "llm.token_count.completion", "llm.token_count.total",
            "tool.name", "tool.parameters", "document.id", "document.score", "document.content",
            "document.metadata", "session.id", "input.value", "output.value", "metadata"} <= used


# --- `ingest --phoenix`: another app's spans, pulled back from a Phoenix project (docs/design.md §12) -------------

def _sent_to_phoenix(base: str, project: str, service: str):
    """A tracer provider exporting to Phoenix's `/v1/traces` into `project`, and a record of what it sent."""
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from audit_apps import tracer_provider

    tp = tracer_provider(f"{base}/v1/traces", service, project)
    sent = InMemorySpanExporter()
    tp.add_span_processor(SimpleSpanProcessor(sent))
    return tp, sent


def _ingest(base: str, project: str, db, *extra: str):
    from clirun import cli

    return cli("ingest", "--phoenix", base, "--project", project, "--db", str(db), *extra)


def _audited(db, *args: str) -> list[dict]:
    from clirun import cli

    r = cli("turns", "--json", "--db", str(db), *args)
    assert r.returncode == 0, r.stderr
    return [json.loads(line) for line in r.stdout.splitlines()]


def _stored_counts(db) -> tuple[int, int]:
    with duckdb.connect(str(db), read_only=True) as con:
        return (con.execute("SELECT count(*) FROM turns").fetchone()[0],
                con.execute("SELECT count(*) FROM audit_spans").fetchone()[0])


def test_ingest_from_phoenix_audits_a_llama_index_app_and_a_second_ingest_adds_nothing(phoenix_started, tmp_path):
    pytest.importorskip("openinference.instrumentation.llama_index")
    from audit_apps import check_llama_turn, llama_replies, run_llama_app, write_corpus

    base = phoenix_started.wait_ready()
    tp, sent = _sent_to_phoenix(base, "audited-llama", "kb-assistant")
    with ScriptedServer(replies=llama_replies()) as llm:
        run = run_llama_app(tp, llm)
    n = len(sent.get_finished_spans())
    assert len(spans_of(base, "audited-llama", n)) == n  # Phoenix holds all the app sent
    db = tmp_path / "t.duckdb"
    corpus = write_corpus(tmp_path / "kb.jsonl")
    r = _ingest(base, "audited-llama", db, "--corpus", corpus, "--name", "from-phoenix")
    assert r.returncode == 0, r.stderr
    assert f"{n} spans received, 1 turns written" in r.stderr
    [turn] = _audited(db, "--run", "from-phoenix")
    check_llama_turn(turn, run, service="audited-llama")  # Phoenix keeps no service.name: the project stands for it
    stored = _stored_counts(db)
    assert stored == (1, n)
    again = _ingest(base, "audited-llama", db, "--corpus", corpus, "--name", "again")
    assert again.returncode == 0, again.stderr
    assert "0 turns written, 1 already stored" in again.stderr
    assert _stored_counts(db) == stored and _audited(db, "--run", "again") == []


def test_ingest_from_phoenix_follows_a_session_of_a_bare_openai_client_across_two_ingests(phoenix_started, tmp_path):
    """The session's first turn is ingested, then the project grows by its second turn and is ingested again:
    the second turn takes its place after the first and sees what the first left in its prompt."""
    pytest.importorskip("openinference.instrumentation.openai")
    from audit_apps import SESSION_QUESTIONS, check_session_turns, run_openai_app, session_replies

    base = phoenix_started.wait_ready()
    db = tmp_path / "t.duckdb"
    n, messages = 0, None
    with ScriptedServer(replies=session_replies()) as llm:
        for question, says in zip(SESSION_QUESTIONS, ("1 turns written", "1 turns written, 1 already stored")):
            tp, sent = _sent_to_phoenix(base, "audited-session", "support-bot")
            messages = run_openai_app(tp, llm.url, [question], messages)
            n += len(sent.get_finished_spans())
            assert len(spans_of(base, "audited-session", n)) == n
            r = _ingest(base, "audited-session", db)
            assert r.returncode == 0 and f"{n} spans received, {says} (" in r.stderr, r.stderr
    first, second = _audited(db, "--conversation", "otel/audited-session/chat-42")  # the project's session
    check_session_turns(first, second, messages, llm)


def test_ingest_from_phoenix_pages_through_a_project_up_to_its_bound(phoenix_started, tmp_path, monkeypatch):
    """151 spans: more than one page of Phoenix's client (100). Over the bound, or a project Phoenix has not,
    exits 2 and writes nothing. A trace whose root span Phoenix does not hold (yet) is not audited on part of
    itself."""
    from opentelemetry import trace
    from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

    from workbench.audit import phoenix as audit_phoenix

    base = phoenix_started.wait_ready()
    tp, _ = _sent_to_phoenix(base, "audited-pages", "indexer")
    tracer = tp.get_tracer("indexer")
    with tracer.start_as_current_span("index"):  # no model call: no turn
        for i in range(149):
            with tracer.start_as_current_span(f"embed-{i}"):
                pass
    root = SpanContext(trace_id=0x5B8EFFF798038103D269B633813FC60C, span_id=0x1111111111111111, is_remote=True,
                       trace_flags=TraceFlags(TraceFlags.SAMPLED))  # a root span that is never sent
    answering = {"openinference.span.kind": "LLM", "llm.input_messages.0.message.role": "user",
                 "llm.input_messages.0.message.content": "How do I configure SSO?",
                 "llm.output_messages.0.message.role": "assistant", "llm.output_messages.0.message.content": "See sso."}
    with tracer.start_as_current_span("ChatCompletion", context=trace.set_span_in_context(NonRecordingSpan(root)),
                                      attributes=answering):
        pass
    tp.shutdown()
    assert len(spans_of(base, "audited-pages", 151)) == 151
    db = tmp_path / "t.duckdb"
    monkeypatch.setattr(audit_phoenix, "MAX_PHOENIX_SPANS", 150)
    r = _ingest(base, "audited-pages", db)
    assert r.returncode == 2 and "more than 150 spans" in r.stderr and "Traceback" not in r.stderr
    assert not db.exists()
    r = _ingest(base, "audited-page", db)
    assert r.returncode == 2 and "has no project 'audited-page'" in r.stderr and "'audited-pages'" in r.stderr
    assert not db.exists()
    monkeypatch.setattr(audit_phoenix, "MAX_PHOENIX_SPANS", 151)
    r = _ingest(base, "audited-pages", db)
    assert r.returncode == 0 and "150 spans received, 0 turns written" in r.stderr, r.stderr
    assert "1 traces have no root span in Phoenix yet" in r.stderr
    assert _stored_counts(db) == (0, 150)
