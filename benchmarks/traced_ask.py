"""A traced `ask` against the same `ask --no-trace`, as whole processes, in the same run (issue 21 item 9).

    .venv/bin/python benchmarks/traced_ask.py [--runs 9] [--old /path/to/older/tree]

Every figure is the wall time of a fresh `python -m workbench ask` process (what a user waits for) on the
Arduino Help Center corpus (`../shared/data/arduino-help-center/corpus.jsonl`; SKIP when absent), the
bm25 index built once before timing (a cached ask). The anchor is `--no-trace` in the same tree; the
traced variant writes its turn to a trace database under the run's own WORKBENCH_HOME (every run adds one
turn to the same file, as a user's asks do). The variants of a round run back to back in a rotating order,
so machine drift hits them alike. Printed: medians (min-max) of wall time and of CPU time (user + system,
steadier than wall time on a shared, loaded machine) and the ratio traced / untraced, median of the
per-round ratios, and the load average before and after. `--old` measures an older source tree
beside this one (e.g. `git archive <commit> | tar -x -C /tmp/old`), anchor and traced alike.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from workbench.config import benchmark_data_dir  # noqa: E402

CORPUS = benchmark_data_dir() / "arduino-help-center" / "corpus.jsonl"
QUESTION = json.loads((ROOT / "benchmarks" / "arduino_questions.jsonl").read_text().splitlines()[0])["question"]


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _wall(argv: list[str], cwd: Path, home: Path) -> tuple[float, float]:
    """(wall time, CPU time user + system) of one `python -m workbench ARGV` process."""
    env = {**os.environ, "WORKBENCH_HOME": str(home), "OMP_WAIT_POLICY": "PASSIVE"}
    env.pop("WORKBENCH_DB", None)
    c, t = _cpu(), time.perf_counter()
    subprocess.run([sys.executable, "-m", "workbench", *argv], cwd=cwd, env=env, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t, _cpu() - c


def _fmt(xs: list[float]) -> str:
    return f"{statistics.median(xs):.2f} s ({min(xs):.2f}-{max(xs):.2f})"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--old", type=Path, help="an older source tree to measure beside this one")
    args = ap.parse_args()
    if not CORPUS.exists():
        print(f"SKIP: {CORPUS} is absent (set WORKBENCH_BENCHMARK_DATA)")
        return 0
    trees = {"new": ROOT} | ({"old": args.old.resolve()} if args.old else {})
    homes = {tree: Path(tempfile.mkdtemp(prefix=f"wb-traced-{tree}-")) for tree in trees}
    ask = ["ask", QUESTION, "--corpus", str(CORPUS)]
    variants = {}
    for tree in trees:
        variants[f"ask --no-trace [{tree}] (anchor)"] = (tree, [*ask, "--no-trace"])
        variants[f"ask, traced [{tree}]"] = (tree, ask)

    print(f"load average before: {os.getloadavg()}", flush=True)
    for tree, argv in variants.values():  # builds the index, creates and migrates the trace file
        _wall(argv, trees[tree], homes[tree])
    times: dict[str, list[float]] = {name: [] for name in variants}
    cpu: dict[str, list[float]] = {name: [] for name in variants}
    names = list(variants)
    for i in range(args.runs):
        for name in names[i % len(names):] + names[:i % len(names)]:  # rotate the order each round
            tree, argv = variants[name]
            wall, used = _wall(argv, trees[tree], homes[tree])
            times[name].append(wall)
            cpu[name].append(used)
    print(f"load average after: {os.getloadavg()}  ({args.runs} rounds, corpus {CORPUS})")
    print(f"{'':<36} wall time              CPU time (user + system)")
    for name in names:
        print(f"{name:<36} {_fmt(times[name]):<22} {_fmt(cpu[name])}")
    for tree in trees:
        for what, data in (("wall", times), ("CPU", cpu)):
            traced, anchor = data[f"ask, traced [{tree}]"], data[f"ask --no-trace [{tree}] (anchor)"]
            ratios = [t / a for t, a in zip(traced, anchor)]
            print(f"traced / untraced [{tree}], {what}, paired per round: median {statistics.median(ratios):.2f} "
                  f"(ratio of medians {statistics.median(traced) / statistics.median(anchor):.2f}; "
                  f"extra {statistics.median(traced) - statistics.median(anchor):.2f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
