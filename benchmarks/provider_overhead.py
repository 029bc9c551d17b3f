"""Workbench overhead of a real-provider turn (issue #4). Prints medians; see benchmarks/README.md.

    .venv/bin/python benchmarks/provider_overhead.py

A loopback server that answers instantly scripts search → fetch_document → final answer, so what is
measured is everything except the model: message translation, the official client (HTTP over
127.0.0.1, response parsing), the tools and the loop. Traces are not written (run_turn directly).
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from loopback import WIRES, ScriptedServer  # noqa: E402
from workbench.agent import run_turn  # noqa: E402
from workbench.providers import get_provider  # noqa: E402
from workbench.session import Session  # noqa: E402

URL = "https://help.orbitly.example/articles/sso-saml-setup"
N = 30


def main() -> None:
    toolbox = Session.open().toolbox
    toolbox.retriever.retrieve("warm up", 5)
    for wire in WIRES.values():
        turns, calls = [], []
        script = [wire.reply("", [("search", {"query": "configure SSO"})]),
                  wire.reply("", [("fetch_document", {"doc_id": "sso-saml-setup"})]),
                  wire.reply(f"See [SAML setup]({URL}).")]
        with ScriptedServer(script * (N + 2)) as srv:  # one server: the client is built once, as in real use
            for i in range(N + 2):
                provider = get_provider(wire.provider, **wire.options(srv.url))  # a new provider per turn, as Session.ask
                t = time.perf_counter()
                record = run_turn("How do I configure SSO?", provider, toolbox)
                elapsed = (time.perf_counter() - t) * 1000
                assert record.status == "ok", record.error
                if i >= 2:  # the first turns pay for imports and client construction
                    turns.append(elapsed)
                    calls += [c.latency_ms for c in record.model_calls]
        print(f"{wire.provider:7s} turn (3 model calls, 2 tools): median {statistics.median(turns):6.1f} ms · "
              f"model call: median {statistics.median(calls):5.1f} ms  (n={N} turns)")


if __name__ == "__main__":
    main()
