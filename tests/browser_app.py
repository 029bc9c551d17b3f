"""What the browser tests share: one `streamlit run app.py` for the whole test session (`app_server`: the chat
page's tests in test_browser.py, test_browser_compare.py and test_browser_share.py drive it, each in browser
sessions of its own), and one index cache for every app the browser tests start (`shared_indexes`).

The app's first page builds the demo corpus's index (seconds of CPU) into `<WORKBENCH_HOME>/indexes`, a cache keyed
by the corpus's content and written whole or not at all (workbench/retrieval/cache.py): the apps of one test session
link that folder to one place, so only the first builds it. `app_server` is a session fixture (tests/conftest.py
imports it), so the modules that use it on one xdist worker start one server between them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from streamlit_server import CHROMIUM, ROOT, streamlit_app

#: Marks a browser test module: skipped, with the reason, where Debian's chromium is not installed.
NEEDS_CHROMIUM = pytest.mark.skipif(not Path(CHROMIUM).exists(),
                                    reason=f"{CHROMIUM} is missing: install it with `apt-get install -y chromium`")


def shared_indexes(tmp_path_factory, home: Path) -> Path:
    """`home`, a new WORKBENCH_HOME whose index cache (`indexes/`) is the test session's one folder; returns `home`."""
    indexes = tmp_path_factory.getbasetemp() / "browser-indexes"
    indexes.mkdir(exist_ok=True)
    home.mkdir(parents=True, exist_ok=True)
    (home / "indexes").symlink_to(indexes, target_is_directory=True)
    return home


@pytest.fixture(scope="session")
def app_server(tmp_path_factory):
    """`streamlit run app.py` on the demo corpus with a trace database of its own and the scripted test providers
    (tests/scripted.py, tests/scripted_conversation.py) as a plug-in: its URL, process id, WORKBENCH_HOME, trace
    database and log. Tests that need a fresh chat open a new browser session (a new page), never a new server."""
    tmp = tmp_path_factory.mktemp("app")
    home = shared_indexes(tmp_path_factory, tmp / "home")
    env = {"WORKBENCH_HOME": str(home), "WORKBENCH_DB": str(tmp / "traces.duckdb"),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "tests"), os.environ.get("PYTHONPATH")])),
           "WORKBENCH_PLUGINS": "scripted,scripted_conversation"}
    with streamlit_app(tmp, env) as served:
        yield {"url": served.url, "pid": served.pid, "home": home, "db": tmp / "traces.duckdb",
               "log": tmp / "streamlit.log"}
