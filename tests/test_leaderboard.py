"""Leaderboards that show what differs between runs, a paired per-question comparison with an exact McNemar test,
retrieval figures (recall@k, MRR) and the typed results behind them (issue 34 items 5 and 7, issue 32 item 4).

Every expectation is computed here from something other than the scoring under test: the retriever and the corpus
directly for retrieval orders, the raw trace tables for pass/fail (`test_experiments._independent`), and a binomial
written out term by term for the p-value."""

from __future__ import annotations

import dataclasses
import io
import json
from contextlib import redirect_stdout
from fractions import Fraction

import pytest
from streamlit.testing.v1 import AppTest

from apptest import unescape
from conftest import ROOT
from dbcopy import copy_db
from test_experiments import LINES as GATE_LINES
from test_experiments import _independent
from workbench.cli import main


@pytest.fixture(autouse=True)
def _whole_tables(monkeypatch):
    """These tests read whole tables, as a script reading a pipe does: no `COLUMNS` (pytest-xdist's workers set it
    to 80) asks the tables to be fitted to a terminal (commands/_table.py, `terminal_width`)."""
    monkeypatch.delenv("COLUMNS", raising=False)


def _write(path, lines):
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def _cli(capsys, *argv):
    code = main([str(a) for a in argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def _page() -> AppTest:
    return AppTest.from_file(str(ROOT / "pages" / "5_Experiments.py"), default_timeout=60)


# --- B: recall@k and MRR, by hand ----------------------------------------------------------------------------------

SSO, BILLING, PASSWORD, TRASH = (
    "How do I configure SSO?",
    "How do I stop our paid subscription from renewing at the end of the month?",
    "How do I reset my password?",
    "How long do deleted items stay in the trash, and how long are backups kept?")
RETRIEVAL_LINES = [
    {"question": SSO, "expected": ["sso-okta"]},
    {"question": BILLING, "expected": ["billing-cancel-subscription"]},
    {"question": PASSWORD, "expected": ["password-reset", "audit-log"]},
    {"question": TRASH, "expected": ["workspace-export"]},
    {"question": "What articles do you have?", "expect_no_sources": True},  # no `expected`: neither figure
]
#: What bm25 ranks for each question over the demo corpus, checked against the retriever in the test: the search
#: tool's documents (best chunk per document; the offline agent always asks for 5) and excerpt mode's top-3 chunks.
SEARCH_TOP5 = {
    SSO: ["sso-saml-setup", "sso-azure-ad", "sso-okta", "overview-sso-and-provisioning", "scim-provisioning"],
    BILLING: ["overview-billing", "billing-cancel-subscription", "billing-refunds", "billing-change-plan",
              "billing-plans"],
    PASSWORD: ["password-reset", "password-requirements", "overview-account-security", "sign-in-problems",
               "2fa-recovery-codes"],
    TRASH: ["data-retention", "delete-account", "sync-issues", "delete-workspace", "billing-cancel-subscription"],
}
CHUNKS_TOP3 = {
    SSO: ["sso-saml-setup", "sso-saml-setup", "sso-azure-ad"],
    BILLING: ["overview-billing", "billing-cancel-subscription", "billing-refunds"],
    PASSWORD: ["password-reset", "password-requirements", "overview-account-security"],
    TRASH: ["data-retention", "delete-account", "data-retention"],
}


@pytest.fixture(scope="module")
def retrieval_db(tmp_path_factory):
    """Two runs of RETRIEVAL_LINES: the agent at k 2 with `link_listed` (search, open, then list every article: a
    turn of three tool calls whose retrieved set is the search's documents, then the listing's), and excerpt mode
    at k 3."""
    tmp = tmp_path_factory.mktemp("retrieval")
    db, questions = tmp / "t.duckdb", _write(tmp / "retrieval.jsonl", RETRIEVAL_LINES)
    said = {}
    for name, extra in (("agent-k2", ["-k", "2", "--fault", "link_listed"]), ("excerpts-k3", ["-k", "3", "--mode",
                                                                                                  "excerpts"])):
        out = io.StringIO()
        with redirect_stdout(out):
            assert main(["eval", str(questions), "--db", str(db), "--name", name, "--no-progress", *extra]) == 0
        said[name] = out.getvalue()
    return db, said


def test_the_retrieval_orders_used_below_are_the_retrievers():
    from workbench.config import DEMO_CORPUS
    from workbench.corpus import load_corpus
    from workbench.retrieval.base import get_retriever, rank_documents

    bm25 = get_retriever("bm25", load_corpus(DEMO_CORPUS))
    for question, docs in SEARCH_TOP5.items():
        assert [d for d, _ in rank_documents(bm25, question, 5)] == docs, question
    for question, chunks in CHUNKS_TOP3.items():
        assert [h.chunk.doc_id for h in bm25.retrieve(question, 3).hits] == chunks, question


def _listing_rank(doc_id: str, question: str, k: int = 2) -> int:
    """Where `doc_id` is first retrieved in the agent's link_listed turn: after the search's `k` documents (the
    run's k is the search's), the listing of every article in corpus order (its documents not already seen)."""
    from workbench.config import DEMO_CORPUS
    from workbench.corpus import load_corpus

    seen = list(SEARCH_TOP5[question][:k])
    seen += [d.doc_id for d in load_corpus(DEMO_CORPUS).documents if d.doc_id not in seen]
    return seen.index(doc_id) + 1


def test_recall_at_k_and_mrr_follow_the_retrieval_order_and_the_runs_k(retrieval_db, capsys):
    db, said = retrieval_db
    okta, export = _listing_rank("sso-okta", SSO), _listing_rank("workspace-export", TRASH)
    assert okta > 2 and export > 2  # both come from the listing, the turn's third tool call
    # agent, k 2: the search returns two documents, which count for recall@k; the rank is over the whole turn
    agent = {SSO: (0, Fraction(1, okta)), BILLING: (1, Fraction(1, 2)), PASSWORD: (Fraction(1, 2), 1),
             TRASH: (0, Fraction(1, export))}
    # excerpts, k 3: the distinct documents of the top three chunks, in order
    excerpts = {SSO: (0, 0), BILLING: (1, Fraction(1, 2)), PASSWORD: (Fraction(1, 2), 1), TRASH: (0, 0)}
    code, out, _ = _cli(capsys, "runs", "compare", "agent-k2", "excerpts-k3", "--db", db, "--json")
    assert code == 0
    runs = {r["name"]: r for r in json.loads(out)["runs"]}
    for name, truth in (("agent-k2", agent), ("excerpts-k3", excerpts)):
        recall = sum(Fraction(r) for r, _ in truth.values()) / len(truth)
        mrr = sum(Fraction(rr) for _, rr in truth.values()) / len(truth)
        assert runs[name]["recall_at_k"] == pytest.approx(float(recall)), name
        assert runs[name]["mrr"] == pytest.approx(float(mrr)), name
        lo, hi = runs[name]["ci"]["mrr"]
        assert lo <= runs[name]["mrr"] <= hi
        # eval's closing line says them too, with their intervals
        assert f"recall@k {float(recall):.3f} [" in said[name] and f"MRR {float(mrr):.3f} [" in said[name]
        # and per line (`runs show --json`): the listing line has no `expected`, so neither figure
        shown = json.loads(_cli(capsys, "runs", "show", name, "--db", db, "--json")[1])
        per_line = {q["question"]: (q["recall_at_k"], q["reciprocal_rank"]) for q in shown["question_rows"]}
        assert per_line.pop("What articles do you have?") == (None, None)
        assert per_line == {q: pytest.approx((float(r), float(rr))) for q, (r, rr) in truth.items()}, name
    # beside consulted precision and recall in the text leaderboard
    code, text, _ = _cli(capsys, "runs", "compare", "agent-k2", "excerpts-k3", "--db", db)
    header = text.splitlines()[0].split()
    assert header.index("consulted_recall") < header.index("recall_at_k") < header.index("mrr")


def test_the_apps_leaderboard_shows_recall_at_k_and_mrr(retrieval_db, monkeypatch):
    db, _ = retrieval_db
    from workbench.trace.scoring import compare

    monkeypatch.setenv("WORKBENCH_DB", str(db))
    at = _page().run()
    assert not at.exception, at.exception
    board = at.dataframe[0].value
    expected = compare(db, list(board["run"]))
    assert list(board.columns).index("consulted recall") < list(board.columns).index("recall@k")
    assert list(board["MRR"]) == [round(r.value("mrr"), 3) for r in expected.runs]
    assert list(board["recall@k"]) == [round(r.value("recall_at_k"), 3) for r in expected.runs]
    assert all(c.startswith("[") for c in board["MRR 95% CI"])


# --- A: what differs between runs ----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def three_runs_once(tmp_path_factory):
    """clean (tag team=a), faulty (corrupt_id, k 3, tag team=a) and other (tag team=b) of one questions file."""
    tmp = tmp_path_factory.mktemp("three-runs")
    db, questions = tmp / "t.duckdb", _write(tmp / "sso_billing.jsonl", GATE_LINES)
    for name, extra in (("clean", ["--tag", "team=a"]), ("faulty", ["--fault", "corrupt_id", "-k", "3", "--tag",
                                                                     "team=a", "--tag", "ticket=PW-7"]),
                        ("other", ["--tag", "team=b"])):
        with redirect_stdout(io.StringIO()):
            assert main(["eval", str(questions), "--db", str(db), "--name", name, "--no-progress", *extra]) == 0
    return db, questions


@pytest.fixture
def three_runs(three_runs_once, tmp_path):
    """`three_runs_once`'s database, copied for the test (a page or a command may write to it)."""
    db, questions = three_runs_once
    return copy_db(db, tmp_path / "t.duckdb"), questions


def test_runs_compare_makes_each_differing_setting_a_column_and_names_the_shared_ones(three_runs, capsys):
    db, _ = three_runs
    code, out, _ = _cli(capsys, "runs", "compare", "clean", "faulty", "--db", db, "--json")
    assert code == 0
    result = json.loads(out)
    clean, faulty = result["runs"]
    assert set(clean["differs"]) == set(faulty["differs"]) == {"k", "options.faults", "tags.ticket"}
    assert (clean["differs"]["options.faults"], faulty["differs"]["options.faults"]) == (None, ["corrupt_id"])
    assert (clean["differs"]["k"], faulty["differs"]["k"]) == (5, 3)
    assert faulty["differs"]["tags.ticket"] == "PW-7" and clean["differs"]["tags.ticket"] is None
    shared = result["shared"]
    assert shared["retriever"] == "bm25" and shared["provider"] == "offline" and shared["tags.team"] == "a"
    assert not set(shared) & set(clean["differs"])
    # the keys a run's entry had before stay
    assert {"name", "run_id", "provider", "model", "retriever", "mode", "k", "corpus", "dataset", "tags", "questions",
            "pass_rate", "consulted_precision", "consulted_recall", "rejected", "ci"} <= set(clean)

    code, text, _ = _cli(capsys, "runs", "compare", "clean", "faulty", "--db", db)
    header, _, row_clean, row_faulty = text.splitlines()[:4]
    assert header.split()[:4] == ["run", "k", "options.faults", "tags.ticket"] and "retriever" not in header
    assert row_clean.split()[:4] == ["clean", "5", "-", "-"]
    assert row_faulty.split()[:4] == ["faulty", "3", "corrupt_id", "PW-7"]
    same = next(line for line in text.splitlines() if line.startswith("same in every run: "))
    assert "provider offline" in same and "retriever bm25" in same and "tags.team a" in same


def test_runs_compare_and_list_take_a_tag(three_runs, capsys):
    db, _ = three_runs
    code, out, _ = _cli(capsys, "runs", "compare", "--tag", "team=a", "--db", db, "--json")
    assert code == 0 and [r["name"] for r in json.loads(out)["runs"]] == ["clean", "faulty"]  # oldest first
    code, out, _ = _cli(capsys, "runs", "compare", "other", "--tag", "ticket=PW-7", "--db", db, "--json")
    assert code == 0 and [r["name"] for r in json.loads(out)["runs"]] == ["other", "faulty"]
    code, out, _ = _cli(capsys, "runs", "list", "--tag", "team=b", "--db", db, "--json")
    assert [json.loads(line)["name"] for line in out.splitlines()] == ["other"]
    code, _, err = _cli(capsys, "runs", "compare", "--tag", "team=zzz", "--db", db)
    assert code == 2 and "no run has the tags team=zzz" in err
    code, _, err = _cli(capsys, "runs", "compare", "--tag", "team=b", "--db", db)
    assert code == 2 and "at least two runs" in err
    code, _, err = _cli(capsys, "runs", "compare", "clean", "--tag", "team", "--db", db)
    assert code == 2 and "KEY=VALUE" in err


def _clean_and_faulty(db, monkeypatch) -> AppTest:
    """The Experiments page over `db` with the runs clean and faulty picked."""
    monkeypatch.setenv("WORKBENCH_DB", str(db))
    at = _page()
    at.session_state["exp_runs"] = ["clean", "faulty"]
    at.run()
    assert not at.exception, at.exception
    return at


def test_the_page_shows_differing_settings_as_columns_and_filters_by_tag(three_runs, monkeypatch):
    at = _clean_and_faulty(three_runs[0], monkeypatch)
    board = at.dataframe[0].value
    assert list(board.columns[:4]) == ["run", "k", "options.faults", "tags.ticket"]
    assert list(board["options.faults"]) == ["-", "corrupt_id"] and "retriever" not in board.columns
    caption = next(unescape(c.value) for c in at.caption if unescape(c.value).startswith("Same in every run: "))
    assert "retriever bm25" in caption and "tags.team a" in caption

    tags = at.multiselect(key="exp_tags")
    assert tags.options == ["team=a", "team=b", "ticket=PW-7"]
    tags.set_value(["team=b"]).run()
    assert not at.exception, at.exception
    assert [o.split(" · ")[0] for o in at.multiselect(key="exp_runs").options] == ["other"]
    assert at.multiselect(key="exp_runs").value == []  # the picked runs without the tag are dropped
    tags.set_value(["team=a", "ticket=PW-7"]).run()
    assert [o.split(" · ")[0] for o in at.multiselect(key="exp_runs").options] == ["faulty"]


def test_a_faulty_run_is_its_own_configuration_in_the_set_sizes(three_runs, monkeypatch):
    """The Trace explorer's "Set sizes by configuration" and notebook 02's set-size chart group by the provider
    options too: an eval with `--fault corrupt_id` is never merged into the clean run's turns."""
    from workbench import analysis as A
    from workbench.trace.experiments import list_runs

    db, _ = three_runs
    runs = {r["name"]: r["run_id"] for r in list_runs(db)}
    sizes = A.set_sizes(db, [runs["clean"], runs["other"], runs["faulty"]])
    fig = A.set_sizes_figure(sizes)
    # clean and other share every setting: one configuration; faulty differs in k and options
    assert len(fig.data[0].x) == 2
    assert any("corrupt_id" in x for x in fig.data[0].x) and "bm25" in fig.layout.title.text

    monkeypatch.setenv("WORKBENCH_DB", str(db))
    at = AppTest.from_file(str(ROOT / "pages" / "2_Trace_explorer.py"), default_timeout=60)
    at.run()  # "Set sizes by configuration", the first canned query
    assert not at.exception, at.exception
    df = at.dataframe[0].value
    assert sorted(zip(df["k"], df["options"], df["turns"])) == [
        (3, '{"faults":["corrupt_id"]}', len(GATE_LINES)), (5, "{}", 2 * len(GATE_LINES))], df


def test_an_unnamed_faulty_run_reads_apart_from_the_clean_one(tmp_path, capsys):
    from workbench.trace.experiments import list_runs, run_label

    db, questions = tmp_path / "t.duckdb", _write(tmp_path / "q.jsonl", GATE_LINES[:2])
    for extra in ([], ["--fault", "corrupt_id"]):
        assert _cli(capsys, "eval", questions, "--db", db, "--no-progress", *extra)[0] == 0
    faulty, clean = (run_label(r) for r in list_runs(db))  # newest first
    assert 'options {"faults":["corrupt_id"]}' in faulty and "options" not in clean
    assert faulty.startswith("offline · bm25 · agent · options")


# --- A: the paired comparison --------------------------------------------------------------------------------------

def _binomial_two_sided(b: int, c: int) -> Fraction:
    """P(X <= min(b, c)) + P(X >= max(b, c)) for X ~ Binomial(b + c, 1/2), term by term (capped at 1)."""
    n = b + c
    pmf = [Fraction(1, 2 ** n)]
    for i in range(n):
        pmf.append(pmf[-1] * (n - i) / (i + 1))
    lo, hi = min(b, c), max(b, c)
    tail = sum(pmf[: lo + 1]) + sum(pmf[hi:]) if lo != hi else Fraction(1)
    return min(Fraction(1), tail)


@pytest.mark.parametrize("b, c, p", [(0, 0, 1.0), (0, 6, 0.03125), (9, 1, 0.021484375), (3, 3, 1.0),
                                     (2, 5, 0.453125)])
def test_the_exact_mcnemar_p_value(b, c, p):
    from workbench.trace.results import mcnemar_exact

    assert mcnemar_exact(b, c) == pytest.approx(p) == float(_binomial_two_sided(b, c))


def test_runs_compare_pairs_the_runs_question_by_question(three_runs, capsys):
    db, _ = three_runs
    runs = {r["name"]: r["run_id"] for r in
            (json.loads(line) for line in _cli(capsys, "runs", "list", "--db", db, "--json")[1].splitlines())}
    clean = {t["question"]: t["passed"] for t in _independent(db, runs["clean"], GATE_LINES)}
    faulty = {t["question"]: t["passed"] for t in _independent(db, runs["faulty"], GATE_LINES)}
    worse = [q for q in clean if clean[q] and not faulty[q]]
    better = [q for q in clean if not clean[q] and faulty[q]]
    assert worse and len(worse) != len(better)  # lopsided: a swap of the two shows
    p = float(_binomial_two_sided(len(worse), len(better)))

    code, out, _ = _cli(capsys, "runs", "compare", "clean", "faulty", "--db", db, "--json")
    (paired,) = json.loads(out)["paired"]
    assert (paired["a"], paired["b"]) == ("clean", "faulty")
    assert [x["question"] for x in paired["pass_to_fail"]] == worse
    assert [x["question"] for x in paired["fail_to_pass"]] == better
    assert paired["both_passed"] == sum(clean[q] and faulty[q] for q in clean)
    assert paired["both_failed"] == sum(not clean[q] and not faulty[q] for q in clean)
    assert paired["p_value"] == pytest.approx(p)

    code, text, _ = _cli(capsys, "runs", "compare", "clean", "faulty", "--db", db)
    assert (f"paired, clean → faulty: both passed {paired['both_passed']}, both failed {paired['both_failed']}, "
            f"pass → fail {len(worse)}, fail → pass {len(better)}; exact McNemar p = {p:.3g}") in text
    assert all(f"  pass → fail: {q}" in text for q in worse)


def test_the_page_shows_the_paired_comparison(three_runs, monkeypatch):
    from workbench.trace.scoring import compare

    db, _ = three_runs
    at = _clean_and_faulty(db, monkeypatch)
    (paired,) = compare(db, ["clean", "faulty"]).paired
    table = at.dataframe[1].value
    assert list(table["runs"]) == ["clean → faulty"]
    assert table["pass → fail"][0] == len(paired.pass_to_fail) and table["fail → pass"][0] == len(paired.fail_to_pass)
    assert float(table["McNemar p (exact)"][0]) == pytest.approx(paired.p_value, rel=1e-2)
    flips = at.dataframe[2].value
    assert list(flips["question"]) == [x.text() for x in paired.pass_to_fail + paired.fail_to_pass]
    assert list(flips["flip"]).count("pass → fail") == len(paired.pass_to_fail)


# --- C: typed results ------------------------------------------------------------------------------------------------

def test_results_are_frozen_records_and_each_figure_is_listed_once(three_runs):
    from workbench.trace import results
    from workbench.trace.scoring import compare, regressions

    db, _ = three_runs
    result = compare(db, ["clean", "faulty"])
    gate = regressions(db, "faulty", "clean")
    for record in (result, result.runs[0], result.runs[0].scores, result.diff[0], result.paired[0], gate,
                   gate.questions[0]):
        assert dataclasses.is_dataclass(record)
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(record, dataclasses.fields(record)[0].name, None)
    # every figure is scored, in the order listed, and the JSON carries each under its name
    assert list(result.runs[0].scores.values) == [f.name for f in results.FIGURES]
    entry = result.to_json()["runs"][0]
    assert all(f.name in entry and f.name in entry["ci"] for f in results.FIGURES)
    assert results.interval_text((0.25, 1.0)) == "[0.250, 1.000]"
    assert results.BY_NAME["pass_rate"].text(0.5, (0.25, 1.0)) == "0.500 [0.250, 1.000]"
    assert results.BY_NAME["pass_rate"].text(None) == "-"
