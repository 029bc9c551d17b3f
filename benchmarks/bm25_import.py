"""Wall time of a fresh process that imports bm25s, and of a cached `workbench ask`, where scipy is installed.

    .venv/bin/python benchmarks/bm25_import.py [--runs 9] [--old /tmp/wb-old]

bm25s imports `scipy.sparse` at import time when it can; the workbench imports bm25s without it
(`workbench.retrieval.bm25.import_bm25s`). Fresh interpreters, alternated run by run: **the anchor, a bare
`python -c pass`**; `import bm25s` as any code does; `import_bm25s()`; and `workbench ask --no-trace` on the demo
corpus, its index cached (built once before the runs, in a temporary WORKBENCH_HOME). With `--old`, an older source
tree (`git archive <commit> | tar -x -C /tmp/wb-old`,
then `python -m compileall -q /tmp/wb-old/workbench`: this tree's bytecode is compiled too) runs the same `ask` beside it. Medians of `--runs`, in
milliseconds of wall time. Without scipy installed the two imports are the same, and the script says so.
"""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path

from timing import print_fresh_process_medians

ROOT = Path(__file__).resolve().parent.parent
ASK = ["-m", "workbench", "ask", "How do I configure SSO?", "--no-trace"]
PROGRAMS = {
    "anchor: python -c pass": ["-c", "pass"],
    "import bm25s": ["-c", "import bm25s"],
    "import_bm25s()": ["-c", "from workbench.retrieval.bm25 import import_bm25s; import_bm25s()"],
    "workbench ask (cached)": ASK,
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--old", type=Path, help="an older source tree whose `ask` is timed beside this one's")
    args = ap.parse_args()
    if importlib.util.find_spec("scipy") is None:
        print("scipy is not installed in this venv: bm25s never imports it here, so there is nothing to compare")
    runs = {name: (program, ROOT) for name, program in PROGRAMS.items()}
    if args.old:
        runs["workbench ask (cached) [old tree]"] = (ASK, args.old.resolve())
    print_fresh_process_medians(runs, args.runs, warm=ASK, root=ROOT)  # the warm-up builds and caches the index


if __name__ == "__main__":
    main()
