"""The `llamacpp` repetition guard's rule (issue 23, item 6): a loop is cut after its first copy, an answer that
repeats itself for a reason is not. The guard on the real model is in tests/test_real_model.py."""

from __future__ import annotations

import pytest

from workbench.providers.llamacpp import DEFAULT_MAX_TOKENS, REPEAT_MIN_CHARS, LlamaCppProvider, repetition_cut

ANSWER = "To reset your password, open the sign-in page and click **Forgot password**."
LINK = "[Reset a forgotten password](https://help.orbitly.example/account/password-reset)"


@pytest.mark.parametrize("loop, copies", [
    ("I'm here to help you with anything you need. ", 1),
    ("password ", 3),  # a short loop is found as a multiple of its period (at least REPEAT_MIN_CHARS)
    ("1234567890", 2),  # no spaces at all
])
def test_a_loop_is_cut_after_its_first_copy(loop, copies):
    text = ANSWER + "\n\n" + loop * 12
    for end in range(len(ANSWER), len(text) + 1):  # as the stream grows: it fires once the third copy is complete
        cut = repetition_cut(text[:end])
        if cut is not None:
            break
    assert cut is not None and text[:cut].rstrip() == (ANSWER + "\n\n" + loop * copies).rstrip()
    assert end <= len(ANSWER) + 2 + 3 * copies * len(loop), "by the end of the third copy"


@pytest.mark.parametrize("text", [
    f"Open {LINK}. If the link expired, ask again from {LINK}. Admins reset it for you; see {LINK}. ",
    "".join(f"{n}. Go to Settings → Members.\n" for n in range(1, 30)),
    ANSWER + " " + "." * (REPEAT_MIN_CHARS * 3 - 1),  # shorter than three copies of the shortest passage
    "",
])
def test_repeating_for_a_reason_is_not_a_loop(text):
    assert all(repetition_cut(text[:end]) is None for end in range(len(text) + 1))


def test_the_default_budget_suits_an_answer_and_the_guard_is_on_unless_turned_off():
    assert DEFAULT_MAX_TOKENS == 512
    assert LlamaCppProvider().repeat_guard and not LlamaCppProvider(repeat_guard=False).repeat_guard
    assert LlamaCppProvider.options_schema["properties"]["repeat_guard"]["default"] is True
