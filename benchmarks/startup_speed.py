"""Start-up and cached-index speed in whole processes, this tree beside an older one, interleaved.

    git -C /path/to/clone archive <old-commit> | tar -x -C /tmp/wb-old      # e.g. main before issue 15
    .venv/bin/python benchmarks/startup_speed.py --old /tmp/wb-old [--runs 7]

Every figure is the wall time of a fresh `python` process (what a user waits for), repeated
`--runs` times; the variants of one round run back to back in a rotating order, so machine
drift hits them alike. Printed: medians (min-max), and the load average before and after.

1. anchor: `python -c "import llama_index.core"`, the import the query path used to pay;
2. `python -m workbench ask "How do I configure SSO?" --no-trace`, demo corpus, index on disk;
3. `python -m workbench retrieve` of the 300 SciFact dev claims (k = 10) with bm25, vector and
   hybrid, every index on disk (needs ../shared/data/scifact; skipped otherwise);
4. the cached vector and hybrid SciFact indexes loaded by `get_retriever` in a fresh process
   (everything that call imports included).

Without `--old` only this tree is measured. Indexes are built once, before timing, under a
temporary WORKBENCH_HOME per tree (the two trees' cache formats differ).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from workbench.config import benchmark_data_dir  # noqa: E402  (honours WORKBENCH_BENCHMARK_DATA, like every benchmark)
from timing import wall_ms  # noqa: E402

SCIFACT = benchmark_data_dir() / "scifact"
QUESTION = "How do I configure SSO?"

_LOAD = """
import sys, time
from workbench.corpus import load_corpus
from workbench.retrieval import get_retriever
corpus = load_corpus(sys.argv[1])
t = time.perf_counter()
r = get_retriever(sys.argv[2], corpus)
print(time.perf_counter() - t)
"""


def _env(home: Path) -> dict[str, str]:
    return {**os.environ, "WORKBENCH_HOME": str(home), "OMP_WAIT_POLICY": "PASSIVE"}


def _wall(args: list[str], cwd: Path, home: Path) -> float:
    return wall_ms(args, cwd=cwd, env=_env(home)) / 1000


def _printed(args: list[str], cwd: Path, home: Path) -> float:
    out = subprocess.run([sys.executable, *args], cwd=cwd, env=_env(home), check=True, capture_output=True, text=True)
    return float(out.stdout.strip().splitlines()[-1])


def _fmt(xs: list[float]) -> str:
    return f"{statistics.median(xs):.2f} s ({min(xs):.2f}-{max(xs):.2f})"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old", type=Path, help="an older source tree to measure beside this one")
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--no-scifact", action="store_true", help="only the anchor and ask")
    args = ap.parse_args()
    trees = {"new": ROOT} | ({"old": args.old.resolve()} if args.old else {})
    homes = {name: Path(tempfile.mkdtemp(prefix=f"wb-startup-{name}-")) for name in trees}
    scifact = not args.no_scifact and (SCIFACT / "corpus.workbench.jsonl").exists()
    queries = Path(tempfile.mkdtemp(prefix="wb-startup-q-")) / "claims.jsonl"
    if scifact:
        claims = [json.loads(x) for x in (SCIFACT / "claims_dev.jsonl").read_text().splitlines() if x.strip()]
        queries.write_text("".join(json.dumps({"id": c["id"], "question": c["claim"]}) + "\n" for c in claims))
    corpus = str(SCIFACT / "corpus.workbench.jsonl")

    # variant name -> (tree, argv, how to read the time)
    variants: dict[str, tuple[str, list[str], str]] = {"import llama_index.core": ("new", ["-c", "import llama_index.core"], "wall")}
    for tree in trees:
        variants[f"ask, cached demo index [{tree}]"] = (tree, ["-m", "workbench", "ask", QUESTION, "--no-trace"], "wall")
    if scifact:
        for r in ("bm25", "vector", "hybrid"):
            for tree in trees:
                variants[f"retrieve 300 SciFact claims, {r} [{tree}]"] = (
                    tree, ["-m", "workbench", "retrieve", "--corpus", corpus, "--queries", str(queries),
                           "--retriever", r, "--k", "10", "--json"], "wall")
        for r in ("vector", "hybrid"):
            for tree in trees:
                variants[f"get_retriever, cached SciFact {r} [{tree}]"] = (tree, ["-c", _LOAD, corpus, r], "printed")

    print(f"load average before: {os.getloadavg()}", flush=True)
    for name, (tree, argv, _) in variants.items():  # build every index once; the timing rounds find it on disk
        _wall(argv, trees[tree], homes[tree])
    times: dict[str, list[float]] = {name: [] for name in variants}
    names = list(variants)
    for i in range(args.runs):
        for name in names[i % len(names):] + names[:i % len(names)]:  # rotate the order each round
            tree, argv, how = variants[name]
            measure = _wall if how == "wall" else _printed
            times[name].append(measure(argv, trees[tree], homes[tree]))
    print(f"load average after: {os.getloadavg()}  ({args.runs} rounds)")
    for name in names:
        print(f"{name:<52} {_fmt(times[name])}")
    anchor = times["import llama_index.core"]
    for tree in trees:
        ask = times[f"ask, cached demo index [{tree}]"]
        ratios = [a / b for a, b in zip(ask, anchor)]
        print(f"ask [{tree}] / import llama_index.core, paired per round: median {statistics.median(ratios):.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
