"""Citation faithfulness: is each claim supported by the text it cites? (issue 8)

Sits right of provenance in the one-way flow: imports provenance, types, text, corpus and
providers (for the `llm` judge), never trace, app or CLI.
"""

from .claims import Claim, ClaimCitation, split_claims
from .judges import Judge, Judgement, get_judge, judge_names, parse_verdict, register_judge
from .turn import ClaimResult, TurnFaithfulness, WrongExcerpt, answer_kind, assess_turn

__all__ = [
    "Claim", "ClaimCitation", "ClaimResult", "Judge", "Judgement", "TurnFaithfulness", "WrongExcerpt",
    "answer_kind", "assess_turn", "get_judge", "judge_names", "parse_verdict", "register_judge", "split_claims",
]
