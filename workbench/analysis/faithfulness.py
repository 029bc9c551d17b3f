"""Faithfulness in the notebooks: a judged run, and the judges compared on ExpertQA expert labels."""

from __future__ import annotations

import json
import random
import re
import time
from pathlib import Path
from typing import Any, Iterable, Sequence

import pandas as pd

from ..config import DEFAULT_JUDGE, DEFAULT_K, DEFAULT_MODE, DEFAULT_PROVIDER, DEFAULT_RETRIEVER, benchmark_data_dir

def ask_and_judge(questions: Sequence[dict[str, Any] | str], *, corpus: Any = None, db: str | Path,
                  judge: str = DEFAULT_JUDGE, retriever: str = DEFAULT_RETRIEVER, provider: str = DEFAULT_PROVIDER,
                  mode: str = DEFAULT_MODE, k: int = DEFAULT_K) -> tuple[str, pd.DataFrame, pd.DataFrame]:
    """Ask each question (traced), judge every claim against what it cites, store the claims with the turn.

    Returns (run_id, one row per claim, one row per turn with ALCE citation recall and precision).
    """
    from ..session import Session

    session = Session.open(corpus, retriever, trace_db=db)
    run_id = session.tracer.new_run(kind="eval")
    claims, turns = [], []
    for q in questions:
        answer = session.ask(q if isinstance(q, str) else q["question"], provider=provider, mode=mode, k=k,
                             run_id=run_id, judge=judge)  # the claims are stored with the turn
        result = answer.faithfulness
        if result is None:  # the turn failed: nothing to judge
            continue
        claims.extend({"question": answer.record.question, **c} for c in result.rows())
        turns.append({"turn_id": result.turn_id, "question": answer.record.question, "answer": result.answer_kind,
                      "claims": len(result.claims),
                      "citation_recall": result.citation_recall, "citation_precision": result.citation_precision,
                      "uncited_claims": len(result.uncited_claims), "wrong_excerpts": len(result.wrong_excerpts),
                      "generated_only": len(result.generated_only)})
    claim_df = pd.DataFrame(claims)
    if not claim_df.empty:
        claim_df["cited_doc_ids"] = claim_df["cited_doc_ids"].map(", ".join)
    return run_id, claim_df, pd.DataFrame(turns)


_MARKER = re.compile(r"\s*\[\d+\]")


_EXPERTQA_COLUMNS = ["claim_id", "claim", "evidence", "support", "complete", "system"]


def expertqa_path() -> Path:
    """Where the ExpertQA claims are looked for: `expertqa/claims.jsonl` in the optional benchmark data."""

    return benchmark_data_dir() / "expertqa" / "claims.jsonl"


def expertqa_status(path: str | Path, n: int | None = 200) -> str:
    """One line saying which ExpertQA sample is used, or that the comparison is skipped and why."""
    path = Path(path)
    if not path.exists():
        return (f"SKIP: ExpertQA claims not found at {path} — the judge comparison is skipped (empty tables). "
                "ExpertQA (MIT licence) is optional third-party data, not part of the repository: set EXPERTQA "
                "in the first cell to its claims.jsonl, or WORKBENCH_BENCHMARK_DATA to a folder holding "
                "expertqa/claims.jsonl.")
    return f"ExpertQA: a seeded sample of {n or 'all'} cited claims from {path}"


def load_expertqa(path: str | Path, n: int | None = 200, seed: int = 0) -> pd.DataFrame:
    """A seeded random sample of `n` ExpertQA claims that cite passage text (all of them when n is None).

    Columns: claim_id, claim (markers removed), evidence (the cited passages), support (expert label),
    complete (support == "Complete"), system. An absent file gives an empty table (see `expertqa_status`).
    """
    path = Path(path)
    if not path.exists():
        return pd.DataFrame(columns=_EXPERTQA_COLUMNS)
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        r = json.loads(line)
        cited = set(r.get("cited_markers") or [])
        evidence = [e["text"] for e in r.get("evidence") or [] if e.get("text") and e.get("marker") in cited]
        if cited and evidence:
            rows.append({"claim_id": r["claim_id"], "claim": _MARKER.sub("", r["claim"]).strip(),
                         "evidence": evidence, "support": r.get("support"),
                         "complete": r.get("support") == "Complete", "system": r.get("system")})
    if n is not None and n < len(rows):
        rows = random.Random(seed).sample(rows, n)
    return pd.DataFrame(rows, columns=_EXPERTQA_COLUMNS)


def judge_scores(claims: pd.DataFrame, judges: Iterable[str] = (DEFAULT_JUDGE,), **judge_options: Any) -> pd.DataFrame:
    """Every judge on every claim (long format): claim_id, support, complete, judge, score, verdict, seconds."""
    from ..faithfulness import get_judge

    items = list(zip(claims["claim"], claims["evidence"]))
    frames = []
    for name in judges:
        judge = get_judge(name, **judge_options.get(name, {}))
        t0 = time.perf_counter()
        results = judge.judge_many(items)
        seconds = time.perf_counter() - t0
        frames.append(pd.DataFrame({
            "claim_id": claims["claim_id"].to_numpy(), "support": claims["support"].to_numpy(),
            "complete": claims["complete"].to_numpy(), "judge": name,
            "score": [j.score for j in results], "verdict": [j.verdict for j in results], "seconds": seconds}))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(
        columns=["claim_id", "support", "complete", "judge", "score", "verdict", "seconds"])


def auroc(scores: Sequence[float], labels: Sequence[bool]) -> float | None:
    """Area under the ROC curve (Mann–Whitney, average ranks for ties); None when a class is missing."""
    s = pd.Series(list(scores), dtype=float).fillna(0.0)
    y = pd.Series(list(labels), dtype=bool)
    n1, n0 = int(y.sum()), int((~y).sum())
    if n1 == 0 or n0 == 0:
        return None
    ranks = s.rank(method="average")
    return float((ranks[y.to_numpy()].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))


def balanced_accuracy(predicted: Sequence[bool], labels: Sequence[bool]) -> float | None:
    """Mean of the true-positive and true-negative rates; None when a class is missing."""
    p = pd.Series(list(predicted), dtype=bool).to_numpy()
    y = pd.Series(list(labels), dtype=bool).to_numpy()
    if y.all() or not y.any():
        return None
    return float(((p & y).sum() / y.sum() + (~p & ~y).sum() / (~y).sum()) / 2)


def judge_summary(scores: pd.DataFrame) -> pd.DataFrame:
    """Per judge: AUROC and balanced accuracy (verdict `supported` vs label Complete), claims per second."""
    out = []
    for name, g in scores.groupby("judge", sort=False):
        a = auroc(g["score"], g["complete"])
        ba = balanced_accuracy(g["verdict"] == "supported", g["complete"])
        seconds = float(g["seconds"].iloc[0])
        out.append({"judge": name, "claims": len(g), "complete share": round(float(g["complete"].mean()), 3),
                    "AUROC (Complete vs rest)": None if a is None else round(a, 3),
                    "balanced accuracy": None if ba is None else round(ba, 3),
                    "unknown verdicts": int((g["verdict"] == "unknown").sum()),
                    "claims/s": round(len(g) / seconds) if seconds > 0 else None})
    return pd.DataFrame(out)


def calibration(scores: pd.DataFrame, bins: int = 10) -> pd.DataFrame:
    """Per judge and score bin: mean score and the share of claims the experts labelled Complete."""
    df = scores.assign(score=scores["score"].fillna(0.0).clip(0, 1))
    df["bin"] = (df["score"] * bins).astype(int).clip(upper=bins - 1)
    return (df.groupby(["judge", "bin"], sort=False)
            .agg(n=("score", "size"), mean_score=("score", "mean"), frac_complete=("complete", "mean"))
            .reset_index())
