"""Apps we did not write, instrumented with the real OpenInference instrumentors, and a running `collect`.

Each app exports its spans with the OpenTelemetry SDK's own OTLP/HTTP exporter (`OTLPSpanExporter`) to a
`python -m workbench collect` process; its model is an OpenAI-compatible loopback server (tests/loopback.py).
The tests compare the audited sets with what each app really did: its retriever's hits, what its postprocessor
kept, and the prompt its model really received (recorded by the loopback server).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from conftest import ROOT

PY = sys.executable


@contextmanager
def collect(db: Path, name: str, *extra: str) -> Iterator[str]:
    """A running `workbench collect` on a free loopback port; yields its /v1/traces URL. On exit it gets SIGTERM
    and must write everything and exit 0."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_WAIT_POLICY": "PASSIVE"}
    proc = subprocess.Popen([PY, "-m", "workbench", "collect", "--port", "0", "--db", str(db), "--name", name, *extra],
                            cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stderr.readline()  # blocks until the receiver is listening (or the process ended)
        m = re.search(r"(http://\S+/v1/traces)", line)
        assert m, f"collect did not start: {line}{proc.stderr.read() if proc.poll() is not None else ''}"
        yield m.group(1)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        rest = proc.communicate(timeout=60)[1]
    assert proc.returncode == 0, f"collect exited {proc.returncode}: {rest}"
    assert "turns written" in rest, rest


def tracer_provider(url: str, service: str):
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    tp = TracerProvider(resource=Resource.create({"service.name": service}))
    tp.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=url, timeout=10)))
    return tp


@contextmanager
def llama_instrumented(url: str, service: str) -> Iterator[None]:
    """llama-index instrumented by OpenInference, its spans exported to `url` (a `collect`) as app `service`."""
    from openinference.instrumentation.llama_index import LlamaIndexInstrumentor

    tp = tracer_provider(url, service)
    instrumentor = LlamaIndexInstrumentor()
    instrumentor.instrument(tracer_provider=tp)
    try:
        yield
    finally:
        instrumentor.uninstrument()
        tp.shutdown()


def turns(db: Path, *args: str) -> list[dict]:
    out = subprocess.run([PY, "-m", "workbench", "turns", "--json", "--db", str(db), *args], cwd=ROOT,
                         capture_output=True, text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr
    return [json.loads(line) for line in out.stdout.splitlines()]
