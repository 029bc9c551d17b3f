"""`eval --concurrency N`: turns in parallel threads, written in question order, resumable, rate limits backed
off — against a real Ollama client talking to a loopback server; and `Session.ask` from many threads at once."""

from __future__ import annotations

import json
import threading
import time

import duckdb
import pytest

from agent_server import AgentServer
from conftest import ROOT
from tracedb import empty_trace_db
from workbench import batch
from workbench.batch import run_eval
from workbench.cli import main
from workbench.providers import Provider, register_provider
from workbench.session import Session

QUESTIONS = [json.loads(line)["question"] for line in (ROOT / "data" / "demo_gold.jsonl").read_text().splitlines()
             if line.strip()][:10]


@pytest.fixture
def ollama_env(monkeypatch):
    def point(srv: AgentServer, retries: int = 3):
        monkeypatch.setenv("OLLAMA_HOST", srv.url)
        monkeypatch.setenv("WORKBENCH_PROVIDER_BACKOFF", "0.001")
        monkeypatch.setenv("WORKBENCH_PROVIDER_RETRIES", str(retries))
    return point


def written(db, run_id: str) -> list[tuple]:
    """(question, status, consulted doc ids) of the run's turns, in the order they were written."""
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute(
            "SELECT t.question, t.status, coalesce(list(s.doc_id ORDER BY s.position) FILTER (WHERE s.consulted), []) "
            "FROM turns t LEFT JOIN sources s USING (turn_id) WHERE t.run_id = ? GROUP BY t.rowid, t.question, t.status "
            "ORDER BY t.rowid", [run_id]).fetchall()


def consulted(result) -> list[list[str]]:
    return [list(p.sets.consulted) for p in result.payloads]


def test_four_workers_give_the_same_turns_in_the_same_order_as_one(ollama_env, tmp_path):
    with AgentServer(delay=0.01) as srv:  # one worker: its requests overlap nowhere, however long each takes
        ollama_env(srv)
        one = run_eval(Session.open(trace_db=empty_trace_db(tmp_path / "one.duckdb")), QUESTIONS, provider="ollama",
                       progress=False)
        assert srv.max_in_flight == 1
        srv.delay = 0.05  # four workers: long enough that all four wait on the server at once
        four = run_eval(Session.open(trace_db=empty_trace_db(tmp_path / "four.duckdb")), QUESTIONS, provider="ollama",
                        progress=False, concurrency=4)
        assert srv.max_in_flight == 4, "four turns really were waiting on the server at once"
    assert one.asked == four.asked == len(QUESTIONS) and one.failed == four.failed == 0 and four.concurrency == 4
    assert consulted(one) == consulted(four) and any(consulted(one))
    assert [p.question for p in four.payloads] == QUESTIONS
    rows_one, rows_four = written(tmp_path / "one.duckdb", one.run_id), written(tmp_path / "four.duckdb", four.run_id)
    assert [r[0] for r in rows_four] == QUESTIONS and rows_four == rows_one


def test_rate_limits_pause_the_batch_and_ask_again_without_failing_it(ollama_env, tmp_path, monkeypatch):
    # Ten 429s spread over four workers: with the default 6 re-asks one unlucky question could take 7 of them
    # and be written as failed (seen once on a busy machine). This test is about pausing and asking again;
    # running out of re-asks is the next test's.
    monkeypatch.setattr(batch, "RATE_LIMIT_RETRIES", 10)
    with AgentServer() as srv:
        ollama_env(srv)
        clean = run_eval(Session.open(trace_db=empty_trace_db(tmp_path / "clean.duckdb")), QUESTIONS, provider="ollama",
                         progress=False)
    with AgentServer(rate_limit_first=10) as srv:  # a burst of 429s: every worker's first turns hit it
        ollama_env(srv, retries=0)  # the provider gives up at once: the batch's own back-off must cope
        db = empty_trace_db(tmp_path / "limited.duckdb")
        result = run_eval(Session.open(trace_db=db), QUESTIONS, provider="ollama", progress=False, concurrency=4,
                          backoff=0.001)
    assert srv.rate_limited == 10 and result.rate_limited == 10
    assert result.asked == len(QUESTIONS) and result.failed == 0
    assert consulted(result) == consulted(clean)
    rows = written(db, result.run_id)
    assert [r[0] for r in rows] == QUESTIONS and {r[1] for r in rows} == {"ok"}, "rate-limited attempts are not written"


def test_a_question_rate_limited_every_time_is_written_as_failed_and_the_run_goes_on(ollama_env, tmp_path,
                                                                                     monkeypatch):
    monkeypatch.setattr(batch, "RATE_LIMIT_RETRIES", 2)
    with AgentServer(rate_limit_every=1) as srv:
        ollama_env(srv, retries=0)
        db = empty_trace_db(tmp_path / "t.duckdb")
        result = run_eval(Session.open(trace_db=db), QUESTIONS[:3], provider="ollama", progress=False, concurrency=2,
                          backoff=0.001)
    assert result.asked == 3 and result.failed == 3 and result.rate_limited == 3 * 2
    assert [r[1] for r in written(db, result.run_id)] == ["rate_limited"] * 3


def test_interrupted_concurrent_run_resumes_where_the_written_turns_end(ollama_env, tmp_path, monkeypatch):
    db = empty_trace_db(tmp_path / "t.duckdb")
    real_ask = Session.ask

    def interrupted(self, question, **kw):
        if question == QUESTIONS[5]:
            raise KeyboardInterrupt
        return real_ask(self, question, **kw)

    with AgentServer(delay=0.02) as srv:
        ollama_env(srv)
        monkeypatch.setattr(Session, "ask", interrupted)
        with pytest.raises(KeyboardInterrupt):
            run_eval(Session.open(trace_db=db), QUESTIONS, provider="ollama", progress=False, concurrency=4)
        monkeypatch.setattr(Session, "ask", real_ask)
        with duckdb.connect(str(db), read_only=True) as con:
            (run_id,) = con.execute("SELECT run_id FROM runs").fetchone()
        kept = [r[0] for r in written(db, run_id)]
        assert kept[:5] == QUESTIONS[:5], "written in order, up to the interruption"
        # then every turn that had finished behind the interrupted one (issue 23: no finished turn is lost)
        assert QUESTIONS[5] not in kept and kept[5:] == [q for q in QUESTIONS[6:] if q in kept[5:]]
        resumed = run_eval(Session.open(trace_db=db), QUESTIONS, provider="ollama", progress=False, concurrency=4)
    assert resumed.resumed and resumed.run_id == run_id and resumed.skipped == len(kept)
    assert resumed.asked == len(QUESTIONS) - len(kept)
    assert sorted(r[0] for r in written(db, run_id)) == sorted(QUESTIONS)


def test_session_ask_from_many_threads_with_a_buffered_writer(tmp_path):
    """One Session (one retriever, one trace writer) shared by eight threads logging into one buffer."""
    questions = QUESTIONS[:6] + ["What articles do you have?", "What is the capital of Mongolia?"]
    reference = {q: Session.open(trace=False).ask(q).payload.sets for q in questions}
    db = empty_trace_db(tmp_path / "t.duckdb")
    session = Session.open(trace_db=db)
    session.toolbox
    answers, errors = [], []
    lock = threading.Lock()

    def worker(offset: int):
        try:
            for i in range(5):
                q = questions[(offset + i) % len(questions)]
                a = session.ask(q, mode="excerpts" if i % 2 else "agent")
                with lock:
                    answers.append(a)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    with session.tracer.buffered(max_turns=7):
        threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert not errors and len(answers) == 40 and not any(a.trace_error for a in answers)
    for a in answers:
        if a.record.mode == "agent":
            assert a.payload.sets == reference[a.payload.question]
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT count(*), count(DISTINCT turn_id) FROM turns").fetchone() == (40, 40)
        mismatched = con.execute("SELECT count(*) FROM turns t WHERE n_retrieved <> "
                                 "(SELECT count(*) FROM sources s WHERE s.turn_id = t.turn_id)").fetchone()[0]
        assert mismatched == 0
    assert {a.payload.turn_id for a in answers} == {r[0] for r in duckdb.connect(str(db), read_only=True)
                                                       .execute("SELECT turn_id FROM turns").fetchall()}


def test_cli_eval_concurrency(tmp_path, capsys):
    qfile = tmp_path / "q.jsonl"
    qfile.write_text("".join(json.dumps({"question": q}) + "\n" for q in QUESTIONS[:4]))
    db = empty_trace_db(tmp_path / "t.duckdb")
    assert main(["eval", str(qfile), "--db", str(db), "--concurrency", "3", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "concurrency" in out and "asked" in out
    with pytest.raises(SystemExit) as exit_:  # argparse: usage and the reason, exit status 2
        main(["eval", str(qfile), "--concurrency", "0"])
    assert exit_.value.code == 2 and "must be at least 1" in capsys.readouterr().err


class OneSlot(Provider):
    """Like an in-process model with one slot: answers at once from the offline agent, but counts how many
    turns are inside it together (a held lock would hide the overlap instead of measuring it)."""

    name, label = "one-slot-test", "one slot (test)"
    max_concurrent_turns = 1
    inside = peak = 0
    lock = threading.Lock()

    def __init__(self, model=None, **options):
        super().__init__(model or "one-slot", **options)
        from workbench.providers.offline import OfflineProvider

        self.agent = OfflineProvider()

    def complete(self, messages, tools):
        cls = type(self)
        with cls.lock:
            cls.inside += 1
            cls.peak = max(cls.peak, cls.inside)
        try:
            time.sleep(0.01)  # room for a second worker to come in, were there one
            return self.agent.complete(messages, tools)
        finally:
            with cls.lock:
                cls.inside -= 1


@pytest.fixture
def one_slot():
    from workbench.providers.base import _PROVIDERS

    register_provider(OneSlot.name, OneSlot)
    OneSlot.peak = 0
    yield OneSlot
    _PROVIDERS.unregister(OneSlot.name)


def test_a_provider_with_one_slot_runs_its_turns_one_at_a_time(one_slot, tmp_path, capsys):
    """`llamacpp` declares `max_concurrent_turns = 1`: `--concurrency 4` would only queue turns for its one slot
    (and evict each other's prompt cache), so the batch runs them one after another and says so."""
    from workbench.providers import declared

    assert declared("llamacpp", "max_concurrent_turns") == 1 and declared("ollama", "max_concurrent_turns") is None
    result = run_eval(Session.open(trace_db=empty_trace_db(tmp_path / "t.duckdb")), QUESTIONS[:6],
                      provider=one_slot.name, progress=False, concurrency=4)
    assert result.concurrency == 1 and one_slot.peak == 1 and result.asked == 6 and result.failed == 0
    reference = run_eval(Session.open(trace_db=empty_trace_db(tmp_path / "r.duckdb")), QUESTIONS[:6],
                         provider="offline", progress=False)
    assert consulted(result) == consulted(reference)
    qfile = tmp_path / "q.jsonl"
    qfile.write_text("".join(json.dumps({"question": q}) + "\n" for q in QUESTIONS[:2]))
    assert main(["eval", str(qfile), "--db", str(empty_trace_db(tmp_path / "c.duckdb")), "--provider", one_slot.name,
                 "--concurrency", "3", "--no-progress"]) == 0
    captured = capsys.readouterr()
    note = f"provider '{one_slot.name}' answers at most 1 turn(s) at a time, so --concurrency 3 ran as 1"
    assert note in captured.err
