"""Durations are bounded like every other option (docs/security.md): `inf`, `1e300` and NaN are clear errors
(exit 2) whether they come from `--timeout` or from a `WORKBENCH_*_TIMEOUT` variable, never a traceback."""

from __future__ import annotations

import pytest

from clirun import cli as run_cli
from workbench.config import MAX_WAIT_SECONDS, lock_timeout, query_timeout
from workbench.errors import WorkbenchError


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    """A trace database with one turn, shared: every test only reads it (or is refused before it opens it)."""
    path = tmp_path_factory.mktemp("wait-bounds") / "t.duckdb"
    assert run_cli("ask", "How do I configure SSO?", "--db", str(path)).returncode == 0
    return str(path)


@pytest.mark.parametrize("value", ["inf", "1e300", "-inf", "nan", str(MAX_WAIT_SECONDS + 1)])
@pytest.mark.parametrize("command", [("sql", "select 1"), ("export",)])
def test_an_absurd_timeout_option_is_a_clear_error(db, command, value):
    argv = [*command, "--db", db, f"--timeout={value}"]
    if command[0] == "export":
        argv += ["--openinference", "--endpoint", "http://127.0.0.1:9/v1/traces"]
    res = run_cli(*argv)
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert "--timeout" in res.stderr and ("at most 3600" in res.stderr or "more than 0" in res.stderr)


def test_the_largest_timeout_is_accepted(db):
    res = run_cli("sql", "select 1 AS one", "--db", db, "--timeout", str(MAX_WAIT_SECONDS))
    assert res.returncode == 0, res.stderr


@pytest.mark.parametrize("variable", ["WORKBENCH_QUERY_TIMEOUT", "WORKBENCH_LOCK_TIMEOUT"])
@pytest.mark.parametrize("value", ["inf", "1e300", "nan"])
def test_an_absurd_timeout_variable_is_a_clear_error(db, variable, value):
    res = run_cli("sql", "select 1", "--db", db, env={variable: value})
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert variable in res.stderr and ("at most 3600" in res.stderr or "not a number" in res.stderr)


def test_the_settings_refuse_what_the_cli_refuses(monkeypatch):
    monkeypatch.setenv("WORKBENCH_QUERY_TIMEOUT", "inf")
    with pytest.raises(WorkbenchError, match="at most 3600"):
        query_timeout()
    monkeypatch.setenv("WORKBENCH_LOCK_TIMEOUT", "3600")
    assert lock_timeout() == 3600.0
