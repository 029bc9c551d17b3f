"""Retriever registry: bm25, vector (wordllama), hybrid (RRF), Ollama/Gemini embeddings over loopback."""

from __future__ import annotations

import hashlib
import json
import math
import re
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from conftest import ROOT
from workbench.cli import main
from workbench.config import DEMO_CORPUS
from workbench.corpus import Corpus, load_corpus
from workbench.errors import EmbeddingError, UnknownNameError
from workbench.retrieval import get_retriever, retriever_names
from workbench.retrieval.base import rank_documents
from workbench.retrieval.hybrid import rrf
from workbench.types import Chunk, Document, Hit


def test_registry_lists_every_builtin():
    assert {"bm25", "vector", "hybrid", "vector-ollama", "vector-gemini"} <= set(retriever_names())
    with pytest.raises(UnknownNameError, match="unknown retriever 'dense'.*bm25.*hybrid"):
        get_retriever("dense", load_corpus(DEMO_CORPUS))


@pytest.mark.parametrize("name", ["bm25", "vector", "hybrid"])
def test_each_retriever_finds_the_sso_article(demo, name, tmp_path):
    r = get_retriever(name, demo, cache_dir=tmp_path)
    result = r.retrieve("How do I set up SAML single sign-on?", 5)
    assert [h.rank for h in result.hits] == [1, 2, 3, 4, 5]
    assert [h.score for h in result.hits] == sorted((h.score for h in result.hits), reverse=True)
    docs = [h.chunk.doc_id for h in result.hits]
    assert docs[0].startswith("sso-") or docs[0] == "overview-sso-and-provisioning", docs
    assert "sso-saml-setup" in docs
    ranked = rank_documents(r, "How do I set up SAML single sign-on?", 10)
    assert len(ranked) == 10 and len({d for d, _ in ranked}) == 10  # one entry per document


def test_vector_index_is_cached_and_a_changed_corpus_rebuilds(demo, tmp_path):
    first = get_retriever("vector", demo, cache_dir=tmp_path)
    dirs = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("vector-"))
    assert len(dirs) == 1 and (tmp_path / dirs[0] / "embeddings.npy").exists()
    again = get_retriever("vector", demo, cache_dir=tmp_path)
    q = "rotate an API key"
    assert [h.chunk for h in again.retrieve(q, 5).hits] == [h.chunk for h in first.retrieve(q, 5).hits]
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("vector-")) == dirs

    changed = Corpus("demo", "x", list(demo.documents) + [Document("new-doc", "Zeppelin mooring", "How to moor a zeppelin.")])
    r = get_retriever("vector", changed, cache_dir=tmp_path)
    assert len([p for p in tmp_path.iterdir() if p.name.startswith("vector-")]) == 2
    assert r.retrieve("moor a zeppelin", 1).hits[0].chunk.doc_id == "new-doc"


def test_corrupt_vector_cache_is_rebuilt(demo, tmp_path):
    get_retriever("vector", demo, cache_dir=tmp_path)
    (cache,) = [p for p in tmp_path.iterdir() if p.name.startswith("vector-")]
    (cache / "embeddings.npy").write_bytes(b"garbage")
    r = get_retriever("vector", demo, cache_dir=tmp_path)
    assert r.retrieve("refund", 3).hits


def _hit(doc, idx, rank):
    return Hit(Chunk(doc, idx, ""), 1.0 / rank, rank)


def test_rrf_rewards_agreement_and_keeps_first_ranking_on_ties():
    a = [_hit("x", 0, 1), _hit("y", 0, 2), _hit("z", 0, 3)]
    b = [_hit("y", 0, 1), _hit("w", 0, 2), _hit("x", 0, 3)]
    fused = rrf([a, b])
    assert [h.chunk.doc_id for h, _ in fused][:2] == ["y", "x"]  # both lists beat either alone
    assert math.isclose(fused[0][1], 1 / 62 + 1 / 61)
    assert [h.chunk.doc_id for h, _ in rrf([[_hit("p", 0, 1)], [_hit("q", 0, 1)]])] == ["p", "q"]


def test_retrieve_command_prints_one_line_per_query(tmp_path, capsys):
    queries = tmp_path / "q.jsonl"
    queries.write_text('{"id": "a", "question": "cancel my subscription"}\n\n{"id": 7, "question": "webhook retries"}\n')
    assert main(["retrieve", "--queries", str(queries), "--retriever", "hybrid", "--k", "4", "--json"]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [x["id"] for x in lines] == ["a", 7]
    for x in lines:
        assert len(x["doc_ids"]) == 4 == len(set(x["doc_ids"])) == len(x["scores"])
        assert x["scores"] == sorted(x["scores"], reverse=True)
    assert lines[0]["doc_ids"][0] == "billing-cancel-subscription"


def test_retrieve_command_errors_name_the_line(tmp_path, capsys):
    queries = tmp_path / "q.jsonl"
    queries.write_text('{"id": "a", "question": "x"}\n{"question": "no id"}\n')
    assert main(["retrieve", "--queries", str(queries)]) == 2
    assert f"{queries}:2: each line needs an \"id\"" in capsys.readouterr().err


def test_default_bm25_path_does_not_import_the_embedding_stack():
    code = ("import sys; from workbench.session import Session; "
            "Session.open().ask('How do I configure SSO?'); "
            "print(sorted(m for m in ('wordllama', 'workbench.retrieval.vector', 'ollama', 'google.genai') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# --- Ollama and Gemini embeddings over a loopback server speaking their wire formats ------------


def fake_embedding(text: str, dim: int = 64) -> list[float]:
    """Hashed bag of words: texts sharing words get similar vectors, like a (very) small model."""
    v = [0.0] * dim
    for w in re.findall(r"[a-z]+", text.lower()):
        if len(w) > 3:
            v[int(hashlib.md5(w.encode()).hexdigest(), 16) % dim] += 1.0
    return v


class EmbedServer:
    def __init__(self):
        self.requests: list[tuple[str, dict, dict]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append((self.path, dict(self.headers), body))
                if self.path == "/api/embed":  # Ollama
                    reply = {"model": body["model"], "embeddings": [fake_embedding(t) for t in body["input"]]}
                elif self.path.endswith(":batchEmbedContents"):  # Gemini Developer API
                    reply = {"embeddings": [{"values": fake_embedding(r["content"]["parts"][0]["text"])}
                                            for r in body["requests"]]}
                else:
                    self.send_response(404)
                    self.end_headers()
                    return
                data = json.dumps(reply).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()


@pytest.fixture
def embed_server():
    s = EmbedServer()
    yield s
    s.httpd.shutdown()


def test_vector_ollama_speaks_api_embed(demo, embed_server, monkeypatch, tmp_path):
    monkeypatch.setenv("OLLAMA_HOST", embed_server.url)
    monkeypatch.delenv("OLLAMA_EMBED_MODEL", raising=False)
    r = get_retriever("vector-ollama", demo, cache_dir=tmp_path)
    assert r.name == "vector-ollama"
    path, _, body = embed_server.requests[0]
    assert path == "/api/embed" and body["model"] == "nomic-embed-text"
    assert body["input"][0].startswith("search_document: ")
    hits = r.retrieve("refunds for annual billing plans", 3).hits
    assert embed_server.requests[-1][2]["input"] == ["search_query: refunds for annual billing plans"]
    assert hits and "billing" in hits[0].chunk.doc_id
    n = len(embed_server.requests)
    get_retriever("vector-ollama", demo, cache_dir=tmp_path)  # cached: no document is embedded again
    assert len(embed_server.requests) == n


@pytest.mark.parametrize("key_var", ["GEMINI_API_KEY", "GOOGLE_API_KEY"])  # as the Gemini provider reads them
def test_vector_gemini_speaks_batch_embed_contents(demo, embed_server, monkeypatch, tmp_path, key_var):
    for var in ("GEMINI_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv(key_var, "test-key-123")
    monkeypatch.setenv("GEMINI_BASE_URL", embed_server.url)
    monkeypatch.setenv("GEMINI_EMBED_MODEL", "text-embedding-004")
    r = get_retriever("vector-gemini", demo, cache_dir=tmp_path)
    path, headers, body = embed_server.requests[0]
    assert path.endswith("/models/text-embedding-004:batchEmbedContents")
    assert headers.get("x-goog-api-key") == "test-key-123"
    assert body["requests"][0]["taskType"] == "RETRIEVAL_DOCUMENT"
    hits = r.retrieve("refunds for annual billing plans", 3).hits
    assert embed_server.requests[-1][2]["requests"][0]["taskType"] == "RETRIEVAL_QUERY"
    assert hits and "billing" in hits[0].chunk.doc_id


@pytest.mark.parametrize("name, env", [("vector-ollama", "OLLAMA_HOST"), ("vector-gemini", "GEMINI_API_KEY")])
def test_unconfigured_embeddings_name_the_variable(demo, monkeypatch, tmp_path, name, env, capsys):
    for var in (env, "GOOGLE_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(EmbeddingError, match=f"not configured: set {env}"):
        get_retriever(name, demo, cache_dir=tmp_path)
    queries = tmp_path / "q.jsonl"
    queries.write_text('{"id": 1, "question": "x"}\n')
    assert main(["retrieve", "--queries", str(queries), "--retriever", name]) == 2
    assert f"set {env}" in capsys.readouterr().err


def test_embedding_server_failure_is_a_clear_error(demo, monkeypatch, tmp_path):
    monkeypatch.setenv("OLLAMA_HOST", "http://127.0.0.1:9")  # discard port: nothing listens
    with pytest.raises(EmbeddingError, match="Ollama embedding .* failed.*OLLAMA_HOST"):
        get_retriever("vector-ollama", demo, cache_dir=tmp_path)


# --- network embeddings fail and retry like a provider (retries.with_retries, redact.scrub_secrets) ------------


def test_an_overloaded_embedding_server_is_retried_like_a_provider():
    """Two 503s, then vectors: the texts are embedded, after three requests (a provider's 429/5xx retries)."""
    from loopback import Reply, ScriptedServer, ollama_error
    from workbench.retrieval.embeddings import embedding_for

    vectors = Reply(body={"model": "nomic-embed-text", "embeddings": [fake_embedding("single sign-on setup")]})
    with ScriptedServer([ollama_error(503, "server busy"), ollama_error(503, "server busy"), vectors]) as srv:
        rows = embedding_for("ollama", host=srv.url, backoff=0.01).embed_array(["single sign-on setup"])
    assert rows.shape == (1, 64)
    assert [r.path for r in srv.requests if r.method == "POST"] == ["/api/embed"] * 3


def test_a_failing_embedding_servers_message_is_scrubbed_and_names_its_attempts():
    """The server echoes the API key in its error: the message keeps the status and the attempts, not the key."""
    from loopback import ScriptedServer, gemini_error
    from workbench.redact import REDACTED
    from workbench.retrieval.embeddings import embedding_for

    key = "test-key-SECRET-4242"
    with ScriptedServer([gemini_error(500, f"internal error serving key {key}")], repeat_last=True) as srv:
        model = embedding_for("gemini", api_key=key, base_url=srv.url, retries=2, backoff=0.01)
        with pytest.raises(EmbeddingError) as info:
            model.embed_array(["single sign-on setup"])
    message = str(info.value)
    assert key not in message and REDACTED in message, message
    assert "Gemini embedding with 'gemini-embedding-001' failed (500) after 3 attempts" in message, message
    assert len([r for r in srv.requests if r.method == "POST"]) == 3
