"""Support judges: does this evidence support this claim? Selected by name from a registry.

Every judge returns a `Judgement`: a score in [0, 1] (None only when the judge could not answer),
a verdict (`supported` / `partial` / `unsupported`, or `unknown` with a reason when a judge
failed) and the best supporting span of the evidence. The built-ins below are registered by
`builtins.py` through `register_judge`, exactly as one written by a user would be.

- `lexical` (default; offline, no model): phrase-aware overlap of stemmed content words, see
  `LexicalJudge`.
- `embedding`: cosine similarity of local WordLlama embeddings (claim vs. the whole evidence and
  vs. its best 3-sentence window); weights ship inside the `wordllama` package, nothing downloads.
- `hybrid`: the mean of `lexical` and `embedding`.
- `llm`: any configured chat provider asked with a versioned prompt; its verdict is parsed from
  JSON or, failing that, from keywords. Provider errors become verdict `unknown`, never a crash.
"""

from __future__ import annotations

import json
import re
from abc import ABC, abstractmethod
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Sequence

from ..config import DEFAULT_JUDGE
from ..errors import ProviderError, WorkbenchError
from ..providers import get_provider
from ..redact import scrub_secrets
from ..registry import Registry
from ..text import content_terms, plain, sentences
from .tiling import tile as _tile

VERDICTS = ("supported", "partial", "unsupported")
SPAN_CHARS = 600


@dataclass(frozen=True)
class Judgement:
    score: float | None
    verdict: str  # supported | partial | unsupported | unknown
    best_span: str | None = None
    reason: str | None = None


class Judge(ABC):
    """One way of scoring support; subclasses implement `_judge` (and may batch in `judge_many`)."""

    name = "base"
    version = "1"
    #: score ≥ supported → "supported"; score ≥ partial → "partial"; else "unsupported".
    thresholds = (0.6, 0.3)
    #: What the score measures, when it is a surface signal rather than a judgement that the evidence
    #: supports the claim (None: the verdict is the judge's own word, as the `llm` judge's). Set, people
    #: are shown "<signal>: high / some / low" (`verdict_label`), never "supported".
    signal: str | None = None
    #: One sentence on how far its verdicts can be trusted, shown beside them (None: nothing to add).
    caveat: str | None = None

    def verdict(self, score: float) -> str:
        hi, lo = self.thresholds
        return "supported" if score >= hi else "partial" if score >= lo else "unsupported"

    def judge(self, claim: str, evidence: Sequence[str]) -> Judgement:
        """Support of `claim` by the concatenation of `evidence` (a list of texts)."""
        texts = [t for t in evidence if isinstance(t, str) and t.strip()]
        if not texts:
            return Judgement(0.0, "unsupported", None, "no evidence text")
        return self._judge(claim, texts)

    def judge_many(self, items: Sequence[tuple[str, Sequence[str]]]) -> list[Judgement]:
        return [self.judge(c, ev) for c, ev in items]

    @abstractmethod
    def _judge(self, claim: str, texts: list[str]) -> Judgement: ...


JudgeFactory = Callable[..., Judge]
#: Built-ins in `faithfulness/builtins.py`; plug-ins through $WORKBENCH_PLUGINS or the entry-point group.
_JUDGES: Registry[JudgeFactory] = Registry("judge", f"{__package__}.builtins", "workbench.judges")
#: Register a judge class or factory under a name; usable as a class decorator.
register_judge = _JUDGES.register
judge_names = _JUDGES.names


def get_judge(name: str = DEFAULT_JUDGE, **options: Any) -> Judge:
    return _JUDGES.build(name, **options)


#: How a signal judge's verdict reads: the level of its signal, not a claim of support.
SIGNAL_LEVELS = {"supported": "high", "partial": "some", "unsupported": "low"}


def judge_declares(name: str, attribute: str) -> Any:
    """An attribute (`signal`, `caveat`) the judge registered as `name` declares, without building it; a
    plain factory function or an unknown name declares nothing (None)."""
    try:
        factory = _JUDGES.factory(name)
    except WorkbenchError:
        return None
    return getattr(factory, attribute, None)


def verdict_label(judge: str, verdict: str | None) -> str | None:
    """A verdict as people should read it: "word overlap: high" for the `lexical` judge's "supported" (a
    judge with a `signal` measures that signal, not support), the verdict itself for other judges and for
    verdicts that are not levels (`uncited`, `unknown`)."""
    signal = judge_declares(judge, "signal")
    if signal and verdict in SIGNAL_LEVELS:
        return f"{signal}: {SIGNAL_LEVELS[verdict]}"
    return verdict


# --- windows and spans -------------------------------------------------------------------------


def _windows(texts: list[str], size: int = 3) -> list[str]:
    """Sentence windows of up to `size` sentences over each text (never across texts)."""
    out = []
    for t in texts:
        ss = sentences(plain(t))
        out.extend(" ".join(ss[i:i + size]) for i in range(max(1, len(ss) - size + 1)))
    return [w for w in out if w]


def best_span(claim_terms: set[str], texts: list[str]) -> str | None:
    """The 1–3 sentence window of the evidence containing most of the claim's content words."""
    best, best_key = None, (0, 0)
    for t in texts:
        ss = sentences(plain(t))
        terms = [set(content_terms(s)) for s in ss]
        for i in range(len(ss)):
            for size in (1, 2, 3):
                if i + size > len(ss):
                    break
                covered = len(claim_terms & set().union(*terms[i:i + size]))
                key = (covered, -size)
                if covered and key > best_key:
                    best, best_key = " ".join(ss[i:i + size]), key
    return best[:SPAN_CHARS] if best else None


# --- lexical -----------------------------------------------------------------------------------


class LexicalJudge(Judge):
    """Phrase-aware content-word coverage, shrunk for short claims.

    score = (terms covered by shared phrases + ½ · terms matched alone) / (claim terms + 2)

    Terms are stemmed content words (`text.content_terms`). Phrases (≥ 2 consecutive terms in the
    same order) count fully and lone words half, because a claim assembled from scattered words of
    the evidence is weaker support than one whose phrases the evidence states. The `+ 2` shrinks
    the score of very short claims, whose full overlap is weak evidence. On ExpertQA this beats the
    plain fraction-in-best-window baseline (benchmarks/README.md); IDF weighting did not help there,
    so the judge needs no corpus statistics and scores one claim at a time.
    """

    name = "lexical"
    version = "lexical-v1"
    thresholds = (0.55, 0.3)
    signal = "word overlap"
    caveat = ("The lexical judge counts the words each statement shares with the text it cites; it does not check "
              "that the text says the same thing.")

    def _judge(self, claim: str, texts: list[str]) -> Judgement:
        ct = content_terms(plain(claim))
        if not ct:
            return Judgement(0.0, "unsupported", None, "claim has no content words")
        ev: list[str | None] = []
        for t in texts:
            ev.extend(content_terms(plain(t)))
            ev.append(None)
        tiled, lone = _tile(ct, ev)
        score = min(1.0, (tiled + 0.5 * lone) / (len(ct) + 2))
        return Judgement(round(score, 4), self.verdict(score), best_span(set(ct), texts))


# --- embedding ---------------------------------------------------------------------------------


@lru_cache(maxsize=1)
def _wordllama():
    try:
        import wordllama
        from wordllama import WordLlama
    except ImportError:  # pragma: no cover - wordllama is in requirements.txt
        raise WorkbenchError("the embedding judge needs wordllama: run `pip install wordllama`") from None
    # The weights ship inside the package; disable_download keeps us offline.
    return WordLlama.load(cache_dir=Path(wordllama.__file__).parent, disable_download=True)


class EmbeddingJudge(Judge):
    """Cosine of WordLlama embeddings: max(claim vs. all evidence, claim vs. best 3-sentence window).

    Cosines are mapped linearly from [`low`, `high`] to [0, 1] (clipped), so the score reads like
    the other judges'; the mapping is monotone, so it does not change AUROC.
    """

    name = "embedding"
    version = "wordllama-l2_supercat-256-v1"
    signal = "embedding similarity"
    low, high = 0.3, 0.9
    thresholds = (0.6, 0.4)

    def _judge(self, claim: str, texts: list[str]) -> Judgement:
        return self.judge_many([(claim, texts)])[0]

    def judge_many(self, items: Sequence[tuple[str, Sequence[str]]]) -> list[Judgement]:
        import numpy as np

        model = _wordllama()
        out: list[Judgement | None] = [None] * len(items)
        batch, where = [], []
        for k, (claim, evidence) in enumerate(items):
            texts = [t for t in evidence if isinstance(t, str) and t.strip()]
            c = plain(claim).strip()
            if not texts or not content_terms(c):
                out[k] = Judgement(0.0, "unsupported", None, "no evidence text" if not texts else "claim has no content words")
                continue
            wins = _windows(texts)
            where.append((k, len(batch), len(wins), c))
            batch.extend([c, "\n".join(plain(t) for t in texts)] + wins)
        if batch:
            emb = model.embed(batch, norm=True)
            for k, at, n_wins, c in where:
                sims = emb[at + 1:at + 2 + n_wins] @ emb[at]
                cos = float(np.max(sims)) if len(sims) else 0.0
                score = min(1.0, max(0.0, (cos - self.low) / (self.high - self.low)))
                span = None
                if n_wins:
                    wins = batch[at + 2:at + 2 + n_wins]
                    span = wins[int(np.argmax(sims[1:]))][:SPAN_CHARS]
                out[k] = Judgement(round(score, 4), self.verdict(score), span)
        return out  # type: ignore[return-value]


class HybridJudge(Judge):
    """Mean of the lexical and embedding scores; best span from the lexical judge."""

    name = "hybrid"
    version = "hybrid-v1"
    signal = "overlap and similarity"
    thresholds = (0.55, 0.35)

    def __init__(self):
        self.lexical, self.embedding = LexicalJudge(), EmbeddingJudge()

    def _judge(self, claim: str, texts: list[str]) -> Judgement:
        return self.judge_many([(claim, texts)])[0]

    def judge_many(self, items: Sequence[tuple[str, Sequence[str]]]) -> list[Judgement]:
        lex = self.lexical.judge_many(items)
        emb = self.embedding.judge_many(items)
        out = []
        for a, b in zip(lex, emb):
            score = round((a.score + b.score) / 2, 4)
            out.append(Judgement(score, self.verdict(score), a.best_span or b.best_span, a.reason))
        return out


# --- llm ---------------------------------------------------------------------------------------

LLM_PROMPT_VERSION = "judge-v1"
LLM_SYSTEM = (
    "You check whether evidence supports a claim. Judge only from the evidence given, not from what "
    "you know. Answer with one JSON object and nothing else: "
    '{"verdict": "supported" | "partial" | "unsupported", "score": <number 0..1>, '
    '"span": "<the shortest quote of the evidence that supports the claim, or empty>"}. '
    "supported = every part of the claim is stated or directly implied by the evidence; "
    "partial = some parts are, others are missing; unsupported = the evidence does not back the claim."
)
_SCORE_OF = {"supported": 1.0, "partial": 0.5, "unsupported": 0.0}
_KEYWORDS = [
    (re.compile(r"\b(?:unsupported|not\s+supported|does\s+not\s+support|doesn't\s+support|no\s+support)\b", re.I), "unsupported"),
    (re.compile(r"\b(?:partial(?:ly)?(?:\s+supported)?)\b", re.I), "partial"),
    (re.compile(r"\b(?:supported|fully\s+supports|supports)\b", re.I), "supported"),
]


def llm_messages(claim: str, texts: list[str]) -> list[dict[str, str]]:
    evidence = "\n\n".join(f"[{i}] {plain(t).strip()}" for i, t in enumerate(texts, start=1))
    return [{"role": "system", "content": LLM_SYSTEM},
            {"role": "user", "content": f"Claim:\n{plain(claim).strip()}\n\nEvidence:\n{evidence}\n\nJSON verdict:"}]


def _json_object(text: str) -> str | None:
    """From the first `{` to the last `}` (what `\\{.*\\}` matched), found in linear time: the regex
    rescanned to the end from every `{`, quadratic on a reply full of braces."""
    end = text.rfind("}")
    start = text.find("{", 0, end) if end > 0 else -1
    return text[start:end + 1] if start != -1 else None


def parse_verdict(text: str) -> tuple[float | None, str, str | None, str | None]:
    """(score, verdict, span, reason) from a model's reply: JSON first, then keywords; never raises."""
    if not isinstance(text, str) or not text.strip():
        return None, "unknown", None, "empty reply from the judge model"
    blob = _json_object(text)
    if blob:
        try:
            obj = json.loads(blob)
        except (ValueError, RecursionError):  # also integers beyond Python's 4,300-digit limit
            obj = None
        if isinstance(obj, dict):
            verdict = str(obj.get("verdict", "")).strip().lower().replace(" ", "_")
            verdict = {"not_supported": "unsupported", "partially_supported": "partial"}.get(verdict, verdict)
            score = obj.get("score")
            try:
                score = None if score is None or isinstance(score, bool) else min(1.0, max(0.0, float(score)))
            except (TypeError, ValueError):
                score = None
            if score != score:  # NaN
                score = None
            if verdict in _SCORE_OF:
                span = obj.get("span")
                span = str(span)[:SPAN_CHARS] if span else None
                return (_SCORE_OF[verdict] if score is None else score), verdict, span, None
    hits = [(m.start(), v) for rx, v in _KEYWORDS for m in [rx.search(text)] if m]
    if hits:
        verdict = min(hits)[1]  # the first verdict word the model wrote
        return _SCORE_OF[verdict], verdict, None, "verdict parsed from keywords, not JSON"
    return None, "unknown", None, f"could not parse a verdict from the judge model's reply: {text[:120]!r}"


class LLMJudge(Judge):
    """A chat provider as judge (`provider`, `model`); one call per claim, no tools."""

    name = "llm"
    version = LLM_PROMPT_VERSION

    def __init__(self, provider: str = "ollama", model: str | None = None, fail_fast: bool = False,
                 **provider_options: Any):
        self.provider_name, self.model, self.provider_options = provider, model, provider_options
        #: `judge --method llm` sets it: a provider that fails ends the run with its reason (exit 2)
        #: instead of a column of "unknown" verdicts; inside a turn the verdict is "unknown".
        self.fail_fast = fail_fast
        # Failing fast, an unknown provider is an error at once (building one touches no network).
        self._provider = get_provider(provider, model=model, **provider_options) if fail_fast else None

    def _judge(self, claim: str, texts: list[str]) -> Judgement:
        try:
            if self._provider is None:
                self._provider = get_provider(self.provider_name, model=self.model, **self.provider_options)
            step = self._provider.complete(llm_messages(claim, texts), [])
            score, verdict, span, reason = parse_verdict(step.text)
        except ProviderError as exc:  # already redacted by the provider's failure path
            if self.fail_fast:
                raise
            return Judgement(None, "unknown", None, f"ProviderError: {exc}")
        except Exception as exc:  # a judge must never crash a turn: record why it could not answer
            if self.fail_fast:
                raise ProviderError(scrub_secrets(f"the judge model failed: {type(exc).__name__}: {exc}")) from None
            return Judgement(None, "unknown", None, scrub_secrets(f"{type(exc).__name__}: {exc}"))
        return Judgement(score, verdict, span, reason)
