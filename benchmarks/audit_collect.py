"""`workbench collect` receiving OTLP/HTTP protobuf, next to the parse-only floor, in one run (issue 38 item 9).

    .venv/bin/python benchmarks/audit_collect.py [--traces 1000] [--repeat 3] [--per-request 10] [--exporters 1]

The traces of benchmarks/audit_ingest.py (10 spans each: a root CHAIN, a RETRIEVER returning 5 hits, a postprocessor
CHAIN, an LLM span whose prompt holds 3 of the hits and whose answer cites a link, 6 CHAIN spans), as the OTel SDK's
exporter sends them: protobuf `ExportTraceServiceRequest` bodies of `--per-request` traces (10: 100 spans) each. Timed with
`time.perf_counter`, `--repeat` times each, the median printed:
(1) floor: protobuf's binary parse of every body (`ExportTraceServiceRequest.ParseFromString`), nothing else;
(2) typed spans: the collector's parse (`audit.spans.parse_request`: binary parse, ids, attributes, bounds);
(3) collect: a real `python -m workbench collect` process on a loopback port, every body POSTed over one kept-alive
    HTTP connection (`--exporters N`: N connections at once, each sending every N-th body, as N apps' exporters
    would), from the first request to the last answer (every span stored raw and every turn audited and
    written before the answer), into a new DuckDB file each repeat; beside its wall time, the CPU seconds the
    collect process spent in that window (/proc/PID/stat: user + system), which the machine's other load moves less
    (spans per CPU second is what one collector would do on a core of its own).
The load average is printed before and after (the machine is shared).
The goal: at least 5,000 spans/s for (3); today's ingest of OTLP JSON is 1,289 spans/s (benchmarks/README.md).
"""

from __future__ import annotations

import argparse
import http.client
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from audit_ingest import _kv, _trace  # noqa: E402
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest  # noqa: E402

from workbench.audit.spans import _parse_json, parse_request  # noqa: E402

def bodies(traces: int, per_request: int = 10) -> tuple[list[bytes], int]:
    """The protobuf request bodies of `traces` traces, `per_request` traces a body, and how many spans they hold."""
    out, n = [], 0
    for start in range(0, traces, per_request):
        spans = [s for t in range(start, min(start + per_request, traces)) for s in _trace(t)]
        n += len(spans)
        request = ExportTraceServiceRequest()
        _parse_json({"resourceSpans": [{"resource": {"attributes": _kv({"service.name": "bench"})},
                                        "scopeSpans": [{"spans": spans}]}]}, request)
        out.append(request.SerializeToString())
    return out, n


def floor(data: list[bytes]) -> float:
    t0 = time.perf_counter()
    for body in data:
        ExportTraceServiceRequest().ParseFromString(body)
    return time.perf_counter() - t0


def typed(data: list[bytes]) -> float:
    t0 = time.perf_counter()
    for body in data:
        parse_request(body, "application/x-protobuf")
    return time.perf_counter() - t0


def _cpu_s(pid: int) -> float:
    """CPU seconds (user + system) process `pid` has used so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _send(conn: http.client.HTTPConnection, data: list[bytes]) -> None:
    for body in data:
        conn.request("POST", "/v1/traces", body, {"Content-Type": "application/x-protobuf"})
        answer = conn.getresponse()
        answer.read()
        assert answer.status == 200, answer.status


def collect(data: list[bytes], db: Path, exporters: int = 1) -> tuple[float, float]:
    """Seconds from the first POST to the last answer of a real `collect` process, and its CPU seconds in them;
    `exporters` connections send at once (each every `exporters`-th body, one request at a time, as an app's
    exporter does)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "workbench", "collect", "--port", "0", "--db", str(db),
                             "--name", "bench"], cwd=ROOT, env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
                            text=True)
    try:
        line = proc.stderr.readline()
        host, port = re.search(r"http://([\d.]+):(\d+)/v1/traces", line).groups()
        conns = [http.client.HTTPConnection(host, int(port), timeout=120) for _ in range(exporters)]
        c0, t0 = _cpu_s(proc.pid), time.perf_counter()
        with ThreadPoolExecutor(exporters) as pool:
            for done in [pool.submit(_send, conn, data[k::exporters]) for k, conn in enumerate(conns)]:
                done.result()
        took, cpu = time.perf_counter() - t0, _cpu_s(proc.pid) - c0
        for conn in conns:
            conn.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        rest = proc.communicate(timeout=120)[1]
    assert proc.returncode == 0 and "turns written" in rest, rest
    return took, cpu


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--traces", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--exporters", type=int, default=1,
                    help="connections sending at once (apps exporting to one collector; requests that arrive together "
                         "are written in one transaction)")
    ap.add_argument("--per-request", type=int, default=10,
                    help="traces per request (10: 100 spans; 50: 500, near the OTel SDK's default export batch of 512)")
    args = ap.parse_args()
    data, n = bodies(args.traces, args.per_request)
    times: dict[str, list[float]] = {"floor": [], "typed": [], "collect": [], "cpu": []}
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.repeat):
            times["floor"].append(floor(data))
            times["typed"].append(typed(data))
            took, cpu = collect(data, Path(tmp) / f"c{i}.duckdb", args.exporters)
            times["collect"].append(took)
            times["cpu"].append(cpu)
    print(f"{n} spans in {len(data)} protobuf requests of {args.per_request} traces from {args.exporters} exporter(s) "
          f"({sum(map(len, data)) / 1e6:.1f} MB), median of {args.repeat}; load average {load:.1f} before, "
          f"{os.getloadavg()[0]:.1f} after")
    labels = {"floor": "parse-only floor (protobuf binary parse)", "typed": "collect's parse (typed spans)",
              "collect": "collect (HTTP, store raw spans, audit and write turns), wall",
              "cpu": "collect, the collect process's CPU time"}
    for key, label in labels.items():
        t = statistics.median(times[key])
        runs = ", ".join(f"{n / x:,.0f}" for x in times[key])
        print(f"{label}: {t:.2f} s ({n / t:,.0f} spans/s; runs {runs})")
    print("anchor: ingest of OTLP JSON, 1,289 spans/s (benchmarks/README.md, issue 29); goal: 5,000 spans/s")


if __name__ == "__main__":
    main()
