"""A real PostgreSQL server for the team-store tests (docs/design.md §13): Debian's PostgreSQL 15 binaries, run as
the `postgres` user (PostgreSQL refuses to run as root) in a temporary folder on a free loopback port, trust
authentication on loopback only, stopped at the end of the test session. `available()` says why not, for a skip.

A team store's migrations are ~40 DuckLake commits (~20 s on the test machine): `migrated_team_store` gives a test
a store the migrations made once per server, copied (PostgreSQL's `CREATE DATABASE … TEMPLATE`, a fraction of a
second) with its data path moved to the test's folder. A test of the migrations themselves, or of a store nobody has
written to yet, takes `conftest.new_team_store` (an empty database) instead."""

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

    def psql(self, dbname: str, sql: str) -> str:
        """Run `sql` on database `dbname` with psql; its output, unaligned."""
        r = subprocess.run([str(BIN / "psql"), "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", "-d", dbname,
                            "-v", "ON_ERROR_STOP=1", "-Atc", sql], capture_output=True, text=True, timeout=120)
        if r.returncode:
            raise RuntimeError(f"psql failed ({r.returncode}): {r.stderr or r.stdout}")
        return r.stdout

    def _migrated_template(self) -> tuple[str, Path]:
        """The database and data folder of a team store every migration has run on, made on first use; nobody keeps
        a connection to it (a template must have none)."""
        name, data = "template_migrated", self.folder / "template-data"
        if not data.exists():
            from workbench.trace.lake import DATA_PATH_ENV, open_store
            from workbench.trace.migrate import migrate

            libpq = self.create_database(name)
            old = os.environ.get(DATA_PATH_ENV)
            os.environ[DATA_PATH_ENV] = str(data)
            try:
                con = open_store("ducklake:postgres:" + libpq)  # not the process's kept attachment (lake._host_cursor)
                try:
                    migrate(con)
                finally:
                    con.close()
            finally:
                os.environ.pop(DATA_PATH_ENV) if old is None else os.environ.__setitem__(DATA_PATH_ENV, old)
            data.mkdir(exist_ok=True)
        return name, data

    def migrated_database(self, name: str, data: Path) -> str:
        """A new catalog database `name` holding a migrated team store whose files go to `data`: a copy of the
        template (`_migrated_template`); DuckLake keeps every path but the data path relative to it."""
        template, template_data = self._migrated_template()
        self._run(str(BIN / "createdb"), "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", "-T", template,
                  name)
        shutil.copytree(template_data, data, dirs_exist_ok=True)
        where = str(data).rstrip("/") + "/"
        self.psql(name, "UPDATE ducklake_metadata SET value = '" + where.replace("'", "''") + "' WHERE key = 'data_path'")
        return self.libpq(name)

    def stop(self) -> None:
        try:
            self._run(str(BIN / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop")
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)


_MIGRATED = [0]


def migrated_team_store(server: Server, data: Path) -> str:
    """A new team store (`ducklake:postgres:…`) with every migration applied (`Server.migrated_database`), its files
    in `data`; WORKBENCH_DATA_PATH is set to `data`, as `conftest.new_team_store` does."""
    _MIGRATED[0] += 1
    os.environ["WORKBENCH_DATA_PATH"] = str(data)
    return "ducklake:postgres:" + server.migrated_database(f"migrated_{os.getpid()}_{_MIGRATED[0]}", data)
