"""The answer as safe markdown with its citations as links and badges (`citation_entries`, `answer_markdown`)."""

from __future__ import annotations

import re
from typing import Any

from ..payload import CitationEntry, Payload, Rejection
from .escaping import demote_headings, escape_markdown, safe_markdown, safe_url
from .sources import link_table


def _badge(color: str, text: str) -> str:
    return f":{color}-badge[{escape_markdown(text)}]"


def citation_entries(payload: Payload) -> list[dict[str, Any]]:
    """The clickable citations of an answer, in order of first appearance, one per target.

    Each entry has `key` (stable within the turn), `marker` (the badge shown inline: the `[n]` of
    an excerpt, else 1, 2, … per cited document — letters in excerpt mode so they cannot clash),
    `doc_id`, `title`, `url` (safe or None), `n` and `label`.
    """
    table = link_table(payload)
    docs = {d.doc_id: d for d in payload.documents}
    entries: list[dict[str, Any]] = []
    seen: set[str] = set()
    links = 0
    for c in payload.citations:
        if not c.valid or not c.doc_id:
            continue
        n = c.n
        key = f"[{n}]" if n is not None else c.doc_id
        if key in seen:
            continue
        seen.add(key)
        if n is not None:
            marker = str(n)
        else:
            links += 1
            marker = str(links) if payload.mode != "excerpts" else chr(ord("a") + (links - 1) % 26)
        src = table.get(c.doc_id) or docs.get(c.doc_id)
        excerpt = c.excerpt or {}
        entries.append({
            "key": key, "marker": marker, "doc_id": c.doc_id, "n": n,
            "title": (src.title if src else None) or excerpt.get("title") or c.doc_id,
            "url": safe_url(src.url if src else None), "label": (src.label if src else None) or excerpt.get("label"),
        })
    return entries


def read_in_turn(position: int | None, turn_id: str | None) -> str:
    """Which earlier turn had a document: "read in turn 1" (its position; its id when the position is unknown)."""
    return f"read in turn {position or turn_id or '?'}"


def rejection_text(c: CitationEntry | Rejection) -> str:
    """Why a citation was rejected, in words: "not retrieved (nearest retrieved: x, edit distance 1)"."""
    if c.reason == "out_of_range":
        return f"{c.target} is out of range (no such excerpt)"
    if c.reason == "not_in_context":  # docs/design.md §11: an earlier turn had it, the policy dropped it
        return f"not in context ({read_in_turn(c.position, c.turn_id)}, dropped by the context policy)"
    near = ""
    if c.nearest_doc_id:
        near = f" (nearest retrieved: {c.nearest_doc_id}, edit distance {c.edit_distance})"
    return f"not retrieved{near}"


def _link_text(span: str, target: str) -> str:
    if span.startswith("<"):  # autolink: the text is the target
        return target
    cut = span.rfind("](", 0, max(span.rfind(target), 1))
    return span[1:cut] if cut > 0 else target


def answer_markdown(payload: Payload, targets: dict[str, str] | None = None) -> str:
    """The answer as safe markdown: valid citations become links (http(s) only) with a numbered
    badge matching `citation_entries`; rejected ones become plain text with a warning badge and
    the reason. Everything else is the model's text through `safe_markdown`.

    `targets` (citation key → link target, e.g. the app's `#…` links that open its side panel) replaces
    the documents' URLs; then every valid citation is a link, an excerpt's `[n]` badge too."""
    answer = payload.answer or ""
    markers = {e["key"]: e for e in citation_entries(payload)}
    groups: dict[tuple[int, int], list[CitationEntry]] = {}
    for c in payload.citations:
        groups.setdefault((c.start, c.end), []).append(c)
    out: list[str] = []
    pos = 0
    for (start, end), cs in sorted(groups.items()):
        if start < pos:  # overlapping spans cannot come from provenance; keep the text safe anyway
            continue
        out.append(safe_markdown(answer[pos:start]))
        span = answer[start:end]
        if cs[0].n is not None:  # one `[1, 2]` marker may hold several citations
            parts = []
            for c in cs:
                if c.valid:
                    badge = _badge("blue", markers[f"[{c.n}]"]["marker"])
                    href = (targets or {}).get(f"[{c.n}]")
                    parts.append(f"[{badge}](<{href}>)" if href and not re.search(r"[\s<>]", href) else badge)
                else:
                    parts.append(_badge("orange", f"⚠ {c.target} rejected: {rejection_text(c)}"))
            out.append(" ".join(parts))
        else:
            c = cs[0]
            text = safe_markdown(_link_text(span, c.target))
            entry = markers.get(c.doc_id or "") if c.valid else None
            if entry is not None:
                url = entry["url"] if targets is None else targets.get(entry["key"])
                link = f"[{text}](<{url}>)" if url and not re.search(r"[\s<>]", url) else text
                out.append(f"{link} {_badge('blue', entry['marker'])}")
            else:
                out.append(f"{text} {_badge('orange', '⚠ rejected citation: ' + rejection_text(c))}")
        pos = end
    out.append(safe_markdown(answer[pos:]))
    return demote_headings("".join(out))
