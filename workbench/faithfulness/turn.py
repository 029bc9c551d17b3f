"""Per-turn faithfulness: claim verdicts, ALCE citation recall and precision, wrong excerpts, generated-only support.

A citation means "this text was shown to the model", not "this claim is true"; this module measures
the second. Definitions (ALCE, Gao et al. 2023, https://arxiv.org/abs/2305.14627):
- **citation recall** of a claim is 1 when it has at least one citation and the concatenation of
  its cited texts supports it (judge verdict `supported`), else 0; the turn's recall is the mean
  over all claims, uncited ones included. As in ALCE, a claim with a rejected citation (fabricated
  target or `[n]` out of range) gets recall 0.
- **citation precision**: a citation counts 1 when its claim has recall 1 and it is not
  *irrelevant*; it is irrelevant when it alone does not support the claim AND removing it leaves
  the claim still supported by the rest. With one citation, precision equals recall. The turn's
  precision is over all citations (rejected ones count 0).

Cited text ("what the model was shown"): in agent mode a document opened in full is judged on its
text from the corpus; one seen only as a snippet is judged on the snippets the tools returned (the
model never saw the rest); one seen only as a title has no evidence text. In excerpt mode `[n]` is
judged on the text of excerpt n.

Claims come from substantive answers only (`answer_kind`). A **listing** — every valid citation
points at a document the model saw only as a title, and nothing was consulted — states what the
knowledge base holds, not facts from it, and an **abstention** — a short answer with no valid
citation that says the knowledge base has nothing on the question — states no fact at all; neither
is split into claims (recall and precision are then None, like any answer without claims).

Generated artifacts (`kind: generated`, docs/design.md §5) never count as ground truth: their text is left
out of every support computation above. A claim is **generated_only** when its cited generated
artifact supports it but its cited source texts do not. A claim has a **wrong_excerpt** when an
uncited retrieved source text supports it (verdict `supported`) and scores at least
`WRONG_EXCERPT_MARGIN` above what its own citations give, while its citations do not support it.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

from ..config import DEFAULT_JUDGE
from ..payload import DocumentEntry, Payload
from ..provenance import sources_payload, turn_id_of
from ..text import plain, sentences
from ..types import TurnRecord
from .claims import Claim, split_claims
from .judges import Judge, Judgement, get_judge

WRONG_EXCERPT_MARGIN = 0.15
_NO_EVIDENCE = Judgement(0.0, "unsupported", None, "no source text cited")
#: An abstention says the knowledge base (or the excerpts) has nothing, in at most this many sentences.
ABSTENTION_SENTENCES = 3
# First person ("I could not find …"), or the knowledge base as subject ("the excerpts do not contain …"):
# a product fact such as "members do not have access" is not an abstention.
_ABSTAINS = re.compile(
    r"\bI\s+(?:could|can|do|did|am)?\s*(?:not|n['’]t|['’]t|cannot|unable to)\s+(?:find|answer|open|see|locate)\b"
    r"|\b(?:knowledge base|excerpts?|documentation|help cent(?:er|re)|articles?|sources?)\s+(?:do|does|did)?\s*"
    r"(?:not|n['’]t)\s+(?:contain|have|cover|include|mention|say|answer)\b"
    r"|\bno (?:information|relevant|articles?|documents?|results?)\b"
    r"|\bnot (?:enough|sufficient) (?:evidence|information)\b|\bnothing (?:about|on|relevant)\b",
    re.IGNORECASE)


def answer_kind(payload: Payload) -> str:
    """`listing`, `abstention` or `substantive` (see the module docstring): only a substantive answer has claims."""
    answer = payload.answer or ""
    listed = {d.doc_id for d in payload.documents if _listed_here(d)}
    valid = [c for c in payload.citations if c.valid]
    if valid and not payload.sets.consulted and all(c.doc_id in listed for c in valid):
        return "listing"
    if not valid and _ABSTAINS.search(answer) and len(sentences(plain(answer))) <= ABSTENTION_SENTENCES:
        return "abstention"
    return "substantive"


def _listed_here(d: DocumentEntry) -> bool:
    """This turn saw document `d` only as a title. Its `exposure` is the conversation's strongest: a follow-up listing
    ("What articles do you have?" after an SSO question) links documents an earlier turn read in full, and such a
    link is not consulted (docs/design.md §11 rule 3e), which is how a cited, unconsulted document whose exposure
    came from an earlier turn (`exposure_from`) tells that this turn's own tools gave only its title."""
    return d.exposure == "title" or (d.exposure_from is not None and d.cited and not d.consulted)


@dataclass(frozen=True)
class ClaimResult:
    """One claim's verdict; exactly the columns of the trace store's `claims` table."""

    turn_id: str
    claim_idx: int
    text: str
    cited_doc_ids: tuple[str, ...]
    judge: str
    score: float | None  # None for uncited claims and when the judge could not answer
    verdict: str  # supported | partial | unsupported | uncited | unknown
    best_span: str | None
    wrong_excerpt: bool
    generated_only: bool
    #: The judge's `version`: verdicts of different versions of one judge are not comparable.
    judge_version: str | None = None

    def to_row(self) -> dict[str, Any]:
        row = asdict(self)
        row["cited_doc_ids"] = list(self.cited_doc_ids)
        return row


@dataclass(frozen=True)
class WrongExcerpt:
    """An uncited retrieved text that supports a claim clearly better than what it cites."""

    claim_idx: int
    cited: tuple[str, ...]  # cited evidence labels (doc ids, or "[n]" in excerpt mode)
    better: str  # label of the better evidence
    better_doc_id: str
    cited_score: float | None
    better_score: float | None


@dataclass(frozen=True)
class TurnFaithfulness:
    turn_id: str
    judge: str
    claims: tuple[ClaimResult, ...]
    citation_recall: float | None  # None when the answer has no claims
    citation_precision: float | None  # None when the answer has no citations
    uncited_claims: tuple[int, ...]
    wrong_excerpts: tuple[WrongExcerpt, ...]
    generated_only: tuple[int, ...]
    judge_errors: tuple[str, ...] = field(default=())
    judge_version: str | None = None
    #: `substantive`, or `listing` / `abstention` (no claims: nothing factual to judge).
    answer_kind: str = "substantive"

    def rows(self) -> list[dict[str, Any]]:
        return [c.to_row() for c in self.claims]

    @classmethod
    def stored(cls, turn_id: str, rows: Sequence[Any]) -> tuple["TurnFaithfulness", ...]:
        """The verdicts stored for a turn (its `claims` rows, as `ClaimResult.to_row()` wrote them), one per judge
        in the order they were written (the turn's own judge first). Citation recall and precision are not
        stored, so they are None here."""
        by_judge: dict[tuple[str, str | None], list[ClaimResult]] = {}
        for r in rows:
            by_judge.setdefault((r["judge"], r["judge_version"]), []).append(ClaimResult(
                turn_id=turn_id, claim_idx=r["claim_idx"], text=r["text"], cited_doc_ids=tuple(r["cited_doc_ids"] or ()),
                judge=r["judge"], score=r["score"], verdict=r["verdict"], best_span=r["best_span"],
                wrong_excerpt=bool(r["wrong_excerpt"]), generated_only=bool(r["generated_only"]),
                judge_version=r["judge_version"]))
        out = []
        for (judge, version), claims in by_judge.items():
            claims.sort(key=lambda c: c.claim_idx)
            out.append(cls(turn_id=turn_id, judge=judge, claims=tuple(claims), citation_recall=None,
                           citation_precision=None, uncited_claims=tuple(c.claim_idx for c in claims if c.verdict == "uncited"),
                           wrong_excerpts=(), generated_only=tuple(c.claim_idx for c in claims if c.generated_only),
                           judge_version=version))
        return tuple(out)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["claims"] = self.rows()
        return d


@dataclass(frozen=True)
class _Unit:
    """One piece of evidence the model was shown: a document (agent mode) or an excerpt `[n]`."""

    label: str
    doc_id: str
    text: str
    generated: bool


def _evidence_pool(record: TurnRecord, payload: Payload, corpus) -> tuple[dict[str, _Unit], dict[int, _Unit]]:
    """Evidence units of the turn: by doc id and by excerpt number."""
    snippets: dict[str, list[str]] = {}
    for call in record.tool_calls:
        for item in call.results:
            if item.snippet and item.snippet not in snippets.setdefault(item.doc_id, []):
                snippets[item.doc_id].append(item.snippet)
    for e in record.excerpts:
        if e.text and e.text not in snippets.setdefault(e.doc_id, []):
            snippets[e.doc_id].append(e.text)

    def generated(doc_id: str, kind: str | None) -> bool:
        doc = corpus.get(doc_id) if corpus is not None else None
        return (doc.kind if doc is not None else kind) == "generated"

    by_doc: dict[str, _Unit] = {}
    for d in payload.documents:
        doc_id, exposure = d.doc_id, d.exposure
        doc = corpus.get(doc_id) if corpus is not None else None
        if exposure == "full" and doc is not None:
            text = doc.text
        elif exposure in ("full", "snippet"):
            text = "\n\n".join(snippets.get(doc_id, []))
        else:  # only a title was shown: there is no evidence text
            text = ""
        by_doc[doc_id] = _Unit(doc_id, doc_id, text, generated(doc_id, d.kind))
    by_n = {e.n: _Unit(f"[{e.n}]", e.doc_id, e.text, e.chunk_type == "generated" or generated(e.doc_id, None))
            for e in record.excerpts}
    return by_doc, by_n


def shown_texts(record: TurnRecord, payload: Payload | None = None, corpus=None) -> dict[str, str]:
    """Doc id → the text the model was shown of it (the rules above: the whole text when opened, the
    snippets or excerpts it saw, "" for a title); what verification judges a claim's support against."""
    by_doc, _ = _evidence_pool(record, payload if payload is not None else sources_payload(record), corpus)
    return {doc_id: unit.text for doc_id, unit in by_doc.items()}


class _Memo:
    """Collects (claim, evidence) requests, judges them in one batch, answers lookups."""

    def __init__(self, judge: Judge):
        self.judge, self.pending, self.done = judge, {}, {}

    def want(self, claim: str, texts: Sequence[str]) -> tuple:
        key = (claim, tuple(texts))
        if texts and key not in self.done:
            self.pending[key] = None
        return key

    def run(self) -> None:
        keys = list(self.pending)
        for key, j in zip(keys, self.judge.judge_many([(c, list(t)) for c, t in keys])):
            self.done[key] = j
        self.pending.clear()

    def get(self, key: tuple) -> Judgement:
        return self.done[key] if key[1] else _NO_EVIDENCE


def _supported(j: Judgement) -> bool:
    return j.verdict == "supported"


def assess_turn(record: TurnRecord, payload: Payload | None = None, corpus=None,
                judge: str | Judge = DEFAULT_JUDGE) -> TurnFaithfulness:
    """Judge every claim of one turn against what it cites (see the module docstring for the rules)."""
    payload = payload if payload is not None else sources_payload(record)
    j = get_judge(judge) if isinstance(judge, str) else judge
    turn_id = payload.turn_id or turn_id_of(record)
    kind = answer_kind(payload)
    if kind != "substantive":
        return TurnFaithfulness(turn_id, j.name, (), None, None, (), (), (), judge_version=j.version,
                                answer_kind=kind)
    by_doc, by_n = _evidence_pool(record, payload, corpus)
    claims = split_claims(payload.answer, payload.citations)
    memo = _Memo(j)

    plans = []
    for c in claims:
        units, invalid = _units_of(c, by_doc, by_n)
        sources = [u for u in units if not u.generated]
        gens = [u for u in units if u.generated]
        plan = {"claim": c, "units": units, "invalid": invalid, "sources": sources,
                "joint": memo.want(c.text, [u.text for u in sources if u.text]),
                "gen": memo.want(c.text, [u.text for u in gens if u.text]) if gens else None,
                "single": {}, "rest": {}, "pool": []}
        if len(units) + invalid > 1:
            for u in sources:
                plan["single"][u.label] = memo.want(c.text, [u.text] if u.text else [])
                plan["rest"][u.label] = memo.want(c.text, [v.text for v in sources if v is not u and v.text])
        if units:
            cited_docs = {u.doc_id for u in units}
            pool = by_n.values() if by_n else by_doc.values()
            for u in pool:
                if u.doc_id not in cited_docs and not u.generated and u.text:
                    plan["pool"].append((u, memo.want(c.text, [u.text])))
        plans.append(plan)
    memo.run()

    results, recall, prec_hits, prec_total = [], [], 0, 0
    uncited, wrong, gen_only, errors = [], [], [], []
    for p in plans:
        c: Claim = p["claim"]
        units, invalid = p["units"], p["invalid"]
        if not units and not invalid:
            uncited.append(c.idx)
            recall.append(0)
            results.append(ClaimResult(turn_id, c.idx, c.text, c.cited_doc_ids, j.name, None, "uncited", None,
                                       False, False, j.version))
            continue
        joint = memo.get(p["joint"])
        if joint.verdict == "unknown" and joint.reason:
            errors.append(f"claim {c.idx}: {joint.reason}")
        r = int(_supported(joint) and not invalid)
        recall.append(r)
        prec_total += len(units) + invalid
        if r and len(units) + invalid > 1:
            for u in units:  # generated units have no evidence text: alone 0, and removing them changes nothing
                alone = u.label in p["single"] and _supported(memo.get(p["single"][u.label]))
                rest_ok = u.label not in p["rest"] or _supported(memo.get(p["rest"][u.label]))
                prec_hits += int(alone or not rest_ok)
        else:
            prec_hits += r * len(units)
        is_gen_only = bool(p["gen"]) and not _supported(joint) and _supported(memo.get(p["gen"]))
        if is_gen_only:
            gen_only.append(c.idx)
        is_wrong = False
        if p["pool"] and not _supported(joint):
            best_u, best_j = max(((u, memo.get(k)) for u, k in p["pool"]), key=lambda x: x[1].score or 0.0)
            if _supported(best_j) and (best_j.score or 0.0) >= (joint.score or 0.0) + WRONG_EXCERPT_MARGIN:
                is_wrong = True
                wrong.append(WrongExcerpt(c.idx, tuple(u.label for u in units), best_u.label, best_u.doc_id,
                                          joint.score, best_j.score))
        results.append(ClaimResult(turn_id, c.idx, c.text, c.cited_doc_ids, j.name, joint.score, joint.verdict,
                                   joint.best_span, is_wrong, is_gen_only, j.version))

    return TurnFaithfulness(
        turn_id=turn_id, judge=j.name, claims=tuple(results),
        citation_recall=round(sum(recall) / len(recall), 4) if recall else None,
        citation_precision=round(prec_hits / prec_total, 4) if prec_total else None,
        uncited_claims=tuple(uncited), wrong_excerpts=tuple(wrong), generated_only=tuple(gen_only),
        judge_errors=tuple(errors), judge_version=j.version,
    )


def _units_of(c: Claim, by_doc: dict[str, _Unit], by_n: dict[int, _Unit]) -> tuple[list[_Unit], int]:
    """The claim's distinct valid evidence units, and how many of its citations were rejected."""
    units: dict[str, _Unit] = {}
    invalid = 0
    for cit in c.citations:
        if not cit.valid or not cit.doc_id:
            invalid += 1
            continue
        u = by_n.get(cit.n) if cit.n is not None else by_doc.get(cit.doc_id)
        if u is None:  # valid per provenance but unknown here: no text was shown for it
            u = _Unit(cit.doc_id, cit.doc_id, "", False)
        units.setdefault(u.label, u)
    return list(units.values()), invalid
