"""workbench.analysis: the tables and charts the notebooks show, over payloads and a real trace store."""

from __future__ import annotations

import itertools
import json
from dataclasses import replace

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from workbench import analysis as A
from workbench.config import DEMO_CORPUS
from workbench.provenance import sources_payload
from workbench.types import ResultItem, ToolCall, TurnRecord

from conftest import ROOT

URL = "https://help.example.com/articles/"


def _record() -> TurnRecord:
    """search shows snippets of a, b; fetch opens c; a listing shows d; the answer cites a, d and a fabrication."""
    calls = (
        ToolCall("search", "snippet", {"query": "x"}, (ResultItem("a", "A", URL + "a"), ResultItem("b", "B", URL + "b"))),
        ToolCall("fetch_document", "full", {"doc_id": "c"}, (ResultItem("c", "C", URL + "c"),)),
        ToolCall("list_articles", "title", {}, (ResultItem("d", "D", URL + "d"),)),
    )
    answer = f"See [A]({URL}a), [D]({URL}d) and [made up]({URL}cc)."
    return TurnRecord("q?", answer, tool_calls=calls, turn_id="t1")


@pytest.fixture(scope="module")
def payload():
    return sources_payload(_record())


def test_three_sets_follow_the_consulted_rules(payload):
    t = A.three_sets(payload).set_index("doc_id")
    assert list(t.index) == ["a", "b", "c", "d"]
    assert t.loc["a", ["cited", "consulted", "chip shown"]].tolist() == [True, True, True]  # cited snippet
    assert t.loc["b", ["cited", "consulted", "in sources array"]].tolist() == [False, False, False]
    assert t.loc["c", ["cited", "consulted", "chip shown"]].tolist() == [False, True, True]  # opened in full
    assert t.loc["d", ["cited", "consulted", "in sources array", "chip shown"]].tolist() == [True, False, True, False]
    assert t["retrieved"].all()
    html = A.style_three_sets(A.three_sets(payload)).to_html()
    assert "✓" in html and "·" in html and A.SET_COLORS["consulted"] in html


def test_sources_table_shows_chips_unless_consulted_is_false(payload):
    s = A.sources_table(payload).set_index("doc_id")
    assert s.loc["d", "chip shown"] == False and s.loc["a", "chip shown"] == True  # noqa: E712
    old_server = replace(payload, sources=tuple(replace(e, consulted=None) for e in payload.sources))  # no flag sent
    assert A.sources_table(old_server)["chip shown"].all()  # no flag: show everything


def test_rejected_and_tool_call_tables(payload):
    r = A.rejected_table(payload)
    assert r.to_dict("records") == [{"target": URL + "cc", "reason": "not_retrieved", "nearest_doc_id": "c",
                                     "edit_distance": 1}]
    assert A.rejected_table(replace(payload, rejected_citations=())).empty
    tc = A.tool_calls_table(payload)
    assert tc["tool"].tolist() == ["search", "fetch_document", "list_articles"]
    assert tc["n_results"].tolist() == [2, 1, 1] and tc.loc[0, "doc_ids"] == "a, b"


def test_locating_inputs(tmp_path, monkeypatch):
    assert A.question_set(tmp_path).name == "demo"
    assert A.question_set(tmp_path).questions.exists() and A.question_set(tmp_path).corpus.exists()
    (tmp_path / "arduino-help-center").mkdir()
    (tmp_path / "arduino-help-center" / "corpus.jsonl").write_text("{}\n")
    qs = A.question_set(tmp_path)
    assert qs.name == "arduino" and qs.corpus == tmp_path / "arduino-help-center" / "corpus.jsonl"

    monkeypatch.delenv("WORKBENCH_DB", raising=False)
    monkeypatch.setenv("WORKBENCH_HOME", str(tmp_path / "home"))
    assert A.notebook_db("x") == tmp_path / "home" / "notebooks" / "x.duckdb"
    monkeypatch.setenv("WORKBENCH_DB", str(tmp_path / "mine.duckdb"))
    assert A.notebook_db("x") == tmp_path / "mine.duckdb"

    builtins = {"offline", "ollama", "gemini"}
    assert builtins & set(A.configured_providers({})) == {"offline"}
    assert builtins <= set(A.configured_providers({"OLLAMA_HOST": "127.0.0.1:1", "GEMINI_API_KEY": "k"}))


def test_load_questions(tmp_path):
    f = tmp_path / "q.jsonl"
    f.write_text('{"question": "a?", "expected": ["x"]}\n\n{"question": "b?", "kind": "listing", "id": "q2"}\n')
    rows = A.load_questions(f)
    assert rows == [{"question": "a?", "expected": ["x"], "kind": "substantive", "id": None},
                    {"question": "b?", "expected": [], "kind": "listing", "id": "q2"}]
    assert len(A.load_questions(f, 1)) == 1


def test_setup_notebook_renders_without_a_cdn():
    import plotly.io as pio

    assert A.setup_notebook() == "workbench" == pio.renderers.default
    bundle = pio.renderers["workbench"].to_mimebundle({"data": [{"type": "bar", "y": [1]}], "layout": {}})
    assert "application/vnd.plotly.v1+json" in bundle, "Jupyter draws Plotly's own MIME type"
    assert "Plotly.newPlot" in bundle["text/html"] and "require(" not in bundle["text/html"]
    assert "cdn" not in bundle["text/html"].lower()


def test_a_corpus_file_named_corpus_jsonl_is_named_by_its_folder(tmp_path):
    """Issue 41 item 11: notebook 02 labelled the Arduino runs "corpus corpus" (the file is corpus.jsonl)."""
    from workbench.corpus import load_corpus
    from workbench.trace.experiments import run_label

    f = tmp_path / "arduino-help-center" / "corpus.jsonl"
    f.parent.mkdir()
    f.write_text('{"id": "a", "title": "A", "text": "Some text."}\n')
    corpus = load_corpus(f)
    assert corpus.corpus_id == "arduino-help-center"
    assert "corpus arduino-help-center" in run_label({"provider": "offline", "corpus": corpus.corpus_id})
    other = tmp_path / "help.jsonl"
    other.write_text('{"id": "a", "title": "A", "text": "Some text."}\n')
    assert load_corpus(other).corpus_id == "help"


# --- batches in a real trace store ----------------------------------------------------------------


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    db = tmp_path_factory.mktemp("analysis") / "traces.duckdb"
    questions = A.load_questions(ROOT / "data" / "demo_gold.jsonl")
    questions = [q for q in questions if q["kind"] == "substantive"][:5] + \
        [q for q in questions if q["kind"] != "substantive"][:2]
    runs = A.run_question_set(questions, corpus=DEMO_CORPUS, db=db, retrievers=["bm25"])
    return db, questions, runs


def test_run_question_set_is_one_resumable_run_per_configuration(batch):
    db, questions, runs = batch
    assert len(runs) == 1 and runs.loc[0, "asked"] == len(questions) and runs.loc[0, "failed"] == 0
    again = A.run_question_set(questions, corpus=DEMO_CORPUS, db=db, retrievers=["bm25"])
    assert again.loc[0, "run_id"] == runs.loc[0, "run_id"]
    assert (again.loc[0, "asked"], again.loc[0, "skipped"]) == (0, len(questions))
    sizes = A.set_sizes(db, runs["run_id"])
    assert len(sizes) == len(questions) and set(sizes["retriever"]) == {"bm25"}
    assert (sizes["consulted"] <= sizes["retrieved"]).all()
    fig = A.set_sizes_figure(sizes)
    assert [t.name for t in fig.data] == list(A.SETS)
    assert fig.data[0].y[0] == pytest.approx(sizes["retrieved"].mean(), abs=0.01)


def test_scored_rows_match_the_payloads(batch):
    """The library's scoring of a batch (`question_table`, `compare_runs`: the `expectation_results` view)
    recomputed from fresh (untraced, deterministic offline) payloads: the naive and honest rows against gold."""
    from workbench.session import Session

    db, questions, runs = batch
    rows = A.question_table(db, runs["run_id"]).set_index("question")
    assert len(rows) == len(questions)
    session = Session.open(DEMO_CORPUS, "bm25", trace=False)
    for q in questions:
        sets = session.ask(q["question"]).payload.sets
        got = rows.loc[q["question"]]
        assert tuple(got["retrieved"]) == sets.retrieved and tuple(got["consulted"]) == sets.consulted
        for row, docs in (("retrieved", sets.retrieved), ("consulted", sets.consulted)):
            hits = len(set(docs) & set(q["expected"]))
            if not q["expected"]:
                assert pd.isna(got[f"{row}_precision"]) and pd.isna(got[f"{row}_recall"])
                continue
            assert got[f"{row}_recall"] == pytest.approx(hits / len(q["expected"]))
            assert (pd.isna(got[f"{row}_precision"]) and not docs) or \
                got[f"{row}_precision"] == pytest.approx(hits / len(docs))
    board = A.compare_runs(db, runs["run_id"])
    (run,) = board.runs
    assert run.value("consulted_precision") > run.value("retrieved_precision")
    fig = A.rows_figure(board)
    assert [t.name for t in fig.data] == [A.ROW_LABELS["naive"], A.ROW_LABELS["honest"]]
    assert fig.data[1].y[0] == pytest.approx(run.value("consulted_precision"))
    table = A.rows_table(board).set_index("row")
    assert list(table.index) == [A.ROW_LABELS["naive"], A.ROW_LABELS["honest"]]
    assert table.loc[A.ROW_LABELS["honest"], "precision"] == round(run.value("consulted_precision"), 3)


def test_a_verified_batch_adds_the_load_bearing_row_and_its_verdicts(batch):
    """The same questions verified by ablation: a run of its own, a load-bearing row per verified turn (the
    consulted documents whose verdict is load_bearing), and the verdicts counted per configuration."""
    db, questions, runs = batch
    verified = A.run_question_set(questions, corpus=DEMO_CORPUS, db=db, retrievers=["bm25"], verify=True)
    assert verified.loc[0, "run_id"] != runs.loc[0, "run_id"] and verified.loc[0, "asked"] == len(questions)
    rows = A.question_table(db, verified["run_id"])
    assert rows["verified"].all()
    for r in rows.itertuples():
        assert set(r.load_bearing) <= set(r.consulted)
        if r.expected:
            hits = len(set(r.load_bearing) & set(r.expected))
            assert r.load_bearing_recall == pytest.approx(hits / len(r.expected))
            assert (pd.isna(r.load_bearing_precision) and not r.load_bearing) or \
                r.load_bearing_precision == pytest.approx(hits / len(r.load_bearing))
    # the offline agent's "See also" link is consulted but decorative: the load-bearing row is not the consulted one
    assert any(set(r.load_bearing) < set(r.consulted) for r in rows.itertuples() if r.expected)
    unverified = A.question_table(db, runs["run_id"])
    assert unverified["load_bearing_precision"].isna().all() and unverified["load_bearing_recall"].isna().all()
    counts = A.verdict_counts(db, verified["run_id"]).iloc[0]
    assert counts["verified turns"] == counts["stable controls"] == len(questions)
    bearing = rows["load_bearing"].map(len).sum()
    assert counts["load bearing"] >= bearing > 0
    assert counts["load-bearing share"] == pytest.approx(bearing / rows["consulted"].map(len).sum(), abs=1e-3)
    fig = A.rows_figure(A.compare_runs(db, verified["run_id"]))
    assert [t.name for t in fig.data] == [A.ROW_LABELS[r] for r in ("naive", "honest", "load_bearing")]


def test_ask_and_judge_stores_the_claims(tmp_path):
    from workbench.trace import query_df

    db = tmp_path / "f.duckdb"
    run_id, claims, turns = A.ask_and_judge(["How do I configure SSO?", "How do I rotate an API key?"], db=db)
    assert len(turns) == 2 and turns["claims"].sum() == len(claims) > 0
    stored = query_df(f"SELECT c.* FROM claims c JOIN turns t USING (turn_id) WHERE t.run_id = '{run_id}' "
                      "ORDER BY turn_id, claim_idx", db)
    assert len(stored) == len(claims)
    assert sorted(stored["verdict"]) == sorted(claims["verdict"])
    assert query_df(f"SELECT kind FROM runs WHERE run_id = '{run_id}'", db)["kind"].tolist() == ["eval"]
    assert turns["citation_recall"].between(0, 1).all()


# --- judges against labels ------------------------------------------------------------------------


def _brute_auroc(scores, labels):
    pos = [s for s, y in zip(scores, labels) if y]
    neg = [s for s, y in zip(scores, labels) if not y]
    wins = sum(1.0 if p > n else 0.5 if p == n else 0.0 for p, n in itertools.product(pos, neg))
    return wins / (len(pos) * len(neg))


def test_auroc_and_balanced_accuracy_known_values():
    assert A.auroc([0.1, 0.2, 0.8, 0.9], [False, False, True, True]) == 1.0
    assert A.auroc([0.9, 0.8, 0.2, 0.1], [False, False, True, True]) == 0.0
    assert A.auroc([0.5] * 4, [False, True, False, True]) == 0.5
    assert A.auroc([0.1, 0.2], [True, True]) is None
    assert A.balanced_accuracy([True, False, True, True], [True, False, False, True]) == pytest.approx(0.75)
    assert A.balanced_accuracy([True], [True]) is None


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.booleans()), min_size=2, max_size=30))
def test_auroc_equals_pair_counting(pairs):
    scores = [s / 5 for s, _ in pairs]
    labels = [y for _, y in pairs]
    expected = _brute_auroc(scores, labels) if any(labels) and not all(labels) else None
    got = A.auroc(scores, labels)
    assert got == pytest.approx(expected) if expected is not None else got is None


def _expertqa_file(tmp_path):
    lines = [
        {"claim_id": "c1", "claim": "Paris is the capital of France [1].", "cited_markers": [1], "support": "Complete",
         "system": "s", "evidence": [{"marker": 1, "text": "Paris is the capital of France. It is also its largest city."}]},
        {"claim_id": "c2", "claim": "Cats can fly [1].", "cited_markers": [1], "support": "Incomplete",
         "system": "s", "evidence": [{"marker": 1, "text": "Dogs bark at night in the city."}]},
        {"claim_id": "c3", "claim": "No citation here.", "cited_markers": [], "support": "Missing", "system": "s",
         "evidence": []},
        {"claim_id": "c4", "claim": "Cited but no text [2].", "cited_markers": [2], "support": "Complete",
         "system": "s", "evidence": [{"marker": 1, "text": "other marker"}]},
    ]
    f = tmp_path / "claims.jsonl"
    f.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    return f


def test_expertqa_sample_and_judge_comparison(tmp_path):
    f = _expertqa_file(tmp_path)
    sample = A.load_expertqa(f, None)
    assert sample["claim_id"].tolist() == ["c1", "c2"]  # only claims with cited passage text
    assert sample.loc[0, "claim"] == "Paris is the capital of France." and sample["complete"].tolist() == [True, False]
    assert len(A.load_expertqa(f, 1)) == 1 and A.load_expertqa(f, 1, seed=3).equals(A.load_expertqa(f, 1, seed=3))
    assert A.expertqa_status(f, 200).startswith("ExpertQA: a seeded sample of 200")

    scores = A.judge_scores(sample, ["lexical"])
    by_id = scores.set_index("claim_id")
    assert by_id.loc["c1", "score"] > by_id.loc["c2", "score"] and by_id.loc["c1", "verdict"] == "supported"
    summary = A.judge_summary(scores).iloc[0]
    assert summary["AUROC (Complete vs rest)"] == 1.0 and summary["balanced accuracy"] == 1.0
    table = A.calibration(scores, bins=10)
    assert table["n"].sum() == 2 and table["frac_complete"].between(0, 1).all()
    assert len(A.calibration_figure(table).data) == 2  # diagonal + one judge


def test_expertqa_absent_is_a_clear_skip(tmp_path):
    missing = tmp_path / "nope" / "claims.jsonl"
    assert A.expertqa_status(missing).startswith("SKIP: ExpertQA claims not found at")
    sample = A.load_expertqa(missing)
    assert sample.empty and list(sample.columns) == ["claim_id", "claim", "evidence", "support", "complete", "system"]
    scores = A.judge_scores(sample, ["lexical"])
    assert scores.empty and A.judge_summary(scores).empty
    assert len(A.calibration_figure(A.calibration(scores)).data) == 1


def test_set_names_and_colours_live_in_one_place():
    """workbench/render/sources.py defines them; the app and the notebooks import them (nobody keeps a copy)."""
    import re

    from workbench.render import sources
    from workbench.ui import compare, turn

    assert A.SETS is sources.SETS and A.SET_COLORS is sources.SET_COLORS
    assert turn.SETS is sources.SETS and compare.SET_COLORS is sources.SET_COLORS
    colours = "|".join(re.escape(c) for c in [*sources.SET_COLORS.values(), sources.REJECTED_COLOR])
    for path in (ROOT / "workbench").rglob("*.py"):
        if path.relative_to(ROOT).as_posix() != "workbench/render/sources.py":
            assert not re.search(colours, path.read_text(encoding="utf-8")), f"{path} repeats a set colour"


def test_time_chart_of_a_single_bucket_gets_one_tick_and_a_visible_bar():
    """Notebook 03's "Turns per minute" on a store seeded within one minute (issue 25 item 5): plotly alone
    zooms into milliseconds around the one bucket and draws a bar 1 ms wide."""
    import pandas as pd

    from workbench.analysis import over_time_figure

    t = pd.Timestamp("2026-12-01 19:07:00", tz="UTC")
    df = pd.DataFrame({"minute": [t, t], "provider": ["offline", "ollama"], "turns": [9, 3]})
    fig = over_time_figure(df, "minute", "turns", color="provider").to_plotly_json()
    axis = fig["layout"]["xaxis"]
    assert axis["ticktext"] == ["2026-12-01 19:07"] and len(axis["tickvals"]) == 1
    low, high = (pd.Timestamp(v) for v in axis["range"])
    assert high - low == pd.Timedelta(minutes=2)
    assert [b["width"] for b in fig["data"]] == [48_000, 48_000], "each bar 0.8 of a minute wide (ms)"
    days = pd.DataFrame({"day": [t.floor("D"), t.floor("D") + pd.Timedelta(days=1)], "turns": [1, 2]})
    assert "tickvals" not in over_time_figure(days, "day", "turns").to_plotly_json()["layout"]["xaxis"], \
        "several buckets keep plotly's own ticks"
