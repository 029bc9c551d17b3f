"""A real model beside the offline agent, in the same run: speed, steps and what its sources rows are worth.

For each question set — the demo gold set (`data/demo_gold.jsonl` over `data/demo`) and the Arduino
questions (`benchmarks/arduino_questions.jsonl` over `arduino-help-center/corpus.jsonl` in
`$WORKBENCH_BENCHMARK_DATA`, default ../shared/data; skipped when absent) — every question is answered
by the offline agent and by each model: the CI model (SmolLM2-135M-Instruct through `llamacpp`) and any
GGUF passed with `--gguf`. Reported per model:

- prompt and generation tokens/s (llama.cpp's own timings, summed over every model call);
- turn latency p50 / p90, model calls (steps) per turn, turn statuses;
- rejected (fabricated) citations: their share of all citations, and the share of turns with any;
- consulted-set size, and consulted precision against gold (over non-empty rows; counting an empty
  row as 0 beside it) and recall, with the naive "everything retrieved" row as the anchor.

Then the provider's overhead over bare xllamacpp: the same schema-forced request sent by
`LlamaCppProvider.complete_json` and straight to `Server.handle_chat_completions`, alternating, on
the same loaded model (target ≤ 5 %).

    .venv/bin/python benchmarks/real_model.py [--gguf PATH.gguf ...] [--limit N] [--sets demo,arduino]
        [--mode agent|excerpts] [-k 3] [--max-tokens 256] [--overhead-runs 12]

Timings depend on the machine's load (other processes share its cores): compare models within one run.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from workbench.agent import run_turn  # noqa: E402
from workbench.config import benchmark_data_dir  # noqa: E402
from workbench.provenance import sources_payload  # noqa: E402
from workbench.providers import get_provider  # noqa: E402
from workbench.providers import llamacpp  # noqa: E402
from workbench.providers.openai_format import json_request  # noqa: E402
from workbench.providers.steps import action_schema, to_step_messages  # noqa: E402
from workbench.prompts import AGENT_PROMPT_VERSION, PROMPTS  # noqa: E402
from workbench.session import Session  # noqa: E402

SETS = {
    "demo": (ROOT / "data" / "demo", ROOT / "data" / "demo_gold.jsonl"),
    "arduino": (benchmark_data_dir() / "arduino-help-center" / "corpus.jsonl",
                ROOT / "benchmarks" / "arduino_questions.jsonl"),
}


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def gold_scores(rows: list[tuple[list[str], set[str]]]) -> tuple[float | None, float, float]:
    """(precision over non-empty rows, precision with empty rows as 0, recall)."""
    precisions, recalls = [], []
    for row, gold in rows:
        hits = len(set(row) & gold)
        precisions.append(hits / len(row) if row else None)
        recalls.append(hits / len(gold))
    answered = [p for p in precisions if p is not None]
    return (statistics.mean(answered) if answered else None, sum(answered) / len(rows), statistics.mean(recalls))


def run_config(label: str, provider_name: str, options: dict, toolbox, questions, args) -> dict:
    latencies, steps, statuses, consulted, naive = [], [], {}, [], []
    citations = rejected = turns_rejected = 0
    provider = get_provider(provider_name, **options)
    if provider_name == "llamacpp":
        provider.loaded()  # load before the clock: load time is reported separately
    for q in questions:
        start = time.perf_counter()
        record = run_turn(q["question"], provider, toolbox, mode=args.mode, k=args.k)
        latencies.append((time.perf_counter() - start) * 1000)
        payload = sources_payload(record)
        steps.append(len(record.model_calls))
        statuses[record.status] = statuses.get(record.status, 0) + 1
        n_cit = len(payload.citations)
        n_rej = sum(1 for c in payload.citations if not c.valid)
        citations, rejected, turns_rejected = citations + n_cit, rejected + n_rej, turns_rejected + (n_rej > 0)
        gold = set(q.get("expected") or [])
        if gold and q.get("kind", "substantive") == "substantive":
            consulted.append((list(payload.sets.consulted), gold))
            naive.append((list(payload.sets.retrieved), gold))
        if args.verbose:
            print(f"    {record.status:<16} {latencies[-1]:8.0f} ms  steps {steps[-1]}  "
                  f"tools {[t.name for t in record.tool_calls]}  consulted {list(payload.sets.consulted)}")
    timings = getattr(provider, "timings", []) or []
    prompt_n = sum(t.get("prompt_n", 0) for t in timings)
    prompt_ms = sum(t.get("prompt_ms", 0.0) for t in timings)
    gen_n = sum(t.get("predicted_n", 0) for t in timings)
    gen_ms = sum(t.get("predicted_ms", 0.0) for t in timings)
    c_prec, c_strict, c_rec = gold_scores(consulted)
    n_prec, _, n_rec = gold_scores(naive)
    return {"config": label, "turns": len(questions), "statuses": statuses,
            "prompt tok/s": round(prompt_n / prompt_ms * 1000, 1) if prompt_ms else None,
            "gen tok/s": round(gen_n / gen_ms * 1000, 1) if gen_ms else None,
            "p50 ms": round(pct(latencies, 0.5)), "p90 ms": round(pct(latencies, 0.9)),
            "steps/turn": round(statistics.mean(steps), 2),
            "rejected share": round(rejected / citations, 3) if citations else None, "citations": citations,
            "turns w/ rejected": round(turns_rejected / len(questions), 3),
            "consulted size": round(statistics.mean(len(r) for r, _ in consulted), 2) if consulted else None,
            "consulted P": None if c_prec is None else round(c_prec, 3), "consulted P (empty=0)": round(c_strict, 3),
            "consulted R": round(c_rec, 3), "naive P": None if n_prec is None else round(n_prec, 3),
            "naive R": round(n_rec, 3)}


def overhead(gguf: str | None, toolbox, args) -> None:
    """Provider vs bare xllamacpp on the same schema-forced request, alternating, same loaded model."""
    provider = get_provider("llamacpp", model=gguf, max_tokens=args.overhead_tokens)
    model = provider.loaded()
    messages = to_step_messages([{"role": "system", "content": PROMPTS[AGENT_PROMPT_VERSION]},
                                 {"role": "user", "content": "How do I reset my password?"}], toolbox.specs())
    schema = action_schema(toolbox.specs(), answer=False)
    bare_request = {**json_request(messages, schema), "max_tokens": args.overhead_tokens, "temperature": 0.0}
    inner: list[float] = []
    server = model.server

    class Timed:  # the provider's own call into llama.cpp, timed, to split its time into llama.cpp + the rest
        def handle_chat_completions(self, request):
            t0 = time.perf_counter()
            try:
                return server.handle_chat_completions(request)
            finally:
                inner.append((time.perf_counter() - t0) * 1000)

    bare, wrapped, added = [], [], []
    for i in range(args.overhead_runs + 1):
        t = time.perf_counter()
        server.handle_chat_completions(json.loads(json.dumps(bare_request)))
        b = (time.perf_counter() - t) * 1000
        object.__setattr__(model, "server", Timed())
        try:
            t = time.perf_counter()
            provider.complete_json(messages, schema)
            w = (time.perf_counter() - t) * 1000
        finally:
            object.__setattr__(model, "server", server)
        if i:  # the first pair warms the prompt cache
            bare.append(b), wrapped.append(w), added.append(w - inner[-1])
    mb, mw, ma = statistics.median(bare), statistics.median(wrapped), statistics.median(added)
    print(f"\nprovider overhead over bare xllamacpp, {Path(model.path).name}, same schema-forced request "
          f"(≤ {args.overhead_tokens} tokens out), {args.overhead_runs} alternating pairs:")
    print(f"  bare handle_chat_completions median {mb:.1f} ms · LlamaCppProvider.complete_json median {mw:.1f} ms "
          f"({(mw - mb) / mb * 100:+.1f} %, load noise included)")
    print(f"  time the provider adds around llama.cpp (translation, parsing, ModelStep): median {ma:.3f} ms = "
          f"{ma / mb * 100:.3f} % of the bare call (target ≤ 5 %)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gguf", action="append", default=[], help="another GGUF to run beside the CI model")
    ap.add_argument("--sets", default="demo,arduino")
    ap.add_argument("--limit", type=int, default=None, help="only the first N questions of each set")
    ap.add_argument("--mode", default="agent", choices=["agent", "excerpts"])
    ap.add_argument("-k", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--overhead-runs", type=int, default=12)
    ap.add_argument("--overhead-tokens", type=int, default=16)
    ap.add_argument("--no-ci-model", action="store_true", help="only the --gguf models")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()

    models = ([] if args.no_ci_model else [None]) + args.gguf
    t = time.perf_counter()
    loaded = [llamacpp.load(m) for m in models]
    print(f"loaded {', '.join(Path(m.path).name for m in loaded)} in {time.perf_counter() - t:.2f} s "
          f"(threads {loaded[0].threads if loaded else '-'}, n_ctx {loaded[0].n_ctx if loaded else '-'}); "
          f"mode {args.mode}, k {args.k}, max_tokens {args.max_tokens}")
    toolbox = None
    for name in args.sets.split(","):
        corpus, qfile = SETS[name]
        if not corpus.exists():
            print(f"\nSKIP {name}: {corpus} is absent (set WORKBENCH_BENCHMARK_DATA, default ../shared/data)")
            continue
        questions = [json.loads(line) for line in qfile.read_text(encoding="utf-8").splitlines() if line.strip()]
        questions = questions[:args.limit] if args.limit else questions
        toolbox = Session.open(corpus, "bm25", trace=False).toolbox
        toolbox.retriever.retrieve("warm up", 3)
        print(f"\n== {name}: {len(questions)} questions, corpus {corpus.name}")
        results = [run_config("offline (no LLM)", "offline", {}, toolbox, questions, args)]
        for m in models:
            label = Path(m).name if m else "CI model " + Path(llamacpp.default_gguf()).name
            if args.verbose:
                print(f"  {label}")
            results.append(run_config(label, "llamacpp", {"model": m, "max_tokens": args.max_tokens}, toolbox,
                                      questions, args))
        for r in results:
            print("  " + " · ".join(f"{k} {v}" for k, v in r.items()))
    if loaded and toolbox is not None:
        for m in models:
            overhead(m, toolbox, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
