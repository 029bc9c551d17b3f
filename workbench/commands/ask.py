"""`ask`: answer questions and print the answer with its honest sources row."""

from __future__ import annotations

import argparse
import json
import sys

from ..errors import CorpusError, WorkbenchError
from ..jsonl import json_objects
from ..render import sources_row, summary_line
from ..session import Session
from ..terminal import neutralize
from ._options import add_json_option, add_run_options, add_trace_options, db_path, warn_skipped


def register(sub) -> None:
    p = sub.add_parser("ask", help="Answer a question and print its sources row and three sets.")
    p.add_argument("question", nargs="?", help="the question")
    p.add_argument("--questions", metavar="FILE.jsonl", help='a file of {"question": …} lines')
    add_run_options(p)
    add_trace_options(p)
    add_json_option(p)
    p.set_defaults(func=run)


def read_questions(path: str) -> list[str]:
    """Questions from a JSONL file of {"question": …} lines; errors name the file and line."""
    return [obj["question"] for _, obj in read_question_records(path)]


def read_question_records(path: str) -> list[tuple[int, dict]]:
    """(line number, object) for each {"question": …, …} line; errors name the file and line."""
    try:
        lines = open(path, encoding="utf-8").read().splitlines()
    except OSError as exc:
        raise CorpusError(f"cannot read questions file: {exc.strerror}", path) from None
    except UnicodeDecodeError as exc:
        raise CorpusError(f"not valid UTF-8 text ({exc.reason} at byte {exc.start})", path) from None
    out = []
    for i, obj in json_objects(lines, path):
        if not isinstance(obj.get("question"), str) or not obj["question"].strip():
            raise CorpusError('each line needs a non-empty string field "question"', path, i)
        out.append((i, obj))
    if not out:
        raise CorpusError("no questions in file", path)
    return out


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
    questions = read_questions(args.questions) if args.questions else [args.question]
    session = Session.open(args.corpus, args.retriever, trace_db=db_path(args), trace=not args.no_trace)
    warn_skipped(session.corpus)
    failed = 0
    for q in questions:
        try:
            answer = session.ask(q, provider=args.provider, model=args.model, mode=args.mode, k=args.k,
                                 faults=args.fault)
        except ValueError as exc:  # bad provider options, e.g. an unknown fault name
            raise WorkbenchError(str(exc)) from None
        payload = answer.payload
        failed += payload["status"] != "ok" or answer.trace_error is not None
        if answer.trace_error:
            print(neutralize(f"warning: this turn was not traced: {answer.trace_error}"), file=sys.stderr)
        if args.json:
            print(json.dumps(payload, ensure_ascii=False), flush=True)
            continue
        # Text for people: documents, questions and model output may hold terminal control sequences.
        if len(questions) > 1:
            print(neutralize(f"Q: {q}"))
        if payload["status"] != "ok":
            print(neutralize(f"turn failed ({payload['status']}): {payload['error']}"), file=sys.stderr)
        print(neutralize(payload["answer"] or "(no answer)"))
        print()
        print(neutralize(sources_row(payload)))
        if answer.record.excerpts:
            print(neutralize(excerpt_lines(answer.record, payload)))
        print(neutralize(summary_line(payload)))
        cfg = payload["config"]
        print(neutralize(f"provider: {cfg.get('provider_label') or cfg.get('provider')} · model: {cfg.get('model')} · "
                         f"retriever: {cfg.get('retriever')} · mode: {cfg.get('mode')}"))
        if len(questions) > 1:
            print()
    return 1 if failed else 0
