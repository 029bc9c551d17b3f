"""One turn: its three sets side by side, its tool calls, its sources array and rejected citations."""

from __future__ import annotations

import json

import pandas as pd

from ..payload import Payload
from ..render.sources import SET_COLORS, SETS, source_chips

ROW_LABELS = {"naive": "naive row (everything retrieved)", "honest": "honest row (consulted)",
              "load_bearing": "load-bearing row (verified by ablation)"}


def three_sets(payload: Payload) -> pd.DataFrame:
    """One row per retrieved document: its membership in each set, exposure, and why (docs/design.md §1)."""
    in_payload = {s.doc_id for s in payload.sources}
    chips = {s.doc_id for s in source_chips(payload)}
    rows = [{"doc_id": d.doc_id, "title": d.title, "exposure": d.exposure,
             "retrieved": True, "cited": bool(d.cited), "consulted": bool(d.consulted),
             "reason": d.reason, "label": d.label,
             "in sources array": d.doc_id in in_payload, "chip shown": d.doc_id in chips}
            for d in payload.documents]
    return pd.DataFrame(rows, columns=["doc_id", "title", "exposure", *SETS, "reason", "label",
                                       "in sources array", "chip shown"])


def style_three_sets(table: pd.DataFrame):
    """A pandas Styler for `three_sets`: ✓ marks, each set's column tinted where the document is in it."""
    flags = [c for c in (*SETS, "in sources array", "chip shown") if c in table.columns]
    # a chip shows a consulted document, so it takes the consulted colour
    colors = {**SET_COLORS, "in sources array": "#f2c14e", "chip shown": SET_COLORS["consulted"]}

    def tint(col: pd.Series) -> list[str]:
        return [f"background-color: {colors[col.name]}33; font-weight: bold" if v else "color: #bbb" for v in col]

    return (table.style.apply(tint, subset=flags)
            .format({c: lambda v: "✓" if v else "·" for c in flags})
            .hide(axis="index"))


def tool_calls_table(payload: Payload) -> pd.DataFrame:
    """The turn's tool calls in order: name, exposure, arguments, the documents each returned."""
    rows = [{"seq": t.seq, "tool": t.name, "exposure": t.exposure,
             "args": json.dumps(t.args or {}, ensure_ascii=False), "doc_ids": ", ".join(t.doc_ids),
             "n_results": len(t.doc_ids), "latency_ms": t.latency_ms, "error": t.error}
            for t in payload.tool_calls]
    return pd.DataFrame(rows, columns=["seq", "tool", "exposure", "args", "doc_ids", "n_results", "latency_ms",
                                       "error"])


def sources_table(payload: Payload) -> pd.DataFrame:
    """The payload's `sources` array as sent, with whether a client shows each entry as a chip."""
    chips = {s.doc_id for s in source_chips(payload)}
    rows = [{"doc_id": s.doc_id, "title": s.title, "cited": s.cited, "consulted": s.consulted,
             "exposure": s.exposure, "reason": s.reason, "chip shown": s.doc_id in chips}
            for s in payload.sources]
    return pd.DataFrame(rows, columns=["doc_id", "title", "cited", "consulted", "exposure", "reason", "chip shown"])


def rejected_table(payload: Payload) -> pd.DataFrame:
    """Rejected citations: the raw target, why, and the nearest retrieved id (explains, never corrects)."""
    return pd.DataFrame([r.to_json() for r in payload.rejected_citations],
                        columns=["target", "reason", "nearest_doc_id", "edit_distance"])
