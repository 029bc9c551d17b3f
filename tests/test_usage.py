"""Usage accounting (`doc_usage`, `doc_usage_totals`, `workbench usage`) agrees with the payloads of the turns asked."""

from __future__ import annotations

import csv
import io
import json
from collections import Counter

import duckdb
import pytest

from workbench.batch import run_eval
from workbench.cli import main
from workbench.session import Session
from workbench.trace import usage

ASKED = [("How do I configure SSO?", "agent", ()), ("How do I configure SSO?", "excerpts", ()),
         ("How do I rotate an API key?", "agent", ()), ("How do I configure SSO?", "agent", ("corrupt_id",)),
         ("What is the capital of Mongolia?", "agent", ()), ("How do I export my workspace?", "excerpts", ())]
EVAL = ["How do I cancel my subscription?", "How do I configure SSO?", "How do I set up webhooks?"]


@pytest.fixture(scope="module")
def asked(tmp_path_factory):
    db = tmp_path_factory.mktemp("usage") / "t.duckdb"
    s = Session.open(trace_db=db)
    interactive = [s.ask(q, mode=m, faults=f).payload for q, m, f in ASKED]
    batch = run_eval(s, EVAL, progress=False)
    return db, interactive, batch


def expected(payloads) -> dict[str, dict]:
    """Per document, straight from the payloads: turns that retrieved, cited and consulted it."""
    out: dict[str, dict] = {}
    for p in payloads:
        titles = {d["doc_id"]: d for d in p["documents"]}
        for name in ("retrieved", "cited", "consulted"):
            for doc_id in set(p["sets"][name]):
                row = out.setdefault(doc_id, {"title": titles[doc_id]["title"], "kind": titles[doc_id].get("kind"),
                                              "retrieved": 0, "cited": 0, "consulted": 0})
                row[name] += 1
    return out


def as_dicts(result) -> list[dict]:
    columns, rows = result
    return [dict(zip(columns, r)) for r in rows]


def test_doc_usage_view_agrees_with_the_payloads(asked):
    db, interactive, batch = asked
    want = expected(interactive + batch.payloads)
    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute("SELECT doc_id, title, kind, retrieved_turns, cited_turns, consulted_turns FROM doc_usage").fetchall()
    got = {d: {"title": t, "kind": k, "retrieved": r, "cited": c, "consulted": n} for d, t, k, r, c, n in rows}
    assert got == want
    assert sum(w["consulted"] for w in want.values()) > 0 and any(w["consulted"] < w["retrieved"] for w in want.values())
    order = [(r[5], r[4], r[3]) for r in rows]
    assert order == sorted(order, reverse=True), "most consulted first"


def test_first_and_last_use_are_the_turns_that_retrieved_it(asked):
    db, interactive, batch = asked
    with duckdb.connect(str(db), read_only=True) as con:
        starts = dict(con.execute("SELECT turn_id, started_at FROM turns").fetchall())
        run_of = dict(con.execute("SELECT turn_id, run_id FROM turns").fetchall())
        rows = con.execute("SELECT doc_id, first_used, last_used, last_consulted, runs FROM doc_usage").fetchall()
    for doc_id, first, last, last_consulted, runs in rows:
        used = [starts[p["turn_id"]] for p in interactive + batch.payloads if doc_id in p["sets"]["retrieved"]]
        read = [starts[p["turn_id"]] for p in interactive + batch.payloads if doc_id in p["sets"]["consulted"]]
        assert (first, last) == (min(used), max(used))
        assert last_consulted == (max(read) if read else None)
        assert runs == len({run_of[p["turn_id"]] for p in interactive + batch.payloads
                            if doc_id in p["sets"]["retrieved"]})


def test_cli_usage_csv_and_run_filter_agree_with_the_payloads(asked, capsys):
    db, interactive, batch = asked
    assert main(["usage", "--db", str(db), "--csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    want = expected(interactive + batch.payloads)
    assert {r["doc_id"]: (int(r["retrieved_turns"]), int(r["cited_turns"]), int(r["consulted_turns"])) for r in rows} == {
        d: (w["retrieved"], w["cited"], w["consulted"]) for d, w in want.items()}

    assert main(["usage", "--db", str(db), "--run", batch.run_id, "--json"]) == 0
    only_batch = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert {r["doc_id"]: r["consulted_turns"] for r in only_batch} == {
        d: w["consulted"] for d, w in expected(batch.payloads).items()}
    assert main(["usage", "--db", str(db), "--run", "no-such-run"]) == 2
    assert "no run 'no-such-run'" in capsys.readouterr().err


def test_totals_per_kind_and_per_corpus_category_add_up(asked, demo):
    db, interactive, batch = asked
    want = expected(interactive + batch.payloads)
    per_kind = as_dicts(usage.usage_totals(db))
    assert sum(t["consulted"] for t in per_kind) == sum(w["consulted"] for w in want.values())
    assert sum(t["documents"] for t in per_kind) == len(want)
    assert {t["category"] for t in per_kind} <= {"source", "generated: category overview"}

    corpus = demo
    per_category = as_dicts(usage.usage_totals(db, None, corpus))
    category = {d.doc_id: d.category for d in corpus.documents}
    for t in per_category:
        docs = [d for d in want if category[d] == t["category"]]
        assert t["documents"] == Counter(category.values())[t["category"]]
        assert t["documents_retrieved"] == len(docs)
        assert (t["retrieved"], t["cited"], t["consulted"]) == tuple(
            sum(want[d][k] for d in docs) for k in ("retrieved", "cited", "consulted"))
        assert t["documents_consulted"] == sum(want[d]["consulted"] > 0 for d in docs)


def test_never_retrieved_and_retrieved_but_never_consulted(asked, capsys, demo):
    db, interactive, batch = asked
    want = expected(interactive + batch.payloads)
    corpus = demo
    never = [r[0] for r in usage.never_retrieved(db, corpus)[1]]
    assert never == [d.doc_id for d in corpus.documents if d.doc_id not in want] and never
    noisy = as_dicts(usage.retrieved_not_consulted(db, min_turns=2))
    assert [r["doc_id"] for r in noisy] == sorted(
        (d for d, w in want.items() if w["consulted"] == 0 and w["retrieved"] >= 2),
        key=lambda d: (-want[d]["retrieved"], d))
    assert main(["usage", "--db", str(db), "--never-retrieved", "--csv"]) == 0
    assert [r["doc_id"] for r in csv.DictReader(io.StringIO(capsys.readouterr().out))] == never
    assert main(["usage", "--db", str(db), "--totals"]) == 0
    assert "documents_consulted" in capsys.readouterr().out


def test_doc_usage_for_chosen_runs_in_sql(asked):
    db, interactive, batch = asked
    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute("SELECT doc_id, consulted_turns FROM doc_usage_for(run_ids := ?)", [[batch.run_id]]).fetchall()
        totals = con.execute("SELECT sum(consulted) FROM doc_usage_totals_for(run_ids := ?)", [[batch.run_id]]).fetchone()
    assert dict(rows) == {d: w["consulted"] for d, w in expected(batch.payloads).items()}
    assert totals == (sum(w["consulted"] for w in expected(batch.payloads).values()),)
