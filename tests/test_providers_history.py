"""A follow-up's earlier turns reach every provider as real chat messages in its own wire format (docs/design.md §11).

Three scripted conversations go through the official Ollama, Gemini and OpenAI clients to loopback servers
(tests/loopback.py), and through the `llamacpp` provider to a recording stand-in for llama.cpp's in-process
chat-completions handler (the real model runs the same path in test_real_model.py). The oracle is what the
servers themselves received: a follow-up's request starts with exactly the messages of the previous turn's last
request, then that turn's answer, then the new question — every tool call with its id matched to its result,
in the provider's own shape, and the prefix llama.cpp's prompt cache needs. Turns in state `answer` give only
their question and answer; `dropped` turns give nothing.
"""

from __future__ import annotations

import copy
import json
import uuid

import pytest

from conftest import schema_validator
from loopback import WIRES, ScriptedServer, gemini_error, ollama_error, openai_reply
from workbench.types import ContextPolicy

Q1, Q2, Q3 = "How do I configure SSO?", "And with Okta?", "How long does that take?"
DOC = "sso-saml-setup"
URL = "https://help.orbitly.example/articles/sso-saml-setup"
A1 = f"Paste the IdP metadata ([Configure SAML SSO]({URL}))."
A2 = f"Okta works the same way ([Configure SAML SSO]({URL}))."
A3 = "About ten minutes."


def wire_messages(wire: str, body: dict) -> list:
    """The conversation a request carried, in the wire's own shape (Gemini: the system instruction first)."""
    if wire == "gemini":
        return [body.get("systemInstruction")] + body["contents"]
    return body["messages"]


def text_messages(wire: str, question: str, answer: str) -> list:
    """An `answer` turn on the wire: its question and its answer, nothing else."""
    if wire == "gemini":
        return [{"role": "user", "parts": [{"text": question}]}, {"role": "model", "parts": [{"text": answer}]}]
    return [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]


def answer_message(wire: str, answer: str) -> dict:
    return text_messages(wire, "", answer)[1]


def question_message(wire: str, question: str) -> dict:
    return text_messages(wire, question, "")[0]


def tool_pairs(wire: str, messages: list) -> list[tuple[str, str]]:
    """(tool name, result) for every tool call, checking that each result answers a call of the message before."""
    pairs, open_calls = [], {}
    for m in messages:
        if wire == "openai":
            if m["role"] == "assistant" and m.get("tool_calls"):
                open_calls = {c["id"]: c["function"]["name"] for c in m["tool_calls"]}
            elif m["role"] == "tool":
                assert m["tool_call_id"] in open_calls, (m, open_calls)  # ids matched to results
                pairs.append((open_calls.pop(m["tool_call_id"]), m["content"]))
        elif wire == "ollama":
            if m["role"] == "assistant" and m.get("tool_calls"):
                open_calls = {c["function"]["name"]: 1 for c in m["tool_calls"]}
            elif m["role"] == "tool":
                assert m["tool_name"] in open_calls, (m, open_calls)
                pairs.append((open_calls.pop(m["tool_name"]) and m["tool_name"], m["content"]))
        else:
            for part in (m or {}).get("parts", []):
                if "functionCall" in part:
                    open_calls[part["functionCall"]["name"]] = 1
                elif "functionResponse" in part:
                    fr = part["functionResponse"]
                    assert fr["name"] in open_calls, (fr, open_calls)
                    open_calls.pop(fr["name"])
                    pairs.append((fr["name"], json.dumps(fr["response"], sort_keys=True)))
    assert not open_calls, f"tool calls without a result: {open_calls}"
    return pairs


@pytest.fixture(params=list(WIRES), ids=list(WIRES))
def wire(request):
    return WIRES[request.param]


#: Room for every turn here whatever the provider's context (Ollama's default 4096 would turn turn 1 to `answer`).
ROOMY = ContextPolicy(token_budget=100_000)


def converse(session, wire, replies, questions, policies=None, **extra):
    """Ask `questions` as one conversation against one server scripted with `replies`; (answers, requests of each
    turn). Turn i's context policy is `policies[i]`, else `ROOMY`."""
    answers, per_turn = [], []
    cid = f"c-{uuid.uuid4().hex[:12]}"  # a conversation of its own: the store places a turn after its conversation's
    with ScriptedServer(replies) as srv:
        for i, q in enumerate(questions):
            seen = len(srv.posts())
            answers.append(session.ask(q, provider=wire.provider, history=[a.record for a in answers],
                                       conversation_id=cid, context=(policies or {}).get(i, ROOMY),
                                       **wire.options(srv.url, **extra)))
            assert answers[-1].record.status == "ok", answers[-1].record.error
            per_turn.append(srv.posts()[seen:])
    return answers, per_turn


def three_turns(wire):
    return [wire.reply("", [("search", {"query": "configure SSO"})]),
            wire.reply("", [("fetch_document", {"doc_id": DOC})]), wire.reply(A1),
            wire.reply("", [("search", {"query": "Okta SSO"})]), wire.reply(A2),
            wire.reply(A3)]


def test_a_follow_up_sends_the_earlier_turn_exactly_as_its_last_request_had_it(wire, demo_session):
    """Turn 2's request = turn 1's last request (system, question, each step's calls and results) + turn 1's
    answer + the new question; every tool result is matched to its call."""
    answers, requests = converse(demo_session, wire, three_turns(wire)[:5], [Q1, Q2])
    last_of_1 = wire_messages(wire.provider, requests[0][-1].body)
    first_of_2 = wire_messages(wire.provider, requests[1][0].body)
    assert first_of_2 == last_of_1 + [answer_message(wire.provider, A1), question_message(wire.provider, Q2)]
    assert [name for name, _ in tool_pairs(wire.provider, first_of_2)] == ["search", "fetch_document"]
    # and the turn's own steps go on after it
    second_of_2 = wire_messages(wire.provider, requests[1][1].body)
    assert second_of_2[:len(first_of_2)] == first_of_2
    assert [n for n, _ in tool_pairs(wire.provider, second_of_2)] == ["search", "fetch_document", "search"]
    record = answers[1].record
    assert [(h.position, h.context, h.steps) for h in record.history] == [(1, "full", (1, 1))]
    assert record.config["context"]["budget_tokens"] == 100_000 and record.position == 2 and record.conversation_id == answers[0].record.conversation_id
    schema_validator("turn-record.schema.json").validate(json.loads(json.dumps(record.to_dict(), default=str)))


def test_answer_turns_give_question_and_answer_and_dropped_turns_nothing(wire, demo_session):
    """Turn 3 with `--context-turns 1`: turn 1 is `answer` (no tool calls on the wire), turn 2 `full`. Then the
    same conversation within a token budget that drops turn 1: nothing of it reaches the server."""
    answers, requests = converse(demo_session, wire, three_turns(wire), [Q1, Q2, Q3],
                                 {2: ContextPolicy(turns=1, token_budget=100_000)})
    sent = wire_messages(wire.provider, requests[2][0].body)
    turn2 = wire_messages(wire.provider, requests[1][-1].body)
    at_q2 = turn2.index(question_message(wire.provider, Q2))
    expected = ([turn2[0]] + text_messages(wire.provider, Q1, A1) + turn2[at_q2:]
                + [answer_message(wire.provider, A2), question_message(wire.provider, Q3)])
    assert sent == expected
    assert [n for n, _ in tool_pairs(wire.provider, sent)] == ["search"]  # turn 2's only
    assert [h.context for h in answers[2].record.history] == ["answer", "full"]

    # a budget that holds turn 2 whole but not turn 1 as well: turn 1 is dropped, the oldest first
    first_two = [a.record for a in answers[:2]]
    with ScriptedServer([wire.reply(A3)]) as srv:
        budget = ContextPolicy(turns=2, token_budget=_tokens_of(answers[2].record.history[1:], demo_session) + 5)
        third = demo_session.ask(Q3, provider=wire.provider, history=first_two, conversation_id=first_two[0].conversation_id,
                                 context=budget, **wire.options(srv.url))
        [request] = srv.posts()
    assert third.record.status == "ok", third.record.error
    assert [h.context for h in third.record.history] == ["dropped", "full"]
    sent = wire_messages(wire.provider, request.body)
    assert question_message(wire.provider, Q1) not in sent and answer_message(wire.provider, A1) not in sent
    assert sent == [turn2[0]] + turn2[at_q2:] + [answer_message(wire.provider, A2), question_message(wire.provider, Q3)]
    assert third.record.config["context"] == {"turns": 2, "token_budget": budget.token_budget,
                                              "budget_tokens": budget.token_budget,
                                              "context_tokens": third.record.config["context"]["context_tokens"]}


def _tokens_of(history, session) -> int:
    from workbench.agent import turn_messages
    from workbench.context_policy import messages_tokens

    return sum(messages_tokens(turn_messages(h, session.toolbox)) for h in history)


def test_json_steps_carry_the_history_in_their_own_shape_and_count_only_this_turns_steps(demo_session):
    """json-steps (openai here; llamacpp below): earlier steps go back as the assistant's JSON actions with
    `Result of` messages, the earlier answer as its `answer` action; this turn's first step must still be a
    tool action, however many steps the history holds (before the fix it counted them and offered `answer`)."""
    wire = WIRES["openai"]
    steps = [openai_reply(json.dumps({"action": "search", "query": "configure SSO"})),
             openai_reply(json.dumps({"action": "fetch_document", "doc_id": DOC})),
             openai_reply(json.dumps({"action": "answer", "answer": A1})),
             openai_reply(json.dumps({"action": "search", "query": "Okta"})),
             openai_reply(json.dumps({"action": "answer", "answer": A2}))]
    _, requests = converse(demo_session, wire, steps, [Q1, Q2], tool_protocol="json-steps")
    last_of_1, first_of_2 = requests[0][-1].body, requests[1][0].body
    assert first_of_2["messages"] == last_of_1["messages"] + [
        {"role": "assistant", "content": json.dumps({"action": "answer", "answer": A1})},
        {"role": "user", "content": Q2}]
    assert [m["content"].split(":")[0] for m in first_of_2["messages"] if m["content"].startswith("Result of")] == \
        ["Result of search", "Result of fetch_document"]
    assert "tools" not in first_of_2 and "tool_calls" not in json.dumps(first_of_2["messages"])
    actions = lambda body: {v["properties"]["action"]["const"]  # noqa: E731
                            for v in body["response_format"]["json_schema"]["schema"].get("anyOf", [
                                body["response_format"]["json_schema"]["schema"]])}
    assert "answer" not in actions(first_of_2) and "search" in actions(first_of_2)  # this turn's first step
    # `list_categories` takes no arguments: turn 1 did not call it, so turn 2 still may (only this turn counts)
    assert "list_categories" in actions(first_of_2)
    assert "answer" in actions(requests[1][1].body)


# --- llamacpp: the request handed to llama.cpp's in-process chat-completions handler ----------------------------

class RecordingLlama:
    """Takes the requests `LlamaCppProvider` hands to `xllamacpp.Server.handle_chat_completions` and answers each
    with the next scripted chat-completion body."""

    def __init__(self, bodies):
        self.bodies, self.requests = list(bodies), []

    def handle_chat_completions(self, request, callback=None):
        self.requests.append(copy.deepcopy(request))
        body = self.bodies.pop(0) if len(self.bodies) > 1 else self.bodies[0]
        return copy.deepcopy(body)


@pytest.fixture
def llama(monkeypatch):
    from workbench.providers import llamacpp

    def serve(bodies, n_ctx=8192):
        server = RecordingLlama(bodies)
        model = llamacpp.LoadedModel(server, "/models/test.gguf", n_ctx, 1, 0.0, "http://127.0.0.1:1", "key")
        monkeypatch.setattr(llamacpp, "load", lambda *a, **k: model)
        return server
    return serve


@pytest.mark.parametrize("protocol", ["native", "json-steps"])
def test_llamacpp_follow_up_renders_the_identical_prefix_in_both_protocols(llama, demo_session, protocol):
    """The prefix llama.cpp's prompt cache reuses: turn 2's first request starts with turn 1's last request's
    messages unchanged, tools and system prompt included; the cache is asked for."""
    if protocol == "native":
        bodies = [openai_reply(None, [("search", {"query": "SSO"})]).body,
                  openai_reply(None, [("fetch_document", {"doc_id": DOC})]).body, openai_reply(A1).body,
                  openai_reply(A2).body]
    else:
        bodies = [openai_reply(json.dumps(s)).body for s in (
            {"action": "search", "query": "SSO"}, {"action": "fetch_document", "doc_id": DOC},
            {"action": "answer", "answer": A1}, {"action": "search", "query": "Okta"},
            {"action": "answer", "answer": A2})]
    server = llama(bodies)
    opts = dict(provider="llamacpp", model="/models/test.gguf", tool_protocol=protocol, repeat_guard=False)
    first = demo_session.ask(Q1, conversation_id="c-2", **opts)
    n1 = len(server.requests)
    second = demo_session.ask(Q2, history=[first.record], conversation_id="c-2", **opts)
    assert first.record.status == second.record.status == "ok", second.record.error
    last_of_1, first_of_2 = server.requests[n1 - 1], server.requests[n1]
    prefix = first_of_2["messages"][:len(last_of_1["messages"])]
    assert prefix == last_of_1["messages"] and first_of_2.get("tools") == last_of_1.get("tools")
    assert first_of_2["messages"][len(prefix):][-1] == {"role": "user", "content": Q2}
    assert all(r["cache_prompt"] is True for r in server.requests)
    if protocol == "native":
        tool_pairs("openai", first_of_2["messages"])  # ids matched to results
        assert first_of_2["messages"][len(prefix)] == {"role": "assistant", "content": A1}
    # the budget is half of the context the model is loaded with
    assert second.record.config["context"]["context_tokens"] == 8192
    assert second.record.config["context"]["budget_tokens"] == 4096


def test_verification_re_runs_a_follow_up_with_the_prompt_cache_off(llama, demo_session):
    """verify's reproducibility rule holds in a conversation: the follow-up asked with `verify=True` and every
    re-run of it go to llama.cpp with `cache_prompt: false` (and temperature 0, seed 0)."""
    server = llama([openai_reply("Paste the IdP metadata [1].").body])
    opts = dict(provider="llamacpp", model="/models/test.gguf", mode="excerpts", k=2, repeat_guard=False)
    first = demo_session.ask(Q1, conversation_id="c-3", **opts)
    n1 = len(server.requests)
    second = demo_session.ask(Q2, history=[first.record], conversation_id="c-3", verify=True, verify_budget=2, **opts)
    assert second.record.status == "ok" and second.verification is not None
    assert second.verification.extra_turns == 2
    later = server.requests[n1:]
    assert len(later) == 3  # the follow-up, its control and one candidate
    assert [(r["cache_prompt"], r["temperature"], r["seed"]) for r in later] == [(False, 0.0, 0)] * 3
    assert server.requests[0]["cache_prompt"] is True  # asked without verify: the cache is used


# --- context overflow: the budget's own, and the servers' -------------------------------------------------------

def test_a_history_that_cannot_fit_ends_context_overflow_before_any_call(wire, demo_session):
    answers, _ = converse(demo_session, wire, three_turns(wire)[:3], [Q1])
    with ScriptedServer([wire.reply(A2)]) as srv:
        result = demo_session.ask(Q2, provider=wire.provider, history=[answers[0].record],
                                  conversation_id=answers[0].record.conversation_id,
                                  context=ContextPolicy(token_budget=10), **wire.options(srv.url))
        assert srv.posts() == []  # nothing was sent
    record = result.record
    assert record.status == "context_overflow" and "Traceback" not in record.error
    assert "budget of 10 tokens" in record.error and "turn 1's question and answer" in record.error
    assert [h.context for h in record.history] == ["answer"]  # the turn before is never dropped
    assert record.config["context"]["budget_tokens"] == 10 and not record.model_calls
    schema_validator("payload.schema.json").validate(result.payload.to_json())


@pytest.mark.parametrize("name,reply,size", [
    ("gemini", gemini_error(400, "The input token count (1200000) exceeds the maximum number of tokens allowed "
                                 "(1048576)."), "1048576"),
    # Ollama's error names no size: the message states the context the budget assumed
    ("ollama", ollama_error(400, "the input length exceeds the context length"), "num_ctx is 4096 tokens"),
])
def test_a_servers_own_context_overflow_is_context_overflow(demo_session, name, reply, size):
    """Every provider's context overflow says how big the context is, so the user knows what to fit in it."""
    wire = WIRES[name]
    with ScriptedServer([reply]) as srv:
        result = demo_session.ask(Q1, provider=name, **wire.options(srv.url))
    assert result.record.status == "context_overflow", result.record.error
    assert "does not fit" in result.record.error and size in result.record.error, result.record.error


def test_a_budget_from_each_providers_context():
    from workbench.context_policy import token_budget
    from workbench.providers import get_provider

    assert get_provider("openai", base_url="http://127.0.0.1:9/v1").context_window() == 4096
    assert get_provider("ollama").context_window() == 4096
    assert get_provider("gemini").context_window() == 1_048_576
    assert get_provider("offline").context_window() is None
    assert token_budget(ContextPolicy(), 4096) == 2048 and token_budget(ContextPolicy(), None) is None
    assert token_budget(ContextPolicy(token_budget=300), 4096) == 300


def test_the_offline_agent_reads_a_follow_ups_messages_without_failing(demo_session):
    """The offline agent's follow-up logic is its own (workbench/providers/offline.py); here only that a history in
    its messages ends the turn cleanly, with the earlier turn recorded as the context held it."""
    first = demo_session.ask(Q1, conversation_id="c-4")
    second = demo_session.ask(Q2, history=[first.record], conversation_id="c-4")
    assert second.record.status == "ok" and second.record.answer, second.record.error
    assert [(h.record.turn_id, h.context) for h in second.record.history] == [(first.record.turn_id, "full")]
    assert second.record.config["context"] == {"turns": 2, "token_budget": None, "budget_tokens": None,
                                               "context_tokens": None}
    schema_validator("payload.schema.json").validate(second.payload.to_json())
