"""`collect`: an OTLP/HTTP receiver that audits any OpenInference-instrumented assistant (docs/audit.md)."""

from __future__ import annotations

import argparse
import sys
import threading

from ..config import COLLECT_READ_TIMEOUT_S
from ..errors import WorkbenchError
from ..terminal import neutralize
from ._audit import add_audit_options, assembler, finish_run
from ._signals import stop_on_signals


def register(sub) -> None:
    p = sub.add_parser("collect", help="Receive OpenInference spans over OTLP/HTTP (POST /v1/traces; GenAI log events: "
                                       "POST /v1/logs) and audit each turn: retrieved, cited and consulted documents, "
                                       "and what was never shown.")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=4318, help="port (default 4318, the OTLP/HTTP port; 0: any free port)")
    p.add_argument("--read-timeout", type=float, default=COLLECT_READ_TIMEOUT_S, metavar="SECONDS",
                   help=f"seconds a request has to arrive whole, request line to last body byte, before its "
                        f"connection is cut (default {COLLECT_READ_TIMEOUT_S:g}; docs/security.md)")
    p.add_argument("--stop-timeout", type=float, default=None, metavar="SECONDS",
                   help="seconds a stop (one SIGTERM or Ctrl-C) gives to assembling the traces still waiting for their "
                        "root; complete traces are always written (default: the stop bound of docs/security.md)")
    add_audit_options(p)
    p.set_defaults(func=run)


class _Stop:
    def __init__(self, server):
        self.server, self.requested = server, None

    def request(self, name: str) -> None:
        self.requested = name
        threading.Thread(target=self.server.shutdown, daemon=True).start()  # shutdown() waits for serve_forever


def run(args: argparse.Namespace) -> int:
    from ..audit.collector import KEEP_HOLD_S, KEEP_IDLE_S, STOP_SECONDS, make_server

    if not args.read_timeout > 0:
        raise WorkbenchError(f"--read-timeout must be a positive number of seconds, not {args.read_timeout:g}")
    stop_s = STOP_SECONDS if args.stop_timeout is None else args.stop_timeout
    if not 0 <= stop_s < float("inf"):  # NaN and infinity too: the stop's bound is stated (docs/security.md)
        raise WorkbenchError(f"--stop-timeout must be zero or a positive number of seconds, not {stop_s:g}")
    a = assembler(args, "collect")
    try:
        server = make_server(a, args.host, args.port, read_timeout=args.read_timeout)
    except OSError as exc:
        raise WorkbenchError(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}") from None
    host, port = server.server_address[:2]
    stop = _Stop(server)
    with stop_on_signals(stop), a.writer.kept(idle_s=KEEP_IDLE_S, hold_s=KEEP_HOLD_S):
        # said once a stop is handled: a SIGTERM sent as soon as this line is read stops collect cleanly
        print(neutralize(f"collecting on http://{host}:{port}/v1/traces (GenAI log events: /v1/logs) into run "
                         f"{a.name} (Ctrl-C to stop)"), file=sys.stderr, flush=True)
        try:
            server.serve_forever(poll_interval=0.1)
        finally:
            server.server_close()
            with a.writer.buffered(max_turns=500, max_age_s=1.0):  # one transaction a flush, not one a turn
                a.finish(stop_s)
            if a.left:
                print(f"warning: {a.left} traces still waiting for their root (or sent in a request the stop "
                      f"answered 503) were not audited within {stop_s:g} s of the stop (their spans are "
                      "stored in audit_spans)", file=sys.stderr)
    return finish_run(args, a)
