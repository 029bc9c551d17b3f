"""The sources payload as a typed value (docs/design.md §2, §11): what a turn returns to clients.

`Payload.from_json(data)` reads a payload (this workbench's, or an older server's that lacks optional
fields) and `Payload.to_json()` writes it back as JSON data: for a payload `provenance.sources_payload`
made, exactly the same keys, values and key order, so the JSON text of the CLI and HTTP is unchanged.
The payload's `config` (`types.TurnConfig`, the one typed configuration of a turn) and `verification` (`VerificationSummary`) are typed records too.
Optional keys stay optional: a field that is None where the JSON key may be absent (`consulted`,
`carried_from`/`carried_position`, `exposure_from`/`exposure_position`, a rejection's `turn_id`/`position`, the payload's `turn_id`, `question`,
`conversation_id`, `position`, `citations_omitted`, `verification` and `audit`) is left out, as the payload schema (`workbench/schemas/payload.schema.json`)
and old clients expect. `validate_json(data)` checks JSON data against that schema at the edge.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Mapping

from .config import DEFAULT_MODE
from . import schemas
from .errors import PayloadError
from .types import TurnConfig

SCHEMA_VERSION = 1


def _omit_none(out: dict[str, Any], **optional: Any) -> dict[str, Any]:
    out.update((k, v) for k, v in optional.items() if v is not None)
    return out


#: Keys that are present together or not at all (docs/design.md §11): a turn id and its 1-based position.
_CARRIED = ("carried_from", "carried_position")
_EXPOSURE_FROM = ("exposure_from", "exposure_position")


def _turn_pair(d: dict[str, Any], keys: tuple[str, str]) -> dict[str, Any]:
    """A turn id and position pair (`_CARRIED`, `_EXPOSURE_FROM`) from JSON data: both keys, or none."""
    return {k: d.get(k) for k in keys} if any(k in d for k in keys) else {}


def _turn_pair_json(keys: tuple[str, str], turn_id: str | None, position: int | None) -> dict[str, Any]:
    return {} if position is None else dict(zip(keys, (turn_id, position)))


def _carried(d: dict[str, Any]) -> dict[str, Any]:
    return _turn_pair(d, _CARRIED)


def _carried_json(carried_from: str | None, carried_position: int | None) -> dict[str, Any]:
    return _turn_pair_json(_CARRIED, carried_from, carried_position)


def _exposure_from(d: dict[str, Any]) -> dict[str, Any]:
    return _turn_pair(d, _EXPOSURE_FROM)


def _exposure_from_json(exposure_from: str | None, exposure_position: int | None) -> dict[str, Any]:
    return _turn_pair_json(_EXPOSURE_FROM, exposure_from, exposure_position)


@dataclass(frozen=True, slots=True)
class Source:
    """One entry of the sources row's lookup table: a cited or consulted document (docs/design.md §2)."""

    doc_id: str
    cited: bool
    title: str | None = None
    url: str | None = None
    consulted: bool | None = None  # None: the flag is absent (an old server), and renderers show the chip
    exposure: str | None = None
    reason: str | None = None
    kind: str = "source"
    artifact_kind: str | None = None
    label: str | None = None
    carried_from: str | None = None  # docs/design.md §11: set with carried_position, for a carried document
    carried_position: int | None = None
    # docs/design.md §11: the earlier turn whose exposure `exposure` is (set with exposure_position), also when this
    # turn exposed the document more weakly itself; what a chip's "read in turn k" names
    exposure_from: str | None = None
    exposure_position: int | None = None

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Source:
        return cls(doc_id=d["doc_id"], cited=bool(d.get("cited", False)), title=d.get("title"), url=d.get("url"),
                   consulted=d.get("consulted"), exposure=d.get("exposure"), reason=d.get("reason"),
                   kind=d.get("kind", "source"), artifact_kind=d.get("artifact_kind"), label=d.get("label"),
                   **_carried(d), **_exposure_from(d))

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"doc_id": self.doc_id, "title": self.title, "url": self.url, "cited": self.cited}
        _omit_none(out, consulted=self.consulted, exposure=self.exposure, reason=self.reason)
        out.update(kind=self.kind, artifact_kind=self.artifact_kind)
        _omit_none(out, label=self.label)
        return out | _carried_json(self.carried_from, self.carried_position) \
            | _exposure_from_json(self.exposure_from, self.exposure_position)


@dataclass(frozen=True, slots=True)
class DocumentEntry:
    """One retrieved document with its three-set membership and why (`documents[]` of the payload)."""

    doc_id: str
    title: str | None
    url: str | None
    cited: bool
    consulted: bool
    exposure: str
    reason: str
    kind: str = "source"
    artifact_kind: str | None = None
    label: str = "Source text"
    tool_call: int | None = None  # this turn's first call that gave its strongest exposure
    tool_calls: tuple[int, ...] = ()
    excerpts: tuple[int, ...] = ()
    carried_from: str | None = None
    carried_position: int | None = None
    exposure_from: str | None = None  # as `Source.exposure_from`
    exposure_position: int | None = None

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> DocumentEntry:
        return cls(doc_id=d["doc_id"], title=d.get("title"), url=d.get("url"), cited=d["cited"],
                   consulted=d["consulted"], exposure=d["exposure"], reason=d["reason"], kind=d.get("kind", "source"),
                   artifact_kind=d.get("artifact_kind"), label=d.get("label", "Source text"),
                   tool_call=d.get("tool_call"), tool_calls=tuple(d.get("tool_calls", ())),
                   excerpts=tuple(d.get("excerpts", ())), **_carried(d), **_exposure_from(d))

    def to_json(self) -> dict[str, Any]:
        return {"doc_id": self.doc_id, "title": self.title, "url": self.url, "retrieved": True, "cited": self.cited,
                "consulted": self.consulted, "exposure": self.exposure, "reason": self.reason, "kind": self.kind,
                "artifact_kind": self.artifact_kind, "label": self.label, "tool_call": self.tool_call,
                "tool_calls": list(self.tool_calls), "excerpts": list(self.excerpts),
                **_carried_json(self.carried_from, self.carried_position),
                **_exposure_from_json(self.exposure_from, self.exposure_position)}


@dataclass(frozen=True, slots=True)
class Sets:
    """The three sets of docs/design.md §1, each in the payload's order."""

    retrieved: tuple[str, ...] = ()
    cited: tuple[str, ...] = ()
    consulted: tuple[str, ...] = ()

    def to_json(self) -> dict[str, list[str]]:
        return {"retrieved": list(self.retrieved), "cited": list(self.cited), "consulted": list(self.consulted)}


@dataclass(frozen=True, slots=True)
class Rejection:
    """A rejected citation (docs/design.md §1, §11): never auto-corrected, the nearest allowed id reported."""

    target: str
    reason: str  # "not_retrieved" | "out_of_range" | "not_in_context"
    nearest_doc_id: str | None = None
    edit_distance: int | None = None
    turn_id: str | None = None  # not_in_context: the earlier turn that had it (set with `position`)
    position: int | None = None

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Rejection:
        return cls(target=d["target"], reason=d["reason"], nearest_doc_id=d.get("nearest_doc_id"),
                   edit_distance=d.get("edit_distance"), turn_id=d.get("turn_id"), position=d.get("position"))

    def to_json(self) -> dict[str, Any]:
        out = {"target": self.target, "reason": self.reason, "nearest_doc_id": self.nearest_doc_id,
               "edit_distance": self.edit_distance}
        return out if self.position is None else out | {"turn_id": self.turn_id, "position": self.position}


#: The citation record of an excerpt (docs/design.md §3), in the payload's key order.
EXCERPT_FIELDS = ("file_name", "chunk_index", "page", "score", "snippet", "chunk_type", "title", "generated",
                  "artifact_kind", "label")


@dataclass(frozen=True, slots=True)
class CitationEntry:
    """One citation occurrence in the answer and its validation outcome (`citations[]`)."""

    target: str
    doc_id: str | None
    valid: bool
    reason: str | None
    nearest_doc_id: str | None
    edit_distance: int | None
    start: int
    end: int
    n: int | None = None  # an excerpt marker's number
    excerpt: dict[str, Any] | None = None  # the excerpt's citation record (EXCERPT_FIELDS), when `n` names one
    turn_id: str | None = None  # not_in_context: set with `position`
    position: int | None = None

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> CitationEntry:
        excerpt = {k: d[k] for k in EXCERPT_FIELDS if k in d} or None
        return cls(target=d["target"], doc_id=d.get("doc_id"), valid=d["valid"], reason=d.get("reason"),
                   nearest_doc_id=d.get("nearest_doc_id"), edit_distance=d.get("edit_distance"), start=d["start"],
                   end=d["end"], n=d.get("n"), excerpt=excerpt, turn_id=d.get("turn_id"), position=d.get("position"))

    def to_json(self) -> dict[str, Any]:
        out = {"target": self.target, "doc_id": self.doc_id, "valid": self.valid, "reason": self.reason,
               "nearest_doc_id": self.nearest_doc_id, "edit_distance": self.edit_distance, "start": self.start,
               "end": self.end}
        if self.n is not None:
            out["n"] = self.n
            if self.excerpt is not None:
                out.update(self.excerpt)
        return out if self.position is None else out | {"turn_id": self.turn_id, "position": self.position}


@dataclass(frozen=True, slots=True)
class ToolCallEntry:
    """What one tool call of the turn returned (`tool_calls[]`)."""

    seq: int
    name: str
    exposure: str
    args: dict[str, Any] = field(default_factory=dict)
    doc_ids: tuple[str, ...] = ()
    latency_ms: float | None = None
    error: str | None = None
    #: What the result left out to fit the model's context (`types.Cut` as JSON); None (absent): it was whole.
    cut: dict[str, Any] | None = None

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> ToolCallEntry:
        return cls(seq=d.get("seq", 0), name=d["name"], exposure=d["exposure"], args=dict(d.get("args", {})),
                   doc_ids=tuple(d.get("doc_ids", ())), latency_ms=d.get("latency_ms"), error=d.get("error"),
                   cut=d.get("cut"))

    def to_json(self) -> dict[str, Any]:
        out = {"seq": self.seq, "name": self.name, "exposure": self.exposure, "args": dict(self.args),
               "doc_ids": list(self.doc_ids), "latency_ms": self.latency_ms, "error": self.error}
        if self.cut is not None:
            out["cut"] = dict(self.cut)
        return out


@dataclass(frozen=True, slots=True)
class Evidence:
    """Where a document reached a model input in an audited turn (docs/design.md §12): its exposure and the model
    call and message that showed it."""

    exposure: str
    where: str

    def to_json(self) -> dict[str, str]:
        return {"exposure": self.exposure, "where": self.where}


#: The provider of an audited turn's record and run (of its model calls too, unless their spans name one).
AUDITED = "audited"


@dataclass(frozen=True, slots=True)
class Audit:
    """The `audit` object of a turn audited from another app's spans (docs/design.md §12); absent otherwise."""

    source: str
    not_shown: tuple[str, ...] = ()
    service: str | None = None
    trace_ids: tuple[str, ...] = ()
    evidence: dict[str, Evidence] = field(default_factory=dict)
    reason: str | None = None  # why the turn is unauditable; None when it is not
    rule: str = "conservative"  # "corpus": exposure measured against corpus text; "conservative": no corpus
    #: An unauditable turn's links, in answer order: not judged (its allow-list is unknown), so none is rejected
    unjudged_citations: tuple[str, ...] = ()
    #: Why the turn's time is the receive time: start times beyond the clock-skew bound were clamped (else None).
    clock_skew: str | None = None

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Audit:
        return cls(source=d["source"], not_shown=tuple(d.get("not_shown", ())), service=d.get("service"),
                   trace_ids=tuple(d.get("trace_ids", ())),
                   evidence={k: Evidence(exposure=v.get("exposure", ""), where=v.get("where", ""))
                             for k, v in (d.get("evidence") or {}).items()},
                   reason=d.get("reason"), rule=d.get("rule", "conservative"),
                   unjudged_citations=tuple(d.get("unjudged_citations", ())), clock_skew=d.get("clock_skew"))

    def to_json(self) -> dict[str, Any]:
        return {"source": self.source, "service": self.service, "trace_ids": list(self.trace_ids),
                "not_shown": list(self.not_shown), "evidence": {k: v.to_json() for k, v in self.evidence.items()},
                "reason": self.reason, "rule": self.rule, "unjudged_citations": list(self.unjudged_citations),
                **({"clock_skew": self.clock_skew} if self.clock_skew is not None else {})}


@dataclass(frozen=True, slots=True)
class RerunSummary:
    """What one re-run of a verification showed (docs/design.md §9): the control's (`VerificationSummary.control`),
    or a withheld document's (`details`), which also says whether it was cited and consulted and its verdict."""

    status: str | None = None  # the re-run's status, or over_budget / control_unstable when it was not re-run
    similarity: float | None = None
    claims_lost: int | None = None
    claims_total: int | None = None
    extra_calls: int | None = None
    reason: str | None = None
    cited: bool | None = None  # details only
    consulted: bool | None = None
    verdict: str | None = None

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> RerunSummary:
        return cls(**{k: d.get(k) for k in RERUN_KEYS})

    def to_json(self, withheld: bool = False) -> dict[str, Any]:
        """The control's JSON, or with `withheld` a document's (`cited`, `consulted`, `verdict` first); the keys
        the schema makes nullable are always there, the others when known."""
        out = _omit_none({}, cited=self.cited, consulted=self.consulted) if withheld else {}
        if withheld:
            out["verdict"] = self.verdict
        _omit_none(out, status=self.status)
        out.update(similarity=self.similarity, claims_lost=self.claims_lost, claims_total=self.claims_total)
        return _omit_none(out, extra_calls=self.extra_calls, reason=self.reason)


#: A withheld document's re-run's fields; the control's have no `cited`, `consulted` or `verdict`. Named as
#: `verify.Ablation`'s, which fills them (`Ablation.summary`).
RERUN_KEYS = tuple(f.name for f in fields(RerunSummary))
CONTROL_KEYS = tuple(k for k in RERUN_KEYS if k not in ("cited", "consulted", "verdict"))


@dataclass(frozen=True, slots=True)
class VerificationSummary:
    """The payload's `verification` (docs/design.md §2, §9; `verify.Verification.to_payload()`): the verdicts and
    what the re-runs cost. The keys the schema makes nullable are always written; the others when known."""

    method: str
    control_stable: bool
    verdicts: Mapping[str, str] = field(default_factory=dict)  # doc_id → verdict
    extra_calls: int | None = None
    extra_turns: int | None = None  # re-runs made, the control included
    budget: int | None = None
    similarity_threshold: float | None = None
    judge: str | None = None
    judge_version: str | None = None
    sampling: Mapping[str, Any] | None = None  # the options pinned for the re-runs
    tokens_in: int | None = None
    tokens_out: int | None = None
    latency_ms: float | None = None
    control: RerunSummary | None = None
    details: Mapping[str, RerunSummary] | None = None  # doc_id → what its re-run showed
    skipped: tuple[str, ...] | None = None  # candidates over the budget: no verdict
    failed: tuple[str, ...] | None = None  # candidates whose re-run failed: no verdict

    @classmethod
    def from_json(cls, d: Any) -> VerificationSummary | None:
        """The verification of JSON data; None for anything that is not one (an old or buggy server)."""
        if not isinstance(d, dict) or "method" not in d:
            return None
        details = d.get("details")
        return cls(
            method=d["method"], control_stable=bool(d.get("control_stable")), verdicts=dict(d.get("verdicts") or {}),
            extra_calls=d.get("extra_calls"), extra_turns=d.get("extra_turns"), budget=d.get("budget"),
            similarity_threshold=d.get("similarity_threshold"), judge=d.get("judge"),
            judge_version=d.get("judge_version"), sampling=d.get("sampling"), tokens_in=d.get("tokens_in"),
            tokens_out=d.get("tokens_out"), latency_ms=d.get("latency_ms"),
            control=RerunSummary.from_json(d["control"]) if isinstance(d.get("control"), dict) else None,
            details=None if details is None else {k: RerunSummary.from_json(v or {}) for k, v in details.items()},
            skipped=None if d.get("skipped") is None else tuple(d["skipped"]),
            failed=None if d.get("failed") is None else tuple(d["failed"]))

    def to_json(self) -> dict[str, Any]:
        out = {"method": self.method, "control_stable": self.control_stable}
        _omit_none(out, extra_calls=self.extra_calls)
        out["verdicts"] = dict(self.verdicts)
        _omit_none(out, extra_turns=self.extra_turns, budget=self.budget,
                   similarity_threshold=self.similarity_threshold, judge=self.judge)
        out["judge_version"] = self.judge_version
        _omit_none(out, sampling=None if self.sampling is None else dict(self.sampling))
        out.update(tokens_in=self.tokens_in, tokens_out=self.tokens_out, latency_ms=self.latency_ms)
        return _omit_none(out, control=None if self.control is None else self.control.to_json(),
                          details=None if self.details is None else {k: v.to_json(withheld=True)
                                                                     for k, v in self.details.items()},
                          skipped=None if self.skipped is None else list(self.skipped),
                          failed=None if self.failed is None else list(self.failed))


@dataclass(frozen=True, slots=True)
class Payload:
    """The sources payload of one turn (docs/design.md §2), with the conversation fields of §11."""

    answer: str
    sources: tuple[Source, ...] = ()
    sets: Sets = Sets()
    rejected_citations: tuple[Rejection, ...] = ()
    turn_id: str | None = None
    question: str | None = None
    mode: str = DEFAULT_MODE
    status: str = "ok"
    error: str | None = None
    citations: tuple[CitationEntry, ...] = ()
    documents: tuple[DocumentEntry, ...] = ()
    tool_calls: tuple[ToolCallEntry, ...] = ()
    config: TurnConfig = TurnConfig()
    conversation_id: str | None = None  # docs/design.md §11; None: a single turn (the key is absent)
    position: int | None = None
    verification: VerificationSummary | None = None  # docs/design.md §9 (`verify.Verification.to_payload()`)
    citations_omitted: int | None = None  # occurrences past `provenance.MAX_CITATIONS` left out of `citations`
    audit: Audit | None = None  # docs/design.md §12: present only for a turn audited from another app's spans
    schema_version: int = SCHEMA_VERSION

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Payload:
        """A payload from JSON data; the keys the schema lets a server leave out take their defaults. Data that is no
        payload (a key it needs missing, a value of another kind) is a `PayloadError` saying so, never a bare
        `KeyError` or `TypeError` (`validate_json` names the place)."""
        try:
            return cls._from_json(d)
        except PayloadError:
            raise
        except KeyError as exc:
            raise PayloadError(f"not a sources payload: the key {exc.args[0]!r} is missing") from None
        except (TypeError, AttributeError, ValueError) as exc:
            raise PayloadError(f"not a sources payload: a value is not of the kind it should be ({exc})") from None

    @classmethod
    def _from_json(cls, d: dict[str, Any]) -> Payload:
        sets = d.get("sets") or {}
        return cls(
            answer=d["answer"], sources=tuple(Source.from_json(s) for s in d.get("sources", ())),
            sets=Sets(**{k: tuple(sets.get(k, ())) for k in ("retrieved", "cited", "consulted")}),
            rejected_citations=tuple(Rejection.from_json(r) for r in d.get("rejected_citations", ())),
            turn_id=d.get("turn_id"), question=d.get("question"), mode=d.get("mode", DEFAULT_MODE),
            status=d.get("status", "ok"), error=d.get("error"),
            citations=tuple(CitationEntry.from_json(c) for c in d.get("citations", ())),
            documents=tuple(DocumentEntry.from_json(x) for x in d.get("documents", ())),
            tool_calls=tuple(ToolCallEntry.from_json(t) for t in d.get("tool_calls", ())),
            config=TurnConfig.from_json(d.get("config") or {}), conversation_id=d.get("conversation_id"),
            position=d.get("position"), verification=VerificationSummary.from_json(d.get("verification")),
            citations_omitted=d.get("citations_omitted"),
            audit=Audit.from_json(d["audit"]) if d.get("audit") is not None else None,
            schema_version=d.get("schema_version", SCHEMA_VERSION))

    def to_json(self) -> dict[str, Any]:
        """The payload as JSON data, keys in the order every client has always received them."""
        out = _omit_none({"schema_version": self.schema_version}, turn_id=self.turn_id,
                         conversation_id=self.conversation_id, position=self.position, question=self.question)
        out.update({
            "answer": self.answer, "mode": self.mode, "status": self.status,
            "error": self.error, "sources": [s.to_json() for s in self.sources], "sets": self.sets.to_json(),
            "rejected_citations": [r.to_json() for r in self.rejected_citations],
            "citations": [c.to_json() for c in self.citations], "documents": [x.to_json() for x in self.documents],
            "tool_calls": [t.to_json() for t in self.tool_calls], "config": self.config.to_json(),
        })
        verification = self.verification.to_json() if self.verification is not None else None
        return _omit_none(out, citations_omitted=self.citations_omitted, verification=verification,
                          audit=self.audit.to_json() if self.audit is not None else None)


def validate_json(data: dict[str, Any]) -> dict[str, Any]:
    """`data` if it is a valid payload by `workbench/schemas/payload.schema.json`; else `PayloadError` naming the first
    problem (used at the edges that print or serve payloads, and by the tests)."""
    error = schemas.best_error(schemas.PAYLOAD, data)
    if error is not None:
        where = ".".join(str(p) for p in error.absolute_path) or "(root)"
        raise PayloadError(f"not a valid sources payload: {where}: {error.message}")
    return data

