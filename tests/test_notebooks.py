"""The companion notebooks run top to bottom offline (nbclient, the venv's kernel) and are committed clean."""

from __future__ import annotations

import ast
import os
import re
import sys
from pathlib import Path

import duckdb
import nbformat
import pytest

from conftest import ROOT

NOTEBOOKS = ROOT / "notebooks"
NAMES = ["01_one_turn", "02_compare_retrievers_providers", "03_trace_analysis", "04_faithfulness"]
CELL_TIMEOUT_S = 120


def _read(name: str):
    return nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)


def test_every_notebook_is_listed():
    assert sorted(p.stem for p in NOTEBOOKS.glob("*.ipynb")) == NAMES


@pytest.mark.parametrize("name", NAMES)
def test_committed_without_outputs(name):
    for i, cell in enumerate(_read(name).cells):
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, (
                f"{name}.ipynb cell {i} has outputs: run `.venv/bin/python notebooks/strip.py`")


@pytest.mark.parametrize("name", NAMES)
def test_first_cell_holds_the_parameters(name):
    first = _read(name).cells[0]
    assert first.cell_type == "code" and "parameters" in first.metadata.get("tags", [])
    assigned = {t.id for node in ast.parse(first.source).body if isinstance(node, ast.Assign)
                for t in node.targets if isinstance(t, ast.Name)}
    assert {"PROVIDER", "PROVIDERS"} & assigned and {"RETRIEVER", "RETRIEVERS"} & assigned, assigned
    assert {"MODE", "CORPUS", "TRACE_DB"} <= assigned, assigned


@pytest.mark.parametrize("name", NAMES)
def test_cells_only_call_the_library(name):
    """No logic copied into cells: no function or class definitions, no loops (the library computes)."""
    for i, cell in enumerate(_read(name).cells):
        if cell.cell_type != "code":
            continue
        for node in ast.walk(ast.parse(cell.source)):
            assert not isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.For, ast.While, ast.Lambda)), (
                f"{name}.ipynb cell {i}: move this logic into workbench (e.g. workbench/analysis.py)")


#: Parameters the tests give a notebook, injected after its parameters cell as papermill does: the
#: real local model answers one question from one excerpt (prompt tokens are most of its cost) with a small output
#: budget, so its cell is bounded in work (not only in time) and cannot outlast the cell timeout on a loaded machine;
#: 02 and 04 ask four questions
#: (each table, chart and verdict they show is drawn from four as from all of them) and 04 judges a smaller
#: ExpertQA sample.
TEST_PARAMETERS = {
    "02_compare_retrievers_providers": 'LIMIT = 4\nLOCAL_QUESTIONS = 1\nLOCAL_K = 1\nLOCAL_OPTIONS = {"max_tokens": 12}',
    "03_trace_analysis": "DEMO = True",
    "04_faithfulness": "LIMIT = 4\nEXPERTQA_SAMPLE = 40",
}
#: Unset in a notebook's kernel: no real provider configured, so the notebooks run offline even where OLLAMA_HOST
#: or a Gemini key is set, and no trace store but the one a test gives.
UNSET = ("WORKBENCH_DB", "OLLAMA_HOST", "GEMINI_API_KEY", "GOOGLE_API_KEY")


class Runs:
    """Notebook runs in one venv kernel, started once for the module (a kernel's start-up and the notebooks'
    imports cost seconds a run). Each run starts with `%reset -f` and the environment and working folder a kernel
    started for it would have, so a notebook sees nothing another one defined; a run that timed out or killed the
    kernel restarts it. Each run's fresh WORKBENCH_HOME links its `indexes` folder to one cache, so a corpus's
    retrieval indexes are built by the first run that needs them, not by every one (tests/test_retrieval_cache.py
    tests building them)."""

    def __init__(self, tmp_path_factory):
        from jupyter_client.manager import KernelManager

        self.tmp, self.done = tmp_path_factory, {}
        self.indexes = tmp_path_factory.mktemp("nb-indexes")
        # nbclient drives the kernel from an event loop: with the blocking client a kernel that died mid-cell (a
        # crash) left it waiting on the output channel for ever, its timeouts and liveness checks never run; the
        # asynchronous client lets them run, and a dead kernel fails its notebook's tests at once
        self.kernel = KernelManager(kernel_name="python3", client_class="jupyter_client.asynchronous.AsyncKernelClient")
        self.kernel.start_kernel(extra_arguments=["--HistoryManager.hist_file=:memory:"], cwd=str(NOTEBOOKS))

    def executed(self, name: str) -> tuple[Path, object]:
        """(home, executed notebook) of `name` with the test parameters, run once, as a user would from notebooks/,
        with a fresh WORKBENCH_HOME of its own: each notebook is its own test, so a slow or failing cell costs that
        notebook's tests only."""
        if name not in self.done:
            self.done[name] = self.execute(name, self.tmp.mktemp(f"nb-{name[:2]}"))
        home, nb = self.done[name]
        if isinstance(nb, BaseException):
            raise nb
        return home, nb

    def execute(self, name: str, home: Path, parameters: str | None = None,
                env: dict[str, str] | None = None) -> tuple[Path, object]:
        """Run notebook `name` with WORKBENCH_HOME `home`, `parameters` (default: TEST_PARAMETERS') and `env` on top
        of the test's environment (a team store's); (home, the executed notebook or the exception it raised)."""
        from nbclient import NotebookClient
        from nbclient.exceptions import CellExecutionError

        environment = {k: v for k, v in os.environ.items() if k not in UNSET}
        environment.update({"WORKBENCH_HOME": str(home), **(env or {})})
        home.mkdir(parents=True, exist_ok=True)
        if not (home / "indexes").exists():
            (home / "indexes").symlink_to(self.indexes, target_is_directory=True)
        nb = _read(name)
        # Prove the kernel is the venv's interpreter (the one running the tests), not some other python.
        nb.cells.insert(1, nbformat.v4.new_code_cell("import sys; print('KERNEL', sys.executable)"))
        parameters = TEST_PARAMETERS.get(name) if parameters is None else parameters
        if parameters:
            nb.cells.insert(2, nbformat.v4.new_code_cell(parameters))
        nb.cells.insert(0, nbformat.v4.new_code_cell(
            f"%reset -f\nimport gc as _gc, os as _os\n_os.environ.clear()\n_os.environ.update({environment!r})\n"
            f"_os.chdir({str(NOTEBOOKS)!r})\n_gc.collect()\ndel _gc, _os"))
        nb.cells.append(nbformat.v4.new_code_cell("%reset -f\nimport gc; gc.collect(); del gc"))  # files closed
        # an output still on its way when the cell's reply came (plotly.js is megabytes) is waited for, not dropped
        client = NotebookClient(nb, km=self.kernel, timeout=CELL_TIMEOUT_S, kernel_name="python3",
                                iopub_timeout=CELL_TIMEOUT_S, raise_on_iopub_timeout=True)
        try:
            client.execute()
            return home, nb
        except Exception as exc:  # noqa: BLE001 - re-raised by every test of this notebook
            if not isinstance(exc, CellExecutionError):  # a timeout or a dead kernel: the next run gets a new one
                self.kernel.restart_kernel(now=True)
            return home, exc
        finally:
            if client.kc is not None:
                client.kc.stop_channels()


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    runs = Runs(tmp_path_factory)
    yield runs
    runs.kernel.shutdown_kernel(now=True)


def _text(nb) -> str:
    out = []
    for cell in nb.cells:
        for o in cell.get("outputs", []):
            out.append(o.get("text", ""))
            out.extend(str(v) for k, v in o.get("data", {}).items() if k.startswith("text/"))
    return "\n".join(out)


def _mimes(nb) -> set[str]:
    return {k for cell in nb.cells for o in cell.get("outputs", []) for k in o.get("data", {})}


@pytest.mark.parametrize("name", NAMES)
def test_notebook_runs_offline_in_the_venv_kernel(runs, name):
    home, nb = runs.executed(name)
    text = _text(nb)
    assert f"KERNEL {Path(sys.executable)}" in text or f"KERNEL {sys.executable}" in text, text[:300]
    assert not [o for c in nb.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    # Each notebook wrote (or read) its own trace database under the temporary WORKBENCH_HOME.
    assert str(home) in text


def test_one_turn_shows_sets_payload_and_rejection(runs):
    nb = runs.executed("01_one_turn")[1]
    text = _text(nb)
    assert "sso-saml-setup" in text and "Sources: " in text
    assert "not_retrieved" in text and "application/json" in _mimes(nb)


@pytest.mark.parametrize("name", ["02_compare_retrievers_providers", "03_trace_analysis", "04_faithfulness"])
def test_compare_and_faithfulness_draw_plotly_charts(runs, name):
    nb = runs.executed(name)[1]
    assert "application/vnd.plotly.v1+json" in _mimes(nb), name
    if name.startswith("02"):
        assert "honest" in _text(nb)


def test_compare_exported_to_html_draws_its_charts_offline(runs):
    """Issue 41 item 11: exported with nbconvert, notebook 02's charts were blank offline (they needed require.js
    from a CDN). Every chart is HTML that draws with the plotly.js the notebook embeds once, no require, no CDN; and
    its runs are not labelled "corpus corpus"."""
    from nbconvert import HTMLExporter

    nb = runs.executed("02_compare_retrievers_providers")[1]
    charts = sum(1 for c in nb.cells for o in c.get("outputs", []) if "application/vnd.plotly.v1+json" in o.get("data", {}))
    html, _ = HTMLExporter().from_notebook_node(nb)
    assert charts >= 2 and html.count("Plotly.newPlot(") == charts
    assert html.count("window.Plotly = Plotly") == 1, "plotly.js itself, once"
    assert not re.search(r'<script[^>]*src="[^"]*plot', html) and 'require(["plotly"]' not in html  # nothing fetched
    assert "corpus corpus" not in _text(nb)


def test_compare_verifies_by_ablation_and_sets_load_bearing_precision_beside_consulted(runs):
    text = _text(runs.executed("02_compare_retrievers_providers")[1])
    assert "load-bearing share" in text and "hidden-influence rate" in text  # the verdicts per configuration
    # the library's scoring (workbench.trace.scoring): each row's figures with their 95% intervals
    assert "load-bearing row (verified by ablation)" in text and "precision 95% CI" in text


def test_trace_analysis_accounts_for_document_usage(runs):
    text = _text(runs.executed("03_trace_analysis")[1])
    assert "consulted_turns" in text and "documents_consulted" in text and "retrieved_turns" in text


def test_trace_analysis_shows_conversations_and_carried_citations(runs):
    """Issue 22, item 9: the conversation section (views `conversations`, `conversation_turns`)."""
    text = _text(runs.executed("03_trace_analysis")[1])
    assert "demo-sso" in text and "demo-api-keys" in text and "And with Okta?" in text
    assert "share_citing_carried" in text and "citing_only_their_own" in text and "median_turns_back" in text


def test_trace_analysis_exports_parquet(runs):
    home, _ = runs.executed("03_trace_analysis")
    assert list((home / "notebooks" / "03_traces.parquet" / "turns").rglob("*.parquet"))


def test_trace_analysis_reads_the_apps_trace_database_by_default(tmp_path, runs):
    """Issue 34, item 8: with its default parameters notebook 03 analyses the database the app and the CLI
    write (`<WORKBENCH_HOME>/traces.duckdb` here), never one of its own, and asks nothing."""
    from workbench.session import Session

    home = tmp_path / "home"
    app_db = home / "traces.duckdb"
    session = Session.open(trace_db=app_db)
    session.ask("How do I rotate an API key?")
    session.ask("How do I configure SSO?", conversation_id="team-sso")
    session.ask("And with Okta?", conversation_id="team-sso")
    _, nb = runs.execute("03_trace_analysis", home, parameters="")
    if isinstance(nb, BaseException):
        raise nb
    text = _text(nb)
    assert f"trace database: {app_db}" in text and f"{app_db}: 3 turns" in text, [l for l in text.splitlines() if "trace database" in l or "turns" in l][:5]
    assert "team-sso" in text and "How do I rotate an API key?" in text
    assert not (home / "notebooks" / "03_traces.duckdb").exists()
    assert duckdb.connect(str(app_db), read_only=True).execute("SELECT count(*) FROM turns").fetchone() == (3,)


    # issue 41 item 11: the Parquet export goes to the notebooks' folder, never beside the app's database
    assert not list(home.glob("*.parquet")) and list((home / "notebooks" / "03_traces.parquet").rglob("*.parquet"))


def test_trace_analysis_says_what_to_do_when_there_are_no_traces_yet(tmp_path, runs):
    _, nb = runs.execute("03_trace_analysis", tmp_path / "home", parameters="")
    assert isinstance(nb, BaseException) and "set DEMO = True" in str(nb)


@pytest.fixture(scope="module")
def team_db(pg_server, tmp_path_factory):
    """A team store (docs/design.md §13) on the session's PostgreSQL, migrated (a copy of the server's migrated
    template: tests/pgserver.py) and holding one conversation."""
    from clirun import cli
    from pgserver import migrated_team_store

    data = tmp_path_factory.mktemp("nb-lake") / "lake-data"
    store = migrated_team_store(pg_server, data)
    for question in ("How do I configure SSO?", "And with Okta?"):
        r = cli("ask", question, "--db", store, "--conversation", "team-sso")
        assert r.returncode == 0, r.stderr
    return {"WORKBENCH_DB": store, "WORKBENCH_DATA_PATH": str(data)}


def test_query_df_on_a_team_store_reads_through_the_kept_attachment(team_db, monkeypatch):
    """Notebook 03 runs a dozen `query_df`s: on a team store each attached the store anew (loading the extensions,
    ATTACH, the macros: ~0.8 s of CPU a query); they read through the process's kept attachment, read-only still."""
    from workbench.trace import lake, query_df
    from workbench.errors import ReadOnlyQueryError

    store = team_db["WORKBENCH_DB"]
    query_df("SELECT count(*) FROM turns", store)  # the process's attachment, kept
    opened, real = [], lake.open_store
    monkeypatch.setattr(lake, "open_store", lambda *a, **kw: opened.append(a) or real(*a, **kw))
    assert query_df("SELECT count(*) AS n FROM turns WHERE conversation_id = 'team-sso'", store)["n"][0] == 2
    assert opened == [], "the store was attached again"
    with pytest.raises(ReadOnlyQueryError):
        query_df("DELETE FROM turns", store)
    assert query_df("SELECT count(*) AS n FROM turns", store)["n"][0] >= 2


#: On a team store the notebooks' store calls are what is tested; the real model's answers in 02 (the file runs
#: above cover them) and its every question would only add minutes, so 02 compares three questions offline there.
TEAM_PARAMETERS = {"02_compare_retrievers_providers": "LOCAL_MODEL = None\nLIMIT = 3", "03_trace_analysis": ""}


@pytest.mark.parametrize("name", NAMES)
def test_notebook_runs_on_a_team_store(team_db, tmp_path, runs, name):
    """Issue 39 item 3: with `WORKBENCH_DB=ducklake:postgres:…` each notebook writes to and reads the team store,
    as it does a file (notebook 03 with its default parameters: the store's traces, not a database of its own)."""
    from workbench.trace import TraceReader

    store = team_db["WORKBENCH_DB"]
    before = TraceReader(store).rows("SELECT count(*) FROM turns")[1][0][0]
    parameters = TEAM_PARAMETERS.get(name)
    home, nb = runs.execute(name, tmp_path / "home", parameters=parameters, env=team_db)
    if isinstance(nb, BaseException):
        raise nb
    assert not [o for c in nb.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    after = TraceReader(store).rows("SELECT count(*) FROM turns")[1][0][0]
    if name == "03_trace_analysis":
        assert after == before and "team-sso" in _text(nb) and f"{before} turns" in _text(nb)
        assert list((home / "notebooks" / "03_traces.parquet" / "turns").rglob("*.parquet")), "exported"
    else:
        assert after > before, "the notebook's turns went to the team store"
    assert not list(home.rglob("*.duckdb")), "no trace file of its own beside the team store"


def test_strip_script_removes_outputs(tmp_path, capsys):
    import runpy

    strip_main = runpy.run_path(str(NOTEBOOKS / "strip.py"))["main"]
    nb = _read("01_one_turn")
    nb.cells[0].outputs = [nbformat.v4.new_output("stream", text="hello")]
    nb.cells[0].execution_count = 3
    f = tmp_path / "dirty.ipynb"
    nbformat.write(nb, f)
    assert strip_main(["--check", str(f)]) == 1 and "has outputs" in capsys.readouterr().out
    assert nbformat.read(f, as_version=4).cells[0].outputs  # --check changes nothing
    assert strip_main([str(f)]) == 0
    clean = nbformat.read(f, as_version=4)
    assert clean.cells[0].outputs == [] and clean.cells[0].execution_count is None
    assert strip_main(["--check", str(f)]) == 0


def test_a_kernel_that_dies_mid_cell_fails_its_notebook_at_once(runs, monkeypatch, tmp_path):
    """A kernel that crashed (a segfault in native code) while a cell ran left the run waiting for its output for
    ever; it now fails that notebook's tests with the kernel's death, and the next notebook gets a new kernel."""
    from nbclient.exceptions import DeadKernelError

    crash = ("import os, signal, threading, time\n"
             "threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGSEGV)).start()\n"
             "print('running', flush=True)\ntime.sleep(30)")
    monkeypatch.setitem(globals(), "_read", lambda name: nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_code_cell(crash)]))
    _, outcome = runs.execute("01_one_turn", tmp_path / "home", parameters="")
    assert isinstance(outcome, DeadKernelError), outcome
    monkeypatch.undo()
    _, nb = runs.execute("01_one_turn", tmp_path / "again", parameters="")
    assert not isinstance(nb, BaseException), nb
