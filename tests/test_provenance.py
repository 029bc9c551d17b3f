"""The three-set rules, citation validation and the payload contract (docs/design.md §1–§2, §4)."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import schema_validator
from workbench.payload import Payload, Rejection
from workbench.provenance import sources_payload, extract_citations, normalize_url
from workbench.render.sources import link_table, source_chips
from workbench.types import Excerpt, ResultItem, ToolCall, TurnRecord, turn_record_from_dict

BASE = "https://help.example.com/articles/"


def item(doc_id, kind="source", artifact_kind=None):
    return ResultItem(doc_id, f"Title of {doc_id}", BASE + doc_id, kind, artifact_kind)


def call(name, exposure, *ids):
    return ToolCall(name, exposure, {}, tuple(item(i) for i in ids))


def payload_for(answer, *calls, mode="agent", excerpts=()):
    return sources_payload(TurnRecord("q", answer, mode, tuple(calls), tuple(excerpts)))


@pytest.fixture(scope="module")
def payload_schema():
    return schema_validator("payload.schema.json")


@pytest.fixture(scope="module")
def turn_schema():
    return schema_validator("turn-record.schema.json")


def sets(p):
    return {k: set(v) for k, v in p.sets.to_json().items()}


# --- consulted rules -------------------------------------------------------------------------


def test_rule1_full_exposure_is_consulted_even_without_a_link():
    p = payload_for("SSO is configured in Settings.", call("fetch_document", "full", "sso-setup"))
    assert sets(p) == {"retrieved": {"sso-setup"}, "cited": set(), "consulted": {"sso-setup"}}
    [src] = p.sources
    assert src.consulted is True and src.cited is False and src.reason == "opened in full (not linked)"


def test_rule2_snippet_is_consulted_only_when_cited():
    p = payload_for(f"See [A]({BASE}a).", call("search", "snippet", "a", "b", "c"))
    assert sets(p)["consulted"] == {"a"}
    assert sets(p)["retrieved"] == {"a", "b", "c"}
    assert [s.doc_id for s in p.sources] == ["a"]


def test_rule3_title_only_is_never_consulted_even_when_linked():
    p = payload_for(f"- [A]({BASE}a)\n- [B]({BASE}b)", call("list_articles", "title", "a", "b"))
    assert sets(p)["cited"] == {"a", "b"} and sets(p)["consulted"] == set()
    assert all(s.consulted is False and s.reason.startswith("listed only") for s in p.sources)
    assert source_chips(p) == []  # a listing answer has no sources row …
    assert set(link_table(p)) == {"a", "b"}  # … but every link stays clickable


def test_strongest_exposure_wins_across_calls():
    p = payload_for(
        "No links here.",
        call("list_articles", "title", "a", "b"),
        call("search", "snippet", "b"),
        call("fetch_document", "full", "a"),
    )
    docs = {d.doc_id: d for d in p.documents}
    assert docs["a"].exposure == "full" and docs["a"].tool_call == 2 and docs["a"].tool_calls == (0, 2)
    assert docs["b"].exposure == "snippet" and docs["b"].consulted is False
    assert sets(p)["consulted"] == {"a"}


def test_sso_like_turn_has_one_or_two_chips():
    p = payload_for(
        f"Configure it in Settings ([SSO]({BASE}sso)). See also [Okta]({BASE}okta).",
        call("search", "snippet", "sso", "okta", "scim", "2fa"),
        call("fetch_document", "full", "sso"),
    )
    assert [c.doc_id for c in source_chips(p)] == ["sso", "okta"]


# --- citation validation ---------------------------------------------------------------------


def test_fabricated_id_one_char_off_is_rejected_with_nearest():
    p = payload_for(f"See [x]({BASE}sso-setuq).", call("fetch_document", "full", "sso-setup"))
    assert p.sets.cited == ()
    [rej] = p.rejected_citations
    assert rej == Rejection(BASE + "sso-setuq", "not_retrieved", "sso-setup", 1)
    assert p.sets.consulted == ("sso-setup",)  # still read in full


def test_bare_id_citation_and_numeric_ids():
    p = payload_for("See [a](4412377144338) and [b](4412377144339).",
                    call("search", "snippet", "4412377144338", "360011787880"))
    assert p.sets.cited == ("4412377144338",)
    assert p.rejected_citations[0].nearest_doc_id == "4412377144338"
    assert p.rejected_citations[0].edit_distance == 1


def test_document_in_corpus_but_never_retrieved_is_rejected():
    p = payload_for(f"[other]({BASE}other-doc)", call("search", "snippet", "a"))
    assert p.rejected_citations[0].reason == "not_retrieved"
    assert p.sources == ()


@pytest.mark.parametrize("variant", [
    BASE + "a/", BASE + "a#step-2", BASE + "a?utm=1", "HTTPS://HELP.EXAMPLE.COM/articles/a", BASE + "a/?x=1#y",
    "https://help.example.com:443/articles/a",
])
def test_url_normalisation(variant):
    p = payload_for(f"[A]({variant})", call("search", "snippet", "a"))
    assert p.sets.cited == ("a",) and p.rejected_citations == ()


def test_wrong_host_or_path_case_is_not_corrected():
    p = payload_for("[A](https://evil.example.com/articles/a) [B](https://help.example.com/Articles/a)",
                    call("search", "snippet", "a"))
    assert p.sets.cited == () and len(p.rejected_citations) == 2


def test_images_code_and_anchors_are_not_citations():
    answer = f"![diagram]({BASE}a) `[x]({BASE}zz)` [jump](#steps)\n```\n[y]({BASE}yy)\n```"
    p = payload_for(answer, call("search", "snippet", "a"))
    assert p.citations == () and p.rejected_citations == ()


def test_link_syntax_variants():
    answer = f'[A]({BASE}a "title") [B](<{BASE}b>) <{BASE}c> [see [1] here]({BASE}d)'
    p = payload_for(answer, call("search", "snippet", "a", "b", "c", "d"))
    assert p.sets.cited == ("a", "b", "c", "d")


def test_javascript_target_is_rejected():
    p = payload_for("[click](javascript:alert(1))", call("search", "snippet", "a"))
    assert p.rejected_citations[0].target.startswith("javascript:")
    assert p.sets.cited == ()


# --- excerpt mode ----------------------------------------------------------------------------


def excerpts(*doc_ids):
    return tuple(Excerpt(n=i, doc_id=d, chunk_index=0, score=1.0, text=f"text {d}", title=d, file_name=f"{d}.md")
                 for i, d in enumerate(doc_ids, start=1))


def test_excerpt_markers_resolve_and_out_of_range_is_rejected():
    p = payload_for("Do X [1]. Do Y [2, 3]. Nonsense [7].", mode="excerpts", excerpts=excerpts("a", "b", "a"))
    assert p.sets.retrieved == ("a", "b")
    assert p.sets.cited == ("a", "b") and p.sets.consulted == ("a", "b")
    [rej] = p.rejected_citations
    assert rej.target == "[7]" and rej.reason == "out_of_range"
    rec = next(c for c in p.citations if c.n == 2)
    assert rec.doc_id is not None
    for field in ("file_name", "chunk_index", "page", "score", "snippet", "chunk_type", "title", "generated",
                  "artifact_kind"):
        assert field in rec.excerpt


def test_a_marker_names_each_issued_number_once_and_its_unissued_ones_in_one_rejection():
    """Issue 33 item 7: `[0-50]` with five excerpts issued is five citations and ONE rejection (not 51 citations),
    `[3-9]` is [3], [4], [5] and one rejection of 6-9, and a number repeated in a marker counts once."""
    five = excerpts("a", "b", "c", "d", "e")
    p = payload_for("All of it [0-50].", mode="excerpts", excerpts=five)
    assert [(c.target, c.valid) for c in p.citations] == [
        ("[1]", True), ("[2]", True), ("[3]", True), ("[4]", True), ("[5]", True), ("[0, 6-50]", False)]
    assert [(r.target, r.reason) for r in p.rejected_citations] == [("[0, 6-50]", "out_of_range")]
    assert p.sets.consulted == ("a", "b", "c", "d", "e")
    p = payload_for("Some [3-9]. Again [2, 2, 2; 2]. Wide [1-99].", mode="excerpts", excerpts=five)
    assert [c.target for c in p.citations] == ["[3]", "[4]", "[5]", "[6-9]", "[2]", "[1]", "[99]"]
    assert {(c.start, c.end) for c in p.citations if c.target == "[6-9]"} == \
        {(c.start, c.end) for c in p.citations if c.target == "[3]"}, "the rejection spans its marker"


MAX_CITATIONS = 1000  # provenance.MAX_CITATIONS


def test_a_50_kb_answer_of_range_markers_gives_a_bounded_payload():
    """Before: each `[0-50]` became 51 citations, so 8,533 markers gave 435,183 citations and 121 MB of JSON.
    Now one marker gives at most the issued numbers plus one rejection, and an answer keeps at most
    MAX_CITATIONS occurrences (past it, each document's or target's first): the sets stay exact."""
    from workbench import provenance

    assert getattr(provenance, "MAX_CITATIONS", None) in (None, MAX_CITATIONS)  # as docs/security.md states it
    answer = "[0-50]" * (50 * 1024 // 6)
    p = payload_for(answer, mode="excerpts", excerpts=excerpts("a", "b", "c", "d", "e"))
    assert len(p.citations) == MAX_CITATIONS
    assert p.citations_omitted == len(answer) // 6 * 6 - MAX_CITATIONS
    assert p.sets.cited == p.sets.consulted == ("a", "b", "c", "d", "e")
    assert [(r.target, r.reason) for r in p.rejected_citations] == [("[0, 6-50]", "out_of_range")]
    assert len(json.dumps(p.to_json())) < 1_000_000
    late = answer + " See also [the guide](https://help.example.com/articles/late)."
    p = payload_for(late, call("search", "snippet", "late"), mode="excerpts", excerpts=excerpts("a", "b"))
    assert "late" in p.sets.consulted and p.citations[-1].doc_id == "late", "a citation past the bound still counts"
    payload_schema = schema_validator("payload.schema.json")
    payload_schema.validate(p.to_json())
    assert Payload.from_json(p.to_json()) == p


def test_excerpt_marker_ranges_and_zero():
    p = payload_for("A [1-2]. B [0].", mode="excerpts", excerpts=excerpts("a", "b"))
    assert p.sets.cited == ("a", "b")
    assert [r.target for r in p.rejected_citations] == ["[0]"]


def test_markers_are_not_citations_in_agent_mode():
    p = payload_for("Step [1] then [2].", call("search", "snippet", "a"))
    assert p.citations == ()


def test_generated_artifact_is_labelled():
    rec = TurnRecord("q", f"[O]({BASE}ov)", "agent",
                     (ToolCall("search", "snippet", {}, (item("ov", "generated", "category overview"),)),))
    [src] = sources_payload(rec).sources
    assert src.label == "Generated category overview"


# --- compatibility of the payload (docs/design.md §2) ------------------------------------------------


def _listing_and_answer_payload():
    return payload_for(
        f"Read [A]({BASE}a); also listed [B]({BASE}b).",
        call("list_articles", "title", "a", "b"),
        call("fetch_document", "full", "a"),
    )


def test_new_client_with_new_server_hides_unconsulted():
    p = _listing_and_answer_payload()
    assert [s.doc_id for s in source_chips(p)] == ["a"]


def test_old_client_with_new_server_keeps_working():
    """An old client ignores `consulted`: it shows every source and every link still resolves."""
    p = _listing_and_answer_payload()
    old_client_chips = [s.doc_id for s in p.sources]  # what a flag-unaware client renders
    assert old_client_chips == ["a", "b"]
    assert all(s.url for s in p.sources)
    assert set(link_table(p)) >= set(p.sets.cited)  # the array was never shrunk


def test_new_client_with_old_server_falls_back_to_show_all():
    p = _listing_and_answer_payload()
    old = Payload.from_json({**p.to_json(), "sources": [{k: v for k, v in s.to_json().items() if k != "consulted"}
                                                         for s in p.sources]})  # an old server sends no flag
    assert [s.doc_id for s in source_chips(old)] == ["a", "b"]


# --- contracts ---------------------------------------------------------------------------------


def test_payload_validates_against_the_shipped_schema(payload_schema):
    for p in (_listing_and_answer_payload(),
              payload_for("x [9]", mode="excerpts", excerpts=excerpts("a")),
              payload_for(f"[x]({BASE}nope)", call("search", "snippet", "a"))):
        payload_schema.validate(p.to_json())


def test_turn_record_roundtrip_through_schema(turn_schema):
    rec = TurnRecord("q", "a [1]", "excerpts", (call("search", "snippet", "a"),), excerpts("a"))
    d = rec.to_dict()
    turn_schema.validate(json.loads(json.dumps(d)))
    assert turn_record_from_dict(d) == rec


def test_turn_id_is_stable_when_absent():
    rec = TurnRecord("q", "answer", "agent", (call("search", "snippet", "a"),))
    assert sources_payload(rec).turn_id == sources_payload(rec).turn_id


def test_normalize_url_keeps_relative_paths():
    assert normalize_url("/articles/a/") == "/articles/a"
    assert normalize_url("sso-setup") == "sso-setup"


def test_extract_citations_offsets_point_into_answer():
    answer = f"Hi [A]({BASE}a) and <{BASE}b>."
    for c in extract_citations(answer, "agent"):
        assert c.target in answer[c.start:c.end]


# --- properties over untrusted model output ----------------------------------------------------

IDS = st.text(alphabet="abcdef0123456789-", min_size=1, max_size=8)
EXPOSURES = st.sampled_from(["full", "snippet", "title"])


@st.composite
def turns(draw):
    calls = []
    for _ in range(draw(st.integers(0, 4))):
        ids = draw(st.lists(IDS, max_size=6))
        calls.append(ToolCall("t", draw(EXPOSURES), {}, tuple(item(i) for i in ids)))
    pool = [i.doc_id for c in calls for i in c.results] + draw(st.lists(IDS, max_size=3))
    pieces = []
    for _ in range(draw(st.integers(0, 8))):
        choice = draw(st.integers(0, 4))
        if choice == 0 and pool:
            pieces.append(f"[l]({BASE}{draw(st.sampled_from(pool))})")
        elif choice == 1 and pool:
            pieces.append(f"[l]({draw(st.sampled_from(pool))})")
        elif choice == 2:
            pieces.append(f"[{draw(st.integers(0, 9))}]")
        else:
            pieces.append(draw(st.text(max_size=30)))
    mode = draw(st.sampled_from(["agent", "excerpts"]))
    exc = excerpts(*draw(st.lists(IDS, max_size=4))) if mode == "excerpts" else ()
    return TurnRecord("q", " ".join(pieces), mode, tuple(calls), exc)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(turns())
def test_properties_hold_for_random_turns(record):
    p = sources_payload(record)
    retrieved = set(p.sets.retrieved)
    exposed = {i.doc_id for c in record.tool_calls for i in c.results} | {e.doc_id for e in record.excerpts}
    assert retrieved == exposed
    assert set(p.sets.cited) <= retrieved  # no never-retrieved id is ever accepted
    assert set(p.sets.consulted) <= retrieved
    source_ids = [s.doc_id for s in p.sources]
    assert len(source_ids) == len(set(source_ids))
    assert set(p.sets.cited) <= set(source_ids)  # every cited document is in sources
    assert set(p.sets.consulted) <= set(source_ids)
    for c in p.citations:
        assert c.valid == (c.doc_id is not None)
        if c.valid:
            assert c.doc_id in retrieved
    docs = {d.doc_id: d for d in p.documents}
    for d in docs.values():
        if d.exposure == "title":
            assert not d.consulted
        if d.exposure == "full":
            assert d.consulted


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=400))
def test_arbitrary_text_never_crashes(answer):
    for mode in ("agent", "excerpts"):
        p = payload_for(answer, call("search", "snippet", "a", "b"), mode=mode, excerpts=excerpts("a"))
        assert set(p.sets.cited) <= {"a", "b"}
