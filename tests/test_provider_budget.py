"""A turn has a total time budget (`budget` option, `$WORKBENCH_TURN_BUDGET`): a server that answers 503
forever, or one that keeps the model calling tools, cannot keep a turn running for days
(docs/security.md, "Provider options"). The turns run in a thread the test waits on; no sleep asserts speed."""

from __future__ import annotations

import threading

import pytest

from loopback import WIRES, ScriptedServer
from workbench.providers.http import MAX_RETRIES

QUESTION = "How do I configure SSO?"
both = pytest.mark.parametrize("wire", list(WIRES.values()), ids=list(WIRES))
#: Generous: the turns below end in about a second; without a budget they would take minutes.
WAIT_S = 60


def ask_in_thread(session, wire, url, **options):
    """The turn's record, asked in a thread the test waits on for at most WAIT_S."""
    out = {}

    def run():
        try:
            out["record"] = session.ask(QUESTION, provider=wire.provider, judge=None, **wire.options(url, **options)).record
        except BaseException as exc:  # shown by the assertion below
            out["error"] = exc

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(WAIT_S)
    assert not worker.is_alive(), f"the turn was still running after {WAIT_S} s"
    assert "error" not in out, out.get("error")
    return out["record"]


@both
def test_a_turn_against_a_server_answering_503_forever_ends_within_its_budget(wire, demo_session):
    budget, timeout = 1.0, 5.0
    # Without the budget: 11 attempts and waits of 1, 2, 4, 8, 16, then 30 s five times, over three minutes.
    with ScriptedServer([wire.error(503, "overloaded")], repeat_last=True) as srv:
        record = ask_in_thread(demo_session, wire, srv.url, retries=MAX_RETRIES, backoff=1.0, timeout=timeout,
                               budget=budget)
    assert record.status == "over_budget", (record.status, record.error)
    assert "time budget of 1 s" in record.error and "WORKBENCH_TURN_BUDGET" in record.error, record.error
    assert "503" in record.error  # the last answer, so the operator sees why
    posts = srv.posts()
    assert 1 <= len(posts) < MAX_RETRIES + 1
    # the stated bound, as the server saw it: no request started after the budget (counted from the first)
    assert posts[-1].at - posts[0].at <= budget
    assert record.model_calls[-1].finish_reason == "error"


@both
def test_the_budget_counts_the_whole_turn_not_each_call(wire, demo_session):
    """A server that keeps the model calling tools, each answer 0.4 s late: the third call would start after
    the 1 s budget, so the turn ends there instead of running to the step limit."""
    slow = wire.reply("", [("search", {"query": "SSO"})])
    slow.delay = 0.4
    with ScriptedServer([slow], repeat_last=True) as srv:
        record = ask_in_thread(demo_session, wire, srv.url, budget=1.0)
    assert record.status == "over_budget", (record.status, record.error)
    assert "before the next model call" in record.error, record.error
    assert len(srv.posts()) <= 3 and len(record.tool_calls) >= 1


def test_the_budget_is_read_from_the_environment_within_its_bounds(demo_session, monkeypatch):
    wire = WIRES["ollama"]
    with ScriptedServer([wire.error(503, "overloaded")], repeat_last=True) as srv:
        monkeypatch.setenv("WORKBENCH_TURN_BUDGET", "0.5")
        record = ask_in_thread(demo_session, wire, srv.url, retries=MAX_RETRIES, backoff=1.0)
        assert record.status == "over_budget" and "time budget of 0.5 s" in record.error, record.error
        monkeypatch.setenv("WORKBENCH_TURN_BUDGET", "86400")
        posts = len(srv.posts())
        with pytest.raises(Exception, match=r"WORKBENCH_TURN_BUDGET='86400': 86400 is outside the allowed range "
                                            r"\(more than 0, at most 3600\)"):
            demo_session.ask(QUESTION, provider="ollama", judge=None, **wire.options(srv.url))
        assert len(srv.posts()) == posts  # refused before any request
