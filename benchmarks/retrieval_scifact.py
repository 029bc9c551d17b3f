"""SciFact retrieval quality: nDCG@10 and recall@10 for each retriever (BEIR SciFact test qrels).

Queries: the 300 claims of ../shared/data/scifact/claims_dev.jsonl; qrels: qrels/dev.cited.tsv (equal
to BEIR SciFact "test"); corpus: corpus.workbench.jsonl (5,183 abstracts). Documents are ranked by
their best chunk (`rank_documents`), exactly what `python -m workbench retrieve` prints. nDCG@10 on
the 809 train claims (qrels/train.cited.tsv, which the hybrid's weight was fitted on) is printed
beside it. `hybrid-rrf` is the hybrid before issue 15 (reciprocal-rank fusion, k = 60, top 50 of
each), built from the same two indexes.

    .venv/bin/python benchmarks/retrieval_scifact.py [--retrievers bm25,vector,hybrid,hybrid-rrf]

When the optional MiniLM embedding is installed (requirements-minilm.txt), the default list also
has vector-minilm and hybrid-minilm; its first index build embeds 5,502 chunks on the CPU (minutes).

Indexes are cached under $WORKBENCH_HOME (a temporary one unless you set it).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from workbench.config import benchmark_data_dir  # noqa: E402

SCIFACT = benchmark_data_dir() / "scifact"


def load_qrels(path: Path) -> dict[str, set[str]]:
    qrels: dict[str, set[str]] = {}
    for line in path.read_text(encoding="utf-8").splitlines()[1:]:
        if line.strip():
            qid, doc_id, score = line.split("\t")[:3]
            if int(score) > 0:
                qrels.setdefault(qid, set()).add(doc_id)
    return qrels


def ndcg_at(ranked: list[str], relevant: set[str], k: int = 10) -> float:
    """Binary-relevance nDCG@k, as BEIR computes it with pytrec_eval."""
    dcg = sum(1.0 / math.log2(i + 2) for i, d in enumerate(ranked[:k]) if d in relevant)
    ideal = sum(1.0 / math.log2(i + 2) for i in range(min(k, len(relevant))))
    return dcg / ideal if ideal else 0.0


def recall_at(ranked: list[str], relevant: set[str], k: int = 10) -> float:
    return len(set(ranked[:k]) & relevant) / len(relevant) if relevant else 0.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--retrievers", default=None,
                    help="comma-separated names (default: bm25,vector,hybrid,hybrid-rrf, plus "
                         "vector-minilm,hybrid-minilm when installed)")
    args = ap.parse_args()
    if args.retrievers is None:
        from workbench.retrieval.embeddings import minilm_available

        args.retrievers = "bm25,vector,hybrid,hybrid-rrf" + (",vector-minilm,hybrid-minilm" if minilm_available() else "")
    if not (SCIFACT / "corpus.workbench.jsonl").exists():
        print(f"skipped: SciFact data not found at {SCIFACT} (set WORKBENCH_BENCHMARK_DATA, default ../shared/data)")
        return 0
    os.environ.setdefault("WORKBENCH_HOME", tempfile.mkdtemp(prefix="wb-bench-"))

    from workbench.corpus import load_corpus
    from workbench.retrieval import get_retriever
    from workbench.retrieval.base import rank_documents

    from workbench.retrieval.hybrid import Hybrid

    def queries_of(split: str) -> tuple[list[tuple[str, str]], dict[str, set[str]]]:
        qrels = load_qrels(SCIFACT / "qrels" / f"{split}.cited.tsv")
        claims = [json.loads(x) for x in (SCIFACT / f"claims_{split}.jsonl").read_text().splitlines() if x.strip()]
        return [(str(c["id"]), c["claim"]) for c in claims if str(c["id"]) in qrels], qrels

    (queries, qrels), (train, train_qrels) = queries_of("dev"), queries_of("train")
    corpus = load_corpus(SCIFACT / "corpus.workbench.jsonl")
    print(f"SciFact: {len(corpus)} documents, {len(queries)} claims with qrels, "
          f"{sum(len(v) for v in qrels.values())} relevant pairs")
    print(f"{'retriever':<14} {'nDCG@10':>8} {'recall@10':>10} {'build/load s':>13} {'query p50 ms':>13} "
          f"{'train nDCG@10':>14}")
    for name in args.retrievers.split(","):
        t0 = time.perf_counter()
        if name == "hybrid-rrf":  # the pre-issue-15 hybrid, over the same cached indexes
            retriever = Hybrid(get_retriever("bm25", corpus), get_retriever("vector", corpus), fusion="rrf")
        else:
            retriever = get_retriever(name, corpus)
        build = time.perf_counter() - t0
        ndcgs, recalls, latencies = [], [], []
        for qid, text in queries:
            t = time.perf_counter()
            ranked = [d for d, _ in rank_documents(retriever, text, 10)]
            latencies.append((time.perf_counter() - t) * 1000)
            ndcgs.append(ndcg_at(ranked, qrels[qid]))
            recalls.append(recall_at(ranked, qrels[qid]))
        train_ndcg = [ndcg_at([d for d, _ in rank_documents(retriever, text, 10)], train_qrels[qid])
                      for qid, text in train]
        latencies.sort()
        print(f"{name:<14} {sum(ndcgs) / len(ndcgs):>8.4f} {sum(recalls) / len(recalls):>10.4f} "
              f"{build:>13.2f} {latencies[len(latencies) // 2]:>13.2f} {sum(train_ndcg) / len(train_ndcg):>14.4f}",
              flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
