"""CPU of building a provider's client for a server not talked to yet: what the first turn to a server pays.

    .venv/bin/python benchmarks/client_build.py [--runs 30]

Each client is the one `ollama` or `openai` provider builds (`_shared_client`) for a new loopback port, so the
process's cache of clients never answers. The anchor, timed in the same run alternating with them: **a bare
`httpx.Client()`** (httpx's own TLS context: the CA bundle read again), what building each client cost before they
shared the process's one (`paths.tls_context`). Medians of `--runs`, in milliseconds of this process's CPU.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from timing import cpu_ms  # noqa: E402
from workbench.providers import ollama, openai  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=30)
    args = ap.parse_args()
    import httpx

    ollama._shared_client("http://127.0.0.1:1", 5.0, None)  # imports and the process's TLS context, once
    openai._shared_client("http://127.0.0.1:1/v1", "k", 5.0)
    times: dict[str, list[float]] = {"anchor: httpx.Client()": [], "ollama client": [], "openai client": []}
    for i in range(args.runs):
        port = 2000 + i  # a server not talked to yet: the client cache does not answer
        times["anchor: httpx.Client()"].append(cpu_ms(lambda: httpx.Client().close()))
        times["ollama client"].append(cpu_ms(lambda: ollama._shared_client(f"http://127.0.0.1:{port}", 5.0, None)))
        times["openai client"].append(cpu_ms(lambda: openai._shared_client(f"http://127.0.0.1:{port}/v1", "k", 5.0)))
    for name, values in times.items():
        print(f"{name:24} median {statistics.median(values):6.2f} ms CPU   ({len(values)} runs)")


if __name__ == "__main__":
    main()
