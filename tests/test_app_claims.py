"""The Claims expander under AppTest: the lexical judge's verdicts read as word overlap, never as "supported",
and the `llm` judge is offered (and stored) when the turn's provider is a real, configured model."""

from __future__ import annotations

import json

import duckdb
import pytest
import scripted
from apptest import ask, unescape
from streamlit.testing.v1 import AppTest

from conftest import ROOT
from workbench.providers.base import _PROVIDERS, ModelStep, register_provider

SSO = "How do I configure SSO?"
#: The wording the issue asks for, written out here (not read from the code under test).
OVERLAP = {"supported": "word overlap: high", "partial": "word overlap: some", "unsupported": "word overlap: low",
           "uncited": "uncited"}


class JudgingModel(scripted.OnlyFrom):
    """A real provider as far as the app can tell (calls that cost, configured): it answers as `OnlyFrom`, and
    asked without tools — as the `llm` judge asks — replies with a JSON verdict, `partial` for every claim."""

    name = "test-judging-model"
    label = "judging model (test)"
    judged: list[str] = []

    def complete(self, messages, tools):
        if tools:
            return super().complete(messages, tools)
        JudgingModel.judged.append(messages[-1]["content"])
        return ModelStep('{"verdict": "partial", "score": 0.5, "span": null}', (), self.call())


@pytest.fixture
def judging_model():
    register_provider(JudgingModel.name, JudgingModel)
    JudgingModel.judged = []
    yield JudgingModel
    _PROVIDERS.unregister(JudgingModel.name)


def claims_frames(at: AppTest):
    return [d.value for d in at.dataframe if "claim" in d.value.columns]


def stored_claims(db) -> list[tuple]:
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute("SELECT judge, claim_idx, verdict FROM claims ORDER BY judge, claim_idx").fetchall()


def test_lexical_verdicts_read_as_word_overlap_not_support(tmp_path, monkeypatch):
    db = tmp_path / "traces.duckdb"
    monkeypatch.setenv("WORKBENCH_DB", str(db))
    at = ask(AppTest.from_file(str(ROOT / "app.py"), default_timeout=60).run(), SSO)
    (table,) = claims_frames(at)
    stored = [v for j, _, v in stored_claims(db) if j == "lexical"]
    assert stored and len(stored) == len(table)
    assert list(table["verdict"]) == [OVERLAP[v] for v in stored]
    assert "supported" in stored, "the judge said supported: the page must not"
    assert not any("supported" in str(v) for v in table["verdict"])
    assert "word overlap score" in table.columns
    captions = [unescape(c.value) for c in at.caption]
    assert any("word overlap, not support" in c for c in captions)
    assert any(c.startswith("The lexical judge counts the words") for c in captions)
    assert not [b for b in at.button if b.label.startswith("Judge with the LLM")], \
        "offline is no model: no LLM judge on offer"


def test_the_llm_judge_is_offered_for_a_real_provider_and_stored(tmp_path, monkeypatch, judging_model):
    db = tmp_path / "traces.duckdb"
    monkeypatch.setenv("WORKBENCH_DB", str(db))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.session_state["cfg_provider"] = judging_model.name
    at = ask(at.run(), SSO)
    assert at.session_state["cfg_provider"] == judging_model.name
    (lexical,) = claims_frames(at)
    (button,) = [b for b in at.button if b.label.startswith("Judge with the LLM")]
    assert "judging model (test)" in button.label
    assert not judging_model.judged, "nothing is judged by the model until asked"

    button.click().run()
    assert not at.exception, at.exception
    frames = claims_frames(at)
    assert len(frames) == 2
    llm = frames[1]
    assert list(llm["claim"]) == list(lexical["claim"])
    assert list(llm["LLM verdict"]) == ["partial"] * len(lexical), "the model's own verdict, as it said it"
    # every claim went to the model (more calls than claims: each citation alone and the uncited texts too)
    assert all(any(f"Claim:\n{c}" in m for m in judging_model.judged) for c in lexical["claim"])
    stored = stored_claims(db)
    assert [(i, v) for j, i, v in stored if j == "llm"] == [(i, "partial") for i in range(len(lexical))]
    assert len([s for s in stored if s[0] == "lexical"]) == len(lexical), "the lexical rows are kept"
    assert json.dumps(list(llm["claim"]))  # plain cells, not markdown


def test_a_turn_shows_its_answers_own_claims_however_it_was_built():
    """`ui.records.Turn` keeps no copy of the answer's faithfulness: a turn built around an answer (a reopened or
    verified turn, not only one `run` produced) shows exactly the answer's verdicts, and none without one."""
    from workbench.faithfulness import assess_turn
    from workbench.provenance import sources_payload
    from workbench.session import Answer
    from workbench.types import ResultItem, ToolCall, TurnRecord
    from workbench.ui.records import RunConfig, Turn

    record = TurnRecord("q", "Use Settings [S](sso).", tool_calls=(ToolCall("fetch_document", "full", {},
                                                                             (ResultItem("sso", "SSO"),)),))
    payload = sources_payload(record)
    faith = assess_turn(record, payload, None)
    turn = Turn("q", RunConfig(), answer=Answer(record, payload.to_json(), faith))
    assert turn.faithfulness is faith and turn.faithfulness.claims
    assert Turn("q", RunConfig()).faithfulness is None
