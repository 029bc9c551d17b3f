"""Wall time of a fresh process that builds the contract schemas' validators: what `workbench ask --json`,
`verify --json` and `provenance` pay before their first check, and every test worker at its start.

    .venv/bin/python benchmarks/schema_validators.py [--runs 9]

Three fresh interpreters, alternated run by run: **the anchor, a bare `python -c pass`**; `import jsonschema` as
any code does (where rfc3987-syntax is installed, as JupyterLab's jupyter-events installs it, it compiles its IRI
parsers at import); and the workbench's `schemas.validator` for both schemas (jsonschema imported by
`schemas.load_jsonschema`, without those parsers). Medians of `--runs`, in milliseconds of wall time.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

PROGRAMS = {
    "anchor: python -c pass": "pass",
    "import jsonschema": "import jsonschema; jsonschema.Draft202012Validator({})",
    "schemas.validator (both)": "from workbench import schemas; schemas.validator(schemas.PAYLOAD); "
                                "schemas.validator(schemas.TURN_RECORD)",
}


def wall_ms(program: str) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", program], cwd=ROOT, check=True)
    return (time.perf_counter() - start) * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=9)
    args = ap.parse_args()
    times: dict[str, list[float]] = {name: [] for name in PROGRAMS}
    for _ in range(args.runs):
        for name, program in PROGRAMS.items():
            times[name].append(wall_ms(program))
    for name, values in times.items():
        print(f"{name:26} median {statistics.median(values):7.1f} ms   ({len(values)} runs)")


if __name__ == "__main__":
    main()
