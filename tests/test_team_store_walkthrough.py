"""docs/traces.md's team-store walk-through, run as written, then the team it sets up used at once (issue 39 items 8–9,
"Done when"): a real PostgreSQL (tests/pgserver.py), the walk-through's lines from the docs — its role and catalog
database, the first `ask`, two `streamlit run serve.py` app processes and a `workbench collect` process, `sql`,
`store maintain`, the backups — then, all at the same time, a question in each app from one person's browser (chromium, a tab
on each app process, as a load balancer would send them) and a `workbench chat` process, all going on with one conversation, and two exporters sending the collector spans,
each request twice (an exporter's retry). Every turn and span must arrive exactly once, and the conversation's
positions must be gapless. Only the server's address, the data path and the three ports are replaced (`REPLACED`:
each must still be in the docs, so the walk-through cannot drift from what is tested)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from pathlib import Path

import pytest
from conftest import ROOT
from browser_app import shared_indexes
from streamlit_server import CHROMIUM, LAUNCH_ARGS, free_port, settle

pytestmark = [pytest.mark.heavy,
              pytest.mark.skipif(not Path("/usr/bin/chromium").exists(),
                                 reason="/usr/bin/chromium is missing: install it with `apt-get install -y chromium`")]

DOC = ROOT / "docs" / "traces.md"
BLOCK = re.compile(r"<!-- walkthrough: team store -->\n```bash\n(.*?)```", re.S)


def walkthrough_lines() -> list[str]:
    """The walk-through's shell lines as docs/traces.md shows them (a trailing comment explains; it is not run)."""
    [block] = BLOCK.findall(DOC.read_text(encoding="utf-8"))
    return [line for line in (re.sub(r"\s+#.*$", "", raw).strip() for raw in block.splitlines()) if line]


def _replaced(tmp: Path, pg_port: int) -> dict[str, str]:
    """What the docs name that this machine has elsewhere: the PostgreSQL server, the data path, the ports."""
    return {"db.internal": "127.0.0.1", "PGPORT=5432": f"PGPORT={pg_port}", "/srv/traces": str(tmp / "srv-traces"),
            "8501": str(free_port()), "8502": str(free_port()), "4318": str(free_port())}


def _checkout(tmp: Path) -> Path:
    """The repository's layout, its entries linked (what the commands write lands here), `.venv` this one's."""
    root = tmp / "clone"
    root.mkdir()
    for entry in ROOT.iterdir():
        if entry.name not in {".venv", ".git"} and not entry.name.endswith(".duckdb"):
            (root / entry.name).symlink_to(entry)
    (root / ".venv").symlink_to(Path(sys.executable).parents[1])
    return root


def _wait_for(url: str, proc: subprocess.Popen, log: Path, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"{url}: its process ended: {log.read_text()[-3000:]}"
        try:
            urllib.request.urlopen(url, timeout=2).read()
            return
        except urllib.error.HTTPError:  # answering (a GET on the collector's path is refused): it is up
            return
        except OSError:
            time.sleep(0.2)  # polling a starting server: the condition is its answer
    raise AssertionError(f"{url} never answered: {log.read_text()[-3000:]}")


def _run_lines(lines: list[str], env: dict[str, str], cwd: Path, logs: Path) -> list[tuple[subprocess.Popen, Path]]:
    """Run the walk-through: `export` lines change the environment of the next ones, a line ending in `&` is a
    process left running (returned with its log), every other line must exit 0."""
    started = []
    for n, line in enumerate(lines):
        if line.startswith("export "):
            out = subprocess.run(["bash", "-c", f"{line} && env -0"], env=env, cwd=cwd, capture_output=True, check=True)
            env.clear()
            env.update(item.split("=", 1) for item in out.stdout.decode().split("\0") if "=" in item)
        elif line.endswith("&"):
            log = logs / f"background-{n}.log"
            started.append((subprocess.Popen(["bash", "-c", f"exec {line[:-1]}"], env=dict(env), cwd=cwd,
                                             stdout=open(log, "w"), stderr=subprocess.STDOUT), log))
        else:
            proc = subprocess.run(["bash", "-c", f"set -o pipefail; {line}"], env=env, cwd=cwd, capture_output=True,
                                  text=True, timeout=600)
            assert proc.returncode == 0, f"`{line}` exited {proc.returncode}\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    return started


@pytest.fixture(scope="module")
def team(pg_server, tmp_path_factory):
    """The walk-through run against the test's PostgreSQL: (environment, app URLs, collector URL, clone)."""
    tmp = tmp_path_factory.mktemp("walkthrough")
    replaced = _replaced(tmp, pg_server.port)
    block = "\n".join(walkthrough_lines())
    missing = [name for name in replaced if name not in block]
    assert not missing, f"docs/traces.md's walk-through no longer names {missing}: update REPLACED"
    lines = []
    for line in walkthrough_lines():
        for name, value in replaced.items():
            line = line.replace(name, value)
        lines.append(line)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WORKBENCH_", "PYTHONPATH", "PG"))}
    # the test session's index cache: the walk-through's `ask` and apps build the demo corpus's index only if no
    # browser test's app did (tests/browser_app.py)
    env |= {"WORKBENCH_HOME": str(shared_indexes(tmp_path_factory, tmp / "home")), "OMP_WAIT_POLICY": "PASSIVE"}
    clone = _checkout(tmp)
    started = _run_lines(lines, env, clone, tmp)
    try:
        assert len(started) == 3, "the walk-through starts two app processes and a collector"
        apps = [f"http://127.0.0.1:{replaced[p]}" for p in ("8501", "8502")]
        for url, (proc, log) in zip(apps, started):
            _wait_for(f"{url}/_stcore/health", proc, log)
        collector = f"http://127.0.0.1:{replaced['4318']}/v1/traces"
        _wait_for(collector, *started[2])
        yield {"env": env, "apps": apps, "collector": collector, "clone": clone, "tmp": tmp}
    finally:
        for proc, _ in started:
            proc.terminate()
        for proc, _ in started:
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()


def _cli(team, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(team["clone"] / ".venv" / "bin" / "python"), "-m", "workbench", *args],
                          env=team["env"], cwd=team["clone"], input=stdin, capture_output=True, text=True, timeout=600)


def _rows(team, sql: str) -> list[dict]:
    """`workbench sql SQL --json` in the walk-through's environment, run in this process (tests/clirun.py): the test's
    own reading of the store, where a process of its own is not the point."""
    from clirun import cli

    r = cli("sql", sql, "--json", env=team["env"])
    assert r.returncode == 0, r.stderr
    return [json.loads(line) for line in r.stdout.splitlines() if line.strip()]


def test_the_walkthrough_made_a_team_store_with_its_backups(team):
    assert _rows(team, "SELECT count(*) AS n FROM turns") == [{"n": 1}]  # the walk-through's `ask`
    assert _rows(team, "SELECT type FROM duckdb_databases() WHERE database_name = current_database()") \
        == [{"type": "ducklake"}]
    assert list((team["tmp"] / "srv-traces").rglob("*.parquet")), "store maintain wrote the data path's files"
    assert (team["clone"] / "traces.dump").stat().st_size > 0
    assert list((team["clone"] / "traces-files.backup").rglob("*.parquet"))


def _send_spans(url: str, traces: list[str], errors: list[str]) -> None:
    """An instrumented app's exporter: one request per trace, each sent twice (a retry after a lost answer)."""
    from test_audit_receiver import _answering_call, _post, _request

    for trace in traces:
        body = json.dumps(_request([_answering_call(trace, trace[:16], json.dumps([{"doc_id": "sso", "snippet": "Open SSO"}]),
                                                    "See [sso](sso).", question=f"exporter {trace}")],
                                   service="audited-app")).encode()
        for _ in range(2):
            status, answer = _post(url, body)
            if status != 200:
                errors.append(f"{status}: {answer[:300]!r}")


def test_two_apps_a_chat_and_a_collector_at_once_store_everything_once(team):
    """The simulation of many machines on one: every process against one catalog at the same time."""
    from playwright.sync_api import sync_playwright

    cid = f"team-{uuid.uuid4().hex[:8]}"
    from clirun import cli

    first = cli("ask", "How do I configure SSO?", "--conversation", cid, env=team["env"])  # before the race: in-process
    assert first.returncode == 0, first.stderr  # the operator's conversation: every browser may go on with it
    traces = [uuid.uuid4().hex for _ in range(6)]  # 12 requests from two exporters: enough to overlap the turns
    questions = [f"How do I rotate the SAML certificate? ({cid} app {n})" for n in range(2)]
    errors: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
        # one person whose requests two replicas serve (a conversation is its owner's: another browser's turns would
        # not join it), who prefers reduced motion (Streamlit's animations cost the renderer CPU frame by frame)
        person = browser.new_context(reduced_motion="reduce")
        pages = [person.new_page() for _ in team["apps"]]
        for page, url in zip(pages, team["apps"]):
            page.goto(f"{url}/?conversation={cid}", timeout=120_000)
            # the app process's first run: waited for by a locator's polling, then settled (polled every frame)
            page.get_by_test_id("stChatMessage").nth(1).wait_for(timeout=120_000)
            settle(page, 120_000)
        before = [page.get_by_test_id("stChatMessage").count() for page in pages]
        assert before == [2, 2], "each app shows the conversation's first turn"
        for page, question in zip(pages, questions):  # both asked before either is answered
            box = page.get_by_test_id("stChatInputTextArea")
            box.fill(question)
            box.press("Enter")
        senders = [threading.Thread(target=_send_spans, args=(team["collector"], half, errors))
                   for half in (traces[:3], traces[3:])]
        for t in senders:
            t.start()
        chat = _cli(team, "chat", "--conversation", cid, stdin="And with Okta?\nWhat about Entra ID?\n")
        for page, n in zip(pages, before):
            try:
                page.get_by_test_id("stChatMessage").nth(n + 1).wait_for(timeout=180_000)  # its answer
                settle(page, 180_000)
            except Exception:
                (ROOT / "tests" / "artifacts").mkdir(exist_ok=True)
                page.screenshot(path=str(ROOT / "tests" / "artifacts" / "team_store_walkthrough.png"), full_page=True)
                raise AssertionError(f"no answer in {page.url}:\n{page.inner_text('body')[-3000:]}") from None
        browser.close()
        for t in senders:
            t.join(300)
    assert chat.returncode == 0, chat.stderr
    assert not errors, errors
    rows = _rows(team, f"SELECT position, question, owner FROM turns WHERE conversation_id = '{cid}' ORDER BY position")
    assert [r["position"] for r in rows] == [1, 2, 3, 4, 5], rows  # unique and gapless
    asked = [r["question"] for r in rows]
    for question in questions + ["And with Okta?", "What about Entra ID?"]:
        assert asked.count(question) == 1, (question, asked)
    owners = [r["owner"] for r in rows if r["question"] in questions]  # the two apps' turns: the one person's
    assert len(owners) == 2 and owners[0] == owners[1] and owners[0].startswith("browser:"), owners
    quoted = ", ".join(f"'otel-{t}'" for t in traces)
    assert _rows(team, f"SELECT count(*) AS n, count(DISTINCT turn_id) AS d FROM turns WHERE turn_id IN ({quoted})") \
        == [{"n": 6, "d": 6}]
    spans = ", ".join(f"'{t}'" for t in traces)
    assert _rows(team, f"SELECT count(*) AS n FROM audit_spans WHERE trace_id IN ({spans})") == [{"n": 6}]
