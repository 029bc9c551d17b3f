"""Faithfulness: claim splitting, judges, ALCE recall/precision, wrong excerpts, generated-only support."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clirun import cli
from workbench.faithfulness import (ClaimResult, assess_turn, get_judge, judge_names, parse_verdict,
                                    register_judge, split_claims)
from workbench.faithfulness.judges import LLMJudge
from workbench.errors import ProviderError, UnknownNameError
from workbench.payload import CitationEntry
from workbench.provenance import sources_payload
from workbench.providers import ModelStep, Provider, register_provider
from workbench.trace.tables import SCHEMAS
from workbench.types import Excerpt, ResultItem, ToolCall, TurnRecord

# The trace store's `claims` columns a judgement fills (the writer adds extra_json and added_at).
TRACE_COLUMNS = [n for n in SCHEMAS["claims"].names if n not in ("extra_json", "added_at")]

SAML = ("Orbitly supports single sign-on with any identity provider that speaks SAML 2.0. Only workspace "
        "Owners can configure single sign-on, and it is available on the Business and Enterprise plans.")
SCIM = ("SCIM provisioning lets your identity provider create, update and deactivate users automatically. "
        "Deactivated users lose access immediately but their content is kept.")
BAKE = "Preheat the oven to 220 degrees and bake the sourdough loaf for forty minutes until golden."


def excerpt_turn(answer: str, texts: list[str], kinds: list[str] | None = None) -> TurnRecord:
    kinds = kinds or ["source"] * len(texts)
    ex = tuple(Excerpt(n=i, doc_id=f"d{i}", chunk_index=0, text=t, chunk_type=k, title=f"Doc {i}")
               for i, (t, k) in enumerate(zip(texts, kinds), start=1))
    return TurnRecord(question="q", answer=answer, mode="excerpts", excerpts=ex, turn_id="t-test")


# --- claims -------------------------------------------------------------------------------------


def test_split_sentences_list_items_and_attached_citations():
    answer = ("Intro without a source. SSO needs SAML 2.0 [1]. Owners configure it. [2]\n\n"
              "# Steps\n\n- Open Settings [1][3]\n- Select Configure SSO\n\nSee also [Okta guide](sso-okta).")
    payload = sources_payload(excerpt_turn(answer, [SAML, SCIM, BAKE]))
    claims = split_claims(answer, payload.citations)
    assert [c.text for c in claims] == ["Intro without a source.", "SSO needs SAML 2.0.", "Owners configure it.",
                                        "Open Settings", "Select Configure SSO"]
    assert [c.kind for c in claims] == ["sentence"] * 3 + ["list_item"] * 2
    assert [[x.n for x in c.citations] for c in claims] == [[], [1], [2], [1, 3], []]
    assert claims[2].cited_doc_ids == ("d2",)  # "… it. [2]": the marker belongs to the sentence before it


def test_attribution_lead_in_scopes_following_claims_and_links_inside_claims_count():
    answer = ("From [Configure SSO](https://x.example/a/sso):\n\nSSO uses SAML. Owners set it up.\n\n"
              "Use the [Okta guide](okta) for Okta.")
    cits = [CitationEntry("https://x.example/a/sso", "sso", True, None, None, None, answer.index("[Configure"),
                          answer.index("):") + 1),
            CitationEntry("okta", "okta", True, None, None, None, answer.index("[Okta"), answer.index("(okta)") + 6)]
    claims = split_claims(answer, cits)
    assert [c.text for c in claims] == ["SSO uses SAML.", "Owners set it up.", "Use the Okta guide for Okta."]
    assert [c.cited_doc_ids for c in claims] == [("sso",), ("sso",), ("okta",)]
    assert claims[0].citations[0].inherited and not claims[2].citations[0].inherited


# --- judges -------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["lexical", "embedding", "hybrid"])
def test_offline_judges_separate_clear_pairs(name):
    judge = get_judge(name)
    good = judge.judge("Only workspace Owners can configure single sign-on.", [SAML])
    bad = judge.judge("Bake the sourdough loaf for forty minutes.", [SAML])
    assert good.verdict == "supported" and bad.verdict == "unsupported"
    assert 0 <= bad.score < 0.3 < 0.6 <= good.score <= 1
    assert "workspace Owners can configure" in good.best_span
    assert judge.judge("anything at all", []).verdict == "unsupported"


def test_judge_registry_names_and_unknown():
    assert {"lexical", "embedding", "hybrid", "llm"} <= set(judge_names())
    with pytest.raises(UnknownNameError, match="unknown judge 'nope'"):
        get_judge("nope")


class FakeJudgeModel(Provider):
    """Replies with a queued text, or raises, so the llm judge's parsing and errors can be tested."""

    name = "fake-judge"
    replies: list = []
    seen: list = []

    def complete(self, messages, tools):
        FakeJudgeModel.seen.append(messages)
        reply = FakeJudgeModel.replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        return ModelStep(text=reply)


register_provider("fake-judge", FakeJudgeModel)


def test_llm_judge_parses_json_keywords_and_survives_errors():
    FakeJudgeModel.replies = [
        '```json\n{"verdict": "supported", "score": 0.9, "span": "Owners can configure"}\n```',
        "The evidence does not support this claim.",
        "Partially supported: the plan is not mentioned.",
        "¯\\_(ツ)_/¯",
        ProviderError("cannot reach Ollama at 127.0.0.1:9; start it with `ollama serve`"),
        '{"verdict": "supported", "score": "high"}',
    ]
    judge = get_judge("llm", provider="fake-judge")
    out = [judge.judge("Owners configure SSO.", [SAML]) for _ in range(6)]
    assert (out[0].score, out[0].verdict, out[0].best_span) == (0.9, "supported", "Owners can configure")
    assert (out[1].score, out[1].verdict) == (0.0, "unsupported")
    assert (out[2].score, out[2].verdict) == (0.5, "partial")
    assert out[3].score is None and out[3].verdict == "unknown" and "could not parse" in out[3].reason
    assert out[4].score is None and out[4].verdict == "unknown" and "ollama serve" in out[4].reason
    assert (out[5].score, out[5].verdict) == (1.0, "supported")
    system, user = FakeJudgeModel.seen[0]
    assert "JSON" in system["content"] and "Owners configure SSO." in user["content"] and SAML in user["content"]
    assert LLMJudge.version == "judge-v1"
    unknown_provider = get_judge("llm", provider="no-such-provider").judge("x y", ["x y"])
    assert unknown_provider.verdict == "unknown" and "no-such-provider" in unknown_provider.reason


@given(st.text(max_size=300))
def test_parse_verdict_never_raises(text):
    score, verdict, _, _ = parse_verdict(text)
    assert verdict in ("supported", "partial", "unsupported", "unknown")
    assert score is None or 0 <= score <= 1


# --- per turn: ALCE -----------------------------------------------------------------------------


def test_alce_recall_and_precision_on_a_hand_built_turn():
    answer = ("Only workspace Owners can configure single sign-on [1][3]. "
              "SCIM provisioning lets your identity provider deactivate users automatically [2]. "
              "The weather in Lisbon is mild in winter. "
              "Owners configure single sign-on with SAML 2.0, and SCIM provisioning deactivates users "
              "automatically while their content is kept [1][2].")
    f = assess_turn(excerpt_turn(answer, [SAML, SCIM, BAKE]), judge="lexical")
    assert [c.verdict for c in f.claims] == ["supported", "supported", "uncited", "supported"]
    assert f.uncited_claims == (2,)
    # recall: 3 of 4 claims are supported by their citations (the uncited one counts 0)
    assert f.citation_recall == 0.75
    # precision: [3] on claim 0 is irrelevant (alone it fails, without it claim 0 is still supported);
    # on claim 3 neither [1] nor [2] suffices alone and dropping either breaks support → both count.
    assert f.citation_precision == 0.8
    assert [c.to_row() for c in f.claims][0]["cited_doc_ids"] == ["d1", "d3"]
    assert list(f.claims[0].to_row()) == TRACE_COLUMNS


def test_rejected_citation_gives_recall_zero_like_alce():
    f = assess_turn(excerpt_turn("Only workspace Owners can configure single sign-on [1][7].", [SAML]))
    assert f.citation_recall == 0.0 and f.citation_precision == 0.0
    assert f.claims[0].verdict == "supported"  # the text it could cite does support it; the fabrication costs recall


def test_no_claims_no_citations():
    f = assess_turn(excerpt_turn("", [SAML]))
    assert f.claims == () and f.citation_recall is None and f.citation_precision is None


# --- wrong excerpt and generated-only on the demo corpus ------------------------------------------


def _doc_excerpt(corpus, n, doc_id):
    d = corpus.get(doc_id)
    return Excerpt(n=n, doc_id=doc_id, chunk_index=0, text=d.text, chunk_type=d.kind, artifact_kind=d.artifact_kind,
                   title=d.title)


def test_wrong_excerpt_when_an_uncited_retrieved_excerpt_supports_the_claim(demo):
    record = TurnRecord(question="Why does SAML sign-in fail?", mode="excerpts", turn_id="t-wrong",
                        answer="Orbitly allows up to 3 minutes of clock skew between your IdP server and Orbitly [2].",
                        excerpts=(_doc_excerpt(demo, 1, "sso-troubleshooting"), _doc_excerpt(demo, 2, "billing-plans")))
    f = assess_turn(record, corpus=demo)
    (claim,) = f.claims
    assert claim.wrong_excerpt and claim.verdict != "supported" and claim.cited_doc_ids == ("billing-plans",)
    (w,) = f.wrong_excerpts
    assert (w.better, w.better_doc_id, w.cited) == ("[1]", "sso-troubleshooting", ("[2]",))
    assert w.better_score >= w.cited_score + 0.15
    # cite the right excerpt and the flag goes away
    right = assess_turn(TurnRecord(**{**record.__dict__, "answer": record.answer.replace("[2]", "[1]")}), corpus=demo)
    assert right.claims[0].verdict == "supported" and not right.claims[0].wrong_excerpt and right.citation_recall == 1


def test_generated_overview_is_never_ground_truth_agent_mode(demo):
    ov = demo.get("overview-sso-and-provisioning")
    assert ov.kind == "generated"
    fetch = ToolCall("fetch_document", "full", {"doc_id": ov.doc_id},
                     (ResultItem(ov.doc_id, ov.title, ov.url, ov.kind, ov.artifact_kind, rank=1),))
    claim_text = "SAML single sign-on is available on Business and Enterprise and is set up by workspace Owners"
    record = TurnRecord(question="Who can set up SSO?", mode="agent", tool_calls=(fetch,), turn_id="t-gen",
                        answer=f"{claim_text} [overview]({ov.url}).")
    f = assess_turn(record, corpus=demo)
    (claim,) = f.claims
    assert claim.generated_only and f.generated_only == (0,)
    assert claim.verdict == "unsupported" and f.citation_recall == 0.0 and f.citation_precision == 0.0
    # the same claim backed by the source article it was derived from is supported, and not generated-only
    src = demo.get("sso-saml-setup")
    fetch2 = ToolCall("fetch_document", "full", {"doc_id": src.doc_id}, (ResultItem(src.doc_id, src.title, src.url),))
    both = TurnRecord(question=record.question, mode="agent", tool_calls=(fetch, fetch2), turn_id="t-gen2",
                      answer=f"{claim_text} [overview]({ov.url}) [source]({src.url}).")
    g = assess_turn(both, corpus=demo)
    assert not g.claims[0].generated_only and g.claims[0].verdict == "supported", g
    assert g.citation_recall == 1.0 and g.citation_precision == 0.5  # the overview citation is irrelevant


def test_snippet_exposure_is_judged_on_the_snippet_not_the_whole_document(demo):
    doc = demo.get("sso-troubleshooting")
    search = ToolCall("search", "snippet", {"query": "sso"},
                      (ResultItem(doc.doc_id, doc.title, doc.url, rank=1, snippet="Invalid SAML response errors."),))
    record = TurnRecord(question="q", mode="agent", tool_calls=(search,), turn_id="t-snip",
                        answer=f"Orbitly allows up to 3 minutes of clock skew between servers [t]({doc.url}).")
    f = assess_turn(record, corpus=demo)
    assert f.claims[0].verdict == "unsupported"  # the model never saw the clock-skew paragraph


def test_offline_demo_turns_score_and_rows_fit_the_trace_table(demo_session):
    for mode in ("agent", "excerpts"):
        a = demo_session.ask("How do I configure SSO?", mode=mode)
        f = assess_turn(a.record, a.payload, demo_session.corpus)
        assert f.claims and f.citation_recall == 1.0, f
        assert all(isinstance(c, ClaimResult) and list(c.to_row()) == TRACE_COLUMNS for c in f.claims)
        json.dumps(f.to_dict())


# --- robustness ---------------------------------------------------------------------------------

_piece = st.one_of(
    st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40),
    st.sampled_from(["[1]", "[2]", "[9]", "[1, 2]", "[1-3]", ". ", "\n\n", "\n- ", "\n1. ", "# ", ":", "**",
                     "[Configure SSO](sso-saml-setup)", "[x](nowhere)", "<https://x.example>", "`code [1]`"]),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_piece, max_size=25).map("".join))
def test_random_answers_never_crash_and_scores_stay_in_range(answer):
    record = excerpt_turn(answer, [SAML, SCIM, "Generated summary of SSO and SCIM."], ["source", "source", "generated"])
    f = assess_turn(record)
    for c in f.claims:
        assert c.score is None or 0 <= c.score <= 1
        assert c.verdict in ("supported", "partial", "unsupported", "uncited")
    for v in (f.citation_recall, f.citation_precision):
        assert v is None or 0 <= v <= 1


@settings(max_examples=80, deadline=None)
@given(st.text(max_size=200), st.lists(st.text(max_size=300), max_size=3))
def test_lexical_judge_scores_in_range(claim, evidence):
    j = get_judge("lexical").judge(claim, evidence)
    assert 0 <= j.score <= 1 and j.verdict in ("supported", "partial", "unsupported")


def test_custom_judge_registers_like_a_builtin():
    from workbench.faithfulness.judges import Judge, Judgement

    @register_judge("always-partial")
    class AlwaysPartial(Judge):
        name = "always-partial"

        def _judge(self, claim, texts):
            return Judgement(0.5, "partial", texts[0][:10])

    f = assess_turn(excerpt_turn("Owners configure single sign-on [1].", [SAML]), judge="always-partial")
    assert f.judge == "always-partial" and f.claims[0].verdict == "partial" and f.citation_recall == 0.0


# --- CLI ----------------------------------------------------------------------------------------


def run_cli(*args, stdin=None):
    return cli(*args, input=stdin)


def test_judge_cli_json(tmp_path):
    f = tmp_path / "claims.jsonl"
    f.write_text("\n".join(json.dumps(x) for x in [
        {"id": "a", "claim": "Only workspace Owners can configure single sign-on.", "evidence": [SAML], "extra": 1},
        {"id": 2, "claim": "Bake the loaf for forty minutes.", "evidence": [SAML, SCIM]},
        {"id": "c", "claim": "Anything.", "evidence": []},
    ]) + "\n\n")
    r = run_cli("judge", str(f), "--method", "lexical", "--json")
    assert r.returncode == 0, r.stderr
    out = [json.loads(line) for line in r.stdout.splitlines()]
    assert [list(o) for o in out] == [["id", "score", "verdict"]] * 3
    assert [o["id"] for o in out] == ["a", 2, "c"]
    assert [o["verdict"] for o in out] == ["supported", "unsupported", "unsupported"]
    r = run_cli("judge", "-", "--method", "embedding", "--json", stdin=f.read_text())
    assert r.returncode == 0 and json.loads(r.stdout.splitlines()[0])["verdict"] == "supported"


@pytest.mark.parametrize("content,needle", [
    ('{"id": 1, "claim": "x", "evidence": ["y"]}\nnot json\n', ":2: invalid JSON"),
    ('{"id": 1, "claim": "x", "evidence": "y"}\n', ':1: field "evidence" must be a list of strings'),
    ('\n{"claim": "x", "evidence": []}\n', ':2: missing field "id"'),
    ('{"id": 1, "claim": 3, "evidence": []}\n', ':1: field "claim" must be a string'),
    ('[1, 2]\n', ":1: each line must be a JSON object"),
])
def test_judge_cli_bad_lines_exit_2_with_line_number(tmp_path, content, needle):
    f = tmp_path / "bad.jsonl"
    f.write_text(content)
    r = run_cli("judge", str(f), "--json")
    assert r.returncode == 2 and needle in r.stderr and "Traceback" not in r.stderr


def test_judge_cli_unknown_method_and_missing_file():
    r = run_cli("judge", "/no/such.jsonl")
    assert r.returncode == 2 and "cannot read" in r.stderr
    r = run_cli("judge", "-", "--method", "nope", stdin="")
    assert r.returncode == 2 and "unknown judge 'nope'" in r.stderr


# --- claims come from substantive answers only ---------------------------------------------------


@pytest.mark.parametrize("question,mode,kind", [
    ("Which articles do you have?", "agent", "listing"),
    ("Which articles are in the billing section?", "agent", "listing"),
    ("How do I bake a sourdough loaf?", "agent", "abstention"),
    ("How do I bake a sourdough loaf?", "excerpts", "abstention"),
    ("How do I configure SSO?", "agent", "substantive"),
    ("How do I configure SSO?", "excerpts", "substantive"),
])
def test_listings_and_abstentions_have_no_claims(demo_session, question, mode, kind):
    answer = demo_session.ask(question, mode=mode)
    faith = answer.faithfulness
    assert faith.answer_kind == kind, answer.payload.answer[:200]
    if kind == "substantive":
        assert faith.claims and faith.citation_recall is not None
    else:
        assert faith.claims == () and faith.citation_recall is None and faith.citation_precision is None


@pytest.mark.parametrize("answer,kind", [
    ("Members do not have access to billing.", "substantive"),  # an uncited fact, negated, is still a claim
    ("You cannot see other workspaces. Ask an Owner to invite you.", "substantive"),
    ("I couldn't find anything about Kubernetes in the knowledge base.", "abstention"),
    ("The articles don't mention Kubernetes.", "abstention"),
    ("I could not find a setting for that. Orbitly runs only in the cloud. Kubernetes is not supported. "
     "Use the API instead.", "substantive"),  # a refusal followed by claims of its own is judged
])
def test_answer_kind_of_uncited_answers(answer, kind):
    from workbench.faithfulness import answer_kind

    record = TurnRecord("q?", answer)
    assert answer_kind(sources_payload(record)) == kind
    faith = assess_turn(record)
    assert bool(faith.claims) == (kind == "substantive")
    if kind == "substantive":
        assert faith.uncited_claims and faith.citation_recall == 0.0


def test_a_listing_that_also_links_an_opened_document_is_substantive():
    calls = (ToolCall("list_articles", "title", {}, (ResultItem("a", "A", "https://x.example/a"),)),
             ToolCall("fetch_document", "full", {"doc_id": "b"}, (ResultItem("b", "B", "https://x.example/b"),)))
    listing = TurnRecord("q?", "- [A](https://x.example/a)", tool_calls=calls)
    mixed = TurnRecord("q?", "B says SSO needs SAML ([B](https://x.example/b)). See [A](https://x.example/a).",
                       tool_calls=calls)
    from workbench.faithfulness import answer_kind

    assert answer_kind(sources_payload(listing)) == "substantive"  # b was opened: something was consulted
    assert answer_kind(sources_payload(mixed)) == "substantive"
    only_titles = TurnRecord("q?", "- [A](https://x.example/a)", tool_calls=calls[:1])
    assert answer_kind(sources_payload(only_titles)) == "listing"
