"""Validate the faithfulness judges against ExpertQA's expert `support` labels (issue 8).

Data: expertqa/claims.jsonl in $WORKBENCH_BENCHMARK_DATA (by default ../shared/data), the 1,765 claims that carry [n] markers and the cited
passage text. For each judge: AUROC and balanced accuracy against the label, for
  A) Complete vs the rest (Incomplete, Partial, N/A, null), and
  B) Complete vs Missing/Incomplete (no Missing claim carries cited text, so B is vs Incomplete).
Balanced accuracy is reported at the judge's own verdict (supported vs not) and at the best
threshold (an oracle upper bound, labelled as such). Beside every judge, in the same run, the
issue's anchor baseline: the best 3-sentence window of the cited text by the fraction of the
claim's stemmed content words it contains. Writes a calibration plot (plotly) to benchmarks/.

Run: .venv/bin/python benchmarks/faithfulness_expertqa.py [--judges lexical,embedding,hybrid,llm]
     [--provider NAME --model NAME] [--repeats 3] [--limit N]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from workbench.config import benchmark_data_dir  # noqa: E402
from workbench.faithfulness import get_judge  # noqa: E402
from workbench.text import content_terms, sentences  # noqa: E402

DATA = benchmark_data_dir() / "expertqa" / "claims.jsonl"
OUT = ROOT / "benchmarks"
MARKER = re.compile(r"\[\d+\]")


def load(path: Path) -> list[dict]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    out = []
    for r in rows:
        cited = set(r["cited_markers"])
        ev = [e["text"] for e in r["evidence"] if e.get("text") and e["marker"] in cited]
        if cited and ev:
            out.append({"id": r["claim_id"], "claim": MARKER.sub("", r["claim"]).strip(), "evidence": ev,
                        "support": r["support"], "system": r["system"]})
    return out


def baseline(claim: str, evidence: list[str]) -> float:
    """Issue anchor: best 3-sentence window by fraction of the claim's stemmed content words it contains."""
    ct = set(content_terms(claim))
    if not ct:
        return 0.0
    best = 0.0
    for text in evidence:
        ss = sentences(text)
        for i in range(max(1, len(ss) - 2)):
            best = max(best, len(ct & set(content_terms(" ".join(ss[i:i + 3])))) / len(ct))
    return best


def auroc(scores, labels) -> float:
    """Mann–Whitney AUROC with average ranks for ties (no sklearn/scipy needed)."""
    s, y = np.asarray(scores, float), np.asarray(labels, bool)
    order = np.argsort(s, kind="mergesort")
    ranks = np.empty(len(s))
    sorted_s = s[order]
    i = 0
    while i < len(s):
        j = i
        while j + 1 < len(s) and sorted_s[j + 1] == sorted_s[i]:
            j += 1
        ranks[order[i:j + 1]] = (i + j) / 2 + 1
        i = j + 1
    n1, n0 = y.sum(), (~y).sum()
    return float((ranks[y].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))


def balanced_accuracy(pred, labels) -> float:
    p, y = np.asarray(pred, bool), np.asarray(labels, bool)
    return float(((p & y).sum() / y.sum() + (~p & ~y).sum() / (~y).sum()) / 2)


def best_threshold_ba(scores, labels) -> tuple[float, float]:
    s = np.asarray(scores, float)
    best = (0.0, 0.0)
    for t in np.unique(s):
        ba = balanced_accuracy(s >= t, labels)
        if ba > best[0]:
            best = (ba, float(t))
    return best


def tasks(rows):
    a = [r["support"] == "Complete" for r in rows]
    b_idx = [i for i, r in enumerate(rows) if r["support"] in ("Complete", "Missing", "Incomplete")]
    return a, b_idx


def evaluate(name, scores, supported, rows):
    a, b_idx = tasks(rows)
    sb = [scores[i] for i in b_idx]
    yb = [a[i] for i in b_idx]
    out = {"judge": name,
           "auroc_rest": auroc(scores, a), "auroc_inc": auroc(sb, yb),
           "ba_rest": balanced_accuracy(supported, a) if supported is not None else None,
           "ba_inc": balanced_accuracy([supported[i] for i in b_idx], yb) if supported is not None else None}
    out["ba_rest_best"], out["thr_rest"] = best_threshold_ba(scores, a)
    out["ba_inc_best"], out["thr_inc"] = best_threshold_ba(sb, yb)
    return out


def calibration(results: dict[str, list[float]], rows, bins: int = 10):
    y = np.array([r["support"] == "Complete" for r in rows], float)
    table = []
    for name, scores in results.items():
        s = np.clip(np.asarray(scores, float), 0, 1)
        idx = np.minimum((s * bins).astype(int), bins - 1)
        for b in range(bins):
            m = idx == b
            if m.any():
                table.append({"judge": name, "bin_low": b / bins, "bin_high": (b + 1) / bins, "n": int(m.sum()),
                              "mean_score": float(s[m].mean()), "frac_complete": float(y[m].mean())})
    return table


def save_plot(table, path_png: Path) -> str:
    """Plotly calibration plot as PNG via kaleido 0.2.1's bundled renderer; else HTML. Returns what was written."""
    import plotly.graph_objects as go
    import plotly

    fig = go.Figure()
    fig.add_trace(go.Scatter(x=[0, 1], y=[0, 1], mode="lines", line={"dash": "dot", "color": "gray"},
                             name="perfect calibration"))
    for name in dict.fromkeys(t["judge"] for t in table):
        pts = [t for t in table if t["judge"] == name]
        fig.add_trace(go.Scatter(x=[p["mean_score"] for p in pts], y=[p["frac_complete"] for p in pts],
                                 mode="lines+markers", name=name,
                                 text=[f"n={p['n']}" for p in pts], marker={"size": [4 + p["n"] ** 0.5 for p in pts]}))
    fig.update_layout(title="ExpertQA (1,765 cited claims): judge score vs share labelled Complete",
                      xaxis_title="judge score (bin mean, 10 bins)", yaxis_title="fraction Complete",
                      xaxis_range=[0, 1], yaxis_range=[0, 1], width=800, height=550)
    try:
        # plotly ≥ 6.1 only exports through kaleido ≥ 1, which needs a Chrome install; kaleido 0.2.1 bundles
        # its own renderer, so call it directly with plotly.py's own plotly.js (works offline).
        from kaleido.scopes.plotly import PlotlyScope

        js = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
        scope = PlotlyScope(plotlyjs=str(js), mathjax=False)
        path_png.write_bytes(scope.transform(json.loads(fig.to_json()), format="png", width=800, height=550))
        return str(path_png)
    except Exception as exc:  # no static export possible: keep an interactive HTML (the CSV is written anyway)
        html = path_png.with_suffix(".html")
        fig.write_html(str(html), include_plotlyjs=True)
        return f"{html} (PNG export failed: {exc})"


def cold_caches() -> None:
    """Every timed pass starts cold: repeated passes must not be served from the term cache."""
    from workbench.text import _content_terms

    _content_terms.cache_clear()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--judges", default="lexical,embedding,hybrid,llm")
    ap.add_argument("--provider", default=os.environ.get("WORKBENCH_JUDGE_PROVIDER"))
    ap.add_argument("--model", default=os.environ.get("WORKBENCH_JUDGE_MODEL"))
    ap.add_argument("--repeats", type=int, default=3, help="timing repeats (median reported)")
    ap.add_argument("--limit", type=int, help="only the first N claims (smoke runs)")
    args = ap.parse_args(argv)
    if not DATA.exists():
        print(f"SKIP: ExpertQA data not found at {DATA} (set WORKBENCH_BENCHMARK_DATA; by default "
              "../shared/data)", file=sys.stderr)
        return 2
    rows = load(DATA)[: args.limit] if args.limit else load(DATA)
    print(f"claims with cited text: {len(rows)}")
    items = [(r["claim"], r["evidence"]) for r in rows]

    results, scores_by, not_run = [], {}, []
    timings = []
    for _ in range(args.repeats):
        cold_caches()
        t0 = time.perf_counter()
        base = [baseline(c, ev) for c, ev in items]
        timings.append(time.perf_counter() - t0)
    res = evaluate("baseline (best 3-sentence window, fraction of content words)", base, None, rows)
    res["claims_per_s"] = len(rows) / statistics.median(timings)
    results.append(res)
    scores_by["baseline"] = base

    for name in [n.strip() for n in args.judges.split(",") if n.strip()]:
        if name == "llm" and not args.provider:
            not_run.append(("llm", "no provider configured (pass --provider/--model or set "
                                   "WORKBENCH_JUDGE_PROVIDER); none is reachable on this machine"))
            continue
        judge = get_judge(name, **({"provider": args.provider, "model": args.model} if name == "llm" else {}))
        if name in ("embedding", "hybrid"):
            judge.judge_many(items[:2])  # load the model outside the timing
        timings = []
        for rep in range(args.repeats if name != "llm" else 1):
            cold_caches()
            t0 = time.perf_counter()
            js = judge.judge_many(items)
            timings.append(time.perf_counter() - t0)
        unknown = sum(j.score is None for j in js)
        scores = [0.0 if j.score is None else j.score for j in js]
        res = evaluate(name, scores, [j.verdict == "supported" for j in js], rows)
        res["claims_per_s"] = len(rows) / statistics.median(timings)
        res["unknown"] = unknown
        results.append(res)
        scores_by[name] = scores

    print()
    print("| judge | AUROC Complete vs rest | AUROC Complete vs Incomplete | BA vs rest (verdict / best thr.) "
          "| BA vs Incomplete (verdict / best thr.) | claims/s (median of runs) |")
    print("|---|---|---|---|---|---|")
    for r in results:
        va = "—" if r["ba_rest"] is None else f"{r['ba_rest']:.3f}"
        vb = "—" if r["ba_inc"] is None else f"{r['ba_inc']:.3f}"
        print(f"| {r['judge']} | {r['auroc_rest']:.3f} | {r['auroc_inc']:.3f} | {va} / {r['ba_rest_best']:.3f} "
              f"(≥{r['thr_rest']:.2f}) | {vb} / {r['ba_inc_best']:.3f} (≥{r['thr_inc']:.2f}) | {r['claims_per_s']:.0f} |")
    for name, why in not_run:
        print(f"| {name} | not run: {why} | | | | |")

    table = calibration(scores_by, rows)
    csv_path = OUT / "faithfulness_calibration.csv"
    with csv_path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(table[0]))
        w.writeheader()
        w.writerows(table)
    print(f"\ncalibration bins: {csv_path}")
    print(f"calibration plot: {save_plot(table, OUT / 'faithfulness_calibration.png')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
