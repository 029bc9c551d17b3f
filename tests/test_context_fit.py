"""Tool results fit the context that is left (docs/design.md, "Results that fit").

An agent turn over a generated 400-document corpus, through the official `openai` client, against a loopback
OpenAI-compatible server with a 4,096-token context that refuses any request over it with llama.cpp's own 400 body
(`context_server.py`). The scripted model lists the articles, opens a document larger than the whole context, and
answers. Before the fix the listing (all 400 titles) went out whole and the server refused the next request: the
turn ended `context_overflow`.
"""

from __future__ import annotations

import json

import pytest

from context_server import ContextServer
from loopback import openai_reply
from conftest import schema_validator
from workbench.session import Session

N_DOCS, N_CTX = 400, 4096
BIG, MEDIUM = "big-manual", "medium-guide"
BASE = "https://help.example.test/articles"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    path = tmp_path_factory.mktemp("corpus") / "corpus.jsonl"
    lines = [{"id": f"doc-{i:04d}", "title": f"How to set up widget {i} for the {['lab', 'field', 'office'][i % 3]}",
              "url": f"{BASE}/doc-{i:04d}", "category": f"section-{i % 8}",
              "text": f"Widget {i} is set up from the Settings page. Press Save when done."} for i in range(N_DOCS)]
    para = "The calibration routine measures the sensor offset, then writes it to flash memory. "
    lines.append({"id": BIG, "title": "The complete calibration manual", "url": f"{BASE}/{BIG}", "category": "manuals",
                  "text": "\n\n".join(f"Step {n}. {para * 3}" for n in range(200))})  # ~50,000 characters
    lines.append({"id": MEDIUM, "title": "A medium guide", "url": f"{BASE}/{MEDIUM}", "category": "manuals",
                  "text": "\n\n".join(f"Point {n}. {para}" for n in range(60))})  # ~5,000 characters
    path.write_text("".join(json.dumps(d) + "\n" for d in lines), encoding="utf-8")
    return Session.open(path, trace=False)


def last_tool(messages):
    m = messages[-1]
    return json.loads(m["content"]) if m.get("role") == "tool" else None


def lister(messages):
    """list_articles, then fetch the big manual, then answer linking a listed title, the manual, and a title
    that is on a page the model never received."""
    result = last_tool(messages)
    if result is None:
        return openai_reply("", [("list_articles", {})])
    if "articles" in result:
        return openai_reply("", [("fetch_document", {"doc_id": BIG})])
    listed = json.loads(next(m["content"] for m in messages if m.get("role") == "tool"))["articles"][0]
    return openai_reply(f"See [{listed['title']}]({listed['url']}) and [the manual]({BASE}/{BIG}); also "
                        f"[widget 399]({BASE}/doc-0399).")


def options(server, **extra):
    return {"model": "loopback", "base_url": server.url + "/v1", "api_key": "sk-loopback", "timeout": 10,
            "backoff": 0.001, **extra}


def test_an_agent_turn_over_400_documents_with_a_4096_token_server_ends_ok_with_exact_exposures(corpus):
    with ContextServer(N_CTX, lister) as server:
        answer = corpus.ask("Which articles do you have, and how do I calibrate?", provider="openai",
                            **options(server))
    record, payload = answer.record, answer.payload
    assert record.status == "ok", record.error
    assert server.refused == 0 and all(tokens <= N_CTX for tokens, _ in server.requests), \
        [t for t, _ in server.requests]
    assert record.config["context_window"]["tokens"] == N_CTX
    assert "/props" in record.config["context_window"]["source"]

    listing, fetch = record.tool_calls
    assert listing.cut is not None and listing.cut.kind == "page" and listing.cut.page == 1
    assert listing.cut.total == N_DOCS + 2 and listing.cut.pages > 1 and "page=2" in json.dumps(
        json.loads(server.requests[1][1]["messages"][-1]["content"]))
    shown = [r.doc_id for r in listing.results]
    assert 0 < len(shown) == listing.cut.end - listing.cut.start < N_DOCS
    # a listing page exposes exactly its titles
    by_id = {d.doc_id: d for d in payload.documents}
    assert {d for d, doc in by_id.items() if doc.exposure == "title"} == set(shown)

    assert fetch.exposure == "snippet" and fetch.cut.kind == "part" and fetch.cut.page == 1 and fetch.cut.pages > 1
    assert "part=2" in server.requests[2][1]["messages"][-1]["content"]
    assert by_id[BIG].exposure == "snippet" and by_id[BIG].consulted, "read in part and cited: consulted (rule 2)"

    rejected = {r.target: r.reason for r in payload.rejected_citations}
    assert rejected == {f"{BASE}/doc-0399": "not_retrieved"}, "a title on a page never received is not retrieved"
    assert payload.sets.consulted == (BIG,) and set(payload.sets.cited) == {shown[0], BIG}

    data = payload.to_json()
    schema_validator("payload.schema.json").validate(data)
    cuts = [c.get("cut") for c in data["tool_calls"]]
    assert cuts[0]["kind"] == "page" and "do not fit" in cuts[0]["reason"]
    assert cuts[1]["kind"] == "part" and "does not fit" in cuts[1]["reason"]


def reader(messages):
    """fetch the big manual, then its part 2, then answer without a link."""
    result = last_tool(messages)
    if result is None:
        return openai_reply("", [("fetch_document", {"doc_id": BIG})])
    if result.get("part") == 1:
        return openai_reply("", [("fetch_document", {"doc_id": BIG, "part": 2})])
    return openai_reply("The calibration writes the offset to flash memory.")  # no link at all


def test_a_document_read_in_part_is_a_snippet_exposure_and_parts_are_numbered_as_said(corpus):
    with ContextServer(N_CTX, reader, props=False) as server:
        answer = corpus.ask("How does calibration work?", provider="openai", **options(server, context_tokens=N_CTX))
    record, payload = answer.record, answer.payload
    assert record.status == "ok", record.error
    assert server.refused == 0
    assert record.config["context_window"]["source"] == "the context_tokens option"
    one, two = (c.cut for c in record.tool_calls)
    assert (one.page, two.page) == (1, 2) and one.end == two.start, "part 2 starts where part 1 ended"
    doc = next(d for d in payload.documents if d.doc_id == BIG)
    assert doc.exposure == "snippet" and doc.consulted is False  # read in part, not cited: not consulted


def part_record(ranges, total):
    calls = [{"name": "fetch_document", "exposure": "snippet", "args": {"doc_id": MEDIUM, "part": i + 1},
              "results": [{"doc_id": MEDIUM, "title": "A medium guide", "url": f"{BASE}/{MEDIUM}"}],
              "cut": {"kind": "part", "page": i + 1, "pages": len(ranges), "total": total, "start": a, "end": b,
                      "size": 900, "reason": "does not fit"}} for i, (a, b) in enumerate(ranges)]
    return {"question": "How?", "answer": "It writes the offset to flash.", "tool_calls": calls}


@pytest.mark.parametrize("ranges,exposure", [([(0, 400), (400, 1000)], "full"), ([(0, 400)], "snippet"),
                                             ([(0, 400), (500, 1000)], "snippet"), ([(400, 1000), (0, 400)], "full")],
                         ids=["every-part", "one-part", "a-gap", "any-order"])
def test_a_document_is_full_only_when_every_part_was_read(ranges, exposure):
    from workbench.provenance import sources_payload
    from workbench.types import turn_record_from_dict

    payload = sources_payload(turn_record_from_dict(part_record(ranges, 1000)))
    doc = payload.documents[0]
    assert doc.exposure == exposure and doc.consulted is (exposure == "full")  # opened whole: consulted uncited


def test_a_request_over_the_context_is_never_sent(corpus):
    """A question longer than the whole context ends `context_overflow` before any request."""
    with ContextServer(1024, lister) as server:
        answer = corpus.ask("calibrate " * 790, provider="openai", **options(server))
    assert answer.record.status == "context_overflow" and "was not sent" in answer.record.error
    assert server.requests == []


def test_a_server_that_still_refuses_maps_to_context_overflow(corpus):
    """The server's own refusal (its context smaller than the option says) is `context_overflow`, as before."""
    with ContextServer(1024, lister, props=False) as server:
        answer = corpus.ask("Which articles do you have?", provider="openai", **options(server, context_tokens=N_CTX))
    assert answer.record.status == "context_overflow", answer.record.error
    assert server.refused == 1


def test_a_carried_page_is_the_same_page_again_after_the_trace_store(corpus, tmp_path):
    """A follow-up carries turn 1's tool results: its cut listing goes back as the same page (m019 keeps the cut)."""
    from workbench.session import Conversations, Session

    def agent(messages):
        if messages[-1]["role"] == "user":
            if messages[-1]["content"] == "And the second page?":
                return openai_reply("That needs another call.")
            return openai_reply("", [("list_articles", {})])
        first = json.loads(messages[-1]["content"])["articles"][0]
        return openai_reply(f"For example [{first['title']}]({first['url']}).")

    session = Session(corpus.corpus, trace_db=tmp_path / "traces.duckdb")
    with ContextServer(8192, agent) as server:
        first = Conversations(session).ask("Which articles do you have?", "c-1", provider="openai",
                                           **options(server))
        assert first.record.status == "ok" and first.record.tool_calls[0].cut is not None
        again = Conversations(session).ask("And the second page?", "c-1", provider="openai", **options(server))
    assert again.record.status == "ok", again.record.error
    assert again.record.history[0].record.tool_calls[0].cut == first.record.tool_calls[0].cut
    sent = [m["content"] for m in server.requests[-1][1]["messages"] if m["role"] == "tool"]
    received = [m["content"] for m in server.requests[1][1]["messages"] if m["role"] == "tool"]
    assert sent[0] == received[0], "the carried listing is the page the model had"


def test_turns_of_one_configuration_stay_one_run_whatever_their_page_size(corpus, tmp_path):
    """The page size differs by question (it is a share of what is left); it is in each cut, not in the run key."""
    import duckdb

    from workbench.session import Session

    session = Session(corpus.corpus, trace_db=tmp_path / "traces.duckdb")
    with ContextServer(N_CTX, lister) as server:
        for question in ("Which articles?", "Which articles do you have about widgets, and how do I calibrate? " * 20):
            answer = session.ask(question, provider="openai", **options(server))
            assert answer.record.status == "ok", answer.record.error
    sizes = {json.loads(c)["size"] for (c,) in duckdb.connect(str(tmp_path / "traces.duckdb"), read_only=True)
             .execute("SELECT cut_json FROM tool_calls WHERE name = 'list_articles'").fetchall()}
    runs = duckdb.connect(str(tmp_path / "traces.duckdb"), read_only=True).execute(
        "SELECT count(DISTINCT run_id) FROM turns").fetchone()
    assert len(sizes) == 2 and runs == (1,)
