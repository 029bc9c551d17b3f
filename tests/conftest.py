"""Shared fixtures: an isolated WORKBENCH_HOME per test session, the demo corpus and a session over it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


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
    """A JSON-Schema validator for the contract schema NAME shipped in workbench/schemas/."""
    import jsonschema

    from workbench import schemas

    return jsonschema.Draft202012Validator(schemas.load(name))


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
