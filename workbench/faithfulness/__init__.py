"""Citation faithfulness: is each claim supported by the text it cites? (issue 8)

Sits right of provenance in the one-way flow: imports provenance, types, text, corpus and
providers (for the `llm` judge), never trace, app or CLI.
"""

from .claims import Claim, ClaimCitation, split_claims
from .judges import (Judge, Judgement, get_judge, judge_declares, judge_names, parse_verdict, register_judge,
                     verdict_label)
from .turn import ClaimResult, TurnFaithfulness, WrongExcerpt, answer_kind, assess_turn, shown_texts

__all__ = [
    "Claim", "ClaimCitation", "ClaimResult", "Judge", "Judgement", "TurnFaithfulness", "WrongExcerpt",
    "answer_kind", "assess_turn", "get_judge", "judge_declares", "judge_names", "parse_verdict", "register_judge",
    "shown_texts", "split_claims", "verdict_label",
]
