"""A payload's sources as a client shows them: source chips, the verdicts of verification, a summary line.

Clients show a chip only where `consulted` is not `false`; an absent flag means *show*. So a new
client with an old server (no flag) falls back to showing every source, and an old client that
ignores the flag still gets a working lookup table for inline links (docs/design.md §2).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..payload import Payload, Source
from ..types import UNAUDITABLE

#: The three sets, in the order every view shows them (docs/design.md §1).
SETS = ("retrieved", "cited", "consulted")
#: One colour per set, and one for rejected citations: the app's badges and charts and the notebooks'
#: tables and charts all take them from here.
SET_COLORS = {"retrieved": "#9aa5b1", "cited": "#4c78a8", "consulted": "#2ca02c"}
REJECTED_COLOR = "#e45756"
#: Verdicts of verification by ablation (docs/design.md §9), as shown, in the order they are listed.
VERDICT_LABELS = {"load_bearing": "load-bearing", "decorative": "decorative", "hidden_influence": "hidden influence",
                  "no_effect": "no effect", "unstable": "unstable"}
VERDICT_MEANINGS = {
    "load_bearing": "the answer changed without it: it lost a claim this document supported, or drifted below the "
                    "similarity threshold",
    "decorative": "cited or consulted, but the answer's claims survive without it (e.g. a \"see also\" link)",
    "hidden_influence": "neither cited nor consulted, yet the answer changed without it",
    "no_effect": "neither cited nor consulted, and the answer stays the same without it",
    "unstable": "no verdict earned: re-running the turn with nothing withheld already changed the answer",
}


def source_chips(payload: Payload) -> list[Source]:
    """The sources row: every source whose `consulted` flag is not explicitly false."""
    return [s for s in payload.sources if s.consulted is not False]


def link_table(payload: Payload) -> dict[str, Source]:
    """doc_id → source entry, for making inline citations clickable (the whole cited set)."""
    return {s.doc_id: s for s in payload.sources}


def verdicts(payload: Payload) -> dict[str, str]:
    """doc_id → verdict of the payload's verification by ablation; empty when the turn was not verified
    (no `verification`: an old server, or simply unverified)."""
    v = payload.verification
    return {k: x for k, x in v.verdicts.items() if x in VERDICT_LABELS} if v is not None else {}


def sources_row(payload: Payload) -> str:
    chips = source_chips(payload)
    if not chips:
        return "Sources: none (nothing was read to answer this)"
    judged = verdicts(payload)
    parts = []
    for s in chips:
        tag = f" [{s.label}]" if s.label and s.label != "Source text" else ""
        verdict = f" ({VERDICT_LABELS[judged[s.doc_id]]})" if s.doc_id in judged else ""
        parts.append(f"{s.title or s.doc_id}{tag} <{s.url or s.doc_id}>{verdict}")
    return "Sources: " + " · ".join(parts)


def counted(n: int, noun: str) -> str:
    """"1 source", "2 sources", "0 sources": `n` with `noun`, plural unless `n` is 1."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


@dataclass(frozen=True, slots=True)
class Headline:
    """An answer's trust headline (`headline`): what its sources row, its verdicts and its rejected citations
    add up to, in one line."""

    sources: int  #: chips in the sources row (`source_chips`: the consulted set as the row shows it)
    load_bearing: int | None  #: sources the verification found load-bearing; None when the turn was not verified
    rejected: int  #: rejected citations
    unstable: bool = False  #: verified, but its control did not reproduce the answer: no verdict was earned
    #: an audited turn whose inputs are hidden, missing or cut claims nothing (docs/design.md §12)
    unauditable: bool = False

    def text(self) -> str:
        """"2 sources · 1 load-bearing · 0 rejected"; "not verified" (or "control unstable") in place of the
        load-bearing figure when there is none; "unauditable: inputs hidden" for a turn that claims nothing."""
        if self.unauditable:
            return "unauditable: inputs hidden"
        if self.load_bearing is None:
            bearing = "not verified"
        elif self.unstable:
            bearing = "control unstable"
        else:
            bearing = f"{self.load_bearing} {VERDICT_LABELS['load_bearing']}"
        return f"{counted(self.sources, 'source')} · {bearing} · {self.rejected} rejected"


def headline(payload: Payload) -> Headline:
    """The trust headline of `payload`, from the same fields its chips are drawn from: the sources row
    (`source_chips`), the verification's verdicts (`verdicts`: every document judged load-bearing) and its
    rejected citations. A payload without `verification` is not verified (docs/design.md §2)."""
    v = payload.verification
    bearing = sum(1 for x in verdicts(payload).values() if x == "load_bearing") if v is not None else None
    return Headline(sources=len(source_chips(payload)), load_bearing=bearing, rejected=len(payload.rejected_citations),
                    unstable=v is not None and v.control_stable is False,
                    unauditable=payload.audit is not None and payload.status == UNAUDITABLE)


def doc_titles(payload: Payload) -> dict[str, str]:
    """doc_id → title (the id when it has none) of every retrieved document of the payload."""
    return {d.doc_id: d.title or d.doc_id for d in payload.documents}


def by_verdict(payload: Payload) -> list[tuple[str, str, list[str]]]:
    """(verdict, label, doc ids) for each verdict the payload's verification gave, in `VERDICT_LABELS` order."""
    judged = verdicts(payload)
    groups = [(v, label, [d for d, x in judged.items() if x == v]) for v, label in VERDICT_LABELS.items()]
    return [g for g in groups if g[2]]


def verification_lines(payload: Payload) -> list[str]:
    """The verification by ablation in words: method, control, cost, then the documents of each verdict;
    empty when the turn was not verified."""
    v = payload.verification
    if v is None:
        return []
    titles = doc_titles(payload)
    cost = f"{or_unknown(v.extra_turns)} re-runs, {or_unknown(v.extra_calls)} extra model calls"
    if v.latency_ms is not None:
        cost += f", {v.latency_ms:.0f} ms"
    control = "control stable" if v.control_stable else "control UNSTABLE: no document earned a verdict"
    lines = [f"Verified by {v.method} ({control}; {cost}):"]

    def names(ids: list[str], most: int = 6) -> str:
        shown = " · ".join(titles.get(d, d) for d in ids[:most])
        return shown + (f" · and {len(ids) - most} more" if len(ids) > most else "")

    for _, label, docs in by_verdict(payload):
        lines.append(f"  {label}: {names(docs)}")
    for ids, what in ((v.skipped, f"over the budget of {or_unknown(v.budget)} re-runs"), (v.failed, "re-run failed")):
        if ids:
            lines.append(f"  not verified ({what}): {names(list(ids))}")
    return lines


def or_unknown(value: Any) -> Any:
    """`value`, or "?" when a payload did not say (an older server's verification)."""
    return "?" if value is None else value


def summary_line(payload: Payload) -> str:
    sets, rejected = payload.sets, payload.rejected_citations
    line = (f"retrieved {len(sets.retrieved)} · cited {len(sets.cited)} · "
            f"consulted {len(sets.consulted)} · rejected citations {len(rejected)}")
    for r in rejected:
        near = f" (nearest retrieved: {r.nearest_doc_id}, edit distance {r.edit_distance})" \
            if r.nearest_doc_id else ""
        line += f"\n  rejected {r.target}: {r.reason}{near}"
    return line


def document_lines(payload: Payload) -> list[str]:
    """Every retrieved document of a turn as a line of text (the CLI chat's `/sources`): title and id, how it
    was exposed, whether it was cited and consulted and why, and the earlier turn a carried one came from
    (docs/design.md §11); then each rejected citation."""
    lines = []
    for d in payload.documents:
        marks = [m for m, on in (("cited", d.cited), ("consulted", d.consulted)) if on]
        carried = f" · carried from turn {d.carried_position}" if d.carried_position else \
            f" · that exposure from turn {d.exposure_position}" if d.exposure_position else ""
        lines.append(f"  {d.title or d.doc_id} ({d.doc_id}) · {d.exposure}{carried} · "
                     f"{', '.join(marks) or 'not consulted'}" + (f": {d.reason}" if d.reason else ""))
    for r in payload.rejected_citations:
        where = f" (turn {r.position})" if r.position else ""
        lines.append(f"  rejected {r.target}: {r.reason}{where}")
    return lines or ["  nothing was retrieved"]
