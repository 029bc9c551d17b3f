"""A real Arize Phoenix server for the tests: `phoenix serve` from its own venv, on loopback, offline.

Phoenix is big (~850 MB with its dependencies) and is not a dependency of the workbench, so it lives in
a separate venv that `.ci/run` creates from `requirements-phoenix.txt` (`.venv-phoenix`); point
`WORKBENCH_PHOENIX` at another `phoenix` executable to use that. The test process never imports
`phoenix` (importing its client loads the whole server, ~15 s): spans are read back over plain HTTP.

Started with every offline switch (without them it tries to reach the internet), a fresh working
directory, and free ports for HTTP and gRPC — never 4317, because the gRPC port binds every interface.
Ready when `/healthz` answers (~20–25 s on 2 cores; more under load). Stopped by its PID.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
EXECUTABLE_ENV = "WORKBENCH_PHOENIX"
DEFAULT_EXECUTABLE = ROOT / ".venv-phoenix" / "bin" / "phoenix"
READY_TIMEOUT_S = 240.0  # generous: two test workers and Phoenix's migrations share two cores

OFFLINE = {"PHOENIX_ALLOW_EXTERNAL_RESOURCES": "false", "PHOENIX_TELEMETRY_ENABLED": "false",
           "PHOENIX_DISABLE_AGENT_ASSISTANT": "true", "PHOENIX_ALLOWED_SANDBOX_PROVIDERS": "NONE"}


def executable() -> Path | None:
    """The `phoenix` executable to run, or None when it is not installed."""
    path = Path(os.environ.get(EXECUTABLE_ENV) or DEFAULT_EXECUTABLE)
    return path if path.is_file() and os.access(path, os.X_OK) else None


def venv_python() -> Path | None:
    """The Python of Phoenix's venv (it has `openinference-semantic-conventions`), next to `phoenix`."""
    exe = executable()
    python = exe.parent / "python" if exe else None
    return python if python and python.exists() else None


def free_port(avoid: set[int] = frozenset({4317, 4318, 6006})) -> int:
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in avoid:
            return port


class PhoenixServer:
    """`phoenix serve` in the background; `wait_ready()` blocks until `/healthz` answers."""

    def __init__(self, workdir: Path):
        exe = executable()
        if exe is None:
            raise FileNotFoundError(f"no phoenix executable at {os.environ.get(EXECUTABLE_ENV) or DEFAULT_EXECUTABLE}")
        self.port, self.grpc_port = free_port(), free_port()
        while self.grpc_port == self.port:
            self.grpc_port = free_port()
        self.workdir = workdir
        env = {**os.environ, **OFFLINE, "PHOENIX_HOST": "127.0.0.1", "PHOENIX_PORT": str(self.port),
               "PHOENIX_GRPC_PORT": str(self.grpc_port), "PHOENIX_WORKING_DIR": str(workdir)}
        env.pop("PHOENIX_SQL_DATABASE_URL", None)  # its own SQLite file in the working directory
        self.log_path = workdir / "phoenix.log"
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen([str(exe), "serve"], env=env, stdout=self._log, stderr=subprocess.STDOUT,
                                     cwd=workdir, start_new_session=True)
        self.url = f"http://127.0.0.1:{self.port}"

    def wait_ready(self, timeout: float = READY_TIMEOUT_S) -> str:
        """The base URL once `/healthz` answers; raises with the log's tail when Phoenix exits or times out."""
        deadline = time.monotonic() + timeout
        with httpx.Client(timeout=2) as client:  # one client: each `httpx.get` built one (a CA bundle read, ~20 ms)
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"phoenix exited with {self.proc.returncode}:\n{self.log_tail()}")
                try:
                    if client.get(f"{self.url}/healthz").status_code == 200:
                        return self.url
                except httpx.HTTPError:
                    pass
                time.sleep(0.25)
        raise TimeoutError(f"phoenix did not answer /healthz within {timeout:.0f} s:\n{self.log_tail()}")

    def log_tail(self, n: int = 4000) -> str:
        return self.log_path.read_bytes()[-n:].decode("utf-8", "replace")

    def stop(self) -> None:
        """SIGTERM to the server's PID, SIGKILL if it has not exited after 20 s."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        self._log.close()
