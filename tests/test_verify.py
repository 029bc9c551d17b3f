"""Verification by ablation (docs/design.md §9) with providers whose dependence on the documents is known.

The scripted providers (tests/scripted.py) are registered through `register_provider`, like any plug-in,
and asked through `Session.ask`, the path the CLI and the app take; the offline agent is the real one.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import scripted
from conftest import ROOT, schema_validator
from workbench.errors import VerificationError
from workbench.providers import get_provider
from workbench.session import Session
from workbench.verify import (DEFAULT_BUDGET, HIDDEN_CANDIDATES, METHOD, SIMILARITY_THRESHOLD, VERDICTS,
                              answer_similarity, candidates, pinned_options, plan, unpinned, verify)

GOLD = [json.loads(line)["question"] for line in (ROOT / "data" / "demo_gold.jsonl").read_text().splitlines() if line]


@pytest.fixture(scope="module", autouse=True)
def providers():
    scripted.register()
    yield
    scripted.unregister()


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    return Session.open(trace_db=tmp_path_factory.mktemp("verify") / "traces.duckdb")


@pytest.fixture(scope="module")
def validator():
    return schema_validator("payload.schema.json")


def test_an_answer_only_from_x_makes_x_load_bearing_and_the_other_links_decorative(session, validator):
    answer = session.ask(scripted.QUESTION, provider="scripted-only-from", verify=True)
    v = answer.verification
    assert v.control_stable and v.method == METHOD == "ablation-v1"
    cited = set(answer.payload.sets.cited)
    assert {"sso-okta", "sso-saml-setup", "sso-azure-ad"} <= cited
    assert v.verdicts["sso-okta"] == "load_bearing"
    assert {d: x for d, x in v.verdicts.items() if d != "sso-okta" and d in cited} == \
        {"sso-saml-setup": "decorative", "sso-azure-ad": "decorative"}
    assert {x for d, x in v.verdicts.items() if d not in cited} == {"no_effect"}
    okta = next(a for a in v.ablations if a.doc_id == "sso-okta")
    assert okta.claims_lost == okta.claims_total > 0 and okta.similarity < SIMILARITY_THRESHOLD
    assert "I could not find" in okta.answer  # what it said without the document
    validator.validate(answer.payload.to_json())
    assert answer.payload.verification.verdicts == v.verdicts


def test_text_copied_from_a_document_it_never_cites_is_hidden_influence(session):
    answer = session.ask(scripted.QUESTION, provider="scripted-copier", verify=True)
    v = answer.verification
    assert "sso-okta" not in answer.payload.sets.cited + answer.payload.sets.consulted
    assert v.verdicts["sso-okta"] == "hidden_influence"
    assert v.verdicts["sso-saml-setup"] == "load_bearing"
    assert {x for d, x in v.verdicts.items() if d not in ("sso-okta", "sso-saml-setup")} == {"no_effect"}
    okta = next(a for a in v.ablations if a.doc_id == "sso-okta")
    assert okta.claims_lost == 1 and "hidden influence" in okta.reason


def test_a_non_deterministic_provider_makes_everything_unstable_and_re_runs_nothing_more(session):
    answer = session.ask(scripted.QUESTION, provider="scripted-random", verify=True)
    v = answer.verification
    assert not v.control_stable and v.verdicts and set(v.verdicts.values()) == {"unstable"}
    assert {d for d in v.verdicts} == {c.doc_id for c in candidates(answer.payload)}
    assert v.extra_turns == 1 and v.extra_calls == v.control.extra_calls == 3  # only the control ran
    assert "no document can earn a verdict" in v.control.reason


def test_a_failed_re_run_earns_no_verdict_and_is_listed(session):
    v = session.ask(scripted.QUESTION, provider="scripted-fails", verify=True).verification
    assert v.control_stable and "sso-okta" not in v.verdicts and v.failed == ["sso-okta"]
    failed = next(a for a in v.ablations if a.doc_id == "sso-okta")
    assert failed.status == "provider_error" and "no verdict" in failed.reason and failed.extra_calls == 2  # the third raised


def test_cost_is_recorded_per_re_run_and_in_total(session):
    v = session.ask(scripted.QUESTION, provider="scripted-only-from", verify=True).verification
    assert v.extra_turns == len(v.ablations) == 1 + len(v.verdicts)
    assert v.extra_calls == sum(a.extra_calls for a in v.ablations) == 3 * v.extra_turns  # search, fetch, answer
    payload = v.to_payload()
    assert payload.tokens_in == 10 * v.extra_calls and payload.tokens_out == 5 * v.extra_calls
    assert all(a.latency_ms is not None and a.latency_ms >= 0 for a in v.ablations) and v.latency_ms > 0


def test_the_turn_and_its_re_runs_are_pinned_to_the_reproducible_options(session):
    scripted.Sampler.built.clear()
    answer = session.ask(scripted.QUESTION, provider="scripted-sampler", temperature=0.9, style="terse",
                         verify=True)
    pinned = {"temperature": 0.0, "seed": 0}
    assert answer.verification.sampling == pinned
    assert scripted.Sampler.built == [{**pinned, "style": "terse"}] * 2  # the turn, then every re-run
    assert answer.payload.config.options == {**pinned, "style": "terse"}
    schema = scripted.Sampler.options_schema
    assert pinned_options(schema, {"temperature": 0.9}) == ({"temperature": 0.0, "seed": 0}, pinned)
    assert unpinned(schema, {"temperature": 0.9}) == {"temperature": 0.9, "seed": None}
    assert unpinned(schema, pinned) == {}
    assert pinned_options(get_provider("offline").options_schema, {"faults": ["forget_link"]})[1] == {}


def test_the_offline_agent_see_also_link_is_decorative_and_the_opened_article_load_bearing(session):
    v = session.ask("How do I configure SSO?", verify=True).verification
    assert v.verdicts == {"sso-saml-setup": "load_bearing", "sso-azure-ad": "decorative", "sso-okta": "no_effect",
                          "overview-sso-and-provisioning": "no_effect", "scim-provisioning": "no_effect"}
    assert v.sampling == {} and v.extra_turns == 6 and v.control.similarity == 1.0


def test_excerpt_mode_is_verified_over_rebuilt_excerpts(session, validator):
    answer = session.ask("How do I configure SSO?", mode="excerpts", verify=True)
    v = answer.verification
    cited = answer.payload.sets.cited
    assert cited and v.control_stable and all(v.verdicts[d] in ("load_bearing", "decorative") for d in cited)
    assert any(x == "load_bearing" for x in v.verdicts.values())
    validator.validate(answer.payload.to_json())


def test_budget_covers_the_most_important_candidates_first(session):
    answer = session.ask("How do I configure SSO?")
    found = candidates(answer.payload)
    consulted = answer.payload.sets.consulted
    assert [c.doc_id for c in found[:len(consulted)]] == list(consulted)  # the sources row first
    assert len(found) == len(consulted) + HIDDEN_CANDIDATES
    v = session.verify(answer, budget=3)
    assert [a.doc_id for a in v.verification.ablations] == [None] + [c.doc_id for c in found]
    assert list(v.verification.verdicts) == [c.doc_id for c in found[:2]]
    assert v.verification.skipped == [c.doc_id for c in found[2:]] and v.verification.extra_turns == 3
    assert list(v.payload.verification.skipped) == v.verification.skipped


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(question=st.sampled_from(GOLD + ["What articles do you have?", "Which integrations exist?"]),
       budget=st.integers(1, 9), mode=st.sampled_from(["agent", "excerpts"]),
       faults=st.sets(st.sampled_from(["corrupt_id", "forget_link", "cite_unretrieved"]), max_size=2))
def test_verdicts_only_for_candidates(demo_session, question, budget, mode, faults):
    answer = demo_session.ask(question, mode=mode, faults=sorted(faults), judge=None, log=False)  # 30 turns: untraced
    if answer.record.status != "ok":
        return
    found = [c.doc_id for c in candidates(answer.payload)]
    v = verify(answer.record, demo_session.toolbox, get_provider("offline", faults=sorted(faults)),
               payload=answer.payload, budget=budget)
    assert set(v.verdicts) <= set(found) and set(v.verdicts.values()) <= set(VERDICTS)
    assert [a.doc_id for a in v.ablations[1:]] == found  # every candidate once, in plan order
    to_run, skipped = plan(answer.payload, budget)
    assert v.skipped == [c.doc_id for c in skipped] and not set(v.skipped) & set(v.verdicts)
    assert v.extra_turns == 1 + len(to_run) <= budget
    used = {c.doc_id for c in to_run if c.used}
    assert all(v.verdicts[d] in ("load_bearing", "decorative") for d in used)
    assert all(v.verdicts[c.doc_id] in ("hidden_influence", "no_effect") for c in to_run if not c.used)
    schema_validator("payload.schema.json").validate({**answer.payload.to_json(), "verification": v.to_payload().to_json()})


def test_a_turn_that_did_not_answer_or_a_budget_below_one_is_refused(session):
    failed = session.ask(scripted.QUESTION, provider="scripted-fails", verify=False)
    broken = failed.record.__class__(**{**failed.record.__dict__, "status": "provider_error", "answer": ""})
    with pytest.raises(VerificationError, match="only a turn that answered"):
        verify(broken, session.toolbox, get_provider("offline"))
    with pytest.raises(VerificationError, match="at least 1"):
        session.verify(failed, budget=0)
    with pytest.raises(VerificationError, match="at least 1"):
        session.ask("How do I configure SSO?", verify=True, verify_budget=0)
    other = Session.open(retriever="vector", trace=False)
    with pytest.raises(VerificationError, match="session that asked it"):
        other.verify(failed)


def test_answer_similarity_is_the_dice_coefficient_of_content_words():
    assert answer_similarity("Same text [1].", "Same text [1].") == 1.0
    assert answer_similarity("Reset [it](https://a/x) now.", "Reset [it](https://b/y) now [2].") == 1.0  # prose only
    assert answer_similarity("alpha beta gamma delta", "alpha beta epsilon zeta") == 0.5
    assert answer_similarity("", "anything here") == 0.0


def test_verification_goes_to_the_trace_with_the_turn_or_later_without_rewriting_it(session):
    from workbench.trace import TraceReader

    reader = TraceReader(session.tracer.path)
    verified = session.ask("How do I reset my password?", verify=True)
    tid = verified.payload.turn_id
    cols, rows = reader.rows("SELECT seq, role, doc_id, verdict, status FROM ablations WHERE turn_id = ? ORDER BY seq",
                             [tid])
    assert rows[0][:3] == (0, "control", None)
    assert {r[2]: r[3] for r in rows[1:]} == verified.verification.verdicts

    later = session.ask("How do I get a refund?")
    tid = later.payload.turn_id
    before = reader.rows("SELECT * FROM turns WHERE turn_id = ?", [tid])[1]
    checked = session.verify(later)
    assert checked.trace_error is None and checked.record is later.record
    assert reader.rows("SELECT * FROM turns WHERE turn_id = ?", [tid])[1] == before  # the turn is not rewritten
    again = session.verify(later, budget=2)  # verified twice: the views read the latest
    cols, rows = reader.rows("SELECT doc_id, verdict, ablation_status FROM source_verdicts WHERE turn_id = ? "
                             "AND verdict IS NOT NULL OR ablation_status = 'over_budget' AND turn_id = ?", [tid, tid])
    assert {r[0]: r[1] for r in rows if r[1]} == again.verification.verdicts
    assert reader.rows("SELECT count(DISTINCT verification_id) FROM ablations WHERE turn_id = ?", [tid])[1] == [(2,)]
    cols, rows = reader.rows("SELECT * FROM verification_summary WHERE provider = 'offline'")
    summary = dict(zip(cols, rows[0]))
    assert summary["verified_turns"] >= 2 and summary["stable_control_rate"] == 1.0
    assert 0 < summary["load_bearing_share"] <= 1 and summary["hidden_influence_rate"] is not None


def test_verifying_a_batch_loads_the_index_once(tmp_path, monkeypatch):
    from workbench import session as session_module
    from workbench.batch import run_eval

    calls = []
    real = session_module.get_retriever
    monkeypatch.setattr(session_module, "get_retriever", lambda *a, **kw: calls.append(a) or real(*a, **kw))
    s = Session.open(trace_db=tmp_path / "t.duckdb")
    result = run_eval(s, GOLD[:6], verify=True, verify_budget=4, progress=False)
    assert result.asked == 6 and all(p.verification.extra_turns <= 4 for p in result.payloads)
    assert len(calls) == 1
    resumed = run_eval(s, GOLD[:6], verify=True, verify_budget=4, progress=False)
    assert resumed.resumed and resumed.skipped == 6
    unverified = run_eval(s, GOLD[:6], progress=False)  # an unverified batch is another run
    assert not unverified.resumed and unverified.asked == 6 and len(calls) == 1
    assert DEFAULT_BUDGET == 8
