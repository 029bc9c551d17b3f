"""Cached indexes: reloaded == built (rankings and scores), no llama-index on the query path,
k per call under concurrency, corrupt caches rebuilt, and the fitted hybrid fusion."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import ROOT
from workbench.retrieval import get_retriever
from workbench.retrieval.hybrid import Hybrid, fuse, minmax

NAMES = ("bm25", "vector", "hybrid")


@pytest.fixture(scope="module")
def pairs(demo, tmp_path_factory):
    """name -> (built in this process, then reloaded from the cache it wrote)."""
    cache = tmp_path_factory.mktemp("indexes")
    built = {name: get_retriever(name, demo, cache_dir=cache) for name in NAMES}
    return {name: (built[name], get_retriever(name, demo, cache_dir=cache)) for name in NAMES}, cache


def _ranking(retriever, query: str, k: int):
    return [(h.chunk, h.score, h.rank) for h in retriever.retrieve(query, k).hits]


def _demo_queries(demo) -> list[str]:
    gold = [json.loads(x)["question"] for x in (ROOT / "data" / "demo_gold.jsonl").read_text().splitlines() if x.strip()]
    return gold + [d.title for d in demo.documents]


def test_reloaded_indexes_are_read_without_rebuilding(pairs):
    retrievers, cache = pairs
    for name, (built, loaded) in retrievers.items():
        assert built is not loaded and type(built) is type(loaded)
    folders = sorted(p.name for p in cache.iterdir() if not p.name.startswith("chunks-"))
    assert [f.split("-")[0] for f in folders] == ["bm25", "vector"]  # hybrid reuses both, no third index
    for f in folders:
        assert {"chunks.json", "meta.json"} <= {p.name for p in (cache / f).iterdir()}
    assert not [p for p in cache.iterdir() if p.name.startswith(".tmp-")]


@pytest.mark.parametrize("name", NAMES)
def test_built_and_reloaded_rank_identically_on_the_demo_questions(pairs, demo, name):
    built, loaded = pairs[0][name]
    assert built.chunks == loaded.chunks
    for q in _demo_queries(demo):
        for k in (1, 5, 40):
            assert _ranking(built, q, k) == _ranking(loaded, q, k), (q, k)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(query=st.one_of(st.text(max_size=80),
                       st.lists(st.sampled_from(["sso", "saml", "invoice", "refund", "api", "key", "the", "how",
                                                 "webhook", "Okta", "2FA", "ünïcode", "日本", "?", "--"]),
                                max_size=8).map(" ".join)),
       k=st.integers(min_value=1, max_value=100))
def test_built_and_reloaded_rank_identically_on_any_query(pairs, query, k):
    for built, loaded in pairs[0].values():
        assert _ranking(built, query, k) == _ranking(loaded, query, k)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(query=st.text(min_size=1, max_size=60), k=st.integers(min_value=1, max_value=60))
def test_bm25_query_path_matches_llama_index_bm25_retriever(demo, pairs, query, k):
    """Our bm25s query path returns exactly what llama-index's BM25Retriever returns for the same
    (stop-word filtered) query over the same index: same chunks, order and float scores."""
    from llama_index.core.schema import QueryBundle

    loaded = pairs[0]["bm25"][1]
    reference = _reference_bm25(demo)
    k = min(k, len(loaded.chunks))
    reference.similarity_top_k = k  # a private instance: nobody else reads it
    expected = [(int(r.node.node_id), r.score) for r in reference.retrieve(QueryBundle(loaded.query_text(query)))
                if r.score > 0]
    got = [(loaded.chunks.index(h.chunk), h.score) for h in loaded.retrieve(query, k).hits]
    assert got == expected


_REFERENCE: dict[str, object] = {}


def _reference_bm25(demo):
    """llama-index's own BM25Retriever over the demo chunks, as `build_bm25` builds it."""
    if "bm25" not in _REFERENCE:
        import Stemmer

        from workbench.retrieval.bm25 import TOKEN_PATTERN
        from workbench.retrieval.chunking import chunk_documents
        from workbench.retrieval.llama_build import bm25_index

        titles = {d.doc_id: d.title for d in demo.documents}
        _REFERENCE["bm25"] = bm25_index(chunk_documents(demo.documents), titles, Stemmer.Stemmer("english"),
                                        TOKEN_PATTERN)
    return _REFERENCE["bm25"]


def test_vector_ranking_matches_an_independent_brute_force_reference(pairs, demo):
    """The index (built through llama-index's VectorStoreIndex) holds each chunk's title-and-text
    embedding, and the query path ranks by cosine: both checked against plain numpy written here —
    every chunk embedded again, normalised, dotted with the query, sorted — not against the code's own
    `top_k`/`cosines` (an earlier version used the query path as its own oracle and passed with the
    ranking reversed)."""
    import numpy as np

    loaded = pairs[0]["vector"][1]
    titles = {d.doc_id: d.title for d in demo.documents}
    texts = [f"{titles[c.doc_id]}\n\n{c.text}" if titles.get(c.doc_id) else c.text for c in loaded.chunks]
    raw = np.asarray(loaded.embedding.embed_array(texts), dtype=np.float64)
    rows = raw / np.maximum(np.linalg.norm(raw, axis=1, keepdims=True), 1e-12)
    assert np.allclose(rows, loaded.matrix, atol=1e-5), "the stored index is each chunk's unit embedding"
    for q in _demo_queries(demo)[:40]:
        qv = np.asarray(loaded.embedding.embed_array([q], is_query=True)[0], dtype=np.float64)
        scores = rows @ (qv / max(np.linalg.norm(qv), 1e-12))
        expected = sorted(range(len(scores)), key=lambda i: -scores[i])[:7]
        hits = loaded.retrieve(q, 7).hits
        got = [loaded.chunks.index(h.chunk) for h in hits]
        assert [round(float(scores[i]), 4) for i in got] == [round(float(scores[i]), 4) for i in expected], q
        assert np.allclose([h.score for h in hits], [scores[i] for i in expected], atol=1e-4), q


def _run(code_or_args: list[str], home, *, timeout=180):
    env = {**os.environ, "WORKBENCH_HOME": str(home), "OMP_WAIT_POLICY": "PASSIVE"}
    return subprocess.run([sys.executable, *code_or_args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture(scope="module")
def warm_home(tmp_path_factory):
    """A WORKBENCH_HOME whose demo indexes (bm25, vector, hybrid) are built, and whether building
    them imported llama-index (it must: it is the library that builds them)."""
    home = tmp_path_factory.mktemp("warm-home")
    code = ("import sys\n"
            "from workbench.corpus import load_corpus; from workbench.config import DEMO_CORPUS\n"
            "from workbench.retrieval import get_retriever\n"
            "c = load_corpus(DEMO_CORPUS)\n"
            "for n in ('bm25', 'vector', 'hybrid'): get_retriever(n, c)\n"
            "print('llama_index.core' in sys.modules)\n")
    out = _run(["-c", code], home)
    assert out.returncode == 0, out.stderr[-2000:]
    return home, out.stdout.strip()


def _imported(stderr: str) -> set[str]:
    """Top-level modules in a `python -X importtime` report."""
    return {line.split("|")[-1].strip().split(".")[0] for line in stderr.splitlines() if line.startswith("import time:")}


def test_cached_ask_never_imports_llama_index(warm_home):
    out = _run(["-X", "importtime", "-m", "workbench", "ask", "How do I configure SSO?", "--no-trace"], warm_home[0])
    assert out.returncode == 0, out.stderr[-2000:]
    assert "sso" in out.stdout.lower()
    mods = _imported(out.stderr)
    assert "bm25s" in mods  # the report is real: the index was read with bm25s
    assert "llama_index" not in mods


@pytest.mark.parametrize("retriever", ["vector", "hybrid"])
def test_cached_retrieve_never_imports_llama_index(warm_home, tmp_path, retriever):
    queries = tmp_path / "q.jsonl"
    queries.write_text('{"id": 1, "question": "rotate an API key"}\n{"id": 2, "question": "refund"}\n')
    out = _run(["-X", "importtime", "-m", "workbench", "retrieve", "--queries", str(queries), "--retriever",
                retriever, "--json"], warm_home[0])
    assert out.returncode == 0, out.stderr[-2000:]
    assert len(out.stdout.splitlines()) == 2
    mods = _imported(out.stderr)
    assert "numpy" in mods and "llama_index" not in mods and "wordllama" not in mods


def test_uncached_build_does_use_llama_index(warm_home):
    """The converse, so the tests above cannot pass by accident: building the indexes imports llama-index."""
    assert warm_home[1] == "True"


# --- k is passed per call: one retriever shared by many sessions --------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_concurrent_queries_with_different_k_do_not_interfere(pairs, demo, name):
    retriever = pairs[0][name][1]
    queries = _demo_queries(demo)[:12]
    ks = (1, 3, 7, 20)
    expected = {(q, k): _ranking(retriever, q, k) for q in queries for k in ks}
    barrier = threading.Barrier(len(ks))
    failures: list[tuple] = []

    def worker(k: int) -> None:
        barrier.wait()
        for _ in range(3):
            for q in queries:
                got = _ranking(retriever, q, k)
                if got != expected[(q, k)]:
                    failures.append((q, k, len(got)))

    threads = [threading.Thread(target=worker, args=(k,)) for k in ks]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures
    assert {len(expected[(queries[0], k)]) for k in ks} == set(ks)  # k really differed per thread


# --- corrupt and stale caches ------------------------------------------------------------------


def _index_dir(cache, prefix):
    (d,) = [p for p in cache.iterdir() if p.name.startswith(prefix)]
    return d


@pytest.mark.parametrize("name, prefix, damage", [
    ("bm25", "bm25-", lambda d: (d / "data.csc.index.npy").write_bytes(b"garbage")),
    ("bm25", "bm25-", lambda d: (d / "vocab.index.json").write_text('{"sso": 0}')),
    ("bm25", "bm25-", lambda d: (d / "indices.csc.index.npy").unlink()),
    ("bm25", "bm25-", lambda d: (d / "chunks.json").write_text("[]")),
    ("bm25", "bm25-", lambda d: (d / "meta.json").write_text("{not json")),
    ("vector", "vector-", lambda d: (d / "embeddings.npy").write_bytes(b"garbage")),
    ("vector", "vector-", lambda d: np.save(d / "embeddings.npy", np.zeros((3, 256), dtype=np.float32))),
    ("vector", "vector-", lambda d: (d / "chunks.json").write_text('[{"doc_id": 1}]')),
])
def test_corrupt_cache_is_rebuilt_never_fatal(demo, tmp_path, name, prefix, damage):
    q = "How do I set up SAML single sign-on?"
    expected = _ranking(get_retriever(name, demo, cache_dir=tmp_path), q, 5)
    damage(_index_dir(tmp_path, prefix))
    assert _ranking(get_retriever(name, demo, cache_dir=tmp_path), q, 5) == expected
    # the folder was rewritten whole: the next load reads it back
    assert _ranking(get_retriever(name, demo, cache_dir=tmp_path), q, 5) == expected


@pytest.mark.parametrize("name", ["bm25", "vector", "hybrid"])
def test_a_cache_that_cannot_be_written_costs_the_cache_not_the_answer(demo, tmp_path, name):
    """The cache folder's parent is a file, so nothing can be created under it: the chunk cache and the
    index folder are skipped (before, the chunk cache raised and the retriever was never built)."""
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("x")
    q = "How do I set up SAML single sign-on?"
    assert _ranking(get_retriever(name, demo, cache_dir=blocker / "indexes"), q, 5) == \
        _ranking(get_retriever(name, demo, cache_dir=tmp_path / "ok"), q, 5)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["not-a-folder", "ok"]  # nothing half-written


def test_old_cache_versions_are_not_read(demo, tmp_path):
    from workbench.retrieval import bm25, vector

    get_retriever("bm25", demo, cache_dir=tmp_path)
    assert _index_dir(tmp_path, "bm25-").name == bm25.cache_key(demo)
    assert bm25.CONFIG_VERSION >= 3 and vector.CONFIG_VERSION >= 2  # bumped with the new on-disk format
    assert bm25.cache_key(demo) != bm25.cache_key(demo, v=2)


# --- fusion ------------------------------------------------------------------------------------


def test_minmax_and_fuse():
    assert minmax(np.array([2.0, 4.0, 3.0])).tolist() == [0.0, 1.0, 0.5]
    assert minmax(np.array([1.5, 1.5])).tolist() == [0.0, 0.0]  # flat: nothing stands out
    f = fuse(np.array([0.0, 10.0, 5.0]), np.array([0.2, 0.1, 0.3]), 0.25)
    assert np.allclose(f, [0.75 * 0 + 0.25 * 0.5, 0.75 * 1 + 0, 0.75 * 0.5 + 0.25 * 1])


def test_hybrid_weights_at_the_ends_reproduce_each_part(pairs, demo):
    bm25, vector = pairs[0]["bm25"][1], pairs[0]["vector"][1]
    only_bm25, only_vector = Hybrid(bm25, vector, vector_weight=0.0), Hybrid(bm25, vector, vector_weight=1.0)
    for q in _demo_queries(demo)[:30]:
        assert [h.chunk for h in only_bm25.retrieve(q, 5).hits] == [h.chunk for h in bm25.retrieve(q, 5).hits]
        assert [h.chunk for h in only_vector.retrieve(q, 5).hits][:4] == [h.chunk for h in vector.retrieve(q, 5).hits][:4]


def test_hybrid_never_returns_a_chunk_no_part_matched(pairs):
    hybrid = pairs[0]["hybrid"][1]
    hits = hybrid.retrieve("SSO", len(hybrid.chunks)).hits
    assert 0 < len(hits) < len(hybrid.chunks) and all(h.score > 0 for h in hits)
    assert [h.rank for h in hits] == list(range(1, len(hits) + 1))
    assert hybrid.retrieve("   ", 5).hits == ()


def test_hybrid_rejects_parts_over_different_chunks(pairs, demo, tmp_path):
    from workbench.corpus import Corpus
    from workbench.types import Document

    other = Corpus("x", "x", list(demo.documents)[:5] + [Document("z", "Zeppelins", "Mooring a zeppelin.")])
    with pytest.raises(ValueError, match="different chunks"):
        Hybrid(pairs[0]["bm25"][1], get_retriever("vector", other, cache_dir=tmp_path))
    with pytest.raises(ValueError, match="unknown fusion"):
        Hybrid(pairs[0]["bm25"][1], pairs[0]["vector"][1], fusion="max")


def test_wordllama_files_read_directly_give_wordllama_s_own_vectors():
    """The fast loader (tokenizers + safetensors) embeds exactly as `WordLlama.load` does."""
    from workbench.retrieval import embeddings

    direct = embeddings._read_wordllama_files(256)
    package = embeddings._load_wordllama_package(256)
    texts = ["How do I configure SSO?", "Rotate an API key for the webhook", "", "日本語のテキスト " * 40]
    assert np.array_equal(direct[1], package[1])
    assert [e.ids for e in direct[0].encode_batch(texts, add_special_tokens=False)] == \
        [e.ids for e in package[0].encode_batch(texts, add_special_tokens=False)]


def test_app_first_render_with_a_cached_index_never_imports_llama_index(warm_home):
    code = ("import sys\n"
            "from streamlit.testing.v1 import AppTest\n"
            "at = AppTest.from_file(sys.argv[1], default_timeout=120).run()\n"
            "assert not at.exception, at.exception\n"
            "print(sorted(m for m in ('bm25s', 'llama_index', 'llama_index.core') if m in sys.modules))\n")
    home = warm_home[0]
    env_db = str(home / "app.duckdb")
    out = subprocess.run([sys.executable, "-c", code, str(ROOT / "app.py")], cwd=ROOT, capture_output=True, text=True,
                         timeout=180, env={**os.environ, "WORKBENCH_HOME": str(home), "WORKBENCH_DB": env_db})
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "['bm25s']"


def test_hybrid_over_caches_that_disagree_on_chunks_rebuilds_them(demo, tmp_path):
    q = "How do I set up SAML single sign-on?"
    expected = _ranking(get_retriever("hybrid", demo, cache_dir=tmp_path), q, 5)
    chunks_file = _index_dir(tmp_path, "vector-") / "chunks.json"
    rows = json.loads(chunks_file.read_text())
    rows[0]["text"] += " (edited)"  # still a readable cache, but no longer the chunks bm25 indexed
    chunks_file.write_text(json.dumps(rows))
    assert _ranking(get_retriever("hybrid", demo, cache_dir=tmp_path), q, 5) == expected
    assert json.loads(chunks_file.read_text())[0]["text"] == rows[0]["text"].removesuffix(" (edited)")


def test_wordllama_falls_back_to_its_own_loader_when_the_files_are_not_as_expected(monkeypatch):
    from workbench.retrieval import embeddings

    def moved(dim):
        raise RuntimeError("files not where this wordllama version keeps them")

    monkeypatch.setattr(embeddings, "_read_wordllama_files", moved)
    monkeypatch.setattr(embeddings, "_WORDLLAMA", {})
    tokenizer, table = embeddings._load_wordllama(256)
    assert table.shape[1] == 256 and tokenizer.encode("SSO", add_special_tokens=False).ids
