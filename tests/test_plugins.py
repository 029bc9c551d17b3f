"""One extension mechanism: providers, retrievers and judges written by a user register exactly like
the built-ins, through WORKBENCH_PLUGINS or an entry point, without editing the package.

The plug-in modules are the examples of docs/plugins.md, copied out of the page, so the docs cannot
drift from what works.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import pytest

from conftest import ROOT
from bounded import workbench
from clirun import cli as run_cli
from workbench import registry
from workbench.errors import PluginError, UnknownNameError
from workbench.faithfulness import judges
from workbench.providers import base
from workbench.retrieval import base as retrieval_base

DOCS = (ROOT / "docs" / "plugins.md").read_text(encoding="utf-8")
EXAMPLES_DIR = ROOT / "examples" / "plugins"
EXAMPLES = {name: (EXAMPLES_DIR / f"{name}.py").read_text(encoding="utf-8")
            for name in ("my_provider", "my_retriever", "my_judge")}
REGISTRIES = {"my_provider": (base._PROVIDERS, "openfirst"), "my_retriever": (retrieval_base._RETRIEVERS, "titles"),
              "my_judge": (judges._JUDGES, "overlap")}


def test_the_page_shows_the_shipped_examples_as_they_are():
    shown = {m.group(1): m.group(0)[len("```python\n"):-len("```")]
             for m in re.finditer(r"```python\n# examples/plugins/(\w+)\.py\n.*?```", DOCS, re.S)}
    assert shown == EXAMPLES


@pytest.fixture
def plugin_dir():
    yield EXAMPLES_DIR
    for module, (reg, name) in REGISTRIES.items():
        reg.unregister(name)
        registry._imported_plugins.discard(module)
        sys.modules.pop(module, None)


def cli(args, plugin_dir, plugins="my_provider,my_retriever,my_judge", stdin=None):
    """`python -m workbench ARGS` as a user runs it: the plug-ins' folder on PYTHONPATH, WORKBENCH_PLUGINS naming them."""
    env = {"PYTHONPATH": os.pathsep.join([str(ROOT), str(plugin_dir)]), "WORKBENCH_PLUGINS": plugins}
    return workbench(*args, env=env, input=stdin)


def cli_here(args, plugin_dir, plugins, monkeypatch):
    """`cli` in this process (tests/clirun.py): the folder on `sys.path` where PYTHONPATH puts it (the `plugin_dir`
    fixture forgets the plug-ins again). `test_the_cli_uses_a_plugin_judge` runs a real process."""
    monkeypatch.syspath_prepend(str(plugin_dir))
    return run_cli(*args, env={"WORKBENCH_PLUGINS": plugins})


def test_the_cli_uses_a_plugin_provider(plugin_dir, monkeypatch):
    proc = cli_here(["ask", "--provider", "openfirst", "How do I configure SSO?", "--json", "--no-trace"], plugin_dir,
                    "my_provider", monkeypatch)
    assert proc.returncode == 0, proc.stderr
    payload = json.loads(proc.stdout)
    assert payload["config"]["provider_label"] == "open-first-hit (example)"
    assert [t["name"] for t in payload["tool_calls"]] == ["search", "fetch_document"]
    assert payload["status"] == "ok" and payload["sets"]["consulted"] == payload["sets"]["cited"] != []


def test_the_cli_uses_a_plugin_retriever(plugin_dir, tmp_path, monkeypatch):
    proc = cli_here(["ask", "--retriever", "titles", "How do I configure SSO?", "--json", "--no-trace"], plugin_dir,
                    "my_retriever", monkeypatch)
    assert proc.returncode == 0, proc.stderr
    payload = json.loads(proc.stdout)
    assert payload["config"]["retriever"] == "titles" and payload["status"] == "ok"
    search = payload["tool_calls"][0]
    assert search["name"] == "search" and search["doc_ids"]
    queries = tmp_path / "q.jsonl"
    queries.write_text('{"id": "q1", "question": "Configure SAML single sign-on"}\n')
    proc = cli_here(["retrieve", "--retriever", "titles", "--queries", str(queries), "--json"], plugin_dir,
                    "my_retriever", monkeypatch)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["doc_ids"][0] == "sso-saml-setup"


def test_the_cli_uses_a_plugin_judge(plugin_dir):
    lines = [{"id": 1, "claim": "SSO needs a SAML certificate.", "evidence": ["SSO needs the certificate of your SAML provider."]},
             {"id": 2, "claim": "SSO needs a SAML certificate.", "evidence": ["Invoices are sent monthly."]}]
    proc = cli(["judge", "-", "--method", "overlap", "--json"], plugin_dir, "my_judge",
               stdin="\n".join(json.dumps(x) for x in lines))
    assert proc.returncode == 0, proc.stderr
    assert [json.loads(x) for x in proc.stdout.splitlines()] == [{"id": 1, "score": 1.0, "verdict": "supported"},
                                                                 {"id": 2, "score": 0.0, "verdict": "unsupported"}]


def test_one_variable_loads_all_three_kinds_for_a_session(plugin_dir, monkeypatch, tmp_path):
    """A Session checks retriever names through the registry, so a plug-in retriever is accepted."""
    from workbench.session import Session

    monkeypatch.syspath_prepend(str(plugin_dir))
    monkeypatch.setenv("WORKBENCH_PLUGINS", "my_provider, my_retriever ,my_judge")
    session = Session.open(retriever="titles", trace_db=tmp_path / "t.duckdb")
    answer = session.ask("How do I configure SSO?", provider="openfirst", judge=None)
    assert answer.record.config["retriever"] == "titles" and answer.record.status == "ok"
    assert answer.record.config["provider_label"] == "open-first-hit (example)"
    judged = session.ask("How do I configure SSO?", judge="overlap")
    assert judged.faithfulness.judge == "overlap" and judged.faithfulness.claims
    from workbench.trace import TraceReader

    rows = TraceReader(tmp_path / "t.duckdb").rows("SELECT judge, judge_version FROM claims")[1]
    assert set(rows) == {("overlap", "overlap-v1")}, "each claim is stored with its judge's version"


def test_unknown_names_list_the_plugins_too(plugin_dir, monkeypatch):
    monkeypatch.syspath_prepend(str(plugin_dir))
    monkeypatch.setenv("WORKBENCH_PLUGINS", "my_retriever")
    from workbench.session import Session

    with pytest.raises(UnknownNameError, match=r"unknown retriever 'nope'; choose one of: .*titles"):
        Session.open(retriever="nope", trace=False)


def test_a_plugin_that_does_not_import_is_a_clear_error(monkeypatch, capsys):
    from workbench.cli import main
    from workbench.retrieval import retriever_names

    monkeypatch.setenv("WORKBENCH_PLUGINS", "no_such_plugin_module")
    with pytest.raises(PluginError, match="no_such_plugin_module.*WORKBENCH_PLUGINS"):
        retriever_names()
    assert main(["ask", "--provider", "offline", "x", "--no-trace"]) == 2  # printed, no traceback
    assert capsys.readouterr().err.startswith("error: cannot import plugin 'no_such_plugin_module' named in "
                                              "WORKBENCH_PLUGINS: ModuleNotFoundError")
    proc = workbench("judge", "--help", env={"WORKBENCH_PLUGINS": "no_such_plugin_module"}, timeout=60)
    assert proc.returncode == 0, "--help never loads plug-ins"


@pytest.mark.parametrize("module,group,ep_name,attr", [
    ("my_provider", "workbench.providers", "epprovider", "OpenFirstHit"),
    ("my_retriever", "workbench.retrievers", "epretriever", "build"),
    ("my_judge", "workbench.judges", "epjudge", "WordOverlap"),
])
def test_an_installed_entry_point_registers_without_any_environment(tmp_path, monkeypatch, module, group,
                                                                    ep_name, attr):
    """A package declaring an entry point of the kind's group needs no configuration at all."""
    reg, name = REGISTRIES[module]
    source = re.sub(r"\n(@register_\w+\(.*\)|register_\w+\(.*\))\n", "\n", EXAMPLES[module])
    assert "register_" not in source.split("import", 2)[-1].split("\n", 1)[1]  # only the entry point registers it
    (tmp_path / f"ep_{module}.py").write_text(source)
    dist = tmp_path / f"ep_{module}-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: ep-{module}\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(f"[{group}]\n{ep_name} = ep_{module}:{attr}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv("WORKBENCH_PLUGINS", raising=False)
    monkeypatch.setattr(reg, "_entry_points_loaded", False)
    try:
        assert ep_name in reg.names() and name not in reg.names()
        assert callable(reg.factory(ep_name))
    finally:
        reg.unregister(ep_name)
        sys.modules.pop(f"ep_{module}", None)


def test_a_broken_entry_point_names_itself(tmp_path, monkeypatch):
    dist = tmp_path / "broken-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: broken\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[workbench.judges]\nbroken = no_such_module:Judge\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(judges._JUDGES, "_entry_points_loaded", False)
    with pytest.raises(PluginError, match=r"cannot load judge entry point 'broken' \(no_such_module:Judge\) of "
                                          r"group workbench.judges"):
        judges.judge_names()


def test_builtins_load_first_so_a_plugin_may_replace_one(tmp_path, monkeypatch):
    """A plug-in registering a built-in's name replaces it, even when it registers before anything has
    listed the registry (the built-ins module is imported before any other registration)."""
    (tmp_path / "fake_builtins.py").write_text("from fake_registry import REG\nREG.register('a', 'builtin')\n"
                                               "REG.register('b', 'builtin')\n")
    (tmp_path / "fake_registry.py").write_text("from workbench.registry import Registry\n"
                                               "REG = Registry('thing', 'fake_builtins')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        from fake_registry import REG

        REG.register("b", "plugin")
        assert REG.names() == ["a", "b"] and REG.factory("b") == "plugin" and REG.factory("a") == "builtin"
        with pytest.raises(UnknownNameError, match="unknown thing 'c'; choose one of: a, b"):
            REG.factory("c")
    finally:
        sys.modules.pop("fake_registry", None)
        sys.modules.pop("fake_builtins", None)


def test_threads_that_first_use_a_registry_at_once_all_see_every_builtin(tmp_path, monkeypatch):
    """`eval --concurrency 4`'s workers were the first to ask for the `lexical` judge: while one thread
    imported the built-ins module the others saw an empty registry ("unknown judge 'lexical'; choose
    one of: "). Loading is now one locked step, and a registry counts as loaded only when it is done."""
    (tmp_path / "slow_builtins.py").write_text("import time\nfrom slow_registry import REG\ntime.sleep(0.3)\n"
                                               "REG.register('lexical', 'builtin')\n")
    (tmp_path / "slow_registry.py").write_text("from workbench.registry import Registry\n"
                                               "REG = Registry('judge', 'slow_builtins')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import threading

    try:
        from slow_registry import REG

        start, got = threading.Barrier(6), []

        def first_use():
            start.wait()
            try:
                got.append(REG.factory("lexical"))
            except UnknownNameError as exc:
                got.append(exc)

        threads = [threading.Thread(target=first_use) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert got == ["builtin"] * 6
    finally:
        sys.modules.pop("slow_registry", None)
        sys.modules.pop("slow_builtins", None)


def test_every_kind_is_documented_and_registered_in_one_place():
    """Each kind has a built-ins module holding only registrations, and a section of docs/plugins.md."""
    for reg, kind in ((base._PROVIDERS, "provider"), (retrieval_base._RETRIEVERS, "retriever"),
                      (judges._JUDGES, "judge")):
        assert reg.builtins_module.endswith(".builtins") and reg.entry_point_group == f"workbench.{kind}s"
        path = ROOT / Path(*reg.builtins_module.split("."))
        assert path.with_suffix(".py").exists()
        assert f"## A {kind}" in DOCS and f"`{reg.entry_point_group}`" in DOCS


@pytest.fixture
def misnamed(plugin_dir, tmp_path, monkeypatch):
    """The docs' provider registered as `echo` with its `name` line removed (so the class says `base`),
    and the built-in BM25 factory registered as `plainbm25` (it builds a retriever that says `bm25`)."""
    from workbench.retrieval.bm25 import build_bm25

    source = EXAMPLES["my_provider"].replace('    name = "openfirst"\n', "")
    source = source.replace('register_provider("openfirst", OpenFirstHit)', 'register_provider("echo", OpenFirstHit)')
    assert 'name = "openfirst"' not in source and '"echo"' in source
    (tmp_path / "echo_provider.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    import echo_provider  # noqa: F401 - registers `echo`

    retrieval_base.register_retriever("plainbm25", build_bm25)
    monkeypatch.setenv("WORKBENCH_DB", str(tmp_path / "traces.duckdb"))
    yield
    base._PROVIDERS.unregister("echo")
    retrieval_base._RETRIEVERS.unregister("plainbm25")
    sys.modules.pop("echo_provider", None)


def test_the_registered_name_is_the_one_recorded_and_verified(misnamed, tmp_path):
    """A provider whose class omits `name` and a retriever whose class says another name are traced,
    shown and verified under the names they were registered with."""
    import duckdb

    from workbench.session import Session

    assert base.get_provider("echo").name == "echo"
    session = Session.open(retriever="plainbm25")
    answer = session.ask("How do I configure SSO?", provider="echo")
    cfg = answer.payload.config
    assert (cfg.provider, cfg.retriever) == ("echo", "plainbm25"), cfg
    assert answer.payload.status == "ok"
    verified = session.verify(answer, budget=2)  # refused before: "verify a turn with the session that asked it"
    assert verified.payload.verification.control_stable in (True, False)
    con = duckdb.connect(str(tmp_path / "traces.duckdb"), read_only=True,
                         config={"autoload_known_extensions": False, "autoinstall_known_extensions": False})
    try:
        rows = con.execute("SELECT provider, retriever FROM runs JOIN turns USING (run_id)").fetchall()
    finally:
        con.close()
    assert rows == [("echo", "plainbm25")]


def test_an_entry_point_never_shadows_a_name_registered_in_code(tmp_path, monkeypatch):
    """The documented rule: a name registered in code (a built-in or a plug-in) wins over an installed
    entry point of the same name, whichever loads first."""
    (tmp_path / "ep_shadow.py").write_text(
        "from workbench.faithfulness.judges import LexicalJudge\n"
        "class Shadow(LexicalJudge):\n    version = 'shadow'\n")
    dist = tmp_path / "ep_shadow-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: ep-shadow\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[workbench.judges]\nlexical = ep_shadow:Shadow\n"
                                           "codejudge = ep_shadow:Shadow\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(judges._JUDGES, "_entry_points_loaded", False)
    judges.register_judge("codejudge", judges.LexicalJudge)  # registered in code before the entry points load
    try:
        assert judges.get_judge("lexical").version != "shadow"  # the built-in
        assert judges.get_judge("codejudge").version != "shadow"  # the code registration
        assert type(judges.get_judge("lexical")) is judges.LexicalJudge
    finally:
        judges._JUDGES.unregister("codejudge")
        sys.modules.pop("ep_shadow", None)
