"""A real PostgreSQL server for the team-store tests (docs/design.md §13): Debian's PostgreSQL 15 binaries, run as
the `postgres` user (PostgreSQL refuses to run as root) in a temporary folder on a free loopback port, trust
authentication on loopback only, stopped at the end of the test session. `available()` says why not, for a skip."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

BIN = Path(os.environ.get("WORKBENCH_TEST_PG_BIN", "/usr/lib/postgresql/15/bin"))


def _as_postgres() -> list[str]:
    """Run a PostgreSQL binary as the `postgres` user when we are root, else as ourselves."""
    if os.geteuid() != 0:
        return []
    runuser = shutil.which("runuser")
    return [runuser, "-u", "postgres", "--"] if runuser else ["su", "postgres", "-s", "/bin/sh", "-c"]


def available() -> str | None:
    """None when a server can be started here, else the reason."""
    if not (BIN / "initdb").is_file() or not (BIN / "pg_ctl").is_file():
        return f"no PostgreSQL binaries at {BIN} (apt-get install postgresql-15, or set WORKBENCH_TEST_PG_BIN)"
    if os.geteuid() == 0:
        try:
            import pwd

            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root and there is no `postgres` user to run PostgreSQL as"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """One PostgreSQL cluster in a temporary folder: `start()`, `create_database(name)`, `stop()`."""

    def __init__(self):
        self.folder = Path(tempfile.mkdtemp(prefix="workbench-pg-"))
        self.port = _free_port()
        self.data = self.folder / "data"

    def _run(self, *args: str, timeout: float = 120) -> None:
        r = subprocess.run([*_as_postgres(), *args], capture_output=True, text=True, timeout=timeout,
                           cwd=self.folder)
        if r.returncode:
            raise RuntimeError(f"{args[0]} failed ({r.returncode}): {r.stderr or r.stdout}")

    def start(self) -> "Server":
        if os.geteuid() == 0:
            shutil.chown(self.folder, "postgres")
        self._run(str(BIN / "initdb"), "-D", str(self.data), "-A", "trust", "-U", "postgres", "--no-sync")
        self._run(str(BIN / "pg_ctl"), "-D", str(self.data), "-l", str(self.folder / "log"), "-w", "-t", "120",
                  "-o", f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 -c fsync=off "
                        "-c max_connections=200", "start")
        return self

    def libpq(self, dbname: str) -> str:
        return f"host=127.0.0.1 port={self.port} dbname={dbname} user=postgres"

    def create_database(self, name: str) -> str:
        self._run(str(BIN / "createdb"), "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", name)
        return self.libpq(name)

    def stop(self) -> None:
        try:
            self._run(str(BIN / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop")
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)
