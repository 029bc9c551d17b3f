"""`ask`: answer questions and print the answer with its honest sources row."""

from __future__ import annotations

import argparse
import json
import sys

from ..errors import WorkbenchError
from ..questions import Question, check_conversation_id, read_questions
from ..render import sources_row, summary_line, verification_lines
from ..session import Conversations, Session
from ..terminal import neutralize
from ._options import (add_context_option, add_json_option, add_run_options, add_trace_options, add_verify_options,
                       context_policy, db_path, provider_options, warn_skipped)


def register(sub) -> None:
    p = sub.add_parser("ask", help="Answer a question and print its sources row and three sets.")
    p.add_argument("question", nargs="?", help="the question")
    p.add_argument("--questions", metavar="FILE.jsonl",
                   help='a file of {"question": …} lines; lines with the same "conversation": ID are one '
                        "conversation, in file order")
    p.add_argument("--conversation", metavar="ID",
                   help="ask QUESTION as the next turn of conversation ID: its earlier turns are loaded from the "
                        "trace database (a new ID starts a conversation)")
    add_context_option(p)
    add_run_options(p)
    add_trace_options(p)
    add_verify_options(p)
    add_json_option(p)
    p.set_defaults(func=run)


def excerpt_lines(record, payload) -> str:
    """Excerpt mode: each `[n]` as the model saw it, labelled Source text / Generated …, and whether cited."""
    from ..prompts import excerpt_header
    from ..types import artifact_label

    cited = {c["n"] for c in payload.get("citations", []) if c.get("valid") and c.get("n") is not None}
    lines = ["Excerpts:"]
    for e in record.excerpts:
        lines.append(f"  {excerpt_header(e.n, e.file_name, e.page, e.chunk_index)} · "
                     f"{artifact_label(e.chunk_type, e.artifact_kind)} · {e.title or e.doc_id}"
                     + (" · cited" if e.n in cited else ""))
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    if bool(args.question) == bool(args.questions):
        raise WorkbenchError("give exactly one of QUESTION or --questions FILE.jsonl")
    if args.conversation is not None:
        if args.questions:
            raise WorkbenchError('--conversation goes with one QUESTION; in a questions file each line names its '
                                 'conversation ("conversation": ID)')
        check_conversation_id(args.conversation)
        if args.no_trace:
            raise WorkbenchError("--conversation continues a conversation from the trace database, which "
                                 "--no-trace turns off")
    lines = read_questions(args.questions) if args.questions else \
        [Question(args.question, 1, conversation=args.conversation)]
    options = provider_options(args)
    session = Session.open(args.corpus, args.retriever, trace_db=db_path(args), trace=not args.no_trace)
    warn_skipped(session.corpus)
    conversations = Conversations(session, context_policy(args))
    failed = 0
    for q in lines:
        answer = conversations.ask(q.text, q.conversation, provider=args.provider, model=args.model, mode=args.mode,
                                   k=args.k, tool_protocol=args.tool_protocol, verify=args.verify,
                                   verify_budget=args.verify_budget, **options)
        failed += answer.payload["status"] != "ok" or answer.trace_error is not None
        if args.json:
            warn_untraced(answer)
            print(json.dumps(answer.payload, ensure_ascii=False), flush=True)
            continue
        if len(lines) > 1:
            print(neutralize(f"Q: {q.text}"))
        print_answer(answer)
        if len(lines) > 1:
            print()
    return 1 if failed else 0


def warn_untraced(answer) -> None:
    if answer.trace_error:
        print(neutralize(f"warning: this turn was not traced: {answer.trace_error}"), file=sys.stderr)


def print_answer(answer) -> None:
    """One answer as text for people (`ask`, `chat`): the answer, its sources row, its verification, its
    excerpts, the three-set summary and the configuration; documents, questions and model output may hold
    terminal control sequences, so everything is neutralised."""
    payload = answer.payload
    warn_untraced(answer)
    if payload["status"] != "ok":
        print(neutralize(f"turn failed ({payload['status']}): {payload['error']}"), file=sys.stderr)
    print(neutralize(payload["answer"] or "(no answer)"))
    print()
    print(neutralize(sources_row(payload)))
    for line in verification_lines(payload):
        print(neutralize(line))
    if answer.record.excerpts:
        print(neutralize(excerpt_lines(answer.record, payload)))
    print(neutralize(summary_line(payload)))
    cfg = payload["config"]
    protocol = f" ({cfg['tool_protocol']})" if cfg.get("tool_protocol") else ""
    print(neutralize(f"provider: {cfg.get('provider_label') or cfg.get('provider')} · "
                     f"model: {cfg.get('model_label') or cfg.get('model')} · retriever: {cfg.get('retriever')} · "
                     f"mode: {cfg.get('mode')}{protocol}"))
    if answer.record.conversation_id is not None:
        turns = (cfg.get("context") or {}).get("turns")
        print(neutralize(f"conversation: {answer.record.conversation_id} · turn {answer.record.position} · "
                         f"tool results kept for the last {turns} earlier turn(s)"))
