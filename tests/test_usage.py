"""Usage accounting (`doc_usage`, `doc_usage_totals`, `workbench usage`) agrees with the payloads of the turns asked."""

from __future__ import annotations

import csv
import io
import json
from collections import Counter
from pathlib import Path

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
    """Per document, straight from the payloads: turns that retrieved and consulted it, that cited it after
    reading it (cited and consulted) and that linked it without reading it (cited, not consulted)."""
    out: dict[str, dict] = {}
    for p in payloads:
        titles = {d.doc_id: d for d in p.documents}
        cited, consulted = set(p.sets.cited), set(p.sets.consulted)
        for doc_id in set(p.sets.retrieved):
            row = out.setdefault(doc_id, {"title": titles[doc_id].title, "kind": titles[doc_id].kind,
                                          "retrieved": 0, "consulted": 0, "cited_read": 0, "listed": 0})
            row["retrieved"] += 1
            row["consulted"] += doc_id in consulted
            row["cited_read"] += doc_id in cited and doc_id in consulted
            row["listed"] += doc_id in cited and doc_id not in consulted
    return out


def as_dicts(result) -> list[dict]:
    columns, rows = result
    return [dict(zip(columns, r)) for r in rows]


def test_doc_usage_view_agrees_with_the_payloads(asked):
    db, interactive, batch = asked
    want = expected(interactive + batch.payloads)
    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute("SELECT doc_id, title, kind, retrieved_turns, consulted_turns, cited_read_turns, "
                           "listed_link_turns, corpus_id FROM doc_usage").fetchall()
    got = {d: {"title": t, "kind": k, "retrieved": r, "consulted": n, "cited_read": c, "listed": li}
           for d, t, k, r, n, c, li, _ in rows}
    assert got == want
    assert {r[7] for r in rows} == {"demo"}
    assert sum(w["consulted"] for w in want.values()) > 0 and any(w["consulted"] < w["retrieved"] for w in want.values())
    order = [(r[4], r[5], r[3]) for r in rows]
    assert order == sorted(order, reverse=True), "most consulted first"


def test_first_and_last_use_are_the_turns_that_retrieved_it(asked):
    db, interactive, batch = asked
    with duckdb.connect(str(db), read_only=True) as con:
        starts = dict(con.execute("SELECT turn_id, started_at FROM turns").fetchall())
        run_of = dict(con.execute("SELECT turn_id, run_id FROM turns").fetchall())
        rows = con.execute("SELECT doc_id, first_used, last_used, last_consulted, runs FROM doc_usage").fetchall()
    for doc_id, first, last, last_consulted, runs in rows:
        used = [starts[p.turn_id] for p in interactive + batch.payloads if doc_id in p.sets.retrieved]
        read = [starts[p.turn_id] for p in interactive + batch.payloads if doc_id in p.sets.consulted]
        assert (first, last) == (min(used), max(used))
        assert last_consulted == (max(read) if read else None)
        assert runs == len({run_of[p.turn_id] for p in interactive + batch.payloads
                            if doc_id in p.sets.retrieved})


def test_cli_usage_csv_and_run_filter_agree_with_the_payloads(asked, capsys):
    db, interactive, batch = asked
    assert main(["usage", "--db", str(db), "--csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    want = expected(interactive + batch.payloads)
    assert {r["doc_id"]: (int(r["retrieved_turns"]), int(r["cited_read_turns"]), int(r["consulted_turns"]))
            for r in rows} == {d: (w["retrieved"], w["cited_read"], w["consulted"]) for d, w in want.items()}

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
    assert {(t["corpus_id"], t["kind"], t["artifact_kind"]) for t in per_kind} <= {
        ("demo", "source", None), ("demo", "generated", "category overview")}

    corpus = demo
    per_category = as_dicts(usage.usage_totals(db, None, corpus))
    category = {d.doc_id: d.category for d in corpus.documents}
    for t in per_category:
        docs = [d for d in want if category[d] == t["category"]]
        assert t["documents"] == Counter(category.values())[t["category"]]
        assert t["documents_retrieved"] == len(docs)
        assert (t["retrieved"], t["consulted"], t["cited_read"], t["listed_links"]) == tuple(
            sum(want[d][k] for d in docs) for k in ("retrieved", "consulted", "cited_read", "listed"))
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


def other_corpus(root) -> Path:
    """A second knowledge base, `acme-kb`, that reuses a demo document id (`sso-okta`) for its own article."""
    kb = root / "acme-kb"
    kb.mkdir()
    (kb / "okta.md").write_text("---\nid: sso-okta\ntitle: Acme single sign-on with Okta\ncategory: acme\n---\n"
                                "To set up Okta single sign-on for Acme, open the Acme admin console and add the "
                                "Okta app. Okta single sign-on then signs every Acme user in.\n")
    (kb / "tea.md").write_text("---\nid: tea\ntitle: Brewing tea\ncategory: kitchen\n---\nBoil water, add leaves.\n")
    return kb


def raw_usage(db) -> dict[tuple[str, str], dict]:
    """Per (corpus, document), by the definitions, from the raw `sources`, `turns` and `runs` rows."""
    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute("SELECT r.corpus_id, s.doc_id, s.kind, s.cited, s.consulted FROM sources s "
                           "JOIN turns t USING (turn_id) JOIN runs r USING (run_id)").fetchall()
    out: dict[tuple[str, str], dict] = {}
    for corpus_id, doc_id, kind, cited, consulted in rows:
        row = out.setdefault((corpus_id, doc_id), {"kind": kind or "source", "retrieved": 0, "consulted": 0,
                                                  "cited_read": 0, "listed": 0})
        row["retrieved"] += 1
        row["consulted"] += consulted
        row["cited_read"] += cited and consulted
        row["listed"] += cited and not consulted
    return out


def test_usage_is_counted_per_corpus_and_listed_links_apart_from_citations(tmp_path, demo):
    from workbench.corpus import load_corpus

    db = tmp_path / "t.duckdb"
    on_demo = Session.open(demo, trace_db=db)
    listing = on_demo.ask("What articles do you have?").payload  # links all 59 titles, reads none
    sso = on_demo.ask("How do I configure SSO?").payload
    kb = load_corpus(other_corpus(tmp_path))
    acme = Session.open(kb, trace_db=db).ask("How do I set up Okta single sign-on?").payload
    assert len(listing.sets.cited) == 59 and not listing.sets.consulted
    assert "sso-okta" in acme.sets.consulted

    want = raw_usage(db)
    columns, rows = usage.doc_usage(db)
    got = {(r["corpus_id"], r["doc_id"]): {"kind": r["kind"], "retrieved": r["retrieved_turns"], "consulted": r["consulted_turns"],
                                          "cited_read": r["cited_read_turns"], "listed": r["listed_link_turns"]}
           for r in (dict(zip(columns, row)) for row in rows)}
    assert got == want
    # the same id in two corpora is two documents; acme's article is not counted as the demo one
    assert got[("acme-kb", "sso-okta")]["consulted"] == 1
    assert got[("demo", "sso-okta")]["consulted"] == int("sso-okta" in sso.sets.consulted)
    # a listing's links are not citations: a demo article only the listing named was cited after reading in no turn
    only_listed = set(listing.sets.cited) - set(sso.sets.retrieved)
    assert only_listed and all((got[("demo", d)]["retrieved"], got[("demo", d)]["consulted"],
                                got[("demo", d)]["cited_read"], got[("demo", d)]["listed"]) == (1, 0, 0, 1)
                               for d in only_listed)
    assert sum(g["cited_read"] for g in got.values()) == len(set(sso.sets.cited) & set(sso.sets.consulted)) \
        + len(set(acme.sets.cited) & set(acme.sets.consulted))

    # SQL per corpus; totals per corpus folder of the demo count the demo's turns only: nothing of acme-kb
    with duckdb.connect(str(db), read_only=True) as con:
        acme_rows = con.execute("SELECT doc_id, consulted_turns FROM doc_usage_for(corpus_ids := ['acme-kb'])").fetchall()
        kinds = con.execute("SELECT corpus_id, kind, documents, listed_links FROM doc_usage_totals "
                            "WHERE kind = 'source' ORDER BY corpus_id").fetchall()
    assert dict(acme_rows) == {d: w["consulted"] for (c, d), w in want.items() if c == "acme-kb"}
    sources = {c: [w for (k, _), w in want.items() if k == c and w["kind"] == "source"] for c in ("acme-kb", "demo")}
    assert kinds == [(c, "source", len(ws), sum(w["listed"] for w in ws)) for c, ws in sources.items()]
    totals = as_dicts(usage.usage_totals(db, None, demo))
    assert {t["category"] for t in totals} == {d.category for d in demo.documents}  # no "(not in this corpus)"
    assert sum(t["documents_retrieved"] for t in totals) == sum(1 for (c, _) in want if c == "demo")
    assert sum(t["listed_links"] for t in totals) == sum(w["listed"] for (c, _), w in want.items() if c == "demo")
    assert [r[0] for r in usage.never_retrieved(db, kb)[1]] == [d.doc_id for d in kb.documents
                                                                 if ("acme-kb", d.doc_id) not in want]
