"""Verification by ablation: did the answer really depend on each source?

The method (`METHOD`, `ablation-v1`) is stated once, in docs/design.md §9: re-runs with one document
withheld, reproducible options pinned, the control first, the candidates in budget order, "changed"
by claims at stake and answer similarity, and the verdicts. This module implements it; every re-run
is recorded with its model calls, tokens and time.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from dataclasses import dataclass, field, fields, replace
from datetime import datetime, timezone
from typing import Any, Callable, Mapping, Sequence

from .agent import run_turn
from .config import DEFAULT_JUDGE, DEFAULT_K
from .errors import VerificationError
from .faithfulness import get_judge, shown_texts, split_claims
from .faithfulness.claims import Claim, clean
from .faithfulness.judges import Judge
from .payload import CONTROL_KEYS, RERUN_KEYS, Payload, RerunSummary, VerificationSummary
from .provenance import sources_payload, turn_id_of
from .providers.base import Provider
from .providers.options import REPRODUCIBLE, properties
from .text import content_terms
from .tools import Toolbox
from .types import ANSWERED, EXPOSURE_RANK, HistoryTurn, TurnRecord

METHOD = "ablation-v1"
#: Below this answer similarity (`answer_similarity`) a re-run's answer counts as changed.
SIMILARITY_THRESHOLD = 0.8
#: Re-runs per turn, the control included (control + 7 candidates).
DEFAULT_BUDGET = 8
#: Retrieved documents neither cited nor consulted that are re-run, to catch influence citations hide.
HIDDEN_CANDIDATES = 3
#: What a replay of an audited turn's final model call (`workbench/replay.py`) puts where a withheld document's text
#: was: the workbench's own re-runs cannot leave it out of a prompt they did not build, so they say it is gone.
WITHHELD_NOTICE = "[document withheld for verification: its text is not available]"
VERDICTS = ("load_bearing", "decorative", "hidden_influence", "no_effect", "unstable")
#: `Ablation.status` of a candidate that was not re-run: over the budget, behind an unstable control, or one the
#: re-runs cannot withhold (a replay that does not find its text in the recorded model input).
OVER_BUDGET, CONTROL_UNSTABLE, NOT_WITHHELD = "over_budget", "control_unstable", "not_withheld"


def answer_similarity(a: str, b: str) -> float:
    """Dice coefficient of the stemmed content words (as multisets) of two answers' prose, in [0, 1]."""
    if a == b:
        return 1.0
    ta, tb = Counter(content_terms(clean(a))), Counter(content_terms(clean(b)))
    total = sum(ta.values()) + sum(tb.values())
    return 1.0 if total == 0 else round(2 * sum((ta & tb).values()) / total, 4)


@dataclass(frozen=True)
class Candidate:
    """A document a verification withholds, and what the original turn made of it."""

    doc_id: str
    cited: bool
    consulted: bool
    exposure: str
    rank: int | None  # best rank in any tool result, or lowest excerpt number; None when unranked

    @property
    def used(self) -> bool:
        """Cited or consulted: its verdict is load_bearing / decorative, else hidden_influence / no_effect."""
        return self.cited or self.consulted


def candidates(payload: Payload) -> list[Candidate]:
    """Every candidate of a turn, most important first (the module docstring, step 3); pure over the payload."""
    ranks: dict[str, int] = {}
    for call in payload.tool_calls:
        for pos, doc_id in enumerate(call.doc_ids, start=1):
            ranks[doc_id] = min(pos, ranks.get(doc_id, pos))
    docs = payload.documents
    for d in docs:
        for n in d.excerpts:
            ranks[d.doc_id] = min(n, ranks.get(d.doc_id, n))
    all_docs = [Candidate(d.doc_id, bool(d.cited), bool(d.consulted), d.exposure or "title", ranks.get(d.doc_id))
                for d in docs]
    by_id = {c.doc_id: c for c in all_docs}
    order = [s.doc_id for s in payload.sources if s.doc_id in by_id]
    consulted = [by_id[i] for i in order if by_id[i].consulted]
    hidden = sorted((c for c in all_docs if not c.used),
                    key=lambda c: (-EXPOSURE_RANK.get(c.exposure, 0), c.rank if c.rank is not None else 10**9))
    linked = [by_id[i] for i in order if not by_id[i].consulted]
    return consulted + hidden[:HIDDEN_CANDIDATES] + linked


def check_budget(budget: int) -> None:
    if not isinstance(budget, int) or budget < 1:
        raise VerificationError(f"the verification budget counts re-runs including the control, so it must be at "
                                f"least 1, not {budget!r}")


def plan(payload: Payload, budget: int = DEFAULT_BUDGET) -> tuple[list[Candidate], list[Candidate]]:
    """(candidates the budget re-runs, candidates skipped): the control takes one re-run of `budget`."""
    return within_budget(candidates(payload), budget)


def within_budget(found: Sequence[Candidate], budget: int) -> tuple[list[Candidate], list[Candidate]]:
    """(the candidates `budget` re-runs cover, the rest), in order: the control takes one re-run of `budget`."""
    check_budget(budget)
    return list(found[:budget - 1]), list(found[budget - 1:])


def pinned_options(options_schema: Mapping[str, Any],
                   options: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the options a re-run uses, the options pinned): every option whose `options_schema` property declares
    the value that makes a call reproducible (`x-reproducible`: temperature 0, a fixed seed, llama.cpp's
    prompt cache off) set to it, over what the original used."""
    pinned = {name: prop[REPRODUCIBLE] for name, prop in properties(options_schema).items() if REPRODUCIBLE in prop}
    return {**options, **pinned}, pinned


def unpinned(options_schema: Mapping[str, Any], options: Mapping[str, Any]) -> dict[str, Any]:
    """The options a turn asked with `options` ran with that differ from what re-runs pin (name → the value
    it ran with, unset meaning the schema's default): a control may not reproduce such a turn."""
    props = properties(options_schema)
    _, pinned = pinned_options(options_schema, options)
    ran = {name: options.get(name, props[name].get("default")) for name in pinned}
    return {name: value for name, value in ran.items() if value != pinned[name]}


@dataclass(frozen=True)
class Ablation:
    """One re-run (the control, or one candidate withheld), or a candidate that was not re-run."""

    seq: int  # 0 = the control, then candidates in plan order
    role: str  # "control" | "candidate"
    doc_id: str | None  # the withheld document; None for the control
    cited: bool = False
    consulted: bool = False
    status: str = "ok"  # the re-run's status, or OVER_BUDGET / CONTROL_UNSTABLE when it was not re-run
    verdict: str | None = None
    similarity: float | None = None
    claims_lost: int | None = None
    claims_total: int | None = None
    answer: str | None = None
    extra_calls: int = 0  # the model calls its re-run made
    tokens_in: int | None = None
    tokens_out: int | None = None
    latency_ms: float | None = None
    reason: str = ""

    @property
    def reran(self) -> bool:
        return self.status not in (OVER_BUDGET, CONTROL_UNSTABLE, NOT_WITHHELD)

    def summary(self) -> RerunSummary:
        """What the payload says of it (`RerunSummary`: its fields are this record's, by name): the control's keys,
        or a withheld document's."""
        keys = CONTROL_KEYS if self.doc_id is None else RERUN_KEYS
        return RerunSummary(**{k: getattr(self, k) for k in keys})


#: The `ablations` columns each ablation fills, named as its fields (`Verification.rows`, `from_rows`); the
#: others (`turn_id`, `verification_id`, …) are the verification's. `cited` and `consulted` are its turn's sources'.
ROW_FIELDS = tuple(f.name for f in fields(Ablation) if f.name not in ("cited", "consulted"))


@dataclass(frozen=True)
class Verification:
    """The outcome of verifying one turn: every ablation, the verdicts, and what it cost."""

    turn_id: str
    control_stable: bool
    ablations: tuple[Ablation, ...]
    budget: int
    judge: str
    judge_version: str | None
    sampling: dict[str, Any] = field(default_factory=dict)
    latency_ms: float = 0.0
    method: str = METHOD
    similarity_threshold: float = SIMILARITY_THRESHOLD
    verification_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    verified_at: datetime = field(default_factory=lambda: datetime.now(timezone.utc))

    @property
    def control(self) -> Ablation:
        return self.ablations[0]

    @property
    def verdicts(self) -> dict[str, str]:
        return {a.doc_id: a.verdict for a in self.ablations if a.doc_id and a.verdict}

    @property
    def skipped(self) -> list[str]:
        return [a.doc_id for a in self.ablations if a.status == OVER_BUDGET]

    @property
    def failed(self) -> list[str]:
        return [a.doc_id for a in self.ablations if a.doc_id and a.reran and a.verdict is None]

    @property
    def extra_turns(self) -> int:
        return sum(a.reran for a in self.ablations)

    @property
    def extra_calls(self) -> int:
        return sum(a.extra_calls for a in self.ablations)

    def _tokens(self, name: str) -> int | None:
        return _sum([getattr(a, name) for a in self.ablations if a.reran])  # the control always re-runs

    def to_payload(self) -> VerificationSummary:
        """The payload's `verification` (docs/design.md §2, §9; payload.schema.json)."""
        c = self.control
        return VerificationSummary(
            method=self.method, control_stable=self.control_stable, extra_calls=self.extra_calls,
            verdicts=self.verdicts, extra_turns=self.extra_turns, budget=self.budget,
            similarity_threshold=self.similarity_threshold, judge=self.judge, judge_version=self.judge_version,
            sampling=dict(self.sampling), tokens_in=self._tokens("tokens_in"), tokens_out=self._tokens("tokens_out"),
            latency_ms=self.latency_ms, control=c.summary(),
            details={a.doc_id: a.summary() for a in self.ablations if a.doc_id},
            skipped=tuple(self.skipped), failed=tuple(self.failed))

    @classmethod
    def from_rows(cls, rows: Sequence[Mapping[str, Any]], used: Mapping[str, tuple[bool, bool]]) -> "Verification":
        """The verification stored as `rows` (one verification's `ablations` rows, as `rows()` wrote them), with
        each candidate's (cited, consulted) from `used` (its turn's `sources`). The store keeps neither the
        budget nor the pinned sampling: the budget is the re-runs made (a lower bound), the sampling is empty and
        the latency is the re-runs' own, summed."""
        if not rows:
            raise VerificationError("a stored verification has at least its control's row")
        rows = sorted(rows, key=lambda r: r["seq"])
        ablations = tuple(Ablation(**{**{k: r[k] for k in ROW_FIELDS}, "extra_calls": r["extra_calls"] or 0,
                                      "reason": r["reason"] or ""},
                                   cited=used.get(r["doc_id"], (False, False))[0],
                                   consulted=used.get(r["doc_id"], (False, False))[1]) for r in rows)
        first = rows[0]
        return cls(turn_id=first["turn_id"], control_stable=bool(first["control_stable"]), ablations=ablations,
                   budget=sum(a.reran for a in ablations), judge=first["judge"], judge_version=first["judge_version"],
                   latency_ms=sum(a.latency_ms or 0.0 for a in ablations), method=first["method"],
                   similarity_threshold=first["similarity_threshold"], verification_id=first["verification_id"],
                   verified_at=first["verified_at"])

    def rows(self) -> list[dict[str, Any]]:
        """One row per ablation for the trace store's `ablations` table (its column names)."""
        shared = {"turn_id": self.turn_id, "verification_id": self.verification_id, "method": self.method,
                  "control_stable": self.control_stable, "similarity_threshold": self.similarity_threshold,
                  "judge": self.judge, "judge_version": self.judge_version, "verified_at": self.verified_at}
        return [{**shared, **{k: getattr(a, k) for k in ROW_FIELDS}} for a in self.ablations]


def _sum(values: Sequence[int | None]) -> int | None:
    """The total when every value is known, else None (a partial sum would understate)."""
    return sum(values) if all(v is not None for v in values) else None  # type: ignore[misc]


def _change(sim: float, lost: int, total: int) -> str:
    claims = f"{lost} of the {total} claim{'s' if total != 1 else ''} at stake lost" if total else "no claim at stake"
    return f"{claims}; similarity {sim:.2f} (threshold {SIMILARITY_THRESHOLD:.2f})"


class _Comparer:
    """Compares re-run answers with the original: claims at stake lost, and similarity (step 4)."""

    def __init__(self, original: str, claims: list[Claim], judge: Judge):
        self.original, self.claims, self.judge = original, claims, judge

    def at_stake(self, doc_id: str | None, shown: Mapping[str, str]) -> list[Claim]:
        """Claims that cite `doc_id` or are supported by what the model was shown of it; all for the control."""
        if doc_id is None:
            return list(self.claims)
        text = shown.get(doc_id, "")
        judged = self.judge.judge_many([(c.text, [text]) for c in self.claims]) if text else []
        return [c for i, c in enumerate(self.claims)
                if doc_id in c.cited_doc_ids or (judged and judged[i].verdict == "supported")]

    def compare(self, answer: str, stake: list[Claim]) -> tuple[float, int, bool]:
        """(similarity, claims lost, changed?) of `answer` against the original."""
        if answer == self.original:
            return 1.0, 0, False
        sim = answer_similarity(self.original, answer)
        lost = sum(j.verdict != "supported" for j in self.judge.judge_many([(c.text, [answer]) for c in stake])) \
            if stake and answer.strip() else len(stake)
        return sim, lost, lost > 0 or sim < SIMILARITY_THRESHOLD


@dataclass(frozen=True)
class RerunOutcome:
    """What one re-run gave: its status (an error status, or one of `ANSWERED`), error, answer and cost."""

    status: str
    answer: str = ""
    error: str | None = None
    calls: int = 0
    tokens_in: int | None = None
    tokens_out: int | None = None
    latency_ms: float | None = None

    def cost(self) -> dict[str, Any]:
        """The `Ablation` fields it fills."""
        return {"status": self.status, "answer": self.answer, "extra_calls": self.calls, "tokens_in": self.tokens_in,
                "tokens_out": self.tokens_out, "latency_ms": self.latency_ms}


def verify(record: TurnRecord, toolbox: Toolbox, provider: Provider, *, payload: Payload | None = None,
           judge: str | Judge = DEFAULT_JUDGE, budget: int = DEFAULT_BUDGET,
           sampling: Mapping[str, Any] | None = None) -> Verification:
    """Verify one turn by ablation (the module docstring): control, then one re-run per candidate.

    `provider` answers every re-run: build it with the original's name, model and options and the
    sampling of `pinned_options` (recorded as `sampling`), as `Session.verify` does. `toolbox` must be
    the original's (same corpus and retriever); the re-runs see it through `Toolbox.withholding`.
    Raises `VerificationError` for a turn that did not answer (nothing to compare against).
    """
    started = time.perf_counter()
    check_answered(record.status, record.answer)
    payload = payload if payload is not None else sources_payload(record)
    to_run, skipped = plan(payload, budget)
    k = int(record.config.get("k") or DEFAULT_K)
    protocol = record.config.get("tool_protocol") if record.mode == "agent" else None
    turn_id = payload.turn_id or turn_id_of(record)

    def rerun(cand: Candidate | None) -> RerunOutcome:
        withheld = [cand.doc_id] if cand else []
        # A follow-up's re-run sends the same history; `agent.history_messages` re-runs its carried tool calls
        # through the withholding toolbox, so a withheld document is "not found" there too (§11.6).
        new = run_turn(record.question, provider, toolbox.withholding(withheld), mode=record.mode, k=k,
                       tool_protocol=protocol, config={"verifies": turn_id, "withheld": withheld},
                       history=withheld_history(record.history, withheld), conversation_id=record.conversation_id,
                       position=record.position)
        calls = new.model_calls
        return RerunOutcome(new.status, new.answer, new.error, len(calls), _sum([c.tokens_in for c in calls]),
                     _sum([c.tokens_out for c in calls]), new.latency_ms)

    return ablate(turn_id, record.answer, payload, to_run, skipped, rerun,
                  lambda: shown_texts(record, payload, toolbox.corpus), judge=judge, budget=budget,
                  sampling=sampling, started=started)


def check_answered(status: str, answer: str) -> None:
    """Refuse a turn that did not answer (nothing to compare the re-runs against)."""
    if status not in ANSWERED or not answer.strip():
        raise VerificationError(f"only a turn that answered can be verified; this one ended with status "
                                f"{status!r}" + ("" if answer.strip() else " and no answer"))


def ablate(turn_id: str, answer: str, payload: Payload, to_run: Sequence[Candidate], skipped: Sequence[Candidate],
           rerun: Callable[[Candidate | None], RerunOutcome], shown: Callable[[], Mapping[str, str]], *,
           judge: str | Judge, budget: int, sampling: Mapping[str, Any] | None, started: float,
           method: str = METHOD, not_withheld: Sequence[tuple[Candidate, str]] = ()) -> Verification:
    """The method's control, comparisons and verdicts (the module docstring, steps 3-5) over any way of re-running:
    `rerun(None)` is the control, `rerun(c)` the re-run without `c`; `shown()` maps a document to what the model was
    shown of it (claims at stake). `not_withheld` are candidates the re-runs cannot withhold, with why: listed
    without a verdict, never re-run."""
    j = get_judge(judge) if isinstance(judge, str) else judge
    claims = split_claims(answer, payload.citations)
    comparer = _Comparer(answer, claims, j)
    texts = shown() if claims else {}
    control = rerun(None)
    if control.status not in ANSWERED:
        stable = False
        row = Ablation(0, "control", None, **control.cost(),
                       reason=f"the control re-run (nothing withheld) failed ({control.status}: {control.error}), "
                              f"so no document can earn a verdict")
    else:
        sim, lost, changed = comparer.compare(control.answer, claims)
        stable = not changed
        why = ("reproduced the original answer" if not changed else "differs from the original answer, so no "
               "document can earn a verdict")
        row = Ablation(0, "control", None, similarity=sim, claims_lost=lost, claims_total=len(claims),
                       **control.cost(),
                       reason=f"the control re-run (nothing withheld) {why}: {_change(sim, lost, len(claims))}")
    rows = [row]
    if not stable:
        rows += [Ablation(seq, "candidate", c.doc_id, c.cited, c.consulted, CONTROL_UNSTABLE, "unstable",
                          reason=f"unstable: {row.reason}")
                 for seq, c in enumerate([*to_run, *skipped], start=1)]
    else:
        for seq, c in enumerate(to_run, start=1):
            new = rerun(c)
            if new.status not in ANSWERED:
                rows.append(Ablation(seq, "candidate", c.doc_id, c.cited, c.consulted, **new.cost(),
                                     reason=f"the re-run without it failed ({new.status}: {new.error}): no verdict"))
                continue
            stake = comparer.at_stake(c.doc_id, texts)
            sim, lost, changed = comparer.compare(new.answer, stake)
            verdict = (("load_bearing" if changed else "decorative") if c.used
                       else ("hidden_influence" if changed else "no_effect"))
            rows.append(Ablation(seq, "candidate", c.doc_id, c.cited, c.consulted, verdict=verdict, similarity=sim,
                                 claims_lost=lost, claims_total=len(stake), **new.cost(),
                                 reason=_reason(verdict, _change(sim, lost, len(stake)))))
        rows += [Ablation(seq, "candidate", c.doc_id, c.cited, c.consulted, OVER_BUDGET,
                          reason=f"not verified: over the budget of {budget} re-runs (control included)")
                 for seq, c in enumerate(skipped, start=len(to_run) + 1)]
    rows += [Ablation(seq, "candidate", c.doc_id, c.cited, c.consulted, NOT_WITHHELD, reason=f"not verified: {why}")
             for seq, (c, why) in enumerate(not_withheld, start=len(rows))]
    return Verification(turn_id, stable, tuple(rows), budget, j.name, j.version, dict(sampling or {}),
                        round((time.perf_counter() - started) * 1000, 3), method=method)


def withheld_history(history: Sequence[HistoryTurn], withheld: Sequence[str]) -> tuple[HistoryTurn, ...]:
    """The history a re-run sends with `withheld` documents withheld: the same turns, minus the carried excerpts of
    a withheld document (as a re-run's own excerpts are rebuilt without it; the other excerpts keep their numbers).
    Carried tool calls need nothing here: `agent.history_messages` runs them again through the withholding toolbox."""
    gone = set(withheld)
    if not gone:
        return tuple(history)
    return tuple(replace(h, record=replace(h.record, excerpts=tuple(e for e in h.record.excerpts if e.doc_id not in gone)))
                 for h in history)


def _reason(verdict: str, change: str) -> str:
    return {
        "load_bearing": f"load-bearing: without it the answer changed ({change})",
        "decorative": f"decorative: cited or consulted, but without it the answer's claims survive ({change})",
        "hidden_influence": f"hidden influence: neither cited nor consulted, yet without it the answer changed "
                            f"({change})",
        "no_effect": f"no effect: without it the answer stays the same ({change})",
    }[verdict]
