"""Turn a payload into what a client shows: source chips, clickable citations, a summary line.

Clients show a chip only where `consulted` is not `false`; an absent flag means *show*. So a new
client with an old server (no flag) falls back to showing every source, and an old client that
ignores the flag still gets a working lookup table for inline links (DESIGN.md §2).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

SAFE_SCHEMES = ("http", "https")


def source_chips(payload: dict[str, Any]) -> list[dict[str, Any]]:
    """The sources row: every source whose `consulted` flag is not explicitly false."""
    return [s for s in payload.get("sources", []) if s.get("consulted") is not False]


def link_table(payload: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """doc_id → source entry, for making inline citations clickable (the whole cited set)."""
    return {s["doc_id"]: s for s in payload.get("sources", [])}


def safe_url(url: str | None) -> str | None:
    """`url` if it is an absolute http(s) link, else None (neutralises javascript:, data:, …)."""
    if not url:
        return None
    try:
        parts = urlsplit(url.strip())
    except ValueError:
        return None
    if parts.scheme.lower() in SAFE_SCHEMES and parts.netloc:
        return url.strip()
    return None


def sources_row(payload: dict[str, Any]) -> str:
    chips = source_chips(payload)
    if not chips:
        return "Sources: none (nothing was read to answer this)"
    parts = []
    for s in chips:
        label = s.get("label")
        tag = f" [{label}]" if label and label != "Source text" else ""
        parts.append(f"{s.get('title') or s['doc_id']}{tag} <{s.get('url') or s['doc_id']}>")
    return "Sources: " + " · ".join(parts)


def summary_line(payload: dict[str, Any]) -> str:
    sets = payload.get("sets", {})
    rejected = payload.get("rejected_citations", [])
    line = (f"retrieved {len(sets.get('retrieved', []))} · cited {len(sets.get('cited', []))} · "
            f"consulted {len(sets.get('consulted', []))} · rejected citations {len(rejected)}")
    for r in rejected:
        near = f" (nearest retrieved: {r['nearest_doc_id']}, edit distance {r['edit_distance']})" \
            if r.get("nearest_doc_id") else ""
        line += f"\n  rejected {r['target']}: {r['reason']}{near}"
    return line
