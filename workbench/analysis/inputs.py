"""Locating a notebook's inputs: its trace database, the question set, configured providers; display set-up."""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from IPython.display import HTML, display

from ..config import DB_ENV, DEMO_CORPUS, PROJECT_ROOT, Settings, benchmark_data_dir, environment
from ..errors import WorkbenchError
from ..providers import declared, provider_names, readiness
from ..questions import read_questions

def notebook_db(name: str, settings: Settings | None = None) -> Path:
    """The trace database a notebook writes to: `$WORKBENCH_DB`, else `<WORKBENCH_HOME>/notebooks/<name>.duckdb`
    (`settings` default: the environment now, the notebook being the edge)."""
    settings = Settings.given(settings)
    return settings.trace_db if settings.get(DB_ENV) else settings.notebook_db(name)


def export_dir(given: str | Path | None, name: str, settings: Settings | None = None) -> Path:
    """Where a notebook exports Parquet: `given`, else `<WORKBENCH_HOME>/notebooks/<name>.parquet`, the notebooks'
    own folder, whichever database it read (never beside the app's trace database)."""
    if given:
        return Path(given).expanduser()
    return Settings.given(settings).notebook_db(name).with_suffix(".parquet")


def analysis_db(demo: bool, trace_db: str | Path | None, name: str, settings: Settings | None = None) -> Path:
    """The database an analysis notebook reads: `trace_db` when given; else, with `demo`, a database of the
    notebook's own (`<WORKBENCH_HOME>/notebooks/<name>.duckdb`, never the app's, so demo data stays out of it);
    else the app's and the CLI's trace database (`$WORKBENCH_DB`, else `<WORKBENCH_HOME>/traces.duckdb`)."""
    if trace_db:
        return Path(trace_db).expanduser()
    settings = Settings.given(settings)
    return settings.notebook_db(name) if demo else settings.trace_db


def require_traces(db: str | Path) -> str:
    """`db` in words, with its number of turns, if it holds any; else a `WorkbenchError` saying what to do."""
    from ..trace import query_df

    from ..trace.lake import store_exists

    if not store_exists(db):  # a file that is there, or a team store (WORKBENCH_DB=ducklake:postgres:…) migrated
        raise WorkbenchError(f"no trace database at {db} yet: ask something in the app or with "
                             "`python -m workbench ask`, point TRACE_DB at your traces, or set DEMO = True")
    turns = int(query_df("SELECT count(*) AS n FROM turns", db)["n"][0])
    if not turns:
        raise WorkbenchError(f"{db} holds no turns yet: ask something in the app or with `python -m workbench ask`, "
                             "or set DEMO = True")
    return f"{db}: {turns} turns"


@dataclass(frozen=True)
class QuestionSet:
    """A corpus and questions with gold (expected) document ids."""

    name: str
    corpus: Path
    questions: Path


def question_set(data: Path | None = None) -> QuestionSet:
    """The Arduino Help Center set when the optional benchmark data (`data`, default
    `config.benchmark_data_dir()`) holds its corpus, else the small demo gold set in `data/`."""
    corpus = (data or benchmark_data_dir()) / "arduino-help-center" / "corpus.jsonl"
    questions = PROJECT_ROOT / "benchmarks" / "arduino_questions.jsonl"
    if corpus.exists() and questions.exists():
        return QuestionSet("arduino", corpus, questions)
    return QuestionSet("demo", DEMO_CORPUS, PROJECT_ROOT / "data" / "demo_gold.jsonl")


def load_questions(path: str | Path, limit: int | None = None) -> list[dict[str, Any]]:
    """Question lines `{"question", "expected": [doc ids], "kind"?}` and the other expectations a line gives
    (docs/experiments.md), read by `questions.read_questions` as the CLI reads them; kind defaults to substantive."""

    rows = [{"question": q.text, "expected": list(q.expected), "kind": q.kind or "substantive", "id": q.id,
             **({"expect_no_sources": True} if q.expect_no_sources else {}),
             **{k: list(getattr(q, k)) for k in ("must_cite", "must_not_cite", "tags") if getattr(q, k)}}
            for q in read_questions(path)]
    return rows[:limit] if limit else rows


def configured_providers(env: dict[str, str] | None = None) -> list[str]:
    """Every registered provider that says it can run with `env` (default: the process environment),
    through its `is_configured`: `offline` always, `ollama` with OLLAMA_HOST, `gemini` with its key,
    `openai` with OPENAI_BASE_URL or its key, … Providers that declare `batch_by_default = False` (the
    in-process `llamacpp` model: far slower on a CPU than a batch over every retriever wants) are left
    out; name them explicitly, as notebook 02 does on a few questions."""

    return [name for name in provider_names() if declared(name, "batch_by_default")
            and readiness(name, environment() if env is None else env)]


#: The plotly renderer of the notebooks (`setup_notebook`).
NOTEBOOK_RENDERER = "workbench"


def setup_notebook() -> str:
    """Notebook display settings; returns the plotly renderer.

    Figures render as Plotly's own MIME type, which JupyterLab, Notebook 7 and VS Code draw with the plotly.js they
    bundle, and as HTML beside it, which is what an HTML export (`jupyter nbconvert --to html`) shows: that HTML needs
    no require.js and no CDN, because this call puts plotly.js itself in the notebook once, as the set-up cell's
    output (plotly.js ends with `window.Plotly = Plotly`, so it works with require.js on the page or without).
    Nothing is fetched from a CDN, when executed, opened or exported. tqdm's "IProgress not found" warning is
    silenced: notebooks show no progress bars, so they need no ipywidgets.
    """

    import plotly.io as pio
    from plotly.io.base_renderers import MimetypeRenderer
    from plotly.offline import get_plotlyjs

    class Embedded(MimetypeRenderer):
        """Plotly's MIME type, and the figure as HTML that draws with the plotly.js embedded once."""

        def to_mimebundle(self, fig_dict):
            html = pio.to_html(fig_dict, include_plotlyjs=False, full_html=False, validate=False)
            return {**pio.renderers["plotly_mimetype"].to_mimebundle(fig_dict), "text/html": html}

    warnings.filterwarnings("ignore", message="IProgress not found")
    pio.renderers[NOTEBOOK_RENDERER] = Embedded()
    pio.renderers.default = NOTEBOOK_RENDERER
    display(HTML(f'<script type="text/javascript">{get_plotlyjs()}</script>'))
    return pio.renderers.default
