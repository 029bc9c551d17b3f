"""How `ask` and `chat` print an answer for people (terminal control sequences made visible)."""

from __future__ import annotations

import sys

from ..prompts import excerpt_header
from ..render.sources import sources_row, summary_line, verification_lines
from ..terminal import neutralize
from ..types import TRUNCATED, artifact_label


def excerpt_lines(record, payload) -> str:
    """Excerpt mode: each `[n]` as the model saw it, labelled Source text / Generated …, and whether cited."""
    cited = {c.n for c in payload.citations if c.valid and c.n is not None}
    lines = ["Excerpts:"]
    for e in record.excerpts:
        lines.append(f"  {excerpt_header(e.n, e.file_name, e.page, e.chunk_index)} · "
                     f"{artifact_label(e.chunk_type, e.artifact_kind)} · {e.title or e.doc_id}"
                     + (" · cited" if e.n in cited else ""))
    return "\n".join(lines)


def warn_status(payload) -> None:
    """A failed turn's status and message; a `truncated` answer's warning (it is shown, but incomplete)."""
    if payload.status == TRUNCATED:
        print(neutralize(f"warning: the answer is incomplete (truncated): {payload.error}"), file=sys.stderr)
    elif payload.status != "ok":
        print(neutralize(f"turn failed ({payload.status}): {payload.error}"), file=sys.stderr)


def warn_untraced(answer) -> None:
    if answer.trace_error:
        print(neutralize(f"warning: this turn was not traced: {answer.trace_error}"), file=sys.stderr)


def print_answer(answer) -> None:
    """One answer as text for people (`ask`, `chat`): the answer, its sources row, its verification, its
    excerpts, the three-set summary and the configuration; documents, questions and model output may hold
    terminal control sequences, so everything is neutralised."""
    payload = answer.payload
    warn_untraced(answer)
    warn_status(payload)
    print(neutralize(payload.answer or "(no answer)"))
    print()
    print(neutralize(sources_row(payload)))
    for line in verification_lines(payload):
        print(neutralize(line))
    if answer.record.excerpts:
        print(neutralize(excerpt_lines(answer.record, payload)))
    print(neutralize(summary_line(payload)))
    cfg = payload.config
    protocol = f" ({cfg.tool_protocol})" if cfg.tool_protocol else ""
    print(neutralize(f"provider: {cfg.provider_label or cfg.provider} · "
                     f"model: {cfg.model_label or cfg.model} · retriever: {cfg.retriever} · "
                     f"mode: {cfg.mode}{protocol}"))
    if answer.record.conversation_id is not None:
        turns = (cfg.context or {}).get("turns")
        print(neutralize(f"conversation: {answer.record.conversation_id} · turn {answer.record.position} · "
                         f"tool results kept for the last {turns} earlier turn(s)"))
