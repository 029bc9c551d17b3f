"""Shared fixtures: an isolated WORKBENCH_HOME per test session, the demo corpus and a session over it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from browser_app import app_server  # noqa: F401  (a session fixture: the browser test modules share one app)
from workbench.schemas import load_jsonschema

# jsonschema imported the workbench's way before any test module imports it (nbformat does, at collection): 3.5 s
# less of each worker's start (workbench/schemas, `load_jsonschema`)
load_jsonschema()

ROOT = Path(__file__).resolve().parent.parent


#: Test modules that start a heavy real component (a model, a browser, Phoenix, notebook kernels, the
#: optional MiniLM embedding) or many processes on purpose (signals, kills, memory ceilings, a batch
#: streaming its progress): marked `heavy`, so that `pytest -m "not heavy"` is the fast loop while
#: developing. CI runs everything. Other tests run the CLI in-process (tests/clirun.py).
HEAVY_MODULES = {"test_browser", "test_browser_compare", "test_browser_share", "test_browser_signin",
                 "test_real_model", "test_phoenix",
                 "test_notebooks", "test_retrievers_minilm",
                 "test_trace_survival", "test_trace_concurrency", "test_batch_concurrency",
                 "test_eval_slow", "test_trace_no_silent_loss", "test_hostile_corpus", "test_pathological_text",
                 "test_readme_commands"}


#: Seconds each of the longest test modules took on one xdist worker (a full run on a 2-core machine, 2026-12-05,
#: after issue 42 item 8's third round; test_retrievers_minilm from a fresh clone's .ci/run, which installs torch).
#: Scheduling only: with `--dist loadfile --no-loadscope-reorder` (pyproject.toml) xdist hands out modules in
#: collection order, so the longest go first and the short ones fill in at the end (longest-first scheduling);
#: xdist's own order, most tests first, left a single 40 s browser test at the end of the run while the other
#: worker idled. A module not listed runs after these, in its usual order; a stale figure costs time, never a test.
LONGEST_FIRST = {"test_browser": 103, "test_notebooks": 69, "test_real_model": 52, "test_browser_signin": 51,
                 "test_team_store_walkthrough": 50, "test_team_store": 45, "test_app_team_store": 35,
                 "test_audit_conformance": 35, "test_readme_commands": 30, "test_app_pages": 27, "test_phoenix": 20,
                 "test_trace_visible": 17, "test_app_conversation": 15, "test_collect_service": 15,
                 "test_provider_faults": 15, "test_cli_conversations": 14, "test_browser_share": 12,
                 "test_retrieval_cache": 10, "test_openinference": 10, "test_hostile_corpus": 9,
                 "test_audit_browser": 9, "test_retrievers_minilm": 17}


def _module(item) -> str:
    return item.module.__name__.rsplit(".", 1)[-1]


def pytest_configure(config):
    """Compile the package's bytecode once, before any test starts a process (the controller, not each worker).
    With PYTHONDONTWRITEBYTECODE set (as on the CI machine) nothing else writes it, and every workbench process
    a test starts — CLI runs, app servers, collectors, notebook kernels — would compile each module it imports
    anew: ~0.12 s of CPU of a 0.5 s `workbench ask`. A tree that cannot be written is left as it is."""
    if hasattr(config, "workerinput"):
        return
    import compileall
    import re

    compileall.compile_dir(ROOT / "workbench", quiet=2)
    compileall.compile_dir(ROOT / "tests", maxlevels=0, quiet=2, rx=re.compile(r"[/\\](test_|conftest)[^/\\]*$"))


def pytest_collection_modifyitems(config, items):
    for item in items:
        if _module(item) in HEAVY_MODULES:
            item.add_marker(pytest.mark.heavy)
    items.sort(key=lambda item: -LONGEST_FIRST.get(_module(item), 0))  # stable: a module's tests keep their order


def pytest_runtest_setup(item):
    """Streamlit's installed-component scan, once per test process: every `AppTest` run scans all ~220 installed
    distributions' metadata for Streamlit v2 component manifests (~0.16 s of CPU each time, hundreds of times a
    session), and what is installed does not change while the tests run. Wrapped in a cache as soon as a test has
    imported Streamlit (the first scan of a process is the real one). And AppTest's wait for a run
    (`_wait_for_the_run`)."""
    import sys

    scanner = sys.modules.get("streamlit.components.v2.manifest_scanner")
    if scanner is not None and not hasattr(scanner.scan_component_manifests, "cache_info"):
        import functools

        scanner.scan_component_manifests = functools.cache(scanner.scan_component_manifests)
    runner = sys.modules.get("streamlit.testing.v1.local_script_runner")
    if runner is not None and runner.require_widgets_deltas is not _wait_for_the_run:
        _wait_for_the_run.polling = runner.require_widgets_deltas
        runner.require_widgets_deltas = _wait_for_the_run


def _wait_for_the_run(runner, timeout: float = 3) -> None:
    """AppTest's wait for a script run (`require_widgets_deltas`), on its condition instead of a poll: Streamlit's
    checks every millisecond whether the run's events include SHUTDOWN, which the script thread emits just before it
    returns, so the test's thread woke 1,000 times a second to scan the list while the script ran beside it (12 CPU
    seconds of the workers' in a run, py-spy). This joins that thread, with the same timeout and the same error."""
    thread = getattr(runner, "_script_thread", None)
    if thread is None:  # not the runner this was written for: Streamlit's own wait
        return _wait_for_the_run.polling(runner, timeout)
    thread.join(timeout)
    if thread.is_alive():
        runner.request_stop()
        runner.join()
        raise RuntimeError(f"AppTest script run timed out after {timeout}(s)")


@pytest.fixture(scope="session", autouse=True)
def _workbench_home(tmp_path_factory):
    """Caches and trace databases go to a temporary WORKBENCH_HOME, never the user's."""
    home = tmp_path_factory.mktemp("workbench-home")
    old = os.environ.get("WORKBENCH_HOME")
    os.environ["WORKBENCH_HOME"] = str(home)
    yield home
    if old is None:
        os.environ.pop("WORKBENCH_HOME", None)
    else:
        os.environ["WORKBENCH_HOME"] = old


@pytest.fixture(scope="session")
def demo():
    """The bundled demo corpus, loaded once per test session (read-only: no test changes it)."""
    from workbench.config import DEMO_CORPUS
    from workbench.corpus import load_corpus

    return load_corpus(DEMO_CORPUS)


@pytest.fixture(scope="session")
def demo_session():
    from workbench.session import Session

    return Session.open()


def schema_validator(name: str):
    """A JSON-Schema validator for the contract schema NAME shipped in workbench/schemas/ (the library's own)."""
    from workbench import schemas

    return schemas.validator(name)


def require_shared(*parts: str) -> Path:
    """Path in the optional third-party benchmark data, or skip the test with the reason."""
    from workbench.config import benchmark_data_dir

    p = benchmark_data_dir().joinpath(*parts)
    if not p.exists():
        pytest.skip(f"optional third-party benchmark data not available: {p} is absent (set "
                    "WORKBENCH_BENCHMARK_DATA; in the development layout it is ../shared/data)")
    return p


@pytest.fixture
def app(tmp_path, monkeypatch):
    """The chat page (app.py) rendered once under AppTest, tracing into a temporary database."""
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("WORKBENCH_DB", str(tmp_path / "traces.duckdb"))
    return AppTest.from_file(str(ROOT / "app.py"), default_timeout=60).run()


@pytest.fixture(scope="session")
def pg_server():
    """A real PostgreSQL for the team-store tests (tests/pgserver.py), started once, stopped at the end."""
    import pgserver

    reason = pgserver.available()
    if reason:
        pytest.skip(f"team store tests need PostgreSQL: {reason}")
    server = pgserver.Server().start()
    yield server
    server.stop()


_STORES = [0]


def new_team_store(pg_server, data: Path) -> str:
    """A new, empty team store (`ducklake:postgres:…`: its own PostgreSQL database); WORKBENCH_DATA_PATH is set to
    `data`, its data folder."""
    _STORES[0] += 1
    os.environ["WORKBENCH_DATA_PATH"] = str(data)
    return "ducklake:postgres:" + pg_server.create_database(f"store_{os.getpid()}_{_STORES[0]}")


@pytest.fixture
def team_store(pg_server, tmp_path, monkeypatch):
    """A new, empty team store for one test (`new_team_store`)."""
    monkeypatch.setenv("WORKBENCH_DATA_PATH", str(tmp_path / "lake-data"))
    return new_team_store(pg_server, tmp_path / "lake-data")
