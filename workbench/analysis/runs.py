"""Batches across configurations in the trace store: runs, set sizes, verdicts. Scoring them against their
questions' expectations (the naive, honest and load-bearing rows against gold) is `analysis.experiments`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable, Sequence

import pandas as pd

from ..config import DEFAULT_K, DEFAULT_MODE, DEFAULT_PROVIDER, DEFAULT_RETRIEVER, DEMO_CORPUS, PROJECT_ROOT
from ..corpus import Corpus, load_corpus
from ..questions import dataset_of
from .inputs import load_questions

def run_question_set(questions: Sequence[dict[str, Any] | str], *, corpus: Any, db: str | Path,
                     retrievers: Iterable[str] = (DEFAULT_RETRIEVER,), providers: Iterable[str] = (DEFAULT_PROVIDER,),
                     mode: str = DEFAULT_MODE, k: int = DEFAULT_K, options: dict[str, Any] | None = None,
                     new_run: bool = False, provider_options: dict[str, dict[str, Any]] | None = None,
                     verify: bool = False, dataset_name: str = "questions") -> pd.DataFrame:
    """Ask every question under each retriever × provider, one `eval` run each, into the trace store at `db`.

    `options` are provider options given to every provider (e.g. the offline provider's `{"faults":
    ["corrupt_id"]}`), so use them with the providers that take them; `provider_options` maps a
    provider name to options only it gets, over `options` (e.g. `{"llamacpp": {"max_tokens": 96}}`
    beside `offline`, which takes no `max_tokens`). `verify` verifies every answer by ablation (`eval
    --verify`). Each run is recorded as an experiment of the questions (dataset `dataset_name`), scored by
    `workbench.trace.scoring` (docs/experiments.md). Re-running with the same inputs resumes (and so skips)
    the runs already complete, as `workbench eval` does. Returns one row per run.
    """
    from ..batch import run_eval
    from ..session import Session
    from ..trace.experiments import experiment_config, record_experiment

    dataset = dataset_of(dataset_name, [{"question": q} if isinstance(q, str) else q for q in questions])
    corpus = corpus if isinstance(corpus, Corpus) else load_corpus(corpus)
    rows = []
    for retriever in retrievers:
        session = Session.open(corpus, retriever, trace_db=db)
        for provider in providers:
            given = {**(options or {}), **(provider_options or {}).get(provider, {})}
            r = run_eval(session, dataset.questions, provider=provider, mode=mode, k=k, options=given, new_run=new_run,
                         progress=False, verify=verify)
            record_experiment(session.tracer, r.run_id, dataset, config=experiment_config(
                provider, given, retriever=retriever, mode=mode, k=k, verify=verify, corpus_id=corpus.corpus_id,
                corpus_hash=corpus.content_hash))
            rows.append({"run_id": r.run_id, "provider": provider, "retriever": retriever, "mode": mode, "k": k,
                         "options": json.dumps(given, sort_keys=True), "asked": r.asked, "skipped": r.skipped,
                         "failed": r.failed, "seconds": round(r.seconds, 2)})
    return pd.DataFrame(rows)


def seed_demo_traces(db: str | Path, *, corpus: Any = None, retriever: str = DEFAULT_RETRIEVER, provider: str = DEFAULT_PROVIDER,
                     mode: str = DEFAULT_MODE) -> pd.DataFrame:
    """Something to analyse: the demo gold set asked cleanly, then again with the offline `corrupt_id`
    fault so there are rejected citations (both resumed, not repeated, on a second call)."""
    questions = load_questions(PROJECT_ROOT / "data" / "demo_gold.jsonl")
    corpus = corpus or DEMO_CORPUS
    return pd.concat([
        run_question_set(questions, corpus=corpus, db=db, retrievers=[retriever], providers=[provider], mode=mode),
        run_question_set(questions, corpus=corpus, db=db, retrievers=[retriever], providers=["offline"], mode=mode,
                         options={"faults": ["corrupt_id"]}),
    ], ignore_index=True)


def _reader(db: str | Path):
    from ..trace import TraceReader

    return TraceReader(db)


def _in_list(run_ids: Sequence[str]) -> tuple[str, list[str]]:
    ids = list(run_ids)
    return ", ".join("?" for _ in ids) or "NULL", ids


def set_sizes(db: str | Path, run_ids: Sequence[str]) -> pd.DataFrame:
    """Per turn of the given runs: configuration — provider, model, retriever, mode, k and the provider options
    (`faults` included), so a faulty run is never one with a clean one — and the sizes of the three sets (the
    `turn_sets` view)."""
    from ..trace.experiments import RUN_OPTIONS_SQL

    marks, ids = _in_list(run_ids)
    return _reader(db).df(
        f"SELECT s.run_id, s.provider, s.model, s.retriever, s.mode, r.k, {RUN_OPTIONS_SQL} AS options, s.question, "
        "s.question_kind, s.status, s.n_retrieved AS retrieved, s.n_cited AS cited, s.n_consulted AS consulted, "
        f"s.n_rejected AS rejected FROM turn_sets s JOIN runs r USING (run_id) WHERE s.run_id IN ({marks}) "
        "ORDER BY s.started_at", ids)


def verdict_counts(db: str | Path, run_ids: Sequence[str]) -> pd.DataFrame:
    """Per run, over its turns verified by ablation (latest verification each): the verdicts, the share of
    consulted documents that are load-bearing and the hidden-influence rate (the `source_verdicts` view)."""
    marks, ids = _in_list(run_ids)
    return _reader(db).df(
        "SELECT t.run_id, r.provider, r.retriever, r.mode, "
        "count(DISTINCT s.turn_id) FILTER (WHERE s.verified) AS \"verified turns\", "
        "count(DISTINCT s.turn_id) FILTER (WHERE s.control_stable) AS \"stable controls\", "
        "count(*) FILTER (WHERE s.consulted AND s.verified) AS consulted, "
        + ", ".join(f"count(*) FILTER (WHERE s.verdict = '{v}') AS \"{v.replace('_', ' ')}\""
                    for v in ("load_bearing", "decorative", "hidden_influence", "no_effect", "unstable")) + ", "
        "round(count(*) FILTER (WHERE s.consulted AND s.verdict = 'load_bearing') / nullif(count(*) FILTER "
        "(WHERE s.consulted AND s.verdict IN ('load_bearing', 'decorative')), 0), 3) AS \"load-bearing share\", "
        "round(count(*) FILTER (WHERE s.verdict = 'hidden_influence') / nullif(count(*) FILTER "
        "(WHERE s.verdict IN ('hidden_influence', 'no_effect')), 0), 3) AS \"hidden-influence rate\" "
        "FROM source_verdicts s JOIN turns t USING (turn_id) JOIN runs r USING (run_id) "
        f"WHERE t.run_id IN ({marks}) GROUP BY ALL ORDER BY r.provider, r.retriever", ids)
