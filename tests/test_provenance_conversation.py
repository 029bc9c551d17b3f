"""Provenance across the turns of a conversation (docs/design.md §11): carried exposures, the context
states, `not_in_context`, the consulted rules (a)-(d), excerpt numbers unique within a conversation."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import schema_validator
from workbench.cli import main as cli_main
from workbench.errors import TurnRecordError
from workbench.payload import Rejection, Sets
from workbench.provenance import sources_payload
from workbench.types import EXPOSURE_RANK, Excerpt, HistoryTurn, ResultItem, ToolCall, TurnRecord, turn_record_from_dict

BASE = "https://help.example.com/articles/"
GOLDEN = Path(__file__).parent / "data" / "one_turn_payloads.json"


def item(doc_id):
    return ResultItem(doc_id, f"Title of {doc_id}", BASE + doc_id)


def call(name, exposure, *ids):
    return ToolCall(name, exposure, {}, tuple(item(i) for i in ids))


def fetch(*ids):
    return call("fetch_document", "full", *ids)


def search(*ids):
    return call("search", "snippet", *ids)


def listing(*ids):
    return call("list_articles", "title", *ids)


def link(doc_id):
    return f"[{doc_id}]({BASE}{doc_id})"


def earlier(position, context, *calls, answer="An answer.", mode="agent", excerpts=()):
    return HistoryTurn(record=TurnRecord(question=f"question {position}", answer=answer, turn_id=f"t-{position}",
                                         mode=mode, tool_calls=tuple(calls), excerpts=tuple(excerpts)),
                       context=context, position=position)


def follow_up(answer, *calls, history=(), mode="agent", excerpts=()):
    return TurnRecord(f"question {len(history) + 1}", answer, mode, tuple(calls), tuple(excerpts),
                      history=tuple(history), conversation_id="c-1", position=len(history) + 1)


def numbered(first, *doc_ids):
    return tuple(Excerpt(n=first + i, doc_id=d, chunk_index=i, score=1.0, text=f"text of {d}", title=d)
                 for i, d in enumerate(doc_ids))


@pytest.fixture(scope="module")
def payload_schema():
    return schema_validator("payload.schema.json")


def docs(p):
    return {d.doc_id: d for d in p.documents}


def sets(p):
    return p.sets.to_json()


# --- the allow-list: carried exposures and their turn ------------------------------------------------


def test_carried_full_document_cited_is_consulted_and_names_its_turn(payload_schema):
    p = follow_up(f"As in {link('sso')}.", history=[earlier(1, "full", fetch("sso"))])
    p = sources_payload(p)
    payload_schema.validate(p.to_json())
    assert sets(p) == {"retrieved": ["sso"], "cited": ["sso"], "consulted": ["sso"]}
    [src] = p.sources
    assert (src.carried_from, src.carried_position) == ("t-1", 1)
    assert src.exposure == "full" and src.reason == "read in turn 1, cited here"
    assert (p.conversation_id, p.position) == ("c-1", 2)


def test_rule_c_carried_but_not_cited_is_not_consulted():
    p = sources_payload(follow_up("Okta works the same way.", history=[earlier(1, "full", fetch("sso"), search("okta"))]))
    assert sets(p) == {"retrieved": ["sso", "okta"], "cited": [], "consulted": []}
    assert p.sources == ()  # a source of its own turn, not automatically of every later one
    d = docs(p)
    assert d["sso"].reason == "read in turn 1, not cited here" and d["sso"].consulted is False
    assert d["okta"].reason == "read in turn 1, not cited here"
    assert d["sso"].carried_from == "t-1" and d["sso"].tool_call is None


def test_rule_b_carried_snippet_cited_is_consulted():
    p = sources_payload(follow_up(f"See {link('okta')}.", history=[earlier(1, "full", search("okta", "scim"))]))
    assert sets(p)["consulted"] == ["okta"]
    assert docs(p)["okta"].exposure == "snippet" and docs(p)["scim"].consulted is False


def test_rule_a_opened_in_this_turn_is_consulted_without_a_link_and_not_carried():
    p = sources_payload(follow_up("Done.", fetch("sso"), history=[earlier(1, "full", fetch("sso"))]))
    d = docs(p)["sso"]
    assert d.consulted is True and d.reason == "opened in full (not linked)"
    assert d.carried_position is None  # this turn exposed it


def test_this_turns_weaker_exposure_keeps_the_carried_strongest_but_no_carried_from():
    p = sources_payload(follow_up("Nothing linked.", listing("sso"), history=[earlier(1, "full", fetch("sso"))]))
    d = docs(p)["sso"]
    assert d.exposure == "full" and d.consulted is False
    assert d.reason == "read in turn 1, not cited here"
    assert d.carried_position is None and d.tool_call == 0
    assert (d.exposure_from, d.exposure_position) == ("t-1", 1)  # the exposure shown is turn 1's


def test_this_turns_snippet_of_a_document_an_earlier_turn_opened_names_that_turn_as_its_exposure():
    p = sources_payload(follow_up(link("sso"), search("sso"), history=[earlier(1, "full", fetch("sso"))]))
    [src] = p.sources
    assert (src.exposure, src.consulted, src.reason) == ("full", True, "read in turn 1, cited here")
    assert src.carried_from is None, "this turn exposed it too"
    assert (src.exposure_from, src.exposure_position) == ("t-1", 1), "what the chip's 'read in turn 1' names"
    own = sources_payload(follow_up(link("sso"), fetch("sso"), history=[earlier(1, "full", search("sso"))]))
    assert (own.sources[0].exposure_from, own.sources[0].reason) == (None, "opened in full")


# --- rule 3(e): a link of this turn's listing is no source, whatever earlier turns read --------------------------


def test_rule_e_a_listing_after_reading_has_no_sources_row(payload_schema):
    """"How do I configure SSO?" (one article opened, two searched) then "What articles do you have?" (a listing
    of all four, every one linked): the listing's links are titles this turn's own tool gave, not the carried
    text, so the listing consults nothing (docs/design.md §11 rule 3e)."""
    first = earlier(1, "full", search("sso", "okta", "scim"), fetch("sso"),
                    answer=f"Configure it as in {link('sso')}; see also {link('okta')}.")
    listed = ("sso", "okta", "scim", "billing")
    p = sources_payload(follow_up("We have: " + ", ".join(link(i) for i in listed) + ".", listing(*listed),
                                  history=[first]))
    payload_schema.validate(p.to_json())
    assert sets(p) == {"retrieved": list(listed), "cited": list(listed), "consulted": []}
    assert [s.consulted for s in p.sources] == [False] * 4, "no chip: the sources row is empty"
    d = docs(p)
    for doc_id, exposure in (("sso", "full"), ("okta", "snippet"), ("scim", "snippet")):
        assert (d[doc_id].exposure, d[doc_id].consulted) == (exposure, False)
        assert d[doc_id].reason == "listed only here, a listing link (its text was read in turn 1)"
        assert d[doc_id].carried_from is None and d[doc_id].exposure_position == 1
    assert d["billing"].reason == "listed only (linked, but only its title was seen)"


def test_rule_b_still_holds_for_a_carried_document_this_turn_did_not_list():
    first = earlier(1, "full", search("okta"), fetch("sso"))
    p = sources_payload(follow_up(f"{link('sso')}, {link('okta')} and {link('billing')}", listing("billing"),
                                  history=[first]))
    assert sets(p)["consulted"] == ["sso", "okta"]
    assert docs(p)["sso"].reason == docs(p)["okta"].reason == "read in turn 1, cited here"
    assert (docs(p)["sso"].carried_from, docs(p)["billing"].consulted) == ("t-1", False)


def test_strongest_exposure_names_its_turn_not_the_latest():
    p = sources_payload(follow_up(link("a"), history=[earlier(1, "full", fetch("a")), earlier(2, "full", search("a"))]))
    src = p.sources[0]
    assert (src.exposure, src.carried_from, src.carried_position) == ("full", "t-1", 1)


def test_a_tie_names_the_latest_turn():
    p = sources_payload(follow_up(link("a"), history=[earlier(1, "full", search("a")), earlier(2, "full", search("a"))]))
    src = p.sources[0]
    assert (src.exposure, src.carried_from, src.carried_position) == ("snippet", "t-2", 2)


def test_answer_state_keeps_no_tool_results_only_its_accepted_links_as_titles():
    history = [earlier(1, "answer", fetch("sso"), search("okta"), answer=f"Configure it: {link('sso')}.")]
    p = sources_payload(follow_up(f"{link('sso')} and {link('okta')}", history=history))
    assert sets(p) == {"retrieved": ["sso"], "cited": ["sso"], "consulted": []}
    src = p.sources[0]
    assert src.exposure == "title" and src.consulted is False and src.carried_from == "t-1"
    assert src.reason == "listed only (linked, but only its title was seen)"
    [rej] = p.rejected_citations
    assert rej == Rejection(target=BASE + "okta", reason="not_in_context", turn_id="t-1", position=1)


def test_a_link_an_earlier_answer_fabricated_is_never_carried():
    history = [earlier(1, "full", search("sso"), answer=f"See {link('sso-setuq')}.")]
    p = sources_payload(follow_up(link("sso-setuq"), history=history))
    [rej] = p.rejected_citations
    assert rej.reason == "not_retrieved" and rej.nearest_doc_id == "sso" and rej.position is None
    assert sets(p)["retrieved"] == ["sso"]


def test_an_earlier_answer_link_to_a_carried_document_is_accepted_through_its_own_history():
    # turn 2 linked `a`, which it had in full from turn 1: its link was accepted, so turn 3 has `a` as a title
    # from turn 2 even where turn 1's tool results are gone (turn 1's own answer never linked it)
    history = [earlier(1, "full", fetch("a"), answer="Read it."), earlier(2, "answer", answer=f"Again {link('a')}.")]
    src = sources_payload(follow_up(link("a"), history=history)).sources[0]
    assert (src.exposure, src.carried_from, src.consulted) == ("full", "t-1", True)
    history[1] = replace(history[1], record=replace(history[1].record, answer=f"Again {link('a')}.",
                                                    tool_calls=(listing("b"),)))
    history.append(earlier(3, "full", answer="Nothing linked."))
    three = follow_up(link("a"), history=history)
    assert sources_payload(three).sources[0].carried_from == "t-1"
    # the earlier turn is rebuilt in the states the record gives now: turn 1 in `answer` means turn 2's link is
    # not counted as accepted (a policy only weakens states, so this never accepts what turn 2 rejected)
    history[0] = replace(history[0], context="answer")
    [rej] = sources_payload(follow_up(link("a"), history=history)).rejected_citations
    assert (rej.reason, rej.turn_id) == ("not_in_context", "t-1")


def test_an_answer_state_turn_keeps_links_its_own_tool_calls_accepted():
    history = [earlier(1, "answer", listing("a"), answer=f"We have {link('a')}."), earlier(2, "full")]
    src = sources_payload(follow_up(link("a"), history=history)).sources[0]
    assert (src.exposure, src.carried_from, src.carried_position) == ("title", "t-1", 1)


def test_a_link_from_a_turn_the_policy_has_since_dropped_is_not_in_context():
    """The rebuilt allow-list of turn 2 uses the states given now (turn 1 dropped): turn 2's link to `a` is
    not counted as accepted, so `a` names the turn that had it (docs/design.md §11, the accepted-link rule)."""
    history = [earlier(1, "dropped", fetch("a"), answer="Read it."), earlier(2, "answer", answer=f"Again {link('a')}.")]
    p = sources_payload(follow_up(link("a"), history=history))
    [rej] = p.rejected_citations
    assert (rej.reason, rej.turn_id, rej.position) == ("not_in_context", "t-1", 1)
    assert sets(p) == {"retrieved": [], "cited": [], "consulted": []}


def test_dropped_turns_keep_nothing_not_even_their_links():
    history = [earlier(1, "dropped", listing("a"), answer=f"We have {link('a')}."), earlier(2, "full", search("b"))]
    p = sources_payload(follow_up(f"{link('a')} {link('b')} {link('bb')}", history=history))
    assert sets(p)["retrieved"] == ["b"] and sets(p)["cited"] == ["b"]
    by_target = {r.target: r for r in p.rejected_citations}
    assert (by_target[BASE + "a"].reason, by_target[BASE + "a"].position) == ("not_in_context", 1)
    assert by_target[BASE + "bb"].reason == "not_retrieved"  # never exposed anywhere: nearest in the allow-list
    assert (by_target[BASE + "bb"].nearest_doc_id, by_target[BASE + "bb"].edit_distance) == ("b", 1)


def test_not_in_context_names_the_latest_turn_that_had_it():
    history = [earlier(1, "dropped", fetch("a")), earlier(2, "answer", search("a")), earlier(3, "full")]
    [rej] = sources_payload(follow_up(link("a"), history=history)).rejected_citations
    assert (rej.turn_id, rej.position) == ("t-2", 2)


def test_kept_exposure_wins_over_a_dropped_one():
    history = [earlier(1, "answer", fetch("a")), earlier(2, "full", listing("a"))]
    p = sources_payload(follow_up(link("a"), history=history))
    assert p.rejected_citations == () and docs(p)["a"].exposure == "title"


def test_positions_default_to_the_place_in_the_history():
    history = [HistoryTurn(record=TurnRecord("q1", "a1", tool_calls=(fetch("a"),)), context="full"),
               HistoryTurn(record=TurnRecord("q2", "a2"), context="full")]
    src = sources_payload(TurnRecord("q3", link("a"), history=tuple(history))).sources[0]
    assert src.carried_from is None and src.carried_position == 1


# --- excerpt numbers across the conversation ----------------------------------------------------------


def excerpt_conversation(first_state, second_state="full"):
    history = [earlier(1, first_state, mode="excerpts", excerpts=numbered(1, "a", "b", "c"), answer="A [1]."),
               earlier(2, second_state, mode="excerpts", excerpts=numbered(4, "d"), answer="D [4].")]
    return follow_up("B [2], D [4], E [5], nothing [7], zero [0].", mode="excerpts", excerpts=numbered(5, "e"),
                     history=history)


def test_excerpt_numbers_continue_and_mean_one_excerpt(payload_schema):
    p = sources_payload(excerpt_conversation("full"))
    payload_schema.validate(p.to_json())
    assert sets(p)["cited"] == ["b", "d", "e"] and sets(p)["consulted"] == ["b", "d", "e"]
    by_n = {c.n: c for c in p.citations}
    assert (by_n[2].doc_id, by_n[2].excerpt["chunk_index"], by_n[2].excerpt["snippet"]) == ("b", 1, "text of b")
    assert docs(p)["b"].carried_from == "t-1" and docs(p)["b"].excerpts == (2,)
    assert docs(p)["e"].excerpts == (5,) and docs(p)["e"].carried_position is None
    assert {r.target: r.reason for r in p.rejected_citations} == {"[7]": "out_of_range",
                                                                          "[0]": "out_of_range"}


@pytest.mark.parametrize("state", ["answer", "dropped"])
def test_an_excerpt_of_a_turn_without_its_tool_results_is_not_in_context(state):
    p = sources_payload(excerpt_conversation(state))
    rejected = {r.target: r for r in p.rejected_citations}
    assert (rejected["[2]"].reason, rejected["[2]"].turn_id, rejected["[2]"].position) == \
        ("not_in_context", "t-1", 1)
    assert rejected["[7]"].reason == "out_of_range" and rejected["[7]"].position is None
    assert sets(p)["cited"] == ["d", "e"]
    assert next(c for c in p.citations if c.n == 2).position == 1


def test_a_number_reused_across_turns_names_no_excerpt():
    history = [earlier(1, "full", mode="excerpts", excerpts=numbered(1, "a"))]
    rec = follow_up("X [1].", mode="excerpts", excerpts=numbered(1, "b"), history=history)
    assert sources_payload(rec).rejected_citations[0].reason == "out_of_range"
    with pytest.raises(TurnRecordError, match=r"history.0.excerpts.0.n\).*in the conversation"):
        turn_record_from_dict(rec.to_dict())


# --- single turns and the payload's shape ---------------------------------------------------------------


def test_one_turn_records_give_exactly_the_payloads_of_before():
    """Payloads written by the single-turn code before conversations existed (tests/data), byte for byte."""
    for case in json.loads(GOLDEN.read_text(encoding="utf-8")):
        record = turn_record_from_dict(case["record"])
        assert json.dumps(sources_payload(record).to_json(), ensure_ascii=False) == case["payload"], case["record"]["answer"]


def test_the_cli_reads_a_multi_turn_record(tmp_path, capsys, payload_schema):
    record = {"question": "And with Okta?", "mode": "agent", "conversation_id": "c-7", "position": 2,
              "history": [{"turn_id": "t-1", "position": 1, "context": "full", "question": "How do I configure SSO?",
                           "answer": f"See {link('sso-setup')}.",
                           "tool_calls": [{"name": "fetch_document", "exposure": "full", "args": {"doc_id": "sso-setup"},
                                           "results": [{"doc_id": "sso-setup", "title": "Configure SSO",
                                                        "url": BASE + "sso-setup"}]}]}],
              "tool_calls": [], "answer": f"As in [Configure SSO]({BASE}sso-setup)."}
    f = tmp_path / "turn.json"
    f.write_text(json.dumps(record), encoding="utf-8")
    assert cli_main(["provenance", str(f)]) == 0
    p = json.loads(capsys.readouterr().out)
    payload_schema.validate(p)
    assert (p["conversation_id"], p["position"], p["sets"]["consulted"]) == ("c-7", 2, ["sso-setup"])
    assert p["sources"][0]["carried_from"] == "t-1"
    bad = {**record, "history": [{**record["history"][0], "context": "kept"}]}
    f.write_text(json.dumps(bad), encoding="utf-8")
    assert cli_main(["provenance", str(f)]) == 2
    assert "history.0.context" in capsys.readouterr().err


# --- properties over random conversations ------------------------------------------------------------

IDS = st.sampled_from(["a", "b", "c", "ab", "sso", "okta"])
EXPOSURES = st.sampled_from(["full", "snippet", "title"])
STATES = st.sampled_from(["full", "answer", "dropped"])
TODAY_KEYS = ["schema_version", "turn_id", "question", "answer", "mode", "status", "error", "sources", "sets",
              "rejected_citations", "citations", "documents", "tool_calls", "config"]


@st.composite
def one_turn(draw, first: int, mode: str):
    """Tool calls, excerpts numbered from `first`, and an answer citing ids and numbers near them."""
    calls = tuple(ToolCall("t", draw(EXPOSURES), {}, tuple(item(i) for i in draw(st.lists(IDS, max_size=3))))
                  for _ in range(draw(st.integers(0, 3))))
    exc = numbered(first, *draw(st.lists(IDS, max_size=3))) if mode == "excerpts" else ()
    pieces = []
    for _ in range(draw(st.integers(0, 6))):
        kind = draw(st.integers(0, 3))
        if kind == 0:
            pieces.append(f"[l]({BASE}{draw(IDS)})")
        elif kind == 1:
            pieces.append(f"[l]({draw(IDS)}x)" if draw(st.booleans()) else f"[l]({draw(IDS)})")
        elif kind == 2:
            pieces.append(f"[{draw(st.integers(0, first + len(exc) + 2))}]")
        else:
            pieces.append(draw(st.sampled_from(["Some prose.", "More.", "`[1]`"])))
    return calls, exc, " ".join(pieces)


@st.composite
def conversations(draw):
    history, first = [], 1
    for position in range(1, draw(st.integers(0, 3)) + 1):
        mode = draw(st.sampled_from(["agent", "excerpts"]))
        calls, exc, answer = draw(one_turn(first, mode))
        history.append(HistoryTurn(record=TurnRecord(question=f"q{position}", answer=answer, mode=mode, tool_calls=calls,
                                                     excerpts=exc, turn_id=f"t-{position}"),
                                   context=draw(STATES), position=position))
        first += len(exc)
    mode = draw(st.sampled_from(["agent", "excerpts"]))
    calls, exc, answer = draw(one_turn(first, mode))
    return TurnRecord("q", answer, mode, calls, exc, history=tuple(history),
                      conversation_id="c" if history else None, position=len(history) + 1 if history else None)


def exposed(turn):
    return {i.doc_id for c in turn.tool_calls for i in c.results} | {e.doc_id for e in turn.excerpts}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conversations())
def test_properties_of_conversations(record):
    p = sources_payload(record)
    schema_validator("payload.schema.json").validate(p.to_json())
    assert turn_record_from_dict(record.to_dict()) == record  # the parser builds the same HistoryTurns
    own = exposed(record)
    own_full = {i.doc_id for c in record.tool_calls if c.exposure == "full" for i in c.results}
    cited = set(p.sets.cited)
    # a carried document never becomes consulted without a citation in this turn
    for doc_id in p.sets.consulted:
        assert doc_id in own_full or doc_id in cited
    own_strongest: dict[str, str] = {}
    for c in record.tool_calls:
        for i in c.results:
            if EXPOSURE_RANK[c.exposure] > EXPOSURE_RANK.get(own_strongest.get(i.doc_id, ""), -1):
                own_strongest[i.doc_id] = c.exposure
    own_strongest.update((e.doc_id, "snippet") for e in record.excerpts if own_strongest.get(e.doc_id) != "full")
    for d in p.documents:
        if d.carried_position is not None:
            assert d.doc_id not in own and d.carried_position in [h.position for h in record.history]
            assert d.consulted == (d.cited and d.exposure != "title")
        if own_strongest.get(d.doc_id) == "title":  # rule 3(e): this turn listed it, so it is a listing link
            assert d.consulted is False
        # the exposure shown names an earlier turn exactly when it is not this turn's own
        assert (d.exposure_position is not None) == (
            d.doc_id not in own_strongest or EXPOSURE_RANK[d.exposure] > EXPOSURE_RANK[own_strongest[d.doc_id]])
    # nothing the context policy dropped is ever accepted: every accepted document is exposed by this turn, by
    # a turn kept in full, or named by a link in an answer the policy kept
    kept = own | {d for h in record.history if h.context == "full" for d in exposed(h.record)}
    linked = {d for h in record.history if h.context != "dropped" for d in ("a", "b", "c", "ab", "sso", "okta")
              if f"({BASE}{d})" in h.record.answer or f"]({d})" in h.record.answer}
    assert set(p.sets.retrieved) <= kept | linked
    assert cited <= kept | linked
    in_context_ns = {e.n for e in record.excerpts} | {e.n for h in record.history if h.context == "full"
                                                     for e in h.record.excerpts}
    for c in p.citations:
        if c.n is not None and c.valid:
            assert c.n in in_context_ns
        if c.reason == "not_in_context":
            h = record.history[c.position - 1]
            assert h.context != "full" and c.turn_id == h.record.turn_id
    # every excerpt number means one excerpt across the conversation
    issued = {e.n: e for turn in (*(h.record for h in record.history), record) for e in turn.excerpts}
    assert len(issued) == sum(len(turn.excerpts) for turn in (*(h.record for h in record.history), record))
    for c in p.citations:
        if c.n is not None and c.valid:
            e = issued[c.n]
            assert (c.doc_id, c.excerpt["chunk_index"], c.excerpt["snippet"]) == (e.doc_id, e.chunk_index, e.text)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conversations())
def test_a_conversation_of_one_turn_gives_todays_payload(record):
    single = replace(record, history=(), conversation_id=None, position=None)
    p = sources_payload(single).to_json()  # the JSON shape: which keys are written
    assert list(p) == TODAY_KEYS
    assert not any("carried_from" in d for d in p["documents"] + p["sources"])
    assert not any("turn_id" in r for r in p["rejected_citations"] + p["citations"])
    first = sources_payload(replace(single, conversation_id="c-1", position=1)).to_json()
    assert {k: v for k, v in first.items() if k not in ("conversation_id", "position", "turn_id")} == \
        {k: v for k, v in p.items() if k != "turn_id"}
    assert (first["conversation_id"], first["position"]) == ("c-1", 1)


def test_an_earlier_link_is_accepted_against_the_context_its_own_turn_was_asked_with():
    """Turn 1 opened okta without linking it; turn 2 (asked with turn 1 in full) linked it; by turn 3 the policy
    keeps only turn 1's answer. Turn 2's link was accepted when it was given, so its title stays in context."""
    t1 = earlier(1, "answer", fetch("okta"))
    t2 = earlier(2, "full", answer=f"As read before: {link('okta')}.")
    t2 = replace(t2, record=replace(t2.record, history=(replace(t1, context="full"),)))  # turn 2 had turn 1 in full
    payload = sources_payload(follow_up(f"See {link('okta')}.", history=[t1, t2]))
    assert payload.sets == Sets(retrieved=("okta",), cited=("okta",), consulted=())
    [source] = payload.sources
    assert (source.exposure, source.carried_from, source.carried_position) == ("title", "t-2", 2)
    assert payload.rejected_citations == ()
    # a record that does not say how turn 2 was asked: its states now are all there is (a lower bound)
    unknown = sources_payload(follow_up(f"See {link('okta')}.", history=[t1, replace(t2, record=replace(t2.record, history=()))]))
    assert [(r.reason, r.position) for r in unknown.rejected_citations] == [("not_in_context", 1)]
    schema_validator("turn-record.schema.json").validate(json.loads(json.dumps(follow_up("x", history=[t1, t2]).to_dict())))
    assert turn_record_from_dict(follow_up("x", history=[t1, t2]).to_dict()).history[1].prior_context == (("t-1", "full"),)


def test_a_history_turn_wraps_its_record_and_writes_the_history_entry_it_always_wrote():
    """Issue 32, item 5: an earlier turn is its record (not a copy of nine of its fields) with a context state and
    a position; its steps and the context it was itself asked with are read from that record, and a turn
    record's JSON keeps the history entry it always had, read back into the same provenance."""
    from workbench.context_policy import history_turn
    from workbench.types import ModelCall

    first = TurnRecord(question="q1", answer=link("a"), turn_id="t-1", tool_calls=(fetch("a"),),
                       model_calls=(ModelCall("offline", n_tool_calls=1), ModelCall("offline")))
    second = TurnRecord(question="q2", answer="a2", turn_id="t-2", conversation_id="c", position=2,
                        history=(history_turn(first, "full", 1),))
    h = history_turn(second, "answer", 2)
    assert h.record is second and (h.context, h.position) == ("answer", 2)
    assert h.prior_context == (("t-1", "full"),) and history_turn(first, "full", 1).steps == (1,)
    assert list(h.to_dict()) == ["question", "answer", "context", "turn_id", "position", "mode", "tool_calls",
                                 "excerpts", "steps", "prior_context"]
    third = TurnRecord(question="q3", answer=link("a"), conversation_id="c", position=3,
                       history=(history_turn(first, "answer", 1), h))
    schema_validator("turn-record.schema.json").validate(json.loads(json.dumps(third.to_dict())))
    again = turn_record_from_dict(third.to_dict())
    assert again.history[0].steps == (1,) and again.history[1].prior_context == (("t-1", "full"),)
    assert [x.record.question for x in again.history] == ["q1", "q2"]
    assert sources_payload(again).to_json() == sources_payload(third).to_json()
    # a record without a turn id is named by its content, as it was before earlier turns wrapped their records
    assert sources_payload(third).turn_id == "t-c37568761bef009f"
