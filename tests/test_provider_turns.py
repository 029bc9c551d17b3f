"""Whole turns through the real Ollama and Gemini clients against loopback servers (no network).

The same scripted scenarios run for both providers: a search call, a fetch call and a final answer
citing the fetched document's URL; final answers with good, corrupted and fabricated citations;
excerpt mode; and the CLI end to end. Provenance must come out exactly as for the offline provider.
The library turns are not traced (`log=False`: the answer and its provenance are made before the write); the CLI's
turn is, as `workbench ask` writes it.
"""

from __future__ import annotations

import json

import pytest

from clirun import cli
from loopback import WIRES, ScriptedServer

QUESTION = "How do I configure SSO?"
DOC = "sso-saml-setup"
URL = "https://help.orbitly.example/articles/sso-saml-setup"
CORRUPTED = URL[:-1] + "q"  # one character off
FABRICATED = "https://help.orbitly.example/articles/sso-legacy-setup-guide"

pytestmark = pytest.mark.parametrize("wire", list(WIRES.values()), ids=list(WIRES))


def script(wire, answer: str):
    return [wire.reply("", [("search", {"query": "configure SSO"})]),
            wire.reply("", [("fetch_document", {"doc_id": DOC})]),
            wire.reply(answer)]


def test_search_fetch_answer_gives_the_provenance_the_rules_demand(wire, demo_session):
    answer = f"Open **Settings → Security → SSO** and paste your IdP metadata ([Configure SAML SSO]({URL}))."
    with ScriptedServer(script(wire, answer)) as srv:
        result = demo_session.ask(QUESTION, log=False, provider=wire.provider, **wire.options(srv.url))
    record, payload = result.record, result.payload
    assert record.status == "ok", record.error
    assert [t.name for t in record.tool_calls] == ["search", "fetch_document"]
    assert payload.sets.consulted == (DOC,)
    assert payload.sets.cited == (DOC,)
    assert DOC in payload.sets.retrieved and len(payload.sets.retrieved) > 1
    assert payload.rejected_citations == ()
    # every model call is recorded with latency, usage, model version and finish reason
    assert len(record.model_calls) == 3 == len(srv.posts())
    for call in record.model_calls:
        assert call.provider == wire.provider and call.model == wire.model
        assert call.latency_ms > 0 and call.tokens_in and call.tokens_out
        assert call.finish_reason and call.model_version and call.retries == 0
    assert record.config["provider"] == wire.provider and record.config["model"] == wire.model


@pytest.mark.parametrize("target,valid,distance", [(URL, True, None), (CORRUPTED, False, 1), (FABRICATED, False, None)],
                         ids=["good", "corrupted", "fabricated"])
def test_citations_good_corrupted_fabricated(wire, demo_session, target, valid, distance):
    with ScriptedServer(script(wire, f"Use your IdP's metadata ([SAML setup]({target})).")) as srv:
        payload = demo_session.ask(QUESTION, log=False, provider=wire.provider, **wire.options(srv.url)).payload
    assert payload.status == "ok"
    assert payload.sets.consulted == (DOC,)  # opened in full: consulted whether or not the link is right
    if valid:
        assert payload.sets.cited == (DOC,) and payload.rejected_citations == ()
        return
    assert payload.sets.cited == ()
    [rejected] = payload.rejected_citations
    assert rejected.target == target and rejected.reason == "not_retrieved"
    if distance is not None:  # never auto-corrected, but explained
        assert rejected.nearest_doc_id == DOC and rejected.edit_distance == distance
    else:
        assert rejected.edit_distance is None or rejected.edit_distance > 1


def test_excerpt_mode_sends_no_tools_and_cites_numbers(wire, demo_session):
    with ScriptedServer([wire.reply("Paste the IdP metadata into the SSO settings [1]. Not covered: Okta [9].")]) as srv:
        result = demo_session.ask(QUESTION, log=False, provider=wire.provider, mode="excerpts", **wire.options(srv.url))
    payload = result.payload
    assert payload.status == "ok" and payload.mode == "excerpts"
    [request] = srv.posts()
    assert not request.body.get("tools")  # excerpt mode is a single shot without tools (ollama sends [])
    assert "[1]" in json.dumps(request.body)
    first = result.record.excerpts[0].doc_id
    assert payload.sets.cited == (first,) and payload.sets.consulted == (first,)
    assert [r.target for r in payload.rejected_citations] == ["[9]"]
    assert payload.rejected_citations[0].reason == "out_of_range"


def test_cli_ask_end_to_end(wire, tmp_path):
    answer = f"See [Configure SAML SSO]({URL})."
    with ScriptedServer(script(wire, answer)) as srv:  # `workbench ask` in this process (tests/clirun.py)
        proc = cli("ask", "--provider", wire.provider, "--model", wire.model, QUESTION, "--json", env=wire.env(srv.url))
    assert proc.returncode == 0, proc.stderr
    payload = json.loads(proc.stdout)
    assert payload["status"] == "ok"
    assert payload["sets"]["consulted"] == [DOC] and payload["sets"]["cited"] == [DOC]
    assert payload["config"]["provider"] == wire.provider and payload["config"]["model"] == wire.model
    assert [t["name"] for t in payload["tool_calls"]] == ["search", "fetch_document"]
    assert len(srv.posts()) == 3
