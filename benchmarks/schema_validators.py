"""Wall time of a fresh process that builds the contract schemas' validators: what `workbench ask --json`,
`verify --json` and `provenance` pay before their first check, and every test worker at its start.

    .venv/bin/python benchmarks/schema_validators.py [--runs 9] [--old /tmp/wb-old]

Fresh interpreters, alternated run by run: **the anchor, a bare `python -c pass`**; `import jsonschema` as any code
does (where rfc3987-syntax is installed, as JupyterLab's jupyter-events installs it, it compiles its IRI parsers at
import); the workbench's `schemas.validator` for both schemas (jsonschema imported by `schemas.load_jsonschema`,
without those parsers); and `workbench ask --json --no-trace` on the demo corpus, its index cached (built once
before the runs, in a temporary WORKBENCH_HOME). With `--old`, an older source tree (`git archive <commit> | tar -x
-C /tmp/wb-old`, then `python -m compileall -q /tmp/wb-old/workbench`: this tree's bytecode is compiled too) runs the same `ask` beside it. Medians of `--runs`, in milliseconds of wall time.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from timing import print_fresh_process_medians

ROOT = Path(__file__).resolve().parent.parent
ASK = ["-m", "workbench", "ask", "How do I configure SSO?", "--json", "--no-trace"]
PROGRAMS = {
    "anchor: python -c pass": ["-c", "pass"],
    "import jsonschema": ["-c", "import jsonschema; jsonschema.Draft202012Validator({})"],
    "schemas.validator (both)": ["-c", "from workbench import schemas; schemas.validator(schemas.PAYLOAD); "
                                       "schemas.validator(schemas.TURN_RECORD)"],
    "workbench ask --json": ASK,
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--old", type=Path, help="an older source tree whose `ask --json` is timed beside this one's")
    args = ap.parse_args()
    runs = {name: (program, ROOT) for name, program in PROGRAMS.items()}
    if args.old:
        runs["workbench ask --json [old tree]"] = (ASK, args.old.resolve())
    print_fresh_process_medians(runs, args.runs, warm=ASK, root=ROOT)  # the warm-up builds and caches the index


if __name__ == "__main__":
    main()
