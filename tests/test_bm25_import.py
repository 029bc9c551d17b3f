"""bm25s is imported without scipy (workbench/retrieval/bm25.py, `import_bm25s`): where scipy is installed, loading and
querying a BM25 index no longer imports it, another thread importing scipy meanwhile gets it, and a process that has
scipy already keeps using it. A stand-in `scipy` package on the child's path makes the checks the same in any venv."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import ROOT

BUILD = """
import sys
from pathlib import Path
from workbench.retrieval.bm25 import build_bm25
from workbench.corpus import load_corpus
from workbench.config import DEMO_CORPUS
build_bm25(load_corpus(DEMO_CORPUS), cache_dir=Path(sys.argv[1]))  # llama-index's chunking imports nltk, nltk scipy
print("{}")
"""

CHILD = """
import json, sys, threading
from pathlib import Path
from workbench.retrieval.bm25 import _NoScipyOnThisThread, import_bm25s, load_bm25
bm25s = import_bm25s()
out = {"scipy_after_import": "scipy" in sys.modules, "bm25s_uses_scipy": bm25s.SCIPY_AVAILABLE,
       "finders_left": sum(isinstance(f, _NoScipyOnThisThread) for f in sys.meta_path)}
hits = load_bm25(next(Path(sys.argv[1]).glob("bm25-*"))).retrieve("How do I configure SSO?", 3).hits
out["top"] = hits[0].chunk.doc_id
out["scipy_after_load_and_query"] = "scipy" in sys.modules
finder = _NoScipyOnThisThread()  # the finder itself: this thread is refused, another one is not
sys.meta_path.insert(0, finder)
try:
    try:
        import scipy.sparse
        out["this_thread"] = "imported"
    except ModuleNotFoundError as exc:
        out["this_thread"] = str(exc)
    seen = []
    other = threading.Thread(target=lambda: seen.append(__import__("scipy.sparse").sparse.MARK))
    other.start(); other.join()
    out["other_thread"] = seen
finally:
    sys.meta_path.remove(finder)
print(json.dumps(out))
"""


@pytest.fixture
def stand_in_scipy(tmp_path):
    """A `scipy` package with a `sparse` submodule, first on the child's path (in front of any real scipy)."""
    pkg = tmp_path / "path" / "scipy"
    (pkg / "sparse").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sparse" / "__init__.py").write_text("MARK = 'stand-in'\n")
    return pkg.parent


def _child(path, cache, program: str = CHILD) -> dict:
    proc = subprocess.run([sys.executable, "-c", program, str(cache)], cwd=ROOT, timeout=120,
                          capture_output=True, text=True,
                          env={**__import__("os").environ, "PYTHONPATH": f"{path}:{ROOT}"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_a_bm25_index_loads_and_answers_without_importing_scipy(stand_in_scipy, tmp_path):
    _child(stand_in_scipy, tmp_path / "cache", BUILD)
    out = _child(stand_in_scipy, tmp_path / "cache")
    assert out["scipy_after_import"] is False and out["bm25s_uses_scipy"] is False, out
    assert out["finders_left"] == 0, "the finder is removed once bm25s is imported"
    assert out["top"].startswith("sso-") or out["top"] == "overview-sso-and-provisioning", out
    assert out["scipy_after_load_and_query"] is False, out
    assert out["other_thread"] == ["stand-in"], "another thread imports scipy while the finder is in place"
    assert "not imported for bm25s" in out["this_thread"], out


def test_a_process_that_has_scipy_already_lets_bm25s_use_it(stand_in_scipy, tmp_path):
    out = _child(stand_in_scipy, tmp_path / "cache", program=(
        "import json, scipy.sparse\nfrom workbench.retrieval.bm25 import import_bm25s\n"
        "print(json.dumps({'bm25s_uses_scipy': import_bm25s().SCIPY_AVAILABLE}))"))
    assert out["bm25s_uses_scipy"] is True, out
