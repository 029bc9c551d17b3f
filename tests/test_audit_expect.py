"""Matching an audited run's turns to a questions file's lines (`audit/expect.py`, docs/audit.md)."""

from __future__ import annotations

import unicodedata

from workbench.audit.expect import RunTurn, match_turns
from workbench.questions import Question


def test_lines_on_their_own_match_by_nfc_text_and_conversations_by_session_and_position():
    cafe = "Open the café menu?"
    lines = [Question(unicodedata.normalize("NFD", cafe) + "  ", 1),
             Question("How do I do SSO?", 2, conversation="s1"), Question("And with Okta?", 3, conversation="s1"),
             Question("And with Okta?", 4), Question("Never asked?", 5)]
    turns = [RunTurn("a", cafe), RunTurn("b", "How do I do SSO?", "s1"), RunTurn("c", "Then what?", "s1"),
             RunTurn("d", "Hi", "s2"), RunTurn("e", "And with Okta?", "s2")]
    m = match_turns(lines, turns)
    # line 3 is the second turn of session s1, whatever it asked; a follow-up ("e") answers no line on its own
    assert m.lines == ((1, "a"), (2, "b"), (3, "c"))
    assert [q.line for q in m.unmatched_questions] == [4, 5]
    assert [t.turn_id for t in m.unmatched_turns] == ["d", "e"]


def test_lines_asking_one_question_take_its_turns_in_order_and_a_turn_answers_one_line():
    lines = [Question("Hi?", 1), Question("Hi?", 2)]
    assert match_turns(lines, [RunTurn("a", "Hi?"), RunTurn("b", "Hi?"), RunTurn("c", "Hi?")]).lines == \
        ((1, "a"), (2, "b"), (2, "c"))
    m = match_turns(lines, [RunTurn("a", "Hi?")])
    assert m.lines == ((1, "a"),) and [q.line for q in m.unmatched_questions] == [2]


def test_unmatched_lines_and_turns_are_listed_up_to_their_bound_and_the_rest_counted(capsys):
    """docs/security.md: `--questions` names at most `SHOWN_UNMATCHED` unmatched lines and turns of each kind on
    stderr, and counts the rest."""
    from workbench.audit.expect import Matching, RunTurn
    from workbench.commands._audit import SHOWN_UNMATCHED, _unmatched
    from workbench.questions import Question

    n = SHOWN_UNMATCHED + 5
    _unmatched("q.jsonl", Matching(lines=(), unmatched_questions=tuple(Question(f"q{i}?", i + 1) for i in range(n)),
                                   unmatched_turns=(RunTurn("t-1", "Hi?"),)))
    err = capsys.readouterr().err
    assert f"{n} questions no turn answered" in err and "1 turns no question matched" in err
    assert [line for line in err.splitlines() if line.startswith("  - q.jsonl:")] == \
        [f"  - q.jsonl:{i + 1}: 'q{i}?'" for i in range(SHOWN_UNMATCHED)]
    assert "  … and 5 more" in err and "  - turn t-1\n" in err


def test_unmatched_turns_are_named_by_id_only_unless_verbose(capsys):
    """Issue 40, item 4: a turn's question and session are the audited app's users', and stderr lands in CI logs:
    `--questions` names an unmatched turn by its id, and by its question and session only with `--verbose`."""
    from workbench.audit.expect import Matching, RunTurn
    from workbench.commands._audit import _unmatched

    m = Matching(lines=(), unmatched_questions=(), unmatched_turns=(RunTurn("otel-1", "My card 4111 expired?", "s-9"),))
    _unmatched("q.jsonl", m)
    err = capsys.readouterr().err
    assert "  - turn otel-1\n" in err and "4111" not in err and "s-9" not in err and "--verbose" in err
    _unmatched("q.jsonl", m, verbose=True)
    assert "  - turn otel-1: 'My card 4111 expired?' (session 's-9')" in capsys.readouterr().err
