"""Wall time of a fresh process that imports bm25s, and of a cached `workbench ask`, where scipy is installed.

    .venv/bin/python benchmarks/bm25_import.py [--runs 9]

bm25s imports `scipy.sparse` at import time when it can; the workbench imports bm25s without it
(`workbench.retrieval.bm25.import_bm25s`). Fresh interpreters, alternated run by run: **the anchor, a bare
`python -c pass`**; `import bm25s` as any code does; `import_bm25s()`; and `workbench ask --no-trace` on the demo
corpus, its index cached (built once before the runs, in a temporary WORKBENCH_HOME). Medians of `--runs`, in
milliseconds of wall time. Without scipy installed the two imports are the same, and the script says so.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

PROGRAMS = {
    "anchor: python -c pass": ["-c", "pass"],
    "import bm25s": ["-c", "import bm25s"],
    "import_bm25s()": ["-c", "from workbench.retrieval.bm25 import import_bm25s; import_bm25s()"],
    "workbench ask (cached)": ["-m", "workbench", "ask", "How do I configure SSO?", "--no-trace"],
}


def wall_ms(args: list[str], env: dict) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, *args], cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL)
    return (time.perf_counter() - start) * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=9)
    args = ap.parse_args()
    if importlib.util.find_spec("scipy") is None:
        print("scipy is not installed in this venv: bm25s never imports it here, so there is nothing to compare")
    with tempfile.TemporaryDirectory() as home:
        env = {**os.environ, "WORKBENCH_HOME": home}
        wall_ms(PROGRAMS["workbench ask (cached)"], env)  # builds and caches the index
        times: dict[str, list[float]] = {name: [] for name in PROGRAMS}
        for _ in range(args.runs):
            for name, program in PROGRAMS.items():
                times[name].append(wall_ms(program, env))
    for name, values in times.items():
        print(f"{name:24} median {statistics.median(values):7.1f} ms   ({len(values)} runs)")


if __name__ == "__main__":
    main()
