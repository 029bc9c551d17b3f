"""The default local model in agent mode over the Arduino Help Center (407 articles), next to excerpt mode.

Ten questions of this benchmark's own (`benchmarks/arduino_agent_questions.jsonl`: one structural, nine about one
article each) are asked with `llamacpp` (SmolLM2-135M-Instruct through xllamacpp, its default json-steps protocol)
in agent mode and in excerpt mode, over `arduino-help-center/corpus.jsonl` in `$WORKBENCH_BENCHMARK_DATA` (default
../shared/data; skipped with the reason when absent). Per turn: status, tool calls, time. And the machinery checks
that must hold whatever the model does: no `context_overflow` after a tool result, every payload valid against its
JSON Schema, every accepted citation in the retrieved set; plus what the tool results cut (pages, parts) and the
estimate's margin (llama.cpp's own prompt token count against the budget's estimate of the same request).

    WORKBENCH_BENCHMARK_DATA=../shared/data .venv/bin/python benchmarks/agent_context.py [--limit N] [--n-ctx 8192] [--max-tokens N]
        [--modes agent,excerpts] [--json OUT.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from workbench.config import benchmark_data_dir  # noqa: E402
from workbench.providers import readiness  # noqa: E402
from workbench.schemas import PAYLOAD, load  # noqa: E402
from workbench.session import Session  # noqa: E402

QUESTIONS = ROOT / "benchmarks" / "arduino_agent_questions.jsonl"


def check(answer) -> list[str]:
    """The machinery's promises broken by one turn (empty: all held)."""
    import jsonschema

    problems = []
    record, payload = answer.record, answer.payload
    if record.status == "context_overflow" and record.tool_calls:
        problems.append("context_overflow after a tool result")
    try:
        jsonschema.validate(payload.to_json(), load(PAYLOAD))
    except jsonschema.ValidationError as exc:
        problems.append(f"invalid payload: {exc.message[:100]}")
    retrieved = set(payload.sets.retrieved)
    if any(c not in retrieved for c in payload.sets.cited):
        problems.append("an accepted citation that was not retrieved")
    return problems


def turn_row(mode: str, q: dict, answer, seconds: float) -> dict:
    record = answer.record
    cuts = [f"{c.name}:{c.cut.kind} {c.cut.page}/{c.cut.pages}" for c in record.tool_calls if c.cut]
    ins = [c.tokens_in for c in record.model_calls if c.tokens_in]
    return {"mode": mode, "id": q["id"], "status": record.status, "tools": [c.name for c in record.tool_calls],
            "tool_errors": sum(1 for c in record.tool_calls if c.error), "cuts": cuts, "seconds": round(seconds, 1),
            "consulted": list(answer.payload.sets.consulted), "expected": q.get("expected", []),
            "rejected": len(answer.payload.rejected_citations), "max_prompt_tokens": max(ins, default=None),
            "context": record.config.get("context_window"), "problems": check(answer), "error": record.error,
            "answer": record.answer[:160]}


def table(rows: list[dict]) -> str:
    out = ["| mode | q | status | tool calls | cut | s | consulted expected | problems |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        hit = "—" if not r["expected"] else ("yes" if set(r["expected"]) & set(r["consulted"]) else "no")
        out.append(f"| {r['mode']} | {r['id']} | {r['status']} | {', '.join(r['tools']) or '—'} | "
                   f"{', '.join(r['cuts']) or '—'} | {r['seconds']} | {hit} | {'; '.join(r['problems']) or 'none'} |")
    return "\n".join(out)


def summary(rows: list[dict]) -> str:
    lines = []
    for mode in sorted({r["mode"] for r in rows}):
        mine = [r for r in rows if r["mode"] == mode]
        statuses = {s: sum(1 for r in mine if r["status"] == s) for s in sorted({r["status"] for r in mine})}
        secs = [r["seconds"] for r in mine]
        lines.append(f"- {mode}: {len(mine)} turns, statuses {statuses}, tool calls per turn "
                     f"{statistics.mean(len(r['tools']) for r in mine):.1f}, seconds per turn median "
                     f"{statistics.median(secs):.1f} (max {max(secs):.1f}), broken promises "
                     f"{sum(len(r['problems']) for r in mine)}")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=int, default=10)
    ap.add_argument("--n-ctx", type=int, default=None)
    ap.add_argument("--max-tokens", type=int, default=None, help="output token limit per model call")
    ap.add_argument("--modes", default="agent,excerpts")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    corpus = benchmark_data_dir() / "arduino-help-center" / "corpus.jsonl"
    if not corpus.exists():
        print(f"skipped: {corpus} is absent (set WORKBENCH_BENCHMARK_DATA to the folder holding arduino-help-center)")
        return 0
    ready = readiness("llamacpp")
    if not ready:
        print(f"skipped: the llamacpp provider cannot run here: {ready.hint}")
        return 0
    session = Session.open(corpus, trace=False)
    questions = [json.loads(line) for line in QUESTIONS.read_text(encoding="utf-8").splitlines() if line.strip()]
    options = {"n_ctx": args.n_ctx, "max_tokens": args.max_tokens}
    rows = []
    for mode in args.modes.split(","):
        for q in questions[: args.limit]:
            start = time.perf_counter()
            answer = session.ask(q["question"], provider="llamacpp", mode=mode, k=3, judge=None, **options)
            rows.append(turn_row(mode, q, answer, time.perf_counter() - start))
            print(json.dumps(rows[-1], ensure_ascii=False), flush=True)
    print(table(rows))
    print(summary(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1, ensure_ascii=False), encoding="utf-8")
    return 1 if any(r["problems"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
