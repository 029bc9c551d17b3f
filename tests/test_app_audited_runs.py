"""Audited runs and the leaderboard as an analyst reads them (issue 41, item 10): no literal "None" under "scored as",
a pass rate of 0 still drawn, and an app whose every citation was rejected does not read as one that never cites."""

from __future__ import annotations

import json

from streamlit.testing.v1 import AppTest

from clirun import cli
from conftest import ROOT
from test_audit_app import _llm, _request, _span
from workbench.config import DEMO_CORPUS
from workbench.corpus import load_corpus
from workbench.cli import main

SHOWN, CITED = "billing-cancel-subscription", "sso-saml-setup"


def _ingest(tmp_path, monkeypatch):
    """An audited turn whose answer cites a document its model was never shown (rejected): cited 0, rejected 1."""
    corpus = load_corpus(str(DEMO_CORPUS))
    shown, other = corpus.get(SHOWN), corpus.get(CITED)
    snippet = shown.text[200:400]
    spans = [_span(1, 1, "query", "CHAIN", 0, 1200, None, **{"input.value": "How do I cancel our plan?"}),
             _span(1, 2, "retrieve", "RETRIEVER", 50, 150, 1, **{
                 "retrieval.documents.0.document.id": SHOWN, "retrieval.documents.0.document.content": snippet}),
             _llm(1, 3, 200, f"Context:\n{snippet}\n\nQuestion: How do I cancel our plan?",
                  f"See [{other.title}]({other.url}).")]
    f = tmp_path / "spans.jsonl"
    f.write_text(_request(spans) + "\n", encoding="utf-8")
    path = tmp_path / "traces.duckdb"
    r = cli("ingest", str(f), "--db", str(path), "--name", "bot", "--corpus", str(DEMO_CORPUS))
    assert r.returncode == 0, r.stderr
    monkeypatch.setenv("WORKBENCH_DB", str(path))
    return path


def _experiments() -> AppTest:
    return AppTest.from_file(str(ROOT / "pages" / "5_Experiments.py"), default_timeout=60).run()


def test_an_audited_run_whose_citations_were_all_rejected_reads_as_one_that_cites(tmp_path, monkeypatch):
    path = _ingest(tmp_path, monkeypatch)
    at = _experiments()
    assert not at.exception, at.exception
    runs = next(d.value for d in at.dataframe if "scored as" in d.value.columns)
    assert list(runs["scored as"]) == ["not scored (no `--questions`)"], "no literal None"
    assert list(runs["avg cited"]) == [0] and list(runs["rejected citations"]) == [1]
    assert list(runs.columns).index("rejected citations") == list(runs.columns).index("avg cited") + 1, "beside it"
    assert any("every one was rejected" in w.value for w in at.warning), [w.value for w in at.warning]

    from workbench.trace import TraceReader
    from workbench.ui.queries import canned

    columns, rows = TraceReader(path).rows(canned()["Audited assistants"])
    got = dict(zip(columns, rows[0]))
    assert got["avg_cited"] == 0 and got["rejected_citations"] == 1
    assert columns.index("rejected_citations") == columns.index("avg_cited") + 1


def test_a_pass_rate_of_zero_is_drawn(tmp_path, monkeypatch, capsys):
    from workbench.analysis.experiments import leaderboard_figure
    from workbench.trace.scoring import compare

    questions = tmp_path / "q.jsonl"  # every line expects the wrong article: a pass rate of 0
    questions.write_text(json.dumps({"question": "How do I configure SSO?", "expected": ["billing-invoices"]}) + "\n",
                         encoding="utf-8")
    db = tmp_path / "t.duckdb"
    for name in ("zero", "again"):
        assert main(["eval", str(questions), "--name", name, "--db", str(db), "--no-progress"]) == 0
    capsys.readouterr()
    fig = leaderboard_figure(compare(db, ["zero", "again"]))
    bar = next(t for t in fig.data if t.name == "pass rate")
    assert list(bar.y) == [0, 0]
    assert list(bar.text) == ["0.00", "0.00"] and bar.textposition == "outside", "a visible zero marker"
