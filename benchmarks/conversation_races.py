"""Two turns of one conversation at once, and what placing a turn costs (issue 33 item 3).

    .venv/bin/python benchmarks/conversation_races.py [--rounds 10] [--turns 200] [--stored 20000]

(1) Rounds: a conversation gets one turn (`ask --conversation ID`), then two `python -m workbench ask
--conversation ID` processes are started at the same moment against the same DuckDB file, as a user with two
terminals does (no gate: the race as it happens). A round collided when two turns share a position, lost a turn
when fewer than three were written. Run in agent mode and in excerpt mode (where a collision also repeats
excerpt numbers).
(2) Append cost: `TraceWriter.log_turn` of a conversation turn (placed in the write transaction since m016/m017)
beside a single turn, into a database already holding `--stored` turns, median ms per turn, interleaved.
Run it from a checkout before the fix and after, on the same machine, to compare.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from workbench.provenance import sources_payload  # noqa: E402
from workbench.trace.connect import duckdb_connect  # noqa: E402
from workbench.trace.writer import TraceWriter  # noqa: E402
from workbench.types import ResultItem, ToolCall, TurnRecord  # noqa: E402

QUESTIONS = ("How do I configure SSO?", "And with Okta?", "How do I rotate an API key?")


def _ask(db: Path, cid: str, mode: str, question: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_WAIT_POLICY": "PASSIVE"}
    return subprocess.Popen([sys.executable, "-m", "workbench", "ask", question, "--conversation", cid,
                             "--mode", mode, "--db", str(db)], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def rounds(db: Path, mode: str, n: int) -> tuple[int, int, int]:
    """(rounds whose positions collided, rounds that lost a turn, rounds whose excerpt numbers repeat)."""
    collided = lost = repeated = 0
    for r in range(n):
        cid = f"bench-{mode}-{uuid.uuid4().hex[:8]}"
        first = _ask(db, cid, mode, QUESTIONS[0])
        first.wait()
        procs = [_ask(db, cid, mode, q) for q in QUESTIONS[1:]]
        for p in procs:
            _, err = p.communicate()
            if p.returncode:
                print(f"round {r}: exit {p.returncode}: {err.strip()[-300:]}", file=sys.stderr)
        with duckdb_connect(db, read_only=True) as con:
            positions = [p for (p,) in con.execute("SELECT position FROM turns WHERE conversation_id = ?", [cid]).fetchall()]
            numbers = [n for (n,) in con.execute("""
                SELECT i.excerpt_n FROM retrieved_items i JOIN turns t USING (turn_id)
                WHERE t.conversation_id = ? AND i.excerpt_n IS NOT NULL""", [cid]).fetchall()]
        collided += len(set(positions)) < len(positions)
        lost += len(positions) < 3
        repeated += len(set(numbers)) < len(numbers)
    return collided, lost, repeated


def _turn(i: int, cid: str | None, position: int | None) -> TurnRecord:
    items = tuple(ResultItem(f"doc-{j}", f"Doc {j}", rank=j + 1, score=1.0, chunk_index=0) for j in range(5))
    return TurnRecord(question=f"How do I do thing {i}?", answer="See [Doc 1](doc-1).",
                      tool_calls=(ToolCall("search", "snippet", {"query": f"q{i}"}, items),),
                      turn_id=uuid.uuid4().hex, config={"provider": "offline", "mode": "agent"},
                      started_at="2024-05-01T10:00:00+00:00", latency_ms=1.0, conversation_id=cid, position=position)


def append_cost(db: Path, turns: int, stored: int) -> tuple[float, float]:
    """Median ms of `log_turn` for (a conversation turn, a single turn), interleaved, `stored` turns already in."""
    w = TraceWriter(db)
    with w.buffered(max_turns=5000, max_age_s=3600):
        for i in range(stored):  # a tenth of them in conversations of 10 turns
            cid = f"old-{i // 10}" if i % 10 == 0 or i < stored // 10 else None
            rec = _turn(i, cid, i % 10 + 1 if cid else None)
            w.log_turn(rec, sources_payload(rec))
    talk, single = [], []
    cid = f"c-{uuid.uuid4().hex[:8]}"
    for i in range(turns):
        for kind, out in (("talk", talk), ("single", single)):
            rec = _turn(i, cid, i + 1) if kind == "talk" else _turn(i, None, None)
            t0 = time.perf_counter()
            w.log_turn(rec, sources_payload(rec))
            out.append((time.perf_counter() - t0) * 1000)
    return statistics.median(talk), statistics.median(single)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--turns", type=int, default=200)
    ap.add_argument("--stored", type=int, default=20000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for mode in ("agent", "excerpts"):
            c, lost, rep = rounds(Path(tmp) / f"races-{mode}.duckdb", mode, args.rounds)
            print(f"{mode}: {c}/{args.rounds} rounds collided, {lost} lost a turn, {rep} repeated excerpt numbers")
        talk, single = append_cost(Path(tmp) / "append.duckdb", args.turns, args.stored)
        print(f"log_turn with {args.stored} turns stored: conversation turn {talk:.2f} ms, single turn {single:.2f} ms "
              f"(median of {args.turns})")


if __name__ == "__main__":
    main()
