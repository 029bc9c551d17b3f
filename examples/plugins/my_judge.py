# examples/plugins/my_judge.py
from workbench.faithfulness import Judge, Judgement, register_judge
from workbench.text import content_terms


class WordOverlap(Judge):
    """The share of the claim's content words found anywhere in the evidence."""

    name = "overlap"
    version = "overlap-v1"
    thresholds = (0.8, 0.5)  # supported at ≥ 0.8, partial at ≥ 0.5

    def _judge(self, claim, texts):
        terms = set(content_terms(claim))
        if not terms:
            return Judgement(0.0, "unsupported", None, "claim has no content words")
        score = len(terms & set(content_terms(" ".join(texts)))) / len(terms)
        return Judgement(round(score, 4), self.verdict(score))


register_judge("overlap", WordOverlap)
