"""`ask`: answer questions and print the answer with its honest sources row."""

from __future__ import annotations

import argparse
import json

from ..errors import WorkbenchError
from ..payload import validate_json
from ..questions import Question, check_conversation_id, read_questions
from ..session import Conversations, Session
from ..terminal import neutralize
from ..types import ANSWERED, TRUNCATED
from ._answer import print_answer, warn_status, warn_untraced
from ._options import (QUESTIONS_HELP, add_context_option, add_json_option, add_run_options, add_trace_options, add_verify_options,
                       ask_spec, context_policy, db_path, settings_of, warn_skipped)


def register(sub) -> None:
    p = sub.add_parser("ask", help="Answer a question and print its sources row and three sets.")
    p.add_argument("question", nargs="?", help="the question")
    p.add_argument("--questions", metavar="FILE.jsonl", help=QUESTIONS_HELP)
    p.add_argument("--conversation", metavar="ID",
                   help="ask QUESTION as the next turn of conversation ID: its earlier turns are loaded from the "
                        "trace database (a new ID starts a conversation)")
    add_context_option(p)
    add_run_options(p)
    add_trace_options(p)
    add_verify_options(p)
    add_json_option(p)
    p.set_defaults(func=run)


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
    spec = ask_spec(args)
    session = Session.open(args.corpus, args.retriever, trace_db=db_path(args), trace=not args.no_trace,
                           settings=settings_of(args))
    warn_skipped(session.corpus)
    conversations = Conversations(session, context_policy(args))
    failed = 0
    for q in lines:
        answer = conversations.ask(q.text, q.conversation, spec=spec)
        # a truncated answer is an answer, with a warning: not a failure
        failed += answer.payload.status not in ANSWERED or answer.trace_error is not None
        if args.json:
            warn_untraced(answer)
            if answer.payload.status == TRUNCATED:  # the JSON has the answer; a person piping it hears why
                warn_status(answer.payload)
            print(json.dumps(validate_json(answer.payload.to_json()), ensure_ascii=False), flush=True)
            continue
        if len(lines) > 1:
            print(neutralize(f"Q: {q.text}"))
        print_answer(answer)
        if len(lines) > 1:
            print()
    return 1 if failed else 0
