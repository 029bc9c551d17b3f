"""`chat`: a conversation in the terminal, each question a follow-up of the ones before (docs/design.md §11).

A thin loop over `session.Conversations`: every answer is printed as `ask` prints it (`ask.print_answer`,
terminal controls made visible), and is traced with its conversation id and position like any turn.
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid

from ..errors import WorkbenchError
from ..questions import check_conversation_id
from ..render.sources import document_lines, sources_row, verification_lines
from ..session import AskSpec, Conversations, Session
from ..terminal import neutralize
from ._answer import print_answer
from ._signals import Prompt
from ._options import (add_context_option, add_run_options, add_trace_options, add_verify_options, context_policy,
                       ask_spec, db_path, settings_of, warn_skipped)

#: The chat's commands; any other line is a question (a question that starts with "/" is typed as "//…").
COMMANDS = {
    "/new": "start a new conversation (the earlier turns are no longer sent)",
    "/sources": "every document of the last answer: how it was read, cited, consulted, carried from which turn",
    "/verify": "verify the last answer by ablation (docs/design.md §9)",
    "/quit": "leave (Ctrl-D too)",
}
PROMPT = "you> "


def register(sub) -> None:
    p = sub.add_parser("chat", help="A conversation in the terminal: each question follows up on the ones before.")
    p.add_argument("--conversation", metavar="ID",
                   help="go on with conversation ID from the trace database (default: a new conversation)")
    add_context_option(p)
    add_run_options(p)
    add_trace_options(p)
    add_verify_options(p)
    p.set_defaults(func=run)


def new_conversation_id() -> str:
    return f"chat-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}"


def say(text: str) -> None:
    print(neutralize(text), flush=True)


def run(args: argparse.Namespace) -> int:
    if args.conversation is not None:
        check_conversation_id(args.conversation)
        if args.no_trace:
            raise WorkbenchError("--conversation goes on with a conversation from the trace database, which "
                                 "--no-trace turns off")
    spec = ask_spec(args)
    session = Session.open(args.corpus, args.retriever, trace_db=db_path(args), trace=not args.no_trace,
                           settings=settings_of(args))
    warn_skipped(session.corpus)
    chat = Conversations(session, context_policy(args))
    conversation = args.conversation or new_conversation_id()
    if args.conversation is None:
        chat.start(conversation)
    say("Ask a question; each one follows up on the ones before. Commands: " + ", ".join(COMMANDS) + ".")
    _started(chat, conversation)
    with Prompt() as read_line:  # not input(): it can miss a Ctrl-C that comes right after the prompt
        return _loop(args, session, chat, conversation, read_line, spec)


def _loop(args: argparse.Namespace, session: Session, chat: Conversations, conversation: str, read_line,
          spec: AskSpec) -> int:
    last = None  # the last answer asked in this conversation (what /sources and /verify look at)
    while True:
        try:
            line = read_line(PROMPT)
        except EOFError:
            print()
            return 0
        except KeyboardInterrupt:
            print()
            say("(/quit or Ctrl-D to leave)")
            continue
        text = line.strip()
        if not text:
            continue
        if text.startswith("/") and not text.startswith("//"):
            command = text.split()[0].lower()
            if command == "/quit":
                return 0
            if command == "/new":
                conversation, last = new_conversation_id(), None
                chat.start(conversation)
                _started(chat, conversation)
            elif command == "/sources":
                _sources(last)
            elif command == "/verify":
                last = _verify(session, last, args.verify_budget)
            else:
                say(f"unknown command {command}: " + "; ".join(f"{c} {what}" for c, what in COMMANDS.items())
                    + ' (a question that starts with "/": type "//…")')
            continue
        if text.startswith("//"):
            text = text[1:]
        try:
            answer = chat.ask(text, conversation, spec=spec)
        except KeyboardInterrupt:
            print()
            say("(interrupted: that question was dropped, the conversation goes on without it)")
            continue
        except WorkbenchError as exc:  # e.g. a question over the length bound: say so, keep the conversation
            print(neutralize(f"error: {exc}"), file=sys.stderr, flush=True)
            continue
        print_answer(answer)
        sys.stdout.flush()
        last = answer


def _started(chat: Conversations, conversation: str) -> None:
    earlier = chat.turns(conversation)
    if earlier:
        say(f"conversation {conversation}: going on after its {len(earlier)} earlier turn(s); the last question "
            f"was: {earlier[-1].question}")
    else:
        say(f"conversation {conversation} (new)")


def _sources(last) -> None:
    if last is None:
        say("no answer yet in this conversation")
        return
    payload = last.payload
    say(f"Turn {last.record.position}: {payload.question}")
    say(sources_row(payload))
    for line in document_lines(payload):
        say(line)


def _verify(session: Session, last, budget: int):
    if last is None:
        say("no answer yet in this conversation")
        return last
    if last.payload.verification:
        say("already verified:")
    else:
        try:
            last = session.verify(last, budget=budget)
        except WorkbenchError as exc:
            print(neutralize(f"error: {exc}"), file=sys.stderr, flush=True)
            return last
        if last.trace_error:
            print(neutralize(f"warning: the verification was not traced: {last.trace_error}"), file=sys.stderr)
    for line in verification_lines(last.payload) or ["(nothing to verify: the answer failed or is empty)"]:
        say(line)
    say(sources_row(last.payload))
    return last
