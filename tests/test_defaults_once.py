"""Each default is stated once (issue 32 item 3, issue 42 item 7): the provider, retriever, mode, judge and k a turn
asks with when nobody says and the context turns a conversation keeps live in `workbench/config.py`, and every
signature, record field, widget default and help text reads them there. This scans the code (as `test_library_words.py` scans string constants) for a literal
restating one of them, so a new `k: int = 5` or `default="offline"` fails here."""

from __future__ import annotations

import ast
import re

from conftest import ROOT
from sources import parsed

from workbench.config import (DEFAULT_CONTEXT_TURNS, DEFAULT_JUDGE, DEFAULT_K, DEFAULT_MODE, DEFAULT_PROVIDER,
                              DEFAULT_RETRIEVER)

#: The name a default goes by in signatures, fields, keywords and flags → its value.
DEFAULTS = {"k": DEFAULT_K, "provider": DEFAULT_PROVIDER, "context_turns": DEFAULT_CONTEXT_TURNS,
            "turns": DEFAULT_CONTEXT_TURNS, "retriever": DEFAULT_RETRIEVER, "mode": DEFAULT_MODE,
            "judge": DEFAULT_JUDGE, "method": DEFAULT_JUDGE}
#: A parameter that takes several of them, e.g. `providers=("offline",)`.
PLURALS = {"providers": DEFAULT_PROVIDER, "retrievers": DEFAULT_RETRIEVER, "judges": DEFAULT_JUDGE}
#: A factory's `name` parameter names what it builds: `get_judge(name="lexical")` restates the judge's default.
FACTORIES = {"get_judge": "judge", "get_provider": "provider", "get_retriever": "retriever"}
#: Where the defaults are stated.
HOME = "workbench/config.py"


def _is(node: ast.AST | None, value) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) is type(value) and node.value == value


def _has(node: ast.AST | None, value) -> bool:
    return isinstance(node, (ast.Tuple, ast.List)) and any(_is(e, value) for e in node.elts)


def _restates(name: str | None, node: ast.AST | None, plurals: bool = False) -> bool:
    if name in DEFAULTS and _is(node, DEFAULTS[name]):
        return True
    return plurals and name in PLURALS and _has(node, PLURALS[name])


def _params(fn: ast.FunctionDef | ast.AsyncFunctionDef):
    """(name, default) of every parameter of `fn` that has a default."""
    a = fn.args
    positional = a.posonlyargs + a.args
    yield from zip((p.arg for p in positional[len(positional) - len(a.defaults):]), a.defaults)
    yield from ((p.arg, d) for p, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None)


def _flag_name(call: ast.Call) -> str | None:
    """The default's name an `add_argument("-k", "--k", …)` call is for (`--context-turns` → `context_turns`)."""
    for arg in call.args:
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and arg.value.startswith("--"):
            return arg.value[2:].replace("-", "_")
    return None


def _named(node: ast.AST) -> str | None:
    """The default's name an expression reads: `k`, `cfg.k`, `cfg["k"]`, `cfg.get("k")`."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" and node.args:
        node = node.args[0]
    elif isinstance(node, ast.Subscript):
        node = node.slice
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None


def _strings(node: ast.AST):
    for n in ast.walk(node):
        if isinstance(n, ast.Constant) and isinstance(n.value, str):
            yield n.value


def _in_call(call: ast.Call):
    """What restates a default in one call: `k=5`, and an `add_argument` flag's literal default or its help
    saying the default's value."""
    yield from (f"{kw.arg}={ast.unparse(kw.value)}" for kw in call.keywords if _restates(kw.arg, kw.value))
    if isinstance(call.func, ast.Attribute) and call.func.attr == "get" and len(call.args) == 2 \
            and _restates(_named(call), call.args[1]):  # `cfg.get("mode", "agent")`
        yield ast.unparse(call)
    if not (isinstance(call.func, ast.Attribute) and call.func.attr == "add_argument"):
        return
    name = _flag_name(call)
    if name not in DEFAULTS:
        return
    said = re.compile(rf"\bdefault:? {re.escape(str(DEFAULTS[name]))}\b")
    for kw in call.keywords:
        if kw.arg == "default" and _is(kw.value, DEFAULTS[name]):
            yield f"--{name} default={ast.unparse(kw.value)}"
        if kw.arg == "help" and any(said.search(s) for s in _strings(kw.value)):
            yield f"--{name} help says its default"


def restated(root=ROOT) -> list[str]:
    """`path:line: what` for every literal in the code that restates a default (`DEFAULTS`)."""
    bad = []
    files = [*sorted((root / "workbench").rglob("*.py")), root / "app.py", *sorted((root / "pages").glob("*.py"))]
    for f in (f for f in files if f.exists()):
        rel = f.relative_to(root).as_posix()
        if rel == HOME:
            continue
        for node in ast.walk(parsed(f)):
            found: list[str] = []
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                kind = FACTORIES.get(node.name)
                found = [f"{n}={ast.unparse(d)}" for n, d in _params(node)
                         if _restates(kind if kind and n == "name" else n, d, plurals=True)]
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) \
                    and _restates(node.target.id, node.value, plurals=True):
                found = [f"{node.target.id} = {ast.unparse(node.value)}"]
            elif isinstance(node, ast.Call):
                found = list(_in_call(node))
            elif isinstance(node, ast.IfExp) and _restates(_named(node.body), node.orelse):  # `cfg.k if cfg else 5`
                found = [ast.unparse(node)]
            elif isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or):  # `cfg.get("k") or 5`
                found = [f"{ast.unparse(a)} or {ast.unparse(b)}" for a, b in zip(node.values, node.values[1:])
                         if _restates(_named(a), b)]
            elif isinstance(node, ast.Dict):  # a widget's default ("cfg_k": 5), a JSON Schema's ("k": {"default": 5})
                for key, value in zip(node.keys, node.values):
                    name = key.value.removeprefix("cfg_") if isinstance(key, ast.Constant) and isinstance(
                        key.value, str) else None
                    inner = dict(zip((getattr(k, "value", None) for k in value.keys), value.values)) \
                        if isinstance(value, ast.Dict) else {}
                    if _restates(name, value) or _restates(name, inner.get("default")):
                        found.append(f"{key.value!r}: {ast.unparse(value)}")
            bad += [f"{rel}:{node.lineno}: {what}" for what in found]
    return bad


def test_each_default_is_stated_once():
    assert not restated(), "restate a default of workbench/config.py:\n" + "\n".join(restated())


def test_the_check_finds_each_kind_of_restatement(tmp_path):
    (tmp_path / "workbench").mkdir()
    (tmp_path / "workbench" / "m.py").write_text(
        'from dataclasses import dataclass\n'
        'def ask(q, *, provider: str = "offline", k: int = 5): ...\n'
        'def many(providers=("offline",), retrievers=("bm25",)): ...\n'
        'def get_judge(name="lexical", **options): ...\n'
        'def get_retriever(name, corpus, *, k=K): ...\n'
        '@dataclass\nclass Spec:\n    k: int = 5\n    turns: int = 2\n'
        'ask("q", k=5)\n'
        'DEFAULTS = {"cfg_k": 5, "k": {"type": "integer", "default": 5}}\n'
        'p.add_argument("-k", "--k", type=int, default=5, help="results (default 5)")\n'
        'p.add_argument("--context-turns", default=TURNS, help="(default 2, 0 to 50)")\n'
        'fine = ask("q", k=K, provider=PROVIDER, n=5)\n'
        'k = int(cfg.get("k") or 5) + (n or 5)\n'
        'm = cfg.get("mode", "agent"), cfg.retriever if cfg else "bm25", ask("q", judge="lexical")\n',
        encoding="utf-8")
    assert sorted(line.split(": ", 1)[1] for line in restated(tmp_path)) == sorted([
        "provider='offline'", "k=5", "providers=('offline',)", "retrievers=('bm25',)", "name='lexical'", "k = 5", "turns = 2", "k=5", "'cfg_k': 5",
        "'k': {'type': 'integer', 'default': 5}", "--k default=5", "--k help says its default",
        "--context_turns help says its default", "cfg.get('k') or 5",
        "cfg.get('mode', 'agent')", "cfg.retriever if cfg else 'bm25'", "judge='lexical'"])
