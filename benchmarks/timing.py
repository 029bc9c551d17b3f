"""The two clocks the benchmarks read: this process's CPU over a call, and the wall time of a fresh interpreter."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def cpu_ms(work) -> float:
    """Milliseconds of this process's CPU that `work()` took."""
    start = time.process_time()
    work()
    return (time.process_time() - start) * 1000


def wall_ms(args: list[str], *, cwd: Path, env: dict[str, str] | None = None) -> float:
    """Milliseconds of wall time of `python ARGS` (this interpreter) run in `cwd`, its output discarded."""
    start = time.perf_counter()
    subprocess.run([sys.executable, *args], cwd=cwd, env=env, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    return (time.perf_counter() - start) * 1000


def print_fresh_process_medians(runs: dict[str, tuple[list[str], Path]], repeats: int, warm: list[str],
                                root: Path) -> None:
    """Time each of `runs` (name -> (python arguments, the tree to run them in)) `repeats` times, alternated run by
    run, in one temporary WORKBENCH_HOME that `python WARM` (run in `root` before timing) fills; print the medians."""
    with tempfile.TemporaryDirectory() as home:
        env = {**os.environ, "WORKBENCH_HOME": home}
        wall_ms(warm, cwd=root, env=env)
        times: dict[str, list[float]] = {name: [] for name in runs}
        for _ in range(repeats):
            for name, (args, tree) in runs.items():
                times[name].append(wall_ms(args, cwd=tree, env=env))
    width = max(map(len, times)) + 2
    for name, values in times.items():
        print(f"{name:{width}} median {statistics.median(values):7.1f} ms   ({len(values)} runs)")
