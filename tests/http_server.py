"""A loopback HTTP server in a daemon thread (127.0.0.1, ephemeral port), used as a context manager."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def send(handler: BaseHTTPRequestHandler, status: int, data: bytes, content_type: str = "application/json",
         headers: dict[str, str] | None = None) -> None:
    """Write one whole response; a client that already gave up (the timeout tests) is not an error."""
    try:
        handler.send_response(status)
        handler.send_header("Content-Type", content_type)
        handler.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            handler.send_header(name, value)
        handler.end_headers()
        handler.wfile.write(data)
    except (BrokenPipeError, ConnectionResetError):
        pass


class QuietHandler(BaseHTTPRequestHandler):
    """The loopback servers' handler base: HTTP/1.1, no Nagle (no 40 ms delayed-ACK stalls between header and body
    writes), no log lines in the test output."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def log_message(self, *args):
        pass

    def json_body(self) -> Any:
        """The request's JSON body ({} when it has none)."""
        return json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")


class LoopbackServer:
    def _serve(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        # a short poll interval makes shutdown (every test's teardown) ~50 ms instead of ~500 ms
        self._thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()
