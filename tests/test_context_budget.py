"""The token budget of a conversation's history (`context_policy.fit_history`, docs/providers.md "Conversations"):
pure rules, checked on every history hypothesis draws. The wire side is tests/test_providers_history.py."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from workbench.context_policy import fit_history, history_for, token_budget
from workbench.types import ContextPolicy, HistoryTurn, TurnRecord

LEVEL = {"dropped": 0, "answer": 1, "full": 2}
#: Tokens a turn counts as in each state (the caller's `size` renders messages; here a table).
SIZES = {"dropped": 0, "answer": 10, "full": 100}


def turns(states: list[str], sizes=None) -> tuple[HistoryTurn, ...]:
    return tuple(HistoryTurn(record=TurnRecord(question=f"q{i}", answer=f"a{i}", turn_id=f"t{i}"), context=s, position=i)  # type: ignore[arg-type]
                 for i, s in enumerate(states, start=1))


def size(h: HistoryTurn) -> int:
    return SIZES[h.context]


def test_the_oldest_turn_loses_a_level_first_and_the_turn_before_the_question_is_never_dropped():
    history = turns(["answer", "full", "full"])
    assert [h.context for h in fit_history(history, "q", 210, None, size).history] == ["answer", "full", "full"]
    assert [h.context for h in fit_history(history, "q", 209, None, size).history] == ["dropped", "full", "full"]
    assert [h.context for h in fit_history(history, "q", 199, None, size).history] == ["dropped", "answer", "full"]
    assert [h.context for h in fit_history(history, "q", 100, None, size).history] == ["dropped", "dropped", "full"]
    assert [h.context for h in fit_history(history, "q", 99, None, size).history] == ["dropped", "dropped", "answer"]
    fit = fit_history(history, "q", 10, None, size)
    assert fit.overflow is None and fit.tokens == 10
    fit = fit_history(history, "q", 9, 4096, size)
    assert [h.context for h in fit.history] == ["dropped", "dropped", "answer"]
    assert fit.overflow == ("the conversation does not fit: the history needs at least 10 tokens (turn 3's question "
                            "and answer), more than its budget of 9 tokens (of the model's context of 4,096 tokens); "
                            "start a new conversation, or raise the budget")


def test_no_budget_keeps_the_policys_states_and_a_question_too_long_for_the_context_overflows():
    history = turns(["answer", "full"])
    assert fit_history(history, "q", None, None, size) == type(fit_history(history, "q", None, None, size))(history, 110)
    fit = fit_history(history, "x" * 3000, None, 1000, size)
    assert fit.overflow and "the question (about 1,004 tokens) and the history (110 tokens)" in fit.overflow
    assert "context of 1,000 tokens" in fit.overflow


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["answer", "full"]), min_size=1, max_size=8), st.integers(0, 900))
def test_a_fitted_history_fits_and_loses_its_oldest_turns_first(states, budget):
    history = turns(states)
    fit = fit_history(history, "q", budget, None, size)
    after = [h.context for h in fit.history]
    assert [h.record.turn_id for h in fit.history] == [h.record.turn_id for h in history]  # every turn kept, in order
    assert all(LEVEL[a] <= LEVEL[b] for a, b in zip(after, states))  # states only lose levels
    assert after[-1] != "dropped"  # the turn before the question stays
    if fit.overflow is None:
        assert fit.tokens == sum(SIZES[s] for s in after) <= budget
    else:
        assert after[:-1] == ["dropped"] * (len(after) - 1) and after[-1] == "answer" and SIZES["answer"] > budget
    # oldest first: a turn that lost a level has only dropped turns before it
    for i, (a, b) in enumerate(zip(after, states)):
        if a != b:
            assert all(x == "dropped" for x in after[:i]), (states, after)
    # and nothing lost a level that did not have to: the policy's states fit as they were
    if sum(SIZES[s] for s in states) <= budget:
        assert after == states


def test_the_budget_is_the_policys_or_half_the_models_context():
    assert token_budget(ContextPolicy(), 8192) == 4096
    assert token_budget(ContextPolicy(token_budget=1000), 8192) == 1000
    assert token_budget(ContextPolicy(), None) is None


def test_the_steps_of_an_earlier_turn_come_from_its_model_calls():
    from workbench.types import ModelCall, ToolCall

    calls = (ToolCall("search", "snippet", {"query": "x"}), ToolCall("list_categories", "title"),
             ToolCall("fetch_document", "full", {"doc_id": "d"}))
    record = TurnRecord("q", "a", tool_calls=calls, turn_id="t1",
                        model_calls=(ModelCall("p", n_tool_calls=2), ModelCall("p", n_tool_calls=1), ModelCall("p")))
    [h] = history_for([record], ContextPolicy())
    assert h.steps == (2, 1) and h.context == "full"
