"""CPU of creating a new trace file: its migrations run, or a copy of the process's schema template.

    .venv/bin/python benchmarks/new_trace_file.py [--runs 20]

Each new file is created as the writer creates one (`TraceWriter(path).connect()`: the file attached to the
process's in-memory DuckDB, migrated, detached). Timed alternately in the same run: **migrations** (the way a
process's first new file is made, forced here by calling `migrate` without a template) and **template copy** (a
process's second and later new files, `writer.schema_template`), beside the anchor **an empty DuckDB file**
(attached, one small table created, detached) on the same host. Medians of `--runs`, in milliseconds of this
process's CPU.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from workbench.trace import writer  # noqa: E402
from workbench.trace.connect import write_connection  # noqa: E402
from workbench.trace.migrate import migrate  # noqa: E402
from timing import cpu_ms  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=20)
    args = ap.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="wb-new-file-"))
    for name in ("warm-1", "warm-2"):  # the process's first two new files: the second builds the template
        with writer.TraceWriter(folder / f"{name}.duckdb").connect():
            pass

    def anchor(path: Path) -> None:
        with write_connection(path) as con:
            con.execute("CREATE TABLE t (a INTEGER, b VARCHAR)")

    def migrations(path: Path) -> None:
        with write_connection(path) as con:
            migrate(con, path=str(path))  # no template: every migration runs

    def template_copy(path: Path) -> None:
        with writer.TraceWriter(path).connect():
            pass

    times: dict[str, list[float]] = {"anchor: empty DuckDB file": [], "migrations": [], "template copy": []}
    for i in range(args.runs):
        times["anchor: empty DuckDB file"].append(cpu_ms(lambda: anchor(folder / f"a{i}.duckdb")))
        times["migrations"].append(cpu_ms(lambda: migrations(folder / f"m{i}.duckdb")))
        times["template copy"].append(cpu_ms(lambda: template_copy(folder / f"t{i}.duckdb")))
    for name, values in times.items():
        print(f"{name:26} median {statistics.median(values):7.1f} ms CPU   ({len(values)} runs)")


if __name__ == "__main__":
    main()
