"""Experiments in the trace store (docs/experiments.md): datasets, their expectations, named runs.

An `eval` of a questions file records, when the run ends, the file as a dataset (its name and content
hash; its expectations one row per line, stored once per dataset) and an `experiments` row tying the run
to it with its optional name (unique), tags and whole configuration (secrets redacted as everywhere:
`redact.redact_config`). The scoring over them is `scoring.py`; the tables are migration m011 (`schema_m011.py`), the
`expectation_results` view m011's as m021 and m023 replaced it (`schema_m023.py` writes it out as it is now).
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Mapping, Sequence

from ..errors import WorkbenchError
from ..providers import declared
from ..questions import Dataset
from ..redact import recorded, redact_config
from .audits import AUDIT_KIND
from .reader import TraceReader, as_reader
from .rows import to_json
from .lake import store_exists


class ExperimentError(WorkbenchError):
    """A run name taken or unknown, or a baseline that cannot be compared."""


def dataset_id(dataset: Dataset) -> str:
    return hashlib.sha256(f"{dataset.name}\0{dataset.content_hash}".encode()).hexdigest()[:32]


def _expectation_rows(did: str, dataset: Dataset) -> list[tuple]:
    rows = []
    for q in dataset.questions:
        qid = None if q.id is None else q.id if isinstance(q.id, str) else json.dumps(q.id, ensure_ascii=False)
        # the line's conversation has no column of its own (yet): kept with its other fields, as before it was read
        extra = {**q.extra, "conversation": q.conversation} if q.conversation is not None else q.extra
        rows.append((did, q.line, qid, q.text, q.kind, list(q.expected), q.expect_no_sources, list(q.must_cite),
                     list(q.must_not_cite), list(q.tags), to_json(extra) if extra else None))
    return rows


def record_experiment(writer, run_id: str, dataset: Dataset, *, name: str | None = None,
                      tags: Mapping[str, str] | None = None, config: Mapping[str, Any] | None = None,
                      lines: Sequence[tuple[int, str]] = ()) -> None:
    """Tie `run_id` to `dataset` (stored with its expectations when new) under `name`, in one transaction of
    `writer` (a `TraceWriter`), with `lines` ((line, turn_id): the line each turn answered, `turn_lines`, when
    the turns were not written with it: an audited run's matched turns). A run already recorded keeps its row
    (a resumed run); a name another run holds raises `ExperimentError`."""
    import duckdb

    did = dataset_id(dataset)
    now = datetime.now(timezone.utc)
    with writer.connect() as con:
        con.execute("BEGIN")
        try:
            have = con.execute("SELECT name FROM experiments WHERE run_id = ?", [run_id]).fetchone()
            if have is not None:
                con.execute("ROLLBACK")
                if name is not None and have[0] != name:
                    raise ExperimentError(f"run {run_id} is already recorded as {have[0] or '(unnamed)'!r}, "
                                          f"not {name!r}")
                return
            if con.execute("SELECT 1 FROM datasets WHERE dataset_id = ?", [did]).fetchone() is None:
                con.execute("INSERT INTO datasets VALUES (?, ?, ?, ?, ?)",
                            [did, dataset.name, dataset.content_hash, len(dataset.questions), now])
                con.executemany("INSERT INTO expectations VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                                _expectation_rows(did, dataset))
            con.execute("INSERT INTO experiments VALUES (?, ?, ?, ?, ?, ?)",
                        [run_id, name, did, to_json(dict(tags or {})), to_json(redact_config(dict(config or {}))), now])
            if lines:  # one statement, the columns as lists (row-by-row executemany: ~1 ms a row)
                con.execute("INSERT INTO turn_lines (turn_id, run_id, line) SELECT unnest(?::VARCHAR[]), ?, "
                            "unnest(?::INTEGER[])", [[t for _, t in lines], run_id, [n for n, _ in lines]])
            if name is not None:  # a named run is frozen: an unnamed eval of the same batch never resumes it
                con.execute("UPDATE runs SET run_key = run_key || ' @' || ? WHERE run_id = ? AND run_key IS NOT NULL",
                            [name, run_id])
            con.execute("COMMIT")
        except duckdb.ConstraintException:
            con.execute("ROLLBACK")
            raise ExperimentError(f"the run name {name!r} is already taken; pick another name") from None
        except BaseException:
            try:
                con.execute("ROLLBACK")
            except duckdb.Error:
                pass
            raise


def experiment_config(provider: str, options: Mapping[str, Any] | None, **fields: Any) -> dict[str, Any]:
    """A run's whole configuration for its `experiments` row: `fields` (retriever, mode, k, …) plus the provider
    and the options worth recording (`redact.recorded`: secret options never are)."""

    return {"provider": provider, "options": recorded(declared(provider, "options_schema"), dict(options or {})),
            **fields}


def has_experiments(reader: TraceReader) -> bool:
    """Whether the trace database has the experiment tables (migration m011); False when it does not exist yet."""
    if not store_exists(reader.path):
        return False
    reader.check()
    return reader.schema.has("experiments")


def named_run(db: str | Path | TraceReader, name: str) -> str | None:
    """The run that holds `name`, or None (also when the database or its experiments table does not exist yet)."""
    reader = as_reader(db)
    if not has_experiments(reader):
        return None
    _, rows = reader.rows("SELECT run_id FROM experiments WHERE name = ?", [name])
    return rows[0][0] if rows else None


def check_name_free(db: str | Path, name: str, resuming: str | None = None) -> None:
    """Refuse a run name another run holds (`resuming`: the run id being resumed, which may hold it)."""
    owner = named_run(db, name)
    if owner is not None and owner != resuming:
        raise ExperimentError(f"the run name {name!r} is already taken by run {owner} in {db}; pick another name "
                              f"(or resume run {owner} to finish that run if it was interrupted)")


def parse_tags(items: list[str]) -> dict[str, str]:
    """`--tag k=v` values as a dict; a malformed one raises `ExperimentError` naming it."""
    tags: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ExperimentError(f"tag {item!r}: give a tag as KEY=VALUE, e.g. branch=main")
        tags[key.strip()] = value.strip()
    return tags


#: A run's provider options (`faults` included) from its recorded configuration, as compact JSON text, over `runs r`:
#: what comparisons of configurations group by beside the run's own columns (secrets are never recorded).
RUN_OPTIONS_SQL = "coalesce(json_extract(r.config_json, '$.options'), '{}')::VARCHAR"

#: The columns `runs list` and the app show per experiment run (newest first).
RUNS_SQL = """
SELECT e.name, e.run_id, r.created_at, r.kind, r.provider, r.model, r.retriever, r.mode, r.k,
       json_extract_string(r.config_json, '$.app') AS app, r.corpus_id AS corpus, r.corpus_hash, d.name AS dataset, d.content_hash AS dataset_hash,
       d.questions, e.tags_json, e.config_json
FROM experiments e JOIN runs r USING (run_id) JOIN datasets d USING (dataset_id)
"""


def _run_dict(columns: list[str], row: tuple) -> dict[str, Any]:
    out = dict(zip(columns, row))
    out["tags"] = json.loads(out.pop("tags_json") or "{}")
    out["config"] = json.loads(out.pop("config_json") or "{}")
    return out


def list_runs(db: str | Path | TraceReader) -> list[dict[str, Any]]:
    """Every run recorded as an experiment, newest first, with its corpus, dataset, tags and configuration."""
    reader = as_reader(db)
    if not has_experiments(reader):
        return []
    columns, rows = reader.rows(RUNS_SQL + " ORDER BY r.created_at DESC")
    return [_run_dict(columns, r) for r in rows]


def find_run(db: str | Path | TraceReader, ref: str) -> dict[str, Any]:
    """The experiment run named `ref` (or whose run id is `ref`); `ExperimentError` listing the names otherwise."""
    reader = as_reader(db)
    if has_experiments(reader):
        columns, rows = reader.rows(RUNS_SQL + " WHERE e.name = ? OR e.run_id = ? ORDER BY e.name NULLS LAST",
                                    [ref, ref])
        if rows:
            return _run_dict(columns, rows[0])
        _, names = reader.rows("SELECT name FROM experiments WHERE name IS NOT NULL ORDER BY recorded_at DESC LIMIT 20")
        known = ", ".join(n for (n,) in names) or "none yet"
    else:
        known = "none yet"
    raise ExperimentError(f"no run named {ref!r} in {reader.path} (named runs: {known}; `workbench runs list`)")


def tags_text(tags: Mapping[str, str] | None) -> str:
    """A run's tags as one line, `key=value, key=value` (`runs list`, `runs show`, the app's leaderboard)."""
    return ", ".join(f"{k}={v}" for k, v in (tags or {}).items())


#: A run's own fields among its settings, in column order; its recorded configuration's other fields follow.
RUN_FIELDS = ("provider", "model", "retriever", "mode", "k", "corpus", "corpus_hash", "dataset", "dataset_hash")


def run_settings(run: Mapping[str, Any]) -> dict[str, Any]:
    """What a run was made with, one field each, for the leaderboards' columns: its `RUN_FIELDS`, every other field
    of its recorded configuration, each provider option as `options.NAME` (`faults` too) and each tag as
    `tags.KEY`."""
    out = {key: run.get(key) for key in RUN_FIELDS}
    config = dict(run.get("config") or {})
    options = config.pop("options", None) or {}
    out.update((key, value) for key, value in config.items() if key not in out and key != "corpus_id")
    out.update((f"options.{key}", value) for key, value in sorted(options.items()))
    out.update((f"tags.{key}", value) for key, value in (run.get("tags") or {}).items())
    return out


def differing(settings: list[Mapping[str, Any]]) -> tuple[tuple[str, ...], dict[str, Any]]:
    """The fields whose values differ between the runs' `settings` (a field a run lacks is None in it), in first-seen
    order, and the fields every run shares, with their value."""
    fields = list(dict.fromkeys(key for s in settings for key in s))
    same = {f: len({to_json(s.get(f)) for s in settings}) == 1 for f in fields}
    return tuple(f for f in fields if not same[f]), {f: settings[0].get(f) for f in fields if same[f]}


def tagged(run: Mapping[str, Any], tags: Mapping[str, str]) -> bool:
    """Whether `run` carries every tag of `tags`, each with the same value."""
    have = run.get("tags") or {}
    return all(key in have and have[key] == value for key, value in tags.items())


def run_label(run: Mapping[str, Any]) -> str:
    """A run as one line for pickers and charts: its name (or provider · retriever · mode, and its provider options
    when it has any, so a run with a fault never reads as the clean one; an audit run's audited app and model too),
    corpus and dataset."""
    from .results import setting_text

    what = run.get("name") or " · ".join(str(run.get(k)) for k in ("provider", "retriever", "mode") if run.get(k))
    if run.get("kind") == AUDIT_KIND:  # another app's turns, audited from its spans (docs/audit.md)
        what = f"{what} · audited {run.get('app') or '(no service.name)'}" + (f" · {run['model']}" if run.get("model") else "")
    options = None if run.get("name") else (run.get("config") or {}).get("options")
    parts = [what or "run", f"options {setting_text(options)}" if options else None,
             f"corpus {run['corpus']}" if run.get("corpus") else None,
             f"dataset {run['dataset']}" if run.get("dataset") else None]
    when = run.get("created_at")
    if not run.get("name") and when is not None:
        parts.append(when.strftime("%Y-%m-%d %H:%M") if hasattr(when, "strftime") else str(when))
    if not run.get("name") and run.get("run_id"):
        parts.append(str(run["run_id"])[:8])
    return " · ".join(p for p in parts if p)


def turn_provenance(db: str | Path | TraceReader, turn_id: str) -> dict[str, Any] | None:
    """One turn of an experiment run as the Experiments page links to it: the turn and its run, its documents with
    their membership in the three sets (and verdicts, when verified), its citations. None when no experiment run
    (a run `list_runs` lists) has that turn: a chat's or another command's turn is not opened here, whoever
    knows its id. Its run's `kind` says whether it is audited (`AUDIT_KIND`: for analysts only in the app)."""
    reader = as_reader(db)
    if not has_experiments(reader):
        return None
    columns, rows = reader.rows(
        "SELECT t.turn_id, t.run_id, e.name AS run_name, t.question, t.answer, t.status, t.error, t.started_at, "
        "t.latency_ms, r.kind, r.provider, r.model, r.retriever, r.mode, r.k, r.corpus_id AS corpus "
        "FROM turns t JOIN runs r USING (run_id) JOIN experiments e USING (run_id) "
        "JOIN datasets d USING (dataset_id) WHERE t.turn_id = ?",
        [turn_id])
    if not rows:
        return None
    out = dict(zip(columns, rows[0]))
    out["documents"] = reader.rows(
        "SELECT doc_id, title, retrieved, cited, consulted, exposure, reason, verdict FROM source_verdicts "
        "WHERE turn_id = ? ORDER BY position", [turn_id])
    out["citations"] = reader.rows(
        "SELECT idx, target, doc_id, valid, reason, nearest_doc_id FROM citations WHERE turn_id = ? ORDER BY idx",
        [turn_id])
    return out


def all_runs(db: str | Path | TraceReader) -> list[dict[str, Any]]:
    """Every run, newest first, for run pickers: its configuration, corpus, number of turns and, for an experiment
    run, its name and dataset (NULL otherwise, and on a database written before experiments existed)."""
    reader = as_reader(db)
    known = has_experiments(reader)
    columns, rows = reader.rows(
        "SELECT r.run_id, r.created_at, r.kind, r.provider, r.model, r.retriever, r.mode, r.k, "
        "json_extract_string(r.config_json, '$.app') AS app, r.corpus_id AS corpus, "
        + ("coalesce(e.name, json_extract_string(r.config_json, '$.run')) AS name, d.name AS dataset, " if known
           else "json_extract_string(r.config_json, '$.run') AS name, NULL AS dataset, ")
        + "(SELECT count(*) FROM turns t WHERE t.run_id = r.run_id) AS turns FROM runs r "
        + ("LEFT JOIN experiments e USING (run_id) LEFT JOIN datasets d USING (dataset_id) " if known else "")
        + "ORDER BY r.created_at DESC")
    return [dict(zip(columns, r)) for r in rows]


def run_turns(db: str | Path | TraceReader, run_id: str) -> list[tuple[str, str, str | None]]:
    """(turn_id, question, conversation_id) of every turn of `run_id`, a conversation's turns in position order
    (then start order): what scoring an audited run matches to a questions file's lines."""
    _, rows = as_reader(db).rows("SELECT turn_id, question, conversation_id FROM turns WHERE run_id = ? "
                                 "ORDER BY position NULLS FIRST, started_at, turn_id", [run_id])
    return [tuple(r) for r in rows]


def audited_config(db: str | Path | TraceReader, run_id: str, **fields: Any) -> dict[str, Any]:
    """An audited run's configuration for its `experiments` row: what its `runs` row recorded (the audited app,
    its model, the run's name) plus `fields` (its corpus and questions file)."""
    _, rows = as_reader(db).rows("SELECT config_json FROM runs WHERE run_id = ?", [run_id])
    recorded = json.loads(rows[0][0]) if rows and rows[0][0] else {}
    return {**recorded, **fields}
