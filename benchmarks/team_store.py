"""The team store (a DuckLake on PostgreSQL) beside the file store, in the same run (issue 39 item 8).

    .venv/bin/python benchmarks/team_store.py [--turns 30] [--writers 1 4 8] [--spans 400]

Starts its own PostgreSQL (tests/pgserver.py: Debian's PostgreSQL 15 as the `postgres` user, a temporary folder,
a free port; SKIP when absent). For each store, a new one (a DuckDB file; a DuckLake on a new PostgreSQL
database with a local data folder), migrated before timing, then:

- turns/s with 1, 4 and 8 writer processes, each logging `--turns` turns (one transaction each, as `ask` does;
  every turn its own conversation-less turn with 5 retrieved items), all started together: total turns / the
  wall time from the start signal to the last process's last commit;
- an `ask` process's wall time, idle and while an analyst's ~12 s query runs in another process (`workbench sql`,
  every `turns` row crossed with a range, sized to run ~12 s here): the file store's reader holds the file, the team store's does not;
- spans/s with 2 processes each storing `--spans` spans in batches of 20 (what `collect` does per request, without
  the HTTP part: `TraceWriter.log_spans`).

Printed as a markdown table; the machine's load average before and after.

    .venv/bin/python benchmarks/team_store.py --analyst [--repeats 3]
    .venv/bin/python benchmarks/team_store.py --collect [--traces 400]

`--collect`: spans/s of 1 and of 2 real `workbench collect` processes on one store (each a new one: a file, then a
team store), the OTLP protobuf bodies of benchmarks/audit_collect.py (10 traces of 10 spans a request) split
between them, each sent by its own exporter over one kept-alive connection; every answer means stored.


only the ask during an analyst's query: on the team store under each setting of the analyst's bound
(`WORKBENCH_QUERY_THREADS`, `WORKBENCH_QUERY_NICE`, docs/security.md) — the bound as it was (2 threads, priority
kept), each half of the new one, and the defaults — and on the file store, whose typed queries keep 2 threads and
their priority (a reader there holds every writer, so slowing it would hold them longer). Every ask during the query is paired with an idle ask just before it
(same store, same minute), and on the team store PostgreSQL's `pg_stat_activity` is sampled every 50 ms during
the ask: a backend waiting on a lock (`wait_event_type = 'Lock'`) would show a catalog wait.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "benchmarks"))

WRITER = r"""
import os, sys, time, uuid
from pathlib import Path
from workbench.provenance import sources_payload
from workbench.trace.writer import TraceWriter
from workbench.types import ResultItem, ToolCall, TurnRecord

store, gate, kind, n = sys.argv[1], Path(sys.argv[2]), sys.argv[3], int(sys.argv[4])
w = TraceWriter(store)
w.prepare()
(gate / f"ready-{os.getpid()}").touch()
while not (gate / "go").exists():
    time.sleep(0.001)
if kind == "turns":
    for i in range(n):
        call = ToolCall("search", "snippet", {"query": f"q{i}"},
                        tuple(ResultItem(f"doc-{j}", f"Doc {j}", rank=j + 1, score=1.0, chunk_index=0, snippet=f"s{j}")
                              for j in range(5)))
        rec = TurnRecord(question=f"q{i} {os.getpid()}", answer="See [Doc 1](doc-1).", tool_calls=(call,),
                         turn_id=uuid.uuid4().hex, config={"provider": "offline"}, started_at="2024-05-01T10:00:00+00:00")
        w.log_turn(rec, sources_payload(rec))
else:
    for b in range(0, n, 20):
        w.log_spans([{"span_key": uuid.uuid4().hex, "trace_id": "t", "span_id": uuid.uuid4().hex[:16], "name": "llm",
                      "span_json": "{}"} for _ in range(20)])
print(time.time(), flush=True)
"""


def _env(store_env: dict[str, str]) -> dict[str, str]:
    return {**os.environ, **store_env, "PYTHONPATH": str(ROOT)}


def _race(store: str, env: dict[str, str], procs: int, kind: str, n: int) -> float:
    """Items per second of `procs` processes writing `n` items each, started together."""
    with tempfile.TemporaryDirectory() as gate:
        ps = [subprocess.Popen([sys.executable, "-c", WRITER, store, gate, kind, str(n)], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(procs)]
        while len(list(Path(gate).glob("ready-*"))) < procs:
            if any(p.poll() is not None for p in ps):
                raise SystemExit("a writer died: " + next(p.stderr.read() for p in ps if p.poll() is not None))
            time.sleep(0.005)
        start = time.time()
        (Path(gate) / "go").touch()
        ends = []
        for p in ps:
            out, err = p.communicate(timeout=1800)
            if p.returncode:
                raise SystemExit(f"a writer failed: {err[-1500:]}")
            ends.append(float(out.split()[-1]))
    return procs * n / (max(ends) - start)


#: `python -m workbench ask …` that, as it exits, reports from Linux's scheduler statistics (/proc/self/task/*/
#: schedstat) how long its threads ran on a CPU and how long they waited, runnable, for one (summed over its
#: threads), and its main thread's time neither running nor runnable: blocked (network, disk, a lock, or its own
#: worker threads). So a slower ask says whether it was starved of CPU or held.
ASK = r"""
import atexit, glob, runpy, sys, time
started = time.monotonic()
def report():
    ran = waited = 0
    for stat in glob.glob("/proc/self/task/*/schedstat"):
        on_cpu, runnable, _ = open(stat).read().split()
        ran, waited = ran + int(on_cpu), waited + int(runnable)
    main_cpu, main_wait, _ = open("/proc/self/schedstat").read().split()
    blocked = time.monotonic() - started - (int(main_cpu) + int(main_wait)) / 1e9
    sys.stderr.write(f"\nSCHEDSTAT {ran / 1e9} {waited / 1e9} {blocked}\n")
atexit.register(report)
sys.argv = ["workbench", *sys.argv[1:]]
runpy.run_module("workbench", run_name="__main__")
"""
#: (on CPU, waiting for a CPU, main thread blocked) seconds of the last `_ask`'s process (threads alive at its exit).
LAST_SCHED: list[tuple[float, float]] = []


def _ask(store: str, env: dict[str, str]) -> float:
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", ASK, "ask", "How do I configure SSO?", "--db", store],
                       env=env, capture_output=True, text=True, cwd=ROOT, timeout=600)
    took = time.perf_counter() - t
    if r.returncode:
        raise SystemExit(f"ask failed: {r.stderr[-1500:]}")
    sched = [line.split()[1:] for line in r.stderr.splitlines() if line.startswith("SCHEDSTAT ")]
    LAST_SCHED[:] = [tuple(float(x) for x in sched[-1])] if sched else []
    return took


def _query(size: int) -> str:
    return (f"SELECT count(*) FROM turns t, range({size}) r "
            "WHERE hash(r.range + length(t.question) + length(t.answer)) % 1000003 = 0")


def _analyst(store: str, env: dict[str, str], size: int) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "workbench", "sql", _query(size), "--db", store, "--timeout", "180"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)


def _query_size(store: str, env: dict[str, str], seconds: float) -> int:
    """The range() size that makes the analyst's query take about `seconds` here, now (measured, then scaled)."""
    size, scaled = 20_000, False
    while True:
        t = time.perf_counter()
        _analyst(store, env, size).communicate(timeout=600)
        took = time.perf_counter() - t
        if took > 2.0 and scaled:  # measured twice, the second time near the goal: the load of the moment counts
            return int(size * seconds / took)
        if took > 2.0:
            size, scaled = int(size * seconds / took), True
        else:
            size *= 4


def _ask_during_query(store: str, env: dict[str, str], size: int,
                      analyst_env: dict[str, str] | None = None) -> tuple[float, float]:
    """(an ask's wall time while the analyst's query runs, the query's own wall time)."""
    t = time.perf_counter()
    analyst = _analyst(store, analyst_env or env, size)
    time.sleep(1.5)  # the analyst's process has started its query (benchmark pacing, not a test)
    asked = _ask(store, env)
    analyst.communicate(timeout=600)
    return asked, time.perf_counter() - t


#: The analyst's bound, as it was and as it is (`--analyst`): (label, environment of the analyst's process).
BOUNDS = (("before: 2 threads, priority kept", {"WORKBENCH_QUERY_THREADS": "2", "WORKBENCH_QUERY_NICE": "0"}),
          ("1 thread, priority kept", {"WORKBENCH_QUERY_THREADS": "1", "WORKBENCH_QUERY_NICE": "0"}),
          ("2 threads, nice 10", {"WORKBENCH_QUERY_THREADS": "2", "WORKBENCH_QUERY_NICE": "10"}),
          ("after: the defaults (1 thread here, nice 10)", {}))


class _Waits:
    """Samples the catalog's `pg_stat_activity` every 50 ms through one `psql`: backends waiting on a lock."""

    def __init__(self, server, dbname: str):
        import pgserver
        import threading

        self.samples = self.waiting = 0
        self._stop = threading.Event()
        self._psql = subprocess.Popen([str(pgserver.BIN / "psql"), "-At", "-h", "127.0.0.1", "-p", str(server.port),
                                       "-U", "postgres", "-d", dbname], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      text=True, bufsize=1)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._psql.stdin.write("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock';\n")
            self.waiting += int(self._psql.stdout.readline()) > 0
            self.samples += 1
            time.sleep(0.05)

    def stop(self) -> str:
        self._stop.set()
        self._thread.join()
        self._psql.stdin.close()
        self._psql.wait()
        return f"{self.waiting} of {self.samples}"


def _analyst_rows(label: str, store: str, env: dict[str, str], args, waits, bounds) -> list[dict]:
    """Per analyst bound: idle asks, asks during the query (each right after its idle one), the query's time."""
    _ask(store, env)  # created, migrated, one turn
    size = _query_size(store, {**env, **BOUNDS[0][1]}, args.query_seconds)  # ~12 s with the old bound
    rows = []
    for bound, settings in bounds:
        idle, during, query, load, seen, split_idle, split_during = [], [], [], [], [], [], []
        for _ in range(args.repeats):
            idle.append(_ask(store, env))
            split_idle += LAST_SCHED
            load.append(os.getloadavg()[0])
            sampler = waits() if waits else None
            try:
                asked, took = _ask_during_query(store, env, size, {**env, **settings})
            except SystemExit as exc:  # the file store's ask gave up on the reader's lock: a figure, not a crash
                print(f"{label}, {bound}: {exc}", flush=True)
                asked, took = float("nan"), float("nan")
            split_during += LAST_SCHED if asked == asked else []
            seen.append(sampler.stop() if sampler else "—")
            during.append(asked)
            query.append(took)
        med = lambda xs: sorted(xs)[len(xs) // 2] if xs else float("nan")  # noqa: E731
        split = lambda xs: " / ".join(f"{med([x[i] for x in xs]):.2f}" for i in range(3))  # noqa: E731
        rows.append({"store": label, "analyst's bound": bound, "ask idle (s)": med(idle),
                     "ask during the query (s)": med(during), "ratio": med([d / i for d, i in zip(during, idle)]),
                     "idle ask: on CPU / waiting for a CPU / main thread blocked (s)": split(split_idle),
                     "ask during: on CPU / waiting for a CPU / main thread blocked (s)": split(split_during),
                     "analyst's query (s)": med(query), "load (1 min)": med(load),
                     "samples with a lock wait": ", ".join(seen), "each ask during (s)": ", ".join(
                         f"{d:.2f}" for d in during)})
        print(rows[-1], flush=True)
    return rows


def _collectors(store: str, env: dict[str, str], data: list[bytes], n: int) -> float:
    """Seconds for `n` real `workbench collect` processes on one store to answer every body of `data` (split between
    them, each sent by its own exporter thread over one kept-alive connection); each answer means stored."""
    import http.client
    import re
    import signal
    import threading

    procs = [subprocess.Popen([sys.executable, "-m", "workbench", "collect", "--port", "0", "--db", store, "--name",
                               f"bench-{i}"], cwd=ROOT, env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
                              text=True) for i in range(n)]
    try:
        ports = [int(re.search(r"http://[\d.]+:(\d+)/v1/traces", p.stderr.readline()).group(1)) for p in procs]
        failed: list[str] = []

        def export(port: int, share: list[bytes]) -> None:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
            for body in share:
                conn.request("POST", "/v1/traces", body, {"Content-Type": "application/x-protobuf"})
                answer = conn.getresponse()
                answer.read()
                if answer.status != 200:
                    failed.append(str(answer.status))
            conn.close()

        threads = [threading.Thread(target=export, args=(port, data[i::n])) for i, port in enumerate(ports)]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        took = time.perf_counter() - t0
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
    for p in procs:
        rest = p.communicate(timeout=300)[1]
        if p.returncode or "turns written" not in rest:
            raise SystemExit(f"a collector failed: {rest[-1500:]}")
    if failed:
        raise SystemExit(f"requests refused: {failed[:5]}")
    return took


def _collect_rows(args) -> list[dict]:
    """`--collect`: spans/s of 1 and of 2 real `collect` processes on one store, file then team store."""
    import pgserver
    from audit_collect import bodies

    data, spans = bodies(args.traces, 10)
    server = pgserver.Server().start()
    rows = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for label, n in (("file", 1), ("file", 2), ("team", 1), ("team", 2)):
                store = (str(Path(tmp) / f"c{n}.duckdb") if label == "file"
                         else "ducklake:postgres:" + server.create_database(f"collect{n}"))
                env = _env({"WORKBENCH_DATA_PATH": str(Path(tmp) / f"lake{n}")})
                _ask(store, env)  # created and migrated before timing
                load = os.getloadavg()[0]
                took = _collectors(store, env, data, n)
                rows.append({"store": label, "collect processes": str(n), "spans": str(spans),
                             "spans/s": spans / took, "load (1 min)": load})
                print(rows[-1], flush=True)
    finally:
        server.stop()
    return rows


def _measure(label: str, store: str, env: dict[str, str], args) -> dict:
    row = {"store": label}
    _ask(store, env)  # created, migrated, one turn
    for procs in args.writers:
        row[f"turns/s, {procs} writers"] = _race(store, env, procs, "turns", args.turns)
    row["spans/s, 2 collectors"] = _race(store, env, 2, "spans", args.spans)
    idle = sorted(_ask(store, env) for _ in range(3))[1]
    row["ask idle (s)"] = idle
    asked, query = _ask_during_query(store, env, _query_size(store, env, args.query_seconds))
    row["ask during query (s)"], row["analyst query (s)"] = asked, query
    return row


def main() -> None:
    import pgserver

    ap = argparse.ArgumentParser()
    ap.add_argument("--turns", type=int, default=30)
    ap.add_argument("--writers", type=int, nargs="+", default=[1, 4, 8])
    ap.add_argument("--spans", type=int, default=400)
    ap.add_argument("--query-seconds", type=float, default=12.0, help="how long the analyst's query runs")
    ap.add_argument("--analyst", action="store_true", help="only the ask during an analyst's query, per bound")
    ap.add_argument("--repeats", type=int, default=3, help="asks during the query per bound (--analyst)")
    ap.add_argument("--collect", action="store_true", help="only spans/s of 1 and 2 real `collect` processes")
    ap.add_argument("--traces", type=int, default=400, help="traces of 10 spans sent to the collectors (--collect)")
    args = ap.parse_args()
    reason = pgserver.available()
    if reason:
        print(f"SKIP: {reason}")
        return
    print("load average before:", os.getloadavg())
    if args.collect:
        _table(_collect_rows(args))
        print("load average after:", os.getloadavg())
        return
    server = pgserver.Server().start()
    rows = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            lake = "ducklake:postgres:" + server.create_database("bench")
            team_env = _env({"WORKBENCH_DATA_PATH": str(Path(tmp) / "lake")})
            if args.analyst:
                rows += _analyst_rows("team", lake, team_env, args, lambda: _Waits(server, "bench"), BOUNDS)
                rows += _analyst_rows("file", str(Path(tmp) / "t.duckdb"), _env({}), args, None,
                                      [("a file's (unchanged): 2 threads, priority kept", {})])
            else:
                rows.append(_measure("file", str(Path(tmp) / "t.duckdb"), _env({}), args))
                rows.append(_measure("team (DuckLake on PostgreSQL 15)", lake, team_env, args))
    finally:
        server.stop()
    _table(rows)
    print("load average after:", os.getloadavg())


def _table(rows: list[dict]) -> None:
    keys = list(rows[0])
    print("| " + " | ".join(keys) + " |")
    print("|" + "---|" * len(keys))
    for r in rows:
        print("| " + " | ".join(v if isinstance(v, str) else f"{v:.2f}" for v in r.values()) + " |")


if __name__ == "__main__":
    main()
