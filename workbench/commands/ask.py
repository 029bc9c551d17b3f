"""`ask`: answer questions and print the answer with its honest sources row."""

from __future__ import annotations

import argparse
import json
import sys

from ..errors import WorkbenchError
from ..payload import validate_json
from ..prompts import excerpt_header
from ..questions import read_questions
from ..render import sources_row, summary_line, verification_lines
from ..session import Session
from ..terminal import neutralize
from ..types import artifact_label
from ._options import (add_json_option, add_run_options, add_trace_options, add_verify_options, db_path,
                       provider_options, warn_skipped)


def register(sub) -> None:
    p = sub.add_parser("ask", help="Answer a question and print its sources row and three sets.")
    p.add_argument("question", nargs="?", help="the question")
    p.add_argument("--questions", metavar="FILE.jsonl", help='a file of {"question": …} lines')
    add_run_options(p)
    add_trace_options(p)
    add_verify_options(p)
    add_json_option(p)
    p.set_defaults(func=run)


def excerpt_lines(record, payload) -> str:
    """Excerpt mode: each `[n]` as the model saw it, labelled Source text / Generated …, and whether cited."""

    cited = {c.n for c in payload.citations if c.valid and c.n is not None}
    lines = ["Excerpts:"]
    for e in record.excerpts:
        lines.append(f"  {excerpt_header(e.n, e.file_name, e.page, e.chunk_index)} · "
                     f"{artifact_label(e.chunk_type, e.artifact_kind)} · {e.title or e.doc_id}"
                     + (" · cited" if e.n in cited else ""))
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    if bool(args.question) == bool(args.questions):
        raise WorkbenchError("give exactly one of QUESTION or --questions FILE.jsonl")
    questions = [q.text for q in read_questions(args.questions)] if args.questions else [args.question]
    options = provider_options(args)
    session = Session.open(args.corpus, args.retriever, trace_db=db_path(args), trace=not args.no_trace)
    warn_skipped(session.corpus)
    failed = 0
    for q in questions:
        answer = session.ask(q, provider=args.provider, model=args.model, mode=args.mode, k=args.k,
                             tool_protocol=args.tool_protocol, verify=args.verify, verify_budget=args.verify_budget,
                             **options)
        payload = answer.payload
        failed += payload.status != "ok" or answer.trace_error is not None
        if answer.trace_error:
            print(neutralize(f"warning: this turn was not traced: {answer.trace_error}"), file=sys.stderr)
        if args.json:
            print(json.dumps(validate_json(payload.to_json()), ensure_ascii=False), flush=True)
            continue
        # Text for people: documents, questions and model output may hold terminal control sequences.
        if len(questions) > 1:
            print(neutralize(f"Q: {q}"))
        if payload.status != "ok":
            print(neutralize(f"turn failed ({payload.status}): {payload.error}"), file=sys.stderr)
        print(neutralize(payload.answer or "(no answer)"))
        print()
        print(neutralize(sources_row(payload)))
        for line in verification_lines(payload):
            print(neutralize(line))
        if answer.record.excerpts:
            print(neutralize(excerpt_lines(answer.record, payload)))
        print(neutralize(summary_line(payload)))
        cfg = payload.config
        protocol = f" ({cfg['tool_protocol']})" if cfg.get("tool_protocol") else ""
        print(neutralize(f"provider: {cfg.get('provider_label') or cfg.get('provider')} · "
                         f"model: {cfg.get('model_label') or cfg.get('model')} · retriever: {cfg.get('retriever')} · "
                         f"mode: {cfg.get('mode')}{protocol}"))
        if len(questions) > 1:
            print()
    return 1 if failed else 0
