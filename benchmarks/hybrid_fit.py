"""How the hybrid's fusion weight was chosen: a grid on SciFact train, 5-fold CV, one test report.

    .venv/bin/python benchmarks/hybrid_fit.py [--vector vector] [--folds 5]

Fits only on the 809 SciFact **train** claims (`claims_train.jsonl`, qrels `train.cited.tsv`);
the test qrels (`dev.cited.tsv`, = BEIR SciFact test) are read only to report the chosen
setting. For each query every chunk gets its BM25 score and its cosine to the query (the
retrievers' own `scores()`), normalised per query over all chunks by min-max or z-score and
fused as (1 - w) * bm25 + w * vector (`workbench.retrieval.hybrid.fuse` for min-max); documents
are ranked by their best chunk, as `workbench retrieve` ranks them; metric nDCG@10. Printed:
the train curve for w = 0, 0.05, …, 1; the weight each CV fold picks on its training part and
the held-out gain over BM25; the train-optimal setting's test nDCG@10 and that of its
neighbours; the Arduino questions' top-1 (benchmarks/arduino_questions.jsonl) for BM25 and the
chosen setting. `--vector vector-minilm` fits the same for the optional MiniLM embedding.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from workbench.config import benchmark_data_dir  # noqa: E402
from retrieval_scifact import load_qrels, ndcg_at  # noqa: E402  (benchmarks/: the qrels and BEIR's nDCG)

SHARED = benchmark_data_dir()
SCIFACT = SHARED / "scifact"
ARDUINO = SHARED / "arduino-help-center" / "corpus.jsonl"
WEIGHTS = np.round(np.arange(0, 1.0001, 0.05), 2)


def zscore(s: np.ndarray) -> np.ndarray:
    return ((s - s.mean()) / max(float(s.std()), 1e-9)).astype(np.float32)


class Split:
    """Per-query score arrays of both parts for the claims of one split that have qrels."""

    def __init__(self, name: str, bm25, vector):
        qrels = load_qrels(SCIFACT / "qrels" / f"{name}.cited.tsv")
        claims = [json.loads(x) for x in (SCIFACT / f"claims_{name}.jsonl").read_text().splitlines() if x.strip()]
        claims = [c for c in claims if str(c["id"]) in qrels]
        self.relevant = [qrels[str(c["id"])] for c in claims]
        self.bm25 = [bm25.scores(c["claim"]) for c in claims]
        self.vector = [vector.scores(c["claim"]) for c in claims]


def ndcg10(fused: list[np.ndarray], relevant: list[set[str]], starts: np.ndarray, docs: np.ndarray) -> np.ndarray:
    """Per-query binary nDCG@10 of documents ranked by their best chunk (BEIR's definition)."""
    out = np.zeros(len(fused))
    for i, (scores, rel) in enumerate(zip(fused, relevant)):
        best = np.maximum.reduceat(scores, starts)
        out[i] = ndcg_at(list(docs[np.argsort(-best, kind="stable")[:10]]), rel)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vector", default="vector", help="the vector retriever to fuse with bm25 (default: vector)")
    ap.add_argument("--folds", type=int, default=5)
    args = ap.parse_args()
    if not (SCIFACT / "corpus.workbench.jsonl").exists():
        print(f"skipped: SciFact data not found at {SCIFACT} (benchmark data lives in ../shared/data)")
        return 0
    os.environ.setdefault("WORKBENCH_HOME", tempfile.mkdtemp(prefix="wb-fit-"))
    from workbench.corpus import load_corpus
    from workbench.retrieval import get_retriever
    from workbench.retrieval.base import rank_documents
    from workbench.retrieval.hybrid import VECTOR_WEIGHT, Hybrid, fuse

    corpus = load_corpus(SCIFACT / "corpus.workbench.jsonl")
    bm25, vector = get_retriever("bm25", corpus), get_retriever(args.vector, corpus)
    chunk_docs = np.array([c.doc_id for c in bm25.chunks])
    starts = np.r_[0, np.flatnonzero(chunk_docs[1:] != chunk_docs[:-1]) + 1]
    docs = chunk_docs[starts]
    assert len(set(docs)) == len(docs), "chunks of a document must be contiguous"
    train, test = Split("train", bm25, vector), Split("dev", bm25, vector)
    norms = {"minmax": lambda b, v, w: fuse(b, v, w), "zscore": lambda b, v, w: (1 - w) * zscore(b) + w * zscore(v)}

    def curve(split: Split, norm: str) -> dict[float, np.ndarray]:
        return {w: ndcg10([norms[norm](b, v, w) for b, v in zip(split.bm25, split.vector)], split.relevant, starts, docs)
                for w in WEIGHTS}

    print(f"SciFact: {len(corpus)} documents, {len(bm25.chunks)} chunks; train {len(train.relevant)} claims, "
          f"test {len(test.relevant)} claims; fused with {args.vector}")
    rng = np.random.default_rng(0)
    folds = np.array_split(rng.permutation(len(train.relevant)), args.folds)
    best: dict[str, tuple[float, float]] = {}
    for norm in norms:
        c = curve(train, norm)
        print(f"\n{norm}: train nDCG@10 by vector weight w")
        print("  " + "  ".join(f"{w:.2f}:{c[w].mean():.4f}" for w in WEIGHTS))
        w_best = max(WEIGHTS, key=lambda w: c[w].mean())
        picks, gains, held = [], [], []
        for f in folds:
            rest = np.ones(len(train.relevant), bool)
            rest[f] = False
            w = max(WEIGHTS, key=lambda w: c[w][rest].mean())
            picks.append(float(w))
            gains.append(c[w][f].mean() - c[0.0][f].mean())
            held.append(c[w][f].mean())
        print(f"  train optimum w = {w_best:.2f}: {c[w_best].mean():.4f} (bm25 alone {c[0.0].mean():.4f}, "
              f"vector alone {c[1.0].mean():.4f})")
        print(f"  {args.folds}-fold CV on train: weights picked {picks}; held-out nDCG@10 {np.mean(held):.4f}, "
              f"gain over bm25 {np.mean(gains):+.4f} ± {np.std(gains):.4f}")
        best[norm] = (float(w_best), float(np.mean(held)))

    norm = "minmax"  # shipped (see workbench/retrieval/hybrid.py for why not zscore)
    w = best[norm][0]
    print(f"\nchosen: {norm}, w = {w:.2f} (shipped VECTOR_WEIGHT = {VECTOR_WEIGHT})")
    t = curve(test, norm)
    print(f"test nDCG@10 (dev.cited.tsv): bm25 {t[0.0].mean():.4f}, vector {t[1.0].mean():.4f}, "
          f"fused w={w:.2f} {t[w].mean():.4f}; neighbours " +
          ", ".join(f"{x:.2f}:{t[x].mean():.4f}" for x in WEIGHTS if abs(x - w) <= 0.151 and x != w))
    if ARDUINO.exists():
        arduino = load_corpus(ARDUINO)
        qs = [json.loads(x) for x in (ROOT / "benchmarks" / "arduino_questions.jsonl").read_text().splitlines() if x.strip()]
        ab, av = get_retriever("bm25", arduino), get_retriever(args.vector, arduino)

        def top1(r) -> int:
            return sum(rank_documents(r, q["question"], 1)[0][0] in q["expected"] for q in qs)

        print(f"Arduino questions, top-1 of {len(qs)}: bm25 {top1(ab)}, {args.vector} {top1(av)}, "
              f"fused w={w:.2f} {top1(Hybrid(ab, av, vector_weight=w))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
