"""Retrieval speed and memory: BM25 over 100k chunks, vector build rate, cached loads, RSS.

    .venv/bin/python benchmarks/retrieval_speed.py

1. BM25 query p50 over 100,000 chunks, synthesised from the real SciFact and Arduino chunks (each
   copy drops a different fifth of the words, so no two chunks are identical); 300 queries (SciFact
   claims and Arduino questions), k = 10.
2. Vector index build rate with the default embedding (wordllama): chunks/s for embedding and
   indexing already-split chunks (splitting is measured separately: it is shared by all retrievers
   and cached).
3. Loading the cached Arduino indexes: each retriever in a fresh process, with and without the
   imports it needs (the one-time cost of `import numpy, bm25s` in a new process; a cached index
   never imports llama-index).
4. Peak RSS of one fresh process holding bm25, vector and hybrid over Arduino, after a query each.

Medians of repeated runs are printed; indexes are cached under a temporary WORKBENCH_HOME.
"""

from __future__ import annotations

import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from workbench.config import benchmark_data_dir  # noqa: E402

SHARED = benchmark_data_dir()
ARDUINO = SHARED / "arduino-help-center" / "corpus.jsonl"
SCIFACT = SHARED / "scifact"


def _queries() -> list[str]:
    claims = [json.loads(x)["claim"] for x in (SCIFACT / "claims_dev.jsonl").read_text().splitlines() if x.strip()]
    arduino = [json.loads(x)["question"] for x in (ROOT / "benchmarks" / "arduino_questions.jsonl").read_text().splitlines()
               if x.strip()]
    return (arduino + claims)[:300]


def bm25_100k() -> None:
    from workbench.corpus import load_corpus
    from workbench.retrieval.bm25 import bm25_from_chunks
    from workbench.retrieval.chunking import cached_chunks
    from workbench.types import Chunk

    from workbench.config import index_cache_dir

    base, titles = [], {}
    for path in (SCIFACT / "corpus.workbench.jsonl", ARDUINO):
        corpus = load_corpus(path)
        base += cached_chunks(corpus, index_cache_dir())
        titles.update({d.doc_id: d.title for d in corpus.documents})
    rng = random.Random(0)
    chunks, copy = [], 0
    while len(chunks) < 100_000:
        for c in base:
            if len(chunks) == 100_000:
                break
            words = c.text.split()
            if copy:  # a different fifth of the words dropped in each copy
                words = [w for i, w in enumerate(words) if (i + copy) % 5]
            chunks.append(Chunk(f"{c.doc_id}~{copy}", c.chunk_index, " ".join(words)))
        copy += 1
    titles = {c.doc_id: titles[c.doc_id.split("~")[0]] for c in chunks}
    t = time.perf_counter()
    bm25 = bm25_from_chunks(chunks, titles)
    build = time.perf_counter() - t
    queries = _queries()
    rng.shuffle(queries)
    for q in queries[:10]:  # warm-up
        bm25.retrieve(q, 10)
    lat = [bm25.retrieve(q, 10).latency_ms for q in queries]
    print(f"bm25 over {len(chunks):,} chunks (from {len(base):,} real ones): build {build:.1f} s; "
          f"query p50 {statistics.median(lat):.2f} ms, p90 {sorted(lat)[int(0.9 * len(lat))]:.2f} ms "
          f"({len(lat)} queries, k=10)", flush=True)


def vector_build() -> None:
    from workbench.corpus import load_corpus
    from workbench.retrieval.chunking import cached_chunks
    from workbench.retrieval.embeddings import WordLlamaEmbedding
    from workbench.config import index_cache_dir
    from workbench.retrieval.vector import build_vector

    WordLlamaEmbedding()  # model load is a one-time cost, reported by the load benchmark
    for name, path in (("arduino", ARDUINO), ("scifact", SCIFACT / "corpus.workbench.jsonl")):
        corpus = load_corpus(path)
        t = time.perf_counter()
        chunks = cached_chunks(corpus, None)
        split = time.perf_counter() - t
        cached_chunks(corpus, index_cache_dir())  # the split is cached and shared, as in real use
        rates = []
        for _ in range(3):
            with tempfile.TemporaryDirectory() as cache:
                cached_chunks(corpus, cache)  # pre-split: measure embedding + indexing only
                t = time.perf_counter()
                build_vector(corpus, cache_dir=Path(cache))
                rates.append(len(chunks) / (time.perf_counter() - t))
        print(f"vector build ({name}, {len(chunks):,} chunks): median {statistics.median(rates):,.0f} chunks/s "
              f"(runs: {', '.join(f'{r:,.0f}' for r in rates)}); splitting alone {len(chunks) / split:,.0f} chunks/s",
              flush=True)


_LOAD = """
import json, sys, time
t0 = time.perf_counter()
import numpy, bm25s  # one-time imports of a new process (a cached index needs no llama-index)
from workbench.corpus import load_corpus
from workbench.retrieval import get_retriever
t1 = time.perf_counter()
corpus = load_corpus(sys.argv[1]); t2 = time.perf_counter()
r = get_retriever(sys.argv[2], corpus); t3 = time.perf_counter()
r.retrieve("How do I reset my Arduino account password?", 5)
print(json.dumps({"imports": t1 - t0, "corpus": t2 - t1, "retriever": t3 - t2}))
"""

_RSS = """
import sys
from workbench.corpus import load_corpus
from workbench.retrieval import get_retriever
corpus = load_corpus(sys.argv[1])
for name in ("bm25", "vector", "hybrid"):
    get_retriever(name, corpus).retrieve("How do I reset my Arduino account password?", 10)
# VmHWM is this process's own peak; ru_maxrss would inherit the parent's RSS across fork + exec
status = open("/proc/self/status").read()
print(int(status.split("VmHWM:")[1].split()[0]) / 1024)
"""


def _run(code: str, *args: str) -> str:
    return subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, capture_output=True, text=True,
                          check=True, env=os.environ).stdout.strip().splitlines()[-1]


def cached_loads() -> None:
    for name in ("bm25", "vector", "hybrid"):
        _run(_LOAD, str(ARDUINO), name)  # build the cache
        runs = [json.loads(_run(_LOAD, str(ARDUINO), name)) for _ in range(5)]
        med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        each = ", ".join(f"{r['retriever']:.2f}" for r in runs)
        print(f"cached load, arduino, {name:<6}: get_retriever median {med['retriever']:.2f} s "
              f"(runs: {each}); in a fresh process that first "
              f"spends {med['imports']:.2f} s importing numpy/bm25s and {med['corpus']:.2f} s loading the corpus",
              flush=True)


def peak_rss() -> None:
    rss = [float(_run(_RSS, str(ARDUINO))) for _ in range(3)]
    print(f"peak RSS, one process with bm25 + vector + hybrid over arduino: median {statistics.median(rss):.0f} MB "
          f"(runs: {', '.join(f'{r:.0f}' for r in rss)})", flush=True)


def main() -> int:
    if not (ARDUINO.exists() and (SCIFACT / "corpus.workbench.jsonl").exists()):
        print(f"skipped: benchmark data not found under {SHARED} (set WORKBENCH_BENCHMARK_DATA, default ../shared/data)")
        return 0
    os.environ.setdefault("WORKBENCH_HOME", tempfile.mkdtemp(prefix="wb-bench-"))
    bm25_100k()
    vector_build()
    cached_loads()
    peak_rss()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
