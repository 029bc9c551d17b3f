"""Excerpt-marker ranges at scale (issue 33, item 7): `python -m workbench provenance FILE` on a 50 KB answer
made of `[0-50]` markers. Prints medians; see benchmarks/README.md.

    .venv/bin/python benchmarks/marker_ranges.py [--runs N] [--kb 50]

The turn record is an excerpt-mode turn with 5 excerpts (numbers 1-5, as `-k 5` issues them) whose answer is
`[0-50]` repeated up to the size asked. Each run is a fresh process (`provenance FILE`, stdout to a
file); per run: wall and CPU seconds (user + system), peak resident memory of that process (`os.wait4`'s `ru_maxrss`), the bytes of
JSON it printed and the citations in them. Medians over the runs.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
UNIT = "[0-50]"


def record(kb: int) -> dict:
    answer = UNIT * (kb * 1024 // len(UNIT))
    excerpts = [{"n": n, "doc_id": f"doc-{n}", "chunk_index": 0, "page": None, "score": 1.0,
                 "text": f"Excerpt {n}: " + "words of the passage " * 20, "chunk_type": "source",
                 "artifact_kind": None} for n in range(1, 6)]
    return {"question": "q", "mode": "excerpts", "tool_calls": [], "excerpts": excerpts, "answer": answer}


def one_run(path: Path, out: Path) -> tuple[float, float, int, int, int]:
    """(wall seconds, CPU seconds, peak RSS in bytes, bytes printed, citations printed) of one `provenance FILE`
    process."""
    with open(out, "wb") as fh:
        start = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "workbench", "provenance", str(path)], cwd=ROOT, stdout=fh)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"provenance exited {proc.returncode}")
    payload = json.loads(out.read_bytes())
    cpu = usage.ru_utime + usage.ru_stime
    return wall, cpu, usage.ru_maxrss * 1024, out.stat().st_size, len(payload["citations"])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--kb", type=int, default=50)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path, out = Path(tmp) / "turn.json", Path(tmp) / "payload.json"
        data = record(args.kb)
        path.write_text(json.dumps(data), encoding="utf-8")
        markers = data["answer"].count("[0-50]")
        runs = [one_run(path, out) for _ in range(args.runs)]
    wall, cpu, rss, size, cites = (statistics.median(r[i] for r in runs) for i in range(5))
    print(f"answer {len(data['answer']):,} chars, {markers:,} `[0-50]` markers, 5 excerpts; {args.runs} runs")
    print(f"provenance FILE: median {wall:.2f} s wall · {cpu:.2f} s CPU · peak RSS {rss / 2**20:.0f} MiB · "
          f"{size / 2**20:.1f} MiB of JSON · {cites:,.0f} citations")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
