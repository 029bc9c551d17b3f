"""`judge`: score claims against evidence texts with a named judge (JSONL in, JSONL out)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ..config import DEFAULT_JUDGE
from ..errors import JudgeInputError
from ..jsonl import json_objects
from ..faithfulness import get_judge
from ..terminal import neutralize
from ._options import add_json_option

BATCH = 256


def register(sub) -> None:
    p = sub.add_parser("judge", help='Judge claims against evidence: lines {"id", "claim", "evidence": [text, …]}.')
    p.add_argument("file", help="JSONL file, or - for stdin")
    p.add_argument("--method", default=DEFAULT_JUDGE,
                   help="judge: lexical (default, offline), embedding, hybrid, llm, or one a WORKBENCH_PLUGINS "
                        "module registers (docs/plugins.md)")
    p.add_argument("--provider", default="ollama", help="chat provider for --method llm (default: ollama)")
    p.add_argument("--model", help="model for --method llm")
    add_json_option(p)
    p.set_defaults(func=run)


def read_items(path: str, lines: list[str]) -> list[tuple[Any, str, list[str]]]:
    """Parse judge input lines; every problem raises `JudgeInputError` naming the line."""
    items = []
    bad_line = lambda message, line: JudgeInputError(f"{path}:{line}: {message}")  # noqa: E731
    for i, obj in json_objects(lines, path, bad_line):
        where = f"{path}:{i}"
        if "id" not in obj:
            raise JudgeInputError(f'{where}: missing field "id"')
        if not isinstance(obj.get("claim"), str):
            raise JudgeInputError(f'{where}: field "claim" must be a string')
        ev = obj.get("evidence")
        if not isinstance(ev, list) or not all(isinstance(t, str) for t in ev):
            raise JudgeInputError(f'{where}: field "evidence" must be a list of strings')
        items.append((obj["id"], obj["claim"], ev))
    return items


def run(args: argparse.Namespace) -> int:
    name = "<stdin>" if args.file == "-" else args.file
    try:
        text = sys.stdin.read() if args.file == "-" else open(args.file, encoding="utf-8").read()
    except (OSError, UnicodeDecodeError) as exc:
        raise JudgeInputError(f"{name}: cannot read: {getattr(exc, 'strerror', None) or exc}") from None
    # llm: fail with the provider's reason (exit 2) rather than print a column of "unknown" verdicts
    options = {"provider": args.provider, "model": args.model, "fail_fast": True} if args.method == "llm" else {}
    judge = get_judge(args.method, **options)
    items = read_items(name, text.splitlines())
    for start in range(0, len(items), BATCH):
        chunk = items[start:start + BATCH]
        for (item_id, _, _), j in zip(chunk, judge.judge_many([(c, ev) for _, c, ev in chunk])):
            if args.json:
                out = {"id": item_id, "score": j.score, "verdict": j.verdict}
                if j.reason and j.verdict == "unknown":
                    out["reason"] = j.reason
                print(json.dumps(out, ensure_ascii=False), flush=True)
            else:
                score = "—" if j.score is None else f"{j.score:.3f}"
                print(neutralize(f"{item_id}\t{score}\t{j.verdict}"))
    return 0
