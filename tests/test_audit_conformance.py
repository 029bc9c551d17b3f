"""The audit conformance suite (issue 38, design.md §12): one real app per instrumentation, each written as its
framework's docs show and instrumented with its official instrumentor, exporting OTLP/HTTP protobuf to one real
`python -m workbench collect` (started once, shared), against a loopback model speaking its provider's wire format
(tests/wire_model.py). Each app (tests/conformance/*.py, run in .venv-audit-apps) asks a turn that searches, opens
one hit in full, cites it, cites a second hit's snippet, leaves a third uncited and writes a link one character off
it; a follow-up in the same session (history re-sent: carried); and a turn with its inputs hidden (unauditable).
Expected sets are derived from the app's record and the model's record (tests/conformance_expect.py).

Each app's process imports its framework once (tests/conformance/runner.py) and forks a child for each of its runs,
which starts where a fresh process of it would: its variants (`--json`, `--legacy`) and docs/audit.md's setup snippet
for its framework (run as written) share that one import; the snippet's test checks the run its app's test made.
"""

from __future__ import annotations

import json
import os
import re
import select
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from workbench.audit.logs import LOG_WAIT_SECONDS
from workbench.audit.sessions import session_in

from audit_apps import collect
from clirun import cli
from conftest import ROOT
from conformance_table import CELLS, DOC, KNOWN, in_doc, results, save_result, table, versions
from conformance_expect import check_hidden, check_turn, corpus_maps, expect, read_record
from wire_model import WireModel

pytestmark = pytest.mark.heavy
APPS = ROOT / "tests" / "conformance"
CORPUS = ROOT / "data" / "demo"
APPS_PYTHON = Path(os.environ.get("WORKBENCH_AUDIT_APPS") or ROOT / ".venv-audit-apps") / "bin" / "python"
sys.path.insert(0, str(APPS))
import kit  # noqa: E402  (stdlib only: the demo corpus as the apps read it)

URLS, SNIPPETS = corpus_maps(kit.ARTICLES, kit.snippet)


@pytest.fixture(scope="session")
def conformance(tmp_path_factory):
    """The shared loopback model and `collect` (with the demo corpus); yields (model, traces URL, db, folder)."""
    if not APPS_PYTHON.exists():
        pytest.skip(f"no {APPS_PYTHON}: .ci/run installs requirements-audit-apps.txt there (or set WORKBENCH_AUDIT_APPS)")
    tmp = tmp_path_factory.mktemp("conformance")
    db = tmp / "audit.duckdb"
    with WireModel() as model, collect(db, "conformance", "--corpus", str(CORPUS)) as url:
        yield model, url, db, tmp


def turns(db: Path, *args: str) -> list[dict]:
    """The audited turns (`workbench turns --json`, run in this process: no interpreter start per read)."""
    out = cli("turns", "--json", "--db", str(db), *args)
    assert out.returncode == 0, out.stderr
    return [json.loads(line) for line in out.stdout.splitlines()]


def session_turns(db: Path, session: str) -> list[dict]:
    """The audited turns of the app's session `session`, whatever its service (stored as `otel/SERVICE/SESSION`:
    audit/sessions.py)."""
    return [t for t in turns(db) if t.get("conversation_id") and session_in(t["conversation_id"]) == session
            and t["conversation_id"] != session]


@dataclass
class Ran:
    """One run of an app or a snippet: its exit code and stderr, its record, what the model was sent during it, and
    the trace database its turns went to."""

    rc: int
    stderr: str
    record: Path
    exchanges: list
    db: Path


#: The apps of the OTel GenAI conventions: their hidden run's model calls carry no messages and (but for the legacy
#: wrapper's content-less events) no log event ever follows, so a running `collect` holds those traces
#: LOG_WAIT_SECONDS for events (logs.py; that wait is tested in tests/test_audit_logs.py). They run together, when
#: the first of their tests asks, against a `collect` of their own, stopped once they have exited (their exporters shut down: everything sent and
#: answered 200), whose stop assembles what waits with what came, as the wait's end would.
GENAI = ("openllmetry_", "otel_")


def _env(*drop: str, **extra: str) -> dict[str, str]:
    """This environment for an app's process, with `extra` and without `drop`. LITELLM_LOCAL_MODEL_COST_MAP: litellm
    reads the model cost map it ships instead of fetching it from GitHub at import (offline: three tries, ~8 s)."""
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", **extra}
    for k in ("PYTHONPATH", "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "OTEL_SEMCONV_STABILITY_OPT_IN", *drop):
        env.pop(k, None)
    return env


def _app_request(conformance, app: str, url: str) -> tuple[dict, Path]:
    """The runner's request for `app`'s three cases as `python APP.py ARGS` (tests/conformance/runner.py)."""
    model, _, _, tmp = conformance
    run = app.replace(" ", "")
    record = tmp / f"{run}.jsonl"
    env = _env("OPENINFERENCE_HIDE_INPUTS", "TRACELOOP_TRACE_CONTENT", CONFORMANCE_MODEL=model.url,
               CONFORMANCE_COLLECT=url, CONFORMANCE_RECORD=str(record), CONFORMANCE_RUN=run, OTEL_SDK_DISABLED="false")
    return {"argv": app.split(" ")[1:], "env": env, "cwd": str(tmp), "stdout": str(tmp / f"{run}.out"),
            "stderr": str(tmp / f"{run}.err")}, record


def _snippet_request(conformance, app: str) -> tuple[dict, Path]:
    """The runner's request for docs/audit.md's setup lines for `app`'s framework, as `python -c PRELUDE` runs them."""
    model, url, _, tmp = conformance
    snippet = tmp / f"snippet-{app}.py"
    snippet.write_text(SETUP_LINES[app], encoding="utf-8")
    run = f"snippet-{app}"
    env = _env(CONFORMANCE_MODEL=model.url, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=url,
               OTEL_EXPORTER_OTLP_LOGS_ENDPOINT=url.removesuffix("/v1/traces") + "/v1/logs",
               CONFORMANCE_RECORD=str(tmp / f"{run}.jsonl"), CONFORMANCE_RUN=run, SNIPPET=str(snippet),
               CONFORMANCE_APPS=str(APPS))
    return {"code": PRELUDE.format(app=app), "env": env, "cwd": str(tmp), "stdout": str(tmp / f"{run}.out"),
            "stderr": str(tmp / f"{run}.err")}, tmp / f"{run}.jsonl"


#: The longest an app's run may take (it asks a loopback model three turns).
RUN_TIMEOUT_S = 300


class Runner:
    """An app's process once its imports are done (tests/conformance/runner.py): each run a fork of it."""

    def __init__(self, conformance, script: str):
        self.model, tmp = conformance[0], conformance[3]
        self.log = tmp / f"runner-{script}.err"
        with open(self.log, "wb") as err:
            self.proc = subprocess.Popen([str(APPS_PYTHON), str(APPS / "runner.py"), script], cwd=tmp,
                                         env=_env(CONFORMANCE_MODEL=self.model.url), stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=err, text=True, start_new_session=True)

    def run(self, request: dict, record: Path, db: Path) -> Ran:
        start = len(self.model.exchanges)
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        if not select.select([self.proc.stdout], [], [], RUN_TIMEOUT_S)[0]:  # its one line: once the run exited
            os.killpg(self.proc.pid, signal.SIGKILL)  # the runner and the run it forked
            said = Path(request["stderr"]) if Path(request["stderr"]).exists() else self.log  # (still importing)
            raise AssertionError(f"a run took over {RUN_TIMEOUT_S} s: {said.read_text(encoding='utf-8')[-4000:]}")
        line = self.proc.stdout.readline()
        assert line, f"the runner ended: {self.log.read_text(encoding='utf-8')[-4000:]}"
        return Ran(json.loads(line)["rc"], Path(request["stderr"]).read_text(encoding="utf-8"), record,
                   self.model.since(start), db)

    def close(self) -> int:
        self.proc.stdin.close()
        return self.proc.wait(timeout=60)


def run_script(conformance, script: str, genai_url: str | None = None, genai_db: Path | None = None) -> dict[str, Ran]:
    """Every run of the app `script` (its variants in APPS_LIST, then its setup snippet), by app (the snippet's:
    "snippet"), from one import of it (tests/conformance/runner.py); GENAI apps send to `genai_url`."""
    model, url, db, tmp = conformance
    runner, ran = Runner(conformance, script), {}
    try:
        for app in (a for a in APPS_LIST if a.split(" ")[0] == script):
            ours = app.startswith(GENAI)
            ran[app] = runner.run(*_app_request(conformance, app, genai_url if ours else url), genai_db if ours else db)
        if script in SETUP_LINES:
            ran["snippet"] = runner.run(*_snippet_request(conformance, script), db)
    finally:
        rc = runner.close()
    assert rc == 0, runner.log.read_text(encoding="utf-8")[-4000:]
    return ran


def run_genai(conformance) -> dict[str, dict[str, Ran]]:
    """The runs of every GENAI app's script, against a `collect` of theirs, stopped once they have all exited."""
    scripts = dict.fromkeys(a.split(" ")[0] for a in APPS_LIST if a.startswith(GENAI))
    own = conformance[3] / "genai.duckdb"
    with collect(own, "genai", "--corpus", str(CORPUS)) as url:
        return {script: run_script(conformance, script, url, own) for script in scripts}


@pytest.fixture(scope="module")
def runs(conformance):
    """`runs(script)`: the runs of the app `script` (`run_script`; a GENAI app's: `run_genai`), made the first time
    a test asks."""
    made: dict[str, dict[str, Ran]] = {}

    def of(script: str) -> dict[str, Ran]:
        if script not in made:
            made.update(run_genai(conformance) if script.startswith(GENAI) else {script: run_script(conformance, script)})
        return made[script]
    return of


def audit(ran: Ran) -> dict[str, list[str]]:
    """Every cell of an app's row, from its run `ran`: what its audited turns got wrong (empty lists: it conforms)."""
    assert ran.rc == 0, ran.stderr[-4000:]
    first, followup, hidden = read_record(ran.record)
    chat, secret = settled(ran.db, {first.session: 2, hidden.session: 1}).values()
    wrong = {"cells": [f"turns of the session: got {len(chat)}, expected 2"] if len(chat) != 2 else [],
             "hidden": [f"turns of the hidden session: got {len(secret)}, expected 1"] if len(secret) != 1 else []}
    if len(chat) == 2:
        wrong["turn"] = check_turn(chat[0], expect(first, [], ran.exchanges, URLS, SNIPPETS), first)
        wrong["follow-up"] = check_turn(chat[1], expect(followup, [first], ran.exchanges, URLS, SNIPPETS), followup,
                                        chat[0]["turn_id"])
    if len(secret) == 1:
        wrong["hidden"] = check_hidden(secret[0], hidden)
    return wrong


def settled(db: Path, expected: dict[str, int]) -> dict[str, list[dict]]:
    """The turns of each session, once it has its `expected` count or the wait for log events is over: a trace whose
    model calls record no messages of their own waits up to LOG_WAIT_SECONDS for their GenAI log events (logs.py)."""
    deadline = time.monotonic() + LOG_WAIT_SECONDS + 30
    while True:
        got = {s: session_turns(db, s) for s in expected}
        if all(len(got[s]) >= n for s, n in expected.items()) or time.monotonic() > deadline:
            return got
        time.sleep(0.2)


APPS_LIST = ["openai_chat", "openai_responses", "anthropic_tools", "google_genai_tools", "langchain_agent_text",
             "langchain_agent_text --json", "langchain_lcel_rerank", "llama_index_query", "llama_index_chat",
             "llama_index_agent", "openai_agents", "litellm_tools", "pydantic_ai_tools", "openllmetry_openai",
             "openllmetry_langchain", "otel_openai_v2", "otel_openai_v2 --legacy"]


@pytest.mark.parametrize("app", APPS_LIST)
def test_app_conforms(runs, app):
    wrong = audit(runs(app.split(" ")[0])[app])
    save_result(app, wrong)
    found = "\n".join(f"{cell}: {w}" for cell, ws in wrong.items() for w in ws)
    if found and app in KNOWN:
        pytest.xfail(f"known: {KNOWN[app]}\n{found}")
    assert not found, found
    assert app not in KNOWN, f"{app} conforms now: take it off KNOWN and rewrite the table (tests/conformance_table.py)"


SETUP = re.compile(r"<!-- snippet: (\w+) -->\n```python\n(.*?)```", re.S)
SETUP_LINES = dict(SETUP.findall(DOC.read_text(encoding="utf-8")))
#: What the harness binds before a snippet runs: the app's own `ask`, `question` and `conversation_id`.
PRELUDE = """
import os, sys
sys.path.insert(0, os.environ["CONFORMANCE_APPS"])
import kit
from {app} import new_chat
chat = new_chat()
question, conversation_id = kit.QUESTIONS["first"], kit.RUN + "-chat"
ask = lambda q: kit.ask("first", 1, chat)
exec(compile(open(os.environ["SNIPPET"]).read(), "docs/audit.md", "exec"))
"""


@pytest.mark.parametrize("app", sorted(SETUP_LINES))
def test_setup_snippet_runs_as_written(runs, app):
    """docs/audit.md's setup lines for `app`'s framework, run as written: the turn reaches `collect` under the
    snippet's `service.name` and conversation, audited."""
    ran = runs(app)["snippet"]
    assert ran.rc == 0, ran.stderr[-4000:]
    [turn] = session_turns(ran.db, f"snippet-{app}-chat")
    assert turn["audit"]["service"] == re.search(r'"service.name": "([^"]+)"', SETUP_LINES[app]).group(1)
    assert turn["question"] == kit.QUESTIONS["first"] and turn["sets"]["cited"]


def test_support_table_in_the_docs_is_the_suites():
    """docs/audit.md's support table is the one the suite's last run gives (tests/conformance_table.py)."""
    if not APPS_PYTHON.exists():
        pytest.skip(f"no {APPS_PYTHON}: the table names the versions installed there")
    assert set(CELLS) == set(APPS_LIST)
    assert in_doc(DOC.read_text(encoding="utf-8")) == table(versions(), results()), \
        "run .venv/bin/python tests/conformance_table.py --write after the suite"
