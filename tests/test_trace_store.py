"""The trace store: every turn logged, payload and tables agree exactly, views, claims, sessions."""

from __future__ import annotations

import json
import os

import duckdb
import pytest

from tracedb import empty_trace_db
from workbench.session import Session
from workbench.trace import TraceReader
from workbench.trace.writer import TraceWriter
from workbench.types import ModelCall, ResultItem, ToolCall, TurnRecord
from workbench.provenance import sources_payload

QUESTIONS = [
    ("How do I configure SSO?", "agent"),
    ("What articles do you have?", "agent"),
    ("What is the capital of Mongolia?", "agent"),
    ("How do I rotate an API key?", "agent"),
    ("How do I configure SSO?", "excerpts"),
    ("What is the capital of Mongolia?", "excerpts"),
]


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    """A real DuckDB file with turns of both modes, with and without faults, logged by Session.ask."""
    db = empty_trace_db(tmp_path_factory.mktemp("trace") / "t.duckdb")
    session = Session.open(trace_db=db)
    answers = [session.ask(q, mode=m) for q, m in QUESTIONS]
    answers.append(session.ask("How do I configure SSO?", faults=["corrupt_id"]))
    answers.append(session.ask("How do I configure SSO?", mode="excerpts", faults=["cite_unretrieved"]))
    answers.append(session.ask("What articles do you have?", faults=["link_listed"]))
    return db, answers


def q(db, sql, params=None):
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute(sql, params or []).fetchall()


def test_every_ask_is_logged_and_turn_id_keys_every_table(traced):
    db, answers = traced
    ids = {a.payload.turn_id for a in answers}
    assert {r[0] for r in q(db, "SELECT turn_id FROM turns")} == ids
    for table in ("tool_calls", "retrieved_items", "citations", "sources"):
        assert {r[0] for r in q(db, f"SELECT DISTINCT turn_id FROM {table}")} <= ids


def test_three_sets_equal_sources_table(traced):
    db, answers = traced
    for a in answers:
        p, tid = a.payload, a.payload.turn_id
        rows = q(db, "SELECT doc_id, retrieved, cited, consulted, exposure, reason, shown_position FROM sources "
                     "WHERE turn_id = ? ORDER BY position", [tid])
        assert [r[0] for r in rows] == list(p.sets.retrieved)
        assert {r[0] for r in rows if r[2]} == set(p.sets.cited)
        assert {r[0] for r in rows if r[3]} == set(p.sets.consulted)
        shown = sorted((r[6], r[0]) for r in rows if r[6] is not None)
        assert [d for _, d in shown] == [s.doc_id for s in p.sources]
        by_id = {d.doc_id: d for d in p.documents}
        for doc_id, _, cited, consulted, exposure, reason, _ in rows:
            d = by_id[doc_id]
            assert (cited, consulted, exposure, reason) == (d.cited, d.consulted, d.exposure, d.reason)
        sizes = q(db, "SELECT n_retrieved, n_cited, n_consulted, n_rejected FROM turn_sets WHERE turn_id = ?", [tid])
        assert sizes == [(len(p.sets.retrieved), len(p.sets.cited), len(p.sets.consulted),
                          len(p.rejected_citations))]


def test_turn_row_tool_calls_items_and_citations_match_record(traced):
    db, answers = traced
    for a in answers:
        r, p, tid = a.record, a.payload, a.payload.turn_id
        (question, answer, status, started, latency) = q(
            db, "SELECT question, answer, status, started_at, latency_ms FROM turns WHERE turn_id = ?", [tid])[0]
        assert (question, answer, status, latency) == (r.question, r.answer, r.status, r.latency_ms)
        assert started.isoformat(timespec="milliseconds").replace("+00:00", "") == r.started_at.replace("+00:00", "")
        calls = q(db, "SELECT seq, name, exposure, args_json, n_results FROM tool_calls WHERE turn_id = ? ORDER BY seq", [tid])
        assert calls == [(i, c.name, c.exposure, json.dumps(c.args, sort_keys=True, ensure_ascii=False), len(c.results))
                         for i, c in enumerate(r.tool_calls)]
        items = q(db, "SELECT tool_call_seq, rank, doc_id, chunk_index, score, exposure, excerpt_n FROM retrieved_items "
                      "WHERE turn_id = ? ORDER BY tool_call_seq NULLS LAST, position", [tid])
        expected = [(i, it.rank, it.doc_id, it.chunk_index, it.score, c.exposure, None)
                    for i, c in enumerate(r.tool_calls) for it in c.results]
        expected += [(None, e.n, e.doc_id, e.chunk_index, e.score, "snippet", e.n) for e in r.excerpts]
        assert items == expected
        cits = q(db, "SELECT target, doc_id, valid, reason, nearest_doc_id, edit_distance FROM citations "
                     "WHERE turn_id = ? ORDER BY idx", [tid])
        assert cits == [(c.target, c.doc_id, c.valid, c.reason, c.nearest_doc_id, c.edit_distance)
                        for c in p.citations]


def test_rejected_citations_are_recorded(traced):
    db, answers = traced
    faulty = [a for a in answers if a.payload.rejected_citations]
    assert len(faulty) >= 2  # corrupt_id (not_retrieved) and cite_unretrieved in excerpt mode (out_of_range)
    reasons = {r[0] for r in q(db, "SELECT DISTINCT reason FROM citations WHERE NOT valid")}
    assert reasons == {"not_retrieved", "out_of_range"}
    near = q(db, "SELECT nearest_doc_id, edit_distance FROM citations WHERE reason = 'not_retrieved'")
    assert all(n is not None and d == 1 for n, d in near)


def test_claims_are_stored_with_their_judge_and_its_version(traced):
    from workbench.faithfulness.judges import LexicalJudge

    db, answers = traced
    judged = [a for a in answers if a.faithfulness is not None and a.faithfulness.claims]
    assert judged and all(a.faithfulness.judge_version == LexicalJudge.version for a in judged)
    assert q(db, "SELECT DISTINCT judge, judge_version FROM claims") == [("lexical", LexicalJudge.version)]


def test_doc_gaps_lists_out_of_scope_question_not_listing_question(traced):
    db, answers = traced
    gaps = {r[0]: r for r in q(db, "SELECT question, asks, runs FROM doc_gaps")}
    assert "What is the capital of Mongolia?" in gaps
    assert gaps["What is the capital of Mongolia?"][1:] == (2, 2)  # asked in agent and excerpt runs
    assert "What articles do you have?" not in gaps  # a listing consults nothing, and is no gap
    # exactly the substantive questions no ok turn on the corpus consulted anything for (a faulty excerpt
    # turn citing [99] consulted nothing, but other turns answered its question from the corpus: no gap)
    answered = {a.record.question for a in answers if a.payload.sets.consulted}
    expected = {a.record.question for a in answers
                if a.record.question not in answered and a.record.question != "What articles do you have?"}
    assert set(gaps) == expected
    kinds = dict(q(db, "SELECT DISTINCT question, question_kind FROM turns"))
    assert kinds["What articles do you have?"] == "structural"
    assert kinds["What is the capital of Mongolia?"] == "substantive"


def test_interactive_runs_one_per_configuration(traced):
    db, answers = traced
    runs = q(db, "SELECT kind, provider, mode, config_json FROM runs")
    assert all(r[0] == "interactive" and r[1] == "offline" for r in runs)
    configs = {json.dumps(a.record.config.to_json(), sort_keys=True) for a in answers}
    assert len(runs) == len(configs)  # agent, excerpts, and one per fault setting


def test_summary_views_answer(traced):
    db, answers = traced
    [(provider, turns, err)] = q(db, "SELECT provider, turns, error_rate FROM provider_summary")
    assert (provider, turns, err) == ("offline", len(answers), 0.0)
    modes = dict(q(db, "SELECT mode, turns FROM retriever_summary"))
    assert modes == {"agent": 6, "excerpts": 3}


def _turn(question="What is SSO?", tokens=(10, 5), **kw) -> TurnRecord:
    calls = (ToolCall("search", "snippet", {"query": question},
                      tuple(ResultItem(f"d{i}", f"Doc {i}", rank=i + 1, score=1.0 / (i + 1), chunk_index=i)
                            for i in range(3))),)
    return TurnRecord(question=question, answer="See [Doc 0](d0).", tool_calls=calls,
                      model_calls=(ModelCall("offline", tokens_in=tokens[0], tokens_out=tokens[1]),
                                   ModelCall("offline", tokens_in=7, tokens_out=None if tokens[1] is None else 3)),
                      config={"provider": "offline", "options": {"api_key": "sk-secret", "nested": {"token": "t0k"}}},
                      started_at="2024-05-01T10:00:00.000+00:00", **kw)


def test_tokens_summed_null_when_unknown_and_secrets_redacted(tmp_path):
    db = empty_trace_db(tmp_path / "t.duckdb")
    w = TraceWriter(db)
    a, b = _turn(turn_id="a"), _turn(turn_id="b", tokens=(10, None))
    w.log_turn(a, sources_payload(a))
    w.log_turn(b, sources_payload(b))
    assert dict((r[0], r[1:]) for r in q(db, "SELECT turn_id, tokens_in, tokens_out FROM turns")) == {
        "a": (17, 8), "b": (17, None)}
    [(cfg,)] = q(db, "SELECT config_json FROM runs")
    assert "sk-secret" not in cfg and "t0k" not in cfg and json.loads(cfg)["provider"] == "offline"


def test_logging_the_same_turn_twice_keeps_one_copy(tmp_path):
    db = empty_trace_db(tmp_path / "t.duckdb")
    w = TraceWriter(db)
    t = _turn(turn_id="same")
    w.log_turn(t, sources_payload(t))
    w.log_turn(t, sources_payload(t))
    assert q(db, "SELECT count(*) FROM turns") == [(1,)]
    assert q(db, "SELECT count(*) FROM retrieved_items") == [(3,)]


def test_a_batch_holding_a_turn_already_written_is_retried_turn_by_turn(tmp_path):
    """The batch fails inside its bulk insert (several turns, so `turns` is an Arrow table too); the
    failed transaction is rolled back before the registered tables are dropped, and each turn is retried."""
    db = empty_trace_db(tmp_path / "t.duckdb")
    w = TraceWriter(db)
    first = _turn(turn_id="b0")
    w.log_turn(first, sources_payload(first))
    with w.buffered(max_turns=10, max_age_s=60):
        for tid in ("b1", "b0", "b2"):
            t = _turn(turn_id=tid)
            w.log_turn(t, sources_payload(t))
    assert q(db, "SELECT turn_id FROM turns ORDER BY 1") == [("b0",), ("b1",), ("b2",)]
    assert q(db, "SELECT count(*) FROM retrieved_items") == [(9,)]


def test_claims_with_the_turn_and_added_later(tmp_path):
    db = empty_trace_db(tmp_path / "t.duckdb")
    w = TraceWriter(db)
    t = _turn(turn_id="c1")
    claim = {"claim_idx": 0, "text": "SSO is single sign-on.", "cited_doc_ids": ["d0"], "judge": "overlap",
             "score": 0.8, "verdict": "supported", "best_span": "single sign-on", "wrong_excerpt": False,
             "generated_only": False, "support_doc": "d0"}
    w.log_turn(t, sources_payload(t), claims=[claim])
    w.add_claims("c1", [{**claim, "claim_idx": 1, "judge": "nli", "judge_version": "nli-2",
                         "best_span": {"start": 1, "end": 4}}])
    rows = q(db, "SELECT claim_idx, judge, cited_doc_ids, score, best_span, wrong_excerpt, extra_json, judge_version "
                 "FROM claims ORDER BY 1")
    assert rows[0] == (0, "overlap", ["d0"], 0.8, "single sign-on", False, '{"support_doc": "d0"}', None)
    assert rows[1][1] == "nli" and json.loads(rows[1][4]) == {"start": 1, "end": 4} and rows[1][7] == "nli-2"
    from workbench.errors import TraceStoreError

    with pytest.raises(TraceStoreError, match="no turn"):
        w.add_claims("nope", [claim])


def test_session_default_db_env_and_no_trace(tmp_path, monkeypatch):
    from workbench.config import default_db_path

    monkeypatch.setenv("WORKBENCH_DB", str(tmp_path / "env.duckdb"))
    assert default_db_path() == tmp_path / "env.duckdb"
    s = Session.open()
    s.ask("How do I configure SSO?")
    assert q(tmp_path / "env.duckdb", "SELECT count(*) FROM turns") == [(1,)]
    monkeypatch.delenv("WORKBENCH_DB")
    assert default_db_path() == __import__("pathlib").Path(os.environ["WORKBENCH_HOME"]) / "traces.duckdb"
    off = Session.open(trace=False, trace_db=tmp_path / "off.duckdb")
    off.ask("How do I configure SSO?")
    assert off.tracer is None and not (tmp_path / "off.duckdb").exists()


def test_cli_ask_db_and_no_trace(tmp_path, capsys):
    from workbench.cli import main

    db = tmp_path / "cli.duckdb"
    assert main(["ask", "How do I configure SSO?", "--db", str(db)]) == 0
    assert main(["ask", "How do I configure SSO?", "--db", str(db), "--no-trace"]) == 0
    assert q(db, "SELECT count(*) FROM turns") == [(1,)]


def test_reader_errors_name_the_fix(tmp_path):
    from workbench.errors import TraceStoreError

    with pytest.raises(TraceStoreError, match="nothing has been traced"):
        TraceReader(tmp_path / "missing.duckdb").rows("SELECT 1")


def test_interactive_run_shared_by_sessions_of_one_process(tmp_path):
    db = empty_trace_db(tmp_path / "t.duckdb")
    a = Session.open(trace_db=db).ask("How do I configure SSO?")
    b = Session.open(trace_db=db).ask("How do I configure SSO?")
    c = Session.open(trace_db=db).ask("How do I configure SSO?", mode="excerpts")
    runs = dict(q(db, "SELECT turn_id, run_id FROM turns"))
    assert runs[a.payload.turn_id] == runs[b.payload.turn_id] != runs[c.payload.turn_id]
    assert q(db, "SELECT count(*) FROM runs") == [(2,)]


def test_a_broken_trace_database_does_not_cost_the_answer(tmp_path):
    """The turn is answered and returned; the trace failure is reported beside it, and the CLI warns."""
    from clirun import cli
    from workbench.session import Session

    bad = tmp_path / "not-a-db.duckdb"
    bad.write_text("this is not a DuckDB file")
    answer = Session.open(trace_db=bad).ask("How do I configure SSO?")
    assert answer.payload.sets.consulted and answer.trace_error
    r = cli("ask", "How do I configure SSO?", "--db", str(bad))
    assert r.returncode == 1 and "Sources: Configure SAML" in r.stdout
    assert "warning: this turn was not traced" in r.stderr and "Traceback" not in r.stderr


# --- rows are dicts keyed by column name; the write imports no pandas (issue 21, items 2 and 9) ---------


def test_a_traced_ask_imports_neither_pandas_nor_pyarrow(tmp_path, demo_session):
    """The writer binds its rows as a list of dicts; scanning Arrow tables made DuckDB import pandas, ~1 s of
    every traced `ask` process (benchmarks/traced_ask.py). A fresh process, as `python -m workbench` is, with
    the index on disk (building one may import them: that is not the traced path)."""
    import subprocess
    import sys

    from conftest import ROOT

    assert demo_session.toolbox  # the demo index, built into this session's WORKBENCH_HOME

    code = ("import sys; from workbench.cli import main; "
            f"code = main(['ask', 'How do I configure SSO?', '--db', {str(tmp_path / 't.duckdb')!r}]); "
            "print(code, sorted({m.split('.')[0] for m in sys.modules} & {'pandas', 'pyarrow'}))")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[-1] == "0 []", r.stdout
    with duckdb.connect(str(tmp_path / "t.duckdb"), read_only=True) as con:  # and the turn is there, whole
        assert con.execute("SELECT count(*) FROM turns").fetchone() == (1,)
        assert con.execute("SELECT count(*) FROM sources").fetchone()[0] >= 1


def test_rows_are_dicts_and_a_column_a_row_leaves_out_is_null(tmp_path):
    """The writer completes every row over the table's columns (the migrations'), so a column added by a
    migration is NULL until the rows carry it; a key that is no column is refused, not dropped."""
    from workbench.trace.rows import turn_rows
    from workbench.trace.tables import SCHEMAS

    rec = TurnRecord(question="How do I configure SSO?", answer="See [SSO](sso-saml-setup).",
                     tool_calls=(ToolCall("search", "snippet", {"query": "sso"},
                                          (ResultItem("sso-saml-setup", "SSO", rank=1, score=2.0, chunk_index=0,
                                                      snippet="Single sign-on"),)),),
                     turn_id="t" * 32, config={"provider": "offline"}, started_at="2024-05-01T10:00:00+00:00")
    rows = turn_rows(rec, sources_payload(rec), "r" * 32)
    for name, rs in rows.items():
        assert all(isinstance(r, dict) and set(r) <= set(SCHEMAS[name].names) for r in rs), name
    del rows["turns"][0]["question_kind"]
    w = TraceWriter(empty_trace_db(tmp_path / "t.duckdb"))
    with w.connect() as con:
        w._write(con, set(), rows)
        assert con.execute("SELECT question, question_kind, n_retrieved FROM turns").fetchall() == [
            ("How do I configure SSO?", None, 1)]
        assert con.execute("SELECT doc_id, rank, score, passage_id IS NOT NULL FROM retrieved_items").fetchall() == [
            ("sso-saml-setup", 1, 2.0, True)]
        bad = {"turns": [{**rows["turns"][0], "turn_id": "u" * 32, "no_such_column": 1}]}
        with pytest.raises(ValueError, match="trace table turns has no column no_such_column"):
            w._write(con, set(), bad)
        assert con.execute("SELECT count(*) FROM turns").fetchone() == (1,)  # nothing of the refused turn


def test_values_written_as_literals_come_back_as_they_were(tmp_path):
    """The writer writes values as SQL literals (a bound parameter imports pandas on DuckDB 1.5): quotes,
    a NUL, non-ASCII text, special floats, lists and NULLs come back unchanged."""
    from workbench.trace.writer import _literal

    con = duckdb.connect()
    for value, ty in [("it's '' \\ \"x\"", "VARCHAR"), ("a\x00b\x00", "VARCHAR"), ("é 漢 🙂\n\t", "VARCHAR"),
                      (float("inf"), "DOUBLE"), (-0.1, "DOUBLE"), (1e-300, "DOUBLE"), (2**62, "BIGINT"),
                      (True, "BOOLEAN"), (None, "INTEGER"), (["a'b", None, ""], "VARCHAR[]")]:
        assert con.execute(f"SELECT {_literal(value, ty)}::{ty}").fetchone()[0] == value, (value, ty)
    nan = con.execute(f"SELECT {_literal(float('nan'), 'DOUBLE')}").fetchone()[0]
    assert nan != nan


def test_rows_written_as_json_text_come_back_as_they_were_inline_and_prepared(tmp_path, monkeypatch):
    """A bulk insert carries its rows as one JSON text (`_insert_sql`), on a kept connection as the argument of a
    statement prepared once (`_insert_prepared`): every column type the trace tables use comes back bit for bit, as
    its SQL literal would (DOUBLEs by their bits, NULs, quotes, escapes, list columns, NULL), both ways."""
    import math
    import struct
    from datetime import datetime, timedelta, timezone

    from workbench.trace import writer as W
    from workbench.trace.tables import Table

    types = ("VARCHAR", "DOUBLE", "BIGINT", "INTEGER", "BOOLEAN", "TIMESTAMPTZ", "VARCHAR[]")
    names = tuple(f"c{i}" for i in range(len(types)))
    monkeypatch.setitem(W.SCHEMAS, "every_type", Table("every_type", names, types))
    at = datetime(2024, 5, 1, 10, 0, 0, 123456, tzinfo=timezone(timedelta(hours=2)))
    columns = [["it's '' \\ \"x\"", "a\x00b\x00", "é 漢 🙂\n\t\u2028", "", None, "{\"j\": [1]}"],
               [float("inf"), float("-inf"), -0.0, 5e-324, 0.1 + 0.2, 1.7976931348623157e308],
               [2**62, -2**63, 0, None, 1, True],
               [-5, 2**31 - 1, None, 0, 7, 8],
               [True, False, None, True, False, True],
               [at, None, at + timedelta(days=400), at, at, at],
               [["a'b", None, ""], [], None, ["\x00"], ["x"], ["é"]]]
    rows = [dict(zip(names, values)) for values in zip(*columns)] + [{"c1": float("nan")}]
    bits = lambda v: struct.pack("d", v) if isinstance(v, float) else v  # noqa: E731  (-0.0 and 0.0 differ)
    con = duckdb.connect(str(tmp_path / "t.duckdb"))
    con.execute("CREATE TABLE every_type (" + ", ".join(f"{n} {t}" for n, t in zip(names, types)) + ")")
    for write in (lambda: con.execute(W._insert_sql("every_type", rows)),
                  lambda: W._insert_prepared(con, "", "every_type", rows, ignore=True),
                  lambda: W._insert_prepared(con, "", "every_type", rows, ignore=True)):  # the prepared one again
        con.execute("DELETE FROM every_type")
        write()
        back = con.execute("SELECT * FROM every_type").fetchall()
        assert [tuple(map(bits, r)) for r in back[:-1]] == [tuple(bits(r.get(n)) for n in names) for r in rows[:-1]]
        assert math.isnan(back[-1][1]) and back[-1][:1] + back[-1][2:] == (None,) * (len(names) - 1)
    prepared = con.execute("SELECT name FROM duckdb_prepared_statements()").fetchall()
    assert prepared == [("workbench_insert_every_type",)]  # prepared once, run twice


def test_a_kept_writer_prepares_each_insert_once(tmp_path):
    """`collect`'s writer keeps the file attached (`TraceWriter.kept`): its inserts are prepared once on the kept
    connection and run with each write's rows; a writer that opens the file per write sends them inline."""
    from workbench.trace import writer as W

    w = TraceWriter(tmp_path / "t.duckdb")
    with w.kept(idle_s=60, hold_s=60) as keeper:
        for i in range(3):
            t = _turn(f"q{i}", turn_id=f"t{i}")
            w.log_turn(t, sources_payload(t))
        con = keeper.get()
        prepared = {n for (n,) in con.execute("SELECT name FROM duckdb_prepared_statements()").fetchall()}
        assert {"workbench_insert_turns", "workbench_insert_sources", "workbench_merge_runs"} <= prepared
        assert keeper.attaches == 1 and W._PREPARED[con] == prepared
    assert q(tmp_path / "t.duckdb", "SELECT count(*) FROM turns") == [(3,)]
